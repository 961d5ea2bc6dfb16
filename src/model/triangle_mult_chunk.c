/* The triangle multiplicative update K rows at a time (--chunk-size; the
 * math of triangle_mult.c, the same ops in the same composition per row:
 * its plan, and its per-row stages and their backward, tf_trimul_rows_*;
 * each chunked stage a function of one chunk, run by chunk.c's driver,
 * tf_chunk_run).
 *
 * The product contracts over whole rows or columns of L and R, so L|R (lr_t)
 * and the product u stay whole: they are all the module keeps. Everything
 * else is per position and runs chunk by chunk: the norms, the projections
 * and gates (their gated chunk written into lr_t, channel-first, one copy per
 * channel), and the output projection, gate and residual. The backward
 * computes u's gradient du (whole) chunk by chunk, then per chunk: the
 * chunk's rows of the product's backward GEMMs (dL|dR of the chunk, from du
 * and the whole L and R), its norms, projections, gates and output gate
 * again, and their backward. Its temporaries: lr_t, u, du and one chunk's.
 * With the output not wanted (the forward run again by --recompute modules:
 * z_out NULL) the output projection is skipped. Where the backend takes
 * them (exec.h trimul_proj_op) a chunk's projections, gates and output stage
 * are the unchunked module's ops (ops.h trimul_proj_*, trimul_out_*) on the
 * chunk's rows of the channel-major tensors (channel stride: the whole
 * tensor's rows); og is formed again by its GEMM where the output stage
 * needs it.
 *
 * Bits: a position's values are computed by the same ops from the same
 * inputs as unchunked, with GEMMs of fewer rows (whether a row's bits depend
 * on the row count is the BLAS's choice); the weight and norm gradients are
 * summed chunk by chunk (beta = 1), a different order. Both: within fp32
 * rounding (tests/unit/test_recompute.c). */
#include "model/model.h"

/* A chunk's rows: tf_trimul_rows (model.h) */
typedef tf_trimul_rows chunk_rows;

static void rows_norm(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                      chunk_rows *r, const float *x, long rows) {
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    tf_ln2_fwd(ex, M, bn, o->tm[which].ln, &r->bln, &r->ln, x, rows, M->c->pair_dim);
}

/* Where channel c of side s (0 L, 1 R) of chunk k's rows lies in a
 * channel-first [2, B, C, N, N] or channel-major [2, C, B*N*N] tensor: Kr
 * consecutive elements */
static long seg(const tf_config *c, int cmajor, tf_chunk k, int s, int ch) {
    const long N = c->seq_len, nn = N * N, rows = (long)c->batch * nn;
    const long nc = rows * c->pair_dim;
    const long base = cmajor ? (long)ch * rows + k.b * nn : ((long)k.b * c->pair_dim + ch) * nn;
    return s * nc + base + (long)k.i0 * N;
}

/* t [S, C, Kr] (the chunk's channels, S sides) into its segments of the
 * whole tensor w */
static void segs_scatter(tf_exec *ex, const tf_config *c, int cmajor, tf_chunk k, int S,
                         void *w, const void *t) {
    const int C = c->pair_dim;
    const long Kr = (long)k.ni * c->seq_len;
    const long ld = seg(c, cmajor, k, 0, 1) - seg(c, cmajor, k, 0, 0); /* channel to channel */
    for (int s = 0; s < S; s++)
        tf_x_copy_rows(ex, tf_at(ex, w, seg(c, cmajor, k, s, 0)), ld,
                       tf_at(ex, t, (long)s * C * Kr), Kr, Kr, C);
}

/* One chunk's output projection and output gate logits (and its norms, in r) */
static void rows_out(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                     const tf_trimul_act *a, chunk_rows *r, void **out, void **og,
                     const float *x, long r0, long Kr) {
    rows_norm(ex, M, o, which, r, x, Kr);
    tf_trimul_rows_out(ex, M, o, which, &a->plan, r, a->u_p, r0, Kr, out, og);
}

/* The gradients of the output projection's input and of the output gate's
 * logits, from the chunk's dz rows (as unchunked) */
static void rows_out_bwd(tf_exec *ex, const tf_trimul_act *a, void *dout, void *dog,
                         const void *dzq, const void *out, void *og, long n) {
    if (!a->plan.gate_kernel) tf_x_act_fwd(ex, TF_ACT_SIGMOID, og, og, n); /* logits again */
    tf_trimul_rows_out_bwd(ex, &a->plan, dout, dog, dzq, out, og, n);
}

/* A chunk's output projection and gate again, and the gradients dout, dog
 * of their outputs from dz (the norms in r) */
static void rows_out_grads(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           const tf_trimul_act *a, chunk_rows *r, void **dout, void **dog,
                           const float *x, const float *dz, long r0, long Kr) {
    const long n = Kr * M->c->pair_dim;
    void *out, *og;
    const void *dzq = tf_x_stream_grad(ex, dz, n);
    rows_out(ex, M, o, which, a, r, &out, &og, x, r0, Kr);
    *dout = tf_alloc_at(ex, (size_t)n);
    *dog = tf_alloc_at(ex, (size_t)n);
    rows_out_bwd(ex, a, *dout, *dog, dzq, out, og, n);
}

/* The output gate's logits of a chunk (its norms in r, from x) */
static void *rows_og(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                     chunk_rows *r, const float *x, long Kr) {
    const int C = M->c->pair_dim;
    rows_norm(ex, M, o, which, r, x, Kr);
    void *og = tf_alloc_at(ex, (size_t)Kr * C);
    tf_linear_fwd(ex, og, r->ln.y, tf_P(M, o->tm[which].og), Kr, C, C, 0.0f, TF_EPI_NONE);
    return og;
}

/* With the ops: a chunk's output stage backward (op_list.h trimul_out_bwd), du
 * into du's rows r0.. (channel stride: the whole tensor's rows), or du NULL:
 * only the gradients dout and dog, wanted again; og's logits returned */
static void *rows_out_op_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                             const tf_trimul_act *a, chunk_rows *r, void **dout, void **dog,
                             void *du, const float *x, const float *dz, long r0, long Kr) {
    const int C = M->c->pair_dim;
    const long rows = (long)M->c->batch * M->c->seq_len * M->c->seq_len, n = Kr * C;
    void *og = rows_og(ex, M, o, which, r, x, Kr);
    *dout = tf_alloc_at(ex, (size_t)n);
    *dog = tf_alloc_at(ex, (size_t)n);
    tf_x_trimul_out_bwd(ex, *dout, *dog, du ? tf_at(ex, du, r0) : NULL, dz, tf_at(ex, a->u_p, r0),
                        tf_P(M, o->tm[which].op), og, Kr, rows, C);
    return og;
}

/* The chunk's dL|dR, [2, C, Kr], from du and the whole L and R: the rows of
 * the product's backward GEMMs that fall in the chunk */
static void product_bwd_rows(tf_exec *ex, const tf_config *c, const tf_trimul_act *a, int which,
                             tf_chunk k, const void *du, void *t) {
    const int N = c->seq_len, C = c->pair_dim, ni = k.ni;
    const long nn = (long)N * N, rows = (long)c->batch * nn, Kr = (long)ni * N;
    const long off = a->plan.cmajor ? k.b * nn : (long)k.b * C * nn, sc = a->plan.cmajor ? rows : nn;
    const long i0 = k.i0, i0N = i0 * N;
    const void *L = tf_at(ex, a->l_t, off), *R = tf_at(ex, a->r_t, off), *U = tf_at(ex, du, off);
    void *dL = t, *dR = tf_at(ex, t, (long)C * Kr);
    tf_gemm_args g1, g2;
    if (which == 0) { /* dL = dU R; dR = dU^T L */
        g1 = tf_gemm_make(ex, 0, 0, ni, N, N, 1.0f, 0.0f, tf_at(ex, U, i0N), N, sc, R, N, sc, dL,
                          N, Kr, C);
        g2 = tf_gemm_make(ex, 1, 0, ni, N, N, 1.0f, 0.0f, tf_at(ex, U, i0), N, sc, L, N, sc, dR,
                          N, Kr, C);
    } else { /* dL = R dU^T; dR = L dU */
        g1 = tf_gemm_make(ex, 0, 1, ni, N, N, 1.0f, 0.0f, tf_at(ex, R, i0N), N, sc, U, N, sc, dL,
                          N, Kr, C);
        g2 = tf_gemm_make(ex, 0, 0, ni, N, N, 1.0f, 0.0f, tf_at(ex, L, i0N), N, sc, U, N, sc, dR,
                          N, Kr, C);
    }
    tf_gemm(ex, &g1, which ? "trimul_in_dl" : "trimul_out_dl");
    tf_gemm(ex, &g2, which ? "trimul_in_dr" : "trimul_out_dr");
}

/* The chunked module's arguments */
typedef struct {
    const tf_model *M;
    const tf_block_off *o;
    int which;
    const tf_trimul_act *a;
    float *z_out, *dz;
    const float *z_in;
    void *du;
} trimul_ctx;

/* A chunk's norms, projections and gates, its gated L|R into lr_t */
static void proj_chunk(tf_exec *ex, void *ctx, tf_chunk k) {
    const trimul_ctx *cx = ctx;
    const tf_model *M = cx->M;
    const tf_block_off *o = cx->o;
    const int which = cx->which;
    const tf_trimul_act *a = cx->a;
    const tf_config *c = M->c;
    const int C = c->pair_dim;
    const long rows = (long)c->batch * c->seq_len * c->seq_len;
    const long r0 = tf_chunk_first(c, k), Kr = tf_chunk_positions(c, k), n = Kr * C;
    const float *z_in = cx->z_in;
    chunk_rows r;
    if (a->plan.proj_op) { /* norms too, straight into the chunk's rows of lr_t; og not kept */
        const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out, ln = o->tm[which].ln;
        float *stats = tf_ln2_alloc(ex, &r.bln, &r.ln, Kr, C);
        void *og = tf_alloc_at(ex, (size_t)n);
        tf_x_trimul_proj_fwd(ex, tf_at(ex, a->lr_t, r0), og, r.ln.y, stats, z_in + r0 * C,
                             tf_P(M, bn.w), tf_P(M, bn.b), tf_P(M, ln.w), tf_P(M, ln.b),
                             tf_P(M, o->tm[which].lp), tf_P(M, o->tm[which].og), Kr, rows, C);
        return;
    }
    rows_norm(ex, M, o, which, &r, z_in + r0 * C, Kr);
    tf_trimul_rows_proj(ex, M, o, which, &a->plan, &r, Kr);
    void *t = tf_alloc_at(ex, (size_t)2 * n); /* gated L|R of the chunk, [2, C, Kr] */
    if (a->plan.gate_kernel && a->plan.fused) {
        tf_x_gate_cmajor_fwd(ex, t, r.proj, r.gate, r.ld, Kr, Kr, C);
    } else {
        void *g_lr = tf_alloc_at(ex, (size_t)2 * n);
        if (a->plan.fused) { /* [Kr, 2, C] -> [2, C, Kr] */
            static const int perm[3] = {1, 2, 0};
            int dims[3] = {(int)Kr, 2, C};
            tf_x_mul(ex, g_lr, r.proj, r.gate, 2 * n);
            tf_x_permute(ex, t, g_lr, 3, dims, perm, 0);
        } else { /* [Kr, C] -> [C, Kr] per side */
            static const int perm[2] = {1, 0};
            int dims[2] = {(int)Kr, C};
            for (int s = 0; s < 2; s++) {
                const void *p = s ? r.rp : r.lp, *gt = s ? r.rg : r.lg;
                void *gs = tf_at(ex, g_lr, s * n);
                if (a->plan.gate_kernel)
                    tf_x_gate_fwd(ex, gs, p, gt, n);
                else
                    tf_x_mul(ex, gs, p, gt, n);
                tf_x_permute(ex, tf_at(ex, t, s * n), gs, 2, dims, perm, 0);
            }
        }
    }
    segs_scatter(ex, c, a->plan.cmajor, k, 2, a->lr_t, t);
}

/* A chunk's output projection, gate and residual add */
static void out_chunk(tf_exec *ex, void *ctx, tf_chunk k) {
    const trimul_ctx *cx = ctx;
    const tf_model *M = cx->M;
    const tf_block_off *o = cx->o;
    const int which = cx->which;
    const tf_trimul_act *a = cx->a;
    const tf_config *c = M->c;
    const int C = c->pair_dim;
    const long rows = (long)c->batch * c->seq_len * c->seq_len;
    const long r0 = tf_chunk_first(c, k), Kr = tf_chunk_positions(c, k), n = Kr * C;
    const float *z_in = cx->z_in;
    float *z_out = cx->z_out;
    chunk_rows r;
    void *out, *og;
    if (a->plan.proj_op) {
        og = rows_og(ex, M, o, which, &r, z_in + r0 * C, Kr);
        tf_x_trimul_out_fwd(ex, z_out + r0 * C, z_in + r0 * C, tf_at(ex, a->u_p, r0),
                            tf_P(M, o->tm[which].op), og, Kr, rows, C);
        return;
    }
    rows_out(ex, M, o, which, a, &r, &out, &og, z_in + r0 * C, r0, Kr);
    tf_trimul_rows_residual(ex, &a->plan, z_out + r0 * C, z_in + r0 * C, out, og, n);
}

/* A chunk's output stage backward: its rows of du and Wo's gradient */
static void du_chunk(tf_exec *ex, void *ctx, tf_chunk k) {
    const trimul_ctx *cx = ctx;
    const tf_model *M = cx->M;
    const tf_block_off *o = cx->o;
    const int which = cx->which;
    const tf_trimul_act *a = cx->a;
    const tf_config *c = M->c;
    const int C = c->pair_dim;
    const long rows = (long)c->batch * c->seq_len * c->seq_len;
    const long r0 = tf_chunk_first(c, k), Kr = tf_chunk_positions(c, k), n = Kr * C;
    const float *z_in = cx->z_in;
    float *dz = cx->dz;
    void *du = cx->du;
    const size_t wo = o->tm[which].op;
    chunk_rows r;
    void *dout, *dog;
    if (a->plan.proj_op) { /* du's rows from the op, then dWo += dout^T u-chunk^T */
        rows_out_op_bwd(ex, M, o, which, a, &r, &dout, &dog, du, z_in + r0 * C, dz + r0 * C,
                        r0, Kr);
        tf_gemm_args g = tf_gemm_make(ex, 1, 1, C, C, (int)Kr, 1.0f, 1.0f, dout, C, 0,
                                      tf_at(ex, a->u_p, r0), rows, 0, tf_G(M, wo), C, 0, 1);
        g.c_type = TF_F32; /* the parameter gradient */
        g.wgrad = ex->wgrad_async;
        tf_gemm(ex, &g, "linear_bwd_weight");
        return;
    }
    rows_out_grads(ex, M, o, which, a, &r, &dout, &dog, z_in + r0 * C, dz + r0 * C, r0, Kr);
    if (a->plan.cmajor) { /* dWo += dout^T u-chunk^T; du[:, chunk] = Wo^T dout^T */
        tf_gemm_args g = tf_gemm_make(ex, 1, 1, C, C, (int)Kr, 1.0f, 1.0f, dout, C, 0,
                                      tf_at(ex, a->u_p, r0), rows, 0, tf_G(M, wo), C, 0, 1);
        g.c_type = TF_F32; /* the parameter gradient */
        g.wgrad = ex->wgrad_async;
        tf_gemm(ex, &g, "linear_bwd_weight");
        g = tf_gemm_make(ex, 1, 1, C, (int)Kr, C, 1.0f, 0.0f, tf_x_w(ex, tf_P(M, wo)), C, 0,
                         dout, C, 0, tf_at(ex, du, r0), rows, 0, 1);
        tf_gemm(ex, &g, "linear_bwd_data");
    } else { /* du_p [Kr, C] -> [C, Kr] -> its segments of du [B, C, N, N] */
        static const int perm[2] = {1, 0};
        int dims[2] = {(int)Kr, C};
        void *du_p = tf_alloc_at(ex, (size_t)n), *t = tf_alloc_at(ex, (size_t)n);
        tf_linear_bwd(ex, du_p, tf_G(M, wo), dout, tf_at(ex, a->u_p, r0 * C), tf_P(M, wo), Kr,
                      C, C, 0);
        tf_x_permute(ex, t, du_p, 2, dims, perm, 0);
        segs_scatter(ex, c, 0, k, 1, du, t);
    }
}

/* A chunk's gating, projections and norms backward (the output gate's
 * part of dy and its weight gradient again) */
static void gating_chunk(tf_exec *ex, void *ctx, tf_chunk k) {
    const trimul_ctx *cx = ctx;
    const tf_model *M = cx->M;
    const tf_block_off *o = cx->o;
    const int which = cx->which;
    const tf_trimul_act *a = cx->a;
    const tf_config *c = M->c;
    const int C = c->pair_dim;
    const long r0 = tf_chunk_first(c, k), Kr = tf_chunk_positions(c, k), n = Kr * C;
    const float *z_in = cx->z_in;
    float *dz = cx->dz;
    const void *du = cx->du;
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    const size_t lp = o->tm[which].lp, wog = o->tm[which].og;
    /* the output gate's part of dy (and its weight gradient) again */
    chunk_rows r;
    void *dout, *dog;
    if (a->plan.proj_op)
        rows_out_op_bwd(ex, M, o, which, a, &r, &dout, &dog, NULL, z_in + r0 * C,
                        dz + r0 * C, r0, Kr);
    else
        rows_out_grads(ex, M, o, which, a, &r, &dout, &dog, z_in + r0 * C, dz + r0 * C, r0,
                       Kr);
    void *dyq = tf_alloc_at(ex, (size_t)n);
    tf_linear_bwd(ex, dyq, tf_G(M, wog), dog, r.ln.y, tf_P(M, wog), Kr, C, C, 0);
    if (!a->plan.proj_op) tf_trimul_rows_proj(ex, M, o, which, &a->plan, &r, Kr);
    tf_rpush(ex, "triangle_product");
    void *t = tf_alloc_at(ex, (size_t)2 * n); /* the chunk's dL|dR, [2, C, Kr] */
    product_bwd_rows(ex, c, a, which, k, du, t);
    tf_rpop(ex);
    void *dproj, *dgate;
    if (a->plan.proj_op) { /* proj again from y, the merged [Kr, 4C] gradient */
        dproj = tf_alloc_at(ex, (size_t)4 * n);
        dgate = NULL;
        tf_x_trimul_proj_bwd(ex, dproj, t, r.ln.y, tf_P(M, lp), Kr, Kr, C);
    } else if (a->plan.gate_kernel && a->plan.fused) {
        dproj = tf_alloc_at(ex, (size_t)4 * n);
        dgate = tf_at(ex, dproj, a->plan.merged ? 2 * C : 2 * n);
        tf_x_gate_cmajor_bwd(ex, dproj, dgate, t, r.proj, r.gate, r.ld, Kr, Kr, C);
    } else {
        void *dlr = tf_alloc_at(ex, (size_t)2 * n);
        if (a->plan.fused) { /* [2, C, Kr] -> [Kr, 2, C] */
            static const int perm[3] = {2, 0, 1};
            int dims[3] = {2, C, (int)Kr};
            tf_x_permute(ex, dlr, t, 3, dims, perm, 0);
        } else { /* [2, C, Kr] -> [2, Kr, C] */
            static const int perm[3] = {0, 2, 1};
            int dims[3] = {2, C, (int)Kr};
            tf_x_permute(ex, dlr, t, 3, dims, perm, 0);
        }
        dproj = dlr, dgate = t; /* t is free again */
        tf_trimul_rows_gate_bwd(ex, &a->plan, &r, dproj, dgate, n);
    }
    tf_trimul_rows_proj_bwd(ex, M, o, which, &a->plan, &r, dyq, dproj, dgate, Kr);
    tf_ln2_bwd(ex, M, bn, o->tm[which].ln, &r.bln, &r.ln, dz + r0 * C, dout, dyq,
               z_in + r0 * C, Kr, C, 1);
}

void tf_trimul_fwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           tf_trimul_act *a, float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long nc = (long)B * N * N * C;
    const tf_trimul_plan plan = a->plan; /* tf_trimul_fwd's */
    *a = (tf_trimul_act){0};
    a->plan = plan;
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");
    a->lr_t = tf_alloc_at(ex, (size_t)2 * nc);
    a->l_t = a->lr_t;
    a->r_t = tf_at(ex, a->lr_t, nc);
    trimul_ctx cx = {M, o, which, a, z_out, NULL, z_in, NULL};

    tf_rpush(ex, "projections");
    tf_chunk_run(ex, c, 1, proj_chunk, &cx);
    tf_rpop(ex);

    tf_rpush(ex, "triangle_product");
    a->u_p = tf_alloc_at(ex, (size_t)nc);
    size_t mark = tf_arena_mark(ex->arena);
    void *u = a->plan.cmajor ? a->u_p : tf_alloc_at(ex, (size_t)nc);
    if (which == 0)
        tf_trimul_product(ex, 0, 1, a->l_t, a->r_t, u, B, C, N, "trimul_out");
    else
        tf_trimul_product(ex, 1, 0, a->l_t, a->r_t, u, B, C, N, "trimul_in");
    if (!a->plan.cmajor) {
        static const int to_chan_last[4] = {0, 2, 3, 1};
        int dims[4] = {B, C, N, N};
        tf_x_permute(ex, a->u_p, u, 4, dims, to_chan_last, 0);
    }
    tf_arena_release(ex->arena, mark);
    tf_rpop(ex);

    tf_rpush(ex, "output_proj");
    if (z_out) tf_chunk_run(ex, c, 1, out_chunk, &cx);
    tf_rpop(ex);
    tf_rpop(ex);
}

void tf_trimul_bwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           const tf_trimul_act *a, float *dz, const float *z_in) {
    const tf_config *c = M->c;
    const long nc = (long)c->batch * c->seq_len * c->seq_len * c->pair_dim;
    const size_t mark0 = tf_arena_mark(ex->arena);
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");

    /* du, channel-first (or -major) as the product's backward reads it, and
     * the output projection's weight gradient, chunk by chunk */
    tf_rpush(ex, "output_proj");
    trimul_ctx cx = {M, o, which, a, NULL, dz, z_in, tf_alloc_at(ex, (size_t)nc)};
    tf_chunk_run(ex, c, 1, du_chunk, &cx);
    tf_rpop(ex);

    /* the gating, projections and norms per chunk */
    tf_rpush(ex, "gating");
    tf_chunk_run(ex, c, 1, gating_chunk, &cx);
    tf_rpop(ex);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark0);
}
