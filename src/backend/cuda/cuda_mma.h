/* The tensor-core instruction the level-3 GEMM (cuda_gemm_mma.cu) and
 * attention kernel5 (cuda_attn5_fwd.cu) share: mma.sync m16n8k8 with TF32
 * operands and fp32 accumulation, the TF32 rounding, and the 3xTF32 split of
 * an fp32 value into big and small TF32 parts. Under hostemu the MMA is
 * emulated with shuffles (one warp's fragments, the same lane layout).
 *
 * Fragments (g = lane / 4, t = lane % 4), per the PTX ISA:
 *   A 16x8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
 *   B 8x8:  b0 (k t, n g), b1 (k t+4, n g)
 *   C 16x8: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1) */
#ifndef TF_CUDA_MMA_H
#define TF_CUDA_MMA_H

#include <stdint.h>
#include <string.h>

#include "cuda_common.h"

#ifdef TF_CUDA_HOSTEMU
static inline uint32_t mma_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}
static inline float mma_f(uint32_t b)
{
    float x;
    memcpy(&x, &b, 4);
    return x;
}
/* D = A B + D for the warp's 16x8x8 fragments, every lane's gathered in one
 * exchange (what 32 shuffles would fetch, at 2 barriers instead of 64); the
 * tensor cores read only the TF32 bits of each operand (the top 19) */
static inline void mma_16888(float *c, const uint32_t *a, const uint32_t *b)
{
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;
    const uint32_t m = 0xffffe000u;
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    uint32_t all[32 * 6];
    emu_warp_exchange(mine, 6, all);
    for (int k = 0; k < 8; ++k) {
        const int hi = k >> 2, src = k & 3;
        const float a0 = mma_f(all[(g * 4 + src) * 6 + 2 * hi] & m);
        const float a1 = mma_f(all[(g * 4 + src) * 6 + 2 * hi + 1] & m);
        const float b0 = mma_f(all[((2 * t) * 4 + src) * 6 + 4 + hi] & m);
        const float b1 = mma_f(all[((2 * t + 1) * 4 + src) * 6 + 4 + hi] & m);
        c[0] += a0 * b0;
        c[1] += a0 * b1;
        c[2] += a1 * b0;
        c[3] += a1 * b1;
    }
}
#elif !TF_HAVE_NV_PTX
/* HIP: no mma.sync; the kernels built on it are not in that build
 * (tf_hip_nv_only.cu), and the headers' other users never call these */
__device__ __forceinline__ uint32_t mma_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float mma_f(uint32_t b) { return __uint_as_float(b); }
__device__ __forceinline__ void mma_16888(float *, const uint32_t *, const uint32_t *)
{
    __builtin_trap();
}
#else
__device__ __forceinline__ uint32_t mma_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float mma_f(uint32_t b) { return __uint_as_float(b); }
/* not volatile: the compiler may interleave independent MMAs */
__device__ __forceinline__ void mma_16888(float *c, const uint32_t *a, const uint32_t *b)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* One operand value as its big (and, for 3xTF32, small) TF32 parts, each
 * rounded to nearest (ties away) in integer arithmetic, +2^12 then clear the
 * low 13 bits: the bits cvt.rna.tf32.f32 gives for finite values. Rounding
 * matters: the tensor cores read only the top 19 bits of an operand, and
 * truncation doubled the tf32 model's gradient error (past the 5e-3 bound). */
__device__ __forceinline__ uint32_t mma_round(uint32_t b) { return (b + 0x1000u) & 0xffffe000u; }
template <bool X3>
__device__ __forceinline__ void mma_split(float x, uint32_t &big, uint32_t &small)
{
    if (X3) {
        big = mma_round(mma_bits(x));
        small = mma_round(mma_bits(x - mma_f(big)));
    } else {
        big = mma_round(mma_bits(x));
        small = 0u;
    }
}

/* NB accumulator fragments to zero */
template <int NB>
__device__ __forceinline__ void mma_zero(float (*acc)[4])
{
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
}

/* acc[n] += A B[n] for n < NB: one A fragment (big ab, small as) against NB
 * B fragments. 3xTF32 (X3) runs the two small products first, each pass over
 * all NB fragments, so that MMAs into one accumulator are NB apart. */
template <int NB, bool X3>
__device__ __forceinline__ void mma_row(float (*acc)[4], const uint32_t *ab, const uint32_t *as,
                                        const uint32_t (*bb)[2], const uint32_t (*bs)[2])
{
    if (X3) {
#pragma unroll
        for (int n = 0; n < NB; ++n) mma_16888(acc[n], as, bb[n]);
#pragma unroll
        for (int n = 0; n < NB; ++n) mma_16888(acc[n], ab, bs[n]);
    }
#pragma unroll
    for (int n = 0; n < NB; ++n) mma_16888(acc[n], ab, bb[n]);
}

#endif
