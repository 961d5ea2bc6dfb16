/* Transition (MSA and pair): x_out = x_in + relu(LN(x_in) W1^T) W2^T.
 * Level 3 folds the ReLU into the first GEMM's epilogue, the residual into
 * the second's, and the ReLU's gradient into the epilogue of the GEMM of
 * its input gradient. Where the backend takes the whole MLP as one op each
 * way (exec.h transition_op: the half types on CUDA, C 64 or 128), the
 * forward keeps only the LayerNorm's statistics (neither LN(x_in) nor the
 * [rows, 4C] hidden layer) and the backward's op recomputes them, giving
 * back xn, h and dh for the weight gradients' GEMMs. fp32 and tf32 keep the
 * composition. */
#include "model/model.h"

static int fused(const tf_exec *ex, int C) {
    return ex->level >= 3 && ex->transition_op && TF_TRANSITION_OP_C(C);
}

void tf_transition_fwd(tf_exec *ex, const tf_model *M, size_t w1, size_t w2, tf_ln_off ln,
                       tf_transition_act *a, float *x_out, const float *x_in, long rows, int C) {
    if (fused(ex, C)) {
        a->ln.y = NULL;
        a->h = NULL;
        a->ln.mean = tf_alloc_act(ex, (size_t)rows);
        a->ln.rstd = tf_alloc_act(ex, (size_t)rows);
        tf_rpush(ex, "mlp");
        tf_x_transition_fwd(ex, x_out, a->ln.mean, a->ln.rstd, x_in, tf_P(M, ln.w),
                            tf_P(M, ln.b), tf_P(M, w1), tf_P(M, w2), rows, C);
        tf_rpop(ex);
        return;
    }
    tf_ln_fwd(ex, M, ln, &a->ln, x_in, TF_F32, rows, C);
    a->h = tf_alloc_at(ex, (size_t)rows * 4 * C);
    tf_rpush(ex, "linear1");
    if (ex->level >= 3) {
        tf_linear_fwd(ex, a->h, a->ln.y, tf_P(M, w1), rows, C, 4 * C, 0.0f, TF_EPI_RELU);
    } else {
        tf_linear_fwd(ex, a->h, a->ln.y, tf_P(M, w1), rows, C, 4 * C, 0.0f, TF_EPI_NONE);
        tf_x_act_fwd(ex, TF_ACT_RELU, a->h, a->h, rows * 4 * C);
    }
    tf_rpop(ex);
    tf_rpush(ex, "linear2");
    tf_residual_linear(ex, x_out, x_in, a->h, tf_P(M, w2), rows, 4 * C, C);
    tf_rpop(ex);
}

/* the one-op backward: dx and the LayerNorm's gradients in the op, the
 * weight gradients from its recomputed xn, h and dh */
static void bwd_fused(tf_exec *ex, const tf_model *M, size_t w1, size_t w2, tf_ln_off ln,
                      const tf_transition_act *a, float *dx, const float *x_in, long rows,
                      int C) {
    const void *dy = tf_x_stream_grad(ex, dx, rows * C);
    void *xn = tf_alloc_at(ex, (size_t)rows * C);
    void *h = tf_alloc_at(ex, (size_t)rows * 4 * C), *dh = tf_alloc_at(ex, (size_t)rows * 4 * C);
    tf_rpush(ex, "mlp");
    tf_x_transition_bwd(ex, dx, tf_G(M, ln.w), tf_G(M, ln.b), xn, h, dh, dy, x_in, a->ln.mean,
                        a->ln.rstd, tf_P(M, ln.w), tf_P(M, ln.b), tf_P(M, w1), tf_P(M, w2), rows,
                        C);
    tf_rpop(ex);
    tf_rpush(ex, "linear2");
    tf_linear_bwd(ex, NULL, tf_G(M, w2), dy, h, tf_P(M, w2), rows, 4 * C, C, 0);
    tf_rpop(ex);
    tf_rpush(ex, "linear1");
    tf_linear_bwd(ex, NULL, tf_G(M, w1), dh, xn, tf_P(M, w1), rows, C, 4 * C, 0);
    tf_rpop(ex);
}

void tf_transition_bwd(tf_exec *ex, const tf_model *M, size_t w1, size_t w2, tf_ln_off ln,
                       const tf_transition_act *a, float *dx, const float *x_in, long rows,
                       int C) {
    size_t mark = tf_arena_mark(ex->arena);
    if (fused(ex, C)) {
        bwd_fused(ex, M, w1, w2, ln, a, dx, x_in, rows, C);
        tf_arena_release(ex->arena, mark);
        return;
    }
    const void *dy = tf_x_stream_grad(ex, dx, rows * C);
    void *dh = tf_alloc_at(ex, (size_t)rows * 4 * C);
    tf_rpush(ex, "linear2");
    /* level 3: the ReLU's gradient as the GEMM's epilogue (h > 0 where it passed) */
    const int fused_mask = ex->level >= 3;
    tf_linear_bwd_epi(ex, dh, tf_G(M, w2), dy, a->h, tf_P(M, w2), rows, 4 * C, C, 0,
                      fused_mask ? TF_EPI_DRELU : TF_EPI_NONE, a->h);
    tf_rpop(ex);
    tf_rpush(ex, "linear1");
    if (!fused_mask) tf_x_act_bwd(ex, TF_ACT_RELU, dh, dh, a->h, rows * 4 * C);
    void *dxn = tf_alloc_at(ex, (size_t)rows * C);
    tf_linear_bwd(ex, dxn, tf_G(M, w1), dh, a->ln.y, tf_P(M, w1), rows, C, 4 * C, 0);
    tf_rpop(ex);
    tf_ln_bwd(ex, M, ln, &a->ln, dx, TF_F32, dxn, x_in, rows, C, 1);
    tf_arena_release(ex->arena, mark);
}
