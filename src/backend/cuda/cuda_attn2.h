/* Shared by the register-tiled attention kernels (kernel2 and kernel3:
 * cuda_attn2_fwd.cu, cuda_attn2_bwd.cu), used at kernel level 3.
 *
 * A block works on one (b, o, h) and a tile of queries (forward) or keys
 * (backward). Operand tiles sit in shared memory row-major with rows padded to
 * LD = DM + 4 floats: rows start 16-byte aligned (float4 loads) and the rows
 * that 8 consecutive lanes read at once fall in distinct banks. Score-like
 * products (S = Q K^T, dP = dO V^T) give each thread a TM x TN micro-tile:
 * rows ty + NY*ii and keys tx + NX*jj, with NX lanes of a warp sharing a row
 * (so a row max or sum is a shuffle over NX lanes). Per 4 channels a thread
 * loads TM + TN float4s for 4*TM*TN FMAs (kernel1: one load per FMA).
 *
 * Padded head size DM is 16, 32 or 64 (channels d..DM-1 are zero in every
 * tile, adding exact zeros). Dot products run over c = 0..DM-1 in order with
 * fmaf, identically in every kernel2/3, and scores are fmaf(scale, q.k, bias),
 * so the backward's recomputed P = exp(S - lse) matches the forward's.
 * Every sum has a fixed order: results are bitwise reproducible.
 *
 * Shared memory delivers 32 floats per clock per SM against 128 FMAs, so the
 * register tile decides the speed: a TM x TN tile loads TM + TN floats per
 * TM*TN FMAs. kernel2 (4x4 forward, 2x4 backward, 256 threads) is bound by
 * shared-memory bandwidth at ~40% / ~30% of the FMA rate; kernel3 uses the
 * same code with 8x8 (forward) and 4x8 scores, 8x4 dK/dV, 4x4 dQ (backward)
 * per thread in 64-thread blocks (~80% / ~60% by the same count). For L > 32
 * it is the default at padded head size 32 (triangle attention); at 16 (MSA
 * row attention) kernel2 stays: kernel3 measured slower there on the H200
 * (bench/RESULTS.md). `--gpu-plan attn=k2` or `attn=k3` forces one of the two at
 * every head size (tf_gpu_route_attn). */
#ifndef TF_CUDA_ATTN2_H
#define TF_CUDA_ATTN2_H

#include "cuda_attn.h"

/* kernel2's padded head size for d (1..64), else 0 */
static inline int tf_attn2_dm(int d)
{
    if (d < 1) return 0;
    if (d <= 16) return 16;
    if (d <= 32) return 32;
    if (d <= 64) return 64;
    return 0;
}

/* Query/key tile class: 16 for L <= 16, 32 for L <= 32 (and always for DM 64,
 * whose larger rows leave room for 32-row tiles only), else 64. */
static inline int tf_attn2_class(int L, int dm)
{
    if (L <= 16) return 16;
    if (L <= 32 || dm == 64) return 32;
    return 64;
}

/* Minimum resident blocks per SM promised to the compiler (__launch_bounds__):
 * caps registers at 65536 / (threads * MINB), so that the compiler does not
 * trade occupancy for hoisted loads; chosen as the largest without spills
 * (nvcc -Xptxas -v). Forward and backward use the same classes. */
#ifndef TF_ATTN2_MINB_T16
#define TF_ATTN2_MINB_T16 6 /*  64 threads: <= 168 registers */
#endif
#ifndef TF_ATTN2_MINB_T32
#define TF_ATTN2_MINB_T32 3 /* 128 threads: <= 168 registers */
#endif
#ifndef TF_ATTN2_MINB_T64
#define TF_ATTN2_MINB_T64 2 /* 256 threads: <= 128 registers */
#endif
/* kernel3 (64 threads, 8x8 / 4x8 register tiles): forward <= 168 registers,
 * backward <= 255 (4 blocks per SM, as its 46 KB of shared memory allow) */
#ifndef TF_ATTN3_MINB_FWD
#define TF_ATTN3_MINB_FWD 5
#endif
#ifndef TF_ATTN3_MINB_BWD
#define TF_ATTN3_MINB_BWD 4
#endif

static inline int tf_attn2_aligned(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static inline int tf_attn2_view_vec(const tf_attn_view *v)
{
    return tf_attn2_aligned(v->p) && v->sb % 4 == 0 && v->so % 4 == 0 && v->sl % 4 == 0;
}
/* the same for 8-byte (float2) accesses: base and strides in pairs of floats */
static inline int tf_attn2_view_vec2(const tf_attn_view *v)
{
    return ((uintptr_t)v->p & 7u) == 0 && v->sb % 2 == 0 && v->so % 2 == 0 && v->sl % 2 == 0;
}

#ifdef __cplusplus
/* TW contiguous floats from 16-byte-aligned shared memory (TW 1, 2 or 4k). */
template <int TW>
__device__ __forceinline__ void tf_lds(float (&r)[TW], const float *p)
{
    if constexpr (TW % 4 == 0) {
#pragma unroll
        for (int k = 0; k < TW; k += 4) {
            const float4 v = *reinterpret_cast<const float4 *>(p + k);
            r[k] = v.x, r[k + 1] = v.y, r[k + 2] = v.z, r[k + 3] = v.w;
        }
    } else if constexpr (TW == 2) {
        const float2 v = *reinterpret_cast<const float2 *>(p);
        r[0] = v.x, r[1] = v.y;
    } else {
        static_assert(TW == 1, "tf_lds: width 1, 2 or a multiple of 4");
        r[0] = p[0];
    }
}

__device__ __forceinline__ float tf_f4(const float4 &v, int k)
{
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/* Rows [r0, r0+n) of one head (row r at base + r*sl, channels 0..d-1) into
 * T[0..ROWS), zero-filling rows >= n and channels >= d. vec: d % 4 == 0 and
 * base/sl 16-byte aligned, so 4 elements are read at once. 1-D blocks of NT.
 * E: the element type in global memory (float or cuda_half.h's), widened. */
template <int DM, int ROWS, int LD, int NT, class E>
__device__ __forceinline__ void tf_attn2_load(float (*T)[LD], const E *base, long sl, int r0,
                                              int n, int d, int vec)
{
    const int tid = threadIdx.x;
    if (vec) {
        constexpr int C4 = DM / 4;
        for (int e = tid; e < ROWS * C4; e += NT) {
            const int r = e / C4, c = (e % C4) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < n && c < d) v = tf_cu_ld4(base + (long)(r0 + r) * sl + c);
            *reinterpret_cast<float4 *>(&T[r][c]) = v;
        }
    } else {
        for (int e = tid; e < ROWS * DM; e += NT) {
            const int r = e / DM, c = e % DM;
            T[r][c] = (r < n && c < d) ? tf_cu_f32(base[(long)(r0 + r) * sl + c]) : 0.f;
        }
    }
}

/* s[ii][jj] = sum_c A[ty + NY*ii][c] * B[tx + NX*jj][c], c = 0..DM-1 in order.
 * UNR: chunks of 4 channels unrolled (how far the compiler hoists loads, hence
 * registers; the values do not depend on it). */
template <int DM, int TM, int TN, int NY, int NX, int LD, int UNR>
__device__ __forceinline__ void tf_attn2_dots(float (&s)[TM][TN], const float (*A)[LD],
                                              const float (*B)[LD], int ty, int tx)
{
#pragma unroll
    for (int ii = 0; ii < TM; ++ii)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) s[ii][jj] = 0.f;
#pragma unroll UNR
    for (int c = 0; c < DM; c += 4) {
        float4 a4[TM], b4[TN];
#pragma unroll
        for (int ii = 0; ii < TM; ++ii) a4[ii] = *reinterpret_cast<const float4 *>(&A[ty + NY * ii][c]);
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) b4[jj] = *reinterpret_cast<const float4 *>(&B[tx + NX * jj][c]);
#pragma unroll
        for (int ii = 0; ii < TM; ++ii)
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                float t = s[ii][jj];
                t = fmaf(a4[ii].x, b4[jj].x, t);
                t = fmaf(a4[ii].y, b4[jj].y, t);
                t = fmaf(a4[ii].z, b4[jj].z, t);
                t = fmaf(a4[ii].w, b4[jj].w, t);
                s[ii][jj] = t;
            }
    }
}

/* max / sum over the NX lanes of an aligned lane group (butterfly: every lane
 * of the group ends with the same bits) */
template <int NX>
__device__ __forceinline__ float tf_group_max(float v)
{
#pragma unroll
    for (int m = NX / 2; m > 0; m >>= 1) v = fmaxf(v, tf_shfl_xor(v, m));
    return v;
}
template <int NX>
__device__ __forceinline__ float tf_group_sum(float v)
{
#pragma unroll
    for (int m = NX / 2; m > 0; m >>= 1) v += tf_shfl_xor(v, m);
    return v;
}

/* bias(b, h, i, j) base for item (b, h), or NULL (E: the bias' element type) */
template <class E = float>
__device__ __forceinline__ const E *tf_attn2_bias(const tf_attn_args &a, int b, int h)
{
    return a.bias ? (const E *)a.bias + (long)b * a.bias_sb + (long)h * a.bias_sh : nullptr;
}

/* bias(i, j) from that base (0 without a bias) */
template <class E>
__device__ __forceinline__ float tf_attn2_bias_at(const tf_attn_args &a, const E *bb, int i, int j)
{
    return bb ? tf_cu_f32(bb[(long)i * a.bias_si + (long)j * a.bias_sj]) : 0.f;
}

/* the score of query i and key j from their dot product: scale q.k + bias
 * (kernel2, kernel3 and kernel4 compute it alike, so their softmaxes agree) */
template <class E>
__device__ __forceinline__ float tf_attn2_score(const tf_attn_args &a, const E *bb, int i, int j,
                                                float dot)
{
    return fmaf(a.scale, dot, tf_attn2_bias_at(a, bb, i, j));
}
#endif /* __cplusplus */

#ifdef __cplusplus
extern "C" {
#endif
/* level-3 entry points (cuda_attn2_fwd.cu, cuda_attn2_bwd.cu) */
/* k3: kernel3 for the tile class 64 (L > 32, padded head size <= 32), else
 * kernel2 (tf_gpu_route_attn decides) */
void tf_cu_attn_fwd2(tf_backend *be, const tf_attn_args *a, int k3);
void tf_cu_attn_bwd2(tf_backend *be, const tf_attn_args *a, int k3);
#ifdef __cplusplus
}
#endif

#endif
