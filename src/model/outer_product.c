/* Outer product mean: z_out = z_in + OPM(m).
 *   a = LN(m) Wouter^T                      [B, S, N, co]
 *   outer[b, (i,p), (j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q]   one GEMM per b
 *   permute to [B, N, N, co*co] ((p,q) flattened as p*co+q), then Wpair.
 * pair_norm_outer is NOT applied (SPEC). */
#include "model/model.h"

static const int opm_perm[5] = {0, 1, 3, 2, 4}; /* [B,N,co,N,co] <-> [B,N,N,co,co], self-inverse */

void tf_opm_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                float *z_out, const float *z_in, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N, NC = (long)N * co;
    tf_rpush(ex, "outer_product_mean");
    tf_ln_fwd(ex, M, o->opm_ln, &a->ln, m, rows, cm);
    tf_rpush(ex, "projections");
    a->a = tf_alloc_act(ex, (size_t)rows * co);
    tf_linear_fwd(ex, a->a, a->ln.y, tf_P(M, o->opm_outer), rows, cm, co, 0.0f, TF_EPI_NONE);
    tf_rpop(ex);
    tf_rpush(ex, "outer_product");
    a->outer_p = tf_alloc_act(ex, (size_t)B * NC * NC);
    size_t mark = tf_arena_mark(ex->arena); /* the unpermuted product is a temporary */
    a->outer = tf_alloc_act(ex, (size_t)B * NC * NC);
    tf_gemm_args g = {0};
    g.transA = 1; /* A_b is [S, N*co]; outer = A_b^T A_b / S */
    g.M = (int)NC;
    g.N = (int)NC;
    g.K = S;
    g.alpha = 1.0f / (float)S;
    g.A = a->a;
    g.lda = NC;
    g.strideA = (long)S * NC;
    g.B = a->a;
    g.ldb = NC;
    g.strideB = (long)S * NC;
    g.C = a->outer;
    g.ldc = NC;
    g.strideC = NC * NC;
    g.batch = B;
    tf_gemm(ex, &g, "opm_outer");
    int dims[5] = {B, N, co, N, co};
    tf_x_permute(ex, a->outer_p, a->outer, 5, dims, opm_perm, 0);
    tf_arena_release(ex->arena, mark);
    a->outer = NULL;
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    tf_residual_linear(ex, z_out, z_in, a->outer_p, tf_P(M, o->opm_pair), (long)B * N * N,
                       co * co, c->pair_dim);
    tf_rpop(ex);
    tf_rpop(ex);
}

void tf_opm_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, const tf_opm_act *a,
                float *dm, const float *dz, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N, NC = (long)N * co;
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "outer_product_mean");
    tf_rpush(ex, "output_proj");
    float *dop = tf_alloc_act(ex, (size_t)B * NC * NC);
    tf_linear_bwd(ex, dop, tf_G(M, o->opm_pair), dz, a->outer_p, tf_P(M, o->opm_pair),
                  (long)B * N * N, co * co, c->pair_dim, 0);
    tf_rpop(ex);
    tf_rpush(ex, "outer_product");
    float *douter = tf_alloc_act(ex, (size_t)B * NC * NC);
    int dims[5] = {B, N, N, co, co};
    tf_x_permute(ex, douter, dop, 5, dims, opm_perm, 0);
    /* outer = A^T A / S  =>  dA = A (dOuter^T + dOuter) / S, A = [S, NC] per batch */
    float *da = tf_alloc_act(ex, (size_t)rows * co);
    tf_gemm_args g = {0};
    g.transB = 1;
    g.M = S;
    g.N = (int)NC;
    g.K = (int)NC;
    g.alpha = 1.0f / (float)S;
    g.A = a->a;
    g.lda = NC;
    g.strideA = (long)S * NC;
    g.B = douter;
    g.ldb = NC;
    g.strideB = NC * NC;
    g.C = da;
    g.ldc = NC;
    g.strideC = (long)S * NC;
    g.batch = B;
    tf_gemm(ex, &g, "opm_douter_t");
    g.transB = 0;
    g.beta = 1.0f;
    tf_gemm(ex, &g, "opm_douter");
    tf_rpop(ex);
    tf_rpush(ex, "projections");
    float *dx = tf_alloc_act(ex, (size_t)rows * cm);
    tf_linear_bwd(ex, dx, tf_G(M, o->opm_outer), da, a->ln.y, tf_P(M, o->opm_outer), rows, cm,
                  co, 0);
    tf_rpop(ex);
    tf_ln_bwd(ex, M, o->opm_ln, &a->ln, dm, dx, m, rows, cm, 1);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark);
}
