/* Row-wise softmax (the v1 path that materialises scores): one warp per row.
 * A lane reads and writes the same columns in every pass, so y may alias x
 * and dx may alias dy. */
#include <math.h>

#include "cuda_common.h"

#define SM_THREADS 256 /* 8 rows per block */

/* bodies for T = float (the fp32 kernels) and the half types (cuda_half.h) */
template <class T>
__device__ __forceinline__ void softmax_fwd_body(T *y, const T *x, long rows, int cols)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (SM_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += TF_GROUP) m = fmaxf(m, xr[c]);
    m = tf_warp_max(m);
    float s = 0.f;
    for (int c = lane; c < cols; c += TF_GROUP) s += expf(xr[c] - m);
    const float inv = 1.f / tf_warp_sum(s);
    for (int c = lane; c < cols; c += TF_GROUP) yr[c] = expf(xr[c] - m) * inv;
}

template <class T>
__device__ __forceinline__ void softmax_bwd_body(T *dx, const T *dy, const T *y, long rows,
                                                 int cols)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (SM_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    const T *dyr = dy + r * cols, *yr = y + r * cols;
    T *dxr = dx + r * cols;
    float s = 0.f;
    for (int c = lane; c < cols; c += TF_GROUP) s += dyr[c] * yr[c];
    s = tf_warp_sum(s);
    for (int c = lane; c < cols; c += TF_GROUP) dxr[c] = yr[c] * (dyr[c] - s);
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
softmax_fwd_kernel1(float *y, const float *x, long rows, int cols)
{
    softmax_fwd_body(y, x, rows, cols);
}
extern "C" __global__ void __launch_bounds__(SM_THREADS)
softmax_bwd_kernel1(float *dx, const float *dy, const float *y, long rows, int cols)
{
    softmax_bwd_body(dx, dy, y, rows, cols);
}
template <class T>
__global__ void __launch_bounds__(SM_THREADS)
softmax_fwd_kernel1_t(T *y, const T *x, long rows, int cols)
{
    softmax_fwd_body(y, x, rows, cols);
}
template <class T>
__global__ void __launch_bounds__(SM_THREADS)
softmax_bwd_kernel1_t(T *dx, const T *dy, const T *y, long rows, int cols)
{
    softmax_bwd_body(dx, dy, y, rows, cols);
}

extern "C" void tf_cu_softmax_fwd(tf_backend *be, float *y, const float *x, long rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    const long nb = (rows + SM_THREADS / TF_GROUP - 1) / (SM_THREADS / TF_GROUP);
    TF_LAUNCH(softmax_fwd_kernel1, dim3((unsigned)nb), dim3(SM_THREADS), be->stream, y, x, rows,
              cols);
}

extern "C" void tf_cu_softmax_bwd(tf_backend *be, float *dx, const float *dy, const float *y,
                                  long rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    const long nb = (rows + SM_THREADS / TF_GROUP - 1) / (SM_THREADS / TF_GROUP);
    TF_LAUNCH(softmax_bwd_kernel1, dim3((unsigned)nb), dim3(SM_THREADS), be->stream, dx, dy, y,
              rows, cols);
}

extern "C" void tf_cu_softmax_fwd_h(tf_backend *be, void *y, const void *x, long rows, int cols,
                                    tf_dtype t)
{
    if (rows <= 0 || cols <= 0) return;
    const long nb = (rows + SM_THREADS / TF_GROUP - 1) / (SM_THREADS / TF_GROUP);
    TF_CU_DISPATCH_HALF(t, T,
                        TF_LAUNCH(softmax_fwd_kernel1_t<T>, dim3((unsigned)nb), dim3(SM_THREADS),
                                  be->stream, (T *)y, (const T *)x, rows, cols));
}

extern "C" void tf_cu_softmax_bwd_h(tf_backend *be, void *dx, const void *dy, const void *y,
                                    long rows, int cols, tf_dtype t)
{
    if (rows <= 0 || cols <= 0) return;
    const long nb = (rows + SM_THREADS / TF_GROUP - 1) / (SM_THREADS / TF_GROUP);
    TF_CU_DISPATCH_HALF(t, T,
                        TF_LAUNCH(softmax_bwd_kernel1_t<T>, dim3((unsigned)nb), dim3(SM_THREADS),
                                  be->stream, (T *)dx, (const T *)dy, (const T *)y, rows, cols));
}
