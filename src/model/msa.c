/* MSA stack modules: row attention with pair bias, column attention, transition.
 *
 *   m1 = m  + MsaRowAttn(msa_norm_row(m), z)     (z un-normalised for the bias)
 *   m2 = m1 + MsaColAttn(msa_norm_col(m1))
 *   m3 = m2 + MsaTransition(msa_norm_trans(m2))  (transition.c is shared with the pair)
 */
#include "model/model.h"

/* Q, K, V projections of x [rows, C]: one GEMM over the three contiguous weights
 * when fused (qkv_msa / qkv_triangle), else three. */
void tf_qkv_fwd(tf_exec *ex, const tf_model *M, int fused, size_t wq, const void *x,
                    long rows, int C, void **qkv, void **q, void **k, void **v, long *ld) {
    if (fused) {
        *qkv = tf_alloc_at(ex, (size_t)rows * 3 * C);
        tf_linear_fwd(ex, *qkv, x, tf_P(M, wq), rows, C, 3 * C, 0.0f, TF_EPI_NONE);
        *q = *qkv;
        *k = tf_at(ex, *qkv, C);
        *v = tf_at(ex, *qkv, 2 * C);
        *ld = 3L * C;
    } else {
        *qkv = NULL;
        *q = tf_alloc_at(ex, (size_t)rows * C);
        *k = tf_alloc_at(ex, (size_t)rows * C);
        *v = tf_alloc_at(ex, (size_t)rows * C);
        tf_linear_fwd(ex, *q, x, tf_P(M, wq), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, *k, x, tf_P(M, wq + (size_t)C * C), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, *v, x, tf_P(M, wq + 2 * (size_t)C * C), rows, C, C, 0.0f, TF_EPI_NONE);
        *ld = C;
    }
}

/* Backward of the projections: dx (assigned) from dq/dk/dv laid out like the forward. */
void tf_qkv_bwd(tf_exec *ex, const tf_model *M, int fused, size_t wq, const void *x,
                    long rows, int C, const void *dqkv, void *dx) {
    if (fused) {
        tf_linear_bwd(ex, dx, tf_G(M, wq), dqkv, x, tf_P(M, wq), rows, C, 3 * C, 0);
    } else {
        for (int i = 0; i < 3; i++) {
            size_t w = wq + (size_t)i * C * C;
            tf_linear_bwd(ex, dx, tf_G(M, w), tf_at(ex, dqkv, (long)i * rows * C), x,
                          tf_P(M, w), rows, C, C, i > 0);
        }
    }
}

/* The pair bias of the row attention from the fp32 pair stream z [rows, C],
 * in fp32, stored in the activations' type. Head-major (the flash
 * composition): [H, rows] by one op (op_list.h pair_bias_fwd: one pass over
 * z, the sums rounded once), each head's rows contiguous along the keys for
 * the attention kernels' tiles; else [rows, H] = z Wpb^T, as the
 * reference's Linear (the eager composition permutes it per head), a
 * narrow fp32 GEMM and its conversion. */
static void *pair_bias_fwd(tf_exec *ex, const tf_model *M, size_t wpb, const float *z, long rows,
                           int C, int H, int hmajor) {
    void *bias = tf_alloc_at(ex, (size_t)rows * H);
    if (hmajor) {
        tf_x_pair_bias_fwd(ex, bias, z, tf_P(M, wpb), rows, C, H);
        return bias;
    }
    size_t mark = tf_arena_mark(ex->arena);
    float *b32 = ex->at == TF_F32 ? bias : tf_alloc_act(ex, (size_t)rows * H);
    tf_dtype at = tf_exec_fp32_begin(ex);
    tf_linear_fwd(ex, b32, z, tf_P(M, wpb), rows, C, H, 0.0f, TF_EPI_NONE);
    tf_exec_fp32_end(ex, at);
    if (at != TF_F32) tf_x_convert(ex, bias, at, b32, TF_F32, rows * H);
    tf_arena_release(ex->arena, mark);
    return bias;
}

/* dz += dbias Wpb; dWpb += dbias^T z (in fp32, as the forward; dbias in the
 * forward's layout). Head-major, dz's part is one pass (op_list.h
 * pair_bias_bwd) that also leaves the stream gradient's half copy and the
 * widened dbias for the weight gradient's GEMM. */
static void pair_bias_bwd(tf_exec *ex, const tf_model *M, size_t wpb, float *dz, const void *dbias,
                          const float *z, long rows, int C, int H, int hmajor) {
    size_t mark = tf_arena_mark(ex->arena);
    /* dbias in fp32: itself, or widened (by the head-major op, else converted) */
    float *d = ex->at == TF_F32 ? NULL : tf_alloc_act(ex, (size_t)rows * H);
    if (hmajor)
        tf_x_pair_bias_bwd(ex, dz, d, dbias, tf_P(M, wpb), rows, C, H);
    else if (d)
        tf_x_convert(ex, d, TF_F32, dbias, ex->at, rows * H);
    const float *db32 = d ? d : dbias;
    tf_dtype at = tf_exec_fp32_begin(ex);
    if (hmajor) { /* dWpb [H, C] += dbias z */
        tf_gemm_args g = tf_gemm_make(ex, 0, 0, H, C, (int)rows, 1.0f, 1.0f, db32, rows, 0, z, C,
                                      0, tf_G(M, wpb), C, 0, 1);
        g.wgrad = ex->wgrad_async;
        tf_gemm(ex, &g, "linear_bwd_weight");
    } else {
        tf_linear_bwd(ex, dz, tf_G(M, wpb), db32, z, tf_P(M, wpb), rows, C, H, 1);
    }
    tf_exec_fp32_end(ex, at);
    tf_arena_release(ex->arena, mark);
}

static void msa_attn_fwd(tf_exec *ex, const tf_model *M, int colwise, size_t wq, size_t wo,
                         tf_ln_off norm, tf_msa_attn_act *a, float *m_out, const float *m_in,
                         const float *z, size_t wpb) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, C = c->msa_dim, H = c->n_heads_msa;
    const long rows = (long)B * S * N;
    tf_ln_fwd(ex, M, norm, &a->ln, m_in, TF_F32, rows, C);
    tf_rpush(ex, "msa_qkv");
    long ld;
    tf_qkv_fwd(ex, M, ex->fu.qkv_msa, wq, a->ln.y, rows, C, &a->qkv, &a->q, &a->k, &a->v, &ld);
    tf_rpop(ex);
    a->bias = NULL;
    if (z) {
        tf_rpush(ex, "pair_bias");
        a->bias = pair_bias_fwd(ex, M, wpb, z, (long)B * N * N, c->pair_dim, H, ex->fu.flash);
        tf_rpop(ex);
    }
    tf_rpush(ex, "attention");
    a->core = (tf_attn_core){.B = B, .X = S, .Y = N, .H = H, .d = C / H, .colwise = colwise,
                             .ld = ld, .q = a->q, .k = a->k, .v = a->v, .bias = a->bias,
                             .bias_hmajor = a->bias && ex->fu.flash};
    tf_attn_core_fwd(ex, &a->core);
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    tf_residual_linear(ex, m_out, m_in, a->core.o, tf_P(M, wo), rows, C, C);
    tf_rpop(ex);
}

static void msa_attn_bwd(tf_exec *ex, const tf_model *M, size_t wq, size_t wo, tf_ln_off norm,
                         const tf_msa_attn_act *a, float *dm, const float *m_in, float *dz,
                         const float *z, size_t wpb) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, C = c->msa_dim, H = c->n_heads_msa;
    const long rows = (long)B * S * N;
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "output_proj");
    const void *dy = tf_x_stream_grad(ex, dm, rows * C);
    void *dO = tf_alloc_at(ex, (size_t)rows * C);
    tf_linear_bwd(ex, dO, tf_G(M, wo), dy, a->core.o, tf_P(M, wo), rows, C, C, 0);
    tf_rpop(ex);
    tf_rpush(ex, "attention");
    void *dqkv = tf_alloc_at(ex, (size_t)rows * 3 * C);
    long ld = a->core.ld;
    void *dq = dqkv, *dk = tf_at(ex, dqkv, ld == C ? rows * C : C);
    void *dv = tf_at(ex, dqkv, ld == C ? 2 * rows * C : 2 * C);
    void *dbias = z ? tf_alloc_at(ex, (size_t)B * N * N * H) : NULL;
    tf_attn_core_bwd(ex, &a->core, dq, dk, dv, dbias, dO);
    tf_rpop(ex);
    if (z) {
        tf_rpush(ex, "pair_bias");
        pair_bias_bwd(ex, M, wpb, dz, dbias, z, (long)B * N * N, c->pair_dim, H,
                      a->core.bias_hmajor);
        tf_rpop(ex);
    }
    tf_rpush(ex, "msa_qkv");
    void *dx = tf_alloc_at(ex, (size_t)rows * C);
    tf_qkv_bwd(ex, M, a->qkv != NULL, wq, a->ln.y, rows, C, dqkv, dx);
    tf_rpop(ex);
    tf_ln_bwd(ex, M, norm, &a->ln, dm, TF_F32, dx, m_in, rows, C, 1);
    tf_arena_release(ex->arena, mark);
}

void tf_msa_row_attn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         tf_msa_attn_act *a, float *m_out, const float *m_in, const float *z) {
    tf_rpush(ex, "msa_row_attention");
    msa_attn_fwd(ex, M, 0, o->row_q, o->row_o, o->norm_row, a, m_out, m_in, z, o->row_pb);
    tf_rpop(ex);
}
void tf_msa_row_attn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         const tf_msa_attn_act *a, float *dm, float *dz, const float *m_in,
                         const float *z) {
    tf_rpush(ex, "msa_row_attention");
    msa_attn_bwd(ex, M, o->row_q, o->row_o, o->norm_row, a, dm, m_in, dz, z, o->row_pb);
    tf_rpop(ex);
}
void tf_msa_col_attn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         tf_msa_attn_act *a, float *m_out, const float *m_in) {
    tf_rpush(ex, "msa_column_attention");
    msa_attn_fwd(ex, M, 1, o->col_q, o->col_o, o->norm_col, a, m_out, m_in, NULL, 0);
    tf_rpop(ex);
}
void tf_msa_col_attn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         const tf_msa_attn_act *a, float *dm, const float *m_in) {
    tf_rpush(ex, "msa_column_attention");
    msa_attn_bwd(ex, M, o->col_q, o->col_o, o->norm_col, a, dm, m_in, NULL, NULL, 0);
    tf_rpop(ex);
}
