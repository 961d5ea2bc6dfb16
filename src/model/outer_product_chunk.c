/* The outer product mean K rows at a time (--chunk-size; the math of
 * outer_product.c in the reference composition, on every backend and level).
 *
 * The product outer[b, (i,p), (j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q] and
 * everything after it are per row i of the pair, so a chunk of rows
 * (b, i0 .. i0 + ni) needs only its [ni, N, co^2] slice: one GEMM
 * (a's columns of the chunk, transposed, times all of a), the permute to
 * [ni, N, co, co] and the output projection of those ni * N rows. The
 * module keeps LN(m) and a (as unchunked); the backward runs each chunk's
 * product again, then its backward:
 *   dop = dz Wpair, dWpair += dz^T outer_p          (the chunk's rows)
 *   douter = dop permuted back to [ni*co, N*co]
 *   da[b, s, all]   += (1/S) a[b, s, chunk] douter
 *   da[b, s, chunk] += (1/S) a[b, s, all] douter^T
 * the two terms of d(A^T A)/dA restricted to the chunk's rows of dOuter.
 * Its temporaries: two [ni, N, co^2] buffers forward, three backward,
 * instead of two and three of [B, N, N, co^2].
 *
 * Bits: the chunk's product and projection are the unchunked GEMMs with
 * fewer rows; da and dWpair are summed chunk by chunk (beta = 1), a
 * different order: within fp32 rounding (tests/unit/test_recompute.c). The
 * fused CUDA ops (opm_outer, opm_bwd) are not used here: they take the
 * whole tensor. The CPU's weight-first composition is not chunked
 * (outer_product.c says why). */
#include "model/model.h"

static const int opm_perm[4] = {0, 2, 1, 3}; /* [ni,co,N,co] <-> [ni,N,co,co], self-inverse */

/* outer_p [ni, N, co, co] of chunk k: the GEMM into a temporary, then the permute */
static void chunk_product(tf_exec *ex, const tf_config *c, const void *a, tf_chunk k,
                          void *outer_p) {
    const int S = c->n_seqs, N = c->seq_len, co = c->outer_dim;
    const long NC = (long)N * co;
    const void *ab = tf_at(ex, a, (long)k.b * S * NC); /* sample b: [S, N*co] */
    const size_t mark = tf_arena_mark(ex->arena);
    void *outer = tf_alloc_at(ex, (size_t)k.ni * co * NC);
    /* [ni*co, N*co] = (1/S) ab[:, i0*co ..]^T ab */
    tf_gemm_args g = tf_gemm_make(ex, 1, 0, k.ni * co, (int)NC, S, 1.0f / (float)S, 0.0f,
                                  tf_at(ex, ab, (long)k.i0 * co), NC, 0, ab, NC, 0, outer, NC, 0,
                                  1);
    tf_gemm(ex, &g, "opm_outer");
    int dims[4] = {k.ni, co, N, co};
    tf_x_permute(ex, outer_p, outer, 4, dims, opm_perm, 0);
    tf_arena_release(ex->arena, mark);
}

void tf_opm_fwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                        const tf_opm_act *a, float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    const long N = c->seq_len, co = c->outer_dim, cz = c->pair_dim;
    if (!z_out) return; /* a recomputed forward: the backward forms each chunk again */
    const int nk = tf_chunk_count(ex, c);
    for (int q = 0; q < nk; q++) {
        const tf_chunk k = tf_chunk_at(ex, c, q);
        const long off = ((long)k.b * N + k.i0) * N * cz, rows = (long)k.ni * N;
        const size_t mark = tf_arena_mark(ex->arena);
        void *outer_p = tf_alloc_at(ex, (size_t)rows * co * co);
        tf_rpush(ex, "outer_product");
        chunk_product(ex, c, a->a, k, outer_p);
        tf_rpop(ex);
        tf_rpush(ex, "output_proj");
        tf_residual_linear(ex, z_out + off, z_in + off, outer_p, tf_P(M, o->opm_pair), rows,
                           (int)(co * co), (int)cz);
        tf_rpop(ex);
        tf_arena_release(ex->arena, mark);
    }
}

void tf_opm_bwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                        const tf_opm_act *a, void *da, const float *dz) {
    const tf_config *c = M->c;
    const int S = c->n_seqs, N = c->seq_len, co = c->outer_dim, cz = c->pair_dim;
    const long NC = (long)N * co;
    tf_x_zero_at(ex, da, (size_t)c->batch * S * NC);
    const int nk = tf_chunk_count(ex, c);
    for (int q = 0; q < nk; q++) {
        const tf_chunk k = tf_chunk_at(ex, c, q);
        const long rows = (long)k.ni * N, off = ((long)k.b * N + k.i0) * N * cz;
        const size_t mark = tf_arena_mark(ex->arena);
        void *outer_p = tf_alloc_at(ex, (size_t)rows * co * co);
        void *douter = tf_alloc_at(ex, (size_t)rows * co * co);
        tf_rpush(ex, "outer_product");
        chunk_product(ex, c, a->a, k, outer_p);
        tf_rpop(ex);
        tf_rpush(ex, "output_proj");
        const size_t mark_dop = tf_arena_mark(ex->arena);
        const void *dzq = tf_x_stream_grad(ex, dz + off, rows * cz);
        void *dop = tf_alloc_at(ex, (size_t)rows * co * co);
        tf_linear_bwd(ex, dop, tf_G(M, o->opm_pair), dzq, outer_p, tf_P(M, o->opm_pair),
                      rows, co * co, cz, 0);
        int dims[4] = {k.ni, N, co, co};
        tf_x_permute(ex, douter, dop, 4, dims, opm_perm, 0);
        tf_arena_release(ex->arena, mark_dop);
        tf_rpop(ex);
        tf_rpush(ex, "outer_product");
        const void *ab = tf_at(ex, a->a, (long)k.b * S * NC);
        void *dab = tf_at(ex, da, (long)k.b * S * NC);
        const float inv = 1.0f / (float)S;
        /* da_b[S, N*co] += (1/S) ab[:, chunk] [S, ni*co] . douter [ni*co, N*co] */
        tf_gemm_args g = tf_gemm_make(ex, 0, 0, S, (int)NC, k.ni * co, inv, 1.0f,
                                      tf_at(ex, ab, (long)k.i0 * co), NC, 0, douter, NC, 0, dab,
                                      NC, 0, 1);
        tf_gemm(ex, &g, "opm_douter");
        /* da_b[:, chunk] [S, ni*co] += (1/S) ab [S, N*co] . douter^T */
        g = tf_gemm_make(ex, 0, 1, S, k.ni * co, (int)NC, inv, 1.0f, ab, NC, 0, douter, NC, 0,
                         tf_at(ex, dab, (long)k.i0 * co), NC, 0, 1);
        tf_gemm(ex, &g, "opm_douter_t");
        tf_rpop(ex);
        tf_arena_release(ex->arena, mark);
    }
}
