/* Shared by cuda_permute.cu (planning, kernel1) and cuda_permute2.cu (kernel2). */
#ifndef TF_CUDA_PERMUTE_H
#define TF_CUDA_PERMUTE_H

#include "cuda_common.h"

/* A permute after dropping size-1 axes and merging output axes that are
 * adjacent, in order, in the input: out (contiguous, dims odims) at index
 * (i_0..i_{rank-1}) reads in[sum_a i_a * istride[a]]. */
typedef struct {
    int rank;
    long odims[6];   /* output dims */
    long istride[6]; /* input stride of output axis a */
} tf_cu_perm;

#ifdef __cplusplus
extern "C" {
#endif
/* Level-3 kernels (cuda_permute2.cu) for the shapes they cover: a preserved
 * inner run moved as float4s, or a batched transpose through 64x64 tiles.
 * Returns 1 when it launched, 0 when the caller's kernel1 path should run. */
int tf_cu_permute2(tf_backend *be, float *out, const float *in, const tf_cu_perm *p, long total,
                   int accumulate);
#ifdef __cplusplus
}
#endif
#endif
