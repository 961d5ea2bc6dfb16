/* --chunk-size K: the pair modules whose math is independent per row (the
 * starting node's attention, the pair transition) or per column (the ending
 * node's) run K rows or columns of the pair tensor at a time, so that their
 * activations and temporaries are those of one chunk. A chunk is one
 * sample's rows i0 .. i0 + ni; the ending node's are rows of the transposed
 * pair (one permute each way: two pair-sized buffers, which is less than the
 * triangle multiplication keeps).
 *
 * These modules keep nothing for the backward but their input: the backward
 * runs each chunk's forward again, then its backward (with --recompute
 * modules that is the recomputation it does anyway). A position's values are
 * the same ops on the same inputs as unchunked; the parameter gradients are
 * summed chunk by chunk (a different order: within fp32 rounding). The
 * triangle multiplication chunks inside its module (triangle_mult_chunk.c). */
#include "model/model.h"

int tf_chunk_count(const tf_exec *ex, const tf_config *c) {
    return c->batch * ((c->seq_len + ex->chunk - 1) / ex->chunk);
}

tf_chunk tf_chunk_at(const tf_exec *ex, const tf_config *c, int q) {
    const int per = (c->seq_len + ex->chunk - 1) / ex->chunk;
    tf_chunk k;
    k.b = q / per;
    k.i0 = (q % per) * ex->chunk;
    k.ni = c->seq_len - k.i0 < ex->chunk ? c->seq_len - k.i0 : ex->chunk;
    return k;
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

void tf_chunked_pair_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const long N = c->seq_len, C = c->pair_dim, nc = (long)c->batch * N * N * C;
    const int nk = tf_chunk_count(ex, c);
    int dims[4] = {c->batch, (int)N, (int)N, C};
    const size_t mark0 = tf_arena_mark(ex->arena);
    const float *in = z_in;
    float *out = z_out;
    if (which == 1) { /* the ending node: the starting node's chunks of the transposed pair */
        in = swapped_copy(ex, z_in, dims, nc);
        out = tf_alloc_act(ex, (size_t)nc);
    }
    for (int q = 0; q < nk; q++) {
        const tf_chunk k = tf_chunk_at(ex, c, q);
        const long off = ((long)k.b * N + k.i0) * N * C;
        const size_t mark = tf_arena_mark(ex->arena);
        tf_triattn_act ta;
        tf_transition_act tr;
        chunk_fwd(ex, M, o, which, &ta, &tr, out + off, in + off,
                  (tf_pair_shape){1, k.ni, (int)N, which == 1});
        tf_arena_release(ex->arena, mark);
    }
    if (which == 1) stream_swap(ex, z_out, out, dims);
    tf_arena_release(ex->arena, mark0);
}

void tf_chunked_pair_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *dz, const float *z_in) {
    const tf_config *c = M->c;
    const long N = c->seq_len, C = c->pair_dim, nc = (long)c->batch * N * N * C;
    const int nk = tf_chunk_count(ex, c);
    int dims[4] = {c->batch, (int)N, (int)N, C};
    const size_t mark0 = tf_arena_mark(ex->arena);
    const float *in = z_in;
    float *d = dz;
    if (which == 1) {
        in = swapped_copy(ex, z_in, dims, nc);
        d = swapped_copy(ex, dz, dims, nc);
    }
    for (int q = 0; q < nk; q++) {
        const tf_chunk k = tf_chunk_at(ex, c, q);
        const long off = ((long)k.b * N + k.i0) * N * C;
        const tf_pair_shape s = {1, k.ni, (int)N, which == 1};
        const size_t mark = tf_arena_mark(ex->arena);
        tf_triattn_act ta;
        tf_transition_act tr;
        float *scratch = tf_alloc_act(ex, (size_t)k.ni * N * C);
        chunk_fwd(ex, M, o, which, &ta, &tr, scratch, in + off, s);
        chunk_bwd(ex, M, o, which, &ta, &tr, d + off, in + off, s);
        tf_arena_release(ex->arena, mark);
    }
    if (which == 1) stream_swap(ex, dz, d, dims); /* d holds dz's all */
    tf_arena_release(ex->arena, mark0);
}
