/* The attention core shared by the four attention modules.
 *
 * Layout: q, k, v are [B, X, Y, H, d] tensors with row stride ld (C for separate
 * projections, 3C for one fused Q/K/V buffer). Row-wise attention attends
 * along Y for every (b, x, h); column-wise along X for every (b, y, h).
 *   MSA row:        X = S, Y = N, row-wise, with pair bias [B, N, N, H]
 *   MSA column:     X = S, Y = N, column-wise
 *   triangle start: X = N, Y = N, row-wise
 *   triangle end:   X = N, Y = N, column-wise (= the transposed pair, row-wise)
 *
 * Two compositions of the same math:
 *   flash (v2/v3): one streaming attention op over strided views, no L x L scores stored;
 *   eager (v1):    permutes to [B*O*H, L, d], batched score GEMM, scale, bias add,
 *                  softmax, P.V GEMM, permute back, all materialised (as eager PyTorch).
 */
#include <math.h>

#include "model/model.h"

static void geometry(const tf_attn_core *a, int *L, int *O) {
    *L = a->colwise ? a->X : a->Y;
    *O = a->colwise ? a->Y : a->X;
}

static tf_attn_view view(const tf_attn_core *a, const void *p, long ld) {
    tf_attn_view v;
    v.p = (void *)p;
    v.sb = (long)a->X * a->Y * ld;
    if (a->colwise) {
        v.so = ld;
        v.sl = (long)a->Y * ld;
    } else {
        v.so = (long)a->Y * ld;
        v.sl = ld;
    }
    return v;
}

static void flash_args(const tf_exec *ex, const tf_attn_core *a, tf_attn_args *g) {
    int L, O;
    geometry(a, &L, &O);
    *g = (tf_attn_args){0};
    g->t = ex->at;
    g->nb = a->B;
    g->no = O;
    g->nh = a->H;
    g->L = L;
    g->d = a->d;
    g->scale = 1.0f / sqrtf((float)a->d);
    g->q = view(a, a->q, a->ld);
    g->k = view(a, a->k, a->ld);
    g->v = view(a, a->v, a->ld);
    g->out = view(a, a->o, (long)a->H * a->d);
    if (a->bias && a->bias_hmajor) { /* [H, B, L, L] */
        g->bias = a->bias;
        g->bias_sb = (long)L * L;
        g->bias_si = L;
        g->bias_sj = 1;
        g->bias_sh = (long)a->B * L * L;
    } else if (a->bias) {
        g->bias = a->bias;
        g->bias_sb = (long)L * L * a->H;
        g->bias_si = (long)L * a->H;
        g->bias_sj = a->H;
        g->bias_sh = 1;
    }
    g->lse = a->lse;
}

/* Permutation from [B, X, Y, H, d] to [B, O, H, L, d] and back. */
static const int perm_row[5] = {0, 1, 3, 2, 4};     /* self-inverse */
static const int perm_col[5] = {0, 2, 3, 1, 4};
static const int perm_col_inv[5] = {0, 3, 1, 2, 4};
/* Fused [B, X, Y, 3, H, d] to [3, B, O, H, L, d] and back. */
static const int perm3_row[6] = {3, 0, 1, 4, 2, 5};
static const int perm3_col[6] = {3, 0, 2, 4, 1, 5};
static const int perm3_row_inv[6] = {1, 2, 4, 0, 3, 5};
static const int perm3_col_inv[6] = {1, 4, 2, 0, 3, 5};

static void to_heads(tf_exec *ex, const tf_attn_core *a, void *qp, void *kp, void *vp) {
    int C = a->H * a->d;
    long n = (long)a->B * a->X * a->Y * C;
    if (a->ld == 3L * C) { /* one permute moves q, k and v: qp, kp, vp are consecutive */
        int dims[6] = {a->B, a->X, a->Y, 3, a->H, a->d};
        tf_x_permute(ex, qp, a->q, 6, dims, a->colwise ? perm3_col : perm3_row, 0);
        (void)kp;
        (void)vp;
        (void)n;
    } else {
        int dims[5] = {a->B, a->X, a->Y, a->H, a->d};
        const int *p = a->colwise ? perm_col : perm_row;
        tf_x_permute(ex, qp, a->q, 5, dims, p, 0);
        tf_x_permute(ex, kp, a->k, 5, dims, p, 0);
        tf_x_permute(ex, vp, a->v, 5, dims, p, 0);
    }
}

static void batched(tf_exec *ex, int tA, int tB, int M, int N, int K, float beta, const void *A,
                    long lda, long sA, const void *Bm, long ldb, long sB, void *C, long ldc,
                    long sC, int batch, const char *name) {
    tf_gemm_args g = tf_gemm_make(ex, tA, tB, M, N, K, 1.0f, beta, A, lda, sA, Bm, ldb, sB, C, ldc,
                                  sC, batch);
    tf_gemm(ex, &g, name);
}

void tf_attn_core_fwd(tf_exec *ex, tf_attn_core *a) {
    int L, O;
    geometry(a, &L, &O);
    const int H = a->H, d = a->d, C = H * d;
    const long T = (long)a->B * O * H;
    a->o = tf_alloc_at(ex, (size_t)a->B * a->X * a->Y * C);
    a->lse = NULL;
    a->qp = a->kp = a->vp = a->probs = NULL;
    if (ex->fu.flash) {
        a->lse = tf_alloc_act(ex, (size_t)T * L);
        tf_attn_args g;
        flash_args(ex, a, &g);
        tf_x_attn_fwd(ex, &g);
        return;
    }
    a->qp = tf_alloc_at(ex, (size_t)3 * T * L * d);
    a->kp = tf_at(ex, a->qp, T * L * d);
    a->vp = tf_at(ex, a->kp, T * L * d);
    a->probs = tf_alloc_at(ex, (size_t)T * L * L);
    to_heads(ex, a, a->qp, a->kp, a->vp);
    batched(ex, 0, 1, L, L, d, 0.0f, a->qp, d, (long)L * d, a->kp, d, (long)L * d, a->probs, L,
            (long)L * L, (int)T, "attn_scores");
    tf_x_scale(ex, a->probs, a->probs, 1.0f / sqrtf((float)d), T * L * L);
    if (a->bias) {
        size_t mark = tf_arena_mark(ex->arena);
        void *bp = tf_alloc_at(ex, (size_t)a->B * H * L * L);
        int dims[4] = {a->B, L, L, H}, perm[4] = {0, 3, 1, 2};
        tf_x_permute(ex, bp, a->bias, 4, dims, perm, 0);
        tf_x_add_bcast_mid(ex, a->probs, bp, a->B, O, (long)H * L * L);
        tf_arena_release(ex->arena, mark);
    }
    tf_x_softmax_fwd(ex, a->probs, a->probs, T * L, L);
    size_t mark = tf_arena_mark(ex->arena);
    void *op = tf_alloc_at(ex, (size_t)T * L * d);
    batched(ex, 0, 0, L, d, L, 0.0f, a->probs, L, (long)L * L, a->vp, d, (long)L * d, op, d,
            (long)L * d, (int)T, "attn_pv");
    int dims[5] = {a->B, O, H, L, d};
    tf_x_permute(ex, a->o, op, 5, dims, a->colwise ? perm_col_inv : perm_row, 0);
    tf_arena_release(ex->arena, mark);
}

void tf_attn_core_bwd(tf_exec *ex, const tf_attn_core *a, void *dq, void *dk, void *dv,
                      void *dbias, const void *dout) {
    int L, O;
    geometry(a, &L, &O);
    const int H = a->H, d = a->d, C = H * d;
    const long T = (long)a->B * O * H;
    size_t mark = tf_arena_mark(ex->arena);
    if (ex->fu.flash) {
        tf_attn_args g;
        flash_args(ex, a, &g);
        g.dq = view(a, dq, a->ld);
        g.dk = view(a, dk, a->ld);
        g.dv = view(a, dv, a->ld);
        g.dout = view(a, dout, C);
        g.dbias = dbias;
        g.work = tf_alloc_act(ex, (size_t)T * L);
        tf_x_attn_bwd(ex, &g);
        tf_arena_release(ex->arena, mark);
        return;
    }
    void *dop = tf_alloc_at(ex, (size_t)T * L * d);
    int dims5[5] = {a->B, a->X, a->Y, H, d};
    tf_x_permute(ex, dop, dout, 5, dims5, a->colwise ? perm_col : perm_row, 0);
    void *dS = tf_alloc_at(ex, (size_t)T * L * L);
    void *dqkv = tf_alloc_at(ex, (size_t)3 * T * L * d);
    void *dqp = dqkv, *dkp = tf_at(ex, dqkv, T * L * d), *dvp = tf_at(ex, dqkv, 2 * T * L * d);
    /* dP = dO V^T ; dV = P^T dO */
    batched(ex, 0, 1, L, L, d, 0.0f, dop, d, (long)L * d, a->vp, d, (long)L * d, dS, L,
            (long)L * L, (int)T, "attn_dprobs");
    batched(ex, 1, 0, L, d, L, 0.0f, a->probs, L, (long)L * L, dop, d, (long)L * d, dvp, d,
            (long)L * d, (int)T, "attn_dv");
    tf_x_softmax_bwd(ex, dS, dS, a->probs, T * L, L);
    if (dbias) {
        void *dbp = tf_alloc_at(ex, (size_t)a->B * H * L * L);
        tf_x_sum_mid(ex, dbp, dS, a->B, O, (long)H * L * L, 0, ex->at);
        int dims[4] = {a->B, H, L, L}, perm[4] = {0, 2, 3, 1};
        tf_x_permute(ex, dbias, dbp, 4, dims, perm, 0);
    }
    tf_x_scale(ex, dS, dS, 1.0f / sqrtf((float)d), T * L * L);
    /* dQ = dS K ; dK = dS^T Q */
    batched(ex, 0, 0, L, d, L, 0.0f, dS, L, (long)L * L, a->kp, d, (long)L * d, dqp, d,
            (long)L * d, (int)T, "attn_dq");
    batched(ex, 1, 0, L, d, L, 0.0f, dS, L, (long)L * L, a->qp, d, (long)L * d, dkp, d,
            (long)L * d, (int)T, "attn_dk");
    if (a->ld == 3L * C) {
        int dims[6] = {3, a->B, O, H, L, d};
        tf_x_permute(ex, dq, dqkv, 6, dims, a->colwise ? perm3_col_inv : perm3_row_inv, 0);
    } else {
        int dims[5] = {a->B, O, H, L, d};
        const int *p = a->colwise ? perm_col_inv : perm_row;
        tf_x_permute(ex, dq, dqp, 5, dims, p, 0);
        tf_x_permute(ex, dk, dkp, 5, dims, p, 0);
        tf_x_permute(ex, dv, dvp, 5, dims, p, 0);
    }
    tf_arena_release(ex->arena, mark);
}
