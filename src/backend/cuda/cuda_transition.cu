/* The transition's MLP as one kernel each way for bf16 / fp16 (ops.h
 * transition_fwd/_bwd, C 64 or 128, H = 4C hidden), on mma.sync m16n8k16
 * (cuda_tile.h). NVIDIA only; the HIP build and fp32 / tf32 compose
 * LayerNorm and GEMM ops (transition.c, gpu_plan.h tf_gpu_mlp_fused).
 *
 * Forward, tr_fwd_kernel: a block of TR_ROWS = 64 rows, 4 warps, warp w the
 * 16 rows 16w.. of it. Prologue: each warp normalises its rows (two-pass
 * variance, a row a pass of the warp), saves mean and rstd and puts xn,
 * rounded to E, in shared memory. Then for each chunk of TR_HC = 64 hidden
 * units the block stages W1's rows and W2's columns of the chunk in shared
 * memory, and each warp, 16 hidden units at a time, multiplies its xn by
 * W1's 16 rows (2 C tiles, K = C), applies the ReLU, packs the result into
 * an A fragment (tf_tile_c2a: h rounded to E, as the composition stores it)
 * and multiplies it by W2's 16 columns into its 16 x C fp32 accumulator
 * (C / 8 tiles). The [rows, 4C] hidden layer never leaves the registers.
 * Epilogue: x_out = x + acc, fp32. Registers: the accumulator (C / 2 a
 * lane), 8 for h, the fragments.
 *
 * Backward, tr_bwd_kernel: the same block; prologue xn again from x and the
 * saved statistics (the forward's expression: the same bits) and dy, both
 * in shared memory, xn also written out. Per 16 hidden units: h = relu(xn
 * W1c^T) (written out, rounded), dh = (dy W2c) where h > 0, rounded to E
 * (written out; its A fragment straight from the accumulator), dxn += dh
 * W1c (16 x C fp32 per warp). Then dxn is rounded to E (the composition
 * stores it) and the LayerNorm's backward runs on the fragments: a row's C
 * values sit in the 4 lanes of a quad, so its two sums are two shuffles;
 * dx += rstd (g - mean(g) - xhat mean(g xhat)), g = dxn gamma. dgamma and
 * dbeta: each warp's column sums over its rows (quad-order shuffles), added
 * in warp order into the block's running row in shared memory; a block
 * takes tiles blockIdx.x, + gridDim.x, ... (the grid a function of rows
 * only), writes its row of 2C partials to the backend's scratch, and
 * tr_dparams_kernel adds the rows in block order: deterministic, no atomics.
 * The weight gradients are the caller's GEMMs on the xn, h and dh written
 * here (dW2 += dy^T h, dW1 += dh^T xn), so they can run on the lane; the
 * alternative, a kernel recomputing h per hidden chunk over fixed row
 * slices with partials reduced in order, saves writing and reading h and dh
 * (4 x 2 rows 4C bytes) but is a third kernel of its own.
 *
 * Shared memory rows are C + 8 and TR_HC + 8 halves (8 mod 64: the fragment
 * loads hit 32 distinct banks). Bytes a block (C = 128): forward 53,248
 * (xn 17,408, W1 chunk 17,408, W2 chunk 18,432), backward 75,776 (+ dy,
 * the partial rows). nvcc -Xptxas -v, sm_90a, C = 128: forward 128
 * registers, no spills (4 blocks an SM); backward held to 168 by
 * TR_BWD_MINB (3 blocks an SM, 104 bytes of spills; unbounded it took 247);
 * C = 64: 80 and 168 (no spills). The weight chunks are loaded
 * with plain 16-byte loads between two barriers (cp.async double buffering
 * is the next step).
 *
 * The large problem's pair transition (rows = 4 * 128 * 128 = 65,536,
 * C = 128, H = 512), bf16:
 *   forward FLOPs: 2 GEMMs x 2 rows C H = 17.2 GFLOP (+ LN ~0.07);
 *     bytes: x read and x_out written in fp32, 2 x 33.5 MB = 67 MB, stats
 *     0.5 MB, the weights 256 KB a block from L2 (1024 blocks: 268 MB of L2
 *     traffic, ~0.1 MB from DRAM); the composition moved 67 MB of h (bf16,
 *     written and read) and 33.5 MB of xn more, and wrote h for the backward.
 *     ~67 MB / 3.3 TB/s ~ 20 us against 17.2 GFLOP / ~700 TFLOP/s (dense
 *     bf16 on mma.sync, less in practice) ~ 25-50 us: compute-bound.
 *   backward FLOPs: 3 GEMMs in the kernel (h again, dh, dxn) 25.8 GFLOP;
 *     bytes: x 33.5 MB, dx read and written 67 MB, dy 16.8 MB, xn 16.8 MB,
 *     h and dh written 2 x 67 MB: ~268 MB; then the two weight-gradient
 *     GEMMs (17.2 GFLOP, reading dy, h, dh, xn: ~168 MB). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"
#include "cuda_tile.h"

#define TR_ROWS 64 /* rows a block */
#define TR_WARPS 4 /* 16 rows each */
#define TR_HC 64   /* hidden units a staged chunk */
#define TR_THREADS (TR_WARPS * 32)
#define TR_BWD_MINB 3 /* blocks an SM the backward's registers allow (<= 168 a thread) */

template <int C>
struct tr_cfg {
    static_assert(C == 64 || C == 128, "transition kernels: C 64 or 128");
    static constexpr int H = 4 * C;
    static constexpr int LDX = C + 8;     /* xn, dy, W1 chunk rows */
    static constexpr int LDW2 = TR_HC + 8; /* W2 chunk rows (its C rows, the chunk's columns) */
    static constexpr int NV = C / 32;     /* a row's values a lane in the prologue */
    static constexpr int NT = C / 8;      /* accumulator tiles a warp */
    static constexpr size_t W_HALVES = (size_t)TR_HC * LDX + (size_t)C * LDW2;
    static constexpr size_t FWD_BYTES = 2 * ((size_t)TR_ROWS * LDX + W_HALVES);
    static constexpr size_t BWD_BYTES =
        2 * (2 * (size_t)TR_ROWS * LDX + W_HALVES) + sizeof(float) * (TR_WARPS + 1) * 2 * C;
};

/* W1's rows j0.. and W2's columns j0.. of the chunk into shared memory
 * (16-byte loads when vec, else 2-byte ones) */
template <int C>
__device__ __forceinline__ void tr_stage(uint16_t *s1, uint16_t *s2, const uint16_t *W1,
                                         const uint16_t *W2, int j0, bool vec)
{
    typedef tr_cfg<C> K;
    if (vec) {
        for (int e = (int)threadIdx.x; e < TR_HC * C / 8; e += TR_THREADS) {
            const int r = e / (C / 8), c = 8 * (e % (C / 8));
            *(uint4 *)(s1 + r * K::LDX + c) = *(const uint4 *)(W1 + (long)(j0 + r) * C + c);
        }
        for (int e = (int)threadIdx.x; e < C * TR_HC / 8; e += TR_THREADS) {
            const int r = e / (TR_HC / 8), c = 8 * (e % (TR_HC / 8));
            *(uint4 *)(s2 + r * K::LDW2 + c) = *(const uint4 *)(W2 + (long)r * K::H + j0 + c);
        }
    } else {
        for (int e = (int)threadIdx.x; e < TR_HC * C; e += TR_THREADS) {
            const int r = e / C, c = e % C;
            s1[r * K::LDX + c] = W1[(long)(j0 + r) * C + c];
        }
        for (int e = (int)threadIdx.x; e < C * TR_HC; e += TR_THREADS) {
            const int r = e / TR_HC, c = e % TR_HC;
            s2[r * K::LDW2 + c] = W2[(long)r * K::H + j0 + c];
        }
    }
}

/* h (2 C tiles: 16 rows x 16 hidden units js..) = xn W1c^T for the warp's
 * rows, K = C */
template <class E, int C>
__device__ __forceinline__ void tr_hidden(float (*c1)[4], const uint16_t *sx, const uint16_t *s1,
                                          int row0, int js)
{
    typedef tr_cfg<C> K;
    tf_tile_zero<2>(c1);
#pragma unroll
    for (int k0 = 0; k0 < C; k0 += 16) {
        uint32_t a[4], b0[2], b1[2];
        tf_tile_load_a(a, sx, K::LDX, row0, k0);
        tf_tile_load_bt(b0, s1, K::LDX, js, k0);
        tf_tile_load_bt(b1, s1, K::LDX, js + 8, k0);
        tf_tile_mma<E>(c1[0], a, b0);
        tf_tile_mma<E>(c1[1], a, b1);
    }
}

/* The warp's 16 rows of the block: xn = LN(x) rounded to E into sx (zero
 * past rows); the statistics saved (fwd) or read (bwd); xo (bwd) gets xn */
template <class E, int C, bool SAVE>
__device__ __forceinline__ void tr_prologue(uint16_t *sx, float *mean, float *rstd,
                                            E *xo, const float *x, const float *gamma,
                                            const float *beta, long r0, long rows, float eps)
{
    typedef tr_cfg<C> K;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    for (int i = 0; i < 16; ++i) {
        const int rl = 16 * warp + i;
        const long r = r0 + rl;
        uint16_t *d = sx + rl * K::LDX;
        if (r >= rows) { /* warp-uniform */
#pragma unroll
            for (int k = 0; k < K::NV; ++k) d[lane + 32 * k] = 0;
            continue;
        }
        float v[K::NV];
#pragma unroll
        for (int k = 0; k < K::NV; ++k) v[k] = x[r * C + lane + 32 * k];
        float mu, rs;
        if (SAVE) {
            float s = 0.f;
#pragma unroll
            for (int k = 0; k < K::NV; ++k) s += v[k];
            mu = tf_warp_sum(s) / C;
            float q = 0.f;
#pragma unroll
            for (int k = 0; k < K::NV; ++k) q += (v[k] - mu) * (v[k] - mu);
            rs = 1.f / sqrtf(tf_warp_sum(q) / C + eps);
            if (lane == 0) mean[r] = mu, rstd[r] = rs;
        } else {
            mu = mean[r], rs = rstd[r];
        }
#pragma unroll
        for (int k = 0; k < K::NV; ++k) {
            const int c = lane + 32 * k;
            const uint16_t u = tf_tile_round<E>((v[k] - mu) * rs * gamma[c] + beta[c]);
            d[c] = u;
            if (xo) *(uint16_t *)(xo + r * C + c) = u;
        }
    }
}

template <class E, int C>
__global__ void __launch_bounds__(TR_THREADS)
tr_fwd_kernel(float *x_out, float *mean, float *rstd, const float *x, const float *gamma,
              const float *beta, const uint16_t *W1, const uint16_t *W2, long rows, float eps,
              bool vec)
{
    typedef tr_cfg<C> K;
    TF_SMEM(smf);
    uint16_t *sx = (uint16_t *)smf, *s1 = sx + TR_ROWS * K::LDX, *s2 = s1 + TR_HC * K::LDX;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3, row0 = 16 * warp;
    const long r0 = (long)blockIdx.x * TR_ROWS;
    tr_prologue<E, C, true>(sx, mean, rstd, (E *)NULL, x, gamma, beta, r0, rows, eps);
    if (!x_out) return; /* only the statistics (a recomputed forward) */
    float acc[K::NT][4];
    tf_tile_zero<K::NT>(acc);
    for (int j0 = 0; j0 < K::H; j0 += TR_HC) {
        __syncthreads(); /* the last chunk's readers are done (first: sx is written) */
        tr_stage<C>(s1, s2, W1, W2, j0, vec);
        __syncthreads();
#pragma unroll 1
        for (int js = 0; js < TR_HC; js += 16) {
            float c1[2][4];
            tr_hidden<E, C>(c1, sx, s1, row0, js);
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) c1[n][e] = fmaxf(c1[n][e], 0.f);
            uint32_t ha[4];
            tf_tile_c2a<E>(ha, c1[0], c1[1]);
#pragma unroll
            for (int n = 0; n < K::NT; ++n) {
                uint32_t b[2];
                tf_tile_load_bt(b, s2, K::LDW2, 8 * n, js);
                tf_tile_mma<E>(acc[n], ha, b);
            }
        }
    }
#pragma unroll
    for (int n = 0; n < K::NT; ++n) {
        const int c = 8 * n + 2 * t;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const long r = r0 + row0 + g + 8 * hh;
            if (r < rows) {
                x_out[r * C + c] = x[r * C + c] + acc[n][2 * hh];
                x_out[r * C + c + 1] = x[r * C + c + 1] + acc[n][2 * hh + 1];
            }
        }
    }
}

/* sum over the 4 lanes of a quad (the lanes holding one row's columns) */
__device__ __forceinline__ float tr_quad_sum(float v)
{
    v += tf_shfl_xor(v, 1);
    return v + tf_shfl_xor(v, 2);
}
/* sum over the 8 quads (the rows g of a column), in a fixed tree order */
__device__ __forceinline__ float tr_rows_sum(float v)
{
    v += tf_shfl_xor(v, 4);
    v += tf_shfl_xor(v, 8);
    return v + tf_shfl_xor(v, 16);
}

template <class E, int C>
__global__ void __launch_bounds__(TR_THREADS, TR_BWD_MINB)
tr_bwd_kernel(float *dx, float *part, E *xn, E *hout, E *dhout, const E *dy, const float *x,
              const float *mean, const float *rstd, const float *gamma, const float *beta,
              const uint16_t *W1, const uint16_t *W2, long rows, bool vec)
{
    typedef tr_cfg<C> K;
    TF_SMEM(smf);
    uint16_t *sx = (uint16_t *)smf, *sdy = sx + TR_ROWS * K::LDX, *s1 = sdy + TR_ROWS * K::LDX;
    uint16_t *s2 = s1 + TR_HC * K::LDX;
    float *red = (float *)(s2 + C * K::LDW2); /* [TR_WARPS][2C], then the block's row [2C] */
    float *tot = red + TR_WARPS * 2 * C;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3, row0 = 16 * warp;
    for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) tot[c] = 0.f;
    const long ntiles = (rows + TR_ROWS - 1) / TR_ROWS;
    for (long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const long r0 = tile * TR_ROWS;
        __syncthreads(); /* the last tile's readers of sx, sdy, s1, s2, red are done */
        tr_prologue<E, C, false>(sx, const_cast<float *>(mean), const_cast<float *>(rstd), xn, x, gamma, beta, r0, rows, 0.f);
        for (int i = 0; i < 16; ++i) { /* the warp's rows of dy */
            const long r = r0 + row0 + i;
            uint16_t *d = sdy + (row0 + i) * K::LDX;
#pragma unroll
            for (int k = 0; k < K::NV; ++k) {
                const int c = lane + 32 * k;
                d[c] = r < rows ? *(const uint16_t *)(dy + r * C + c) : (uint16_t)0;
            }
        }
        float acc[K::NT][4]; /* dxn */
        tf_tile_zero<K::NT>(acc);
        for (int j0 = 0; j0 < K::H; j0 += TR_HC) {
            __syncthreads();
            tr_stage<C>(s1, s2, W1, W2, j0, vec);
            __syncthreads();
#pragma unroll 1
            for (int js = 0; js < TR_HC; js += 16) {
                float c1[2][4], d1[2][4];
                tr_hidden<E, C>(c1, sx, s1, row0, js);
                /* dh = dy W2c: B[k = c][n = hidden] = W2[c][j0 + js + n] */
                tf_tile_zero<2>(d1);
#pragma unroll
                for (int k0 = 0; k0 < C; k0 += 16) {
                    uint32_t a[4], b0[2], b1[2];
                    tf_tile_load_a(a, sdy, K::LDX, row0, k0);
                    tf_tile_load_b(b0, s2, K::LDW2, js, k0);
                    tf_tile_load_b(b1, s2, K::LDW2, js + 8, k0);
                    tf_tile_mma<E>(d1[0], a, b0);
                    tf_tile_mma<E>(d1[1], a, b1);
                }
                /* h rounded (the stored h of the composition), the mask h > 0,
                 * dh rounded; both written for the weight gradients */
#pragma unroll
                for (int n = 0; n < 2; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const uint16_t hb = tf_tile_round<E>(fmaxf(c1[n][e], 0.f));
                        const float hv = tf_tile_widen<E>(hb);
                        const uint16_t db = tf_tile_round<E>(hv > 0.f ? d1[n][e] : 0.f);
                        d1[n][e] = tf_tile_widen<E>(db);
                        const long r = r0 + row0 + g + 8 * (e >> 1);
                        const int col = j0 + js + 8 * n + 2 * t + (e & 1);
                        if (r < rows) {
                            *(uint16_t *)(hout + r * K::H + col) = hb;
                            *(uint16_t *)(dhout + r * K::H + col) = db;
                        }
                    }
                uint32_t da[4];
                tf_tile_c2a<E>(da, d1[0], d1[1]); /* exact: d1 holds E's values */
                /* dxn += dh W1c: B[k = hidden][n = c] = W1[j0 + js + k][c] */
#pragma unroll
                for (int n = 0; n < K::NT; ++n) {
                    uint32_t b[2];
                    tf_tile_load_b(b, s1, K::LDX, 8 * n, js);
                    tf_tile_mma<E>(acc[n], da, b);
                }
            }
        }
        /* the LayerNorm's backward on the fragments: rows g and g + 8 of the
         * warp, columns 8n + 2t (+1); dxn rounded to E as the composition's */
        float sg[2] = {0.f, 0.f}, sgx[2] = {0.f, 0.f}, mu[2], rs[2];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const long r = r0 + row0 + g + 8 * hh;
            mu[hh] = r < rows ? mean[r] : 0.f;
            rs[hh] = r < rows ? rstd[r] : 0.f;
        }
#pragma unroll
        for (int n = 0; n < K::NT; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int hh = e >> 1, c = 8 * n + 2 * t + (e & 1);
                const long r = r0 + row0 + g + 8 * hh;
                acc[n][e] = tf_tile_widen<E>(tf_tile_round<E>(acc[n][e]));
                const float xh = r < rows ? (x[r * C + c] - mu[hh]) * rs[hh] : 0.f;
                const float gv = acc[n][e] * gamma[c];
                sg[hh] += gv;
                sgx[hh] += gv * xh;
            }
        float mg[2], mgx[2];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) mg[hh] = tr_quad_sum(sg[hh]) / C, mgx[hh] = tr_quad_sum(sgx[hh]) / C;
#pragma unroll
        for (int n = 0; n < K::NT; ++n)
#pragma unroll
            for (int j = 0; j < 2; ++j) { /* the lane's two columns of tile n */
                const int c = 8 * n + 2 * t + j;
                float pg = 0.f, pb = 0.f;
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const long r = r0 + row0 + g + 8 * hh;
                    const float d = acc[n][2 * hh + j];
                    if (r < rows) {
                        const float xh = (x[r * C + c] - mu[hh]) * rs[hh];
                        dx[r * C + c] += rs[hh] * (d * gamma[c] - mg[hh] - xh * mgx[hh]);
                        pg += d * xh;
                        pb += d;
                    }
                }
                pg = tr_rows_sum(pg);
                pb = tr_rows_sum(pb);
                if (g == 0) red[warp * 2 * C + c] = pg, red[warp * 2 * C + C + c] = pb;
            }
        __syncthreads();
        for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) {
            float s = tot[c];
#pragma unroll
            for (int w = 0; w < TR_WARPS; ++w) s += red[w * 2 * C + c]; /* warp order */
            tot[c] = s;
        }
    }
    __syncthreads();
    for (int c = (int)threadIdx.x; c < 2 * C; c += TR_THREADS) part[blockIdx.x * 2L * C + c] = tot[c];
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
    const long ntiles = (rows + TR_ROWS - 1) / TR_ROWS;
    const long cap = (long)(TF_CU_SCRATCH_FLOATS / (2 * (size_t)C));
    const long nblk = ntiles < cap ? ntiles : cap;
    TF_LAUNCH_SMEM((tr_bwd_kernel<E, C>), dim3((unsigned)nblk), TR_THREADS, tr_cfg<C>::BWD_BYTES,
                   be, dx, be->scratch, (E *)xn, (E *)h, (E *)dh, (const E *)dy, x, mean, rstd,
                   gamma, beta, (const uint16_t *)W1, (const uint16_t *)W2, rows, vec);
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
