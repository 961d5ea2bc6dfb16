/* The op table's typed entry points: fp32 calls run the fp32 kernels, bf16
 * and fp16 calls the typed ones (cuda_half_ops.cu, cuda_elementwise.cu's
 * tf_cu_h_*); and the type conversion and finiteness check, which take
 * every type. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"

#include "backend/tf_dtype.h"

static void need_valid(tf_dtype t, const char *op)
{
    if (!tf_dtype_valid(t)) {
        fprintf(stderr, "tinyfold: internal error: cuda %s with element type %d\n", op, (int)t);
        abort();
    }
}

/* the typed path: any half operand */
static int any_half2(tf_dtype a, tf_dtype b, const char *op)
{
    need_valid(a, op), need_valid(b, op);
    return a != TF_F32 || b != TF_F32;
}
static int any_half1(tf_dtype t, const char *op) { return any_half2(t, TF_F32, op); }

extern "C" {

void tf_cu_t_layernorm_fwd(tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                           const float *g, const float *b, long rows, int C, float eps,
                           tf_dtype xt, tf_dtype yt)
{
    if (any_half2(xt, yt, "layernorm_fwd")) return tf_cu_h_layernorm_fwd(be, out, mean, rstd, x, g, b, rows, C, eps, xt, yt);
    tf_cu_layernorm_fwd(be, (float *)out, mean, rstd, (const float *)x, g, b, rows, C, eps);
}
void tf_cu_t_layernorm_bwd(tf_backend *be, void *dx, float *dg, float *db, const void *dout,
                           const void *x, const float *mean, const float *rstd, const float *g,
                           long rows, int C, int acc, tf_dtype xt, tf_dtype yt)
{
    if (any_half2(xt, yt, "layernorm_bwd")) return tf_cu_h_layernorm_bwd(be, dx, dg, db, dout, x, mean, rstd, g, rows, C, acc, xt, yt);
    tf_cu_layernorm_bwd(be, (float *)dx, dg, db, (const float *)dout, (const float *)x, mean,
                        rstd, g, rows, C, acc);
}
void tf_cu_t_layernorm2_fwd(tf_backend *be, void *out, float *stats, const void *x,
                            const float *g1, const float *b1, const float *g2, const float *b2,
                            long rows, int C, float eps, tf_dtype xt, tf_dtype yt)
{
    if (any_half2(xt, yt, "layernorm2_fwd")) return tf_cu_h_layernorm2_fwd(be, out, stats, x, g1, b1, g2, b2, rows, C, eps, xt, yt);
    tf_cu_layernorm2_fwd(be, (float *)out, stats, (const float *)x, g1, b1, g2, b2, rows, C,
                         eps);
}
void tf_cu_t_layernorm2_bwd(tf_backend *be, void *dx, float *dg1, float *db1, float *dg2,
                            float *db2, const void *dout, const void *x, const float *stats,
                            const float *g1, const float *b1, const float *g2, long rows, int C,
                            int acc, tf_dtype xt, tf_dtype yt)
{
    if (any_half2(xt, yt, "layernorm2_bwd")) return tf_cu_h_layernorm2_bwd(be, dx, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2, rows, C, acc, xt, yt);
    tf_cu_layernorm2_bwd(be, (float *)dx, dg1, db1, dg2, db2, (const float *)dout,
                         (const float *)x, stats, g1, b1, g2, rows, C, acc);
}
void tf_cu_t_softmax_fwd(tf_backend *be, void *y, const void *x, long rows, int cols, tf_dtype t)
{
    if (any_half1(t, "softmax_fwd")) return tf_cu_h_softmax_fwd(be, y, x, rows, cols, t);
    tf_cu_softmax_fwd(be, (float *)y, (const float *)x, rows, cols);
}
void tf_cu_t_softmax_bwd(tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                         int cols, tf_dtype t)
{
    if (any_half1(t, "softmax_bwd")) return tf_cu_h_softmax_bwd(be, dx, dy, y, rows, cols, t);
    tf_cu_softmax_bwd(be, (float *)dx, (const float *)dy, (const float *)y, rows, cols);
}
void tf_cu_t_attn_fwd(tf_backend *be, const tf_attn_args *a)
{
    if (any_half1(a->t, "attn_fwd")) return tf_cu_h_attn_fwd(be, a);
    tf_cu_attn_fwd(be, a);
}
void tf_cu_t_attn_bwd(tf_backend *be, const tf_attn_args *a)
{
    if (any_half1(a->t, "attn_bwd")) return tf_cu_h_attn_bwd(be, a);
    tf_cu_attn_bwd(be, a);
}
void tf_cu_t_permute(tf_backend *be, void *out, const void *in, const tf_permute_args *a)
{
    if (any_half1(a->t, "permute")) return tf_cu_h_permute(be, out, in, a);
    tf_cu_permute(be, (float *)out, (const float *)in, a);
}
void tf_cu_t_add_bcast_mid(tf_backend *be, void *y, const void *x, long outer, long mid,
                           long inner, tf_dtype t)
{
    if (any_half1(t, "add_bcast_mid")) return tf_cu_h_add_bcast_mid(be, y, x, outer, mid, inner, t);
    tf_cu_add_bcast_mid(be, (float *)y, (const float *)x, outer, mid, inner);
}
void tf_cu_t_sum_mid(tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                     int acc, tf_dtype t)
{
    if (any_half1(t, "sum_mid")) return tf_cu_h_sum_mid(be, y, x, outer, mid, inner, acc, t);
    tf_cu_sum_mid(be, (float *)y, (const float *)x, outer, mid, inner, acc);
}
void tf_cu_t_add(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t)
{
    if (any_half1(t, "add")) return tf_cu_h_add(be, y, a, b, n, t);
    tf_cu_add(be, (float *)y, (const float *)a, (const float *)b, n);
}
void tf_cu_t_mul(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t)
{
    if (any_half1(t, "mul")) return tf_cu_h_mul(be, y, a, b, n, t);
    tf_cu_mul(be, (float *)y, (const float *)a, (const float *)b, n);
}
void tf_cu_t_scale(tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t)
{
    if (any_half1(t, "scale")) return tf_cu_h_scale(be, y, x, alpha, n, t);
    tf_cu_scale(be, (float *)y, (const float *)x, alpha, n);
}
void tf_cu_t_act_fwd(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t)
{
    if (any_half1(t, "act_fwd")) return tf_cu_h_act_fwd(be, act, y, x, n, t);
    tf_cu_act_fwd(be, act, (float *)y, (const float *)x, n);
}
void tf_cu_t_act_bwd(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                     tf_dtype t)
{
    if (any_half1(t, "act_bwd")) return tf_cu_h_act_bwd(be, act, dx, dy, y, n, t);
    tf_cu_act_bwd(be, act, (float *)dx, (const float *)dy, (const float *)y, n);
}
void tf_cu_t_gate_fwd(tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t)
{
    if (any_half1(t, "gate_fwd")) return tf_cu_h_gate_fwd(be, y, a, g, n, t);
    tf_cu_gate_fwd(be, (float *)y, (const float *)a, (const float *)g, n);
}
void tf_cu_t_gate_bwd(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                      const void *g, long n, tf_dtype t)
{
    if (any_half1(t, "gate_bwd")) return tf_cu_h_gate_bwd(be, da, dg, dy, a, g, n, t);
    tf_cu_gate_bwd(be, (float *)da, (float *)dg, (const float *)dy, (const float *)a,
                   (const float *)g, n);
}
void tf_cu_t_gate_residual_fwd(tf_backend *be, float *out, const float *res, const void *a,
                               const void *g, long n, tf_dtype t)
{
    if (any_half1(t, "gate_residual_fwd")) return tf_cu_h_gate_residual_fwd(be, out, res, a, g, n, t);
    tf_cu_gate_residual_fwd(be, out, res, (const float *)a, (const float *)g, n);
}
void tf_cu_t_gate_cmajor_fwd(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                             long rows, long inner, int C, tf_dtype t)
{
    if (any_half1(t, "gate_cmajor_fwd")) return tf_cu_h_gate_cmajor_fwd(be, lr_t, a, g, ld, rows, inner, C, t);
    tf_cu_gate_cmajor_fwd(be, (float *)lr_t, (const float *)a, (const float *)g, ld, rows, inner,
                          C);
}
void tf_cu_t_gate_cmajor_bwd(tf_backend *be, void *da, void *dg, const void *dlr_t, const void *a,
                             const void *g, long ld, long rows, long inner, int C, tf_dtype t)
{
    if (any_half1(t, "gate_cmajor_bwd")) return tf_cu_h_gate_cmajor_bwd(be, da, dg, dlr_t, a, g, ld, rows, inner, C, t);
    tf_cu_gate_cmajor_bwd(be, (float *)da, (float *)dg, (const float *)dlr_t, (const float *)a,
                          (const float *)g, ld, rows, inner, C);
}
void tf_cu_t_opm_bwd(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                     int N, int co, tf_dtype t)
{
    if (any_half1(t, "opm_bwd")) return tf_cu_h_opm_bwd(be, da, dop, a, B, S, N, co, t);
    tf_cu_opm_bwd(be, (float *)da, (const float *)dop, (const float *)a, B, S, N, co);
}
void tf_cu_t_opm_outer(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                       tf_dtype t)
{
    if (any_half1(t, "opm_outer")) return tf_cu_h_opm_outer(be, outer_p, a, B, S, N, co, t);
    tf_cu_opm_outer(be, (float *)outer_p, (const float *)a, B, S, N, co);
}

} /* extern "C" */

/* ---- convert and check_finite: every type ---- */

#define CV_THREADS 256

__device__ __forceinline__ float cv_load(const void *src, tf_dtype st, long i)
{
    return st == TF_F32    ? ((const float *)src)[i]
           : st == TF_BF16 ? tf_bf16_to_f32(((const uint16_t *)src)[i])
                           : tf_f16_to_f32(((const uint16_t *)src)[i]);
}

extern "C" __global__ void convert_kernel1(void *dst, tf_dtype dt, const void *src, tf_dtype st,
                                           long n)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = cv_load(src, st, i);
        if (dt == TF_F32)
            ((float *)dst)[i] = v;
        else
            ((uint16_t *)dst)[i] = dt == TF_BF16 ? tf_f32_to_bf16(v) : tf_f32_to_f16(v);
    }
}

/* every thread that sees a non-finite value stores 1: the same value, so the
 * races are benign and the result does not depend on the order */
extern "C" __global__ void check_finite_kernel1(float *flag, const float *x, long n)
{
    const long stride = (long)gridDim.x * blockDim.x;
    int bad = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        bad |= (tf_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u; /* exponent all ones */
    if (bad) flag[0] = 1.f;
}

extern "C" void tf_cu_convert(tf_backend *be, void *dst, tf_dtype dt, const void *src,
                              tf_dtype st, long n)
{
    if (!tf_dtype_valid(dt) || !tf_dtype_valid(st)) {
        fprintf(stderr, "tinyfold: internal error: cuda convert: element types %d, %d\n",
                (int)dt, (int)st);
        abort();
    }
    if (n <= 0) return;
    if (dt == st) {
        TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * tf_dtype_size(dt),
                                      cudaMemcpyDeviceToDevice, be->stream));
        return;
    }
    TF_LAUNCH(convert_kernel1, dim3(tf_cu_grid(be, n, CV_THREADS)), dim3(CV_THREADS), be->stream,
              dst, dt, src, st, n);
}

extern "C" void tf_cu_check_finite(tf_backend *be, float *flag, const float *x, long n)
{
    if (n > 0)
        TF_LAUNCH(check_finite_kernel1, dim3(tf_cu_grid(be, n, CV_THREADS)), dim3(CV_THREADS),
                  be->stream, flag, x, n);
}
