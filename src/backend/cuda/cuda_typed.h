/* Loads and stores of an activation of the type an op names (ops.h): fp32 is
 * a plain access, bf16 and fp16 are widened exactly on load and rounded to
 * nearest even on store (tf_dtype.h). The type is uniform over a launch, so
 * the branch costs no divergence. */
#ifndef TF_CUDA_TYPED_H
#define TF_CUDA_TYPED_H

#include "backend/tf_dtype.h"

__device__ __forceinline__ float tf_cu_ld(const void *p, long i, tf_dtype t)
{
    return t == TF_F32    ? ((const float *)p)[i]
           : t == TF_BF16 ? tf_bf16_to_f32(((const uint16_t *)p)[i])
                          : tf_f16_to_f32(((const uint16_t *)p)[i]);
}

__device__ __forceinline__ void tf_cu_st(void *p, long i, tf_dtype t, float v)
{
    if (t == TF_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == TF_BF16 ? tf_f32_to_bf16(v) : tf_f32_to_f16(v);
}

/* p advanced by i elements of type t */
__host__ __device__ __forceinline__ const void *tf_cu_at(const void *p, long i, tf_dtype t)
{
    return (const char *)p + i * (long)tf_dtype_size(t);
}
__host__ __device__ __forceinline__ void *tf_cu_at(void *p, long i, tf_dtype t)
{
    return (char *)p + i * (long)tf_dtype_size(t);
}

#endif
