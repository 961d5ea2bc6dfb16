/* Embedding lookup and its deterministic backward, the distance head + MSE
 * loss, and AdamW. No float atomics anywhere: every sum has a fixed order. */
#include "cuda_common.h"

#define EL_THREADS 256

/* ---- embedding ---- */
extern "C" __global__ void embed_fwd_kernel1(float *out, const float *table, const int32_t *tok,
                                             long n, int C, int vocab)
{
    const long total = n * C, stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long t = i / C, c = i % C;
        const int v = tok[t]; /* outside [0, vocab): zeros, as embed_bwd skips it */
        out[i] = v >= 0 && v < vocab ? table[(long)v * C + c] : 0.f;
    }
}

/* Block (32 channels x 8 token lanes) per (vocab entry v, 32-channel group).
 * Lane ty sums the tokens t = ty, ty+8, ... equal to v in order; the 8 lane
 * sums are then added in lane order: the result depends only on the shape. */
#define EB_TX 32
#define EB_TY 8
extern "C" __global__ void __launch_bounds__(EB_TX *EB_TY)
embed_bwd_kernel1(float *dtable, const float *dout, const int32_t *tok, long n, int C)
{
    __shared__ float part[EB_TY][EB_TX];
    const int v = blockIdx.y;
    const int c = blockIdx.x * EB_TX + threadIdx.x;
    float s = 0.f;
    if (c < C)
        for (long t = threadIdx.y; t < n; t += EB_TY)
            if (tok[t] == v) s += dout[t * C + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tsum = 0.f;
        for (int k = 0; k < EB_TY; ++k) tsum += part[k][threadIdx.x];
        dtable[(long)v * C + c] += tsum;
    }
}

extern "C" void tf_cu_t_embed_fwd(tf_backend *be, float *out, const float *table,
                                  const int32_t *tok, long n, int C, int vocab)
{
    if (n > 0 && C > 0)
        TF_LAUNCH(embed_fwd_kernel1, dim3(tf_cu_grid(be, n * C, EL_THREADS)), dim3(EL_THREADS),
                  be->stream, out, table, tok, n, C, vocab);
}

extern "C" void tf_cu_t_embed_bwd(tf_backend *be, float *dtable, const float *dout,
                                  const int32_t *tok, long n, int C, int vocab)
{
    if (n > 0 && C > 0 && vocab > 0)
        TF_LAUNCH(embed_bwd_kernel1, dim3((unsigned)((C + EB_TX - 1) / EB_TX), (unsigned)vocab),
                  dim3(EB_TX, EB_TY), be->stream, dtable, dout, tok, n, C);
}

/* ---- distance head + MSE ----
 * One block of 1024 threads: thread k handles i = k, k+1024, ... and keeps a
 * double partial; the partials are added by a fixed tree. */
#define MSE_THREADS 1024
extern "C" __global__ void __launch_bounds__(MSE_THREADS)
mse_head_fwd_kernel1(float *pred, float *loss, const float *logit, const float *target, long n,
                     float dmax)
{
    __shared__ double part[MSE_THREADS];
    double s = 0.0;
    for (long i = threadIdx.x; i < n; i += MSE_THREADS) {
        const float p = dmax * tf_sigmoidf(logit[i]);
        pred[i] = p;
        const float d = p - target[i];
        s += (double)d * d;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = MSE_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) loss[0] = (float)(part[0] / (double)n);
}

/* seed: the loss's gradient seed in device memory (NULL: 1), folded into
 * 2/n so that a seed of 1 keeps the unscaled bits */
extern "C" __global__ void mse_head_bwd_kernel1(float *dlogit, const float *pred,
                                                const float *target, long n, float dmax,
                                                const float *seed)
{
    const float k = 2.f / (float)n * (seed ? *seed : 1.f);
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float p = pred[i];
        dlogit[i] = k * (p - target[i]) * p * (1.f - p / dmax);
    }
}

extern "C" void tf_cu_t_mse_head_fwd(tf_backend *be, float *pred, float *loss, const float *logit,
                                     const float *target, long n, float dmax)
{
    if (n <= 0) return;
    TF_LAUNCH(mse_head_fwd_kernel1, dim3(1), dim3(MSE_THREADS), be->stream, pred, loss, logit,
              target, n, dmax);
}

extern "C" void tf_cu_t_mse_head_bwd(tf_backend *be, float *dlogit, const float *pred,
                                     const float *target, long n, float dmax,
                                     const float *loss_scale)
{
    if (n > 0)
        TF_LAUNCH(mse_head_bwd_kernel1, dim3(tf_cu_grid(be, n, EL_THREADS)), dim3(EL_THREADS),
                  be->stream, dlogit, pred, target, n, dmax, loss_scale);
}

/* ---- AdamW (PyTorch formula; hyper: ops.h TF_HYPER_* in device memory,
 * read at run time so that a captured graph sees the current step, the
 * gradient's multiplier and whether the step is skipped) ---- */
template <class H>
__global__ void adamw_kernel1(float *p, H *ph, const float *g, float *m, float *v, long n,
                              const float *hyper)
{
    if (hyper[TF_HYPER_NONFINITE] != 0.f) return; /* a skipped step: p, m, v as they are */
    const float lr = hyper[TF_HYPER_LR], b1 = hyper[TF_HYPER_B1], b2 = hyper[TF_HYPER_B2];
    const float eps = hyper[TF_HYPER_EPS], wd = hyper[TF_HYPER_WD];
    const float bc1 = hyper[TF_HYPER_BC1], bc2 = hyper[TF_HYPER_BC2];
    const float gmul = hyper[TF_HYPER_GRAD_MUL]; /* 1 multiplies exactly */
    const float step = lr / bc1, sbc2 = sqrtf(bc2), decay = 1.f - lr * wd;
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float gi = g[i] * gmul;
        const float mi = b1 * m[i] + (1.f - b1) * gi;
        const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float pi = p[i] * decay - step * (mi / (sqrtf(vi) / sbc2 + eps)); /* addcdiv order */
        p[i] = pi;
        if (ph) ph[i] = pi; /* rounded to H (H float: ph is NULL) */
    }
}

extern "C" void tf_cu_t_adamw(tf_backend *be, float *p, void *ph, const float *g, float *m,
                              float *v, long n, const float *hyper, tf_dtype t)
{
    if (n <= 0) return;
    const dim3 grid(tf_cu_grid(be, n, EL_THREADS));
    if (!ph || t == TF_F32)
        TF_LAUNCH(adamw_kernel1<float>, grid, dim3(EL_THREADS), be->stream, p, (float *)nullptr, g,
                  m, v, n, hyper);
    else
        TF_CU_DISPATCH_HALF(t, E,
                            TF_LAUNCH(adamw_kernel1<E>, grid, dim3(EL_THREADS), be->stream, p,
                                      (E *)ph, g, m, v, n, hyper));
}
