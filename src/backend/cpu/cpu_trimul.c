/* The triangle multiplication's norms, projections and gates as one op each
 * way (op_list.h trimul_proj_fwd/_bwd): on the CPU exactly the composition the
 * model runs without them (layernorm2_fwd, the merged GEMM into proj,
 * gate_cmajor_fwd, og's GEMM; proj again and gate_cmajor_bwd), the
 * reference the GPU's kernels are checked against, and so is the output
 * stage (op_list.h trimul_out_fwd/_bwd:
 * the GEMM and gate_residual_fwd; convert, gate_bwd and du's GEMM). The
 * CPU's own model keeps the composition. */
#include <string.h>

#include "cpu_internal.h"

/* nch channel rows of `rows` elements (es bytes each) from a tensor of
 * channel stride lds into one of stride ldd */
static void copy_channels(void *dst, long ldd, const void *src, long lds, long rows, int nch,
                          size_t es) {
    for (int c = 0; c < nch; c++)
        memcpy((char *)dst + c * ldd * es, (const char *)src + c * lds * es, rows * es);
}

/* y[rows, C] W[n, C]^T into out [rows, n] (type t) */
static void proj(tf_backend *be, void *out, const void *y, const void *W, long rows, int C, int n,
                 tf_dtype t) {
    tf_cpu_gemm_packed(be, 0, 1, (int)rows, n, C, y, W, out, 0.0f, NULL, t, t, "trimul_proj");
}

void tf_cpu_trimul_proj_fwd(tf_backend *be, void *lr_t, void *og, void *y, float *stats,
                            const float *x, const float *g1, const float *b1, const float *g2,
                            const float *b2, float eps, const void *W4, const void *Wog, long rows,
                            long ldt, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_proj_fwd");
    tf_cpu_layernorm2_fwd(be, y, stats, x, g1, b1, g2, b2, rows, C, eps, TF_F32, t);
    const size_t es = tf_dtype_size(t);
    char *p = tf_cpu_scratch_push(be, (size_t)rows * 6 * C * es), *g = p + rows * 4 * C * es;
    proj(be, p, y, W4, rows, C, 4 * C, t);
    tf_cpu_gate_cmajor_fwd(be, ldt == rows ? lr_t : g, p, p + 2 * C * es, 4L * C, rows, rows, C, t);
    if (ldt != rows) copy_channels(lr_t, ldt, g, rows, rows, 2 * C, es);
    proj(be, og, y, Wog, rows, C, C, t);
    tf_cpu_scratch_pop(be);
}

void tf_cpu_trimul_proj_bwd(tf_backend *be, void *dproj, const void *dlr_t, const void *y,
                            const void *W4, long rows, long ldt, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_proj_bwd");
    const size_t es = tf_dtype_size(t);
    char *p = tf_cpu_scratch_push(be, (size_t)rows * 6 * C * es), *g = p + rows * 4 * C * es;
    proj(be, p, y, W4, rows, C, 4 * C, t);
    if (ldt != rows) copy_channels(g, rows, dlr_t, ldt, rows, 2 * C, es);
    tf_cpu_gate_cmajor_bwd(be, dproj, (char *)dproj + 2 * C * es, ldt == rows ? dlr_t : g, p,
                           p + 2 * C * es, 4L * C, rows, rows, C, t);
    tf_cpu_scratch_pop(be);
}

/* out [rows, C] = u^T Wo^T, rounded to t, u [C, rows] packed */
static void out_again(tf_backend *be, void *out, const void *u, const void *Wo, long rows, int C,
                      tf_dtype t) {
    tf_cpu_gemm_packed(be, 1, 1, (int)rows, C, C, u, Wo, out, 0.0f, NULL, t, t, "trimul_out");
}

void tf_cpu_trimul_out_fwd(tf_backend *be, float *z_out, const float *z_in, const void *u_t,
                           const void *Wo, const void *og, long rows, long ldt, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_out_fwd");
    const long n = rows * C;
    const size_t es = tf_dtype_size(t);
    char *out = tf_cpu_scratch_push(be, (size_t)2 * n * es), *u = out + n * es;
    if (ldt != rows) copy_channels(u, rows, u_t, ldt, rows, C, es);
    out_again(be, out, ldt == rows ? u_t : u, Wo, rows, C, t);
    tf_cpu_gate_residual_fwd(be, z_out, z_in, out, og, n, t);
    tf_cpu_scratch_pop(be);
}

void tf_cpu_trimul_out_bwd(tf_backend *be, void *dout, void *dog, void *du, const float *dz,
                           const void *u_t, const void *Wo, const void *og, long rows, long ldt,
                           int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_out_bwd");
    const long n = rows * C;
    const size_t es = tf_dtype_size(t);
    char *out = tf_cpu_scratch_push(be, (size_t)3 * n * es), *dy = out + n * es, *u = dy + n * es;
    if (ldt != rows) copy_channels(u, rows, u_t, ldt, rows, C, es);
    out_again(be, out, ldt == rows ? u_t : u, Wo, rows, C, t);
    tf_cpu_convert(be, dy, t, dz, TF_F32, n);
    tf_cpu_gate_bwd(be, dout, dog, dy, out, og, n, t);
    if (du) {
        tf_cpu_gemm_packed(be, 1, 1, C, (int)rows, C, Wo, dout, ldt == rows ? du : u, 0.0f, NULL, t,
                           t, "trimul_out_du");
        if (ldt != rows) copy_channels(du, ldt, u, rows, rows, C, es);
    }
    tf_cpu_scratch_pop(be);
}
