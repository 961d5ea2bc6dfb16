/* Attention kernel6: the half types' flash attention on the m16n8k16 tile
 * (cuda_tile.h), head size 16 or 32, any L (tiles of 64 queries and 64 keys,
 * the scores never in global memory). Forward cuda_attn6_fwd.cu, backward
 * cuda_attn6_bwd.cu. Shared here: the tile shapes, the loads of a head's rows
 * into shared memory as raw 2-byte elements, the bias tiles, and the score
 * of a (query, key) pair in base-2 units from the same constants in every
 * kernel. */
#ifndef TF_CUDA_ATTN6_H
#define TF_CUDA_ATTN6_H

#include "cuda_attn2.h"
#include "cuda_cp_async.h"
#include "cuda_tile.h"

#ifdef __cplusplus
template <int DM>
struct tf6 {
    static constexpr int BQ = 64, BK = 64; /* queries, keys a tile */
    static constexpr int NW = 4, NT = 128; /* warps: 16 rows each */
    static constexpr int LD = DM + 8;      /* row stride (elements): 8 (mod 16) */
    static constexpr int KD = DM / 16;     /* k steps over the head dimension */
    static constexpr int ND = DM / 8;      /* n tiles over the head dimension */
    static constexpr int NJ = BK / 8;      /* n tiles over a key tile */
    static_assert(DM == 16 || DM == 32, "kernel6: head size 16 or 32");
};

#define TF6_LOG2E 1.4426950408889634f

/* Rows [r0, r0 + ROWS) of one head (row r at base + r sl, DM elements) into S
 * (row stride LD), zero past row L; 16-byte copies when vec, by the NT
 * threads from thread `tid`. With vec every load is issued before the first
 * store: a store to shared memory between them would order the loads one by
 * one. */
template <int DM, int ROWS, int LD, int NT, class E>
__device__ __forceinline__ void tf6_load(uint16_t *S, const E *base, long sl, int r0, int L,
                                         int vec, int tid)
{
    if (vec) {
        constexpr int C8 = DM / 8, N = (ROWS * C8 + NT - 1) / NT;
        float4 v[N];
#pragma unroll
        for (int u = 0; u < N; ++u) {
            const int e = tid + u * NT, r = e / C8, c = (e % C8) * 8;
            v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (e < ROWS * C8 && r0 + r < L)
                v[u] = *reinterpret_cast<const float4 *>(base + (long)(r0 + r) * sl + c);
        }
#pragma unroll
        for (int u = 0; u < N; ++u) {
            const int e = tid + u * NT, r = e / C8, c = (e % C8) * 8;
            if (e < ROWS * C8) *reinterpret_cast<float4 *>(S + r * LD + c) = v[u];
        }
    } else { /* the rare unaligned view: element by element, few registers */
        const uint16_t *b16 = reinterpret_cast<const uint16_t *>(base);
#pragma unroll 1
        for (int e = tid; e < ROWS * DM; e += NT) {
            const int r = e / DM, c = e % DM;
            S[r * LD + c] = r0 + r < L ? b16[(long)(r0 + r) * sl + c] : (uint16_t)0;
        }
    }
}

/* The same rows with cp.async (16-byte copies, zero-filled past L) when vec,
 * to be waited for with tf_cp_wait; else loaded at once */
template <int DM, int ROWS, int LD, int NT, class E>
__device__ __forceinline__ void tf6_load_async(uint16_t *S, const E *base, long sl, int r0, int L,
                                               int vec, int tid)
{
    if (!vec) {
        tf6_load<DM, ROWS, LD, NT>(S, base, sl, r0, L, 0, tid);
        return;
    }
    constexpr int C8 = DM / 8;
    for (int e = tid; e < ROWS * C8; e += NT) {
        const int r = e / C8, c = (e % C8) * 8;
        const bool ok = r0 + r < L;
        const E *src = ok ? base + (long)(r0 + r) * sl + c : base;
        tf_cp_async(reinterpret_cast<float *>(S + r * LD + c), reinterpret_cast<const float *>(src), 16, ok);
    }
}

/* 16-byte rows: base and strides in multiples of 8 elements */
static inline int tf6_view_vec(const tf_attn_view *v)
{
    return ((uintptr_t)v->p & 15u) == 0 && v->sb % 8 == 0 && v->so % 8 == 0 && v->sl % 8 == 0;
}

/* D = dout . out of one row from two rows in shared memory (2-byte raw
 * elements, 16-byte aligned), summed in column order */
template <int DM, class E>
__device__ __forceinline__ float tf6_dot_rows(const uint16_t *g, const uint16_t *y)
{
    float dd = 0.f;
#pragma unroll
    for (int c0 = 0; c0 < DM; c0 += 8) {
        uint16_t gv[8], yv[8];
        memcpy(gv, g + c0, 16);
        memcpy(yv, y + c0, 16);
#pragma unroll
        for (int c = 0; c < 8; ++c) dd = fmaf(tf_tile_widen<E>(gv[c]), tf_tile_widen<E>(yv[c]), dd);
    }
    return dd;
}

/* an element pair (c, c + 1), c even, of a view's row is 4-byte aligned */
__device__ __forceinline__ bool tf6_pair_ok(const tf_attn_view &v)
{
    return ((uintptr_t)v.p & 3u) == 0 && v.sb % 2 == 0 && v.so % 2 == 0 && v.sl % 2 == 0;
}
/* p[0] = lo, p[1] = hi rounded to E: one 4-byte store (tf_cu_st2) when pair */
template <class E>
__device__ __forceinline__ void tf6_store2(E *p, float lo, float hi, bool pair)
{
    if (pair) {
        tf_cu_st2(p, lo, hi);
    } else {
        p[0] = lo;
        p[1] = hi;
    }
}

/* 2^x by the SFU's approximation (relative error ~2^-22, far inside the
 * rounding of P to the type; 2^-inf = 0); exp2f without PTX */
__device__ __forceinline__ float tf6_exp2(float x)
{
#if TF_HAVE_NV_PTX
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

/* A head's bias copies by 16 bytes: rows contiguous along the keys (sj 1,
 * the flash composition's head-major layout), every row 16-byte aligned (so
 * L a multiple of 8: an 8-key group never straddles L) */
static inline int tf6_bias_vec(const tf_attn_args *a)
{
    return a->bias && a->bias_sj == 1 && a->bias_si % 8 == 0 && a->bias_sb % 8 == 0 &&
           a->bias_sh % 8 == 0 && ((uintptr_t)a->bias & 15u) == 0;
}

/* Where key c of row r sits in a staged bias tile: rows of LDB elements, or
 * with SWZ rows of 64 without padding whose eight 16-byte chunks are permuted
 * by the row (chunk c / 8 at (c / 8) ^ (r % 8)). Either way the pair loads of
 * a fragment's 32 lanes (rows g, keys 2t) fall in 32 distinct banks. */
template <int LDB, bool SWZ>
__device__ __forceinline__ int tf6_boff(int r, int c)
{
    return SWZ ? r * 64 + ((((c >> 3) ^ r) & 7) << 3) + (c & 7) : r * LDB + c;
}

/* Rows [r0, r0 + R) x keys [c0, c0 + CC) of one head's bias (bb: the head's
 * base, element (i, j) at bb + i si + j sj) into S (tf6_boff's layout; SWZ
 * wants CC 64), zero past L either way: 16-byte cp.async copies when bvec
 * (tf6_bias_vec; c0 a multiple of 8), to be waited for with tf_cp_wait, else
 * element by element. The bias is then read from shared memory, a pair of
 * keys at once, instead of one strided global load an element. */
template <int R, int CC, int LDB, bool SWZ, int NT, class E>
__device__ __forceinline__ void tf6_bias_tile(uint16_t *S, const E *bb, long si, long sj, int r0,
                                              int c0, int L, int bvec, int tid)
{
    static_assert(!SWZ || CC == 64, "a swizzled bias tile is 64 keys wide");
    if (bvec) {
        constexpr int C8 = CC / 8;
        for (int e = tid; e < R * C8; e += NT) {
            const int r = e / C8, c = (e % C8) * 8;
            const bool ok = r0 + r < L && c0 + c < L;
            const E *src = ok ? bb + (long)(r0 + r) * si + c0 + c : bb;
            tf_cp_async(reinterpret_cast<float *>(S + tf6_boff<LDB, SWZ>(r, c)),
                        reinterpret_cast<const float *>(src), 16, ok);
        }
    } else {
        const uint16_t *b16 = reinterpret_cast<const uint16_t *>(bb);
#pragma unroll 1
        for (int e = tid; e < R * CC; e += NT) {
            const int r = e / CC, c = e % CC;
            S[tf6_boff<LDB, SWZ>(r, c)] = r0 + r < L && c0 + c < L
                                              ? b16[(long)(r0 + r) * si + (long)(c0 + c) * sj]
                                              : (uint16_t)0;
        }
    }
}

/* the bias of keys (c, c + 1), c even, of row r of a staged tile (LDB even) */
template <class E, int LDB, bool SWZ>
__device__ __forceinline__ void tf6_bias_pair(const uint16_t *S, int r, int c, float *lo, float *hi)
{
    const uint32_t u = *reinterpret_cast<const uint32_t *>(S + tf6_boff<LDB, SWZ>(r, c));
    *lo = tf_tile_widen<E>((uint16_t)(u & 0xffffu));
    *hi = tf_tile_widen<E>((uint16_t)(u >> 16));
}

/* The score in base-2 units, (scale q.k + bias) log2(e), as every kernel6
 * forms it: q.k c2 + bias log2(e), c2 = scale log2(e) formed on the host and
 * passed as a kernel parameter (an operand of the multiply-add straight from
 * the constant bank: no register), so a score costs one multiply-add */
__host__ __device__ __forceinline__ float tf6_c2(float scale)
{
    return scale * TF6_LOG2E;
}
__device__ __forceinline__ float tf6_score2(float dot, float c2, float bias)
{
    return fmaf(dot, c2, bias * TF6_LOG2E);
}
/* exp2's argument, the score less sub (the row's lse, base 2), folded into
 * the multiply-adds */
template <bool BIAS>
__device__ __forceinline__ float tf6_arg2(float dot, float c2, float bias, float sub)
{
    return BIAS ? fmaf(dot, c2, fmaf(bias, TF6_LOG2E, -sub)) : fmaf(dot, c2, -sub);
}
#endif /* __cplusplus */

#ifdef __cplusplus
extern "C" {
#endif
/* tf_gpu_route_attn's TF_GPU_ATTN_KERNEL6: bf16 and fp16, d 16 or 32 */
void tf_cu_attn_fwd6(tf_backend *be, const tf_attn_args *a);
void tf_cu_attn_bwd6(tf_backend *be, const tf_attn_args *a);
#ifdef __cplusplus
}
#endif

#endif
