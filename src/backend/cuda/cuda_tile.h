/* The half types' tensor-core tile: mma.sync m16n8k16 with bf16 or fp16
 * operands and fp32 accumulation, the fragment loads from shared memory and
 * the packing of fp32 values into operand registers. Kernels written against
 * these few calls (load a fragment, multiply-accumulate, pack) are all that
 * an MFMA version (gfx90a, gfx942) has to replace. Under hostemu the MMA is
 * emulated per warp (one exchange of every lane's fragments); in the HIP
 * build the calls trap and no route reaches them.
 *
 * E is tf_cu_bf16 or tf_cu_f16 (cuda_half.h). Fragments (g = lane / 4,
 * t = lane % 4), two elements a register, the lower index in the low half:
 *   A 16x16 (row-major):  a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
 *   B 16x8  (k x n):      b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
 *   C 16x8  (fp32):       c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1)
 * So two C tiles side by side (columns 0-7, 8-15) are, packed, the A
 * fragment of the 16x16 tile they form: a product's result feeds the next
 * product without leaving the registers (tf_tile_c2a). */
#ifndef TF_CUDA_TILE_H
#define TF_CUDA_TILE_H

#include <stdint.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_half.h"

template <class E>
struct tf_tile_is_bf16 {
    static constexpr bool value = false;
};
template <>
struct tf_tile_is_bf16<tf_cu_bf16> {
    static constexpr bool value = true;
};

/* one element's fp32 value from its bits */
template <class E>
__device__ __forceinline__ float tf_tile_widen(uint16_t u)
{
    return tf_tile_is_bf16<E>::value ? tf_bf16_to_f32(u) : tf_cu_f16_to_f32(u);
}
/* and the bits of an fp32 value rounded to E (to nearest even) */
template <class E>
__device__ __forceinline__ uint16_t tf_tile_round(float v)
{
    return tf_tile_is_bf16<E>::value ? tf_cu_f32_to_bf16(v) : tf_cu_f32_to_f16(v);
}

#ifdef TF_CUDA_HOSTEMU
template <class E>
static inline uint32_t tf_tile_pack(float lo, float hi)
{
    const uint16_t l = tf_tile_is_bf16<E>::value ? tf_f32_to_bf16(lo) : tf_f32_to_f16(lo);
    const uint16_t h = tf_tile_is_bf16<E>::value ? tf_f32_to_bf16(hi) : tf_f32_to_f16(hi);
    return (uint32_t)l | ((uint32_t)h << 16);
}
/* D = A B + D for the warp's 16x16x16 fragments, summed in k order in fp32
 * (the hardware's order within a product is its own; the tests' bounds
 * allow any order) */
template <class E>
static inline void tf_tile_mma(float *c, const uint32_t *a, const uint32_t *b)
{
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    uint32_t all[32 * 6];
    emu_warp_exchange(mine, 6, all);
    for (int k = 0; k < 16; ++k) {
        const int src = (k & 7) >> 1, hi = k >> 3, sh = 16 * (k & 1);
        const float a0 = tf_tile_widen<E>((uint16_t)(all[(g * 4 + src) * 6 + 2 * hi] >> sh));
        const float a1 = tf_tile_widen<E>((uint16_t)(all[(g * 4 + src) * 6 + 2 * hi + 1] >> sh));
        const float b0 = tf_tile_widen<E>((uint16_t)(all[((2 * t) * 4 + src) * 6 + 4 + hi] >> sh));
        const float b1 = tf_tile_widen<E>((uint16_t)(all[((2 * t + 1) * 4 + src) * 6 + 4 + hi] >> sh));
        c[0] += a0 * b0;
        c[1] += a0 * b1;
        c[2] += a1 * b0;
        c[3] += a1 * b1;
    }
}
#elif !TF_HAVE_NV_PTX
template <class E>
__device__ __forceinline__ uint32_t tf_tile_pack(float, float)
{
    __builtin_trap();
    return 0u;
}
template <class E>
__device__ __forceinline__ void tf_tile_mma(float *, const uint32_t *, const uint32_t *)
{
    __builtin_trap();
}
#else
/* round to nearest even, both halves in one instruction */
template <class E>
__device__ __forceinline__ uint32_t tf_tile_pack(float lo, float hi)
{
    uint32_t r;
    if (tf_tile_is_bf16<E>::value)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
/* not volatile: the compiler may interleave independent MMAs */
template <class E>
__device__ __forceinline__ void tf_tile_mma(float *c, const uint32_t *a, const uint32_t *b)
{
    if (tf_tile_is_bf16<E>::value)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* Shared-memory tiles hold E's bits as uint16_t, row-major with a row stride
 * ld (elements, a multiple of 8). A row stride of 8 (mod 16) elements puts
 * the 8 rows x 16 bytes of a fragment load in 32 distinct banks. */

/* The fragment loads: one ldmatrix each (NM 8x8 matrices of 2-byte
 * elements; lane l names row l % 8 of matrix l / 8, 16 bytes: the array
 * 16-byte aligned, ld and the column a multiple of 8). Lane (g, t) receives
 * row g, elements 2t and 2t + 1 of each matrix, or with TRANS rows 2t and
 * 2t + 1 of column g. Under hostemu the row addresses go round the warp and
 * each lane reads its elements, so the addressing below is what the
 * emulator tests. */
#ifdef TF_CUDA_HOSTEMU
template <int NM, bool TRANS>
static inline void tf_tile_ldsm(uint32_t *r, const uint16_t *p)
{
    const uint64_t u = (uint64_t)(uintptr_t)p;
    const uint32_t mine[2] = {(uint32_t)u, (uint32_t)(u >> 32)};
    uint32_t all[32 * 2];
    emu_warp_exchange(mine, 2, all);
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;
    for (int m = 0; m < NM; ++m) {
        const int i0 = TRANS ? 8 * m + 2 * t : 8 * m + g, i1 = TRANS ? i0 + 1 : i0;
        const uint16_t *r0 = (const uint16_t *)(uintptr_t)((uint64_t)all[2 * i0] | ((uint64_t)all[2 * i0 + 1] << 32));
        const uint16_t *r1 = (const uint16_t *)(uintptr_t)((uint64_t)all[2 * i1] | ((uint64_t)all[2 * i1 + 1] << 32));
        r[m] = TRANS ? (uint32_t)r0[g] | ((uint32_t)r1[g] << 16)
                     : (uint32_t)r0[2 * t] | ((uint32_t)r0[2 * t + 1] << 16);
    }
}
#elif !TF_HAVE_NV_PTX
template <int NM, bool TRANS>
__device__ __forceinline__ void tf_tile_ldsm(uint32_t *, const uint16_t *)
{
    __builtin_trap();
}
#else
template <int NM, bool TRANS>
__device__ __forceinline__ void tf_tile_ldsm(uint32_t *r, const uint16_t *p)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (NM == 4 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else if (NM == 4)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(a));
}
#endif

/* A fragment of the 16x16 tile at (r0, k0) of a row-major [rows][ld] array */
__device__ __forceinline__ void tf_tile_load_a(uint32_t *a, const uint16_t *s, int ld, int r0, int k0)
{
    const int lane = (int)threadIdx.x & 31, m = lane >> 3;
    tf_tile_ldsm<4, false>(a, s + (long)(r0 + (lane & 7) + 8 * (m & 1)) * ld + k0 + 8 * (m >> 1));
}

/* A fragment of the 16x16 tile at (r0, k0) of A = S^T, S a row-major
 * [k][ld] array (P^T and dS^T from P and dS stored by query rows) */
__device__ __forceinline__ void tf_tile_load_at(uint32_t *a, const uint16_t *s, int ld, int r0, int k0)
{
    const int lane = (int)threadIdx.x & 31, m = lane >> 3;
    tf_tile_ldsm<4, true>(a, s + (long)(k0 + (lane & 7) + 8 * (m >> 1)) * ld + r0 + 8 * (m & 1));
}

/* B fragment (k0..k0+15 x n0..n0+7) of B = S^T, S a row-major [n][ld] array
 * (the rows of S are B's columns: K's rows for Q K^T, a weight's for x W^T) */
__device__ __forceinline__ void tf_tile_load_bt(uint32_t *b, const uint16_t *s, int ld, int n0, int k0)
{
    const int lane = (int)threadIdx.x & 31;
    tf_tile_ldsm<2, false>(b, s + (long)(n0 + (lane & 7)) * ld + k0 + 8 * ((lane >> 3) & 1));
}

/* B fragment (k0.. x n0..) of B = S, S a row-major [k][ld] array (V for P V) */
__device__ __forceinline__ void tf_tile_load_b(uint32_t *b, const uint16_t *s, int ld, int n0, int k0)
{
    const int lane = (int)threadIdx.x & 31;
    tf_tile_ldsm<2, true>(b, s + (long)(k0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ld + n0);
}

/* The A fragment of the 16x16 tile formed by two C tiles (columns 0-7 in
 * c0, 8-15 in c1), rounded to E */
template <class E>
__device__ __forceinline__ void tf_tile_c2a(uint32_t *a, const float *c0, const float *c1)
{
    a[0] = tf_tile_pack<E>(c0[0], c0[1]);
    a[1] = tf_tile_pack<E>(c0[2], c0[3]);
    a[2] = tf_tile_pack<E>(c1[0], c1[1]);
    a[3] = tf_tile_pack<E>(c1[2], c1[3]);
}

/* acc[n] += P B for n < N: P the 16 x 16 KK fp32 values of the 2 KK C tiles
 * c (rounded to E as A fragments: tf_tile_c2a), B the row-major [16 KK][ld]
 * array s (P V with s = V, dS K with s = K) */
template <int KK, int N, class E>
__device__ __forceinline__ void tf_tile_mul_c(float (*acc)[4], const float (*c)[4],
                                              const uint16_t *s, int ld)
{
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
        uint32_t a[4];
        tf_tile_c2a<E>(a, c[2 * kk], c[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < N; ++n) {
            uint32_t b[2];
            tf_tile_load_b(b, s, ld, 8 * n, 16 * kk);
            tf_tile_mma<E>(acc[n], a, b);
        }
    }
}

/* N accumulator tiles to zero */
template <int N>
__device__ __forceinline__ void tf_tile_zero(float (*c)[4])
{
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[n][e] = 0.f;
}

#endif
