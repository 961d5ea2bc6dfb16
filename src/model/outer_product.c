/* Outer product mean: z_out = z_in + OPM(m).
 *   a = LN(m) Wouter^T                      [B, S, N, co]
 *   outer[b, (i,p), (j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q]   one GEMM per b
 *   permute to [B, N, N, co*co] ((p,q) flattened as p*co+q), then Wpair.
 * pair_norm_outer is NOT applied (docs/model.md, section 4.4).
 *
 * The composition is decided once per forward (tf_opm_plan_make, kept in the
 * activations for the backward); three of them:
 *
 * TF_OPM_REF, the reference. The product and everything after it are per row
 * i of the pair, so its body is written once for a slab of rows (samples
 * b .. b + nb, rows i0 .. i0 + ni; model.h tf_chunk): one GEMM (a's columns
 * of the slab, transposed, times all of a), the permute to [nb*ni, N, co, co]
 * and the output projection of those nb * ni * N positions. chunk.c's
 * tf_chunk_run runs it once over the whole pair, or with --chunk-size K rows
 * of the pair at a time. Whole, the module keeps the permuted product for the
 * backward; chunked it keeps LN(m) and a only, and the backward runs each
 * chunk's product again, then its backward:
 *   dop = dz Wpair, dWpair += dz^T outer_p          (the slab's rows)
 *   douter = dop permuted back to [nb*ni*co, N*co]
 *   da[b, s, all]  += (1/S) a[b, s, slab] douter
 *   da[b, s, slab] += (1/S) a[b, s, all] douter^T
 * the two terms of d(A^T A)/dA restricted to the slab's rows of dOuter
 * (whole: the second assigned first, then the first added). A chunk's
 * temporaries are two [ni, N, co^2] buffers forward, three backward. On the
 * whole pair the backend may take the product and its permute as one op
 * (op_list.h opm_outer, exec.h opm_outer_op) and, in fp32, the backward from
 * the permuted gradient to da (op_list.h opm_bwd, exec.h opm_bwd_op): they
 * take the whole tensor, so chunks use the GEMMs. A chunk's product and
 * projection are the whole's GEMMs with fewer rows; da and dWpair are summed
 * chunk by chunk, a different order: within fp32 rounding
 * (tests/unit/test_recompute.c).
 *
 * TF_OPM_WEIGHT_FIRST, level 3 on the CPU (exec.h opm_weight_first): the
 * same function weight-first (the order of the sums changes, nothing else):
 *   T[b,s,p,j,c] = sum_q a[b,s,j,q] Wpair[c, p*co+q]        co batched GEMMs
 *   out[b,i,(j,c)] = (1/S) sum_(s,p) a[b,s,i,p] T[b,s,p,j,c]  one GEMM per b
 * which is 3.2 instead of 4.8 GFLOP forward at the small problem (6.4 instead
 * of 9.7 backward), and never forms the [B, N, N, co*co] tensor nor its
 * permute: the second GEMM writes z's layout directly. It is not chunked:
 * its temporaries, [B, S, co, N, cz], grow as N, not N^2, and are no larger
 * than a chunk's at long N.
 *
 * TF_OPM_FUSED, where the backend takes it (exec.h opm_fused_max_s): the
 * forward is one op (op_list.h opm_fwd) and so is the backward from dz
 * (opm_bwd_dz): neither stores outer_p or its gradient, so --chunk-size
 * leaves them whole. */
#include "model/model.h"

static void opm_wf_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                       float *z_out, const float *z_in);
static void opm_wf_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                       const tf_opm_act *a, void *da, const void *dz);

tf_opm_plan tf_opm_plan_make(const tf_exec *ex, const tf_config *c) {
    tf_opm_plan p = {TF_OPM_REF, 0, 0, 0};
    if (ex->opm_weight_first)
        p.kind = TF_OPM_WEIGHT_FIRST;
    else if (c->n_seqs <= ex->opm_fused_max_s && TF_OPM_FUSED_OP_SHAPE(c->outer_dim, c->pair_dim))
        p.kind = TF_OPM_FUSED; /* keeps nothing N^2-sized: with --chunk-size too */
    if (p.kind != TF_OPM_REF) return p;
    p.chunked = ex->chunk > 0;
    p.outer_op = !p.chunked && ex->opm_outer_op;
    p.bwd_op = !p.chunked && ex->opm_bwd_op;
    return p;
}

/* ---- the reference composition over a slab of rows ---- */

static const int opm_perm[4] = {0, 2, 1, 3}; /* [nb*ni,co,N,co] <-> [nb*ni,N,co,co], self-inverse */

/* The reference body's arguments */
typedef struct {
    const tf_model *M;
    const tf_block_off *o;
    const tf_opm_act *a;
    float *z_out;      /* forward: NULL for a recomputed one */
    const float *z_in;
    void *da;          /* backward: assigned whole, added to (zeroed first) chunked */
    const float *dz;   /* the stream's gradient, chunked */
    const void *dzh;   /* whole: dz in the activations' type */
} opm_rows;

/* outer_p [nb*ni, N, co, co] of slab k: the GEMM into a temporary, then the permute */
static void rows_product(tf_exec *ex, const opm_rows *r, tf_chunk k, void *outer_p) {
    const tf_config *c = r->M->c;
    const int S = c->n_seqs, N = c->seq_len, co = c->outer_dim;
    const long NC = (long)N * co;
    if (r->a->plan.outer_op) { /* the whole product and its permute in one op */
        tf_x_opm_outer(ex, outer_p, r->a->a, k.nb, S, N, co);
        return;
    }
    const void *ab = tf_at(ex, r->a->a, (long)k.b * S * NC); /* sample b: [S, N*co] */
    const size_t mark = tf_arena_mark(ex->arena);
    void *outer = tf_alloc_at(ex, (size_t)k.nb * k.ni * co * NC);
    /* per sample [ni*co, N*co] = (1/S) ab[:, i0*co ..]^T ab */
    tf_gemm_args g = tf_gemm_make(ex, 1, 0, k.ni * co, (int)NC, S, 1.0f / (float)S, 0.0f,
                                  tf_at(ex, ab, (long)k.i0 * co), NC, (long)S * NC, ab, NC,
                                  (long)S * NC, outer, NC, (long)k.ni * co * NC, k.nb);
    tf_gemm(ex, &g, "opm_outer");
    int dims[4] = {k.nb * k.ni, co, N, co};
    tf_x_permute(ex, outer_p, outer, 4, dims, opm_perm, 0);
    tf_arena_release(ex->arena, mark);
}

static void rows_fwd(tf_exec *ex, void *ctx, tf_chunk k) {
    const opm_rows *r = ctx;
    const tf_config *c = r->M->c;
    const long co = c->outer_dim, cz = c->pair_dim, rows = tf_chunk_positions(c, k);
    const long off = tf_chunk_first(c, k) * cz;
    void *outer_p = r->a->outer_p ? r->a->outer_p : tf_alloc_at(ex, (size_t)rows * co * co);
    tf_rpush(ex, "outer_product");
    rows_product(ex, r, k, outer_p);
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    if (r->z_out)
        tf_residual_linear(ex, r->z_out + off, r->z_in + off, outer_p,
                           tf_P(r->M, r->o->opm_pair), rows, (int)(co * co), (int)cz);
    tf_rpop(ex);
}

/* da of the slab's samples from douter [nb*ni*co, N*co], its rows of dOuter */
static void rows_da(tf_exec *ex, const opm_rows *r, tf_chunk k, const void *douter) {
    const tf_config *c = r->M->c;
    const int S = c->n_seqs, N = c->seq_len, co = c->outer_dim;
    const long NC = (long)N * co, sd = (long)k.ni * co * NC;
    const void *ab = tf_at(ex, r->a->a, (long)k.b * S * NC);
    void *dab = tf_at(ex, r->da, (long)k.b * S * NC);
    const float inv = 1.0f / (float)S;
    const int whole = !r->a->plan.chunked;
    /* da_b[S, N*co] += (1/S) ab[:, slab] [S, ni*co] . douter [ni*co, N*co] */
    tf_gemm_args g = tf_gemm_make(ex, 0, 0, S, (int)NC, k.ni * co, inv, 1.0f,
                                  tf_at(ex, ab, (long)k.i0 * co), NC, (long)S * NC, douter, NC,
                                  sd, dab, NC, (long)S * NC, k.nb);
    /* da_b[:, slab] [S, ni*co] += (1/S) ab [S, N*co] . douter^T (whole: assigned, first) */
    tf_gemm_args gt = tf_gemm_make(ex, 0, 1, S, k.ni * co, (int)NC, inv, whole ? 0.0f : 1.0f,
                                   ab, NC, (long)S * NC, douter, NC, sd,
                                   tf_at(ex, dab, (long)k.i0 * co), NC, (long)S * NC, k.nb);
    if (whole) tf_gemm(ex, &gt, "opm_douter_t");
    tf_gemm(ex, &g, "opm_douter");
    if (!whole) tf_gemm(ex, &gt, "opm_douter_t");
}

static void rows_bwd(tf_exec *ex, void *ctx, tf_chunk k) {
    const opm_rows *r = ctx;
    const tf_model *M = r->M;
    const tf_config *c = M->c;
    const int S = c->n_seqs, N = c->seq_len, co = c->outer_dim, cz = c->pair_dim;
    const long rows = tf_chunk_positions(c, k), off = tf_chunk_first(c, k) * cz;
    const void *outer_p = r->a->outer_p;
    void *p = outer_p ? NULL : tf_alloc_at(ex, (size_t)rows * co * co);
    void *douter = r->a->plan.bwd_op ? NULL : tf_alloc_at(ex, (size_t)rows * co * co);
    if (p) { /* chunked: the chunk's product again */
        tf_rpush(ex, "outer_product");
        rows_product(ex, r, k, p);
        tf_rpop(ex);
        outer_p = p;
    }
    tf_rpush(ex, "output_proj");
    const size_t mark_dop = tf_arena_mark(ex->arena);
    const void *dzq = r->dzh ? tf_at(ex, r->dzh, off) : tf_x_stream_grad(ex, r->dz + off, rows * cz);
    void *dop = tf_alloc_at(ex, (size_t)rows * co * co);
    tf_linear_bwd(ex, dop, tf_G(M, r->o->opm_pair), dzq, outer_p, tf_P(M, r->o->opm_pair), rows,
                  co * co, cz, 0);
    tf_rpop(ex);
    tf_rpush(ex, "outer_product");
    if (r->a->plan.bwd_op) { /* one pass over dop (op_list.h opm_bwd) */
        tf_x_opm_bwd(ex, r->da, dop, r->a->a, k.nb, S, N, co);
        tf_rpop(ex);
        return;
    }
    int dims[4] = {k.nb * k.ni, N, co, co};
    tf_x_permute(ex, douter, dop, 4, dims, opm_perm, 0);
    tf_arena_release(ex->arena, mark_dop);
    rows_da(ex, r, k, douter);
    tf_rpop(ex);
    /* Wpair's gradient, the one weight gradient issued here, reads dz and
     * outer_p, not the memory the driver releases: it runs on beside the
     * rest of the module (tf_opm_bwd waits for it at its end) */
}

/* ---- the module ---- */

void tf_opm_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                float *z_out, const float *z_in, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N;
    a->plan = tf_opm_plan_make(ex, c);
    tf_rpush(ex, "outer_product_mean");
    tf_ln_fwd(ex, M, o->opm_ln, &a->ln, m, TF_F32, rows, cm);
    tf_rpush(ex, "projections");
    a->a = tf_alloc_at(ex, (size_t)rows * co);
    tf_linear_fwd(ex, a->a, a->ln.y, tf_P(M, o->opm_outer), rows, cm, co, 0.0f, TF_EPI_NONE);
    tf_rpop(ex);
    a->a_t = a->t = a->outer_p = NULL;
    switch (a->plan.kind) {
    case TF_OPM_FUSED:
        tf_rpush(ex, "outer_product");
        if (z_out) tf_x_opm_fwd(ex, z_out, z_in, a->a, tf_P(M, o->opm_pair), B, S, N, co, c->pair_dim);
        tf_rpop(ex);
        break;
    case TF_OPM_WEIGHT_FIRST:
        opm_wf_fwd(ex, M, o, a, z_out, z_in);
        break;
    case TF_OPM_REF: {
        /* a recomputed forward chunked: the backward forms each chunk again */
        if (a->plan.chunked && !z_out) break;
        if (!a->plan.chunked) a->outer_p = tf_alloc_at(ex, (size_t)B * N * N * co * co);
        opm_rows r = {M, o, a, z_out, z_in, NULL, NULL, NULL};
        tf_chunk_run(ex, c, a->plan.chunked, rows_fwd, &r);
        break;
    }
    }
    tf_rpop(ex);
}

void tf_opm_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, const tf_opm_act *a,
                float *dm, const float *dz, const float *m) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len, cm = c->msa_dim, co = c->outer_dim;
    const long rows = (long)B * S * N;
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, "outer_product_mean");
    void *da = tf_alloc_at(ex, (size_t)rows * co);
    if (a->plan.chunked) {
        tf_x_zero_at(ex, da, (size_t)rows * co);
        opm_rows r = {M, o, a, NULL, NULL, da, dz, NULL};
        tf_chunk_run(ex, c, 1, rows_bwd, &r);
    } else {
        const void *dzh = tf_x_stream_grad(ex, dz, (long)B * N * N * c->pair_dim);
        if (a->plan.kind == TF_OPM_WEIGHT_FIRST) {
            opm_wf_bwd(ex, M, o, a, da, dzh);
        } else if (a->plan.kind == TF_OPM_FUSED) {
            tf_rpush(ex, "outer_product");
            tf_x_opm_bwd_dz(ex, da, tf_G(M, o->opm_pair), dzh, a->a, tf_P(M, o->opm_pair), B, S,
                            N, co, c->pair_dim);
            tf_rpop(ex);
        } else {
            opm_rows r = {M, o, a, NULL, NULL, da, NULL, dzh};
            tf_chunk_run(ex, c, 0, rows_bwd, &r);
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
