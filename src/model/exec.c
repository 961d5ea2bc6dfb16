/* Op wrappers: stable kernel names for the profiler, skipped while planning,
 * and the memory each op reads and writes, against which the main queue
 * waits for the weight-gradient lane (lane.h). */
#include <string.h>

#include "model/exec.h"

/* Issue one op with its analytic cost (a tf_op_cost expression, evaluated
 * only when profiling) */
#define TF_EXEC_OPC(ex, kname, costexpr, call)                                        \
    do {                                                                              \
        if (!(ex)->planning) {                                                        \
            tf_prof *p_ = (ex)->prof;                                                 \
            if (p_) {                                                                 \
                tf_op_cost c_ = (costexpr);                                           \
                tf_prof_op_cost(p_, kname, c_.flops, c_.bytes);                       \
                tf_prof_op_begin(p_, kname);                                          \
            }                                                                         \
            (ex)->ops->call;                                                          \
            if (p_) tf_prof_op_end(p_);                                               \
            if ((ex)->op_done) (ex)->op_done((ex)->stage_ctx);                        \
        }                                                                             \
    } while (0)

/* ---- the lane's hazards (lane.h) ---- */
static int overlap(tf_span a, tf_span b) { return a.lo < b.hi && b.lo < a.hi; }
static int within(tf_span a, tf_span b) { return a.lo >= b.lo && a.hi <= b.hi; }

/* The main queue waits for the lane's first `k` pending GEMMs. */
static void lane_wait(tf_exec *ex, int k) {
    tf_lane *l = &ex->lane;
    ex->ops->wgrad_wait(ex->be, l->q[k - 1].ticket);
    l->waits++;
    memmove(l->q, l->q + k, (size_t)(l->n - k) * sizeof *l->q);
    l->n -= k;
}

/* The newest pending GEMM that work writing w[0..nw) and reading r[0..nr)
 * conflicts with (write vs its reads or writes, read vs its writes), -1 when
 * none. */
static int lane_conflict(const tf_exec *ex, const tf_span *w, int nw, const tf_span *r, int nr) {
    const tf_lane *l = &ex->lane;
    for (int i = l->n - 1; i >= 0; i--) {
        const tf_lane_gemm *g = &l->q[i];
        int hit = 0;
        for (int k = 0; k < nw && !hit; k++) {
            hit = overlap(w[k], g->w);
            for (int j = 0; j < 4 && !hit; j++) hit = overlap(w[k], g->r[j]);
        }
        for (int k = 0; k < nr && !hit; k++) hit = overlap(r[k], g->w);
        if (hit) return i;
    }
    return -1;
}

/* Before a main-queue op writing w[0..nw) and reading r[0..nr): wait up to
 * the newest pending GEMM it conflicts with. */
static void main_op(tf_exec *ex, const tf_span *w, int nw, const tf_span *r, int nr) {
    const tf_lane *l = &ex->lane;
    const int i = lane_conflict(ex, w, nw, r, nr);
    if (i < 0) return;
    const tf_lane_gemm *g = &l->q[i];
    int k = i + 1; /* the rest of an ended module's GEMMs with it */
    while (g->module != ex->bwd_module && k < l->n && l->q[k].module == g->module) k++;
    lane_wait(ex, k);
}

/* While recording (exec.h grad_hi): the gradient floats the writes w touch. */
static void grad_note(tf_exec *ex, const tf_span *w, int nw) {
    const uintptr_t lo = (uintptr_t)ex->grad_base, hi = lo + ex->grad_n * sizeof(float);
    if (ex->bwd_stage < 0 || ex->bwd_stage >= ex->grad_stages) return;
    size_t *top = &ex->grad_hi[ex->bwd_stage];
    for (int k = 0; k < nw; k++)
        if (w[k].lo < hi && lo < w[k].hi) {
            size_t end = ((w[k].hi < hi ? w[k].hi : hi) - lo + sizeof(float) - 1) / sizeof(float);
            if (end > *top) *top = end;
        }
}

/* ---- the stream gradients' copies (exec.h tf_stream_copy) ---- */
/* The writes w[0..nw): every record whose range they touch is dropped. */
static void sc_written(tf_exec *ex, const tf_span *w, int nw) {
    for (int i = 0; i < ex->nsc; i++) {
        tf_stream_copy *s = &ex->sc[i];
        if (s->lo == s->hi) continue;
        const tf_span r = tf_span_f(s->f + s->lo, s->hi - s->lo);
        for (int k = 0; k < nw; k++)
            if (w[k].lo < w[k].hi && overlap(w[k], r)) {
                s->lo = s->hi = 0;
                break;
            }
    }
}

/* The copy of p[0..n) (fp32) whose record holds it, NULL when none. */
static const void *sc_find(const tf_exec *ex, const float *p, long n) {
    for (int i = 0; i < ex->nsc; i++) {
        const tf_stream_copy *s = &ex->sc[i];
        if (s->lo < s->hi &&
            within(tf_span_f(p, (size_t)n), tf_span_f(s->f + s->lo, s->hi - s->lo)))
            return tf_at(ex, s->h[s->cur], p - s->f);
    }
    return NULL;
}

/* Where a LayerNorm backward writing dx [n] of type xt stores its copy
 * (op_list.h dxh): in half precision, when dx lies in a tracked stream
 * gradient (*sp), that stream's copy of this module's parity; else NULL. */
static void *sc_dest(tf_exec *ex, const void *dx, tf_dtype xt, long n, tf_stream_copy **sp) {
    if (xt != TF_F32 || ex->at == TF_F32) return NULL;
    for (int i = 0; i < ex->nsc; i++) {
        tf_stream_copy *s = &ex->sc[i];
        if (within(tf_span_f(dx, (size_t)n), tf_span_f(s->f, s->n))) {
            *sp = s;
            return tf_at(ex, s->h[ex->bwd_module % s->nh], (const float *)dx - s->f);
        }
    }
    return NULL;
}

/* After that LayerNorm: its range is the stream's record, joined to the
 * record it extends (the chunks of one module, in the same copy). */
static void sc_record(const tf_exec *ex, tf_stream_copy *s, const float *dx, long n) {
    const size_t lo = (size_t)(dx - s->f), hi = lo + (size_t)n;
    const int k = ex->bwd_module % s->nh;
    if (s->lo < s->hi && s->cur == k && (lo == s->hi || hi == s->lo)) {
        s->lo = lo < s->lo ? lo : s->lo;
        s->hi = hi > s->hi ? hi : s->hi;
        return;
    }
    s->cur = k;
    s->lo = lo;
    s->hi = hi;
}

void tf_x_stream_copies_begin(tf_exec *ex, const float *dz, size_t nz, const float *dm,
                              size_t nm) {
    ex->nsc = 0;
    if (ex->at == TF_F32 || !ex->stream_copies) return;
    const float *f[2] = {dz, dm};
    const size_t n[2] = {nz, nm};
    for (int i = 0; i < 2; i++) {
        tf_stream_copy *s = &ex->sc[i];
        memset(s, 0, sizeof *s);
        s->f = f[i];
        s->n = n[i];
        s->nh = ex->wgrad_async ? TF_STREAM_COPIES : 1;
        for (int k = 0; k < s->nh; k++) s->h[k] = tf_alloc_at(ex, n[i]);
    }
    ex->nsc = 2;
}

void tf_x_stream_copies_end(tf_exec *ex) { ex->nsc = 0; }

/* a LayerNorm backward's cost with its copy's bytes (dxh [n], NULL: none) */
static tf_op_cost plus_copy(const tf_exec *ex, tf_op_cost c, const void *dxh, long n) {
    if (dxh) c.bytes += (double)n * (double)tf_dtype_size(ex->at);
    return c;
}

#define TF_SPANS(...) \
    ((const tf_span[]){__VA_ARGS__}), (int)(sizeof((const tf_span[]){__VA_ARGS__}) / sizeof(tf_span))
/* An op about to be issued on the main queue: its writes W and reads R
 * (TF_SPANS lists). One branch while nothing is on the lane; the writes
 * drop the stream copies' records they touch (planning too: the arena's
 * plan follows which stream gradients are converted). */
#define TF_ACCESS(ex, W, R)                                       \
    do {                                                          \
        if ((ex)->grad_hi) grad_note((ex), W);                    \
        if ((ex)->nsc) sc_written((ex), W);                       \
        if ((ex)->lane.n && !(ex)->planning) main_op((ex), W, R); \
    } while (0)
#define F(p, n) tf_span_f((p), (size_t)(n))
/* n elements of type t, or of the activation type */
#define T(p, n, t) tf_span_b((p), (size_t)(n) * tf_dtype_size(t))
#define A(p, n) T((p), (n), (ex)->at)
/* an op's analytic cost with its bytes in elements of the activation type */
static tf_op_cost at_bytes(const tf_exec *ex, tf_op_cost c) {
    c.bytes *= (double)tf_dtype_size(ex->at) / sizeof(float);
    return c;
}

void tf_x_lane_join(tf_exec *ex) {
    if (ex->lane.n && !ex->planning) lane_wait(ex, ex->lane.n);
}

void tf_x_stage_end(tf_exec *ex) {
    if (!ex->planning && ex->stage_end) ex->stage_end(ex->stage_ctx, ex->bwd_stage);
    ex->bwd_stage++;
}

void tf_x_grads_final(tf_exec *ex, const float *p, size_t n) {
    tf_span s = F(p, n);
    if (ex->lane.n && !ex->planning) main_op(ex, &s, 1, &s, 1);
}

long tf_x_lane_ticket(const tf_exec *ex, const float *p, size_t n) {
    if (!ex->lane.n || ex->planning) return 0;
    tf_span s = F(p, n);
    const int i = lane_conflict(ex, &s, 1, &s, 1);
    return i < 0 ? 0 : ex->lane.q[i].ticket;
}

/* a [rows, cols] matrix of es-byte elements with leading dimension ld, batch
 * of them stride apart */
static tf_span mat(const void *p, size_t es, long rows, long cols, long ld, int batch,
                   long stride) {
    if (!p || rows <= 0 || cols <= 0) return (tf_span){0, 0};
    long n = (rows - 1) * ld + cols + (batch > 1 ? (long)(batch - 1) * stride : 0);
    const uintptr_t lo = (uintptr_t)p;
    return (tf_span){lo, lo + (size_t)n * es};
}

/* r: A, B, R (or C where beta reads it), aux; w: C */
static void gemm_spans(const tf_gemm_args *a, tf_span r[4], tf_span *w) {
    const size_t eab = tf_dtype_size(a->ab_type), ec = tf_dtype_size(a->c_type);
    r[0] = mat(a->A, eab, a->transA ? a->K : a->M, a->transA ? a->M : a->K, a->lda, a->batch,
               a->strideA);
    r[1] = mat(a->B, eab, a->transB ? a->N : a->K, a->transB ? a->K : a->N, a->ldb, a->batch,
               a->strideB);
    *w = mat(a->C, ec, a->M, a->N, a->ldc, a->batch, a->strideC);
    r[2] = a->R ? mat(a->R, ec, a->M, a->N, a->ldc, a->batch, a->strideC)
           : a->beta != 0.0f ? *w
                             : (tf_span){0, 0};
    r[3] = mat(a->aux, ec, a->M, a->N, a->ldc, a->batch, a->strideC);
}

static const char *gemm_kname(const tf_gemm_args *a) {
    static const char *names[2][2][2] = {
        {{"sgemm_nn", "sgemm_nt"}, {"sgemm_tn", "sgemm_tt"}},
        {{"sgemm_nn_batched", "sgemm_nt_batched"}, {"sgemm_tn_batched", "sgemm_tt_batched"}}};
    return names[a->batch > 1][a->transA != 0][a->transB != 0];
}

void tf_gemm(tf_exec *ex, const tf_gemm_args *a, const char *name) {
    tf_span r[4], w;
    if (ex->grad_hi || ex->nsc) {
        gemm_spans(a, r, &w);
        if (ex->grad_hi) grad_note(ex, &w, 1);
        if (ex->nsc) sc_written(ex, &w, 1);
    }
    if (ex->planning) return;
    const int lane = a->wgrad && ex->wgrad_async;
    if (lane || ex->lane.n) gemm_spans(a, r, &w);
    if (!lane && ex->lane.n) main_op(ex, &w, 1, r, 4);
    TF_EXEC_OPC(ex, gemm_kname(a), tf_cost_gemm(a), gemm(ex->be, a, name));
    if (lane) { /* pending on the lane until a wait covers it */
        tf_lane *l = &ex->lane;
        if (l->n == TF_LANE_PENDING) lane_wait(ex, l->n);
        tf_lane_gemm *g = &l->q[l->n++];
        g->ticket = ex->ops->wgrad_mark(ex->be);
        g->module = ex->bwd_module;
        memcpy(g->r, r, sizeof g->r);
        g->w = w;
    }
}

tf_gemm_args tf_gemm_make(const tf_exec *ex, int tA, int tB, int M, int N, int K, float alpha,
                          float beta, const void *A, long lda, long sA, const void *B, long ldb,
                          long sB, void *C, long ldc, long sC, int batch) {
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
    g.ab_type = ex->at;
    g.c_type = ex->at;
    return g;
}

const void *tf_x_w(const tf_exec *ex, const float *W) {
    if (!W || ex->at == TF_F32) return W;
    return (const char *)ex->wh + (W - ex->w_base) * (long)tf_dtype_size(ex->at);
}

static void linear_fwd(tf_exec *ex, void *y, tf_dtype yt, const void *x, const float *W,
                       long rows, int in, int out, float beta, tf_epilogue epi, const float *res) {
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
    g.B = tf_x_w(ex, W);
    g.ldb = in;
    g.C = y;
    g.ldc = out;
    g.batch = 1;
    g.epilogue = epi;
    g.R = res;
    g.ab_type = ex->at;
    g.c_type = yt;
    tf_gemm(ex, &g, "linear_fwd");
}

void tf_linear_fwd(tf_exec *ex, void *y, const void *x, const float *W, long rows, int in,
                   int out, float beta, tf_epilogue epi) {
    linear_fwd(ex, y, ex->at, x, W, rows, in, out, beta, epi, NULL);
}

void tf_linear_fwd_res(tf_exec *ex, float *y, const void *x, const float *W, long rows, int in,
                       int out, float beta, tf_epilogue epi, const float *res) {
    linear_fwd(ex, y, TF_F32, x, W, rows, in, out, beta, epi, res);
}

void tf_linear_bwd(tf_exec *ex, void *dx, float *dW, const void *dy, const void *x,
                   const float *W, long rows, int in, int out, int accumulate) {
    tf_linear_bwd_epi(ex, dx, dW, dy, x, W, rows, in, out, accumulate, TF_EPI_NONE, NULL);
}

void tf_linear_bwd_epi(tf_exec *ex, void *dx, float *dW, const void *dy, const void *x,
                       const float *W, long rows, int in, int out, int accumulate,
                       tf_epilogue epi, const void *aux) {
    if (dx) { /* dx[rows,in] = dy[rows,out] W[out,in] */
        tf_gemm_args g = {0};
        g.M = (int)rows;
        g.N = in;
        g.K = out;
        g.alpha = 1.0f;
        g.beta = accumulate ? 1.0f : 0.0f;
        g.A = dy;
        g.lda = out;
        g.B = tf_x_w(ex, W);
        g.ldb = in;
        g.C = dx;
        g.ldc = in;
        g.batch = 1;
        g.epilogue = epi;
        g.aux = aux;
        g.ab_type = ex->at;
        g.c_type = ex->at;
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
    g.ab_type = ex->at;
    g.c_type = TF_F32;
    tf_gemm(ex, &g, "linear_bwd_weight");
}

void tf_x_layernorm_fwd(tf_exec *ex, void *out, float *mean, float *rstd, const void *x,
                        tf_dtype xt, const float *g, const float *b, long rows, int C) {
    TF_ACCESS(ex, TF_SPANS(A(out, rows * C), F(mean, rows), F(rstd, rows)),
              TF_SPANS(T(x, rows * C, xt), F(g, C), F(b, C)));
    TF_EXEC_OPC(ex, "layernorm_fwd", tf_cost_layernorm_fwd(rows, C),
                layernorm_fwd(ex->be, out, mean, rstd, x, g, b, rows, C, 1e-5f, xt, ex->at));
}

void tf_x_layernorm_bwd(tf_exec *ex, void *dx, tf_dtype xt, float *dg, float *db,
                        const void *dout, const void *x, const float *mean, const float *rstd,
                        const float *g, long rows, int C, int accumulate) {
    tf_stream_copy *s = NULL;
    void *dxh = sc_dest(ex, dx, xt, rows * C, &s);
    TF_ACCESS(ex, TF_SPANS(T(dx, rows * C, xt), A(dxh, rows * C), F(dg, C), F(db, C)),
              TF_SPANS(A(dout, rows * C), T(x, rows * C, xt), F(mean, rows), F(rstd, rows),
                       F(g, C), T(accumulate ? dx : NULL, rows * C, xt), F(dg, C), F(db, C)));
    TF_EXEC_OPC(ex, "layernorm_bwd",
                plus_copy(ex, tf_cost_layernorm_bwd(rows, C, accumulate), dxh, rows * C),
                layernorm_bwd(ex->be, dx, dxh, dg, db, dout, x, mean, rstd, g, rows, C,
                              accumulate, xt, ex->at));
    if (dxh) sc_record(ex, s, dx, rows * C);
}

void tf_x_layernorm2_fwd(tf_exec *ex, void *out, float *stats, const float *x, const float *g1,
                         const float *b1, const float *g2, const float *b2, long rows, int C) {
    TF_ACCESS(ex, TF_SPANS(A(out, rows * C), F(stats, 4 * rows)),
              TF_SPANS(F(x, rows * C), F(g1, C), F(b1, C), F(g2, C), F(b2, C)));
    TF_EXEC_OPC(ex, "layernorm2_fwd", tf_cost_layernorm2_fwd(rows, C),
                layernorm2_fwd(ex->be, out, stats, x, g1, b1, g2, b2, rows, C, 1e-5f, TF_F32,
                               ex->at));
}

void tf_x_layernorm2_bwd(tf_exec *ex, float *dx, float *dg1, float *db1, float *dg2, float *db2,
                         const void *dout, const float *x, const float *stats, const float *g1,
                         const float *b1, const float *g2, long rows, int C, int accumulate) {
    tf_stream_copy *s = NULL;
    void *dxh = sc_dest(ex, dx, TF_F32, rows * C, &s);
    TF_ACCESS(ex,
              TF_SPANS(F(dx, rows * C), A(dxh, rows * C), F(dg1, C), F(db1, C), F(dg2, C),
                       F(db2, C)),
              TF_SPANS(A(dout, rows * C), F(x, rows * C), F(stats, 4 * rows), F(g1, C), F(b1, C),
                       F(g2, C), F(accumulate ? dx : NULL, rows * C)));
    TF_EXEC_OPC(ex, "layernorm2_bwd",
                plus_copy(ex, tf_cost_layernorm2_bwd(rows, C, accumulate), dxh, rows * C),
                layernorm2_bwd(ex->be, dx, dxh, dg1, db1, dg2, db2, dout, x, stats, g1, b1, g2,
                               rows, C, accumulate, TF_F32, ex->at));
    if (dxh) sc_record(ex, s, dx, rows * C);
}

static long perm_count(const tf_permute_args *a) {
    long n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

void tf_x_permute(tf_exec *ex, void *out, const void *in, int rank, const int *dims,
                  const int *perm, int accumulate) {
    tf_permute_args a = {0};
    long n = 1;
    a.rank = rank;
    for (int i = 0; i < rank; i++) {
        a.dims[i] = dims[i];
        a.perm[i] = perm[i];
        n *= dims[i];
    }
    a.accumulate = accumulate;
    a.t = ex->at;
    TF_ACCESS(ex, TF_SPANS(A(out, n)), TF_SPANS(A(in, n), A(accumulate ? out : NULL, n)));
    TF_EXEC_OPC(ex, "permute", at_bytes(ex, tf_cost_permute(perm_count(&a), accumulate)),
                permute(ex->be, out, in, &a));
}

void tf_x_copy(tf_exec *ex, float *dst, const float *src, size_t n) {
    TF_ACCESS(ex, TF_SPANS(F(dst, n)), TF_SPANS(F(src, n)));
    TF_EXEC_OPC(ex, "copy", tf_cost_elementwise((long)n, 1, 1, 0.0), copy(ex->be, dst, src, n * sizeof(float)));
}
void tf_x_copy_rows(tf_exec *ex, void *dst, long dst_ld, const void *src, long src_ld, long cols,
                    long rows) {
    /* the spans from the first row's start to the last row's end */
    const size_t nd = rows ? (size_t)((rows - 1) * dst_ld + cols) : 0;
    const size_t ns = rows ? (size_t)((rows - 1) * src_ld + cols) : 0;
    TF_ACCESS(ex, TF_SPANS(A(dst, nd)), TF_SPANS(A(src, ns)));
    TF_EXEC_OPC(ex, "copy_rows", at_bytes(ex, tf_cost_elementwise(rows * cols, 1, 1, 0.0)),
                copy_rows(ex->be, dst, dst_ld, src, src_ld, cols, rows, ex->at));
}
void tf_x_convert(tf_exec *ex, void *dst, tf_dtype dt, const void *src, tf_dtype st, long n) {
    TF_ACCESS(ex, TF_SPANS(T(dst, n, dt)), TF_SPANS(T(src, n, st)));
    tf_op_cost c = tf_cost_elementwise(n, 1, 1, 0.0);
    c.bytes = (double)n * (double)(tf_dtype_size(dt) + tf_dtype_size(st));
    TF_EXEC_OPC(ex, "convert", c, convert(ex->be, dst, dt, src, st, n));
}
void tf_x_pair_bias_fwd(tf_exec *ex, void *bias, const float *z, const float *W, long rows, int C,
                        int H) {
    TF_ACCESS(ex, TF_SPANS(A(bias, (long)H * rows)), TF_SPANS(F(z, rows * C), F(W, (long)H * C)));
    TF_EXEC_OPC(ex, "pair_bias_fwd", tf_cost_pair_bias_fwd(rows, C, H, tf_dtype_size(ex->at)),
                pair_bias_fwd(ex->be, bias, z, W, rows, C, H, ex->at));
}
void tf_x_pair_bias_bwd(tf_exec *ex, float *dz, float *db32, const void *dbias, const float *W,
                        long rows, int C, int H) {
    tf_stream_copy *s = NULL;
    void *dzh = sc_dest(ex, dz, TF_F32, rows * C, &s);
    const long nb = (long)H * rows;
    TF_ACCESS(ex, TF_SPANS(F(dz, rows * C), A(dzh, rows * C), F(db32, nb)),
              TF_SPANS(F(dz, rows * C), A(dbias, nb), F(W, (long)H * C)));
    TF_EXEC_OPC(ex, "pair_bias_bwd",
                plus_copy(ex, tf_cost_pair_bias_bwd(rows, C, H, tf_dtype_size(ex->at), db32 != NULL),
                          dzh, rows * C),
                pair_bias_bwd(ex->be, dz, dzh, db32, dbias, W, rows, C, H, ex->at));
    if (dzh) sc_record(ex, s, dz, rows * C);
}
const void *tf_x_stream_grad(tf_exec *ex, const float *dz, long n) {
    if (ex->at == TF_F32) return dz;
    const void *copy = sc_find(ex, dz, n);
    if (copy) return copy;
    void *h = tf_alloc_at(ex, (size_t)n);
    tf_x_convert(ex, h, ex->at, dz, TF_F32, n);
    return h;
}
void tf_x_check_finite(tf_exec *ex, float *flag, const float *x, long n) {
    TF_ACCESS(ex, TF_SPANS(F(flag, 1)), TF_SPANS(F(x, n), F(flag, 1)));
    TF_EXEC_OPC(ex, "check_finite", tf_cost_elementwise(n, 1, 0, 1.0),
                check_finite(ex->be, flag, x, n));
}
void tf_x_zero(tf_exec *ex, float *p, size_t n) {
    TF_ACCESS(ex, TF_SPANS(F(p, n)), TF_SPANS(F(NULL, 0)));
    TF_EXEC_OPC(ex, "zero", tf_cost_elementwise((long)n, 0, 1, 0.0), zero(ex->be, p, n * sizeof(float)));
}
void tf_x_zero_at(tf_exec *ex, void *p, size_t n) {
    TF_ACCESS(ex, TF_SPANS(A(p, n)), TF_SPANS(F(NULL, 0)));
    TF_EXEC_OPC(ex, "zero", at_bytes(ex, tf_cost_elementwise((long)n, 0, 1, 0.0)),
                zero(ex->be, p, n * tf_dtype_size(ex->at)));
}
void tf_x_add(tf_exec *ex, float *y, const float *a, const float *b, long n) {
    TF_ACCESS(ex, TF_SPANS(F(y, n)), TF_SPANS(F(a, n), F(b, n)));
    TF_EXEC_OPC(ex, "add", tf_cost_elementwise(n, 2, 1, 1.0), add(ex->be, y, a, b, n, TF_F32));
}
void tf_x_mul(tf_exec *ex, void *y, const void *a, const void *b, long n) {
    TF_ACCESS(ex, TF_SPANS(A(y, n)), TF_SPANS(A(a, n), A(b, n)));
    TF_EXEC_OPC(ex, "mul", at_bytes(ex, tf_cost_elementwise(n, 2, 1, 1.0)),
                mul(ex->be, y, a, b, n, ex->at));
}
void tf_x_scale(tf_exec *ex, void *y, const void *x, float alpha, long n) {
    TF_ACCESS(ex, TF_SPANS(A(y, n)), TF_SPANS(A(x, n)));
    TF_EXEC_OPC(ex, "scale", at_bytes(ex, tf_cost_elementwise(n, 1, 1, 1.0)),
                scale(ex->be, y, x, alpha, n, ex->at));
}
void tf_x_act_fwd(tf_exec *ex, tf_act act, void *y, const void *x, long n) {
    TF_ACCESS(ex, TF_SPANS(A(y, n)), TF_SPANS(A(x, n)));
    TF_EXEC_OPC(ex, act == TF_ACT_RELU ? "relu_fwd" : "sigmoid_fwd",
                at_bytes(ex, tf_cost_elementwise(n, 1, 1,
                                                 act == TF_ACT_RELU ? 1.0 : TF_FLOPS_SIGMOID)),
                act_fwd(ex->be, act, y, x, n, ex->at));
}
void tf_x_act_bwd(tf_exec *ex, tf_act act, void *dx, const void *dy, const void *y, long n) {
    TF_ACCESS(ex, TF_SPANS(A(dx, n)), TF_SPANS(A(dy, n), A(y, n)));
    TF_EXEC_OPC(ex, act == TF_ACT_RELU ? "relu_bwd" : "sigmoid_bwd",
                at_bytes(ex, tf_cost_elementwise(n, 2, 1, act == TF_ACT_RELU ? 1.0 : 3.0)),
                act_bwd(ex->be, act, dx, dy, y, n, ex->at));
}
void tf_x_softmax_fwd(tf_exec *ex, void *y, const void *x, long rows, int cols) {
    TF_ACCESS(ex, TF_SPANS(A(y, rows * cols)), TF_SPANS(A(x, rows * cols)));
    TF_EXEC_OPC(ex, "softmax_fwd", at_bytes(ex, tf_cost_softmax_fwd(rows, cols)),
                softmax_fwd(ex->be, y, x, rows, cols, ex->at));
}
void tf_x_softmax_bwd(tf_exec *ex, void *dx, const void *dy, const void *y, long rows, int cols) {
    TF_ACCESS(ex, TF_SPANS(A(dx, rows * cols)), TF_SPANS(A(dy, rows * cols), A(y, rows * cols)));
    TF_EXEC_OPC(ex, "softmax_bwd", at_bytes(ex, tf_cost_softmax_bwd(rows, cols)),
                softmax_bwd(ex->be, dx, dy, y, rows, cols, ex->at));
}
void tf_x_gate_fwd(tf_exec *ex, void *y, const void *a, const void *g, long n) {
    TF_ACCESS(ex, TF_SPANS(A(y, n)), TF_SPANS(A(a, n), A(g, n)));
    TF_EXEC_OPC(ex, "gate_fwd", at_bytes(ex, tf_cost_elementwise(n, 2, 1, TF_FLOPS_GATE_FWD)),
                gate_fwd(ex->be, y, a, g, n, ex->at));
}
void tf_x_gate_bwd(tf_exec *ex, void *da, void *dg, const void *dy, const void *a, const void *g,
                   long n) {
    TF_ACCESS(ex, TF_SPANS(A(da, n), A(dg, n)), TF_SPANS(A(dy, n), A(a, n), A(g, n)));
    TF_EXEC_OPC(ex, "gate_bwd", at_bytes(ex, tf_cost_elementwise(n, 3, 2, TF_FLOPS_GATE_BWD)),
                gate_bwd(ex->be, da, dg, dy, a, g, n, ex->at));
}
void tf_x_gate_residual_fwd(tf_exec *ex, float *out, const float *res, const void *a,
                            const void *g, long n) {
    TF_ACCESS(ex, TF_SPANS(F(out, n)), TF_SPANS(F(res, n), A(a, n), A(g, n)));
    TF_EXEC_OPC(ex, "gate_residual_fwd", tf_cost_elementwise(n, 3, 1, TF_FLOPS_GATE_RES),
                gate_residual_fwd(ex->be, out, res, a, g, n, ex->at));
}
/* the rows of a, g (and da, dg) are ld apart, 2C wide */
void tf_x_gate_cmajor_fwd(tf_exec *ex, void *lr_t, const void *a, const void *g, long ld,
                          long rows, long inner, int C) {
    const long n = (rows - 1) * ld + 2 * C;
    TF_ACCESS(ex, TF_SPANS(A(lr_t, 2 * rows * C)), TF_SPANS(A(a, n), A(g, n)));
    TF_EXEC_OPC(ex, "gate_cmajor_fwd",
                at_bytes(ex, tf_cost_elementwise(2 * rows * C, 2, 1, TF_FLOPS_GATE_FWD)),
                gate_cmajor_fwd(ex->be, lr_t, a, g, ld, rows, inner, C, ex->at));
}
void tf_x_gate_cmajor_bwd(tf_exec *ex, void *da, void *dg, const void *dlr_t, const void *a,
                          const void *g, long ld, long rows, long inner, int C) {
    const long n = (rows - 1) * ld + 2 * C;
    TF_ACCESS(ex, TF_SPANS(A(da, n), A(dg, n)),
              TF_SPANS(A(dlr_t, 2 * rows * C), A(a, n), A(g, n)));
    TF_EXEC_OPC(ex, "gate_cmajor_bwd",
                at_bytes(ex, tf_cost_elementwise(2 * rows * C, 3, 2, TF_FLOPS_GATE_BWD)),
                gate_cmajor_bwd(ex->be, da, dg, dlr_t, a, g, ld, rows, inner, C, ex->at));
}
void tf_x_opm_outer(tf_exec *ex, void *outer_p, const void *a, int B, int S, int N, int co) {
    TF_ACCESS(ex, TF_SPANS(A(outer_p, (long)B * N * N * co * co)),
              TF_SPANS(A(a, (long)B * S * N * co)));
    TF_EXEC_OPC(ex, "opm_outer", at_bytes(ex, tf_cost_opm_outer(B, S, N, co)),
                opm_outer(ex->be, outer_p, a, B, S, N, co, ex->at));
}
void tf_x_opm_bwd(tf_exec *ex, void *da, const void *dop, const void *a, int B, int S, int N,
                  int co) {
    TF_ACCESS(ex, TF_SPANS(A(da, (long)B * S * N * co)),
              TF_SPANS(A(dop, (long)B * N * N * co * co), A(a, (long)B * S * N * co)));
    TF_EXEC_OPC(ex, "opm_bwd", at_bytes(ex, tf_cost_opm_bwd(B, S, N, co)),
                opm_bwd(ex->be, da, dop, a, B, S, N, co, ex->at));
}
void tf_x_opm_fwd(tf_exec *ex, float *z_out, const float *z_in, const void *a, const float *W,
                  int B, int S, int N, int co, int cz) {
    const long nz = (long)B * N * N * cz;
    TF_ACCESS(ex, TF_SPANS(F(z_out, nz)),
              TF_SPANS(F(z_in, nz), A(a, (long)B * S * N * co), A(tf_x_w(ex, W), (long)cz * co * co)));
    TF_EXEC_OPC(ex, "opm_fwd", tf_cost_opm_fwd(B, S, N, co, cz, (int)tf_dtype_size(ex->at)),
                opm_fwd(ex->be, z_out, z_in, a, tf_x_w(ex, W), B, S, N, co, cz, ex->at));
}
/* the elements a channel-major tensor of nch channels, rows of them at
 * channel stride ldt, spans */
static long cmajor_span(long rows, long ldt, int nch) { return (nch - 1) * ldt + rows; }
void tf_x_trimul_proj_fwd(tf_exec *ex, void *lr_t, void *og, void *y, float *stats,
                          const float *x, const float *g1, const float *b1, const float *g2,
                          const float *b2, const float *W4, const float *Wog, long rows, long ldt,
                          int C) {
    const long n = rows * C, nw = (long)C * C;
    TF_ACCESS(ex,
              TF_SPANS(A(lr_t, cmajor_span(rows, ldt, 2 * C)), A(og, n), A(y, n),
                       F(stats, 4 * rows)),
              TF_SPANS(F(x, n), F(g1, C), F(b1, C), F(g2, C), F(b2, C), A(tf_x_w(ex, W4), 4 * nw),
                       A(tf_x_w(ex, Wog), nw)));
    TF_EXEC_OPC(ex, "trimul_proj_fwd", tf_cost_trimul_proj(rows, C, 0, (int)tf_dtype_size(ex->at)),
                trimul_proj_fwd(ex->be, lr_t, og, y, stats, x, g1, b1, g2, b2, 1e-5f,
                                tf_x_w(ex, W4), tf_x_w(ex, Wog), rows, ldt, C, ex->at));
}
void tf_x_trimul_proj_bwd(tf_exec *ex, void *dproj, const void *dlr_t, const void *y,
                          const float *W4, long rows, long ldt, int C) {
    const long n = rows * C, nw = (long)C * C;
    TF_ACCESS(ex, TF_SPANS(A(dproj, 4 * n)),
              TF_SPANS(A(dlr_t, cmajor_span(rows, ldt, 2 * C)), A(y, n),
                       A(tf_x_w(ex, W4), 4 * nw)));
    TF_EXEC_OPC(ex, "trimul_proj_bwd", tf_cost_trimul_proj(rows, C, 1, (int)tf_dtype_size(ex->at)),
                trimul_proj_bwd(ex->be, dproj, dlr_t, y, tf_x_w(ex, W4), rows, ldt, C, ex->at));
}
void tf_x_trimul_out_fwd(tf_exec *ex, float *z_out, const float *z_in, const void *u_t,
                         const float *Wo, const void *og, long rows, long ldt, int C) {
    const long n = rows * C;
    TF_ACCESS(ex, TF_SPANS(F(z_out, n)),
              TF_SPANS(F(z_in, n), A(u_t, cmajor_span(rows, ldt, C)),
                       A(tf_x_w(ex, Wo), (long)C * C), A(og, n)));
    TF_EXEC_OPC(ex, "trimul_out_fwd", tf_cost_trimul_out(rows, C, 0, (int)tf_dtype_size(ex->at)),
                trimul_out_fwd(ex->be, z_out, z_in, u_t, tf_x_w(ex, Wo), og, rows, ldt, C,
                               ex->at));
}
void tf_x_trimul_out_bwd(tf_exec *ex, void *dout, void *dog, void *du, const float *dz,
                         const void *u_t, const float *Wo, const void *og, long rows, long ldt,
                         int C) {
    const long n = rows * C, nt = cmajor_span(rows, ldt, C);
    TF_ACCESS(ex, TF_SPANS(A(dout, n), A(dog, n), A(du, du ? nt : 0)),
              TF_SPANS(F(dz, n), A(u_t, nt), A(tf_x_w(ex, Wo), (long)C * C), A(og, n)));
    TF_EXEC_OPC(ex, "trimul_out_bwd", tf_cost_trimul_out(rows, C, 1, (int)tf_dtype_size(ex->at)),
                trimul_out_bwd(ex->be, dout, dog, du, dz, u_t, tf_x_w(ex, Wo), og, rows, ldt, C,
                               ex->at));
}
void tf_x_opm_bwd_dz(tf_exec *ex, void *da, float *dW, const void *dz, const void *a,
                     const float *W, int B, int S, int N, int co, int cz) {
    const long na = (long)B * S * N * co, nw = (long)cz * co * co;
    TF_ACCESS(ex, TF_SPANS(A(da, na), F(dW, nw)),
              TF_SPANS(F(dW, nw), A(dz, (long)B * N * N * cz), A(a, na), A(tf_x_w(ex, W), nw)));
    TF_EXEC_OPC(ex, "opm_bwd_dz", tf_cost_opm_bwd_dz(B, S, N, co, cz, (int)tf_dtype_size(ex->at)),
                opm_bwd_dz(ex->be, da, dW, dz, a, tf_x_w(ex, W), B, S, N, co, cz, ex->at));
}
void tf_x_transition_fwd(tf_exec *ex, float *x_out, float *mean, float *rstd, const float *x,
                         const float *g, const float *b, const float *W1, const float *W2,
                         long rows, int C) {
    const long n = rows * C, nw = 4L * C * C;
    TF_ACCESS(ex, TF_SPANS(F(x_out, x_out ? n : 0), F(mean, rows), F(rstd, rows)),
              TF_SPANS(F(x, n), F(g, C), F(b, C), A(tf_x_w(ex, W1), nw), A(tf_x_w(ex, W2), nw)));
    TF_EXEC_OPC(ex, "transition_fwd",
                tf_cost_transition_fwd(rows, C, (int)tf_dtype_size(ex->at)),
                transition_fwd(ex->be, x_out, mean, rstd, x, g, b, tf_x_w(ex, W1), tf_x_w(ex, W2),
                               rows, C, 1e-5f, ex->at));
}
void tf_x_transition_bwd(tf_exec *ex, float *dx, float *dg, float *db, void *xn, void *h,
                         void *dh, const void *dy, const float *x, const float *mean,
                         const float *rstd, const float *g, const float *b, const float *W1,
                         const float *W2, long rows, int C) {
    const long n = rows * C, nw = 4L * C * C;
    TF_ACCESS(ex,
              TF_SPANS(F(dx, n), F(dg, C), F(db, C), A(xn, n), A(h, 4 * n), A(dh, 4 * n)),
              TF_SPANS(F(dx, n), F(dg, C), F(db, C), A(dy, n), F(x, n), F(mean, rows),
                       F(rstd, rows), F(g, C), F(b, C), A(tf_x_w(ex, W1), nw),
                       A(tf_x_w(ex, W2), nw)));
    TF_EXEC_OPC(ex, "transition_bwd",
                tf_cost_transition_bwd(rows, C, (int)tf_dtype_size(ex->at)),
                transition_bwd(ex->be, dx, dg, db, xn, h, dh, dy, x, mean, rstd, g, b,
                               tf_x_w(ex, W1), tf_x_w(ex, W2), rows, C, ex->at));
}
void tf_x_add_bcast_mid(tf_exec *ex, void *y, const void *x, long outer, long mid, long inner) {
    TF_ACCESS(ex, TF_SPANS(A(y, outer * mid * inner)),
              TF_SPANS(A(y, outer * mid * inner), A(x, outer * inner)));
    TF_EXEC_OPC(ex, "add_bcast", at_bytes(ex, tf_cost_add_bcast_mid(outer, mid, inner)),
                add_bcast_mid(ex->be, y, x, outer, mid, inner, ex->at));
}
void tf_x_sum_mid(tf_exec *ex, void *y, const void *x, long outer, long mid, long inner,
                  int accumulate, tf_dtype t) {
    TF_ACCESS(ex, TF_SPANS(T(y, outer * inner, t)),
              TF_SPANS(T(x, outer * mid * inner, t), T(accumulate ? y : NULL, outer * inner, t)));
    tf_op_cost c = tf_cost_sum_mid(outer, mid, inner, accumulate);
    c.bytes *= (double)tf_dtype_size(t) / sizeof(float);
    TF_EXEC_OPC(ex, "sum_reduce", c, sum_mid(ex->be, y, x, outer, mid, inner, accumulate, t));
}

/* an attention operand view (ops.h tf_attn_view), elements of type a->t */
static tf_span view_span(const tf_attn_view *v, const tf_attn_args *a) {
    if (!v->p) return (tf_span){0, 0};
    long n = (long)(a->nb - 1) * v->sb + (long)(a->no - 1) * v->so + (long)(a->L - 1) * v->sl +
             (long)a->nh * a->d;
    return T(v->p, n, a->t);
}
static tf_span bias_span(const void *p, const tf_attn_args *a) {
    if (!p) return (tf_span){0, 0};
    long n = (long)(a->nb - 1) * a->bias_sb + (long)(a->nh - 1) * a->bias_sh +
             (long)(a->L - 1) * (a->bias_si + a->bias_sj) + 1;
    return T(p, n, a->t);
}
void tf_x_attn_fwd(tf_exec *ex, const tf_attn_args *a) {
    const long nl = (long)a->nb * a->no * a->nh * a->L;
    TF_ACCESS(ex, TF_SPANS(view_span(&a->out, a), F(a->lse, nl)),
              TF_SPANS(view_span(&a->q, a), view_span(&a->k, a), view_span(&a->v, a),
                       bias_span(a->bias, a)));
    TF_EXEC_OPC(ex, "attn_fwd_flash", tf_cost_attn_fwd(a), attn_fwd(ex->be, a));
}
void tf_x_attn_bwd(tf_exec *ex, const tf_attn_args *a) {
    const long nl = (long)a->nb * a->no * a->nh * a->L;
    TF_ACCESS(ex,
              TF_SPANS(view_span(&a->dq, a), view_span(&a->dk, a), view_span(&a->dv, a),
                       bias_span(a->dbias, a), F(a->work, nl)),
              TF_SPANS(view_span(&a->q, a), view_span(&a->k, a), view_span(&a->v, a),
                       view_span(&a->out, a), view_span(&a->dout, a), bias_span(a->bias, a),
                       F(a->lse, nl)));
    TF_EXEC_OPC(ex, "attn_bwd_flash", tf_cost_attn_bwd(a), attn_bwd(ex->be, a));
}

void tf_x_embed_fwd(tf_exec *ex, float *out, const float *table, const int32_t *tok, long n,
                    int C, int vocab) {
    TF_ACCESS(ex, TF_SPANS(F(out, n * C)), TF_SPANS(F(table, (long)vocab * C), F(tok, n)));
    TF_EXEC_OPC(ex, "embedding_fwd", tf_cost_embed_fwd(n, C),
                embed_fwd(ex->be, out, table, tok, n, C, vocab));
}
void tf_x_embed_bwd(tf_exec *ex, float *dtable, const float *dout, const int32_t *tok, long n,
                    int C, int vocab) {
    TF_ACCESS(ex, TF_SPANS(F(dtable, (long)vocab * C)),
              TF_SPANS(F(dtable, (long)vocab * C), F(dout, n * C), F(tok, n)));
    TF_EXEC_OPC(ex, "embedding_bwd", tf_cost_embed_bwd(n, C, vocab),
                embed_bwd(ex->be, dtable, dout, tok, n, C, vocab));
}
void tf_x_mse_head_fwd(tf_exec *ex, float *pred, float *loss, const float *logit,
                       const float *target, long n, float dmax) {
    TF_ACCESS(ex, TF_SPANS(F(pred, n), F(loss, 1)), TF_SPANS(F(logit, n), F(target, n)));
    TF_EXEC_OPC(ex, "mse_head_fwd", tf_cost_mse_head_fwd(n), mse_head_fwd(ex->be, pred, loss, logit, target, n, dmax));
}
void tf_x_mse_head_bwd(tf_exec *ex, float *dlogit, const float *pred, const float *target, long n,
                       float dmax, const float *loss_scale) {
    TF_ACCESS(ex, TF_SPANS(F(dlogit, n)), TF_SPANS(F(pred, n), F(target, n), F(loss_scale, 1)));
    TF_EXEC_OPC(ex, "mse_head_bwd", tf_cost_mse_head_bwd(n),
                mse_head_bwd(ex->be, dlogit, pred, target, n, dmax, loss_scale));
}
void tf_x_adamw(tf_exec *ex, float *p, void *ph, const float *g, float *m, float *v, long n,
                const float *hyper) {
    TF_ACCESS(ex, TF_SPANS(F(p, n), A(ph, n), F(m, n), F(v, n)),
              TF_SPANS(F(p, n), F(m, n), F(v, n), F(g, n), F(hyper, TF_HYPER_COUNT)));
    tf_op_cost c = tf_cost_adamw(n);
    if (ph) c.bytes += (double)n * (double)tf_dtype_size(ex->at);
    TF_EXEC_OPC(ex, "adamw", c, adamw(ex->be, p, ph, g, m, v, n, hyper, ex->at));
}
