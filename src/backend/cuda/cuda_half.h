/* Half element types in the kernels (ops.h: a `void *` activation of the
 * call's tf_dtype).
 *
 * tf_cu_bf16 and tf_cu_f16 are 2-byte storage types with tf_dtype.h's
 * conversions as their only arithmetic: reading one gives its exact fp32
 * value, assigning an fp32 value rounds it once (round to nearest even).
 * A kernel body written once for `T *` pointers therefore computes in fp32
 * whatever T is: instantiated with T = float it is the fp32 kernel, bit for
 * bit, and with a half T it is that kernel on the widened inputs, rounded at
 * each store. So the half result of an op is the fp32 op's result on the
 * same (rounded) inputs, rounded once, wherever the body stores only outputs.
 *
 * TF_CU_DISPATCH(t, T, ...) runs its statements with T the storage type of
 * tf_dtype t (float, tf_cu_bf16, tf_cu_f16). */
#ifndef TF_CUDA_HALF_H
#define TF_CUDA_HALF_H

#include <stdio.h>
#include <stdlib.h>

#include "backend/tf_dtype.h"

#ifdef __cplusplus

/* fp32 -> bf16 on NVIDIA devices (sm_80 on): the cvt instruction (round to
 * nearest even, subnormals kept, overflow to inf: tf_dtype.h's bits for
 * every value but NaN, which cvt makes canonical; a NaN is selected from
 * tf_dtype.h's rule), one instruction where the software rounding takes
 * seven. The software rounding elsewhere (host, hostemu, HIP). */
__host__ __device__ __forceinline__ uint16_t tf_cu_f32_to_bf16(float f)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const uint32_t x = __float_as_uint(f);
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    const uint16_t nan = (uint16_t)((x >> 16) | 0x0040u);
    return (x & 0x7fffffffu) > 0x7f800000u ? nan : h;
#else
    return tf_f32_to_bf16(f);
#endif
}
struct tf_cu_bf16 {
    uint16_t u;
    __host__ __device__ __forceinline__ operator float() const { return tf_bf16_to_f32(u); }
    __host__ __device__ __forceinline__ tf_cu_bf16 &operator=(float v)
    {
        u = tf_cu_f32_to_bf16(v);
        return *this;
    }
};
/* fp16 <-> fp32 on NVIDIA devices: the cvt instructions (round to nearest
 * even, subnormals, overflow to inf: tf_dtype.h's bits for every value but
 * NaN, which cvt makes canonical); a NaN is selected from tf_dtype.h's rule
 * written inline (quiet, sign and leading payload kept), so the hot loops
 * carry no branch or call. The software conversion elsewhere (host,
 * hostemu, HIP). */
__host__ __device__ __forceinline__ float tf_cu_f16_to_f32(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    const uint32_t nan = ((uint32_t)(h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x03ffu) << 13);
    return (h & 0x7fffu) > 0x7c00u ? __uint_as_float(nan) : f;
#else
    return tf_f16_to_f32(h);
#endif
}
__host__ __device__ __forceinline__ uint16_t tf_cu_f32_to_f16(float f)
{
#if defined(__CUDA_ARCH__)
    const uint32_t x = __float_as_uint(f);
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    const uint16_t nan = (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x03ffu));
    return (x & 0x7fffffffu) > 0x7f800000u ? nan : h;
#else
    return tf_f32_to_f16(f);
#endif
}
struct tf_cu_f16 {
    uint16_t u;
    __host__ __device__ __forceinline__ operator float() const { return tf_cu_f16_to_f32(u); }
    __host__ __device__ __forceinline__ tf_cu_f16 &operator=(float v)
    {
        u = tf_cu_f32_to_f16(v);
        return *this;
    }
};

/* the fp32 value of an element of any of the three types (float: itself) */
__host__ __device__ __forceinline__ float tf_cu_f32(float v) { return v; }
__host__ __device__ __forceinline__ float tf_cu_f32(tf_cu_bf16 v) { return (float)v; }
__host__ __device__ __forceinline__ float tf_cu_f32(tf_cu_f16 v) { return (float)v; }

/* Vector access to global memory: 4 (2) consecutive elements as a float4
 * (float2), at 4 (2) element alignment; a half type moves 8 (4) bytes. */
__device__ __forceinline__ float4 tf_cu_ld4(const float *p) { return *(const float4 *)p; }
template <class T> __device__ __forceinline__ float4 tf_cu_ld4(const T *p)
{
    const uint2 r = *(const uint2 *)p;
    T e[4];
    e[0].u = (uint16_t)(r.x & 0xffffu), e[1].u = (uint16_t)(r.x >> 16);
    e[2].u = (uint16_t)(r.y & 0xffffu), e[3].u = (uint16_t)(r.y >> 16);
    return make_float4((float)e[0], (float)e[1], (float)e[2], (float)e[3]);
}
__device__ __forceinline__ float2 tf_cu_ld2(const float *p) { return *(const float2 *)p; }
template <class T> __device__ __forceinline__ float2 tf_cu_ld2(const T *p)
{
    const uint32_t r = *(const uint32_t *)p;
    T e[2];
    e[0].u = (uint16_t)(r & 0xffffu), e[1].u = (uint16_t)(r >> 16);
    return make_float2((float)e[0], (float)e[1]);
}
__device__ __forceinline__ void tf_cu_st4(float *p, float4 v) { *(float4 *)p = v; }
template <class T> __device__ __forceinline__ void tf_cu_st4(T *p, float4 v)
{
    T e[4];
    e[0] = v.x, e[1] = v.y, e[2] = v.z, e[3] = v.w;
    *(uint2 *)p = make_uint2((uint32_t)e[0].u | (uint32_t)e[1].u << 16,
                             (uint32_t)e[2].u | (uint32_t)e[3].u << 16);
}
__device__ __forceinline__ void tf_cu_st2(float *p, float x, float y)
{
    *(float2 *)p = make_float2(x, y);
}
template <class T> __device__ __forceinline__ void tf_cu_st2(T *p, float x, float y)
{
    T e[2];
    e[0] = x, e[1] = y;
    *(uint32_t *)p = (uint32_t)e[0].u | (uint32_t)e[1].u << 16;
}

/* an internal fault: a type the op does not take */
static inline void tf_cu_bad_type(const char *op, tf_dtype t)
{
    fprintf(stderr, "tinyfold: internal error: cuda %s does not take element type %s (%d)\n", op,
            tf_dtype_name(t), (int)t);
    abort();
}

#define TF_CU_DISPATCH(t, T, ...)                                                                  \
    do {                                                                                           \
        switch (t) {                                                                               \
        case TF_F32: {                                                                             \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TF_BF16: {                                                                            \
            typedef tf_cu_bf16 T;                                                                  \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TF_F16: {                                                                             \
            typedef tf_cu_f16 T;                                                                   \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        default: tf_cu_bad_type(__func__, t);                                                      \
        }                                                                                          \
    } while (0)

/* the same for the half types only (the fp32 path is the caller's own) */
#define TF_CU_DISPATCH_HALF(t, T, ...)                                                             \
    do {                                                                                           \
        switch (t) {                                                                               \
        case TF_BF16: {                                                                            \
            typedef tf_cu_bf16 T;                                                                  \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TF_F16: {                                                                             \
            typedef tf_cu_f16 T;                                                                   \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        default: tf_cu_bad_type(__func__, t);                                                      \
        }                                                                                          \
    } while (0)

/* two types, one of them half and the other the same half or fp32 (a
 * LayerNorm's x and out: a residual stream into a half activation) */
#define TF_CU_DISPATCH_PAIR_(xc, yc, TXc, TYc, TX, TY, ...)                                     \
    if (xt_ == (xc) && yt_ == (yc)) {                                                             \
        typedef TXc TX;                                                                            \
        typedef TYc TY;                                                                            \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }
#define TF_CU_DISPATCH2_HALF(xt, yt, TX, TY, ...)                                                  \
    do {                                                                                           \
        const tf_dtype xt_ = (xt), yt_ = (yt);                                                     \
        TF_CU_DISPATCH_PAIR_(TF_BF16, TF_BF16, tf_cu_bf16, tf_cu_bf16, TX, TY, __VA_ARGS__)        \
        TF_CU_DISPATCH_PAIR_(TF_F32, TF_BF16, float, tf_cu_bf16, TX, TY, __VA_ARGS__)              \
        TF_CU_DISPATCH_PAIR_(TF_BF16, TF_F32, tf_cu_bf16, float, TX, TY, __VA_ARGS__)              \
        TF_CU_DISPATCH_PAIR_(TF_F16, TF_F16, tf_cu_f16, tf_cu_f16, TX, TY, __VA_ARGS__)            \
        TF_CU_DISPATCH_PAIR_(TF_F32, TF_F16, float, tf_cu_f16, TX, TY, __VA_ARGS__)                \
        TF_CU_DISPATCH_PAIR_(TF_F16, TF_F32, tf_cu_f16, float, TX, TY, __VA_ARGS__)                \
        tf_cu_bad_type(__func__, xt_ == TF_F32 ? yt_ : xt_);                                       \
    } while (0)

#endif /* __cplusplus */
#endif
