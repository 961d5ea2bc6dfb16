/* The op table's typed entry points over the fp32 implementations: fp32
 * only (a half type is an internal error until the typed paths exist). */
#include <stdio.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"

static void need_f32(tf_dtype t, const char *op) {
    if (t != TF_F32) {
        fprintf(stderr, "tinyfold: internal error: cpu %s does not take %s\n", op,
                tf_dtype_name(t));
        abort();
    }
}

#define F32(t, op) need_f32((t), (op))

void tf_cpu_t_layernorm_fwd(tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                            const float *g, const float *b, long rows, int C, float eps,
                            tf_dtype xt, tf_dtype yt) {
    F32(xt, "layernorm_fwd"), F32(yt, "layernorm_fwd");
    tf_cpu_layernorm_fwd(be, out, mean, rstd, x, g, b, rows, C, eps);
}
void tf_cpu_t_layernorm_bwd(tf_backend *be, void *dx, float *dg, float *db, const void *dout,
                            const void *x, const float *mean, const float *rstd, const float *g,
                            long rows, int C, int acc, tf_dtype xt, tf_dtype yt) {
    F32(xt, "layernorm_bwd"), F32(yt, "layernorm_bwd");
    tf_cpu_layernorm_bwd(be, dx, dg, db, dout, x, mean, rstd, g, rows, C, acc);
}
void tf_cpu_t_layernorm2_fwd(tf_backend *be, void *out, float *stats, const void *x,
                             const float *g1, const float *b1, const float *g2, const float *b2,
                             long rows, int C, float eps, tf_dtype xt, tf_dtype yt) {
    F32(xt, "layernorm2_fwd"), F32(yt, "layernorm2_fwd");
    tf_cpu_layernorm2_fwd(be, out, stats, x, g1, b1, g2, b2, rows, C, eps);
}
void tf_cpu_t_layernorm2_bwd(tf_backend *be, void *dx, float *dg1, float *db1, float *dg2,
                             float *db2, const void *dout, const void *x, const float *stats,
                             const float *g1, const float *b1, const float *g2, long rows, int C,
                             int acc, tf_dtype xt, tf_dtype yt) {
    F32(xt, "layernorm2_bwd"), F32(yt, "layernorm2_bwd");
    tf_cpu_layernorm2_bwd(be, dx, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2, rows, C, acc);
}
void tf_cpu_t_softmax_fwd(tf_backend *be, void *y, const void *x, long rows, int cols,
                          tf_dtype t) {
    F32(t, "softmax_fwd");
    tf_cpu_softmax_fwd(be, y, x, rows, cols);
}
void tf_cpu_t_softmax_bwd(tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                          int cols, tf_dtype t) {
    F32(t, "softmax_bwd");
    tf_cpu_softmax_bwd(be, dx, dy, y, rows, cols);
}
void tf_cpu_t_attn_fwd(tf_backend *be, const tf_attn_args *a) {
    F32(a->t, "attn_fwd");
    tf_cpu_attn_fwd(be, a);
}
void tf_cpu_t_attn_bwd(tf_backend *be, const tf_attn_args *a) {
    F32(a->t, "attn_bwd");
    tf_cpu_attn_bwd(be, a);
}
void tf_cpu_t_permute(tf_backend *be, void *out, const void *in, const tf_permute_args *a) {
    F32(a->t, "permute");
    tf_cpu_permute(be, out, in, a);
}
void tf_cpu_t_add_bcast_mid(tf_backend *be, void *y, const void *x, long outer, long mid,
                            long inner, tf_dtype t) {
    F32(t, "add_bcast_mid");
    tf_cpu_add_bcast_mid(be, y, x, outer, mid, inner);
}
void tf_cpu_t_sum_mid(tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                      int acc, tf_dtype t) {
    F32(t, "sum_mid");
    tf_cpu_sum_mid(be, y, x, outer, mid, inner, acc);
}
void tf_cpu_t_add(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t) {
    F32(t, "add");
    tf_cpu_add(be, y, a, b, n);
}
void tf_cpu_t_mul(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t) {
    F32(t, "mul");
    tf_cpu_mul(be, y, a, b, n);
}
void tf_cpu_t_scale(tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t) {
    F32(t, "scale");
    tf_cpu_scale(be, y, x, alpha, n);
}
void tf_cpu_t_act_fwd(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t) {
    F32(t, "act_fwd");
    tf_cpu_act_fwd(be, act, y, x, n);
}
void tf_cpu_t_act_bwd(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                      tf_dtype t) {
    F32(t, "act_bwd");
    tf_cpu_act_bwd(be, act, dx, dy, y, n);
}
void tf_cpu_t_gate_fwd(tf_backend *be, void *y, const void *a, const void *g, long n,
                       tf_dtype t) {
    F32(t, "gate_fwd");
    tf_cpu_gate_fwd(be, y, a, g, n);
}
void tf_cpu_t_gate_bwd(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                       const void *g, long n, tf_dtype t) {
    F32(t, "gate_bwd");
    tf_cpu_gate_bwd(be, da, dg, dy, a, g, n);
}
void tf_cpu_t_gate_residual_fwd(tf_backend *be, float *out, const float *res, const void *a,
                                const void *g, long n, tf_dtype t) {
    F32(t, "gate_residual_fwd");
    tf_cpu_gate_residual_fwd(be, out, res, a, g, n);
}
void tf_cpu_t_gate_cmajor_fwd(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                              long rows, long inner, int C, tf_dtype t) {
    F32(t, "gate_cmajor_fwd");
    tf_cpu_gate_cmajor_fwd(be, lr_t, a, g, ld, rows, inner, C);
}
void tf_cpu_t_gate_cmajor_bwd(tf_backend *be, void *da, void *dg, const void *dlr_t,
                              const void *a, const void *g, long ld, long rows, long inner, int C,
                              tf_dtype t) {
    F32(t, "gate_cmajor_bwd");
    tf_cpu_gate_cmajor_bwd(be, da, dg, dlr_t, a, g, ld, rows, inner, C);
}
void tf_cpu_t_opm_bwd(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                      int N, int co, tf_dtype t) {
    F32(t, "opm_bwd");
    tf_cpu_opm_bwd(be, da, dop, a, B, S, N, co);
}
void tf_cpu_t_opm_outer(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                        tf_dtype t) {
    F32(t, "opm_outer");
    tf_cpu_opm_outer(be, outer_p, a, B, S, N, co);
}
void tf_cpu_convert(tf_backend *be, void *dst, tf_dtype dt, const void *src, tf_dtype st,
                    long n) {
    (void)be;
    if (dt == st) {
        memcpy(dst, src, (size_t)n * tf_dtype_size(dt));
        return;
    }
#pragma omp parallel for if (n > (1L << 16)) schedule(static)
    for (long i = 0; i < n; i++) {
        const float v = st == TF_F32   ? ((const float *)src)[i]
                        : st == TF_BF16 ? tf_bf16_to_f32(((const uint16_t *)src)[i])
                                        : tf_f16_to_f32(((const uint16_t *)src)[i]);
        if (dt == TF_F32)
            ((float *)dst)[i] = v;
        else
            ((uint16_t *)dst)[i] = dt == TF_BF16 ? tf_f32_to_bf16(v) : tf_f32_to_f16(v);
    }
}
void tf_cpu_check_finite(tf_backend *be, float *flag, const float *x, long n) {
    (void)be;
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n > (1L << 16)) schedule(static)
    for (long i = 0; i < n; i++) bad |= !isfinite(x[i]);
    if (bad) flag[0] = 1.0f;
}
