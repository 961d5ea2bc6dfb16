/* What the tensor-core GEMM kernels share (cuda_gemm_mma.cu: mma.sync, any
 * tile; cuda_gemm_wgmma.cu: wgmma, fp32; cuda_gemm_wgmma_dw.cu: the half types'
 * weight gradients): the arguments, the cp.async
 * copy of a BK slice of the A and B tiles into shared memory in their global
 * layouts, and the split-K + epilogue of the accumulators. See
 * cuda_gemm_mma.cu for the design. */
#ifndef TF_CUDA_GEMM_MMA_H
#define TF_CUDA_GEMM_MMA_H

#include <string.h>

#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_mma.h"

#define MMA_BK 32
#define MMA_STAGES 3

typedef struct {
    int M, N, K, splits, kchunk; /* kchunk: K per split, a multiple of MMA_BK */
    const float *A;
    long lda, sA;
    const float *B;
    long ldb, sB;
    float *C;
    long ldc, sC;
    float alpha, beta;
    int relu;
    const float *R;   /* beta scales R instead of C (C's ldc and sC) when set */
    const float *aux; /* DRELU mask (C's ldc and sC): C = aux > 0 ? C : 0 after beta */
    int vec2;    /* C rows and matrices 8-byte aligned: pairs of columns stored as float2 */
    int vec4;    /* C (and R, aux) rows and matrices 16-byte aligned: float4 (mma_store_tile) */
    float *part; /* split K: [tile][split][accumulators of the block]; with sep,
                    [split][batch][M][N] */
    int *count;  /* split K: arrivals per tile, 0 between launches */
    int sep;     /* split K added by a separate kernel (tf_cu_splitk_reduce): each
                    split stores its raw products in part, none reads them back */
} mma_args;

/* ---- the kernel ------------------------------------------------------------ */
template <int BM, int BN, int WM, int WN, bool TA, bool TB>
struct mma_cfg {
    static constexpr int NT = (BM / WM) * (BN / WN) * 32;
    static constexpr int MI = WM / 16, NI = WN / 8; /* fragments per warp */
    /* row strides of the tiles (see "k order" below): +8 when k is contiguous,
     * +4 when m (n) is */
    static constexpr int SA = TA ? BM + 4 : MMA_BK + 8;
    static constexpr int SB = TB ? MMA_BK + 8 : BN + 4;
    static constexpr int A_TILE = TA ? MMA_BK * SA : BM * SA;
    static constexpr int B_TILE = TB ? BN * SB : MMA_BK * SB;
    static constexpr int STAGE = A_TILE + B_TILE; /* floats per pipeline stage */
    static constexpr int SMEM = MMA_STAGES * STAGE;
    static constexpr int ACC = MI * NI * 4; /* accumulators per thread */
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiles");
};

/* copy one BK slice of the A and B tiles (k0: its first k) into a stage */
template <class CF, int BM, int BN, bool TA, bool TB, int VEC>
__device__ __forceinline__ void mma_load(float *st, const mma_args &p, const float *A,
                                         const float *B, int m0, int n0, int k0, int ke)
{
    const int tid = (int)threadIdx.x;
    float *As = st, *Bs = st + CF::A_TILE;
    if (!TA) { /* A [M,K]: rows m, k contiguous */
        for (int i = tid; i < BM * MMA_BK / VEC; i += CF::NT) {
            const int r = i / (MMA_BK / VEC), c = (i % (MMA_BK / VEC)) * VEC;
            const int gm = m0 + r, gk = k0 + c;
            const bool ok = gm < p.M && gk < ke;
            tf_cp_async(As + r * CF::SA + c, ok ? A + (long)gm * p.lda + gk : A, VEC * 4, ok);
        }
    } else { /* A stored [K,M]: rows k, m contiguous */
        for (int i = tid; i < MMA_BK * BM / VEC; i += CF::NT) {
            const int r = i / (BM / VEC), c = (i % (BM / VEC)) * VEC;
            const int gk = k0 + r, gm = m0 + c;
            const bool ok = gk < ke && gm < p.M;
            tf_cp_async(As + r * CF::SA + c, ok ? A + (long)gk * p.lda + gm : A, VEC * 4, ok);
        }
    }
    if (!TB) { /* B [K,N]: rows k, n contiguous */
        for (int i = tid; i < MMA_BK * BN / VEC; i += CF::NT) {
            const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            const int gk = k0 + r, gn = n0 + c;
            const bool ok = gk < ke && gn < p.N;
            tf_cp_async(Bs + r * CF::SB + c, ok ? B + (long)gk * p.ldb + gn : B, VEC * 4, ok);
        }
    } else { /* B stored [N,K]: rows n, k contiguous */
        for (int i = tid; i < BN * MMA_BK / VEC; i += CF::NT) {
            const int r = i / (MMA_BK / VEC), c = (i % (MMA_BK / VEC)) * VEC;
            const int gn = n0 + r, gk = k0 + c;
            const bool ok = gn < p.N && gk < ke;
            tf_cp_async(Bs + r * CF::SB + c, ok ? B + (long)gn * p.ldb + gk : B, VEC * 4, ok);
        }
    }
}

/* Split K finished in the kernel (p.splits > 1 without p.sep: add this
 * split's partials, the last to arrive sums them in split order; the wide
 * split's raw partials go through mma_stage_finish) and the epilogue
 * (alpha, beta of R or C, ReLU, the DRELU mask; float2 stores) of
 * a warp's MI x NI fragments of 16 x 8 (mma.sync's C layout: (c0, c1) at row
 * g, (c2, c3) at g + 8), the warp's tile at (wm, wn) in the block's, NT
 * threads. Returns early in the splits that are not the last. */
template <int MI, int NI, int NT>
__device__ __forceinline__ void mma_finish(const mma_args &p, float (*acc)[NI][4], int m0, int n0,
                                           int wm, int wn, int bi, int sp)
{
    constexpr int ACC = MI * NI * 4;
    const int tid = (int)threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;
    if (p.splits > 1) {
        /* this split's accumulators, [e][thread] so that the stores coalesce */
        const long tile = ((long)bi * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        float *base = p.part + tile * p.splits * (long)(ACC * NT);
        float *mine = base + (long)sp * (ACC * NT);
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    mine[((i * NI + j) * 4 + e) * NT + tid] = acc[i][j][e];
        __threadfence(); /* the partials are visible before the arrival is counted */
        __syncthreads();
        __shared__ int last;
        if (tid == 0) last = atomicAdd(&p.count[tile], 1) == p.splits - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const long o = ((i * NI + j) * 4 + e) * NT + tid;
                    float s = 0.f;
                    for (int q = 0; q < p.splits; ++q) s += __ldcg(base + q * (long)(ACC * NT) + o);
                    acc[i][j][e] = s;
                }
        if (tid == 0) p.count[tile] = 0; /* ready for the next launch */
    }

    /* the epilogue: alpha, beta (of R when set, else of C), ReLU, the DRELU
     * mask (a select, as drelu_strided_kernel1: the same bits) */
    float *C = p.C + (long)bi * p.sC;
    const float *Rb = p.R ? p.R + (long)bi * p.sC : C;
    const float *Xb = p.aux ? p.aux + (long)bi * p.sC : NULL;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) { /* (c0, c1) at row g, (c2, c3) at g + 8 */
                const int r = m0 + wm + i * 16 + g + h * 8;
                const int c = n0 + wn + j * 8 + 2 * t;
                if (r >= p.M || c >= p.N) continue;
                const long o = (long)r * p.ldc + c;
                float v0 = p.alpha * acc[i][j][2 * h], v1 = p.alpha * acc[i][j][2 * h + 1];
                if (p.vec2 && c + 1 < p.N) {
                    if (p.beta != 0.f) {
                        const float2 q = *(const float2 *)(Rb + o);
                        v0 += p.beta * q.x, v1 += p.beta * q.y;
                    }
                    if (p.relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
                    if (Xb) {
                        const float2 m = *(const float2 *)(Xb + o);
                        v0 = m.x > 0.f ? v0 : 0.f, v1 = m.y > 0.f ? v1 : 0.f;
                    }
                    *(float2 *)(C + o) = make_float2(v0, v1);
                } else {
                    if (p.beta != 0.f) v0 += p.beta * Rb[o];
                    if (p.relu) v0 = fmaxf(v0, 0.f);
                    if (Xb) v0 = Xb[o] > 0.f ? v0 : 0.f;
                    C[o] = v0;
                    if (c + 1 < p.N) {
                        if (p.beta != 0.f) v1 += p.beta * Rb[o + 1];
                        if (p.relu) v1 = fmaxf(v1, 0.f);
                        if (Xb) v1 = Xb[o + 1] > 0.f ? v1 : 0.f;
                        C[o + 1] = v1;
                    }
                }
            }
}

/* ---- the end of a tile through shared memory -----------------------------------
 * The accumulators are staged as a [BM][BN + 8] tile in the pipeline's
 * shared memory and written by rows, BN / 4 lanes a row and 4 columns a lane
 * (float4 where the layout allows it): short code, run once a block.
 * mma_finish's per-fragment stores (~2100 SASS instructions unrolled in the
 * wgmma kernel) missed in the instruction cache: on a one-wave 16384 x 128 x
 * 128 wgmma GEMM they were half of the kernel's stall samples (ncu). Row stride BN + 8 (8 mod 32 words): the staging
 * float2 stores of a half warp (4 rows 8 words apart, 4 lanes 2 apart) hit
 * 32 distinct banks. Both kernels keep mma_finish for split K finished in
 * the kernel (p.splits > 1 without p.sep). */
#define MMA_LDT(BN) ((BN) + 8)

/* Rows [0, BM) of the staged tile T to their matrix: the raw products to
 * this split's dense [M, N] slice of p.part (wide split, p.sep), else C =
 * alpha T + beta (R or C), ReLU, then the DRELU mask (a select, as
 * drelu_strided_kernel1: the same bits). */
template <int BM, int BN, int NT>
__device__ __forceinline__ void mma_store_tile(const mma_args &p, const float *T, int m0, int n0,
                                               int bi, int sp)
{
    constexpr int LPR = BN / 4, RPP = NT / LPR; /* lanes a row, rows a pass */
    static_assert(BN % 4 == 0 && NT % LPR == 0 && BM % RPP == 0, "tile store layout");
    const int tid = (int)threadIdx.x, r0 = tid / LPR, c = n0 + 4 * (tid % LPR);
    const bool sep = p.splits > 1 && p.sep;
    float *C;
    const float *Rb = NULL, *Xb = NULL;
    long ld;
    if (sep) { /* raw products, [split][batch][M][N] */
        C = p.part + ((long)sp * ((long)gridDim.z / p.splits) + bi) * p.M * p.N;
        ld = p.N;
    } else {
        C = p.C + (long)bi * p.sC;
        ld = p.ldc;
        if (p.beta != 0.f) Rb = p.R ? p.R + (long)bi * p.sC : C;
        if (p.aux) Xb = p.aux + (long)bi * p.sC;
    }
    const bool v4 = sep ? (p.N & 3) == 0 : p.vec4 != 0;
    if (v4 && m0 + BM <= p.M && n0 + BN <= p.N) {
        /* a full tile: up to 8 passes at a time, their R / mask loads in flight
         * together */
        constexpr int U = BM / RPP < 8 ? BM / RPP : 8;
#pragma unroll
        for (int b = 0; b < BM; b += U * RPP) {
            float4 v[U], x[U], m[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int rr = b + u * RPP + r0;
                const long o = (long)(m0 + rr) * ld + c;
                v[u] = *(const float4 *)(T + rr * MMA_LDT(BN) + c - n0);
                if (Rb) x[u] = *(const float4 *)(Rb + o);
                if (Xb) m[u] = *(const float4 *)(Xb + o);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int rr = b + u * RPP + r0;
                float4 y = v[u];
                if (!sep) {
                    y.x *= p.alpha, y.y *= p.alpha, y.z *= p.alpha, y.w *= p.alpha;
                    if (Rb) {
                        y.x += p.beta * x[u].x, y.y += p.beta * x[u].y;
                        y.z += p.beta * x[u].z, y.w += p.beta * x[u].w;
                    }
                    if (p.relu) {
                        y.x = fmaxf(y.x, 0.f), y.y = fmaxf(y.y, 0.f);
                        y.z = fmaxf(y.z, 0.f), y.w = fmaxf(y.w, 0.f);
                    }
                    if (Xb) {
                        y.x = m[u].x > 0.f ? y.x : 0.f, y.y = m[u].y > 0.f ? y.y : 0.f;
                        y.z = m[u].z > 0.f ? y.z : 0.f, y.w = m[u].w > 0.f ? y.w : 0.f;
                    }
                }
                *(float4 *)(C + (long)(m0 + rr) * ld + c) = y;
            }
        }
        return;
    }
    /* ragged tiles or unaligned matrices: element by element */
#pragma unroll 1
    for (int rr = r0; rr < BM; rr += RPP) {
        const int r = m0 + rr;
        if (r >= p.M || c >= p.N) continue;
        const float4 v = *(const float4 *)(T + rr * MMA_LDT(BN) + c - n0);
        const long o = (long)r * ld + c;
#pragma unroll 1
        for (int q = 0; q < 4 && c + q < p.N; ++q) {
            float y = q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
            if (!sep) {
                y *= p.alpha;
                if (Rb) y += p.beta * Rb[o + q];
                if (p.relu) y = fmaxf(y, 0.f);
                if (Xb) y = Xb[o + q] > 0.f ? y : 0.f;
            }
            C[o + q] = y;
        }
    }
}

/* The block's BM x BN tile (NT threads, no split K left to the kernel)
 * through shared memory: sm, the kernel's, at least BM * MMA_LDT(BN) floats,
 * free once every thread is here. The warp's MI x NI fragments of 16 x 8
 * are mma.sync's C layout ((c0, c1) at row g, (c2, c3) at g + 8), the warp's
 * tile at (wm, wn); wgmma's accumulators are the same with MI 1, NI 16. */
template <int MI, int NI, int NT, int BM, int BN>
__device__ __forceinline__ void mma_stage_finish(const mma_args &p, float (*acc)[NI][4],
                                                 float *sm, int m0, int n0, int wm, int wn,
                                                 int bi, int sp)
{
    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    tf_cp_wait<0>();   /* no copy of this thread's still landing (none is issued past K) */
    __syncthreads(); /* every warp's MMAs and reads of the pipeline's memory are done */
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *(float2 *)(sm + (wm + i * 16 + g + 8 * h) * MMA_LDT(BN) + wn + 8 * j + 2 * t) =
                    make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    __syncthreads();
    mma_store_tile<BM, BN, NT>(p, sm, m0, n0, bi, sp);
}

#ifdef __cplusplus
extern "C" {
#endif
/* the 3xTF32 wgmma kernel: 128 x 128 tiles, p as tf_cu_gemm_tc sets it; wg_short:
 * two blocks an SM (short K) */
void tf_cu_gemm_wg(tf_backend *be, const mma_args *p, int batch, int ta, int tb, int vec,
                   int wg_short);
/* the half types' weight gradients (a: transA, half operands, fp32 C) on
 * wgmma, the wide split's raw products into p->part (cuda_gemm_wgmma_dw.cu) */
void tf_cu_gemm_dw_half(tf_backend *be, const tf_gemm_args *a, const mma_args *p);
/* split K with p->sep: C = alpha (the splits' partials added) + beta (R or C),
 * ReLU, the DRELU mask */
void tf_cu_splitk_reduce(tf_backend *be, const mma_args *p, int batch);
#ifdef __cplusplus
}
#endif

#endif
