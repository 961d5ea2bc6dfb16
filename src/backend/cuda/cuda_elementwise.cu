/* Elementwise ops: grid-stride loops, float4 when every pointer is 16-byte
 * aligned (a scalar loop takes the tail and unaligned views). Each element is
 * read and written by one thread, so in-place calls (y == a, ...) are safe. */
#include "cuda_common.h"
#include "cuda_typed.h"

#define EW_THREADS 256

/* relu that lets NaN through, like PyTorch */
__device__ __forceinline__ float reluf_(float x) { return x < 0.f ? 0.f : x; }

/* y[i] = f(u[i], v[i], w[i]); unused inputs are passed as u. */
template <class F>
__device__ __forceinline__ void ew3(float *y, const float *u, const float *v, const float *w,
                                    long n, F f)
{
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    const bool vec = tf_cu_aligned(y, 16) && tf_cu_aligned(u, 16) && tf_cu_aligned(v, 16) &&
                     tf_cu_aligned(w, 16);
    const long nv = vec ? n / 4 : 0;
    for (long i = tid; i < nv; i += stride) {
        const float4 a = reinterpret_cast<const float4 *>(u)[i];
        const float4 b = reinterpret_cast<const float4 *>(v)[i];
        const float4 c = reinterpret_cast<const float4 *>(w)[i];
        float4 r;
        r.x = f(a.x, b.x, c.x);
        r.y = f(a.y, b.y, c.y);
        r.z = f(a.z, b.z, c.z);
        r.w = f(a.w, b.w, c.w);
        reinterpret_cast<float4 *>(y)[i] = r;
    }
    for (long i = nv * 4 + tid; i < n; i += stride) y[i] = f(u[i], v[i], w[i]);
}

struct AddF {
    __device__ float operator()(float a, float b, float) const { return a + b; }
};
struct MulF {
    __device__ float operator()(float a, float b, float) const { return a * b; }
};
struct ScaleF {
    float alpha;
    __device__ float operator()(float x, float, float) const { return alpha * x; }
};
struct SigmoidF {
    __device__ float operator()(float x, float, float) const { return tf_sigmoidf(x); }
};
struct ReluF {
    __device__ float operator()(float x, float, float) const { return reluf_(x); }
};
struct SigmoidBwdF { /* (dy, y) */
    __device__ float operator()(float dy, float y, float) const { return dy * y * (1.f - y); }
};
struct ReluBwdF { /* (dy, y) */
    __device__ float operator()(float dy, float y, float) const { return y > 0.f ? dy : 0.f; }
};
struct GateF { /* (a, g) */
    __device__ float operator()(float a, float g, float) const { return a * tf_sigmoidf(g); }
};
struct GateResF { /* (res, a, g) */
    __device__ float operator()(float r, float a, float g) const { return r + a * tf_sigmoidf(g); }
};

extern "C" __global__ void add_kernel1(float *y, const float *a, const float *b, long n)
{
    ew3(y, a, b, a, n, AddF());
}
extern "C" __global__ void mul_kernel1(float *y, const float *a, const float *b, long n)
{
    ew3(y, a, b, a, n, MulF());
}
extern "C" __global__ void scale_kernel1(float *y, const float *x, float alpha, long n)
{
    ScaleF f;
    f.alpha = alpha;
    ew3(y, x, x, x, n, f);
}
extern "C" __global__ void sigmoid_fwd_kernel1(float *y, const float *x, long n)
{
    ew3(y, x, x, x, n, SigmoidF());
}
extern "C" __global__ void relu_fwd_kernel1(float *y, const float *x, long n)
{
    ew3(y, x, x, x, n, ReluF());
}
extern "C" __global__ void sigmoid_bwd_kernel1(float *dx, const float *dy, const float *y, long n)
{
    ew3(dx, dy, y, dy, n, SigmoidBwdF());
}
extern "C" __global__ void relu_bwd_kernel1(float *dx, const float *dy, const float *y, long n)
{
    ew3(dx, dy, y, dy, n, ReluBwdF());
}
extern "C" __global__ void gate_fwd_kernel1(float *y, const float *a, const float *g, long n)
{
    ew3(y, a, g, a, n, GateF());
}
extern "C" __global__ void gate_residual_fwd_kernel1(float *out, const float *res, const float *a,
                                                     const float *g, long n)
{
    ew3(out, res, a, g, n, GateResF());
}

/* two outputs (tf_gate_bwd_one): da = dy*s, dg = dy*a*s*(1-s) */
extern "C" __global__ void gate_bwd_kernel1(float *da, float *dg, const float *dy, const float *a,
                                            const float *g, long n)
{
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    const bool vec = tf_cu_aligned(da, 16) && tf_cu_aligned(dg, 16) && tf_cu_aligned(dy, 16) &&
                     tf_cu_aligned(a, 16) && tf_cu_aligned(g, 16);
    const long nv = vec ? n / 4 : 0;
    for (long i = tid; i < nv; i += stride) {
        const float4 y4 = reinterpret_cast<const float4 *>(dy)[i];
        const float4 a4 = reinterpret_cast<const float4 *>(a)[i];
        const float4 g4 = reinterpret_cast<const float4 *>(g)[i];
        float4 r, s;
        tf_gate_bwd_one(&r.x, &s.x, y4.x, a4.x, g4.x);
        tf_gate_bwd_one(&r.y, &s.y, y4.y, a4.y, g4.y);
        tf_gate_bwd_one(&r.z, &s.z, y4.z, a4.z, g4.z);
        tf_gate_bwd_one(&r.w, &s.w, y4.w, a4.w, g4.w);
        reinterpret_cast<float4 *>(da)[i] = r;
        reinterpret_cast<float4 *>(dg)[i] = s;
    }
    for (long i = nv * 4 + tid; i < n; i += stride) {
        float r, s;
        tf_gate_bwd_one(&r, &s, dy[i], a[i], g[i]);
        da[i] = r;
        dg[i] = s;
    }
}

/* C[p*strideC + r*ldc + c] = relu(...) for p < batch, r < M, c < N */
/* element i of `batch` strided [M, N] matrices (i = (p*M + r)*N + c): its
 * offset p*stride + r*ld + c */
__device__ __forceinline__ long strided_at(long i, int M, int N, long ld, long stride)
{
    const long c = i % N, r = (i / N) % M, p = i / ((long)N * M);
    return p * stride + r * ld + c;
}

extern "C" __global__ void relu_strided_kernel1(void *C, int M, int N, long ldc, long strideC,
                                                long total, tf_dtype t)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long o = strided_at(i, M, N, ldc, strideC);
        tf_cu_st(C, o, t, reluf_(tf_cu_ld(C, o, t)));
    }
}

/* ---- bf16 / fp16 (ops.h): every operand widened, the functor in fp32, one
 * rounding at the store; each operand has its own type (gate_residual's
 * out and res are fp32) ---- */
template <class F>
__global__ void ew3_typed_kernel1(void *y, tf_dtype yt, const void *u, tf_dtype ut, const void *v,
                                  tf_dtype vt, const void *w, tf_dtype wt, long n, F f)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        tf_cu_st(y, i, yt, f(tf_cu_ld(u, i, ut), tf_cu_ld(v, i, vt), tf_cu_ld(w, i, wt)));
}

extern "C" __global__ void gate_bwd_typed_kernel1(void *da, void *dg, const void *dy,
                                                  const void *a, const void *g, long n,
                                                  tf_dtype t)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float r, q;
        tf_gate_bwd_one(&r, &q, tf_cu_ld(dy, i, t), tf_cu_ld(a, i, t), tf_cu_ld(g, i, t));
        tf_cu_st(da, i, t, r);
        tf_cu_st(dg, i, t, q);
    }
}

#define TGRID(n) dim3(tf_cu_grid(be, (n), EW_THREADS))

template <class F>
static void ew3_typed(tf_backend *be, void *y, tf_dtype yt, const void *u, tf_dtype ut,
                      const void *v, tf_dtype vt, const void *w, tf_dtype wt, long n, F f)
{
    if (n > 0)
        TF_LAUNCH(ew3_typed_kernel1<F>, TGRID(n), dim3(EW_THREADS), be->stream, y, yt, u, ut, v,
                  vt, w, wt, n, f);
}

extern "C" void tf_cu_h_add(tf_backend *be, void *y, const void *a, const void *b, long n,
                            tf_dtype t)
{
    ew3_typed(be, y, t, a, t, b, t, a, t, n, AddF());
}
extern "C" void tf_cu_h_mul(tf_backend *be, void *y, const void *a, const void *b, long n,
                            tf_dtype t)
{
    ew3_typed(be, y, t, a, t, b, t, a, t, n, MulF());
}
extern "C" void tf_cu_h_scale(tf_backend *be, void *y, const void *x, float alpha, long n,
                              tf_dtype t)
{
    ScaleF f;
    f.alpha = alpha;
    ew3_typed(be, y, t, x, t, x, t, x, t, n, f);
}
extern "C" void tf_cu_h_act_fwd(tf_backend *be, tf_act act, void *y, const void *x, long n,
                                tf_dtype t)
{
    if (act == TF_ACT_SIGMOID)
        ew3_typed(be, y, t, x, t, x, t, x, t, n, SigmoidF());
    else
        ew3_typed(be, y, t, x, t, x, t, x, t, n, ReluF());
}
extern "C" void tf_cu_h_act_bwd(tf_backend *be, tf_act act, void *dx, const void *dy,
                                const void *y, long n, tf_dtype t)
{
    if (act == TF_ACT_SIGMOID)
        ew3_typed(be, dx, t, dy, t, y, t, dy, t, n, SigmoidBwdF());
    else
        ew3_typed(be, dx, t, dy, t, y, t, dy, t, n, ReluBwdF());
}
extern "C" void tf_cu_h_gate_fwd(tf_backend *be, void *y, const void *a, const void *g, long n,
                                 tf_dtype t)
{
    ew3_typed(be, y, t, a, t, g, t, a, t, n, GateF());
}
extern "C" void tf_cu_h_gate_bwd(tf_backend *be, void *da, void *dg, const void *dy,
                                 const void *a, const void *g, long n, tf_dtype t)
{
    if (n > 0)
        TF_LAUNCH(gate_bwd_typed_kernel1, TGRID(n), dim3(EW_THREADS), be->stream, da, dg, dy, a,
                  g, n, t);
}
extern "C" void tf_cu_h_gate_residual_fwd(tf_backend *be, float *out, const float *res,
                                          const void *a, const void *g, long n, tf_dtype t)
{
    ew3_typed(be, out, TF_F32, res, TF_F32, a, t, g, t, n, GateResF());
}

/* ---- host wrappers ---- */
#define GRID(n) dim3(tf_cu_grid(be, ((n) + 3) / 4, EW_THREADS))

extern "C" void tf_cu_add(tf_backend *be, float *y, const float *a, const float *b, long n)
{
    if (n > 0) TF_LAUNCH(add_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, a, b, n);
}
extern "C" void tf_cu_mul(tf_backend *be, float *y, const float *a, const float *b, long n)
{
    if (n > 0) TF_LAUNCH(mul_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, a, b, n);
}
extern "C" void tf_cu_scale(tf_backend *be, float *y, const float *x, float alpha, long n)
{
    if (n > 0) TF_LAUNCH(scale_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, x, alpha, n);
}
extern "C" void tf_cu_act_fwd(tf_backend *be, tf_act act, float *y, const float *x, long n)
{
    if (n <= 0) return;
    if (act == TF_ACT_SIGMOID)
        TF_LAUNCH(sigmoid_fwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, x, n);
    else
        TF_LAUNCH(relu_fwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, x, n);
}
extern "C" void tf_cu_act_bwd(tf_backend *be, tf_act act, float *dx, const float *dy,
                              const float *y, long n)
{
    if (n <= 0) return;
    if (act == TF_ACT_SIGMOID)
        TF_LAUNCH(sigmoid_bwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, dx, dy, y, n);
    else
        TF_LAUNCH(relu_bwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, dx, dy, y, n);
}
extern "C" void tf_cu_gate_fwd(tf_backend *be, float *y, const float *a, const float *g, long n)
{
    if (n > 0) TF_LAUNCH(gate_fwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, y, a, g, n);
}
extern "C" void tf_cu_gate_bwd(tf_backend *be, float *da, float *dg, const float *dy,
                               const float *a, const float *g, long n)
{
    if (n > 0)
        TF_LAUNCH(gate_bwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, da, dg, dy, a, g, n);
}
extern "C" void tf_cu_gate_residual_fwd(tf_backend *be, float *out, const float *res,
                                        const float *a, const float *g, long n)
{
    if (n > 0)
        TF_LAUNCH(gate_residual_fwd_kernel1, GRID(n), dim3(EW_THREADS), be->stream, out, res, a,
                  g, n);
}
extern "C" void tf_cu_relu_strided(tf_backend *be, void *C, int M, int N, long ldc,
                                   long strideC, int batch, tf_dtype t)
{
    const long total = (long)M * N * batch;
    if (total > 0)
        TF_LAUNCH(relu_strided_kernel1, dim3(tf_cu_grid(be, total, EW_THREADS)),
                  dim3(EW_THREADS), be->stream, C, M, N, ldc, strideC, total, t);
}

/* ---- GEMM helpers (cuda_gemm.cu): the residual input R copied into C before a
 * cuBLAS call that scales C, and the DRELU epilogue after one ---- */
/* dst[p*stride + r*ld + c] = src[...] for p < batch, r < M, c < N */
extern "C" __global__ void copy_strided_kernel1(void *dst, const void *src, int M, int N,
                                                long ld, long stride, long total, tf_dtype t)
{
    const long step = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long o = strided_at(i, M, N, ld, stride);
        if (t == TF_F32)
            ((float *)dst)[o] = ((const float *)src)[o];
        else
            ((uint16_t *)dst)[o] = ((const uint16_t *)src)[o];
    }
}

/* C = aux > 0 ? C : 0 over the strided matrices (act_bwd's ReLU select) */
extern "C" __global__ void drelu_strided_kernel1(void *C, const void *aux, int M, int N,
                                                 long ldc, long strideC, long total, tf_dtype t)
{
    const long step = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long o = strided_at(i, M, N, ldc, strideC);
        tf_cu_st(C, o, t, tf_cu_ld(aux, o, t) > 0.f ? tf_cu_ld(C, o, t) : 0.f);
    }
}

extern "C" void tf_cu_copy_strided(tf_backend *be, void *dst, const void *src, int M, int N,
                                   long ld, long stride, int batch, tf_dtype t)
{
    const long total = (long)M * N * batch;
    if (total > 0)
        TF_LAUNCH(copy_strided_kernel1, dim3(tf_cu_grid(be, total, EW_THREADS)),
                  dim3(EW_THREADS), be->stream, dst, src, M, N, ld, stride, total, t);
}

extern "C" void tf_cu_drelu_strided(tf_backend *be, void *C, const void *aux, int M, int N,
                                    long ldc, long strideC, int batch, tf_dtype t)
{
    const long total = (long)M * N * batch;
    if (total <= 0) return;
    /* contiguous matrices: act_bwd's ReLU kernel in place (float4 where
     * aligned, no per-element index arithmetic; the strided kernel's held the
     * pair transition's tf32 mask pass at ~2 TB/s, 49 us a call) */
    if (ldc == N && (batch == 1 || strideC == (long)M * N)) {
        if (t == TF_F32)
            tf_cu_act_bwd(be, TF_ACT_RELU, (float *)C, (const float *)C, (const float *)aux,
                          total);
        else
            tf_cu_h_act_bwd(be, TF_ACT_RELU, C, C, aux, total, t);
    } else {
        TF_LAUNCH(drelu_strided_kernel1, dim3(tf_cu_grid(be, total, EW_THREADS)),
                  dim3(EW_THREADS), be->stream, C, aux, M, N, ldc, strideC, total, t);
    }
}
