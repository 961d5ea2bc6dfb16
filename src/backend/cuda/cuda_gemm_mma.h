/* What the tensor-core GEMM kernels share (cuda_gemm_mma.cu: mma.sync, any
 * tile; cuda_gemm_wgmma.cu: wgmma, fp32 only): the arguments, the cp.async
 * copy of a BK slice of the A and B tiles into shared memory in their global
 * layouts, and the split-K + epilogue of the accumulators. See
 * cuda_gemm_mma.cu for the design. */
#ifndef TF_CUDA_GEMM_MMA_H
#define TF_CUDA_GEMM_MMA_H

#include <string.h>

#include "cuda_common.h"
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
    int vec4;    /* C (and R, aux) rows and matrices 16-byte aligned: float4 (wgmma epilogue) */
    float *part; /* split K: [tile][split][accumulators of the block]; with sep,
                    [split][batch][M][N] */
    int *count;  /* split K: arrivals per tile, 0 between launches */
    int sep;     /* split K added by a separate kernel (tf_cu_splitk_reduce): each
                    split stores its raw products in part, none reads them back */
} mma_args;

/* ---- cp.async (and its emulation under hostemu) ----------------------------- */
#ifdef TF_CUDA_HOSTEMU
static inline void mma_cp(float *dst, const float *src, int bytes, bool ok)
{
    if (ok) memcpy(dst, src, (size_t)bytes);
    else memset(dst, 0, (size_t)bytes);
}
static inline void mma_commit() {}
template <int N> static inline void mma_wait() {}
#else
/* global -> shared, `bytes` 4 or 16; zero-filled when !ok (src not read) */
__device__ __forceinline__ void mma_cp(float *dst, const float *src, int bytes, bool ok)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    const int n = ok ? bytes : 0;
    if (bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(n));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(n));
}
__device__ __forceinline__ void mma_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void mma_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
#endif

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
            mma_cp(As + r * CF::SA + c, ok ? A + (long)gm * p.lda + gk : A, VEC * 4, ok);
        }
    } else { /* A stored [K,M]: rows k, m contiguous */
        for (int i = tid; i < MMA_BK * BM / VEC; i += CF::NT) {
            const int r = i / (BM / VEC), c = (i % (BM / VEC)) * VEC;
            const int gk = k0 + r, gm = m0 + c;
            const bool ok = gk < ke && gm < p.M;
            mma_cp(As + r * CF::SA + c, ok ? A + (long)gk * p.lda + gm : A, VEC * 4, ok);
        }
    }
    if (!TB) { /* B [K,N]: rows k, n contiguous */
        for (int i = tid; i < MMA_BK * BN / VEC; i += CF::NT) {
            const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            const int gk = k0 + r, gn = n0 + c;
            const bool ok = gk < ke && gn < p.N;
            mma_cp(Bs + r * CF::SB + c, ok ? B + (long)gk * p.ldb + gn : B, VEC * 4, ok);
        }
    } else { /* B stored [N,K]: rows n, k contiguous */
        for (int i = tid; i < BN * MMA_BK / VEC; i += CF::NT) {
            const int r = i / (MMA_BK / VEC), c = (i % (MMA_BK / VEC)) * VEC;
            const int gn = n0 + r, gk = k0 + c;
            const bool ok = gn < p.N && gk < ke;
            mma_cp(Bs + r * CF::SB + c, ok ? B + (long)gn * p.ldb + gk : B, VEC * 4, ok);
        }
    }
}

/* Split K (p.splits > 1: add this split's partials, the last to arrive sums
 * them in split order) and the epilogue (alpha, beta of R or C, ReLU, the
 * DRELU mask; float2 stores) of
 * a warp's MI x NI fragments of 16 x 8 (mma.sync's C layout: (c0, c1) at row
 * g, (c2, c3) at g + 8), the warp's tile at (wm, wn) in the block's, NT
 * threads. Returns early in the splits that are not the last. */
template <int MI, int NI, int NT>
__device__ __forceinline__ void mma_finish(const mma_args &p, float (*acc)[NI][4], int m0, int n0,
                                           int wm, int wn, int bi, int sp)
{
    constexpr int ACC = MI * NI * 4;
    const int tid = (int)threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;
    if (p.splits > 1 && p.sep) { /* raw products to this split's dense [M, N] slice */
        const long nb = (long)gridDim.z / p.splits;
        float *P = p.part + ((long)sp * nb + bi) * p.M * p.N;
        const bool pair = (p.N & 1) == 0; /* then c even is 8-byte aligned */
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = m0 + wm + i * 16 + g + h * 8;
                    const int c = n0 + wn + j * 8 + 2 * t;
                    if (r >= p.M || c >= p.N) continue;
                    float *dst = P + (long)r * p.N + c;
                    if (pair) {
                        *(float2 *)dst = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                    } else {
                        dst[0] = acc[i][j][2 * h];
                        if (c + 1 < p.N) dst[1] = acc[i][j][2 * h + 1];
                    }
                }
        return;
    }
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

#ifdef __cplusplus
extern "C" {
#endif
/* the 3xTF32 wgmma kernel: 128 x 128 tiles, p as tf_cu_gemm_mma sets it */
void tf_cu_gemm_wg(tf_backend *be, const mma_args *p, int batch, int ta, int tb, int vec);
/* split K with p->sep: C = alpha (the splits' partials added) + beta (R or C),
 * ReLU, the DRELU mask */
void tf_cu_splitk_reduce(tf_backend *be, const mma_args *p, int batch);
#ifdef __cplusplus
}
#endif

#endif
