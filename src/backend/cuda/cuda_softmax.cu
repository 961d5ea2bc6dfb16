/* Row-wise softmax (the v1 path that materialises scores): one warp per row.
 * A lane reads and writes the same columns in every pass, so y may alias x
 * and dx may alias dy. */
#include <math.h>

#include "cuda_common.h"

#define SM_THREADS 256 /* 8 rows per block */

extern "C" __global__ void __launch_bounds__(SM_THREADS)
softmax_fwd_kernel1(float *y, const float *x, long rows, int cols)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (SM_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += TF_GROUP) m = fmaxf(m, xr[c]);
    m = tf_warp_max(m);
    float s = 0.f;
    for (int c = lane; c < cols; c += TF_GROUP) s += expf(xr[c] - m);
    const float inv = 1.f / tf_warp_sum(s);
    for (int c = lane; c < cols; c += TF_GROUP) yr[c] = expf(xr[c] - m) * inv;
}

extern "C" __global__ void __launch_bounds__(SM_THREADS)
softmax_bwd_kernel1(float *dx, const float *dy, const float *y, long rows, int cols)
{
    const int lane = threadIdx.x % TF_GROUP;
    const long r = (long)blockIdx.x * (SM_THREADS / TF_GROUP) + (threadIdx.x / TF_GROUP);
    if (r >= rows) return;
    const float *dyr = dy + r * cols, *yr = y + r * cols;
    float *dxr = dx + r * cols;
    float s = 0.f;
    for (int c = lane; c < cols; c += TF_GROUP) s += dyr[c] * yr[c];
    s = tf_warp_sum(s);
    for (int c = lane; c < cols; c += TF_GROUP) dxr[c] = yr[c] * (dyr[c] - s);
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
