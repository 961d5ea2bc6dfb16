/* LayerNorm over the last axis, forward and backward.
 *
 *  kernel1 (levels 1-2): one block per row, two passes (mean, then the sum of
 *           squared deviations) with shared-memory reductions.
 *  kernel2 (level 3):    one warp per row; x is read once into registers when
 *           C <= 128 (else re-read from cache), warp-shuffle reductions.
 * Both compute var = mean((x-mean)^2) (two-pass, no E[x^2]-mean^2 cancellation).
 *
 * Backward: dgamma/dbeta are reduced deterministically without atomics:
 * layernorm_bwd_dparams_kernel1 writes per-chunk column sums into the backend's
 * fixed scratch area, layernorm_bwd_dparams_reduce_kernel1 adds the chunks in
 * order. They run before dx is written, so dx may even alias dout.
 * Level 3 with C <= 128 does all of it in one kernel, layernorm_bwd_kernel2
 * (one warp per row, as layernorm_bwd_dx_kernel2; each lane also sums its
 * channels' dout*xhat and dout over the block's rows in registers, the warps'
 * sums are added in warp order into one partial row per block in the scratch
 * area, and the blocks' rows are added by a fixed-order tree whose last
 * arrivals do the adding). One launch instead of three. A warp reads its
 * whole row before writing its dx, so dx may still alias dout.
 *
 * layernorm2 (ops.h: a module's block norm and its own norm in a row, C <=
 * 128) is one launch each way on the same pattern: the intermediate row stays
 * in registers in the forward and is recomputed in the backward, whose four
 * parameter gradients share one tree.
 *
 * Every kernel is a template over the element types of x / dx (TX) and out /
 * dout (TY) (cuda_half.h): instantiated with floats it is the fp32 kernel,
 * with a half type the same sums on the widened elements, rounded at the
 * store. Rows of 64 and 128 take the vector-row kernels at level 3.
 *
 * Every kernel that writes dx also stores, when dxh is not NULL, each
 * element's final value (after the accumulate) rounded to TY into dxh (ops.h
 * layernorm_bwd: the residual stream's gradient in the activations' type,
 * the bits a convert of the stored dx gives, with dx fp32). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"
#include "cuda_cp_async.h"

#define LN1_THREADS 128
#define LN2_THREADS 256 /* 8 rows per block */
#define LN2_CACHE 4     /* values per lane held in registers: C <= 128 */

/* ---- a warp's row held in registers (kernel2, C <= TF_GROUP * LN2_CACHE): value k of
 * lane l is column l + 32 k, 0 past C ---------------------------------------- */
/* mean and 1/std of the row v (two-pass variance) */
__device__ __forceinline__ void ln2_row_stats(const float (&v)[LN2_CACHE], int lane, int C,
                                              float eps, float &mu, float &rs)
{
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) s += v[k];
    mu = tf_warp_sum(s) / C;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        const float d = v[k] - mu;
        q += lane + TF_GROUP * k < C ? d * d : 0.f;
    }
    rs = 1.f / sqrtf(tf_warp_sum(q) / C + eps);
}
/* dx = rs (g - mean(g) - xhat mean(g xhat)) from g = dout gamma and xhat (0 past
 * C), += when accumulate; dhr (NULL: none) gets the row's final values too */
template <class T, class TH>
__device__ __forceinline__ void ln2_row_dx(T *dxr, TH *dhr, const float (&gv)[LN2_CACHE],
                                           const float (&xh)[LN2_CACHE], int lane, int C,
                                           float rs, int accumulate)
{
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        sg += gv[k];
        sgx += gv[k] * xh[k];
    }
    const float mg = tf_warp_sum(sg) / C, mgx = tf_warp_sum(sgx) / C;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        const int c = lane + TF_GROUP * k;
        if (c < C) {
            const float v = rs * (gv[k] - mg - xh[k] * mgx);
            const float d = accumulate ? dxr[c] + v : v;
            dxr[c] = d;
            if (dhr) dhr[c] = d;
        }
    }
}

/* ---- forward ---------------------------------------------------------------- */
template <class TX, class TY>
__global__ void __launch_bounds__(LN1_THREADS) layernorm_fwd_kernel1(TY *out, float *mean, float *rstd,
                                                           const TX *x, const float *gamma,
                                                           const float *beta, long rows, int C,
                                                           float eps)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return; /* uniform per block */
    const TX *xr = x + r * C;
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += xr[c];
    const float mu = tf_block_sum(s, sh) / C;
    float v = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float d = xr[c] - mu;
        v += d * d;
    }
    const float rs = 1.f / sqrtf(tf_block_sum(v, sh) / C + eps);
    TY *orow = out + r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        orow[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    if (threadIdx.x == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}


template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS) layernorm_fwd_kernel2(TY *out, float *mean, float *rstd,
                                                           const TX *x, const float *gamma,
                                                           const float *beta, long rows, int C,
                                                           float eps)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (LN2_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return; /* whole warp leaves together; no block barrier below */
    const TX *xr = x + r * C;
    TY *orow = out + r * C;
    float mu, rs;
    if (C <= TF_GROUP * LN2_CACHE) {
        float xv[LN2_CACHE];
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) {
            const int c = lane + TF_GROUP * k;
            xv[k] = c < C ? xr[c] : 0.f;
        }
        ln2_row_stats(xv, lane, C, eps, mu, rs);
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) {
            const int c = lane + TF_GROUP * k;
            if (c < C) orow[c] = (xv[k] - mu) * rs * gamma[c] + beta[c];
        }
    } else {
        float s = 0.f;
        for (int c = lane; c < C; c += TF_GROUP) s += xr[c];
        mu = tf_warp_sum(s) / C;
        float v = 0.f;
        for (int c = lane; c < C; c += TF_GROUP) {
            const float d = xr[c] - mu;
            v += d * d;
        }
        rs = 1.f / sqrtf(tf_warp_sum(v) / C + eps);
        for (int c = lane; c < C; c += TF_GROUP) orow[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    }
    if (lane == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}


/* ---- backward: dx -------------------------------------------------------------
 * g = dout*gamma, xhat = (x-mean)*rstd:
 * dx = rstd * (g - mean(g) - xhat * mean(g*xhat))  (+= when accumulate) */
template <class TX, class TY>
__global__ void __launch_bounds__(LN1_THREADS)
layernorm_bwd_dx_kernel1(TX *dx, TY *dxh, const TY *dout, const TX *x, const float *mean,
                         const float *rstd, const float *gamma, long rows, int C, int accumulate)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return;
    const float mu = mean[r], rs = rstd[r];
    const TX *xr = x + r * C;
    const TY *dr = dout + r * C;
    float sg = 0.f, sgx = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = dr[c] * gamma[c];
        sg += g;
        sgx += g * ((xr[c] - mu) * rs);
    }
    const float mg = tf_block_sum(sg, sh) / C;
    const float mgx = tf_block_sum(sgx, sh) / C;
    TX *dxr = dx + r * C;
    TY *dhr = dxh ? dxh + r * C : NULL;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float xh = (xr[c] - mu) * rs;
        const float v = rs * (dr[c] * gamma[c] - mg - xh * mgx);
        const float d = accumulate ? dxr[c] + v : v;
        dxr[c] = d;
        if (dhr) dhr[c] = d;
    }
}


template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm_bwd_dx_kernel2(TX *dx, TY *dxh, const TY *dout, const TX *x, const float *mean,
                         const float *rstd, const float *gamma, long rows, int C, int accumulate)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (LN2_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    const float mu = mean[r], rs = rstd[r];
    const TX *xr = x + r * C;
    const TY *dr = dout + r * C;
    TX *dxr = dx + r * C;
    TY *dhr = dxh ? dxh + r * C : NULL;
    if (C <= TF_GROUP * LN2_CACHE) {
        float gv[LN2_CACHE], xh[LN2_CACHE];
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) {
            const int c = lane + TF_GROUP * k;
            gv[k] = c < C ? dr[c] * gamma[c] : 0.f;
            xh[k] = c < C ? (xr[c] - mu) * rs : 0.f;
        }
        ln2_row_dx(dxr, dhr, gv, xh, lane, C, rs, accumulate);
    } else {
        float sg = 0.f, sgx = 0.f;
        for (int c = lane; c < C; c += TF_GROUP) {
            const float g = dr[c] * gamma[c];
            sg += g;
            sgx += g * ((xr[c] - mu) * rs);
        }
        const float mg = tf_warp_sum(sg) / C, mgx = tf_warp_sum(sgx) / C;
        for (int c = lane; c < C; c += TF_GROUP) {
            const float xhc = (xr[c] - mu) * rs;
            const float v = rs * (dr[c] * gamma[c] - mg - xhc * mgx);
            const float d = accumulate ? dxr[c] + v : v;
            dxr[c] = d;
            if (dhr) dhr[c] = d;
        }
    }
}


/* ---- backward: dgamma, dbeta -------------------------------------------------
 * Block (32 channels x 8 row lanes) over rows [chunk*rpc, (chunk+1)*rpc) and
 * channels [c0 + 32*blockIdx.x, +32) of the slab [c0, c0+cs). Writes
 * part[chunk*cs + c - c0] (dgamma) and part[(nchunks + chunk)*cs + c - c0] (dbeta). */
#define DP_TX 32
#define DP_TY 8
template <class TX, class TY>
__global__ void __launch_bounds__(DP_TX *DP_TY) layernorm_bwd_dparams_kernel1(float *part, const TY *dout,
                                                                   const TX *x, const float *mean,
                                                                   const float *rstd, long rows,
                                                                   int C, int c0, int cs, long rpc,
                                                                   int nchunks)
{
    __shared__ float sg[DP_TY][DP_TX], sb[DP_TY][DP_TX];
    const int cl = blockIdx.x * DP_TX + threadIdx.x; /* channel within slab */
    const int c = c0 + cl;
    const long chunk = blockIdx.y;
    const long r0 = chunk * rpc;
    long r1 = r0 + rpc;
    if (r1 > rows) r1 = rows;
    float ag = 0.f, ab = 0.f;
    if (cl < cs) {
        for (long r = r0 + threadIdx.y; r < r1; r += DP_TY) {
            const float d = dout[r * C + c];
            ag += d * ((x[r * C + c] - mean[r]) * rstd[r]);
            ab += d;
        }
    }
    sg[threadIdx.y][threadIdx.x] = ag;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && cl < cs) {
        float tg = 0.f, tb = 0.f;
        for (int k = 0; k < DP_TY; ++k) { /* fixed order */
            tg += sg[k][threadIdx.x];
            tb += sb[k][threadIdx.x];
        }
        part[chunk * cs + cl] = tg;
        part[((long)nchunks + chunk) * cs + cl] = tb;
    }
}


extern "C" __global__ void layernorm_bwd_dparams_reduce_kernel1(float *dgamma, float *dbeta,
                                                                const float *part, int c0, int cs,
                                                                int nchunks)
{
    const int cl = blockIdx.x * blockDim.x + threadIdx.x;
    if (cl >= cs) return;
    float tg = 0.f, tb = 0.f;
    for (int k = 0; k < nchunks; ++k) { /* fixed order */
        tg += part[(long)k * cs + cl];
        tb += part[((long)nchunks + k) * cs + cl];
    }
    if (dgamma) dgamma[c0 + cl] += tg;
    if (dbeta) dbeta[c0 + cl] += tb;
}

/* ---- backward, level 3: dx, dgamma and dbeta in one kernel (C <= 128) ----
 * Block b handles rows [b*rpb, (b+1)*rpb), warp w the rows w, w+8, ... of it,
 * and writes its partial row part[b*2C + c] (dgamma c < C, dbeta C + c). The
 * partial rows are then added by a tree of fan-in LN2_FAN, deterministically:
 * the last block of each group of LN2_FAN to arrive (a counter per group,
 * reset by that block for the next launch and graph replay) adds the group's
 * rows in index order and writes the sum as a row of the next level, until
 * one row is left, which goes to dgamma/dbeta. One launch instead of two. */
#define LN2_FAN 32
/* where the root row's columns go: column c adds into p[c / C][c % C]
 * (NULL: not wanted) */
struct ln_roots {
    float *p[4];
    int C;
};
__device__ __forceinline__ void ln_add_root(const ln_roots &o, int c, float t)
{
    float *d = o.p[c / o.C];
    if (d) d[c % o.C] += t;
}

/* The tree: the grid's blocks have each written one partial row of W floats
 * at part[blockIdx.x * W] (this block's by the same threads, c = threadIdx.x
 * + k * LN2_THREADS, as below); the last block of each group of LN2_FAN to
 * arrive adds the group's rows in index order into a row of the next level
 * (after the grid's rows in part; counters from count, one per group), until
 * one row is left, which is added into o. The order of every sum is fixed. */
__device__ void ln_tree_add(float *part, int *count, int W, const ln_roots &o)
{
    __shared__ int last;
    long n = gridDim.x, node = blockIdx.x; /* nodes at this level, this block's */
    float *row = part, *next = part + n * W;
    int *cnt = count;
    while (n > 1) {
        const long g = node / LN2_FAN, g0 = g * LN2_FAN;
        const int members = (int)(n - g0 < LN2_FAN ? n - g0 : LN2_FAN);
        __threadfence(); /* this row is visible before the arrival is counted */
        __syncthreads();
        if (threadIdx.x == 0) {
            last = atomicAdd(&cnt[g], 1) == members - 1;
            if (last) cnt[g] = 0; /* every member has arrived: ready for the next launch */
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        const long nn = (n + LN2_FAN - 1) / LN2_FAN;
        for (int c = threadIdx.x; c < W; c += LN2_THREADS) {
            const float *src = row + g0 * W + c;
            float t = 0.f;
            int k = 0;
            /* the loads of 16 rows in flight, then added in order (a loop of
             * load-then-add waited for L2 once per row) */
            for (; k + 16 <= members; k += 16) {
                float v[16];
#pragma unroll
                for (int u = 0; u < 16; ++u) v[u] = __ldcg(src + (long)(k + u) * W);
#pragma unroll
                for (int u = 0; u < 16; ++u) t += v[u];
            }
            for (; k < members; ++k) t += __ldcg(src + (long)k * W); /* in order */
            if (nn > 1) next[g * W + c] = t;
            else ln_add_root(o, c, t);
        }
        if (nn == 1) return;
        cnt += nn; /* the next level's counters */
        row = next, next += nn * W, n = nn, node = g;
    }
    /* a single block: its row is the sum */
    for (int c = threadIdx.x; c < W; c += LN2_THREADS) ln_add_root(o, c, row[c]);
}

/* The end of a one-launch backward: each warp's NQ per-column sums a[q]
 * (its rows, in order) go to shared memory, are added in warp order into
 * this block's partial row of NQ * C floats (part[blockIdx.x * NQ * C], vector
 * q at q * C), and the tree adds the blocks' rows into o. */
template <int NQ, int VW = 0> /* a[q][k]: column VW lane + k (k < VW), or lane + 32 k (VW 0) */
__device__ __forceinline__ void ln2_block_finish(float (&sp)[NQ][LN2_THREADS / TF_GROUP][TF_GROUP * LN2_CACHE],
                                                 const float (&a)[NQ][LN2_CACHE], int C,
                                                 float *part, int *count, const ln_roots &o)
{
    const int lane = threadIdx.x % TF_GROUP, w = threadIdx.x / TF_GROUP;
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
        for (int k = 0; k < (VW ? VW : LN2_CACHE); ++k)
            sp[q][w][VW ? VW * lane + k : lane + TF_GROUP * k] = a[q][k];
    __syncthreads();
    const int W = NQ * C;
    for (int c = threadIdx.x; c < W; c += LN2_THREADS) {
        const int q = c / C, cc = c - q * C;
        float t = 0.f;
#pragma unroll
        for (int k = 0; k < LN2_THREADS / TF_GROUP; ++k) t += sp[q][k][cc]; /* warp order */
        part[blockIdx.x * (long)W + c] = t;
    }
    ln_tree_add(part, count, W, o);
}

/* rows per block of the one-launch backward kernels: LN_RPB (4 per warp), more
 * when the tree's partial rows of W floats (nblk, then nblk / 32, ...: under
 * nblk * 32 / 31 + 3 rows in all) would not fit the scratch area; a function
 * of (rows, W) only, so the sum order is fixed per shape */
#define LN_RPB 32
static long ln_rows_per_block(const tf_backend *be, long rows, int W)
{
    (void)be;
    long rpb = LN_RPB;
    const long maxblk = ((long)(TF_CU_SCRATCH_FLOATS / (size_t)W) - 3) * 31 / 32;
    if ((rows + rpb - 1) / rpb > maxblk) rpb = ((rows + maxblk - 1) / maxblk + 7) / 8 * 8;
    return rpb;
}

template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm_bwd_kernel2(TX *dx, TY *dxh, ln_roots o, float *part, int *count, const TY *dout,
                      const TX *x, const float *mean, const float *rstd, const float *gamma,
                      long rows, int C, int accumulate, long rpb)
{
    constexpr int NW = LN2_THREADS / TF_GROUP;
    __shared__ float sp[2][NW][TF_GROUP * LN2_CACHE]; /* dgamma dbeta per warp */
    const int lane = threadIdx.x % TF_GROUP, w = threadIdx.x / TF_GROUP;
    const long r0 = (long)blockIdx.x * rpb;
    const long r1 = r0 + rpb < rows ? r0 + rpb : rows;
    float a[2][LN2_CACHE];
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) a[0][k] = 0.f, a[1][k] = 0.f;
    for (long r = r0 + w; r < r1; r += NW) { /* warp-uniform */
        const float mu = mean[r], rs = rstd[r];
        const TX *xr = x + r * C;
    const TY *dr = dout + r * C;
        float dv[LN2_CACHE], gv[LN2_CACHE], xh[LN2_CACHE];
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) {
            const int c = lane + TF_GROUP * k;
            dv[k] = c < C ? dr[c] : 0.f;
            gv[k] = c < C ? dv[k] * gamma[c] : 0.f;
            xh[k] = c < C ? (xr[c] - mu) * rs : 0.f;
            a[0][k] += dv[k] * xh[k]; /* rows in order per lane */
            a[1][k] += dv[k];
        }
        if (dx) ln2_row_dx(dx + r * C, dxh ? dxh + r * C : NULL, gv, xh, lane, C, rs, accumulate);
    }
    ln2_block_finish(sp, a, C, part, count, o);
}


/* ---- two LayerNorms in a row (ops.h layernorm2, C <= 128) ------------------
 * Forward: one warp per row, x in registers: y1 = LN(x; g1, b1) stays in
 * registers, out = LN(y1; g2, b2). stats [4, rows]: mean1 rstd1 mean2 rstd2.
 * Backward: as layernorm_bwd_kernel2, y1 recomputed from x and the saved
 * statistics with the forward's expression (the same floats), the gradient
 * dy1 through the second LayerNorm kept in registers and taken through the
 * first; the four parameter partial rows (dg1 db1 dg2 db2, 4C floats a
 * block) go through the same tree. */
template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS) layernorm2_fwd_kernel2(TY *out, float *stats, const TX *x,
                                                            const float *g1, const float *b1,
                                                            const float *g2, const float *b2,
                                                            long rows, int C, float eps)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (LN2_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return; /* whole warp leaves together; no block barrier below */
    const TX *xr = x + r * C;
    float v[LN2_CACHE], mu1, rs1, mu2, rs2;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        const int c = lane + TF_GROUP * k;
        v[k] = c < C ? xr[c] : 0.f;
    }
    ln2_row_stats(v, lane, C, eps, mu1, rs1);
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        const int c = lane + TF_GROUP * k;
        v[k] = c < C ? (v[k] - mu1) * rs1 * g1[c] + b1[c] : 0.f; /* y1 */
    }
    ln2_row_stats(v, lane, C, eps, mu2, rs2);
    TY *orow = out + r * C;
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) {
        const int c = lane + TF_GROUP * k;
        if (c < C) orow[c] = (v[k] - mu2) * rs2 * g2[c] + b2[c];
    }
    if (lane == 0) {
        stats[r] = mu1;
        stats[rows + r] = rs1;
        stats[2 * rows + r] = mu2;
        stats[3 * rows + r] = rs2;
    }
}


template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm2_bwd_kernel2(TX *dx, TY *dxh, ln_roots o, float *part, int *count, const TY *dout,
                       const TX *x, const float *stats, const float *g1, const float *b1,
                       const float *g2, long rows, int C, int accumulate, long rpb)
{
    constexpr int NW = LN2_THREADS / TF_GROUP;
    __shared__ float sp[4][NW][TF_GROUP * LN2_CACHE]; /* dg1 db1 dg2 db2 per warp */
    const int lane = threadIdx.x % TF_GROUP, w = threadIdx.x / TF_GROUP;
    const long r0 = (long)blockIdx.x * rpb;
    const long r1 = r0 + rpb < rows ? r0 + rpb : rows;
    float a[4][LN2_CACHE];
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) a[0][k] = a[1][k] = a[2][k] = a[3][k] = 0.f;
    for (long r = r0 + w; r < r1; r += NW) { /* warp-uniform */
        const float m1 = stats[r], s1 = stats[rows + r], m2 = stats[2 * rows + r],
                    s2 = stats[3 * rows + r];
        const TX *xr = x + r * C;
    const TY *dr = dout + r * C;
        float dv[LN2_CACHE], xh1[LN2_CACHE], xh2[LN2_CACHE], gv[LN2_CACHE];
        float t1 = 0.f, t2 = 0.f;
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) {
            const int c = lane + TF_GROUP * k;
            const bool in = c < C;
            dv[k] = in ? dr[c] : 0.f;
            xh1[k] = in ? (xr[c] - m1) * s1 : 0.f;
            const float y1 = in ? (xr[c] - m1) * s1 * g1[c] + b1[c] : 0.f;
            xh2[k] = in ? (y1 - m2) * s2 : 0.f;
            gv[k] = in ? dv[k] * g2[c] : 0.f;
            t1 += gv[k];
            t2 += gv[k] * xh2[k];
            a[2][k] += dv[k] * xh2[k]; /* rows in order per lane */
            a[3][k] += dv[k];
        }
        const float mg2 = tf_warp_sum(t1) / C, mgx2 = tf_warp_sum(t2) / C;
#pragma unroll
        for (int k = 0; k < LN2_CACHE; ++k) { /* dy1 through the second norm, then g of the first */
            const int c = lane + TF_GROUP * k;
            const float dy1 = c < C ? s2 * (gv[k] - mg2 - xh2[k] * mgx2) : 0.f;
            a[0][k] += dy1 * xh1[k];
            a[1][k] += dy1;
            gv[k] = c < C ? dy1 * g1[c] : 0.f;
        }
        ln2_row_dx(dx + r * C, dxh ? dxh + r * C : NULL, gv, xh1, lane, C, s1, accumulate);
    }
    ln2_block_finish(sp, a, C, part, count, o);
}


/* ---- the one-launch backwards on vector rows: C = 32 VW (VW 2: the MSA's 64
 * channels, VW 4: the pair's 128) with rows and parameters aligned to VW
 * elements. Lane l holds columns VW l .. VW l + VW - 1, loaded as one vector
 * (float4 / float2, a half type's 8 / 4 bytes), the parameters once a warp,
 * and the next row's loads are issued before this row's sums (two rows in
 * flight a warp). The general kernels' scalar loads, guards and index
 * arithmetic leave them issue-bound, far from the bandwidth a pass over the
 * rows needs (bench/RESULTS.md has the ncu figures). */
template <int VW, class T>
__device__ __forceinline__ void ln_vld(const T *p, float (&v)[LN2_CACHE])
{
    if (VW == 4) {
        const float4 t = tf_cu_ld4(p);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        const float2 t = tf_cu_ld2(p);
        v[0] = t.x, v[1] = t.y, v[2] = 0.f, v[3] = 0.f;
    }
}
/* p's VW elements = v, rounded once to T */
template <int VW, class T>
__device__ __forceinline__ void ln_vst(T *p, const float (&v)[LN2_CACHE])
{
    if (VW == 4) tf_cu_st4(p, make_float4(v[0], v[1], v[2], v[3]));
    else tf_cu_st2(p, v[0], v[1]);
}
/* p's VW elements = old + v when accumulate (old: p's elements, loaded
 * ahead, so that no load sits in the dependent chain), else v; and the same
 * values into ph's (dxh's, NULL: none; one vector store where ph is aligned
 * to VW elements, hv, else VW scalar ones) */
template <int VW, class T, class TH>
__device__ __forceinline__ void ln_vst_add(T *p, TH *ph, bool hv, const float (&v)[LN2_CACHE],
                                           const float (&old)[LN2_CACHE], int accumulate)
{
    float s[LN2_CACHE];
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) s[k] = accumulate ? old[k] + v[k] : v[k];
    ln_vst<VW>(p, s);
    if (!ph) return;
    if (hv) {
        ln_vst<VW>(ph, s);
        return;
    }
#pragma unroll
    for (int k = 0; k < VW; ++k) ph[k] = s[k];
}
/* The vector-row backwards keep LN_RING of a warp's rows in flight in a ring
 * of slots in shared memory: the row's x, dout and (accumulate) dx copied by
 * cp.async, each lane its own VW columns, lanes 0.. the row's statistics,
 * one commit group a row. Row i is used once at most LN_RING - 1 newer
 * groups are pending, and its slot takes row i + LN_RING next. A row ahead
 * in registers left the loads' latency exposed (the warps stalled on them at
 * about half of DRAM's rate) in more registers. After the rows, the slots'
 * memory holds the block's finish (ln2_block_finish's sums). */
template <class TX, class TY, int C>
struct ln_slot {
    TX x[C], dx[C];
    TY d[C];
    float st[4];
};
template <class TX, class TY, int C, int NQ>
struct ln_ring {
    static constexpr int NW = LN2_THREADS / TF_GROUP;
    static constexpr int FIN = NQ * NW * TF_GROUP * LN2_CACHE * 4; /* the finish's bytes */
    /* 4 rows a warp where the ring stays within 42 KB (fp32 dout at C 128: 3) */
    static constexpr int RING = NW * 4 * (int)sizeof(ln_slot<TX, TY, C>) <= 42 * 1024 ? 4 : 3;
    static constexpr int ROWS = NW * RING * (int)sizeof(ln_slot<TX, TY, C>);
    static constexpr int BYTES = ROWS > FIN ? ROWS : FIN;
    typedef float fin_t[NQ][NW][TF_GROUP * LN2_CACHE];
};
/* where a row's statistics come from: row r's q-th at p[q][r], q < n */
struct ln_stat_src {
    const float *p[4];
    int n;
};

/* row r's slot filled (r < r1; dx when accumulating into it), one commit
 * group either way */
template <int VW, int C, class TX, class TY>
__device__ __forceinline__ void ln_fetch(ln_slot<TX, TY, C> &s, long r, long r1, int lane,
                                         const TX *x, const TY *dout, const TX *dx,
                                         const ln_stat_src &st, bool with_dx)
{
    if (r < r1) {
        const long e = r * C + VW * lane;
        tf_cp_async(s.x + VW * lane, x + e, VW * (int)sizeof(TX), true);
        tf_cp_async(s.d + VW * lane, dout + e, VW * (int)sizeof(TY), true);
        if (with_dx) tf_cp_async(s.dx + VW * lane, dx + e, VW * (int)sizeof(TX), true);
        if (lane < st.n) { /* selects, not an indexed (local-memory) array */
            const float *q = lane == 0 ? st.p[0] : lane == 1 ? st.p[1] : lane == 2 ? st.p[2] : st.p[3];
            tf_cp_async(s.st + lane, q + r, 4, true);
        }
    }
    tf_cp_commit();
}

template <int VW, class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm_bwd_kernel2_v(TX *dx, TY *dxh, ln_roots o, float *part, int *count, const TY *dout,
                        const TX *x, const float *mean, const float *rstd, const float *gamma,
                        long rows, int accumulate, long rpb)
{
    constexpr int C = TF_GROUP * VW;
    typedef ln_ring<TX, TY, C, 2> RG;
    typedef ln_slot<TX, TY, C> SL;
    constexpr int NW = RG::NW, RING = RG::RING;
    __shared__ float4 smem[(RG::BYTES + 15) / 16]; /* 16-byte aligned */
    const int lane = threadIdx.x % TF_GROUP, w = threadIdx.x / TF_GROUP;
    SL *ring = reinterpret_cast<SL *>(smem) + w * RING;
    const long r0 = (long)blockIdx.x * rpb;
    const long r1 = r0 + rpb < rows ? r0 + rpb : rows;
    const ln_stat_src st = {{mean, rstd, NULL, NULL}, 2};
    const bool with_dx = dx && accumulate;
    const bool hv = tf_cu_aligned(dxh, VW * sizeof(TY));
    long r = r0 + w;
#pragma unroll
    for (int i = 0; i < RING - 1; ++i)
        ln_fetch<VW>(ring[i], r + (long)i * NW, r1, lane, x, dout, dx, st, with_dx);
    float gm[LN2_CACHE], a[2][LN2_CACHE];
    ln_vld<VW>(gamma + VW * lane, gm);
#pragma unroll
    for (int k = 0; k < LN2_CACHE; ++k) a[0][k] = a[1][k] = 0.f;
    for (int i = 0; r < r1; r += NW, ++i) { /* warp-uniform */
        /* the slot row i - 1 used (read by every lane: the sync at the end) */
        ln_fetch<VW>(ring[(i + RING - 1) % RING], r + (long)(RING - 1) * NW, r1, lane, x, dout,
                     dx, st, with_dx);
        tf_cp_wait<RING - 1>(); /* this lane's copies of row i */
        tf_syncwarp();          /* ... and the lanes' statistics */
        const SL &s = ring[i % RING];
        const float mu = s.st[0], rs = s.st[1];
        float xv[LN2_CACHE], dv[LN2_CACHE], gv[LN2_CACHE], xh[LN2_CACHE], sg = 0.f, sgx = 0.f;
        ln_vld<VW>(s.x + VW * lane, xv);
        ln_vld<VW>(s.d + VW * lane, dv);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
            xh[k] = (xv[k] - mu) * rs;
            gv[k] = dv[k] * gm[k];
            sg += gv[k];
            sgx += gv[k] * xh[k];
            a[0][k] += dv[k] * xh[k]; /* rows in order per lane */
            a[1][k] += dv[k];
        }
        if (dx) {
            const float mg = tf_warp_sum(sg) / C, mgx = tf_warp_sum(sgx) / C;
            float v[LN2_CACHE], ov[LN2_CACHE] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int k = 0; k < VW; ++k) v[k] = rs * (gv[k] - mg - xh[k] * mgx);
            if (accumulate) ln_vld<VW>(s.dx + VW * lane, ov);
            ln_vst_add<VW>(dx + r * C + VW * lane, dxh ? dxh + r * C + VW * lane : NULL, hv, v,
                           ov, accumulate);
        }
        tf_syncwarp(); /* every lane has read the slot before it is refilled */
    }
    tf_cp_wait<0>(); /* the empty groups past the rows */
    __syncthreads(); /* every warp is done with its ring: the finish reuses the memory */
    ln2_block_finish<2, VW>(*reinterpret_cast<typename RG::fin_t *>(smem), a, C, part, count, o);
}

/* layernorm2's backward, C 128, on the same ring */
template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm2_bwd_kernel2_c128(TX *dx, TY *dxh, ln_roots o, float *part, int *count,
                            const TY *dout, const TX *x, const float *stats, const float *g1,
                            const float *b1, const float *g2, long rows, int accumulate, long rpb)
{
    constexpr int C = 128;
    typedef ln_ring<TX, TY, C, 4> RG;
    typedef ln_slot<TX, TY, C> SL;
    constexpr int NW = RG::NW, RING = RG::RING;
    __shared__ float4 smem[(RG::BYTES + 15) / 16]; /* 16-byte aligned */
    const int lane = threadIdx.x % TF_GROUP, w = threadIdx.x / TF_GROUP;
    SL *ring = reinterpret_cast<SL *>(smem) + w * RING;
    const long r0 = (long)blockIdx.x * rpb;
    const long r1 = r0 + rpb < rows ? r0 + rpb : rows;
    const ln_stat_src st = {{stats, stats + rows, stats + 2 * rows, stats + 3 * rows}, 4};
    const bool hv = tf_cu_aligned(dxh, 4 * sizeof(TY));
    long r = r0 + w;
#pragma unroll
    for (int i = 0; i < RING - 1; ++i)
        ln_fetch<4>(ring[i], r + (long)i * NW, r1, lane, x, dout, dx, st, accumulate);
    float g1v[4], b1v[4], g2v[4], a[4][LN2_CACHE];
    ln_vld<4>(g1 + 4 * lane, g1v), ln_vld<4>(b1 + 4 * lane, b1v), ln_vld<4>(g2 + 4 * lane, g2v);
#pragma unroll
    for (int k = 0; k < 4; ++k) a[0][k] = a[1][k] = a[2][k] = a[3][k] = 0.f;
    for (int i = 0; r < r1; r += NW, ++i) { /* warp-uniform */
        /* the slot row i - 1 used (read by every lane: the sync at the end) */
        ln_fetch<4>(ring[(i + RING - 1) % RING], r + (long)(RING - 1) * NW, r1, lane, x, dout,
                    dx, st, accumulate);
        tf_cp_wait<RING - 1>(); /* this lane's copies of row i */
        tf_syncwarp();          /* ... and lanes 0..3's statistics */
        const SL &s = ring[i % RING];
        const float m1 = s.st[0], s1 = s.st[1], m2 = s.st[2], s2 = s.st[3];
        float xv[4], dv[4], ov[LN2_CACHE] = {0.f, 0.f, 0.f, 0.f};
        ln_vld<4>(s.x + 4 * lane, xv);
        ln_vld<4>(s.d + 4 * lane, dv);
        if (accumulate) ln_vld<4>(s.dx + 4 * lane, ov);
        float xh1[4], xh2[4], gv[4], t1 = 0.f, t2 = 0.f;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            xh1[k] = (xv[k] - m1) * s1;
            const float y1 = (xv[k] - m1) * s1 * g1v[k] + b1v[k]; /* the forward's floats */
            xh2[k] = (y1 - m2) * s2;
            gv[k] = dv[k] * g2v[k];
            t1 += gv[k];
            t2 += gv[k] * xh2[k];
            a[2][k] += dv[k] * xh2[k]; /* rows in order per lane */
            a[3][k] += dv[k];
        }
        const float mg2 = tf_warp_sum(t1) / C, mgx2 = tf_warp_sum(t2) / C;
        float sg = 0.f, sgx = 0.f;
#pragma unroll
        for (int k = 0; k < 4; ++k) { /* dy1 through the second norm, then g of the first */
            const float dy1 = s2 * (gv[k] - mg2 - xh2[k] * mgx2);
            a[0][k] += dy1 * xh1[k];
            a[1][k] += dy1;
            gv[k] = dy1 * g1v[k];
            sg += gv[k];
            sgx += gv[k] * xh1[k];
        }
        const float mg = tf_warp_sum(sg) / C, mgx = tf_warp_sum(sgx) / C;
        float v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = s1 * (gv[k] - mg - xh1[k] * mgx);
        ln_vst_add<4>(dx + r * C + 4 * lane, dxh ? dxh + r * C + 4 * lane : NULL, hv, v, ov,
                      accumulate);
        tf_syncwarp(); /* every lane has read the slot before it is refilled */
    }
    tf_cp_wait<0>(); /* the empty groups past the rows */
    __syncthreads(); /* every warp is done with its ring: the finish reuses the memory */
    ln2_block_finish<4, 4>(*reinterpret_cast<typename RG::fin_t *>(smem), a, C, part, count, o);
}

/* The forwards on vector rows (a warp per row, as kernel2): one vector load
 * per lane and array instead of VW guarded scalar ones. */
template <int VW> /* mean and 1/std of the row (two-pass variance) */
__device__ __forceinline__ void ln_vrow_stats(const float (&v)[LN2_CACHE], float eps, float &mu,
                                              float &rs)
{
    constexpr int C = TF_GROUP * VW;
    float s = 0.f, q = 0.f;
#pragma unroll
    for (int k = 0; k < VW; ++k) s += v[k];
    mu = tf_warp_sum(s) / C;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
        const float d = v[k] - mu;
        q += d * d;
    }
    rs = 1.f / sqrtf(tf_warp_sum(q) / C + eps);
}

template <int VW, class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm_fwd_kernel2_v(TY *out, float *mean, float *rstd, const TX *x, const float *gamma,
                        const float *beta, long rows, float eps)
{
    constexpr int C = TF_GROUP * VW;
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (LN2_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return; /* whole warp leaves together; no block barrier below */
    float v[LN2_CACHE], g[LN2_CACHE], b[LN2_CACHE], mu, rs;
    ln_vld<VW>(x + r * C + VW * lane, v);
    ln_vld<VW>(gamma + VW * lane, g);
    ln_vld<VW>(beta + VW * lane, b);
    ln_vrow_stats<VW>(v, eps, mu, rs);
#pragma unroll
    for (int k = 0; k < VW; ++k) v[k] = (v[k] - mu) * rs * g[k] + b[k];
    ln_vst<VW>(out + r * C + VW * lane, v);
    if (lane == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}

template <class TX, class TY>
__global__ void __launch_bounds__(LN2_THREADS)
layernorm2_fwd_kernel2_c128(TY *out, float *stats, const TX *x, const float *g1, const float *b1,
                            const float *g2, const float *b2, long rows, float eps)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (LN2_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    float v[4], p[4], q[4], mu1, rs1, mu2, rs2;
    ln_vld<4>(x + r * 128 + 4 * lane, v);
    ln_vld<4>(g1 + 4 * lane, p);
    ln_vld<4>(b1 + 4 * lane, q);
    ln_vrow_stats<4>(v, eps, mu1, rs1);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = (v[k] - mu1) * rs1 * p[k] + q[k]; /* y1 */
    ln_vrow_stats<4>(v, eps, mu2, rs2);
    ln_vld<4>(g2 + 4 * lane, p);
    ln_vld<4>(b2 + 4 * lane, q);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = (v[k] - mu2) * rs2 * p[k] + q[k];
    ln_vst<4>(out + r * 128 + 4 * lane, v);
    if (lane == 0) {
        stats[r] = mu1;
        stats[rows + r] = rs1;
        stats[2 * rows + r] = mu2;
        stats[3 * rows + r] = rs2;
    }
}

/* ---- host side: one path for every type pair (x, dx of type TX; out, dout
 * of type TY; cuda_half.h), so a half op runs the fp32 op's kernel and sums
 * on the widened inputs. The vector-row kernels take rows of VW elements
 * aligned to VW elements, whatever the type: the same choice for a half call
 * and its fp32 twin at the same offsets. ---- */
template <class T> static bool ln_valigned(const T *p, int vw)
{
    return tf_cu_aligned(p, (unsigned)(vw * (int)sizeof(T)));
}
/* the vector width of rows of C (4 at 128, 2 at 64, else 0: the general kernels) */
static int ln_vw(int C) { return C == 128 ? 4 : C == 64 ? 2 : 0; }

template <class TX, class TY>
static void ln_fwd(tf_backend *be, TY *out, float *mean, float *rstd, const TX *x,
                   const float *gamma, const float *beta, long rows, int C, float eps)
{
    if (be->kernel_level < 3) {
        TF_LAUNCH((layernorm_fwd_kernel1<TX, TY>), dim3((unsigned)rows), dim3(LN1_THREADS),
                  be->stream, out, mean, rstd, x, gamma, beta, rows, C, eps);
        return;
    }
    const long nb = (rows + LN2_THREADS / TF_GROUP - 1) / (LN2_THREADS / TF_GROUP);
    const int vw = ln_vw(C);
    const bool vec = vw && ln_valigned(out, vw) && ln_valigned(x, vw) &&
                     ln_valigned(gamma, vw) && ln_valigned(beta, vw);
    if (vec && vw == 4)
        TF_LAUNCH((layernorm_fwd_kernel2_v<4, TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, out, mean, rstd, x, gamma, beta, rows, eps);
    else if (vec)
        TF_LAUNCH((layernorm_fwd_kernel2_v<2, TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, out, mean, rstd, x, gamma, beta, rows, eps);
    else
        TF_LAUNCH((layernorm_fwd_kernel2<TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, out, mean, rstd, x, gamma, beta, rows, C, eps);
}

#define DP_ROWS_PER_CHUNK 64
#define DP_MAX_CHUNKS 1024

template <class TX, class TY>
static void ln_bwd(tf_backend *be, TX *dx, TY *dxh, float *dgamma, float *dbeta, const TY *dout,
                   const TX *x, const float *mean, const float *rstd, const float *gamma, long rows,
                   int C, int accumulate)
{
    if (be->kernel_level >= 3 && C <= TF_GROUP * LN2_CACHE && (dgamma || dbeta)) {
        const long rpb = ln_rows_per_block(be, rows, 2 * C);
        const long nblk = (rows + rpb - 1) / rpb;
        const ln_roots o = {{dgamma, dbeta, NULL, NULL}, C};
        const int vw = ln_vw(C);
        const bool vec = vw && ln_valigned(dx, vw) && ln_valigned(dout, vw) &&
                         ln_valigned(x, vw) && ln_valigned(gamma, vw);
        if (vec && vw == 4)
            TF_LAUNCH((layernorm_bwd_kernel2_v<4, TX, TY>), dim3((unsigned)nblk),
                      dim3(LN2_THREADS), be->stream, dx, dxh, o, be->scratch, be->mma_count, dout,
                      x, mean, rstd, gamma, rows, accumulate, rpb);
        else if (vec)
            TF_LAUNCH((layernorm_bwd_kernel2_v<2, TX, TY>), dim3((unsigned)nblk),
                      dim3(LN2_THREADS), be->stream, dx, dxh, o, be->scratch, be->mma_count, dout,
                      x, mean, rstd, gamma, rows, accumulate, rpb);
        else
            TF_LAUNCH((layernorm_bwd_kernel2<TX, TY>), dim3((unsigned)nblk), dim3(LN2_THREADS),
                      be->stream, dx, dxh, o, be->scratch, be->mma_count, dout, x, mean, rstd,
                      gamma, rows, C, accumulate, rpb);
        return;
    }
    if (dgamma || dbeta) {
        /* chunking depends only on (rows, C): the sum order is fixed per shape */
        long nchunks = (rows + DP_ROWS_PER_CHUNK - 1) / DP_ROWS_PER_CHUNK;
        if (nchunks > DP_MAX_CHUNKS) nchunks = DP_MAX_CHUNKS;
        const long rpc = (rows + nchunks - 1) / nchunks;
        nchunks = (rows + rpc - 1) / rpc;
        long cs = (long)(TF_CU_SCRATCH_FLOATS / (2 * (size_t)nchunks)); /* >= 512 */
        if (cs > C) cs = C;
        for (int c0 = 0; c0 < C; c0 += (int)cs) {
            const int w = (int)(C - c0 < cs ? C - c0 : cs);
            TF_LAUNCH((layernorm_bwd_dparams_kernel1<TX, TY>),
                      dim3((unsigned)((w + DP_TX - 1) / DP_TX), (unsigned)nchunks),
                      dim3(DP_TX, DP_TY), be->stream, be->scratch, dout, x, mean, rstd, rows, C,
                      c0, w, rpc, (int)nchunks);
            TF_LAUNCH(layernorm_bwd_dparams_reduce_kernel1, dim3((unsigned)((w + 127) / 128)),
                      dim3(128), be->stream, dgamma, dbeta, (const float *)be->scratch, c0, w,
                      (int)nchunks);
        }
    }
    if (!dx) return;
    if (be->kernel_level >= 3) {
        const long nb = (rows + LN2_THREADS / TF_GROUP - 1) / (LN2_THREADS / TF_GROUP);
        TF_LAUNCH((layernorm_bwd_dx_kernel2<TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, dx, dxh, dout, x, mean, rstd, gamma, rows, C, accumulate);
    } else {
        TF_LAUNCH((layernorm_bwd_dx_kernel1<TX, TY>), dim3((unsigned)rows), dim3(LN1_THREADS),
                  be->stream, dx, dxh, dout, x, mean, rstd, gamma, rows, C, accumulate);
    }
}

/* the model composes two layernorm ops for wider rows: a call here is a bug */
static void ln2_too_wide(int C)
{
    fprintf(stderr, "tinyfold: internal error: layernorm2 with C = %d (at most %d)\n", C,
            TF_LN2_MAX_C);
    abort();
}

template <class TX, class TY>
static void ln2_fwd(tf_backend *be, TY *out, float *stats, const TX *x, const float *g1,
                    const float *b1, const float *g2, const float *b2, long rows, int C, float eps)
{
    if (C > TF_LN2_MAX_C) ln2_too_wide(C);
    const long nb = (rows + LN2_THREADS / TF_GROUP - 1) / (LN2_THREADS / TF_GROUP);
    if (C == 128 && ln_valigned(out, 4) && ln_valigned(x, 4) && ln_valigned(g1, 4) &&
        ln_valigned(b1, 4) && ln_valigned(g2, 4) && ln_valigned(b2, 4))
        TF_LAUNCH((layernorm2_fwd_kernel2_c128<TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, out, stats, x, g1, b1, g2, b2, rows, eps);
    else
        TF_LAUNCH((layernorm2_fwd_kernel2<TX, TY>), dim3((unsigned)nb), dim3(LN2_THREADS),
                  be->stream, out, stats, x, g1, b1, g2, b2, rows, C, eps);
}

template <class TX, class TY>
static void ln2_bwd(tf_backend *be, TX *dx, TY *dxh, float *dg1, float *db1, float *dg2, float *db2,
                    const TY *dout, const TX *x, const float *stats, const float *g1,
                    const float *b1, const float *g2, long rows, int C, int accumulate)
{
    if (C > TF_LN2_MAX_C) ln2_too_wide(C);
    const long rpb = ln_rows_per_block(be, rows, 4 * C);
    const long nblk = (rows + rpb - 1) / rpb;
    const ln_roots o = {{dg1, db1, dg2, db2}, C};
    if (C == 128 && ln_valigned(dx, 4) && ln_valigned(dout, 4) && ln_valigned(x, 4) &&
        ln_valigned(g1, 4) && ln_valigned(b1, 4) && ln_valigned(g2, 4))
        TF_LAUNCH((layernorm2_bwd_kernel2_c128<TX, TY>), dim3((unsigned)nblk), dim3(LN2_THREADS),
                  be->stream, dx, dxh, o, be->scratch, be->mma_count, dout, x, stats, g1, b1,
                  g2, rows, accumulate, rpb);
    else
        TF_LAUNCH((layernorm2_bwd_kernel2<TX, TY>), dim3((unsigned)nblk), dim3(LN2_THREADS),
                  be->stream, dx, dxh, o, be->scratch, be->mma_count, dout, x, stats, g1, b1, g2,
                  rows, C, accumulate, rpb);
}

extern "C" void tf_cu_layernorm_fwd(tf_backend *be, float *out, float *mean, float *rstd,
                                    const float *x, const float *gamma, const float *beta,
                                    long rows, int C, float eps)
{
    if (rows > 0 && C > 0) ln_fwd(be, out, mean, rstd, x, gamma, beta, rows, C, eps);
}

extern "C" void tf_cu_layernorm_bwd(tf_backend *be, float *dx, float *dxh, float *dgamma,
                                    float *dbeta, const float *dout, const float *x,
                                    const float *mean, const float *rstd, const float *gamma,
                                    long rows, int C, int accumulate)
{
    if (rows > 0 && C > 0)
        ln_bwd(be, dx, dxh, dgamma, dbeta, dout, x, mean, rstd, gamma, rows, C, accumulate);
}

extern "C" void tf_cu_layernorm2_fwd(tf_backend *be, float *out, float *stats, const float *x,
                                     const float *g1, const float *b1, const float *g2,
                                     const float *b2, long rows, int C, float eps)
{
    if (rows > 0 && C > 0) ln2_fwd(be, out, stats, x, g1, b1, g2, b2, rows, C, eps);
}

extern "C" void tf_cu_layernorm2_bwd(tf_backend *be, float *dx, float *dxh, float *dg1,
                                     float *db1, float *dg2, float *db2, const float *dout,
                                     const float *x, const float *stats, const float *g1,
                                     const float *b1, const float *g2, long rows, int C,
                                     int accumulate)
{
    if (rows > 0 && C > 0)
        ln2_bwd(be, dx, dxh, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2, rows, C, accumulate);
}

extern "C" void tf_cu_layernorm_fwd_h(tf_backend *be, void *out, float *mean, float *rstd,
                                      const void *x, const float *gamma, const float *beta,
                                      long rows, int C, float eps, tf_dtype xt, tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    TF_CU_DISPATCH2_HALF(xt, yt, TX, TY,
                         ln_fwd(be, (TY *)out, mean, rstd, (const TX *)x, gamma, beta, rows, C,
                                eps));
}

extern "C" void tf_cu_layernorm_bwd_h(tf_backend *be, void *dx, void *dxh, float *dgamma,
                                      float *dbeta, const void *dout, const void *x,
                                      const float *mean, const float *rstd, const float *gamma,
                                      long rows, int C, int accumulate, tf_dtype xt, tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    TF_CU_DISPATCH2_HALF(xt, yt, TX, TY,
                         ln_bwd(be, (TX *)dx, (TY *)dxh, dgamma, dbeta, (const TY *)dout,
                                (const TX *)x, mean, rstd, gamma, rows, C, accumulate));
}

extern "C" void tf_cu_layernorm2_fwd_h(tf_backend *be, void *out, float *stats, const void *x,
                                       const float *g1, const float *b1, const float *g2,
                                       const float *b2, long rows, int C, float eps, tf_dtype xt,
                                       tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    TF_CU_DISPATCH2_HALF(xt, yt, TX, TY,
                         ln2_fwd(be, (TY *)out, stats, (const TX *)x, g1, b1, g2, b2, rows, C,
                                 eps));
}

extern "C" void tf_cu_layernorm2_bwd_h(tf_backend *be, void *dx, void *dxh, float *dg1,
                                       float *db1, float *dg2, float *db2, const void *dout,
                                       const void *x, const float *stats, const float *g1,
                                       const float *b1, const float *g2, long rows, int C,
                                       int accumulate, tf_dtype xt, tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    TF_CU_DISPATCH2_HALF(xt, yt, TX, TY,
                         ln2_bwd(be, (TX *)dx, (TY *)dxh, dg1, db1, dg2, db2, (const TY *)dout,
                                 (const TX *)x, stats, g1, b1, g2, rows, C, accumulate));
}
