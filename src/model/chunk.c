/* --chunk-size K: the pair modules run K rows of the pair tensor at a time,
 * so that their activations and temporaries are those of one chunk. A chunk
 * is one sample's rows i0 .. i0 + ni; the whole pair is one slab of every
 * sample's rows. tf_chunk_run is the one driver: a module writes its body
 * once, as a function of a slab of rows, and the driver runs it over the
 * chunks, or once over the whole pair.
 *
 * The modules whose math is independent per row (the starting node's
 * attention, the pair transition) or per column (the ending node's) chunk
 * here (tf_chunked_pair_fwd/_bwd); the ending node's chunks are rows of the
 * transposed pair (one permute each way: two pair-sized buffers, which is
 * less than the triangle multiplication keeps). They keep nothing for the
 * backward but their input: the backward runs each chunk's forward again,
 * then its backward (with --recompute modules that is the recomputation it
 * does anyway). A position's values are the same ops on the same inputs as
 * unchunked; the parameter gradients are summed chunk by chunk (a different
 * order: within fp32 rounding). The outer product mean runs its body through
 * the driver (outer_product.c), and so do the triangle multiplication's
 * chunked stages (triangle_mult_chunk.c: its product stays whole). */
#include "model/model.h"

int tf_chunk_count(const tf_exec *ex, const tf_config *c) {
    return c->batch * ((c->seq_len + ex->chunk - 1) / ex->chunk);
}

tf_chunk tf_chunk_at(const tf_exec *ex, const tf_config *c, int q) {
    const int per = (c->seq_len + ex->chunk - 1) / ex->chunk;
    tf_chunk k;
    k.b = q / per;
    k.nb = 1;
    k.i0 = (q % per) * ex->chunk;
    k.ni = c->seq_len - k.i0 < ex->chunk ? c->seq_len - k.i0 : ex->chunk;
    return k;
}

tf_chunk tf_chunk_whole(const tf_config *c) {
    return (tf_chunk){0, c->batch, 0, c->seq_len};
}

long tf_chunk_first(const tf_config *c, tf_chunk k) {
    return ((long)k.b * c->seq_len + k.i0) * c->seq_len;
}

long tf_chunk_positions(const tf_config *c, tf_chunk k) {
    return (long)k.nb * k.ni * c->seq_len;
}

void tf_chunk_run(tf_exec *ex, const tf_config *c, int chunked, tf_rows_fn fn, void *ctx) {
    const int nk = chunked ? tf_chunk_count(ex, c) : 1;
    for (int q = 0; q < nk; q++) {
        const size_t mark = tf_arena_mark(ex->arena);
        fn(ex, ctx, chunked ? tf_chunk_at(ex, c, q) : tf_chunk_whole(c));
        tf_arena_release(ex->arena, mark);
    }
}

static const int swap_ij[4] = {0, 2, 1, 3}; /* [B,N,N,C]: the pair transposed */

/* One chunk's forward: which 0 starting node, 1 ending node, 2 transition */
static void chunk_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                      tf_triattn_act *ta, tf_transition_act *tr, float *out, const float *in,
                      tf_pair_shape s) {
    const long rows = (long)s.nb * s.nx * s.ny;
    if (which == 2)
        tf_transition_fwd(ex, M, o->pt_w1, o->pt_w2, o->pn_trans, tr, out, in, rows,
                          M->c->pair_dim);
    else
        tf_triattn_fwd_shape(ex, M, o, which, ta, out, in, s);
}

static void chunk_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                      const tf_triattn_act *ta, const tf_transition_act *tr, float *dz,
                      const float *in, tf_pair_shape s) {
    const long rows = (long)s.nb * s.nx * s.ny;
    if (which == 2)
        tf_transition_bwd(ex, M, o->pt_w1, o->pt_w2, o->pn_trans, tr, dz, in, rows,
                          M->c->pair_dim);
    else
        tf_triattn_bwd_shape(ex, M, o, which, ta, dz, in, s);
}

/* out = the stream x [B, N, N, C] (fp32) with i and j swapped */
static void stream_swap(tf_exec *ex, float *out, const float *x, const int *dims) {
    tf_dtype at = tf_exec_fp32_begin(ex);
    tf_x_permute(ex, out, x, 4, dims, swap_ij, 0);
    tf_exec_fp32_end(ex, at);
}

/* A copy of the pair x [B, N, N, C] with i and j swapped (the ending node's
 * rows are the starting node's columns) */
static float *swapped_copy(tf_exec *ex, const float *x, const int *dims, long nc) {
    float *t = tf_alloc_act(ex, (size_t)nc);
    stream_swap(ex, t, x, dims);
    return t;
}

/* A row-local module's arguments: in (and out or d) the pair, or its
 * transpose for the ending node */
typedef struct {
    const tf_model *M;
    const tf_block_off *o;
    int which;
    float *out, *d;
    const float *in;
} pair_rows;

static tf_pair_shape pair_shape(const tf_config *c, const pair_rows *r, tf_chunk k) {
    return (tf_pair_shape){k.nb, k.ni, c->seq_len, r->which == 1};
}

static void pair_rows_fwd(tf_exec *ex, void *ctx, tf_chunk k) {
    const pair_rows *r = ctx;
    const tf_config *c = r->M->c;
    const long off = tf_chunk_first(c, k) * c->pair_dim;
    tf_triattn_act ta;
    tf_transition_act tr;
    chunk_fwd(ex, r->M, r->o, r->which, &ta, &tr, r->out + off, r->in + off, pair_shape(c, r, k));
}

static void pair_rows_bwd(tf_exec *ex, void *ctx, tf_chunk k) {
    const pair_rows *r = ctx;
    const tf_config *c = r->M->c;
    const long off = tf_chunk_first(c, k) * c->pair_dim;
    const tf_pair_shape s = pair_shape(c, r, k);
    tf_triattn_act ta;
    tf_transition_act tr;
    float *scratch = tf_alloc_act(ex, (size_t)tf_chunk_positions(c, k) * c->pair_dim);
    chunk_fwd(ex, r->M, r->o, r->which, &ta, &tr, scratch, r->in + off, s);
    chunk_bwd(ex, r->M, r->o, r->which, &ta, &tr, r->d + off, r->in + off, s);
}

void tf_chunked_pair_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const long N = c->seq_len, C = c->pair_dim, nc = (long)c->batch * N * N * C;
    int dims[4] = {c->batch, (int)N, (int)N, C};
    const size_t mark0 = tf_arena_mark(ex->arena);
    pair_rows r = {M, o, which, z_out, NULL, z_in};
    if (which == 1) { /* the ending node: the starting node's chunks of the transposed pair */
        r.in = swapped_copy(ex, z_in, dims, nc);
        r.out = tf_alloc_act(ex, (size_t)nc);
    }
    tf_chunk_run(ex, c, 1, pair_rows_fwd, &r);
    if (which == 1) stream_swap(ex, z_out, r.out, dims);
    tf_arena_release(ex->arena, mark0);
}

void tf_chunked_pair_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *dz, const float *z_in) {
    const tf_config *c = M->c;
    const long N = c->seq_len, C = c->pair_dim, nc = (long)c->batch * N * N * C;
    int dims[4] = {c->batch, (int)N, (int)N, C};
    const size_t mark0 = tf_arena_mark(ex->arena);
    pair_rows r = {M, o, which, NULL, dz, z_in};
    if (which == 1) {
        r.in = swapped_copy(ex, z_in, dims, nc);
        r.d = swapped_copy(ex, dz, dims, nc);
    }
    tf_chunk_run(ex, c, 1, pair_rows_bwd, &r);
    if (which == 1) stream_swap(ex, dz, r.d, dims); /* r.d holds dz's all */
    tf_arena_release(ex->arena, mark0);
}
