/* Triangle multiplicative update (SPEC "TriMulOut" / "TriMulIn"):
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
 * too) read by the gated-pair kernels (ops.h glu_fwd), and one GEMM each for
 * their dX and dW in the backward. */
#include "model/model.h"

static const int to_chan_first[4] = {0, 3, 1, 2}; /* [B,N,N,C] -> [B,C,N,N] */
static const int to_chan_last[4] = {0, 2, 3, 1};  /* [B,C,N,N] -> [B,N,N,C] */
/* fused L|R: [B,N,N,2,C] -> [2,B,C,N,N] and back */
static const int lr_to_chan_first[5] = {3, 0, 4, 1, 2};
static const int lr_to_chan_last[5] = {1, 3, 4, 0, 2};

/* The batched N x N x N products over (b, c): each operand [B, C, N, N]
 * contiguous, one call */
static void product(tf_exec *ex, int tA, int tB, const float *A, const float *Bm, float *Cm,
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
    tf_gemm(ex, &g, name);
}

void tf_trimul_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   tf_trimul_act *a, float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long rows = (long)B * N * N, nc = rows * C;
    const int fused = ex->fu.triangle, gate_kernel = ex->level >= 3;
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    const size_t lp = o->tm[which].lp, lg = o->tm[which].lg;
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");
    tf_ln_fwd(ex, M, bn, &a->bln, z_in, rows, C);
    tf_ln_fwd(ex, M, o->tm[which].ln, &a->ln, a->bln.y, rows, C);

    tf_rpush(ex, "projections");
    size_t mark;
    /* level 3: projections and gates from one GEMM when the four weights are adjacent */
    a->merged = fused && gate_kernel && ex->trimul_merged &&
                o->tm[which].rp == lp + (size_t)C * C && lg == lp + (size_t)2 * C * C &&
                o->tm[which].rg == lp + (size_t)3 * C * C;
    if (a->merged) {
        a->proj = tf_alloc_act(ex, (size_t)4 * nc);
        a->gate = a->proj + 2 * C; /* row r's gates at proj + r * 4C + 2C */
        tf_linear_fwd(ex, a->proj, a->ln.y, tf_P(M, lp), rows, C, 4 * C, 0.0f, TF_EPI_NONE);
        a->lp = a->rp = a->lg = a->rg = NULL;
    } else if (fused) {
        a->proj = tf_alloc_act(ex, (size_t)2 * nc);
        a->gate = tf_alloc_act(ex, (size_t)2 * nc);
        tf_linear_fwd(ex, a->proj, a->ln.y, tf_P(M, lp), rows, C, 2 * C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, a->gate, a->ln.y, tf_P(M, lg), rows, C, 2 * C, 0.0f, TF_EPI_NONE);
        a->lp = a->rp = a->lg = a->rg = NULL;
    } else {
        a->proj = a->gate = NULL;
        float *buf = tf_alloc_act(ex, (size_t)4 * nc);
        a->lp = buf;
        a->rp = buf + nc;
        a->lg = buf + 2 * nc;
        a->rg = buf + 3 * nc;
        tf_linear_fwd(ex, a->lp, a->ln.y, tf_P(M, lp), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, a->rp, a->ln.y, tf_P(M, o->tm[which].rp), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, a->lg, a->ln.y, tf_P(M, lg), rows, C, C, 0.0f, TF_EPI_NONE);
        tf_linear_fwd(ex, a->rg, a->ln.y, tf_P(M, o->tm[which].rg), rows, C, C, 0.0f, TF_EPI_NONE);
    }
    tf_rpop(ex);

    tf_rpush(ex, "gating");
    /* gated L|R, channels last, then channel-first copies kept for backward */
    a->lr_t = tf_alloc_act(ex, (size_t)2 * nc);
    mark = tf_arena_mark(ex->arena);
    float *g_lr = tf_alloc_act(ex, (size_t)2 * nc);
    a->sig = NULL;
    if (a->merged) {
        tf_x_glu_fwd(ex, g_lr, a->proj, rows, 2 * C);
    } else if (fused) {
        if (gate_kernel) {
            tf_x_gate_fwd(ex, g_lr, a->proj, a->gate, 2 * nc);
        } else {
            a->sig = a->gate; /* sigmoid in place: the logits are not needed again */
            tf_x_act_fwd(ex, TF_ACT_SIGMOID, a->sig, a->gate, 2 * nc);
            tf_x_mul(ex, g_lr, a->proj, a->sig, 2 * nc);
        }
    } else {
        for (int s = 0; s < 2; s++) {
            float *p = s ? a->rp : a->lp, *gt = s ? a->rg : a->lg;
            if (gate_kernel) {
                tf_x_gate_fwd(ex, g_lr + s * nc, p, gt, nc);
            } else {
                tf_x_act_fwd(ex, TF_ACT_SIGMOID, gt, gt, nc);
                tf_x_mul(ex, g_lr + s * nc, p, gt, nc);
            }
        }
        if (!gate_kernel) a->sig = a->lg; /* lg, rg now hold the sigmoids */
    }
    a->l_t = a->lr_t;
    a->r_t = a->lr_t + nc;
    if (fused) {
        int dims[5] = {B, N, N, 2, C};
        tf_x_permute(ex, a->lr_t, g_lr, 5, dims, lr_to_chan_first, 0);
    } else {
        int dims[4] = {B, N, N, C};
        tf_x_permute(ex, a->l_t, g_lr, 4, dims, to_chan_first, 0);
        tf_x_permute(ex, a->r_t, g_lr + nc, 4, dims, to_chan_first, 0);
    }
    tf_arena_release(ex->arena, mark);
    tf_rpop(ex);

    tf_rpush(ex, "triangle_product");
    a->u_p = tf_alloc_act(ex, (size_t)nc);
    mark = tf_arena_mark(ex->arena);
    float *u = tf_alloc_act(ex, (size_t)nc);
    if (which == 0)
        product(ex, 0, 1, a->l_t, a->r_t, u, B, C, N, "trimul_out");
    else
        product(ex, 1, 0, a->l_t, a->r_t, u, B, C, N, "trimul_in");
    int dims[4] = {B, C, N, N};
    tf_x_permute(ex, a->u_p, u, 4, dims, to_chan_last, 0);
    tf_arena_release(ex->arena, mark);
    tf_rpop(ex);

    tf_rpush(ex, "output_proj");
    a->out = tf_alloc_act(ex, (size_t)nc);
    a->og = tf_alloc_act(ex, (size_t)nc);
    tf_linear_fwd(ex, a->out, a->u_p, tf_P(M, o->tm[which].op), rows, C, C, 0.0f, TF_EPI_NONE);
    tf_linear_fwd(ex, a->og, a->ln.y, tf_P(M, o->tm[which].og), rows, C, C, 0.0f, TF_EPI_NONE);
    if (gate_kernel) {
        a->og_sig = NULL;
        tf_x_copy(ex, z_out, z_in, (size_t)nc);
        tf_x_gate_residual_fwd(ex, z_out, a->out, a->og, nc);
    } else {
        a->og_sig = a->og;
        tf_x_act_fwd(ex, TF_ACT_SIGMOID, a->og_sig, a->og, nc);
        mark = tf_arena_mark(ex->arena);
        float *res = tf_alloc_act(ex, (size_t)nc);
        tf_x_mul(ex, res, a->out, a->og_sig, nc);
        tf_x_add(ex, z_out, z_in, res, nc);
        tf_arena_release(ex->arena, mark);
    }
    tf_rpop(ex);
    tf_rpop(ex);
}

void tf_trimul_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   const tf_trimul_act *a, float *dz, const float *z_in) {
    const tf_config *c = M->c;
    const int B = c->batch, N = c->seq_len, C = c->pair_dim;
    const long rows = (long)B * N * N, nc = rows * C;
    const int fused = a->proj != NULL, gate_kernel = a->og_sig == NULL;
    const tf_ln_off bn = which ? o->pn_tri_in : o->pn_tri_out;
    const size_t lp = o->tm[which].lp, lg = o->tm[which].lg;
    size_t mark0 = tf_arena_mark(ex->arena);
    tf_rpush(ex, which ? "triangle_mult_incoming" : "triangle_mult_outgoing");

    tf_rpush(ex, "output_proj");
    float *dout = tf_alloc_act(ex, (size_t)nc), *dog = tf_alloc_act(ex, (size_t)nc);
    if (gate_kernel) {
        tf_x_gate_bwd(ex, dout, dog, dz, a->out, a->og, nc);
    } else {
        tf_x_mul(ex, dout, dz, a->og_sig, nc);
        tf_x_mul(ex, dog, dz, a->out, nc);
        tf_x_act_bwd(ex, TF_ACT_SIGMOID, dog, dog, a->og_sig, nc);
    }
    float *dy = tf_alloc_act(ex, (size_t)nc);
    tf_linear_bwd(ex, dy, tf_G(M, o->tm[which].og), dog, a->ln.y, tf_P(M, o->tm[which].og), rows,
                  C, C, 0);
    float *du_p = dog; /* dog is consumed: reuse its memory */
    tf_linear_bwd(ex, du_p, tf_G(M, o->tm[which].op), dout, a->u_p, tf_P(M, o->tm[which].op),
                  rows, C, C, 0);
    tf_rpop(ex);

    tf_rpush(ex, "triangle_product");
    float *du = dout;
    int dims[4] = {B, N, N, C};
    tf_x_permute(ex, du, du_p, 4, dims, to_chan_first, 0);
    /* merged: the first half holds the products' gradient, then all of it the
     * gradient of the projections and gates, [rows, 4C] */
    float *dlr_t = tf_alloc_act(ex, (size_t)(a->merged ? 4 : 2) * nc);
    float *dl_t = dlr_t, *dr_t = dlr_t + nc; /* [2, B, C, N, N] as L|R */
    if (which == 0) { /* u = L R^T: dL = dU R, dR = dU^T L */
        product(ex, 0, 0, du, a->r_t, dl_t, B, C, N, "trimul_out_dl");
        product(ex, 1, 0, du, a->l_t, dr_t, B, C, N, "trimul_out_dr");
    } else { /* u = L^T R: dL = R dU^T, dR = L dU */
        product(ex, 0, 1, a->r_t, du, dl_t, B, C, N, "trimul_in_dl");
        product(ex, 0, 0, a->l_t, du, dr_t, B, C, N, "trimul_in_dr");
    }
    tf_rpop(ex);

    tf_rpush(ex, "gating");
    float *dlr = tf_alloc_act(ex, (size_t)2 * nc); /* gated L|R gradient, channels last */
    if (fused) {
        int d2[5] = {2, B, C, N, N};
        tf_x_permute(ex, dlr, dlr_t, 5, d2, lr_to_chan_last, 0);
    } else {
        int d1[4] = {B, C, N, N};
        tf_x_permute(ex, dlr, dl_t, 4, d1, to_chan_last, 0);
        tf_x_permute(ex, dlr + nc, dr_t, 4, d1, to_chan_last, 0);
    }
    /* d(projection) and d(gate logits): reuse dlr_t's memory for the gate part */
    float *dproj = dlr, *dgate = dlr_t;
    if (a->merged) {
        tf_x_glu_bwd(ex, dlr_t, dlr, a->proj, rows, 2 * C);
    } else if (fused) {
        if (gate_kernel) {
            tf_x_gate_bwd(ex, dproj, dgate, dlr, a->proj, a->gate, 2 * nc);
        } else {
            tf_x_mul(ex, dgate, dlr, a->proj, 2 * nc);
            tf_x_act_bwd(ex, TF_ACT_SIGMOID, dgate, dgate, a->sig, 2 * nc);
            tf_x_mul(ex, dproj, dlr, a->sig, 2 * nc);
        }
    } else {
        for (int s = 0; s < 2; s++) {
            const float *p = s ? a->rp : a->lp, *gt = s ? a->rg : a->lg;
            float *dp = dproj + s * nc, *dg = dgate + s * nc;
            if (gate_kernel) {
                tf_x_gate_bwd(ex, dp, dg, dp, p, gt, nc);
            } else { /* gt holds sigmoid(gate) */
                tf_x_mul(ex, dg, dp, p, nc);
                tf_x_act_bwd(ex, TF_ACT_SIGMOID, dg, dg, gt, nc);
                tf_x_mul(ex, dp, dp, gt, nc);
            }
        }
    }
    tf_rpop(ex);

    tf_rpush(ex, "projections");
    if (a->merged) {
        tf_linear_bwd(ex, dy, tf_G(M, lp), dlr_t, a->ln.y, tf_P(M, lp), rows, C, 4 * C, 1);
    } else if (fused) {
        tf_linear_bwd(ex, dy, tf_G(M, lp), dproj, a->ln.y, tf_P(M, lp), rows, C, 2 * C, 1);
        tf_linear_bwd(ex, dy, tf_G(M, lg), dgate, a->ln.y, tf_P(M, lg), rows, C, 2 * C, 1);
    } else {
        const size_t w[4] = {lp, o->tm[which].rp, lg, o->tm[which].rg};
        const float *dd[4] = {dproj, dproj + nc, dgate, dgate + nc};
        for (int i = 0; i < 4; i++)
            tf_linear_bwd(ex, dy, tf_G(M, w[i]), dd[i], a->ln.y, tf_P(M, w[i]), rows, C, C, 1);
    }
    tf_rpop(ex);
    float *dxb = dout;
    tf_ln_bwd(ex, M, o->tm[which].ln, &a->ln, dxb, dy, a->bln.y, rows, C, 0);
    tf_ln_bwd(ex, M, bn, &a->bln, dz, dxb, z_in, rows, C, 1);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark0);
}
