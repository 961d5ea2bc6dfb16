/* The op table's typed entry points (op_list.h signatures): an fp32 call
 * runs the fp32 kernels as they were, a half call (TF_BF16, TF_F16) the _h
 * path of the same op (cuda_half.h: the kernel bodies instantiated for the
 * half storage types), and the type conversion and finiteness check, which
 * take every type. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"

#include "backend/tf_dtype.h"

extern "C" {

void tf_cu_t_layernorm_fwd(tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                           const float *g, const float *b, long rows, int C, float eps,
                           tf_dtype xt, tf_dtype yt)
{
    if (xt == TF_F32 && yt == TF_F32)
        tf_cu_layernorm_fwd(be, (float *)out, mean, rstd, (const float *)x, g, b, rows, C, eps);
    else
        tf_cu_layernorm_fwd_h(be, out, mean, rstd, x, g, b, rows, C, eps, xt, yt);
}
void tf_cu_t_layernorm_bwd(tf_backend *be, void *dx, void *dxh, float *dg, float *db,
                           const void *dout, const void *x, const float *mean, const float *rstd,
                           const float *g, long rows, int C, int acc, tf_dtype xt, tf_dtype yt)
{
    if (xt == TF_F32 && yt == TF_F32)
        tf_cu_layernorm_bwd(be, (float *)dx, (float *)dxh, dg, db, (const float *)dout,
                            (const float *)x, mean, rstd, g, rows, C, acc);
    else
        tf_cu_layernorm_bwd_h(be, dx, dxh, dg, db, dout, x, mean, rstd, g, rows, C, acc, xt, yt);
}
void tf_cu_t_layernorm2_fwd(tf_backend *be, void *out, float *stats, const void *x,
                            const float *g1, const float *b1, const float *g2, const float *b2,
                            long rows, int C, float eps, tf_dtype xt, tf_dtype yt)
{
    if (xt == TF_F32 && yt == TF_F32)
        tf_cu_layernorm2_fwd(be, (float *)out, stats, (const float *)x, g1, b1, g2, b2, rows, C,
                             eps);
    else
        tf_cu_layernorm2_fwd_h(be, out, stats, x, g1, b1, g2, b2, rows, C, eps, xt, yt);
}
void tf_cu_t_layernorm2_bwd(tf_backend *be, void *dx, void *dxh, float *dg1, float *db1,
                            float *dg2, float *db2, const void *dout, const void *x,
                            const float *stats, const float *g1, const float *b1, const float *g2,
                            long rows, int C, int acc, tf_dtype xt, tf_dtype yt)
{
    if (xt == TF_F32 && yt == TF_F32)
        tf_cu_layernorm2_bwd(be, (float *)dx, (float *)dxh, dg1, db1, dg2, db2,
                             (const float *)dout, (const float *)x, stats, g1, b1, g2, rows, C,
                             acc);
    else
        tf_cu_layernorm2_bwd_h(be, dx, dxh, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2, rows,
                               C, acc, xt, yt);
}
void tf_cu_t_softmax_fwd(tf_backend *be, void *y, const void *x, long rows, int cols, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_softmax_fwd(be, (float *)y, (const float *)x, rows, cols);
    else
        tf_cu_softmax_fwd_h(be, y, x, rows, cols, t);
}
void tf_cu_t_softmax_bwd(tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                         int cols, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_softmax_bwd(be, (float *)dx, (const float *)dy, (const float *)y, rows, cols);
    else
        tf_cu_softmax_bwd_h(be, dx, dy, y, rows, cols, t);
}
/* the attention routes half types to kernel1 (gpu_plan.c), which takes all three */
void tf_cu_t_attn_fwd(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_dtype_valid(a->t)) tf_cu_bad_type("attn_fwd", a->t);
    tf_cu_attn_fwd(be, a);
}
void tf_cu_t_attn_bwd(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_dtype_valid(a->t)) tf_cu_bad_type("attn_bwd", a->t);
    tf_cu_attn_bwd(be, a);
}
void tf_cu_t_permute(tf_backend *be, void *out, const void *in, const tf_permute_args *a)
{
    if (a->t == TF_F32)
        tf_cu_permute(be, (float *)out, (const float *)in, a);
    else
        tf_cu_permute_h(be, out, in, a);
}
void tf_cu_t_add_bcast_mid(tf_backend *be, void *y, const void *x, long outer, long mid,
                           long inner, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_add_bcast_mid(be, (float *)y, (const float *)x, outer, mid, inner);
    else
        tf_cu_add_bcast_mid_h(be, y, x, outer, mid, inner, t);
}
void tf_cu_t_sum_mid(tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                     int acc, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_sum_mid(be, (float *)y, (const float *)x, outer, mid, inner, acc);
    else
        tf_cu_sum_mid_h(be, y, x, outer, mid, inner, acc, t);
}
void tf_cu_t_add(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_add(be, (float *)y, (const float *)a, (const float *)b, n);
    else
        tf_cu_add_h(be, y, a, b, n, t);
}
void tf_cu_t_mul(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_mul(be, (float *)y, (const float *)a, (const float *)b, n);
    else
        tf_cu_mul_h(be, y, a, b, n, t);
}
void tf_cu_t_scale(tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_scale(be, (float *)y, (const float *)x, alpha, n);
    else
        tf_cu_scale_h(be, y, x, alpha, n, t);
}
void tf_cu_t_act_fwd(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_act_fwd(be, act, (float *)y, (const float *)x, n);
    else
        tf_cu_act_fwd_h(be, act, y, x, n, t);
}
void tf_cu_t_act_bwd(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                     tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_act_bwd(be, act, (float *)dx, (const float *)dy, (const float *)y, n);
    else
        tf_cu_act_bwd_h(be, act, dx, dy, y, n, t);
}
void tf_cu_t_gate_fwd(tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_gate_fwd(be, (float *)y, (const float *)a, (const float *)g, n);
    else
        tf_cu_gate_fwd_h(be, y, a, g, n, t);
}
void tf_cu_t_gate_bwd(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                      const void *g, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_gate_bwd(be, (float *)da, (float *)dg, (const float *)dy, (const float *)a,
                       (const float *)g, n);
    else
        tf_cu_gate_bwd_h(be, da, dg, dy, a, g, n, t);
}
void tf_cu_t_gate_residual_fwd(tf_backend *be, float *out, const float *res, const void *a,
                               const void *g, long n, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_gate_residual_fwd(be, out, res, (const float *)a, (const float *)g, n);
    else
        tf_cu_gate_residual_fwd_h(be, out, res, a, g, n, t);
}
void tf_cu_t_gate_cmajor_fwd(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                             long rows, long inner, int C, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_gate_cmajor_fwd(be, (float *)lr_t, (const float *)a, (const float *)g, ld, rows,
                              inner, C);
    else
        tf_cu_gate_cmajor_fwd_h(be, lr_t, a, g, ld, rows, inner, C, t);
}
void tf_cu_t_gate_cmajor_bwd(tf_backend *be, void *da, void *dg, const void *dlr_t, const void *a,
                             const void *g, long ld, long rows, long inner, int C, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_gate_cmajor_bwd(be, (float *)da, (float *)dg, (const float *)dlr_t,
                              (const float *)a, (const float *)g, ld, rows, inner, C);
    else
        tf_cu_gate_cmajor_bwd_h(be, da, dg, dlr_t, a, g, ld, rows, inner, C, t);
}
void tf_cu_t_opm_bwd(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                     int N, int co, tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_opm_bwd(be, (float *)da, (const float *)dop, (const float *)a, B, S, N, co);
    else
        tf_cu_opm_bwd_h(be, da, dop, a, B, S, N, co, t);
}
void tf_cu_t_opm_outer(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                       tf_dtype t)
{
    if (t == TF_F32)
        tf_cu_opm_outer(be, (float *)outer_p, (const float *)a, B, S, N, co);
    else
        tf_cu_opm_outer_h(be, outer_p, a, B, S, N, co, t);
}
/* the transition's MLP: only where caps.transition_op says (the half types
 * on mma.sync, gpu_plan.h tf_gpu_mlp_fused); the model composes it elsewhere */
static void transition_check(const tf_backend *be, const char *op, int C, tf_dtype t)
{
    if (t != TF_F32 && TF_TRANSITION_OP_C(C) && tf_gpu_mlp_fused(&be->plan, &be->caps, 1)) return;
    fprintf(stderr, "tinyfold: internal error: %s for type %s, C = %d, where the plan composes it\n",
            op, tf_dtype_name(t), C);
    abort();
}
void tf_cu_t_transition_fwd(tf_backend *be, float *x_out, float *mean, float *rstd,
                            const float *x, const float *gamma, const float *beta, const void *W1,
                            const void *W2, long rows, int C, float eps, tf_dtype t)
{
    transition_check(be, "transition_fwd", C, t);
    tf_cu_transition_fwd_h(be, x_out, mean, rstd, x, gamma, beta, W1, W2, rows, C, eps, t);
}
void tf_cu_t_transition_bwd(tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn,
                            void *h, void *dh, const void *dy, const float *x, const float *mean,
                            const float *rstd, const float *gamma, const float *beta,
                            const void *W1, const void *W2, long rows, int C, tf_dtype t)
{
    transition_check(be, "transition_bwd", C, t);
    tf_cu_transition_bwd_h(be, dx, dgamma, dbeta, xn, h, dh, dy, x, mean, rstd, gamma, beta, W1,
                           W2, rows, C, t);
}

} /* extern "C" */

/* ---- convert and check_finite: every type ---- */

#define CV_THREADS 256

/* dst = src, element by element (widening exact, narrowing rounded once);
 * 4 elements a vector access when both are aligned to 4 elements */
template <class TD, class TS>
__global__ void __launch_bounds__(CV_THREADS) convert_kernel(TD *dst, const TS *src, long n)
{
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    const long nv = tf_cu_aligned(dst, 4 * sizeof(TD)) && tf_cu_aligned(src, 4 * sizeof(TS))
                        ? n / 4
                        : 0;
    for (long i = tid; i < nv; i += stride) tf_cu_st4(dst + 4 * i, tf_cu_ld4(src + 4 * i));
    for (long i = nv * 4 + tid; i < n; i += stride) dst[i] = tf_cu_f32(src[i]);
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

extern "C" void tf_cu_t_convert(tf_backend *be, void *dst, tf_dtype dt, const void *src,
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
    const dim3 grid(tf_cu_grid(be, (n + 3) / 4, CV_THREADS));
    TF_CU_DISPATCH(dt, TD,
                   TF_CU_DISPATCH(st, TS,
                                  TF_LAUNCH((convert_kernel<TD, TS>), grid, dim3(CV_THREADS),
                                            be->stream, (TD *)dst, (const TS *)src, n)));
}

extern "C" void tf_cu_t_check_finite(tf_backend *be, float *flag, const float *x, long n)
{
    if (n > 0)
        TF_LAUNCH(check_finite_kernel1, dim3(tf_cu_grid(be, n, CV_THREADS)), dim3(CV_THREADS),
                  be->stream, flag, x, n);
}

/* ---- the pair bias (head-major) and its backward into the pair stream:
 * every type ---- */

/* aborts with a message for a type outside tf_dtype or a head count past
 * TF_PAIR_BIAS_MAX_H (the op table has no error path) */
static void pb_check(tf_dtype t, int H, const char *op)
{
    if (!tf_dtype_valid(t) || H < 1 || H > TF_PAIR_BIAS_MAX_H) {
        fprintf(stderr, "tinyfold: internal error: cuda %s: type %d, %d heads (1..%d)\n", op,
                (int)t, H, TF_PAIR_BIAS_MAX_H);
        abort();
    }
}

/* A thread a row's 4 columns (C % 4 == 0, dz 16-byte aligned), or a column:
 * the row's H bias gradients (one load each, shared by the row's threads
 * through L1), W's 4 columns of each head, and dz, dzh as vectors. */
template <class E>
__global__ void __launch_bounds__(CV_THREADS) pair_bias_bwd_kernel(float *dz, E *dzh, float *db32,
                                                                   const E *dbias, const float *W,
                                                                   long rows, int C, int H, int vw)
{
    const long stride = (long)gridDim.x * blockDim.x;
    const long nh = (long)H * rows;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; db32 && i < nh; i += stride)
        db32[i] = tf_cu_f32(dbias[i]);
    const long per = C / vw, n = rows * per;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long r = i / per;
        const int c = (int)(i % per) * vw;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int h = 0; h < H; ++h) {
            const float d = tf_cu_f32(dbias[(long)h * rows + r]);
            const float *w = W + (long)h * C + c;
            if (vw == 4) {
                const float4 wv = tf_cu_ld4(w);
                acc[0] = fmaf(d, wv.x, acc[0]), acc[1] = fmaf(d, wv.y, acc[1]);
                acc[2] = fmaf(d, wv.z, acc[2]), acc[3] = fmaf(d, wv.w, acc[3]);
            } else {
                acc[0] = fmaf(d, w[0], acc[0]);
            }
        }
        float *z = dz + r * C + c;
        if (vw == 4) {
            float4 v = tf_cu_ld4(z);
            v.x += acc[0], v.y += acc[1], v.z += acc[2], v.w += acc[3];
            tf_cu_st4(z, v);
            if (dzh) tf_cu_st4(dzh + r * C + c, v);
        } else {
            const float v = z[0] + acc[0];
            z[0] = v;
            if (dzh) dzh[r * C + c] = v;
        }
    }
}

extern "C" void tf_cu_t_pair_bias_bwd(tf_backend *be, float *dz, void *dzh, float *db32,
                                      const void *dbias, const float *W, long rows, int C, int H,
                                      tf_dtype t)
{
    pb_check(t, H, "pair_bias_bwd");
    if (rows <= 0 || C <= 0) return;
    const int vw = C % 4 == 0 && tf_cu_aligned(dz, 16) && tf_cu_aligned(W, 16) &&
                           (!dzh || tf_cu_aligned(dzh, 4 * tf_dtype_size(t)))
                       ? 4
                       : 1;
    const dim3 grid(tf_cu_grid(be, rows * (C / vw), CV_THREADS));
    TF_CU_DISPATCH(t, E,
                   TF_LAUNCH((pair_bias_bwd_kernel<E>), grid, dim3(CV_THREADS), be->stream, dz,
                             (E *)dzh, db32, (const E *)dbias, W, rows, C, H, vw));
}

/* the pair bias: a thread a row, the block's 128 rows staged 32 columns at
 * a time in shared memory (coalesced loads; a row's sums in column order,
 * four heads at a time), each head's outputs stored along the rows */
#define PB_ROWS 128
#define PB_COLS 32
template <class E>
__global__ void __launch_bounds__(PB_ROWS) pair_bias_fwd_kernel(E *bias, const float *z,
                                                                const float *W, long rows, int C,
                                                                int H)
{
    __shared__ float Zs[PB_ROWS][PB_COLS + 1];
    const int tid = (int)threadIdx.x;
    const long r0 = (long)blockIdx.x * PB_ROWS, r = r0 + tid;
    for (int h0 = 0; h0 < H; h0 += 4) {
        const int nh = H - h0 < 4 ? H - h0 : 4;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int c0 = 0; c0 < C; c0 += PB_COLS) {
            const int nc = C - c0 < PB_COLS ? C - c0 : PB_COLS;
            __syncthreads(); /* the last tile is consumed */
            for (int e = tid; e < PB_ROWS * PB_COLS; e += PB_ROWS) {
                const int i = e / PB_COLS, c = e % PB_COLS;
                Zs[i][c] = r0 + i < rows && c < nc ? z[(r0 + i) * C + c0 + c] : 0.f;
            }
            __syncthreads();
            for (int c = 0; c < nc; ++c) {
                const float zv = Zs[tid][c];
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    if (k < nh) acc[k] = fmaf(zv, W[(long)(h0 + k) * C + c0 + c], acc[k]);
            }
        }
        if (r < rows)
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (k < nh) bias[(long)(h0 + k) * rows + r] = acc[k];
    }
}

extern "C" void tf_cu_t_pair_bias_fwd(tf_backend *be, void *bias, const float *z, const float *W,
                                      long rows, int C, int H, tf_dtype t)
{
    pb_check(t, H, "pair_bias_fwd");
    if (rows <= 0 || C <= 0) return;
    const dim3 grid((unsigned)((rows + PB_ROWS - 1) / PB_ROWS));
    TF_CU_DISPATCH(t, E,
                   TF_LAUNCH((pair_bias_fwd_kernel<E>), grid, dim3(PB_ROWS), be->stream, (E *)bias,
                             z, W, rows, C, H));
}
