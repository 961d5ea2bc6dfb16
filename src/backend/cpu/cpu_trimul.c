/* The triangle multiplication's projections and gates as one op each way
 * (ops.h trimul_proj_fwd/_bwd): on the CPU exactly the composition the model
 * runs without them (the merged GEMM into proj, gate_cmajor_fwd, og's GEMM;
 * proj again and gate_cmajor_bwd), the reference the GPU's kernels are
 * checked against. The CPU's own model keeps the composition. */
#include "cpu_internal.h"

/* y[rows, C] W[n, C]^T into out [rows, n] (type t) */
static void proj(tf_backend *be, void *out, const void *y, const void *W, long rows, int C, int n,
                 tf_dtype t) {
    tf_cpu_gemm_packed(be, 0, 1, (int)rows, n, C, y, W, out, 0.0f, NULL, t, t, "trimul_proj");
}

void tf_cpu_trimul_proj_fwd(tf_backend *be, void *lr_t, void *og, const void *y, const void *W4,
                            const void *Wog, long rows, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_proj_fwd");
    const size_t es = tf_dtype_size(t);
    char *p = tf_cpu_scratch_push(be, (size_t)rows * 4 * C * es);
    proj(be, p, y, W4, rows, C, 4 * C, t);
    tf_cpu_gate_cmajor_fwd(be, lr_t, p, p + 2 * C * es, 4L * C, rows, rows, C, t);
    proj(be, og, y, Wog, rows, C, C, t);
    tf_cpu_scratch_pop(be);
}

void tf_cpu_trimul_proj_bwd(tf_backend *be, void *dproj, const void *dlr_t, const void *y,
                            const void *W4, long rows, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "trimul_proj_bwd");
    const size_t es = tf_dtype_size(t);
    char *p = tf_cpu_scratch_push(be, (size_t)rows * 4 * C * es);
    proj(be, p, y, W4, rows, C, 4 * C, t);
    tf_cpu_gate_cmajor_bwd(be, dproj, (char *)dproj + 2 * C * es, dlr_t, p, p + 2 * C * es, 4L * C,
                           rows, rows, C, t);
    tf_cpu_scratch_pop(be);
}
