/* Triangle attention (docs/model.md, section 4.6):
 *   xb = block norm(z); y = LN(xb); q,k,v = y W^T (H_z heads)
 *   starting: position (i,j) attends to (i,l) over l;  ending: to (l,j) over l
 *   z_out = z + o Wo^T
 * Ending node is the starting node on the transposed pair. Eager (no flash)
 * does literally that: transpose y, attend row-wise, transpose back (as the
 * reference does). The flash path instead attends column-wise through strided
 * views: the projections are per position, so no transpose is needed. */
#include "model/model.h"

static const int swap_ij[4] = {0, 2, 1, 3}; /* [B,N,N,C]: swap the two residue axes */

void tf_triattn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                    tf_triattn_act *a, float *z_out, const float *z_in) {
    const tf_config *c = M->c;
    tf_triattn_fwd_shape(ex, M, o, which, a, z_out, z_in,
                         (tf_pair_shape){c->batch, c->seq_len, c->seq_len, 0});
}

void tf_triattn_fwd_shape(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                          tf_triattn_act *a, float *z_out, const float *z_in, tf_pair_shape s) {
    const tf_config *c = M->c;
    const int B = s.nb, X = s.nx, Y = s.ny, C = c->pair_dim, H = c->n_heads_pair;
    const long rows = (long)B * X * Y;
    const int transpose = which == 1 && !ex->fu.flash && !s.transposed;
    tf_rpush(ex, which ? "triangle_attn_ending" : "triangle_attn_starting");
    tf_ln2_fwd(ex, M, which ? o->pn_attn_end : o->pn_attn_start, o->ta[which].ln, &a->bln,
               &a->ln, z_in, rows, C);
    const void *x = a->ln.y;
    a->yt = NULL;
    if (transpose) {
        a->yt = tf_alloc_at(ex, (size_t)rows * C);
        int dims[4] = {B, X, Y, C};
        tf_x_permute(ex, a->yt, a->ln.y, 4, dims, swap_ij, 0);
        x = a->yt;
    }
    tf_rpush(ex, "qkv");
    long ld;
    tf_qkv_fwd(ex, M, ex->fu.qkv_triangle, o->ta[which].q, x, rows, C, &a->qkv, &a->q, &a->k,
               &a->v, &ld);
    tf_rpop(ex);
    tf_rpush(ex, "attention");
    /* transposed: [B, Y, X] attended row-wise */
    a->core = (tf_attn_core){.B = B, .X = transpose ? Y : X, .Y = transpose ? X : Y, .H = H,
                             .d = C / H,
                             .colwise = which == 1 && !transpose && !s.transposed, .ld = ld,
                             .q = a->q, .k = a->k, .v = a->v, .bias = NULL};
    tf_attn_core_fwd(ex, &a->core);
    const void *out_in = a->core.o;
    a->o_t = NULL;
    if (transpose) {
        a->o_t = tf_alloc_at(ex, (size_t)rows * C);
        int dims[4] = {B, Y, X, C};
        tf_x_permute(ex, a->o_t, a->core.o, 4, dims, swap_ij, 0);
        out_in = a->o_t;
    }
    tf_rpop(ex);
    tf_rpush(ex, "output_proj");
    tf_residual_linear(ex, z_out, z_in, out_in, tf_P(M, o->ta[which].o), rows, C, C);
    tf_rpop(ex);
    tf_rpop(ex);
}

void tf_triattn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                    const tf_triattn_act *a, float *dz, const float *z_in) {
    const tf_config *c = M->c;
    tf_triattn_bwd_shape(ex, M, o, which, a, dz, z_in,
                         (tf_pair_shape){c->batch, c->seq_len, c->seq_len, 0});
}

void tf_triattn_bwd_shape(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                          const tf_triattn_act *a, float *dz, const float *z_in, tf_pair_shape s) {
    const tf_config *c = M->c;
    const int B = s.nb, X = s.nx, Y = s.ny, C = c->pair_dim;
    const long rows = (long)B * X * Y;
    const int transpose = a->yt != NULL;
    /* dims of the module's layout and of the transposed one */
    int dims[4] = {B, X, Y, C}, dims_t[4] = {B, Y, X, C};
    size_t mark = tf_arena_mark(ex->arena);
    tf_rpush(ex, which ? "triangle_attn_ending" : "triangle_attn_starting");
    tf_rpush(ex, "output_proj");
    const void *dzh = tf_x_stream_grad(ex, dz, rows * C);
    void *dO = tf_alloc_at(ex, (size_t)rows * C);
    const void *o_final = transpose ? a->o_t : a->core.o;
    tf_linear_bwd(ex, dO, tf_G(M, o->ta[which].o), dzh, o_final, tf_P(M, o->ta[which].o), rows, C,
                  C, 0);
    tf_rpop(ex);
    tf_rpush(ex, "attention");
    void *dcore = dO;
    if (transpose) {
        dcore = tf_alloc_at(ex, (size_t)rows * C);
        tf_x_permute(ex, dcore, dO, 4, dims, swap_ij, 0);
    }
    void *dqkv = tf_alloc_at(ex, (size_t)rows * 3 * C);
    long ld = a->core.ld;
    void *dq = dqkv, *dk = tf_at(ex, dqkv, ld == C ? rows * C : C);
    void *dv = tf_at(ex, dqkv, ld == C ? 2 * rows * C : 2 * C);
    tf_attn_core_bwd(ex, &a->core, dq, dk, dv, NULL, dcore);
    tf_rpop(ex);
    tf_rpush(ex, "qkv");
    void *dx = tf_alloc_at(ex, (size_t)rows * C);
    tf_qkv_bwd(ex, M, a->qkv != NULL, o->ta[which].q, transpose ? a->yt : a->ln.y, rows, C, dqkv,
               dx);
    tf_rpop(ex);
    void *dy = dx;
    if (transpose) {
        dy = dO; /* free again */
        tf_x_permute(ex, dy, dx, 4, dims_t, swap_ij, 0);
    }
    tf_ln2_bwd(ex, M, which ? o->pn_attn_end : o->pn_attn_start, o->ta[which].ln, &a->bln, &a->ln,
               dz, dqkv /* free again */, dy,
               z_in, rows, C, 1);
    tf_rpop(ex);
    tf_arena_release(ex->arena, mark);
}
