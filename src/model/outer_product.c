/* Outer product mean: z_out = z_in + OPM(m).
 *   a = LN(m) Wouter^T                      [B, S, N, co]
 *   outer[b, (i,p), (j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q]   one GEMM per b
 *   permute to [B, N, N, co*co] ((p,q) flattened as p*co+q), then Wpair.
 * pair_norm_outer is NOT applied (docs/model.md, section 4.4).
 *
 * Level 3 on the CPU (exec.h opm_weight_first) computes the same function
 * weight-first (the order of the sums changes, nothing else):
 *   T[b,s,p,j,c] = sum_q a[b,s,j,q] Wpair[c, p*co+q]        co batched GEMMs
 *   out[b,i,(j,c)] = (1/S) sum_(s,p) a[b,s,i,p] T[b,s,p,j,c]  one GEMM per b
 * which is 3.2 instead of 4.8 GFLOP forward at the small problem (6.4 instead
 * of 9.7 backward), and never forms the [B, N, N, co*co] tensor nor its
 * permute: the second GEMM writes z's layout directly.
 *
 * Level 3 elsewhere (CUDA) keeps the reference composition with two ops:
 * the permuted product in one pass (op_list.h opm_outer, exec.h opm_outer_op)
 * instead of the GEMM and the permute, and, in fp32, the backward from the
 * permuted gradient to da (op_list.h opm_bwd, exec.h opm_bwd_op) instead of a
 * permute and two skinny GEMMs that each read the [B, N, N, co*co]
 * gradient.
 *
 * Where the backend takes it (exec.h opm_fused_max_s) the forward is one op
 * (op_list.h opm_fwd) and so is the backward from dz (opm_bwd_dz): neither
 * stores outer_p or its gradient, so --chunk-size leaves them whole.
 *
 * With --chunk-size the reference composition runs the product and
 * everything after it K rows of the pair at a time (outer_product_chunk.c).
 * The weight-first one is left whole: its temporaries, [B, S, co, N, cz],
 * grow as N, not N^2, and are no larger than a chunk's at long N. */
#include "model/model.h"

static void opm_wf_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                       float *z_out, const float *z_in);
static void opm_wf_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                       const tf_opm_act *a, void *da, const void *dz);

static const int opm_perm[5] = {0, 1, 3, 2, 4}; /* [B,N,co,N,co] <-> [B,N,N,co,co], self-inverse */

void tf_opm_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                float *z_out, const float *z_in, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N, NC = (long)N * co;
    tf_rpush(ex, "outer_product_mean");
    tf_ln_fwd(ex, M, o->opm_ln, &a->ln, m, TF_F32, rows, cm);
    tf_rpush(ex, "projections");
    a->a = tf_alloc_at(ex, (size_t)rows * co);
    tf_linear_fwd(ex, a->a, a->ln.y, tf_P(M, o->opm_outer), rows, cm, co, 0.0f, TF_EPI_NONE);
    tf_rpop(ex);
    a->a_t = a->t = a->outer_p = NULL;
    /* the fused ops keep nothing N^2-sized: with --chunk-size too */
    a->fused = !ex->opm_weight_first && S <= ex->opm_fused_max_s &&
               TF_OPM_FUSED_OP_SHAPE(co, c->pair_dim);
    if (a->fused) {
        a->chunked = 0;
        tf_rpush(ex, "outer_product");
        if (z_out) tf_x_opm_fwd(ex, z_out, z_in, a->a, tf_P(M, o->opm_pair), B, S, N, co, c->pair_dim);
        tf_rpop(ex);
        tf_rpop(ex);
        return;
    }
    a->chunked = ex->chunk > 0 && !ex->opm_weight_first; /* weight-first forms no N^2 co^2 */
    if (a->chunked) {
        tf_opm_fwd_chunked(ex, M, o, a, z_out, z_in);
        tf_rpop(ex);
        return;
    }
    if (ex->opm_weight_first) {
        opm_wf_fwd(ex, M, o, a, z_out, z_in);
        tf_rpop(ex);
        return;
    }
    tf_rpush(ex, "outer_product");
    a->outer_p = tf_alloc_at(ex, (size_t)B * NC * NC);
    if (ex->opm_outer_op) { /* the product and its permute in one op */
        tf_x_opm_outer(ex, a->outer_p, a->a, B, S, N, co);
    } else {
        size_t mark = tf_arena_mark(ex->arena); /* the unpermuted product is a temporary */
        a->outer = tf_alloc_at(ex, (size_t)B * NC * NC);
        /* A_b is [S, N*co]; outer = A_b^T A_b / S */
        tf_gemm_args g = tf_gemm_make(ex, 1, 0, (int)NC, (int)NC, S, 1.0f / (float)S, 0.0f, a->a, NC,
                                      (long)S * NC, a->a, NC, (long)S * NC, a->outer, NC, NC * NC,
                                      B);
        tf_gemm(ex, &g, "opm_outer");
        int dims[5] = {B, N, co, N, co};
        tf_x_permute(ex, a->outer_p, a->outer, 5, dims, opm_perm, 0);
        tf_arena_release(ex->arena, mark);
        a->outer = NULL;
    }
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    tf_residual_linear(ex, z_out, z_in, a->outer_p, tf_P(M, o->opm_pair), (long)B * N * N,
                       co * co, c->pair_dim);
    tf_rpop(ex);
    tf_rpop(ex);
}

/* The reference composition's backward from dz to da (assigned). */
static void opm_ref_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                        const tf_opm_act *a, void *da, const void *dz) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, co = c->outer_dim;
    const long NC = (long)N * co;
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "output_proj");
    void *dop = tf_alloc_at(ex, (size_t)B * NC * NC);
    tf_linear_bwd(ex, dop, tf_G(M, o->opm_pair), dz, a->outer_p, tf_P(M, o->opm_pair),
                  (long)B * N * N, co * co, c->pair_dim, 0);
    tf_rpop(ex);
    tf_rpush(ex, "outer_product");
    if (ex->opm_bwd_op) { /* one pass over dop (op_list.h opm_bwd) */
        tf_x_opm_bwd(ex, da, dop, a->a, B, S, N, co);
    } else {
        void *douter = tf_alloc_at(ex, (size_t)B * NC * NC);
        int dims[5] = {B, N, N, co, co};
        tf_x_permute(ex, douter, dop, 5, dims, opm_perm, 0);
        /* outer = A^T A / S  =>  dA = A (dOuter^T + dOuter) / S, A = [S, NC] per batch */
        tf_gemm_args g = tf_gemm_make(ex, 0, 1, S, (int)NC, (int)NC, 1.0f / (float)S, 0.0f, a->a, NC,
                                      (long)S * NC, douter, NC, NC * NC, da, NC, (long)S * NC, B);
        tf_gemm(ex, &g, "opm_douter_t");
        g.transB = 0;
        g.beta = 1.0f;
        tf_gemm(ex, &g, "opm_douter");
    }
    tf_rpop(ex);
    /* Wpair's gradient, the one weight gradient issued here, reads dz and
     * outer_p, not the memory released here: it runs on beside the rest of
     * the module (tf_opm_bwd waits for it at its end) */
    tf_arena_release(ex->arena, mark);
}

void tf_opm_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, const tf_opm_act *a,
                float *dm, const float *dz, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N;
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "outer_product_mean");
    void *da = tf_alloc_at(ex, (size_t)rows * co);
    if (a->chunked) {
        tf_opm_bwd_chunked(ex, M, o, a, da, dz);
    } else {
        const void *dzh = tf_x_stream_grad(ex, dz, (long)B * N * N * c->pair_dim);
        if (a->t) {
            opm_wf_bwd(ex, M, o, a, da, dzh);
        } else if (a->fused) {
            tf_rpush(ex, "outer_product");
            tf_x_opm_bwd_dz(ex, da, tf_G(M, o->opm_pair), dzh, a->a, tf_P(M, o->opm_pair), B, S,
                            N, co, c->pair_dim);
            tf_rpop(ex);
        } else {
            opm_ref_bwd(ex, M, o, a, da, dzh);
        }
    }
    tf_rpush(ex, "projections");
    void *dx = tf_alloc_at(ex, (size_t)rows * cm);
    tf_linear_bwd(ex, dx, tf_G(M, o->opm_outer), da, a->ln.y, tf_P(M, o->opm_outer), rows, cm,
                  co, 0);
    tf_rpop(ex);
    tf_ln_bwd(ex, M, o->opm_ln, &a->ln, dm, TF_F32, dx, m, rows, cm, 1);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark);
}

/* ---- weight-first composition (level 3) ---- */

static const int swap_sn[4] = {0, 2, 1, 3}; /* [B,S,N,co] <-> [B,N,S,co] */

static void opm_wf_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                       float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, co = c->outer_dim, cz = c->pair_dim;
    const float *W = tf_P(M, o->opm_pair); /* [cz, co*co] */
    tf_rpush(ex, "outer_product");
    a->t = tf_alloc_at(ex, (size_t)B * S * co * N * cz);
    /* T[b,s,p] = a[b,s] (N x co) . W_p^T (co x cz), W_p[c,q] = W[c, p*co+q] */
    for (int p = 0; p < co; p++) {
        tf_gemm_args g = tf_gemm_make(ex, 0, 1, N, cz, co, 1.0f, 0.0f, a->a, co, (long)N * co,
                                      tf_x_w(ex, W + (long)p * co), (long)co * co, 0,
                                      tf_at(ex, a->t, (long)p * N * cz), cz, (long)co * N * cz,
                                      B * S);
        tf_gemm(ex, &g, "opm_wf_t");
    }
    a->a_t = tf_alloc_at(ex, (size_t)B * N * S * co);
    int dims[4] = {B, S, N, co};
    tf_x_permute(ex, a->a_t, a->a, 4, dims, swap_sn, 0);
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    /* out_b [N, N*cz] = (1/S) a_t_b [N, S*co] . T_b [S*co, N*cz], into z's layout */
    tf_gemm_args g = tf_gemm_make(ex, 0, 0, N, N * cz, S * co, 1.0f / (float)S, 1.0f, a->a_t,
                                  (long)S * co, (long)N * S * co, a->t, (long)N * cz,
                                  (long)S * co * N * cz, z_out, (long)N * cz, (long)N * N * cz, B);
    g.R = z_in; /* z_out = z_in + ..., no copy first */
    g.c_type = TF_F32; /* the stream */
    if (z_out) tf_gemm(ex, &g, "opm_wf_out"); /* NULL: a recomputed forward */
    tf_rpop(ex);
}

/* da is assigned (the gradient of a = LN(m) Wouter^T); dz in the activations' type. */
static void opm_wf_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                       const tf_opm_act *a, void *da, const void *dz) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, co = c->outer_dim, cz = c->pair_dim;
    const float *W = tf_P(M, o->opm_pair);
    float *dW = tf_G(M, o->opm_pair);
    const long tsz = (long)S * co * N * cz; /* T per batch */
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "output_proj");
    /* d a_t_b = (1/S) dOut_b [N, N*cz] . T_b^T ; dT_b = (1/S) a_t_b^T . dOut_b */
    void *da_t = tf_alloc_at(ex, (size_t)B * N * S * co);
    tf_gemm_args g = tf_gemm_make(ex, 0, 1, N, S * co, N * cz, 1.0f / (float)S, 0.0f, dz,
                                  (long)N * cz, (long)N * N * cz, a->t, (long)N * cz, tsz, da_t,
                                  (long)S * co, (long)N * S * co, B);
    tf_gemm(ex, &g, "opm_wf_da_t");
    void *dt = tf_alloc_at(ex, (size_t)B * tsz);
    g = tf_gemm_make(ex, 1, 0, S * co, N * cz, N, 1.0f / (float)S, 0.0f, a->a_t, (long)S * co,
                     (long)N * S * co, dz, (long)N * cz, (long)N * N * cz, dt, (long)N * cz, tsz,
                     B);
    tf_gemm(ex, &g, "opm_wf_dt");
    tf_rpop(ex);
    tf_rpush(ex, "outer_product");
    int dims[4] = {B, N, S, co};
    tf_x_permute(ex, da, da_t, 4, dims, swap_sn, 0);
    /* T[b,s,p] = a_bs W_p^T: da_bs += dT_bsp W_p ; dW_p += sum_bs dT_bsp^T a_bs */
    /* per-(b,s) dW partials, fp32 as the gradient they sum into */
    float *part = tf_alloc_act(ex, (size_t)B * S * cz * co * co);
    for (int p = 0; p < co; p++) {
        const void *dtp = tf_at(ex, dt, (long)p * N * cz);
        g = tf_gemm_make(ex, 0, 0, N, co, cz, 1.0f, 1.0f, dtp, cz, (long)co * N * cz,
                         tf_x_w(ex, W + (long)p * co), (long)co * co, 0, da, co, (long)N * co,
                         B * S);
        tf_gemm(ex, &g, "opm_wf_da");
        g = tf_gemm_make(ex, 1, 0, cz, co, N, 1.0f, 0.0f, dtp, cz, (long)co * N * cz, a->a, co,
                         (long)N * co, part + (long)p * co, (long)co * co, (long)cz * co * co,
                         B * S);
        g.c_type = TF_F32;
        tf_gemm(ex, &g, "opm_wf_dw");
    }
    tf_x_sum_mid(ex, dW, part, 1, (long)B * S, (long)cz * co * co, 1, TF_F32);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark);
}
