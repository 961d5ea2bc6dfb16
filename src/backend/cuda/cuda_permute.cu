/* Data movement: permute (numpy.transpose semantics, rank <= 6), broadcast add
 * over a middle axis, and the deterministic sum over a middle axis.
 *
 * permute first drops size-1 axes and merges output axes that are also
 * adjacent, in order, in the input. What is left is either a copy, a batched
 * 2-D transpose ([P, R, S] -> [P, S, R], e.g. (0,3,1,2) on [B,X,Y,C]) done
 * with 32x32 shared-memory tiles, or the generic kernel, which walks the
 * output contiguously and gathers from the input. Kernel level 3 first tries
 * the kernel2 versions (cuda_permute2.cu). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_permute.h"

#define PM_THREADS 256
#define TP_TILE 32
#define TP_ROWS 8

/* bodies for T = float (the fp32 kernels) and the half types (cuda_half.h);
 * without accumulate a half element moves as its bits */
template <class T>
__device__ __forceinline__ void permute_body(T *out, const T *in, const tf_cu_perm &p, long total,
                                             int accumulate)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        long rem = i, off = 0;
        for (int a = p.rank - 1; a >= 0; --a) {
            const long c = rem % p.odims[a];
            rem /= p.odims[a];
            off += c * p.istride[a];
        }
        if (accumulate)
            out[i] = out[i] + in[off];
        else
            out[i] = in[off];
    }
}

/* in [P, R, S] -> out [P, S, R]; grid (ceil(S/32), ceil(R/32), P) */
template <class T>
__device__ __forceinline__ void permute_transpose_body(T *out, const T *in, long R, long S,
                                                       int accumulate)
{
    __shared__ T tile[TP_TILE][TP_TILE + 1];
    const long p = blockIdx.z;
    const long s0 = (long)blockIdx.x * TP_TILE, r0 = (long)blockIdx.y * TP_TILE;
    const T *ip = in + p * R * S;
    T *op = out + p * R * S;
    for (int k = threadIdx.y; k < TP_TILE; k += TP_ROWS) {
        const long r = r0 + k, s = s0 + threadIdx.x;
        if (r < R && s < S) tile[k][threadIdx.x] = ip[r * S + s];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < TP_TILE; k += TP_ROWS) {
        const long s = s0 + k, r = r0 + threadIdx.x;
        if (r < R && s < S) {
            const T v = tile[threadIdx.x][k];
            if (accumulate)
                op[s * R + r] = op[s * R + r] + v;
            else
                op[s * R + r] = v;
        }
    }
}

template <class T>
__device__ __forceinline__ void permute_copy_acc_body(T *y, const T *x, long n)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = y[i] + x[i];
}

extern "C" __global__ void permute_kernel1(float *out, const float *in, tf_cu_perm p, long total,
                                           int accumulate)
{
    permute_body(out, in, p, total, accumulate);
}
extern "C" __global__ void __launch_bounds__(TP_TILE *TP_ROWS)
permute_transpose_kernel1(float *out, const float *in, long R, long S, int accumulate)
{
    permute_transpose_body(out, in, R, S, accumulate);
}
extern "C" __global__ void permute_copy_acc_kernel1(float *y, const float *x, long n)
{
    permute_copy_acc_body(y, x, n);
}
template <class T>
__global__ void permute_kernel1_t(T *out, const T *in, tf_cu_perm p, long total, int accumulate)
{
    permute_body(out, in, p, total, accumulate);
}
template <class T>
__global__ void __launch_bounds__(TP_TILE *TP_ROWS)
permute_transpose_kernel1_t(T *out, const T *in, long R, long S, int accumulate)
{
    permute_transpose_body(out, in, R, S, accumulate);
}
template <class T> __global__ void permute_copy_acc_kernel1_t(T *y, const T *x, long n)
{
    permute_copy_acc_body(y, x, n);
}

/* launches: fp32 runs the extern "C" kernels above (their names in traces),
 * a half type the same bodies instantiated for it */
static void pm_gather(const tf_backend *be, long total, float *out, const float *in,
                      const tf_cu_perm &p, int acc)
{
    TF_LAUNCH(permute_kernel1, dim3(tf_cu_grid(be, total, PM_THREADS)), dim3(PM_THREADS),
              be->stream, out, in, p, total, acc);
}
template <class T>
static void pm_gather(const tf_backend *be, long total, T *out, const T *in, const tf_cu_perm &p,
                      int acc)
{
    TF_LAUNCH(permute_kernel1_t<T>, dim3(tf_cu_grid(be, total, PM_THREADS)), dim3(PM_THREADS),
              be->stream, out, in, p, total, acc);
}
static void pm_transpose(const tf_backend *be, dim3 grid, float *out, const float *in, long R,
                         long S, int acc)
{
    TF_LAUNCH(permute_transpose_kernel1, grid, dim3(TP_TILE, TP_ROWS), be->stream, out, in, R, S,
              acc);
}
template <class T>
static void pm_transpose(const tf_backend *be, dim3 grid, T *out, const T *in, long R, long S,
                         int acc)
{
    TF_LAUNCH(permute_transpose_kernel1_t<T>, grid, dim3(TP_TILE, TP_ROWS), be->stream, out, in,
              R, S, acc);
}
static void pm_copy_acc(const tf_backend *be, long n, float *y, const float *x)
{
    TF_LAUNCH(permute_copy_acc_kernel1, dim3(tf_cu_grid(be, n, PM_THREADS)), dim3(PM_THREADS),
              be->stream, y, x, n);
}
template <class T> static void pm_copy_acc(const tf_backend *be, long n, T *y, const T *x)
{
    TF_LAUNCH(permute_copy_acc_kernel1_t<T>, dim3(tf_cu_grid(be, n, PM_THREADS)),
              dim3(PM_THREADS), be->stream, y, x, n);
}
static int pm_level3(tf_backend *be, float *out, const float *in, const tf_cu_perm *p, long total,
                     int acc)
{
    return be->kernel_level >= 3 && tf_cu_permute2(be, out, in, p, total, acc);
}
/* kernel2 (cuda_permute2.cu) moves floats: a half type takes kernel1 */
template <class T>
static int pm_level3(tf_backend *, T *, const T *, const tf_cu_perm *, long, int)
{
    return 0;
}

template <class T>
static void permute_t(tf_backend *be, T *out, const T *in, const tf_permute_args *a)
{
    long total = 1, istr[6];
    int r = a->rank;
    if (r < 1 || r > 6) {
        fprintf(stderr, "tinyfold: internal error: permute rank %d (1..6 supported) (%s:%d)\n", r,
                __FILE__, __LINE__);
        abort();
    }
    /* input strides */
    istr[r - 1] = 1;
    for (int k = r - 2; k >= 0; --k) istr[k] = istr[k + 1] * a->dims[k + 1];
    for (int k = 0; k < r; ++k) total *= a->dims[k];
    if (total <= 0) return;

    /* output axes (dim, input stride), dropping size-1 axes, merging runs */
    tf_cu_perm p;
    int n = 0;
    for (int k = 0; k < r; ++k) {
        const int ax = a->perm[k];
        const long d = a->dims[ax];
        if (d == 1) continue;
        if (n > 0 && p.istride[n - 1] == istr[ax] * d) {
            /* offset a*s_prev + b*s with s_prev == s*d is (a*d + b)*s: one axis */
            p.odims[n - 1] *= d;
            p.istride[n - 1] = istr[ax];
        } else {
            p.odims[n] = d;
            p.istride[n] = istr[ax];
            ++n;
        }
    }
    p.rank = n;

    if (n <= 1) { /* identity */
        if (a->accumulate)
            pm_copy_acc(be, total, out, in);
        else if (out != in)
            TF_CUDA_CHECK(cudaMemcpyAsync(out, in, (size_t)total * sizeof(T),
                                          cudaMemcpyDeviceToDevice, be->stream));
        return;
    }
    if (pm_level3(be, out, in, &p, total, a->accumulate)) return;
    /* batched transpose: out axes (P, S, R) with input strides (R*S, 1, S) */
    const int nt = n - 2;
    const long S = p.odims[nt], R = p.odims[nt + 1];
    if ((n == 2 || (n == 3 && p.istride[0] == R * S)) && p.istride[nt] == 1 &&
        p.istride[nt + 1] == S) {
        const long P = n == 3 ? p.odims[0] : 1;
        if (P <= 65535) {
            dim3 grid((unsigned)((S + TP_TILE - 1) / TP_TILE), (unsigned)((R + TP_TILE - 1) / TP_TILE),
                      (unsigned)P);
            if (grid.y <= 65535) {
                pm_transpose(be, grid, out, in, R, S, a->accumulate);
                return;
            }
        }
    }
    pm_gather(be, total, out, in, p, a->accumulate);
}

extern "C" void tf_cu_permute(tf_backend *be, float *out, const float *in,
                              const tf_permute_args *a)
{
    permute_t(be, out, in, a);
}
extern "C" void tf_cu_permute_h(tf_backend *be, void *out, const void *in,
                                const tf_permute_args *a)
{
    TF_CU_DISPATCH_HALF(a->t, T, permute_t(be, (T *)out, (const T *)in, a));
}

/* ---- broadcast add / sum over the middle axis ---- */
extern "C" __global__ void add_bcast_mid_kernel1(float *y, const float *x, long mid, long inner,
                                                 long total)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long o = i / (mid * inner), k = i % inner;
        y[i] += x[o * inner + k];
    }
}

/* one thread per (o, i); the m loop runs in order, so the sum is deterministic */
extern "C" __global__ void sum_mid_kernel1(float *y, const float *x, long outer, long mid,
                                           long inner, int accumulate)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
        const long o = t / inner, k = t % inner;
        const float *xp = x + o * mid * inner + k;
        float s = 0.f;
        for (long m = 0; m < mid; ++m) s += xp[m * inner];
        y[t] = accumulate ? y[t] + s : s;
    }
}

extern "C" void tf_cu_add_bcast_mid(tf_backend *be, float *y, const float *x, long outer,
                                    long mid, long inner)
{
    const long total = outer * mid * inner;
    if (total > 0)
        TF_LAUNCH(add_bcast_mid_kernel1, dim3(tf_cu_grid(be, total, PM_THREADS)),
                  dim3(PM_THREADS), be->stream, y, x, mid, inner, total);
}

extern "C" void tf_cu_sum_mid(tf_backend *be, float *y, const float *x, long outer, long mid,
                              long inner, int accumulate)
{
    const long n = outer * inner;
    if (n <= 0) return;
    if (mid <= 0) { /* empty sum */
        if (!accumulate) TF_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n * sizeof(float), be->stream));
        return;
    }
    TF_LAUNCH(sum_mid_kernel1, dim3(tf_cu_grid(be, n, PM_THREADS)), dim3(PM_THREADS), be->stream,
              y, x, outer, mid, inner, accumulate);
}

/* ---- broadcast add / sum over the middle axis, half types: kernel1's
 * arithmetic on widened elements, the sum in fp32, rounded once ---- */
template <class T>
__global__ void add_bcast_mid_kernel1_t(T *y, const T *x, long mid, long inner, long total)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long o = i / (mid * inner), k = i % inner;
        y[i] = y[i] + x[o * inner + k];
    }
}

template <class T>
__global__ void sum_mid_kernel1_t(T *y, const T *x, long outer, long mid, long inner,
                                  int accumulate)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
        const long o = t / inner, k = t % inner;
        const T *xp = x + o * mid * inner + k;
        float s = 0.f;
        for (long m = 0; m < mid; ++m) s += xp[m * inner];
        y[t] = accumulate ? y[t] + s : s;
    }
}

extern "C" void tf_cu_add_bcast_mid_h(tf_backend *be, void *y, const void *x, long outer,
                                      long mid, long inner, tf_dtype t)
{
    const long total = outer * mid * inner;
    if (total > 0)
        TF_CU_DISPATCH_HALF(t, T,
                            TF_LAUNCH(add_bcast_mid_kernel1_t<T>,
                                      dim3(tf_cu_grid(be, total, PM_THREADS)), dim3(PM_THREADS),
                                      be->stream, (T *)y, (const T *)x, mid, inner, total));
}

extern "C" void tf_cu_sum_mid_h(tf_backend *be, void *y, const void *x, long outer, long mid,
                                long inner, int accumulate, tf_dtype t)
{
    const long n = outer * inner;
    if (n <= 0) return;
    if (mid <= 0) { /* empty sum: +0 in every type */
        if (!accumulate)
            TF_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n * tf_dtype_size(t), be->stream));
        return;
    }
    TF_CU_DISPATCH_HALF(t, T,
                        TF_LAUNCH(sum_mid_kernel1_t<T>, dim3(tf_cu_grid(be, n, PM_THREADS)),
                                  dim3(PM_THREADS), be->stream, (T *)y, (const T *)x, outer, mid,
                                  inner, accumulate));
}
