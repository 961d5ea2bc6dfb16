/* Element types of the op table's tensors (ops.h says which ops take which)
 * and their conversions to and from fp32.
 *
 * Mixed precision keeps fp32 master weights and fp32 accumulation; bf16 and
 * fp16 are storage types of activations and operands. The conversions here
 * are integer bit manipulation only, with no compiler half type (_Float16,
 * __half, __nv_bfloat16): one definition that C11 host code, nvcc, hipcc and
 * the host emulator all compile the same way, so every backend rounds alike.
 *
 * Rounding (IEEE 754, round to nearest, ties to even):
 *  - fp32 -> bf16: the top 16 bits, rounded on the 16 dropped. bf16 has fp32's
 *    exponent range, so only values above the largest bf16 overflow (to inf);
 *    fp32 subnormals round like any other value.
 *  - fp32 -> fp16: exponent 5 bits, mantissa 10; values that round past
 *    65504 (|x| >= 65520) go to inf; below 2^-14 the result is an fp16
 *    subnormal (multiples of 2^-24), rounded once; |x| <= 2^-25 goes to a
 *    signed zero.
 *  - bf16/fp16 -> fp32: exact (every value of both is an fp32 value).
 *  - NaN stays NaN, quiet, in both directions: sign and the leading payload
 *    bits are kept and the quiet bit is set (what hardware conversions do),
 *    so a signalling NaN comes back quiet and every other pattern round-trips.
 *  - inf stays inf, -0 stays -0. */
#ifndef TF_BACKEND_TF_DTYPE_H
#define TF_BACKEND_TF_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Zero is fp32, so zero-initialised op arguments mean what they meant before
 * element types existed. */
typedef enum { TF_F32 = 0, TF_BF16 = 1, TF_F16 = 2 } tf_dtype;

#define TF_DTYPE_COUNT 3

/* Functions callable from host and device code (CUDA and HIP both spell the
 * qualifiers __host__ __device__, which nvcc and clang's HIP mode define
 * before any header; plain C and the host emulator need none). */
#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)
#define TF_DTYPE_FN __host__ __device__ static inline
#else
#define TF_DTYPE_FN static inline
#endif

TF_DTYPE_FN int tf_dtype_valid(tf_dtype t) {
    return t == TF_F32 || t == TF_BF16 || t == TF_F16;
}

/* bytes per element (0 for an unknown type) */
TF_DTYPE_FN size_t tf_dtype_size(tf_dtype t) {
    return t == TF_F32 ? 4 : t == TF_BF16 || t == TF_F16 ? 2 : 0;
}

/* "fp32", "bf16", "fp16" ("?" for an unknown type) */
TF_DTYPE_FN const char *tf_dtype_name(tf_dtype t) {
    return t == TF_F32 ? "fp32" : t == TF_BF16 ? "bf16" : t == TF_F16 ? "fp16" : "?";
}

/* the bits of a float and back (memcpy: the defined way in C and C++) */
TF_DTYPE_FN uint32_t tf_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TF_DTYPE_FN float tf_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- bf16: sign 1, exponent 8, mantissa 7 (fp32's top half) ---- */

TF_DTYPE_FN uint16_t tf_f32_to_bf16(float f) {
    uint32_t x = tf_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and payload's top, set quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* round to nearest even on the 16 dropped bits: adding 0x7fff rounds a
     * remainder above half up, and the kept bit's parity breaks the tie; a
     * carry into the exponent is right (up to inf past the largest bf16) */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

TF_DTYPE_FN float tf_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    if ((h & 0x7fffu) > 0x7f80u) /* NaN: quiet */
        x |= 0x00400000u;
    return tf_f32_from_bits(x);
}

/* ---- fp16 (IEEE binary16): sign 1, exponent 5 (bias 15), mantissa 10 ---- */

TF_DTYPE_FN uint16_t tf_f32_to_f16(float f) {
    const uint32_t x = tf_f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, the payload's top 9 bits kept */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x03ffu));
    if (ax >= 0x477ff000u) /* |x| >= 65520 (halfway past 65504) and inf: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* |x| >= 2^-14: normal; rebias 127 -> 15 */
        uint32_t h = (ax - 0x38000000u) >> 13;
        const uint32_t rem = ax & 0x1fffu; /* the 13 dropped bits */
        h += rem > 0x1000u || (rem == 0x1000u && (h & 1u)); /* a carry into the exponent is right */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) /* |x| <= 2^-25: half the smallest subnormal or less, ties to 0 */
        return (uint16_t)sign;
    /* subnormal result: |x| = m 2^(e-150) with the implicit bit in m, e in
     * [102, 112]; in units of 2^-24 that is m >> (126 - e), rounded once */
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += rem > half || (rem == half && (q & 1u)); /* q may reach 0x400: the smallest normal */
    return (uint16_t)(sign | q);
}

TF_DTYPE_FN float tf_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x03ffu;
    if (e == 0x1fu) /* inf, or NaN (quiet) */
        return tf_f32_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u));
    if (e != 0)
        return tf_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return tf_f32_from_bits(sign);
    /* subnormal m 2^-24: shift the leading one up to the implicit bit */
    uint32_t fe = 113u; /* the fp32 exponent of 2^-14 */
    while (!(m & 0x0400u)) {
        m <<= 1;
        fe--;
    }
    return tf_f32_from_bits(sign | (fe << 23) | ((m & 0x03ffu) << 13));
}

/* ---- arrays (host) ----
 * With F16C (x86-64 since 2012; -march=native) the fp16 loops use the
 * hardware's conversions, which round exactly as tf_f32_to_f16 does (nearest
 * even, subnormals, overflow to inf, quiet NaN with the payload's top bits):
 * test_dtype compares the two on every pattern. */
#if defined(__F16C__) && !defined(__CUDACC__) && !defined(__HIP__) && !defined(__HIPCC__)
#include <immintrin.h>
#define TF_DTYPE_F16C 1
#endif

/* dst[i] = src[i] as fp32, n elements of type t (fp32: a copy) */
static inline void tf_dtype_to_f32(float *dst, const void *src, tf_dtype t, size_t n) {
    if (t == TF_F32) {
        if (n) memcpy(dst, src, n * sizeof(float));
    } else if (t == TF_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (size_t i = 0; i < n; i++) dst[i] = tf_bf16_to_f32(s[i]);
    } else {
        const uint16_t *s = (const uint16_t *)src;
        size_t i = 0;
#ifdef TF_DTYPE_F16C
        for (const size_t nv = n - n % 8; i < nv; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
        for (; i < n; i++) dst[i] = tf_f16_to_f32(s[i]);
    }
}

/* dst[i] = src[i] rounded to type t, n elements (fp32: a copy) */
static inline void tf_dtype_from_f32(void *dst, tf_dtype t, const float *src, size_t n) {
    if (t == TF_F32) {
        if (n) memcpy(dst, src, n * sizeof(float));
    } else if (t == TF_BF16) {
        uint16_t *d = (uint16_t *)dst;
        for (size_t i = 0; i < n; i++) d[i] = tf_f32_to_bf16(src[i]);
    } else {
        uint16_t *d = (uint16_t *)dst;
        size_t i = 0;
#ifdef TF_DTYPE_F16C
        for (const size_t nv = n - n % 8; i < nv; i += 8)
            _mm_storeu_si128((__m128i *)(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
        for (; i < n; i++) d[i] = tf_f32_to_f16(src[i]);
    }
}

#ifdef __cplusplus
}
#endif
#endif
