/* Triangle multiplicative update (docs/model.md, section 4.5):
 *   xb = block norm(z); y = LN(xb)
 *   L = (y Wl^T) * sigmoid(y Wlg^T);  R = (y Wr^T) * sigmoid(y Wrg^T)
 *   outgoing: u[b,i,j,c] = sum_k L[b,i,k,c] R[b,j,k,c]
 *   incoming: u[b,i,j,c] = sum_k L[b,k,i,c] R[b,k,j,c]
 *   z_out = z + (u Wo^T) * sigmoid(y Wog^T)
 * The product runs channel-first: L, R permuted to [B, C, N, N] each, stored
 * as [2, B, C, N, N] (all L, then all R), so the N x N x N GEMMs over (b, c)
 * have one batch stride and are one call per product. With the triangle
 * fusion, left|right projections are one GEMM (their weights are adjacent in
 * the parameter buffer) and so are the two gates; level 3 (exec.h
 * trimul_merged: not CUDA tf32) makes projections and gates one GEMM
 * ([rows, 4C]: L R | gate L, gate R per row; the four weights are adjacent
 * too), and one GEMM each for their dX and dW in the backward.
 *
 * Level 3 with the triangle fusion gates L|R and transposes them in one op
 * each way (op_list.h gate_cmajor_fwd/_bwd). Level 3 also orders the product's
 * batch channel-major, L and R stored
 * [2, C, B, N, N], so that u comes out as [C, B*N*N]: the transpose of the
 * output projection's input, which its GEMM reads as such (transA), as do
 * the GEMMs of its weight gradient and of u's gradient (written channel-major
 * straight away): the permutes of u and of its gradient (a pass each way
 * over [rows, C]) are gone.
 *
 * Where the backend takes it (exec.h trimul_proj_op) the merged projections,
 * the gating and og's GEMM are one op (op_list.h trimul_proj_fwd) that keeps
 * nothing of proj; the backward's gating forms proj again from y
 * (trimul_proj_bwd). The output projection, gate and residual add are one
 * more (trimul_out_fwd) that keeps nothing of out; its backward forms out
 * again and gives du as well (trimul_out_bwd).
 *
 * Which of these compositions runs is decided once per forward
 * (tf_trimul_plan_make) into the activations' plan, which the backward and
 * the chunked module (--chunk-size, triangle_mult_chunk.c) read; the
 * per-row stages of the plan are written once for any rows (the
 * tf_trimul_rows_* functions: the projections and gates, the output stage,
 * and their backward; the whole pair's here, a chunk's there). */
#include "model/model.h"

static const int to_chan_first[4] = {0, 3, 1, 2}; /* [B,N,N,C] -> [B,C,N,N] */
static const int to_chan_last[4] = {0, 2, 3, 1};  /* [B,C,N,N] -> [B,N,N,C] */
/* fused L|R: [B,N,N,2,C] -> [2,B,C,N,N] and back */
static const int lr_to_chan_first[5] = {3, 0, 4, 1, 2};
static const int lr_to_chan_last[5] = {1, 3, 4, 0, 2};
/* channel-major (level 3, triangle fusion off): [B,N,N,C] -> [C,B,N,N] (with
 * the fusion, gate_cmajor_fwd/_bwd move the data) */
static const int to_cmajor[4] = {3, 0, 1, 2};

/* The batched N x N x N products over (b, c): one call */
void tf_trimul_product(tf_exec *ex, int tA, int tB, const void *A, const void *Bm, void *Cm,
                       int B, int C, int N, const char *name) {
    tf_gemm_args g = {0};
    g.transA = tA;
    g.transB = tB;
    g.M = g.N = g.K = N;
    g.alpha = 1.0f;
    g.lda = g.ldb = g.ldc = N;
    g.strideA = g.strideB = g.strideC = (long)N * N;
    g.batch = B * C;
    g.A = A, g.B = Bm, g.C = Cm;
    g.ab_type = g.c_type = ex->at;
    tf_gemm(ex, &g, name);
}

tf_trimul_plan tf_trimul_plan_make(const tf_exec *ex, const tf_block_off *o, int which, int C) {
    const size_t lp = o->tm[which].lp;
    tf_trimul_plan p;
    p.fused = ex->fu.triangle;
    p.gate_kernel = ex->level >= 3;
    p.cmajor = ex->level >= 3;
    /* level 3: projections and gates from one GEMM when the four weights are adjacent */
    p.merged = p.fused && p.gate_kernel && ex->trimul_merged &&
               o->tm[which].rp == lp + (size_t)C * C && o->tm[which].lg == lp + (size_t)2 * C * C &&
               o->tm[which].rg == lp + (size_t)3 * C * C;
    p.proj_op = p.merged && ex->trimul_proj_op && TF_TRIMUL_PROJ_OP_C(C);
    p.chunked = ex->chunk > 0;
    return p;
}

void tf_trimul_rows_proj(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         const tf_trimul_plan *p, tf_trimul_rows *r, long rows) {
    const int C = M->c->pair_dim;
    const long n = rows * C;
    const size_t lp = o->tm[which].lp, lg = o->tm[which].lg;
    r->proj = r->gate = NULL;
    r->lp = r->rp = r->lg = r->rg = NULL;
    r->ld = 0;
    if (p->proj_op) return; /* formed in the op, never stored */
    if (p->merged) {
        r->proj = tf_alloc_at(ex, (size_t)4 * n);
        r->gate = tf_at(ex, r->proj, 2 * C); /* row i's gates at proj + i * 4C + 2C */
        r->ld = 4 * C;
        tf_linear_fwd(ex, r->proj, r->ln.y, tf_P(M, lp), rows, C, 4 * C, 0.0f, TF_EPI_NONE);
    } else if (p->fused) {
        r->proj = tf_alloc_at(ex, (size_t)2 * n);
        r->gate = tf_alloc_at(ex, (size_t)2 * n);
        r->ld = 2 * C;
        tf_linear_fwd(ex, r->proj, r->ln.y, tf_P(M, lp), rows, C, 2 * C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, r->gate, r->ln.y, tf_P(M, lg), rows, C, 2 * C, 0.0f, TF_EPI_NONE);
    } else {
        void *buf = tf_alloc_at(ex, (size_t)4 * n);
        r->lp = buf, r->rp = tf_at(ex, buf, n), r->lg = tf_at(ex, buf, 2 * n);
        r->rg = tf_at(ex, buf, 3 * n);
        tf_linear_fwd(ex, r->lp, r->ln.y, tf_P(M, lp), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, r->rp, r->ln.y, tf_P(M, o->tm[which].rp), rows, C, C, 0.0f,
                      TF_EPI_NONE);
        tf_linear_fwd(ex, r->lg, r->ln.y, tf_P(M, lg), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, r->rg, r->ln.y, tf_P(M, o->tm[which].rg), rows, C, C, 0.0f,
                      TF_EPI_NONE);
    }
    if (!p->gate_kernel) { /* levels 1-2: the gates' sigmoid in place (the logits are
                              not needed again) */
        if (p->fused) {
            tf_x_act_fwd(ex, TF_ACT_SIGMOID, r->gate, r->gate, 2 * n);
        } else {
            tf_x_act_fwd(ex, TF_ACT_SIGMOID, r->lg, r->lg, n);
            tf_x_act_fwd(ex, TF_ACT_SIGMOID, r->rg, r->rg, n);
        }
    }
}

void tf_trimul_rows_gate_bwd(tf_exec *ex, const tf_trimul_plan *p, const tf_trimul_rows *r,
                             void *dproj, void *dgate, long n) {
    const void *dlr = dproj;
    if (p->fused) { /* r->gate holds sigmoid(gate) */
        tf_x_mul(ex, dgate, dlr, r->proj, 2 * n);
        tf_x_act_bwd(ex, TF_ACT_SIGMOID, dgate, dgate, r->gate, 2 * n);
        tf_x_mul(ex, dproj, dlr, r->gate, 2 * n);
        return;
    }
    for (int s = 0; s < 2; s++) {
        const void *pr = s ? r->rp : r->lp, *gt = s ? r->rg : r->lg;
        void *dp = tf_at(ex, dproj, s * n), *dg = tf_at(ex, dgate, s * n);
        if (p->gate_kernel) {
            tf_x_gate_bwd(ex, dp, dg, dp, pr, gt, n);
        } else { /* gt holds sigmoid(gate) */
            tf_x_mul(ex, dg, dp, pr, n);
            tf_x_act_bwd(ex, TF_ACT_SIGMOID, dg, dg, gt, n);
            tf_x_mul(ex, dp, dp, gt, n);
        }
    }
}

void tf_trimul_rows_proj_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                             const tf_trimul_plan *p, const tf_trimul_rows *r, void *dy,
                             const void *dproj, const void *dgate, long rows) {
    const int C = M->c->pair_dim;
    const long n = rows * C;
    const size_t lp = o->tm[which].lp, lg = o->tm[which].lg;
    if (p->merged) {
        tf_linear_bwd(ex, dy, tf_G(M, lp), dproj, r->ln.y, tf_P(M, lp), rows, C, 4 * C, 1);
    } else if (p->fused) {
        tf_linear_bwd(ex, dy, tf_G(M, lp), dproj, r->ln.y, tf_P(M, lp), rows, C, 2 * C, 1);
        tf_linear_bwd(ex, dy, tf_G(M, lg), dgate, r->ln.y, tf_P(M, lg), rows, C, 2 * C, 1);
    } else {
        const size_t w[4] = {lp, o->tm[which].rp, lg, o->tm[which].rg};
        const void *dd[4] = {dproj, tf_at(ex, dproj, n), dgate, tf_at(ex, dgate, n)};
        for (int i = 0; i < 4; i++)
            tf_linear_bwd(ex, dy, tf_G(M, w[i]), dd[i], r->ln.y, tf_P(M, w[i]), rows, C, C, 1);
    }
}

void tf_trimul_rows_out(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                        const tf_trimul_plan *p, const tf_trimul_rows *r, const void *u_p,
                        long r0, long n_rows, void **out, void **og) {
    const int C = M->c->pair_dim;
    const long rows = (long)M->c->batch * M->c->seq_len * M->c->seq_len; /* u's */
    *out = tf_alloc_at(ex, (size_t)n_rows * C);
    *og = tf_alloc_at(ex, (size_t)n_rows * C);
    if (p->cmajor) { /* out [n_rows, C] = (u^T) Wo^T, u stored [C, rows]: its columns r0.. */
        tf_gemm_args g = tf_gemm_make(ex, 1, 1, (int)n_rows, C, C, 1.0f, 0.0f, tf_at(ex, u_p, r0),
                                      rows, 0, tf_x_w(ex, tf_P(M, o->tm[which].op)), C, 0, *out, C,
                                      0, 1);
        tf_gemm(ex, &g, "linear_fwd");
    } else {
        tf_linear_fwd(ex, *out, tf_at(ex, u_p, r0 * C), tf_P(M, o->tm[which].op), n_rows, C, C,
                      0.0f, TF_EPI_NONE);
    }
    tf_linear_fwd(ex, *og, r->ln.y, tf_P(M, o->tm[which].og), n_rows, C, C, 0.0f, TF_EPI_NONE);
}

void tf_trimul_rows_residual(tf_exec *ex, const tf_trimul_plan *p, float *z_out,
                             const float *z_in, const void *out, void *og, long n) {
    if (p->gate_kernel) {
        if (z_out) tf_x_gate_residual_fwd(ex, z_out, z_in, out, og, n);
        return;
    }
    tf_x_act_fwd(ex, TF_ACT_SIGMOID, og, og, n);
    if (!z_out) return; /* the forward run again, its output not wanted */
    const size_t mark = tf_arena_mark(ex->arena);
    void *res = tf_alloc_at(ex, (size_t)n);
    tf_x_mul(ex, res, out, og, n);
    float *res32 = res;
    if (ex->at != TF_F32) { /* the residual add in the stream's type */
        res32 = tf_alloc_act(ex, (size_t)n);
        tf_x_convert(ex, res32, TF_F32, res, ex->at, n);
    }
    tf_x_add(ex, z_out, z_in, res32, n);
    tf_arena_release(ex->arena, mark);
}

void tf_trimul_rows_out_bwd(tf_exec *ex, const tf_trimul_plan *p, void *dout, void *dog,
                            const void *dz, const void *out, const void *og, long n) {
    if (p->gate_kernel) {
        tf_x_gate_bwd(ex, dout, dog, dz, out, og, n);
        return;
    }
    tf_x_mul(ex, dout, dz, og, n);
    tf_x_mul(ex, dog, dz, out, n);
    tf_x_act_bwd(ex, TF_ACT_SIGMOID, dog, dog, og, n);
}

void tf_trimul_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   tf_trimul_act *a, float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long rows = (long)B * N * N, nc = rows * C;
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    const size_t lp = o->tm[which].lp;
    a->plan = tf_trimul_plan_make(ex, o, which, C);
    const int fused = a->plan.fused, gate_kernel = a->plan.gate_kernel;
    if (a->plan.chunked) {
        tf_trimul_fwd_chunked(ex, M, o, which, a, z_out, z_in);
        return;
    }
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");
    float *ln_stats = NULL; /* the op's norms (trimul_proj_fwd's prologue) */
    if (a->plan.proj_op)
        ln_stats = tf_ln2_alloc(ex, &a->r.bln, &a->r.ln, rows, C);
    else
        tf_ln2_fwd(ex, M, bn, o->tm[which].ln, &a->r.bln, &a->r.ln, z_in, rows, C);

    tf_rpush(ex, "projections");
    size_t mark;
    tf_trimul_rows_proj(ex, M, o, which, &a->plan, &a->r, rows);
    tf_rpop(ex);

    tf_rpush(ex, "gating");
    /* gated L|R, then channel-first (or -major) copies kept for backward */
    a->lr_t = tf_alloc_at(ex, (size_t)2 * nc);
    a->l_t = a->lr_t;
    a->r_t = tf_at(ex, a->lr_t, nc);
    a->sig = NULL;
    if (a->plan.proj_op) { /* og too, from the same rows of y */
        a->og = tf_alloc_at(ex, (size_t)nc);
        tf_x_trimul_proj_fwd(ex, a->lr_t, a->og, a->r.ln.y, ln_stats, z_in, tf_P(M, bn.w),
                             tf_P(M, bn.b), tf_P(M, o->tm[which].ln.w), tf_P(M, o->tm[which].ln.b),
                             tf_P(M, lp), tf_P(M, o->tm[which].og), rows, rows, C);
    } else if (gate_kernel && fused) { /* gating and transpose to [2, C, rows] in one pass
                                   (op_list.h gate_cmajor_fwd; level 3: channel-major) */
        tf_x_gate_cmajor_fwd(ex, a->lr_t, a->r.proj, a->plan.merged ? tf_at(ex, a->r.proj, 2 * C) : a->r.gate,
                             a->plan.merged ? 4 * C : 2 * C, rows, rows, C);
    } else {
        mark = tf_arena_mark(ex->arena);
        void *g_lr = tf_alloc_at(ex, (size_t)2 * nc);
        if (fused) {
            a->sig = a->r.gate; /* the sigmoid, in place (tf_trimul_rows_proj) */
            tf_x_mul(ex, g_lr, a->r.proj, a->sig, 2 * nc);
            int dims[5] = {B, N, N, 2, C};
            tf_x_permute(ex, a->lr_t, g_lr, 5, dims, lr_to_chan_first, 0);
        } else {
            for (int s = 0; s < 2; s++) {
                void *p = s ? a->r.rp : a->r.lp, *gt = s ? a->r.rg : a->r.lg;
                if (gate_kernel)
                    tf_x_gate_fwd(ex, tf_at(ex, g_lr, s * nc), p, gt, nc);
                else /* gt holds the sigmoid (tf_trimul_rows_proj) */
                    tf_x_mul(ex, tf_at(ex, g_lr, s * nc), p, gt, nc);
            }
            if (!gate_kernel) a->sig = a->r.lg; /* lg, rg hold the sigmoids */
            int dims[4] = {B, N, N, C};
            const int *perm = a->plan.cmajor ? to_cmajor : to_chan_first;
            tf_x_permute(ex, a->l_t, g_lr, 4, dims, perm, 0);
            tf_x_permute(ex, a->r_t, tf_at(ex, g_lr, nc), 4, dims, perm, 0);
        }
        tf_arena_release(ex->arena, mark);
    }
    tf_rpop(ex);

    tf_rpush(ex, "triangle_product");
    a->u_p = tf_alloc_at(ex, (size_t)nc);
    mark = tf_arena_mark(ex->arena);
    /* the product's batch is (b, c) or, channel-major, (c, b): one stride either way */
    void *u = a->plan.cmajor ? a->u_p : tf_alloc_at(ex, (size_t)nc);
    if (which == 0)
        tf_trimul_product(ex, 0, 1, a->l_t, a->r_t, u, B, C, N, "trimul_out");
    else
        tf_trimul_product(ex, 1, 0, a->l_t, a->r_t, u, B, C, N, "trimul_in");
    if (!a->plan.cmajor) {
        int dims[4] = {B, C, N, N};
        tf_x_permute(ex, a->u_p, u, 4, dims, to_chan_last, 0);
    }
    tf_arena_release(ex->arena, mark);
    tf_rpop(ex);

    tf_rpush(ex, "output_proj");
    if (a->plan.proj_op) { /* the projection, gate and residual add in one op: out not kept */
        a->out = NULL;
        a->og_sig = NULL;
        if (z_out)
            tf_x_trimul_out_fwd(ex, z_out, z_in, a->u_p, tf_P(M, o->tm[which].op), a->og, rows,
                                rows, C);
        tf_rpop(ex);
        tf_rpop(ex);
        return;
    }
    tf_trimul_rows_out(ex, M, o, which, &a->plan, &a->r, a->u_p, 0, rows, &a->out, &a->og);
    a->og_sig = gate_kernel ? NULL : a->og; /* the sigmoid, in place */
    tf_trimul_rows_residual(ex, &a->plan, z_out, z_in, a->out, a->og, nc);
    tf_rpop(ex);
    tf_rpop(ex);
}

/* n floats for a gradient, in `consumed`'s memory (a buffer no later op
 * reads), or with the lane (exec.h wgrad_async) in fresh memory: a weight
 * gradient there reads `consumed`, and writing it would make the main queue
 * wait for that (lane.h) */
static void *reuse_unless_lane(tf_exec *ex, void *consumed, size_t n) {
    return ex->wgrad_async ? tf_alloc_at(ex, n) : consumed;
}

/* The output stage's backward as one op (op_list.h trimul_out_bwd): out again,
 * the gate's gradients and du; then Wog's and Wo's gradients and dy. Returns
 * du ([C, rows]); *dout and *dy as the composition's. */
static void *output_bwd_op(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           const tf_trimul_act *a, const float *dz, void **dout, void **dy) {
    const int C = M->c->pair_dim;
    const long rows = (long)M->c->batch * M->c->seq_len * M->c->seq_len, nc = rows * C;
    void *dog = tf_alloc_at(ex, (size_t)nc), *du = tf_alloc_at(ex, (size_t)nc);
    *dout = tf_alloc_at(ex, (size_t)nc);
    tf_x_trimul_out_bwd(ex, *dout, dog, du, dz, a->u_p, tf_P(M, o->tm[which].op), a->og, rows,
                        rows, C);
    *dy = tf_alloc_at(ex, (size_t)nc);
    tf_linear_bwd(ex, *dy, tf_G(M, o->tm[which].og), dog, a->r.ln.y, tf_P(M, o->tm[which].og), rows,
                  C, C, 0);
    /* dWo += dout^T (u^T)^T, u stored [C, rows] */
    tf_gemm_args g = tf_gemm_make(ex, 1, 1, C, C, (int)rows, 1.0f, 1.0f, *dout, C, 0, a->u_p, rows,
                                  0, tf_G(M, o->tm[which].op), C, 0, 1);
    g.c_type = TF_F32; /* the parameter gradient */
    g.wgrad = ex->wgrad_async;
    tf_gemm(ex, &g, "linear_bwd_weight");
    return du;
}

/* The output stage's backward composed: the stream gradient in the
 * activations' type, the gate's gradients, Wog's (dy), Wo's and u's; du
 * channel-first (or -major) as the product stores u */
static void *output_bwd_composed(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                                 const tf_trimul_act *a, const float *dz, void **dout_p,
                                 void **dy_p) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long rows = (long)B * N * N, nc = rows * C;
    const void *dzh = tf_x_stream_grad(ex, dz, nc);
    void *dout = tf_alloc_at(ex, (size_t)nc), *dog = tf_alloc_at(ex, (size_t)nc), *du;
    tf_trimul_rows_out_bwd(ex, &a->plan, dout, dog, dzh, a->out, a->og, nc);
    void *dy = tf_alloc_at(ex, (size_t)nc);
    tf_linear_bwd(ex, dy, tf_G(M, o->tm[which].og), dog, a->r.ln.y, tf_P(M, o->tm[which].og), rows,
                  C, C, 0);
    if (a->plan.cmajor) {
        /* dWo += dout^T (u^T)^T = dout^T u-as-stored^T; du [C, rows] = Wo^T dout^T,
         * into dog's memory where it may (reuse_unless_lane) */
        tf_gemm_args g = tf_gemm_make(ex, 1, 1, C, C, (int)rows, 1.0f, 1.0f, dout, C, 0, a->u_p,
                                      rows, 0, tf_G(M, o->tm[which].op), C, 0, 1);
        g.c_type = TF_F32; /* the parameter gradient */
        g.wgrad = ex->wgrad_async;
        tf_gemm(ex, &g, "linear_bwd_weight");
        du = reuse_unless_lane(ex, dog, (size_t)nc); /* Wog's gradient reads dog */
        g = tf_gemm_make(ex, 1, 1, C, (int)rows, C, 1.0f, 0.0f, tf_x_w(ex, tf_P(M, o->tm[which].op)),
                         C, 0, dout, C, 0, du, rows, 0, 1);
        tf_gemm(ex, &g, "linear_bwd_data");
    } else {
        void *du_p = reuse_unless_lane(ex, dog, (size_t)nc); /* Wog's gradient reads dog */
        tf_linear_bwd(ex, du_p, tf_G(M, o->tm[which].op), dout, a->u_p, tf_P(M, o->tm[which].op),
                      rows, C, C, 0);
        du = reuse_unless_lane(ex, dout, (size_t)nc); /* Wo's gradient reads dout */
        int dims[4] = {B, N, N, C};
        tf_x_permute(ex, du, du_p, 4, dims, to_chan_first, 0);
    }
    *dout_p = dout, *dy_p = dy;
    return du;
}

void tf_trimul_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   const tf_trimul_act *a, float *dz, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long rows = (long)B * N * N, nc = rows * C;
    const int fused = a->plan.fused, gate_kernel = a->plan.gate_kernel;
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    const size_t lp = o->tm[which].lp;
    if (a->plan.chunked) {
        tf_trimul_bwd_chunked(ex, M, o, which, a, dz, z_in);
        return;
    }
    size_t mark0 = tf_arena_mark(ex->arena);
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");

    tf_rpush(ex, "output_proj");
    void *dout, *dy;
    void *du = a->plan.proj_op ? output_bwd_op(ex, M, o, which, a, dz, &dout, &dy)
                          : output_bwd_composed(ex, M, o, which, a, dz, &dout, &dy);
    tf_rpop(ex);
    tf_rpush(ex, "triangle_product");
    void *dlr_t = tf_alloc_at(ex, (size_t)2 * nc);
    void *dl_t = dlr_t, *dr_t = tf_at(ex, dlr_t, nc); /* [2, B, C, N, N] (or [2, C, B, N, N]) as L|R */
    if (which == 0) { /* u = L R^T: dL = dU R, dR = dU^T L */
        tf_trimul_product(ex, 0, 0, du, a->r_t, dl_t, B, C, N, "trimul_out_dl");
        tf_trimul_product(ex, 1, 0, du, a->l_t, dr_t, B, C, N, "trimul_out_dr");
    } else { /* u = L^T R: dL = R dU^T, dR = L dU */
        tf_trimul_product(ex, 0, 1, a->r_t, du, dl_t, B, C, N, "trimul_in_dl");
        tf_trimul_product(ex, 0, 0, a->l_t, du, dr_t, B, C, N, "trimul_in_dr");
    }
    tf_rpop(ex);

    tf_rpush(ex, "gating");
    /* d(projection) and d(gate logits); merged: one [rows, 4C] gradient */
    void *dproj, *dgate;
    if (a->plan.proj_op) { /* proj again from y, the merged [rows, 4C] gradient */
        dproj = tf_alloc_at(ex, (size_t)4 * nc);
        dgate = NULL;
        tf_x_trimul_proj_bwd(ex, dproj, dlr_t, a->r.ln.y, tf_P(M, lp), rows, rows, C);
    } else if (gate_kernel && fused) { /* from the channel-first gradient in one pass */
        dproj = tf_alloc_at(ex, (size_t)4 * nc);
        dgate = tf_at(ex, dproj, a->plan.merged ? 2 * C : 2 * nc);
        tf_x_gate_cmajor_bwd(ex, dproj, dgate, dlr_t, a->r.proj,
                             a->plan.merged ? tf_at(ex, a->r.proj, 2 * C) : a->r.gate, a->plan.merged ? 4 * C : 2 * C,
                             rows, rows, C);
    } else {
        void *dlr = tf_alloc_at(ex, (size_t)2 * nc); /* gated L|R gradient, channels last */
        if (fused) {
            int d2[5] = {2, B, C, N, N};
            tf_x_permute(ex, dlr, dlr_t, 5, d2, lr_to_chan_last, 0);
        } else {
            /* [B,C,N,N] -> [B,N,N,C], or channel-major [C,B*N*N] -> [B*N*N,C] */
            int d1[4] = {B, C, N, N}, dc[4] = {C, B * N * N, 1, 1};
            static const int cm_back[4] = {1, 0, 2, 3};
            const int *pm = a->plan.cmajor ? cm_back : to_chan_last;
            tf_x_permute(ex, dlr, dl_t, 4, a->plan.cmajor ? dc : d1, pm, 0);
            tf_x_permute(ex, tf_at(ex, dlr, nc), dr_t, 4, a->plan.cmajor ? dc : d1, pm, 0);
        }
        dproj = dlr, dgate = dlr_t; /* dlr_t's memory is free again */
        tf_trimul_rows_gate_bwd(ex, &a->plan, &a->r, dproj, dgate, rows * C);
    }
    tf_rpop(ex);

    tf_rpush(ex, "projections");
    tf_trimul_rows_proj_bwd(ex, M, o, which, &a->plan, &a->r, dy, dproj, dgate, rows);
    tf_rpop(ex);
    tf_ln2_bwd(ex, M, bn, o->tm[which].ln, &a->r.bln, &a->r.ln, dz, dout, dy, z_in, rows, C, 1);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark0);
}
