/* The transition's MLP as one kernel each way for bf16 / fp16 (op_list.h
 * transition_fwd/_bwd, C 64 or 128, H = 4C hidden), on Hopper's warpgroup
 * MMA (cuda_wgtile.h). Where the running code has no wgmma (caps.has_wgmma),
 * and for fp32 / tf32 and the HIP build, the plan composes LayerNorm and
 * GEMM ops instead (transition.c, gpu_plan.c tf_gpu_mlp_fused).
 *
 * A block takes TR_ROWS = 128 rows with two warpgroups, each the 64 rows
 * 64 wg.. (warp w of the block: rows 16 w.., as in the C layout of its
 * fragments). The hidden layer goes in chunks of TR_HC = 64 units whose
 * weight tiles are copied into shared memory one chunk ahead (two stages,
 * cp.async where the weights are 16-byte aligned), all in the K-major
 * core-matrix layout wgmma reads.
 *
 * Forward, tr_fwd_kernel: the prologue normalises the block's rows (a warp
 * a row at a time, two-pass variance), saves mean and rstd, and puts xn,
 * rounded to E, in shared memory. Per chunk each warpgroup forms
 * h = xn W1c^T (64 x 64, both operands from shared memory, K = C), applies
 * the ReLU, packs h into A fragments in registers (rounded to E, as the
 * composition stores h) and adds h W2c^T into its 64 x C fp32 accumulator
 * (A from registers). The [rows, 4C] hidden layer never leaves the chip.
 * Epilogue: each warp puts its accumulator rows in shared memory and
 * writes x_out = x + acc in fp32 a row at a time, 16 bytes a lane, the
 * loads of several rows out before the first store (fragment-order global
 * accesses made every load wait for the store before it: x_out may be x).
 *
 * Backward, tr_bwd_kernel: the prologue recomputes xn from x and the saved
 * statistics (the forward's expression: the same bits; also written out)
 * and puts xn and dy in shared memory. Per chunk: h = relu(xn W1c^T) and
 * dp = dy W2c, both from shared memory; h and dh = (h > 0 ? dp : 0),
 * rounded to E, are written out for the weight gradients (the caller's
 * GEMMs: dW2 += dy^T h, dW1 += dh^T xn) through a warp's staging rows in
 * shared memory, 16 bytes a lane; dxn += dh W1c with dh's A fragments
 * straight from the registers. The two products that read a weight matrix
 * along its rows (W2c for dp, W1c for dxn) take it N-major, so every tile
 * is a cp.async copy, the next chunk's in flight. Then dxn is rounded to
 * E (the composition stores it) and staged a warp's rows at a time in shared
 * memory, and the LayerNorm's backward runs a row at a time as the
 * forward's epilogue does: dx += rstd (g - mean(g) - xhat mean(g xhat)),
 * g = dxn gamma, the two means as warp sums. dgamma and dbeta: each lane's
 * columns summed over its warp's rows in row order, added in warp order
 * into the block's running row in shared memory; a block takes tiles
 * blockIdx.x, + gridDim.x, ... (the grid a function of rows only), writes
 * its row of 2C partials to the backend's scratch, and tr_dparams_kernel adds the rows in block order:
 * deterministic, no atomics.
 *
 * Roofs (FLOPs, bytes, achieved rates) are in bench/RESULTS.md. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_wgtile.h"

#define TR_ROWS 128 /* rows a block */
#define TR_THREADS 256 /* two warpgroups */
#define TR_HC 64 /* hidden units a staged chunk */

template <int C>
struct tr_cfg {
    static_assert(C == 64 || C == 128, "transition kernels: C 64 or 128");
    static constexpr int H = 4 * C;
    static constexpr int NCH = H / TR_HC; /* chunks */
    static constexpr int NV = C / 32;     /* a row's values a lane in the prologue */
    static constexpr int NT = C / 8;      /* accumulator tiles a warp */
    static constexpr int XH = TR_ROWS * C; /* halves of xn (and dy) */
    static constexpr int WH = TR_HC * C;   /* halves of one weight tile of a chunk */
    static constexpr size_t FWD_BYTES = 2 * ((size_t)XH + 2 * 2 * (size_t)WH);
    static constexpr int SO = C + 8; /* row stride (floats) of the epilogues' staged rows */
    static constexpr int SP = TR_HC + 8; /* row stride of a warp's h / dh staging (halves) */
    static constexpr int SH = 2 * 16 * SP; /* halves of a warp's staging: h, then dh */
    static constexpr size_t BWD_BYTES = 2 * (2 * (size_t)XH + 2 * 3 * (size_t)WH) +
                                        sizeof(float) * (TR_THREADS / 32 + 1) * 2 * C +
                                        2 * (size_t)(TR_THREADS / 32) * SH;
    /* the epilogues' staged rows reuse xn's and the weights' space */
    static_assert(sizeof(float) * TR_ROWS * SO <= 2 * ((size_t)XH + 2 * 2 * (size_t)WH),
                  "forward: the staged rows fit the tiles' space");
    static_assert(sizeof(float) * TR_ROWS * SO <= 2 * (2 * (size_t)XH + 2 * 3 * (size_t)WH),
                  "backward: the staged rows fit below the reduction rows");
};

#if TF_WG_CODE
/* 8 halves at p: one 16-byte load when vec, else 8 */
__device__ __forceinline__ uint4 tr_load8(const uint16_t *p, bool vec)
{
    if (vec) return *(const uint4 *)p;
    uint16_t v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = p[i];
    uint4 r;
    memcpy(&r, v, 16);
    return r;
}

/* a K-major tile of R rows, k = K columns, whose row r is the 8-aligned
 * source run src(r, q) for column group q (rows of the stored matrix) */
template <int R, int K, int UNROLL = R * K / 8 / TR_THREADS, class SRC>
__device__ __forceinline__ void tr_copy(uint16_t *d, SRC src, bool vec)
{
    static_assert(R * K / 8 % TR_THREADS == 0, "a tile's copies: a whole number a thread");
#pragma unroll UNROLL
    for (int u = 0; u < R * K / 8 / TR_THREADS; ++u) {
        const int e = (int)threadIdx.x + u * TR_THREADS, r = e % R, q = e / R;
        uint16_t *o = d + tf_wg_off(r, 8 * q, R);
        if (vec) tf_cp_async((float *)o, (const float *)src(r, q), 16, true);
        else *(uint4 *)o = tr_load8(src(r, q), false);
    }
}
/* an N-major tile of N columns, k = K: the stored matrix's row k holds the
 * tile's columns along n, 8 at a time from src(k, q) (columns 8 q ..) */
template <int N, int K, class SRC>
__device__ __forceinline__ void tr_copy_mn(uint16_t *d, SRC src, bool vec)
{
    static_assert(N * K / 8 % TR_THREADS == 0, "a tile's copies: a whole number a thread");
#pragma unroll
    for (int u = 0; u < N * K / 8 / TR_THREADS; ++u) {
        const int e = (int)threadIdx.x + u * TR_THREADS, q = e % (N / 8), k = e / (N / 8);
        uint16_t *o = d + tf_wg_off_mn(8 * q, k, N);
        if (vec) tf_cp_async((float *)o, (const float *)src(k, q), 16, true);
        else *(uint4 *)o = tr_load8(src(k, q), false);
    }
}

/* the forward's tiles of chunk j0: W1c (rows = hidden units, k = C) and
 * W2c^T (rows = C outputs, k = the chunk's units) */
template <int C>
__device__ __forceinline__ void tr_stage_fwd(uint16_t *w1, uint16_t *w2, const uint16_t *W1,
                                             const uint16_t *W2, int j0, bool vec)
{
    typedef tr_cfg<C> K;
    tr_copy<TR_HC, C, 1>(w1, [&](int r, int q) { return W1 + (long)(j0 + r) * C + 8 * q; }, vec);
    tr_copy<C, TR_HC, 1>(w2, [&](int r, int q) { return W2 + (long)r * K::H + j0 + 8 * q; }, vec);
}

/* a row's NV values of the lane, one vector load */
template <int NV>
__device__ __forceinline__ void tr_load_row(float *v, const float *p)
{
    if constexpr (NV == 4) {
        const float4 t = *(const float4 *)p;
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        const float2 t = *(const float2 *)p;
        v[0] = t.x, v[1] = t.y;
    }
}

template <int NV>
__device__ __forceinline__ void tr_store_row(float *p, const float *v)
{
    if constexpr (NV == 4) *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
    else *(float2 *)p = make_float2(v[0], v[1]);
}

/* The block's rows: xn = LN(x) rounded to E into the K-major tile sx (zero
 * past rows), a warp the 16 rows 16 w.., a lane NV adjacent columns; the
 * statistics saved (fwd) or read (bwd); xo (bwd) gets xn. The loads of
 * TR_AHEAD rows go out before any of their sums: a row at a time, the
 * prologue is a chain of memory latencies. */
#define TR_AHEAD 8
#define TR_BAHEAD 4 /* the backward's epilogue: 8 spill at C 128 */
template <class E, int C, bool SAVE>
__device__ __forceinline__ void tr_prologue(uint16_t *sx, float *mean, float *rstd, E *xo,
                                            const float *x, const float *gamma, const float *beta,
                                            long r0, long rows, float eps)
{
    typedef tr_cfg<C> K;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, c0 = K::NV * lane;
    float gm[K::NV], bt[K::NV];
    tr_load_row<K::NV>(gm, gamma + c0);
    tr_load_row<K::NV>(bt, beta + c0);
#pragma unroll 1
    for (int i0 = 0; i0 < 16; i0 += TR_AHEAD) {
        float v[TR_AHEAD][K::NV], mu[TR_AHEAD], rs[TR_AHEAD];
#pragma unroll
        for (int i = 0; i < TR_AHEAD; ++i) {
            const long r = r0 + 16 * warp + i0 + i;
            if (r < rows) {
                tr_load_row<K::NV>(v[i], x + r * C + c0);
                if (!SAVE) mu[i] = mean[r], rs[i] = rstd[r];
            } else {
                mu[i] = 0.f, rs[i] = 0.f;
#pragma unroll
                for (int k = 0; k < K::NV; ++k) v[i][k] = 0.f;
            }
        }
#pragma unroll
        for (int i = 0; i < TR_AHEAD; ++i) {
            const int rl = 16 * warp + i0 + i;
            const long r = r0 + rl;
            const bool in = r < rows; /* warp-uniform; a row past the end sums zeros */
            if (SAVE) { /* the shuffles outside any branch: no divergent path */
                float s = 0.f;
#pragma unroll
                for (int k = 0; k < K::NV; ++k) s += v[i][k];
                mu[i] = tf_warp_sum(s) / C;
                float q = 0.f;
#pragma unroll
                for (int k = 0; k < K::NV; ++k) q += (v[i][k] - mu[i]) * (v[i][k] - mu[i]);
                rs[i] = 1.f / sqrtf(tf_warp_sum(q) / C + eps);
                if (in && lane == 0) mean[r] = mu[i], rstd[r] = rs[i];
            }
            uint16_t u[K::NV];
#pragma unroll
            for (int k = 0; k < K::NV; ++k)
                u[k] = in ? tf_tile_round<E>((v[i][k] - mu[i]) * rs[i] * gm[k] + bt[k]) : (uint16_t)0;
            if (in && xo) memcpy((uint16_t *)(xo + r * C + c0), u, sizeof u);
            memcpy(sx + tf_wg_off(rl, c0, TR_ROWS), u, sizeof u); /* NV <= 4: one column group */
        }
    }
}

/* the warp's NT accumulator tiles (its 16 rows: g and g + 8, columns
 * 8 n + 2 t and + 1) as 16 rows of stride SO floats at s; SO = C + 8 puts
 * the 8 quads' float2 stores in distinct banks */
template <int NT, int SO>
__device__ __forceinline__ void tr_acc_to_rows(float *s, const float (*acc)[4])
{
    const int lane = (int)threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
            *(float2 *)(s + (g + 8 * hh) * SO + 8 * n + 2 * t) =
                make_float2(acc[n][2 * hh], acc[n][2 * hh + 1]);
}

/* d (64 x N) = a b over K = KD: the warpgroup's rows of the K-major tile a
 * (TR_ROWS rows), b a K-major tile of N rows or (TB) an N-major tile of N
 * columns (both from shared memory) */
template <class E, int N, int KD, bool TB = false>
__device__ __forceinline__ void tr_mma_ss(float (*d)[4], const uint16_t *a, const uint16_t *b)
{
    const int wg = (int)threadIdx.x / 128;
#pragma unroll
    for (int k0 = 0; k0 < KD; k0 += 16)
        tf_wg_mma_ss<E, N, TB>(d, tf_wg_desc(a + 512 * wg + k0 * TR_ROWS, TR_ROWS * 16, 128),
                               tf_wg_desc(b + k0 * N, N * 16, 128));
}
/* d (64 x N) += a b over K = 64, complete on return: a the 4 A fragments
 * in registers, b a K-major tile of N rows or (TB) an N-major one */
template <class E, int N, bool TB = false>
__device__ __forceinline__ void tr_mma_rs(float (*d)[4], const uint32_t (*a)[4], const uint16_t *b)
{
    tf_wg_reg_fence<N / 8>(d);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < TR_HC / 16; ++kk)
        tf_wg_mma_rs<E, N, TB>(d, a[kk], tf_wg_desc(b + 16 * kk * N, N * 16, 128));
    wg_commit();
    wg_wait0();
    tf_wg_reg_fence<N / 8>(d);
}
#endif /* TF_WG_CODE */

template <class E, int C>
__global__ void __launch_bounds__(TR_THREADS, 2) /* 2 blocks an SM: <= 128 registers */
tr_fwd_kernel(float *x_out, float *mean, float *rstd, const float *x, const float *gamma,
              const float *beta, const uint16_t *W1, const uint16_t *W2, long rows, float eps,
              bool vec)
{
#if TF_WG_CODE
    typedef tr_cfg<C> K;
    TF_SMEM(smf);
    uint16_t *sx = (uint16_t *)smf, *sw = sx + K::XH; /* stage s: W1c at sw + 2 s WH, W2c^T after */
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const long r0 = (long)blockIdx.x * TR_ROWS;
    if (x_out) tr_stage_fwd<C>(sw, sw + K::WH, W1, W2, 0, vec);
    tf_cp_commit();
    tr_prologue<E, C, true>(sx, mean, rstd, (E *)NULL, x, gamma, beta, r0, rows, eps);
    if (!x_out) { /* only the statistics (a recomputed forward) */
        tf_cp_wait<0>();
        return;
    }
    float acc[K::NT][4];
    tf_tile_zero<K::NT>(acc);
#pragma unroll 1
    for (int i = 0; i < K::NCH; ++i) {
        if (i + 1 < K::NCH) {
            uint16_t *nw = sw + ((i + 1) & 1) * 2 * K::WH;
            tr_stage_fwd<C>(nw, nw + K::WH, W1, W2, (i + 1) * TR_HC, vec);
        }
        tf_cp_commit();
        tf_cp_wait<1>(); /* chunk i has landed (this thread's copies) */
        wg_proxy_fence();
        __syncthreads();
        const uint16_t *w1 = sw + (i & 1) * 2 * K::WH, *w2 = w1 + K::WH;
        float h[8][4];
        tf_tile_zero<8>(h);
        tf_wg_reg_fence<8>(h);
        wg_fence();
        tr_mma_ss<E, TR_HC, C>(h, sx, w1);
        wg_commit();
        wg_wait0();
        tf_wg_reg_fence<8>(h);
        uint32_t ha[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                h[2 * kk][e] = fmaxf(h[2 * kk][e], 0.f);
                h[2 * kk + 1][e] = fmaxf(h[2 * kk + 1][e], 0.f);
            }
            tf_tile_c2a<E>(ha[kk], h[2 * kk], h[2 * kk + 1]);
        }
        tr_mma_rs<E, C>(acc, ha, w2);
        __syncthreads(); /* stage i & 1 is free for chunk i + 2 */
    }
    /* x_out = x + acc: the warp's rows through shared memory (the loop's
     * last barrier freed it), then a row at a time with 16-byte accesses,
     * TR_AHEAD rows' loads of x before any store */
    float *so = (float *)smf + warp * 16 * K::SO;
    tr_acc_to_rows<K::NT, K::SO>(so, acc);
    __syncwarp();
    const int c0 = K::NV * lane;
#pragma unroll 1
    for (int i0 = 0; i0 < 16; i0 += TR_AHEAD) {
        float v[TR_AHEAD][K::NV];
#pragma unroll
        for (int i = 0; i < TR_AHEAD; ++i) {
            const long r = r0 + 16 * warp + i0 + i;
            if (r < rows) tr_load_row<K::NV>(v[i], x + r * C + c0);
        }
#pragma unroll
        for (int i = 0; i < TR_AHEAD; ++i) {
            const long r = r0 + 16 * warp + i0 + i;
            if (r >= rows) break; /* warp-uniform */
            float a[K::NV];
            tr_load_row<K::NV>(a, so + (i0 + i) * K::SO + c0);
#pragma unroll
            for (int k = 0; k < K::NV; ++k) a[k] += v[i][k];
            tr_store_row<K::NV>(x_out + r * C + c0, a);
        }
    }
#else
    (void)x_out, (void)mean, (void)rstd, (void)x, (void)gamma, (void)beta, (void)W1, (void)W2;
    (void)rows, (void)eps, (void)vec; /* no wgmma here: caps.transition_op is 0 */
#endif
}

#if TF_WG_CODE
/* the backward's tiles of chunk j0: W1c (K-major: rows = units, k = C: h),
 * W2c for dp = dy W2c (N-major: n = units, k = C, straight from W2's rows)
 * and W1c for dxn = dh W1c (N-major: n = C, k = units, from W1's rows) */
template <int C>
__device__ __forceinline__ void tr_stage_bwd(uint16_t *w1, const uint16_t *W1, const uint16_t *W2,
                                             int j0, bool vec)
{
    typedef tr_cfg<C> K;
    tr_copy<TR_HC, C>(w1, [&](int r, int q) { return W1 + (long)(j0 + r) * C + 8 * q; }, vec);
    tr_copy_mn<TR_HC, C>(w1 + K::WH, [&](int k, int q) { return W2 + (long)k * K::H + j0 + 8 * q; },
                         vec);
    tr_copy_mn<C, TR_HC>(w1 + 2 * K::WH,
                         [&](int k, int q) { return W1 + (long)(j0 + k) * C + 8 * q; }, vec);
}
#endif

template <class E, int C>
__global__ void __launch_bounds__(TR_THREADS, 1)
tr_bwd_kernel(float *dx, float *part, E *xn, E *hout, E *dhout, const E *dy, const float *x,
              const float *mean, const float *rstd, const float *gamma, const float *beta,
              const uint16_t *W1, const uint16_t *W2, long rows, bool vec, bool hvec)
{
#if TF_WG_CODE
    typedef tr_cfg<C> K;
    TF_SMEM(smf);
    uint16_t *sx = (uint16_t *)smf, *sdy = sx + K::XH, *sw = sdy + K::XH;
    float *red = (float *)(sw + 2 * 3 * K::WH); /* [8 warps][2C], then the block's row [2C] */
    float *tot = red + (TR_THREADS / 32) * 2 * C;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    uint16_t *sh = (uint16_t *)(tot + 2 * C) + warp * K::SH, *sdh = sh + 16 * K::SP;
    const int g = lane >> 2, t = lane & 3, row0 = 16 * warp, c0 = K::NV * lane;
    for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) tot[c] = 0.f;
    const long ntiles = (rows + TR_ROWS - 1) / TR_ROWS;
    for (long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const long r0 = tile * TR_ROWS;
        __syncthreads(); /* the last tile's readers of every buffer are done */
        tr_stage_bwd<C>(sw, W1, W2, 0, vec);
        tf_cp_commit();
        tr_prologue<E, C, false>(sx, const_cast<float *>(mean), const_cast<float *>(rstd), xn, x,
                                 gamma, beta, r0, rows, 0.f);
        { /* the warp's rows of dy, all loads first */
            uint16_t u[16][K::NV] = {};
#pragma unroll
            for (int i = 0; i < 16; ++i)
                if (r0 + row0 + i < rows)
                    memcpy(u[i], (const uint16_t *)(dy + (r0 + row0 + i) * C + K::NV * lane), sizeof u[i]);
#pragma unroll
            for (int i = 0; i < 16; ++i)
                memcpy(sdy + tf_wg_off(row0 + i, K::NV * lane, TR_ROWS), u[i], sizeof u[i]);
        }
        float acc[K::NT][4]; /* dxn */
        tf_tile_zero<K::NT>(acc);
#pragma unroll 1
        for (int i = 0; i < K::NCH; ++i) {
            if (i + 1 < K::NCH) tr_stage_bwd<C>(sw + ((i + 1) & 1) * 3 * K::WH, W1, W2, (i + 1) * TR_HC, vec);
            tf_cp_commit();
            tf_cp_wait<1>();
            wg_proxy_fence();
            __syncthreads();
            const uint16_t *w1 = sw + (i & 1) * 3 * K::WH, *w2t = w1 + K::WH, *w1t = w2t + K::WH;
            const int j0 = i * TR_HC;
            float c1[8][4], d1[8][4];
            tf_tile_zero<8>(c1);
            tf_tile_zero<8>(d1);
            tf_wg_reg_fence<8>(c1);
            tf_wg_reg_fence<8>(d1);
            wg_fence();
            tr_mma_ss<E, TR_HC, C>(c1, sx, w1);
            tr_mma_ss<E, TR_HC, C, true>(d1, sdy, w2t);
            wg_commit();
            wg_wait0();
            tf_wg_reg_fence<8>(c1);
            tf_wg_reg_fence<8>(d1);
            /* h rounded (the stored h of the composition), the mask h > 0,
             * dh rounded; both written for the weight gradients, through the
             * warp's staging rows so that a lane stores 16 bytes of a row.
             * h = max(c, 0) is never NaN, so its pair rounds in one packed
             * conversion with tf_dtype.h's bits; h > 0 is a bit test (its
             * rounded values are +-0, positive or +inf). dh's pairs are at
             * once the A fragments of dxn += dh W1c (tf_tile_c2a's order). */
            uint32_t da[4][4];
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const int e = 2 * hh;
                    const uint32_t hp = tf_tile_pack<E>(fmaxf(c1[n][e], 0.f), fmaxf(c1[n][e + 1], 0.f));
                    const uint32_t dp =
                        (uint32_t)tf_tile_round<E>(hp & 0x7fffu ? d1[n][e] : 0.f) |
                        (uint32_t)tf_tile_round<E>(hp & 0x7fff0000u ? d1[n][e + 1] : 0.f) << 16;
                    const int o = (g + 8 * hh) * K::SP + 8 * n + 2 * t;
                    *(uint32_t *)(sh + o) = hp;
                    *(uint32_t *)(sdh + o) = dp;
                    da[n >> 1][(n & 1) * 2 + hh] = dp;
                }
            __syncwarp();
#pragma unroll
            for (int it = 0; it < 16 * TR_HC / 8 / 32; ++it) {
                const int e = 32 * it + lane, rr = e / (TR_HC / 8), q = e % (TR_HC / 8);
                const long r = r0 + row0 + rr;
                if (r >= rows) continue;
                const long o = r * K::H + j0 + 8 * q;
                const uint4 hv = *(const uint4 *)(sh + rr * K::SP + 8 * q);
                const uint4 dv = *(const uint4 *)(sdh + rr * K::SP + 8 * q);
                if (hvec) {
                    *(uint4 *)(hout + o) = hv;
                    *(uint4 *)(dhout + o) = dv;
                } else {
                    memcpy((uint16_t *)(hout + o), &hv, 16);
                    memcpy((uint16_t *)(dhout + o), &dv, 16);
                }
            }
            tr_mma_rs<E, C, true>(acc, da, w1t);
            __syncthreads(); /* stage i & 1 is free for chunk i + 2 */
        }
        /* the LayerNorm's backward a row at a time: dxn rounded to E (the
         * composition stores it) into the warp's rows in shared memory (the
         * loop's last barrier freed it), then per row of the warp, a lane
         * NV adjacent columns with 16-byte loads of x and dx (TR_BAHEAD
         * rows' loads first): g = dxn gamma, dx += rstd (g - mean(g) - xhat
         * mean(g xhat)); the lane's columns of dgamma, dbeta summed over the
         * warp's rows in row order */
        float *so = (float *)smf + warp * 16 * K::SO;
#pragma unroll
        for (int n = 0; n < K::NT; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[n][e] = tf_tile_widen<E>(tf_tile_round<E>(acc[n][e]));
        tr_acc_to_rows<K::NT, K::SO>(so, acc);
        __syncwarp();
        float pg[K::NV] = {}, pb[K::NV] = {}, gm[K::NV];
        tr_load_row<K::NV>(gm, gamma + c0);
#pragma unroll 1
        for (int i0 = 0; i0 < 16; i0 += TR_BAHEAD) {
            float xv[TR_BAHEAD][K::NV], dv[TR_BAHEAD][K::NV], mu[TR_BAHEAD], rs[TR_BAHEAD];
#pragma unroll
            for (int i = 0; i < TR_BAHEAD; ++i) {
                const long r = r0 + row0 + i0 + i;
                if (r < rows) {
                    tr_load_row<K::NV>(xv[i], x + r * C + c0);
                    tr_load_row<K::NV>(dv[i], dx + r * C + c0);
                    mu[i] = mean[r], rs[i] = rstd[r];
                }
            }
#pragma unroll
            for (int i = 0; i < TR_BAHEAD; ++i) {
                const long r = r0 + row0 + i0 + i;
                if (r >= rows) break; /* warp-uniform */
                float d[K::NV], xh[K::NV], gv[K::NV], sg = 0.f, sgx = 0.f;
                tr_load_row<K::NV>(d, so + (i0 + i) * K::SO + c0);
#pragma unroll
                for (int k = 0; k < K::NV; ++k) {
                    xh[k] = (xv[i][k] - mu[i]) * rs[i];
                    gv[k] = d[k] * gm[k];
                    sg += gv[k];
                    sgx += gv[k] * xh[k];
                    pg[k] += d[k] * xh[k];
                    pb[k] += d[k];
                }
                const float mg = tf_warp_sum(sg) / C, mgx = tf_warp_sum(sgx) / C;
#pragma unroll
                for (int k = 0; k < K::NV; ++k) dv[i][k] += rs[i] * (gv[k] - mg - xh[k] * mgx);
                tr_store_row<K::NV>(dx + r * C + c0, dv[i]);
            }
        }
#pragma unroll
        for (int k = 0; k < K::NV; ++k)
            red[warp * 2 * C + c0 + k] = pg[k], red[warp * 2 * C + C + c0 + k] = pb[k];
        __syncthreads();
        for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) {
            float s = tot[c];
#pragma unroll
            for (int w = 0; w < TR_THREADS / 32; ++w) s += red[w * 2 * C + c]; /* warp order */
            tot[c] = s;
        }
    }
    __syncthreads();
    for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) part[blockIdx.x * 2L * C + c] = tot[c];
#else
    (void)dx, (void)part, (void)xn, (void)hout, (void)dhout, (void)dy, (void)x, (void)mean;
    (void)rstd, (void)gamma, (void)beta, (void)W1, (void)W2, (void)rows, (void)vec, (void)hvec;
#endif
}

/* dgamma[c] += sum_b part[b][c], dbeta[c] += sum_b part[b][C + c], b in order */
__global__ void tr_dparams_kernel(float *dgamma, float *dbeta, const float *part, int nblk, int C)
{
    const int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= 2 * C) return;
    float s = 0.f;
    for (int b = 0; b < nblk; ++b) s += part[(long)b * 2 * C + c];
    if (c < C) dgamma[c] += s;
    else dbeta[c - C] += s;
}

template <class E, int C>
static void tr_fwd(tf_backend *be, float *x_out, float *mean, float *rstd, const float *x,
                   const float *gamma, const float *beta, const void *W1, const void *W2,
                   long rows, float eps)
{
    const bool vec = tf_cu_aligned(W1, 16) && tf_cu_aligned(W2, 16);
    const dim3 grid((unsigned)((rows + TR_ROWS - 1) / TR_ROWS));
    TF_LAUNCH_SMEM((tr_fwd_kernel<E, C>), grid, TR_THREADS, tr_cfg<C>::FWD_BYTES, be, x_out, mean,
                   rstd, x, gamma, beta, (const uint16_t *)W1, (const uint16_t *)W2, rows, eps,
                   vec);
}

/* blocks of the backward: a tile each, at most as many as the scratch holds
 * partial rows (a function of rows and C only: the sums' order is fixed) */
template <class E, int C>
static void tr_bwd(tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn, void *h,
                   void *dh, const void *dy, const float *x, const float *mean, const float *rstd,
                   const float *gamma, const float *beta, const void *W1, const void *W2,
                   long rows)
{
    const bool vec = tf_cu_aligned(W1, 16) && tf_cu_aligned(W2, 16);
    const bool hvec = tf_cu_aligned(h, 16) && tf_cu_aligned(dh, 16);
    const long ntiles = (rows + TR_ROWS - 1) / TR_ROWS;
    const long cap = (long)(TF_CU_SCRATCH_FLOATS / (2 * (size_t)C));
    const long nblk = ntiles < cap ? ntiles : cap;
    TF_LAUNCH_SMEM((tr_bwd_kernel<E, C>), dim3((unsigned)nblk), TR_THREADS, tr_cfg<C>::BWD_BYTES,
                   be, dx, be->scratch, (E *)xn, (E *)h, (E *)dh, (const E *)dy, x, mean, rstd,
                   gamma, beta, (const uint16_t *)W1, (const uint16_t *)W2, rows, vec, hvec);
    TF_LAUNCH(tr_dparams_kernel, dim3((unsigned)((2 * C + 127) / 128)), dim3(128), be->stream,
              dgamma, dbeta, (const float *)be->scratch, (int)nblk, C);
}

static void tr_bad(const char *op, int C, tf_dtype t)
{
    fprintf(stderr, "tinyfold: internal error: %s with C = %d, type %d (caps.transition_op)\n",
            op, C, (int)t);
    abort();
}

extern "C" void tf_cu_transition_fwd_h(tf_backend *be, float *x_out, float *mean, float *rstd,
                                       const float *x, const float *gamma, const float *beta,
                                       const void *W1, const void *W2, long rows, int C,
                                       float eps, tf_dtype t)
{
    if (rows <= 0) return;
    if (C == 64)
        TF_CU_DISPATCH_HALF(t, E, tr_fwd<E, 64>(be, x_out, mean, rstd, x, gamma, beta, W1, W2,
                                                rows, eps));
    else if (C == 128)
        TF_CU_DISPATCH_HALF(t, E, tr_fwd<E, 128>(be, x_out, mean, rstd, x, gamma, beta, W1, W2,
                                                 rows, eps));
    else
        tr_bad("transition_fwd", C, t);
}

extern "C" void tf_cu_transition_bwd_h(tf_backend *be, float *dx, float *dgamma, float *dbeta,
                                       void *xn, void *h, void *dh, const void *dy,
                                       const float *x, const float *mean, const float *rstd,
                                       const float *gamma, const float *beta, const void *W1,
                                       const void *W2, long rows, int C, tf_dtype t)
{
    if (rows <= 0) return;
    if (C == 64)
        TF_CU_DISPATCH_HALF(t, E, tr_bwd<E, 64>(be, dx, dgamma, dbeta, xn, h, dh, dy, x, mean,
                                                rstd, gamma, beta, W1, W2, rows));
    else if (C == 128)
        TF_CU_DISPATCH_HALF(t, E, tr_bwd<E, 128>(be, dx, dgamma, dbeta, xn, h, dh, dy, x, mean,
                                                 rstd, gamma, beta, W1, W2, rows));
    else
        tr_bad("transition_bwd", C, t);
}
