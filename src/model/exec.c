/* Op wrappers: stable kernel names for the profiler, skipped while planning. */
#include "model/exec.h"

static const char *gemm_kname(const tf_gemm_args *a) {
    static const char *names[2][2][2] = {
        {{"sgemm_nn", "sgemm_nt"}, {"sgemm_tn", "sgemm_tt"}},
        {{"sgemm_nn_batched", "sgemm_nt_batched"}, {"sgemm_tn_batched", "sgemm_tt_batched"}}};
    return names[a->batch > 1][a->transA != 0][a->transB != 0];
}

void tf_gemm(tf_exec *ex, const tf_gemm_args *a, const char *name) {
    TF_EXEC_OPC(ex, gemm_kname(a), tf_cost_gemm(a), gemm(ex->be, a, name));
}

tf_gemm_args tf_gemm_make(int tA, int tB, int M, int N, int K, float alpha, float beta,
                          const float *A, long lda, long sA, const float *B, long ldb, long sB,
                          float *C, long ldc, long sC, int batch) {
    tf_gemm_args g = {0};
    g.transA = tA;
    g.transB = tB;
    g.M = M;
    g.N = N;
    g.K = K;
    g.alpha = alpha;
    g.beta = beta;
    g.A = A;
    g.lda = lda;
    g.strideA = sA;
    g.B = B;
    g.ldb = ldb;
    g.strideB = sB;
    g.C = C;
    g.ldc = ldc;
    g.strideC = sC;
    g.batch = batch;
    return g;
}

void tf_linear_fwd(tf_exec *ex, float *y, const float *x, const float *W, long rows, int in,
                   int out, float beta, tf_epilogue epi) {
    tf_linear_fwd_res(ex, y, x, W, rows, in, out, beta, epi, NULL);
}

void tf_linear_fwd_res(tf_exec *ex, float *y, const float *x, const float *W, long rows, int in,
                       int out, float beta, tf_epilogue epi, const float *res) {
    tf_gemm_args g = {0};
    g.transA = 0;
    g.transB = 1;
    g.M = (int)rows;
    g.N = out;
    g.K = in;
    g.alpha = 1.0f;
    g.beta = beta;
    g.A = x;
    g.lda = in;
    g.B = W;
    g.ldb = in;
    g.C = y;
    g.ldc = out;
    g.batch = 1;
    g.epilogue = epi;
    g.R = res;
    tf_gemm(ex, &g, "linear_fwd");
}

void tf_linear_bwd(tf_exec *ex, float *dx, float *dW, const float *dy, const float *x,
                   const float *W, long rows, int in, int out, int accumulate) {
    tf_linear_bwd_epi(ex, dx, dW, dy, x, W, rows, in, out, accumulate, TF_EPI_NONE, NULL);
}

void tf_linear_bwd_epi(tf_exec *ex, float *dx, float *dW, const float *dy, const float *x,
                       const float *W, long rows, int in, int out, int accumulate,
                       tf_epilogue epi, const float *aux) {
    if (dx) { /* dx[rows,in] = dy[rows,out] W[out,in] */
        tf_gemm_args g = {0};
        g.M = (int)rows;
        g.N = in;
        g.K = out;
        g.alpha = 1.0f;
        g.beta = accumulate ? 1.0f : 0.0f;
        g.A = dy;
        g.lda = out;
        g.B = W;
        g.ldb = in;
        g.C = dx;
        g.ldc = in;
        g.batch = 1;
        g.epilogue = epi;
        g.aux = aux;
        tf_gemm(ex, &g, "linear_bwd_data");
    }
    /* dW[out,in] += dy^T[out,rows] x[rows,in] */
    tf_gemm_args g = {0};
    g.transA = 1;
    g.M = out;
    g.N = in;
    g.K = (int)rows;
    g.alpha = 1.0f;
    g.beta = 1.0f;
    g.A = dy;
    g.lda = out;
    g.B = x;
    g.ldb = in;
    g.C = dW;
    g.ldc = in;
    g.batch = 1;
    g.wgrad = ex->wgrad_async;
    tf_gemm(ex, &g, "linear_bwd_weight");
}

void tf_x_layernorm_fwd(tf_exec *ex, float *out, float *mean, float *rstd, const float *x,
                        const float *g, const float *b, long rows, int C) {
    TF_EXEC_OPC(ex, "layernorm_fwd", tf_cost_layernorm_fwd(rows, C),
                layernorm_fwd(ex->be, out, mean, rstd, x, g, b, rows, C, 1e-5f));
}

void tf_x_layernorm_bwd(tf_exec *ex, float *dx, float *dg, float *db, const float *dout,
                        const float *x, const float *mean, const float *rstd, const float *g,
                        long rows, int C, int accumulate) {
    TF_EXEC_OPC(ex, "layernorm_bwd", tf_cost_layernorm_bwd(rows, C, accumulate),
               layernorm_bwd(ex->be, dx, dg, db, dout, x, mean, rstd, g, rows, C, accumulate));
}

void tf_x_layernorm2_fwd(tf_exec *ex, float *out, float *stats, const float *x, const float *g1,
                         const float *b1, const float *g2, const float *b2, long rows, int C) {
    TF_EXEC_OPC(ex, "layernorm2_fwd", tf_cost_layernorm2_fwd(rows, C),
               layernorm2_fwd(ex->be, out, stats, x, g1, b1, g2, b2, rows, C, 1e-5f));
}

void tf_x_layernorm2_bwd(tf_exec *ex, float *dx, float *dg1, float *db1, float *dg2, float *db2,
                         const float *dout, const float *x, const float *stats, const float *g1,
                         const float *b1, const float *g2, long rows, int C, int accumulate) {
    TF_EXEC_OPC(ex, "layernorm2_bwd", tf_cost_layernorm2_bwd(rows, C, accumulate),
               layernorm2_bwd(ex->be, dx, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2, rows, C,
                              accumulate));
}

static long perm_count(const tf_permute_args *a) {
    long n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

void tf_x_permute(tf_exec *ex, float *out, const float *in, int rank, const int *dims,
                  const int *perm, int accumulate) {
    tf_permute_args a = {0};
    a.rank = rank;
    for (int i = 0; i < rank; i++) {
        a.dims[i] = dims[i];
        a.perm[i] = perm[i];
    }
    a.accumulate = accumulate;
    TF_EXEC_OPC(ex, "permute", tf_cost_permute(perm_count(&a), accumulate), permute(ex->be, out, in, &a));
}

void tf_x_copy(tf_exec *ex, float *dst, const float *src, size_t n) {
    TF_EXEC_OPC(ex, "copy", tf_cost_elementwise((long)n, 1, 1, 0.0), copy(ex->be, dst, src, n * sizeof(float)));
}
void tf_x_zero(tf_exec *ex, float *p, size_t n) {
    TF_EXEC_OPC(ex, "zero", tf_cost_elementwise((long)n, 0, 1, 0.0), zero(ex->be, p, n * sizeof(float)));
}
void tf_x_add(tf_exec *ex, float *y, const float *a, const float *b, long n) {
    TF_EXEC_OPC(ex, "add", tf_cost_elementwise(n, 2, 1, 1.0), add(ex->be, y, a, b, n));
}
void tf_x_mul(tf_exec *ex, float *y, const float *a, const float *b, long n) {
    TF_EXEC_OPC(ex, "mul", tf_cost_elementwise(n, 2, 1, 1.0), mul(ex->be, y, a, b, n));
}
void tf_x_scale(tf_exec *ex, float *y, const float *x, float alpha, long n) {
    TF_EXEC_OPC(ex, "scale", tf_cost_elementwise(n, 1, 1, 1.0), scale(ex->be, y, x, alpha, n));
}
void tf_x_act_fwd(tf_exec *ex, tf_act act, float *y, const float *x, long n) {
    TF_EXEC_OPC(ex, act == TF_ACT_RELU ? "relu_fwd" : "sigmoid_fwd",
                tf_cost_elementwise(n, 1, 1, act == TF_ACT_RELU ? 1.0 : TF_FLOPS_SIGMOID),
                act_fwd(ex->be, act, y, x, n));
}
void tf_x_act_bwd(tf_exec *ex, tf_act act, float *dx, const float *dy, const float *y, long n) {
    TF_EXEC_OPC(ex, act == TF_ACT_RELU ? "relu_bwd" : "sigmoid_bwd",
                tf_cost_elementwise(n, 2, 1, act == TF_ACT_RELU ? 1.0 : 3.0),
               act_bwd(ex->be, act, dx, dy, y, n));
}
void tf_x_softmax_fwd(tf_exec *ex, float *y, const float *x, long rows, int cols) {
    TF_EXEC_OPC(ex, "softmax_fwd", tf_cost_softmax_fwd(rows, cols), softmax_fwd(ex->be, y, x, rows, cols));
}
void tf_x_softmax_bwd(tf_exec *ex, float *dx, const float *dy, const float *y, long rows,
                      int cols) {
    TF_EXEC_OPC(ex, "softmax_bwd", tf_cost_softmax_bwd(rows, cols), softmax_bwd(ex->be, dx, dy, y, rows, cols));
}
void tf_x_gate_fwd(tf_exec *ex, float *y, const float *a, const float *g, long n) {
    TF_EXEC_OPC(ex, "gate_fwd", tf_cost_elementwise(n, 2, 1, TF_FLOPS_GATE_FWD), gate_fwd(ex->be, y, a, g, n));
}
void tf_x_gate_bwd(tf_exec *ex, float *da, float *dg, const float *dy, const float *a,
                   const float *g, long n) {
    TF_EXEC_OPC(ex, "gate_bwd", tf_cost_elementwise(n, 3, 2, TF_FLOPS_GATE_BWD), gate_bwd(ex->be, da, dg, dy, a, g, n));
}
void tf_x_gate_residual_fwd(tf_exec *ex, float *out, const float *res, const float *a,
                            const float *g, long n) {
    TF_EXEC_OPC(ex, "gate_residual_fwd", tf_cost_elementwise(n, 3, 1, TF_FLOPS_GATE_RES),
                gate_residual_fwd(ex->be, out, res, a, g, n));
}
void tf_x_gate_cmajor_fwd(tf_exec *ex, float *lr_t, const float *a, const float *g, long ld,
                          long rows, long inner, int C) {
    TF_EXEC_OPC(ex, "gate_cmajor_fwd", tf_cost_elementwise(2 * rows * C, 2, 1, TF_FLOPS_GATE_FWD),
                gate_cmajor_fwd(ex->be, lr_t, a, g, ld, rows, inner, C));
}
void tf_x_gate_cmajor_bwd(tf_exec *ex, float *da, float *dg, const float *dlr_t, const float *a,
                          const float *g, long ld, long rows, long inner, int C) {
    TF_EXEC_OPC(ex, "gate_cmajor_bwd", tf_cost_elementwise(2 * rows * C, 3, 2, TF_FLOPS_GATE_BWD),
               gate_cmajor_bwd(ex->be, da, dg, dlr_t, a, g, ld, rows, inner, C));
}
void tf_x_opm_outer(tf_exec *ex, float *outer_p, const float *a, int B, int S, int N, int co) {
    TF_EXEC_OPC(ex, "opm_outer", tf_cost_opm_outer(B, S, N, co), opm_outer(ex->be, outer_p, a, B, S, N, co));
}
void tf_x_opm_bwd(tf_exec *ex, float *da, const float *dop, const float *a, int B, int S, int N,
                  int co) {
    TF_EXEC_OPC(ex, "opm_bwd", tf_cost_opm_bwd(B, S, N, co), opm_bwd(ex->be, da, dop, a, B, S, N, co));
}
void tf_x_add_bcast_mid(tf_exec *ex, float *y, const float *x, long outer, long mid, long inner) {
    TF_EXEC_OPC(ex, "add_bcast", tf_cost_add_bcast_mid(outer, mid, inner),
                add_bcast_mid(ex->be, y, x, outer, mid, inner));
}
void tf_x_sum_mid(tf_exec *ex, float *y, const float *x, long outer, long mid, long inner,
                  int accumulate) {
    TF_EXEC_OPC(ex, "sum_reduce", tf_cost_sum_mid(outer, mid, inner, accumulate),
                sum_mid(ex->be, y, x, outer, mid, inner, accumulate));
}
