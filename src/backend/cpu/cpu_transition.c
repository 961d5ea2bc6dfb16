/* The transition's MLP as one op each way (op_list.h transition_fwd/_bwd): on the
 * CPU exactly the level-3 composition of its ops (layernorm_fwd, the GEMM
 * with the RELU epilogue, the residual GEMM; the GEMM with the DRELU
 * epilogue, the GEMM of dxn, layernorm_bwd accumulating), so that it is the
 * reference the GPU's fused kernels are checked against. The CPU's own model
 * keeps the composition (caps.transition_op is 0). The intermediate tensors
 * live in host memory of the op's own (the CPU's scratch is not planned). */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "tinyfold: cpu transition: out of host memory\n");
        abort();
    }
    return p;
}

/* y[rows, out] (type yt) = x[rows, in] W[out, in]^T (+ res), epilogue epi, aux */
static void linear(tf_backend *be, void *y, tf_dtype yt, const void *x, const void *W, long rows,
                   int in, int out, tf_epilogue epi, const void *aux, const float *res,
                   tf_dtype t) {
    tf_gemm_args g = {0};
    g.transB = 1;
    g.M = (int)rows, g.N = out, g.K = in;
    g.alpha = 1.0f, g.beta = res ? 1.0f : 0.0f;
    g.A = x, g.lda = in;
    g.B = W, g.ldb = in;
    g.C = y, g.ldc = out;
    g.batch = 1;
    g.epilogue = epi;
    g.R = res;
    g.aux = aux;
    g.ab_type = t, g.c_type = yt;
    tf_cpu_gemm(be, &g, "transition");
}

void tf_cpu_transition_fwd(tf_backend *be, float *x_out, float *mean, float *rstd, const float *x,
                           const float *gamma, const float *beta, const void *W1, const void *W2,
                           long rows, int C, float eps, tf_dtype t) {
    tf_cpu_dtype_check(t, "transition_fwd");
    const size_t es = tf_dtype_size(t);
    void *xn = xmalloc((size_t)rows * C * es), *h = xmalloc((size_t)rows * 4 * C * es);
    tf_cpu_layernorm_fwd(be, xn, mean, rstd, x, gamma, beta, rows, C, eps, TF_F32, t);
    if (x_out) {
        linear(be, h, t, xn, W1, rows, C, 4 * C, TF_EPI_RELU, NULL, NULL, t);
        linear(be, x_out, TF_F32, h, W2, rows, 4 * C, C, TF_EPI_NONE, NULL, x, t);
    }
    free(xn), free(h);
}

void tf_cpu_transition_bwd(tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn,
                           void *h, void *dh, const void *dy, const float *x, const float *mean,
                           const float *rstd, const float *gamma, const float *beta,
                           const void *W1, const void *W2, long rows, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "transition_bwd");
    const size_t es = tf_dtype_size(t);
    /* xn again from the saved statistics: the forward's expression
     * (cpu_norm.c ln_fwd_row) on the same floats, rounded once */
    float *row = xmalloc((size_t)C * sizeof(float));
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        for (int c = 0; c < C; c++) row[c] = (xr[c] - mean[r]) * rstd[r] * gamma[c] + beta[c];
        tf_dtype_from_f32((char *)xn + (size_t)r * C * es, t, row, (size_t)C);
    }
    free(row);
    linear(be, h, t, xn, W1, rows, C, 4 * C, TF_EPI_RELU, NULL, NULL, t);
    /* dh[rows, 4C] = dy[rows, C] W2[C, 4C], where h > 0 */
    tf_gemm_args g = {0};
    g.M = (int)rows, g.N = 4 * C, g.K = C;
    g.alpha = 1.0f;
    g.A = dy, g.lda = C;
    g.B = W2, g.ldb = 4 * C;
    g.C = dh, g.ldc = 4 * C;
    g.batch = 1;
    g.epilogue = TF_EPI_DRELU;
    g.aux = h;
    g.ab_type = t, g.c_type = t;
    tf_cpu_gemm(be, &g, "transition_dh");
    /* dxn[rows, C] = dh W1[4C, C] */
    void *dxn = xmalloc((size_t)rows * C * es);
    g.N = C, g.K = 4 * C;
    g.A = dh, g.lda = 4 * C;
    g.B = W1, g.ldb = C;
    g.C = dxn, g.ldc = C;
    g.epilogue = TF_EPI_NONE;
    g.aux = NULL;
    tf_cpu_gemm(be, &g, "transition_dxn");
    tf_cpu_layernorm_bwd(be, dx, NULL, dgamma, dbeta, dxn, x, mean, rstd, gamma, rows, C, 1, TF_F32,
                         t);
    free(dxn);
}
