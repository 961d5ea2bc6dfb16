/* The whole TinyOpenFold forward and backward (docs/model.md, section 4):
 *   m = msa_embedding[tokens]; z = pair_features pair_embedding^T
 *   per block: MSA row attn, MSA col attn, MSA transition, outer product mean,
 *              triangle mult out/in, triangle attn start/end, pair transition
 *   d = 20 sigmoid(z distance_pred^T); loss = mean (d - target)^2
 * Backward walks the same in reverse with one gradient buffer per residual
 * stream (dm, dz) that every module accumulates into. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

#define TF_DMAX 20.0f

static size_t find(const tf_param_info *t, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return t[i].offset;
    return (size_t)-1; /* unreachable for a well-formed table */
}

void tf_model_offsets(const tf_config *c, const tf_param_info *t, tf_model_off *off) {
    size_t n = tf_param_count_tensors(c);
    off->msa_emb = find(t, n, "msa_embedding.weight");
    off->pair_emb = find(t, n, "pair_embedding.weight");
    off->dist = find(t, n, "structure_module.distance_pred.weight");
    off->n_blocks = c->n_blocks;
    char nm[128];
#define OFF(field, suffix)                                                   \
    do {                                                                     \
        snprintf(nm, sizeof nm, "evoformer_blocks.%d.%s", b, suffix);        \
        o->field = find(t, n, nm);                                           \
    } while (0)
#define LNOFF(field, prefix)                                                 \
    do {                                                                     \
        OFF(field.w, prefix ".weight");                                      \
        OFF(field.b, prefix ".bias");                                        \
    } while (0)
    for (int b = 0; b < c->n_blocks; b++) {
        tf_block_off *o = &off->blk[b];
        OFF(row_q, "msa_row_attention.q_proj.weight");
        OFF(row_k, "msa_row_attention.k_proj.weight");
        OFF(row_v, "msa_row_attention.v_proj.weight");
        OFF(row_o, "msa_row_attention.o_proj.weight");
        OFF(row_pb, "msa_row_attention.pair_bias_proj.weight");
        OFF(col_q, "msa_column_attention.q_proj.weight");
        OFF(col_k, "msa_column_attention.k_proj.weight");
        OFF(col_v, "msa_column_attention.v_proj.weight");
        OFF(col_o, "msa_column_attention.o_proj.weight");
        OFF(mt_w1, "msa_transition.linear1.weight");
        OFF(mt_w2, "msa_transition.linear2.weight");
        LNOFF(norm_row, "msa_norm_row");
        LNOFF(norm_col, "msa_norm_col");
        LNOFF(norm_trans, "msa_norm_trans");
        OFF(opm_outer, "outer_product_mean.msa_to_outer.weight");
        OFF(opm_pair, "outer_product_mean.outer_to_pair.weight");
        LNOFF(opm_ln, "outer_product_mean.layer_norm");
        static const char *tm[2] = {"triangle_mult_outgoing", "triangle_mult_incoming"};
        static const char *ta[2] = {"triangle_attn_starting", "triangle_attn_ending"};
        for (int k = 0; k < 2; k++) {
            char s[96];
#define SUB(field, name)                                                     \
    do {                                                                     \
        snprintf(s, sizeof s, "%s.%s", tm[k], name);                          \
        OFF(field, s);                                                       \
    } while (0)
            SUB(tm[k].lp, "left_proj.weight");
            SUB(tm[k].rp, "right_proj.weight");
            SUB(tm[k].lg, "left_gate.weight");
            SUB(tm[k].rg, "right_gate.weight");
            SUB(tm[k].op, "output_proj.weight");
            SUB(tm[k].og, "output_gate.weight");
            SUB(tm[k].ln.w, "layer_norm.weight");
            SUB(tm[k].ln.b, "layer_norm.bias");
#undef SUB
#define SUB(field, name)                                                     \
    do {                                                                     \
        snprintf(s, sizeof s, "%s.%s", ta[k], name);                          \
        OFF(field, s);                                                       \
    } while (0)
            SUB(ta[k].q, "q_proj.weight");
            SUB(ta[k].k, "k_proj.weight");
            SUB(ta[k].v, "v_proj.weight");
            SUB(ta[k].o, "o_proj.weight");
            SUB(ta[k].ln.w, "layer_norm.weight");
            SUB(ta[k].ln.b, "layer_norm.bias");
#undef SUB
        }
        OFF(pt_w1, "pair_transition.linear1.weight");
        OFF(pt_w2, "pair_transition.linear2.weight");
        LNOFF(pn_outer, "pair_norm_outer");
        LNOFF(pn_tri_out, "pair_norm_tri_out");
        LNOFF(pn_tri_in, "pair_norm_tri_in");
        LNOFF(pn_attn_start, "pair_norm_attn_start");
        LNOFF(pn_attn_end, "pair_norm_attn_end");
        LNOFF(pn_trans, "pair_norm_trans");
    }
#undef OFF
#undef LNOFF
}

void tf_ln_fwd(tf_exec *ex, const tf_model *M, tf_ln_off ln, tf_ln_act *a, const void *x,
               tf_dtype xt, long rows, int C) {
    a->y = tf_alloc_at(ex, (size_t)rows * C);
    a->mean = tf_alloc_act(ex, (size_t)rows);
    a->rstd = tf_alloc_act(ex, (size_t)rows);
    tf_rpush(ex, "layer_norm");
    tf_x_layernorm_fwd(ex, a->y, a->mean, a->rstd, x, xt, tf_P(M, ln.w), tf_P(M, ln.b), rows, C);
    tf_rpop(ex);
}

void tf_ln_bwd(tf_exec *ex, const tf_model *M, tf_ln_off ln, const tf_ln_act *a, void *dx,
               tf_dtype xt, const void *dy, const void *x, long rows, int C, int accumulate) {
    tf_rpush(ex, "layer_norm");
    tf_x_layernorm_bwd(ex, dx, xt, tf_G(M, ln.w), tf_G(M, ln.b), dy, x, a->mean, a->rstd,
                       tf_P(M, ln.w), rows, C, accumulate);
    tf_rpop(ex);
}

float *tf_ln2_alloc(tf_exec *ex, tf_ln_act *b, tf_ln_act *a, long rows, int C) {
    float *stats = tf_alloc_act(ex, (size_t)4 * rows);
    a->y = tf_alloc_at(ex, (size_t)rows * C);
    b->y = NULL;
    b->mean = stats, b->rstd = stats + rows;
    a->mean = stats + 2 * rows, a->rstd = stats + 3 * rows;
    return stats;
}

void tf_ln2_fwd(tf_exec *ex, const tf_model *M, tf_ln_off bn, tf_ln_off ln, tf_ln_act *b,
                tf_ln_act *a, const float *x, long rows, int C) {
    if (ex->level < 3 || C > TF_LN2_MAX_C || !ex->ops->layernorm2_fwd) {
        tf_ln_fwd(ex, M, bn, b, x, TF_F32, rows, C);
        tf_ln_fwd(ex, M, ln, a, b->y, ex->at, rows, C);
        return;
    }
    float *stats = tf_ln2_alloc(ex, b, a, rows, C);
    tf_rpush(ex, "layer_norm");
    tf_x_layernorm2_fwd(ex, a->y, stats, x, tf_P(M, bn.w), tf_P(M, bn.b), tf_P(M, ln.w),
                        tf_P(M, ln.b), rows, C);
    tf_rpop(ex);
}

void tf_ln2_bwd(tf_exec *ex, const tf_model *M, tf_ln_off bn, tf_ln_off ln, const tf_ln_act *b,
                const tf_ln_act *a, float *dx, void *tmp, const void *dy, const float *x,
                long rows, int C, int accumulate) {
    if (b->y) {
        tf_ln_bwd(ex, M, ln, a, tmp, ex->at, dy, b->y, rows, C, 0);
        tf_ln_bwd(ex, M, bn, b, dx, TF_F32, tmp, x, rows, C, accumulate);
        return;
    }
    tf_rpush(ex, "layer_norm");
    tf_x_layernorm2_bwd(ex, dx, tf_G(M, bn.w), tf_G(M, bn.b), tf_G(M, ln.w), tf_G(M, ln.b), dy, x,
                        b->mean, tf_P(M, bn.w), tf_P(M, bn.b), tf_P(M, ln.w), rows, C,
                        accumulate);
    tf_rpop(ex);
}

void tf_residual_linear(tf_exec *ex, float *x_out, const float *x_in, const void *inp,
                        const float *W, long rows, int in, int out) {
    if (!x_out) return; /* a recomputed forward: the output is not wanted */
    if (ex->level >= 3) {
        tf_linear_fwd_res(ex, x_out, inp, W, rows, in, out, 1.0f, TF_EPI_NONE, x_in);
        return;
    }
    size_t mark = tf_arena_mark(ex->arena);
    float *tmp = tf_alloc_act(ex, (size_t)rows * out); /* fp32, as the stream */
    tf_linear_fwd_res(ex, tmp, inp, W, rows, in, out, 0.0f, TF_EPI_NONE, NULL);
    tf_x_add(ex, x_out, x_in, tmp, rows * out);
    tf_arena_release(ex->arena, mark);
}

/* The nine modules of a block in forward order; module k reads the stream
 * values before it (in_m, in_z) and writes one stream (out). */
enum { TF_N_MODULES = TF_BLOCK_MODULES };
static float **module_out(tf_block_act *A, int k) {
    float **outs[TF_N_MODULES] = {&A->m1, &A->m2, &A->m3, &A->z1, &A->z2,
                                  &A->z3, &A->z4, &A->z5, &A->z6};
    return outs[k];
}
static int module_is_msa(int k) { return k < 3; }
/* the triangle attentions and the pair transition chunk by chunk (chunk.c):
 * they keep nothing but their input */
static int module_chunked(const tf_exec *ex, int k) { return ex->chunk && k >= 6; }
static const float *module_in(const tf_block_act *A, int k) {
    const float *ins[TF_N_MODULES] = {A->m_in, A->m1, A->m2, A->z_in, A->z1,
                                      A->z2,   A->z3, A->z4, A->z5};
    return ins[k];
}

static void module_fwd(tf_exec *ex, tf_model *M, int b, int k, float *out) {
    const tf_config *c = M->c;
    const tf_block_off *o = &M->off.blk[b];
    tf_block_act *A = &M->acts[b];
    const long mrows = (long)c->batch * c->n_seqs * c->seq_len;
    const long zrows = (long)c->batch * c->seq_len * c->seq_len;
    if (module_chunked(ex, k)) {
        if (k == 8) tf_rpush(ex, "pair_transition"); /* the attentions push theirs */
        tf_chunked_pair_fwd(ex, M, o, k - 6, out, module_in(A, k));
        if (k == 8) tf_rpop(ex);
        return;
    }
    switch (k) {
    case 0: tf_msa_row_attn_fwd(ex, M, o, &A->row, out, A->m_in, A->z_in); break;
    case 1: tf_msa_col_attn_fwd(ex, M, o, &A->col, out, A->m1); break;
    case 2:
        tf_rpush(ex, "msa_transition");
        tf_transition_fwd(ex, M, o->mt_w1, o->mt_w2, o->norm_trans, &A->mt, out, A->m2, mrows,
                          c->msa_dim);
        tf_rpop(ex);
        break;
    case 3: tf_opm_fwd(ex, M, o, &A->opm, out, A->z_in, A->m3); break;
    case 4: tf_trimul_fwd(ex, M, o, 0, &A->tm[0], out, A->z1); break;
    case 5: tf_trimul_fwd(ex, M, o, 1, &A->tm[1], out, A->z2); break;
    case 6: tf_triattn_fwd(ex, M, o, 0, &A->ta[0], out, A->z3); break;
    case 7: tf_triattn_fwd(ex, M, o, 1, &A->ta[1], out, A->z4); break;
    default:
        tf_rpush(ex, "pair_transition");
        tf_transition_fwd(ex, M, o->pt_w1, o->pt_w2, o->pn_trans, &A->pt, out, A->z5, zrows,
                          c->pair_dim);
        tf_rpop(ex);
        break;
    }
}

/* A module's output buffer (one stream's size). */
static float *alloc_stream(tf_exec *ex, const tf_config *c, int k) {
    const size_t mn = (size_t)c->batch * c->n_seqs * c->seq_len * c->msa_dim;
    const size_t zn = (size_t)c->batch * c->seq_len * c->seq_len * c->pair_dim;
    return tf_alloc_act(ex, module_is_msa(k) ? mn : zn);
}

/* The block's forward. Without recomputation every activation stays for the
 * backward. With --recompute blocks the block's outputs are allocated first
 * and everything above them handed back at its end (the backward runs the
 * block again, block_refwd); with --recompute modules each module's output
 * stays and its internals are handed back (module_refwd). */
static void block_fwd(tf_exec *ex, tf_model *M, int b, const float *m_in, const float *z_in,
                      float **m_out, float **z_out) {
    const tf_config *c = M->c;
    tf_block_act *A = &M->acts[b];
    A->m_in = (float *)m_in;
    A->z_in = (float *)z_in;
    const int rc = ex->recompute;
    if (rc == TF_RECOMPUTE_BLOCKS) {
        A->m3 = alloc_stream(ex, c, 2);
        A->z6 = alloc_stream(ex, c, 8);
    }
    const size_t block_mark = tf_arena_mark(ex->arena);
    for (int k = 0; k < TF_N_MODULES; k++) {
        float **out = module_out(A, k);
        if (rc != TF_RECOMPUTE_BLOCKS || (k != 2 && k != 8)) *out = alloc_stream(ex, c, k);
        const size_t mark = tf_arena_mark(ex->arena);
        module_fwd(ex, M, b, k, *out);
        if (rc == TF_RECOMPUTE_MODULES) tf_arena_release(ex->arena, mark);
    }
    if (rc == TF_RECOMPUTE_BLOCKS) tf_arena_release(ex->arena, block_mark);
    *m_out = A->m3;
    *z_out = A->z6;
}

/* --recompute blocks, inside the backward: the block's forward again, every
 * activation kept, its outputs into fresh buffers (the kept ones may still be
 * read by the weight-gradient lane: same bits, but never written under it). */
static void block_refwd(tf_exec *ex, tf_model *M, int b) {
    tf_block_act *A = &M->acts[b];
    for (int k = 0; k < TF_N_MODULES; k++) {
        float **out = module_out(A, k);
        *out = alloc_stream(ex, M->c, k);
        module_fwd(ex, M, b, k, *out);
    }
}

/* --recompute modules, inside a module's backward: its forward again, for
 * the internals it keeps for the backward; its output is not wanted (out
 * NULL: the modules skip the work that only produces it, the output
 * projection, gating and residual add). */
static void module_refwd(tf_exec *ex, tf_model *M, int b, int k) {
    if (module_chunked(ex, k)) return; /* its backward runs each chunk's forward */
    module_fwd(ex, M, b, k, NULL);
}

/* The two-slot backward (exec.h bwd_slot). Every module's backward starts at
 * the same arena point (bwd_base): odd modules one slot above it, so that a
 * module's temporaries, which its weight gradients on the lane read, are
 * overwritten only by the module after next. While planning without slots
 * (bwd_slot_need), the largest module's temporaries are measured. */
static void module_begin(tf_exec *ex) {
    tf_arena *a = ex->arena;
    tf_arena_release(a, ex->bwd_base);
    if (ex->bwd_slot) {
        if (ex->bwd_module & 1) tf_alloc_act(ex, ex->bwd_slot / sizeof(float));
    } else if (ex->planning) {
        ex->bwd_saved_peak = a->peak;
        a->peak = a->top;
    }
}
static void module_end(tf_exec *ex) {
    tf_arena *a = ex->arena;
    if (!ex->bwd_slot && ex->planning) {
        if (a->peak - ex->bwd_base > ex->bwd_slot_need) ex->bwd_slot_need = a->peak - ex->bwd_base;
        if (ex->bwd_saved_peak > a->peak) a->peak = ex->bwd_saved_peak;
    }
    ex->bwd_module++;
    tf_x_stage_end(ex);
}
static void module_bwd(tf_exec *ex, tf_model *M, int b, int k, float *dm, float *dz) {
    const tf_config *c = M->c;
    const tf_block_off *o = &M->off.blk[b];
    const tf_block_act *A = &M->acts[b];
    const long mrows = (long)c->batch * c->n_seqs * c->seq_len;
    const long zrows = (long)c->batch * c->seq_len * c->seq_len;
    if (module_chunked(ex, k)) {
        tf_chunked_pair_bwd(ex, M, o, k - 6, dz, module_in(A, k));
        return;
    }
    switch (k) {
    case 0: tf_msa_row_attn_bwd(ex, M, o, &A->row, dm, dz, A->m_in, A->z_in); break;
    case 1: tf_msa_col_attn_bwd(ex, M, o, &A->col, dm, A->m1); break;
    case 2:
        tf_transition_bwd(ex, M, o->mt_w1, o->mt_w2, o->norm_trans, &A->mt, dm, A->m2, mrows,
                          c->msa_dim);
        break;
    case 3: tf_opm_bwd(ex, M, o, &A->opm, dm, dz, A->m3); break;
    case 4: tf_trimul_bwd(ex, M, o, 0, &A->tm[0], dz, A->z1); break;
    case 5: tf_trimul_bwd(ex, M, o, 1, &A->tm[1], dz, A->z2); break;
    case 6: tf_triattn_bwd(ex, M, o, 0, &A->ta[0], dz, A->z3); break;
    case 7: tf_triattn_bwd(ex, M, o, 1, &A->ta[1], dz, A->z4); break;
    default:
        tf_transition_bwd(ex, M, o->pt_w1, o->pt_w2, o->pn_trans, &A->pt, dz, A->z5, zrows,
                          c->pair_dim);
        break;
    }
}

static void block_bwd(tf_exec *ex, tf_model *M, int b, float *dm, float *dz) {
    tf_block_act *A = &M->acts[b];
    float *const m3 = A->m3, *const z6 = A->z6;
    const size_t base = ex->bwd_base;
    if (ex->recompute == TF_RECOMPUTE_BLOCKS) {
        /* the arena above base held the next block's backward: the executor
         * waits for the lane's GEMMs that still read it (lane.h) */
        tf_arena_release(ex->arena, base);
        block_refwd(ex, M, b);
        ex->bwd_base = tf_arena_mark(ex->arena);
    }
    for (int k = TF_N_MODULES - 1; k >= 0; k--) {
        const char *region = k == 8 ? "pair_transition" : k == 2 ? "msa_transition" : NULL;
        if (region) tf_rpush(ex, region);
        module_begin(ex);
        if (ex->recompute == TF_RECOMPUTE_MODULES) {
            module_refwd(ex, M, b, k);
        }
        module_bwd(ex, M, b, k, dm, dz);
        module_end(ex);
        if (region) tf_rpop(ex);
    }
    if (ex->recompute == TF_RECOMPUTE_BLOCKS) {
        tf_arena_release(ex->arena, ex->bwd_base);
        ex->bwd_base = base;
        A->m3 = m3, A->z6 = z6; /* the kept outputs */
    }
}

static const char *block_name(int b) {
    static const char *names[] = {"block_0", "block_1", "block_2",  "block_3",
                                  "block_4", "block_5", "block_6",  "block_7",
                                  "block_8", "block_9", "block_10", "block_11"};
    return b < 12 ? names[b] : "block_n";
}

void tf_model_forward(tf_exec *ex, tf_model *M) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len;
    const long mrows = (long)B * S * N, zrows = (long)B * N * N;
    tf_arena_reset(ex->arena);
    /* the embeddings and the distance head run in fp32 (the streams' type;
     * fp32 inputs and output, K = 65 and N = 1: no tensor-core work) */
    tf_dtype at = tf_exec_fp32_begin(ex);
    tf_rpush(ex, "embedding");
    M->m0 = tf_alloc_act(ex, (size_t)mrows * c->msa_dim);
    M->z0 = tf_alloc_act(ex, (size_t)zrows * c->pair_dim);
    tf_x_embed_fwd(ex, M->m0, tf_P(M, M->off.msa_emb), M->tokens, mrows, c->msa_dim, c->vocab);
    tf_linear_fwd(ex, M->z0, M->pair, tf_P(M, M->off.pair_emb), zrows, c->pair_input_dim,
                  c->pair_dim, 0.0f, TF_EPI_NONE);
    tf_rpop(ex);
    tf_exec_fp32_end(ex, at);
    float *m = M->m0, *z = M->z0;
    for (int b = 0; b < c->n_blocks; b++) {
        tf_rpush(ex, block_name(b));
        block_fwd(ex, M, b, m, z, &m, &z);
        tf_rpop(ex);
    }
    at = tf_exec_fp32_begin(ex);
    tf_rpush(ex, "structure_module");
    M->logits = tf_alloc_act(ex, (size_t)zrows);
    tf_linear_fwd(ex, M->logits, z, tf_P(M, M->off.dist), zrows, c->pair_dim, 1, 0.0f,
                  TF_EPI_NONE);
    tf_rpop(ex);
    tf_rpush(ex, "loss");
    tf_x_mse_head_fwd(ex, M->pred, M->loss, M->logits, M->target, zrows, TF_DMAX);
    tf_rpop(ex);
    tf_exec_fp32_end(ex, at);
}

void tf_model_backward(tf_exec *ex, tf_model *M) {
    const tf_config *c = M->c;
    const int B = c->batch, S = c->n_seqs, N = c->seq_len;
    const long mrows = (long)B * S * N, zrows = (long)B * N * N;
    size_t mark = tf_arena_mark(ex->arena);
    ex->bwd_stage = 0;
    tf_x_zero(ex, M->grads, tf_param_count_floats(c));
    float *dm = tf_alloc_act(ex, (size_t)mrows * c->msa_dim);
    float *dz = tf_alloc_act(ex, (size_t)zrows * c->pair_dim);
    float *dlogit = tf_alloc_act(ex, (size_t)zrows);
    /* the streams' gradients' half copies, for the whole backward (exec.h
     * tf_stream_copy) */
    tf_x_stream_copies_begin(ex, dz, (size_t)zrows * c->pair_dim, dm, (size_t)mrows * c->msa_dim);
    const float *z_last = c->n_blocks > 0 ? M->acts[c->n_blocks - 1].z6 : M->z0;
    tf_dtype at = tf_exec_fp32_begin(ex);
    tf_rpush(ex, "loss");
    tf_x_mse_head_bwd(ex, dlogit, M->pred, M->target, zrows, TF_DMAX, M->loss_scale);
    tf_rpop(ex);
    tf_rpush(ex, "structure_module");
    /* dz = dlogit x distance_pred (initialises the pair gradient); dW += dlogit^T z */
    tf_linear_bwd(ex, dz, tf_G(M, M->off.dist), dlogit, z_last, tf_P(M, M->off.dist), zrows,
                  c->pair_dim, 1, 0);
    tf_rpop(ex);
    tf_exec_fp32_end(ex, at);
    tf_x_stage_end(ex);
    tf_x_zero(ex, dm, (size_t)mrows * c->msa_dim); /* the last m feeds nothing but its OPM */
    ex->bwd_base = tf_arena_mark(ex->arena);
    ex->bwd_module = 0;
    for (int b = c->n_blocks - 1; b >= 0; b--) {
        tf_rpush(ex, block_name(b));
        block_bwd(ex, M, b, dm, dz);
        tf_rpop(ex);
    }
    tf_arena_release(ex->arena, ex->bwd_base);
    at = tf_exec_fp32_begin(ex);
    tf_rpush(ex, "embedding");
    tf_x_embed_bwd(ex, tf_G(M, M->off.msa_emb), dm, M->tokens, mrows, c->msa_dim, c->vocab);
    tf_linear_bwd(ex, NULL, tf_G(M, M->off.pair_emb), dz, M->pair, NULL, zrows,
                  c->pair_input_dim, c->pair_dim, 0);
    tf_rpop(ex);
    tf_exec_fp32_end(ex, at);
    tf_x_lane_join(ex); /* the step ends joined */
    tf_x_stage_end(ex);
    tf_x_stream_copies_end(ex); /* their memory is released */
    tf_arena_release(ex->arena, mark);
}
