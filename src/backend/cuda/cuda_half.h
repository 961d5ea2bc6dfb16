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

struct tf_cu_bf16 {
    uint16_t u;
    __host__ __device__ __forceinline__ operator float() const { return tf_bf16_to_f32(u); }
    __host__ __device__ __forceinline__ tf_cu_bf16 &operator=(float v)
    {
        u = tf_f32_to_bf16(v);
        return *this;
    }
};
struct tf_cu_f16 {
    uint16_t u;
    __host__ __device__ __forceinline__ operator float() const { return tf_f16_to_f32(u); }
    __host__ __device__ __forceinline__ tf_cu_f16 &operator=(float v)
    {
        u = tf_f32_to_f16(v);
        return *this;
    }
};

/* the fp32 value of an element of any of the three types (float: itself) */
__host__ __device__ __forceinline__ float tf_cu_f32(float v) { return v; }
__host__ __device__ __forceinline__ float tf_cu_f32(tf_cu_bf16 v) { return (float)v; }
__host__ __device__ __forceinline__ float tf_cu_f32(tf_cu_f16 v) { return (float)v; }

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
