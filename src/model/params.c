/* The parameter table: names, shapes and offsets of the 255 tensors of
 * TinyOpenFold in PyTorch state_dict order (docs/model.md, section 3). Params,
 * grads and both Adam moments use this one layout. */
#include <stdio.h>
#include <string.h>

#include "tinyfold.h"

typedef struct {
    tf_param_info *t; /* may be NULL: count only */
    size_t n, off;
} builder;

static void add(builder *b, const char *name, int d0, int d1, int trainable) {
    size_t count = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    if (b->t) {
        tf_param_info *p = &b->t[b->n];
        snprintf(p->name, sizeof p->name, "%s", name);
        p->ndim = d1 > 0 ? 2 : 1;
        p->shape[0] = d0;
        p->shape[1] = d1 > 0 ? d1 : 0;
        p->offset = b->off;
        p->count = count;
        p->trainable = trainable;
    }
    b->n++;
    b->off += count;
}

static void addf(builder *b, int d0, int d1, int trainable, const char *fmt, int blk,
                 const char *a, const char *c) {
    char name[96];
    snprintf(name, sizeof name, fmt, blk, a, c);
    add(b, name, d0, d1, trainable);
}

static void build(const tf_config *c, builder *b) {
    const int cm = c->msa_dim, cz = c->pair_dim, co = c->outer_dim;
    const int hm = c->n_heads_msa;
    add(b, "msa_embedding.weight", c->vocab, cm, 1);
    add(b, "pair_embedding.weight", cz, c->pair_input_dim, 1);
    static const char *qkvo[] = {"q", "k", "v", "o"};
    static const char *tri_w[] = {"left_proj", "right_proj", "left_gate",
                                  "right_gate", "output_proj", "output_gate"};
    static const char *tri_mul[] = {"outgoing", "incoming"};
    static const char *tri_att[] = {"starting", "ending"};
    static const char *msa_norms[] = {"row", "col", "trans"};
    static const char *pair_norms[] = {"outer", "tri_out", "tri_in",
                                       "attn_start", "attn_end", "trans"};
    const char *E = "evoformer_blocks.%d.";
    char fmt[128];
    for (int k = 0; k < c->n_blocks; k++) {
        for (int i = 0; i < 4; i++) {
            snprintf(fmt, sizeof fmt, "%smsa_row_attention.%%s_proj.weight%%s", E);
            addf(b, cm, cm, 1, fmt, k, qkvo[i], "");
        }
        snprintf(fmt, sizeof fmt, "%smsa_row_attention.pair_bias_proj.weight%%s%%s", E);
        addf(b, hm, cz, 1, fmt, k, "", "");
        for (int i = 0; i < 4; i++) {
            snprintf(fmt, sizeof fmt, "%smsa_column_attention.%%s_proj.weight%%s", E);
            addf(b, cm, cm, 1, fmt, k, qkvo[i], "");
        }
        snprintf(fmt, sizeof fmt, "%smsa_transition.linear1.weight%%s%%s", E);
        addf(b, 4 * cm, cm, 1, fmt, k, "", "");
        snprintf(fmt, sizeof fmt, "%smsa_transition.linear2.weight%%s%%s", E);
        addf(b, cm, 4 * cm, 1, fmt, k, "", "");
        for (int i = 0; i < 3; i++) {
            snprintf(fmt, sizeof fmt, "%smsa_norm_%%s.%%s", E);
            addf(b, cm, 0, 1, fmt, k, msa_norms[i], "weight");
            addf(b, cm, 0, 1, fmt, k, msa_norms[i], "bias");
        }
        snprintf(fmt, sizeof fmt, "%souter_product_mean.%%s%%s", E);
        addf(b, co, cm, 1, fmt, k, "msa_to_outer.weight", "");
        addf(b, cz, co * co, 1, fmt, k, "outer_to_pair.weight", "");
        addf(b, cm, 0, 1, fmt, k, "layer_norm.weight", "");
        addf(b, cm, 0, 1, fmt, k, "layer_norm.bias", "");
        for (int t = 0; t < 2; t++) {
            snprintf(fmt, sizeof fmt, "%striangle_mult_%s.%%s%%s", E, tri_mul[t]);
            for (int i = 0; i < 6; i++) {
                char w[64];
                snprintf(w, sizeof w, "%s.weight", tri_w[i]);
                addf(b, cz, cz, 1, fmt, k, w, "");
            }
            addf(b, cz, 0, 1, fmt, k, "layer_norm.weight", "");
            addf(b, cz, 0, 1, fmt, k, "layer_norm.bias", "");
        }
        for (int t = 0; t < 2; t++) {
            snprintf(fmt, sizeof fmt, "%striangle_attn_%s.%%s%%s", E, tri_att[t]);
            for (int i = 0; i < 4; i++) {
                char w[64];
                snprintf(w, sizeof w, "%s_proj.weight", qkvo[i]);
                addf(b, cz, cz, 1, fmt, k, w, "");
            }
            addf(b, cz, 0, 1, fmt, k, "layer_norm.weight", "");
            addf(b, cz, 0, 1, fmt, k, "layer_norm.bias", "");
        }
        snprintf(fmt, sizeof fmt, "%spair_transition.linear1.weight%%s%%s", E);
        addf(b, 4 * cz, cz, 1, fmt, k, "", "");
        snprintf(fmt, sizeof fmt, "%spair_transition.linear2.weight%%s%%s", E);
        addf(b, cz, 4 * cz, 1, fmt, k, "", "");
        for (int i = 0; i < 6; i++) {
            /* pair_norm_outer is never applied in the forward pass: no gradient,
             * and PyTorch's AdamW skips it (weight decay included). */
            int trainable = i != 0;
            snprintf(fmt, sizeof fmt, "%spair_norm_%%s.%%s", E);
            addf(b, cz, 0, trainable, fmt, k, pair_norms[i], "weight");
            addf(b, cz, 0, trainable, fmt, k, pair_norms[i], "bias");
        }
    }
    add(b, "structure_module.distance_pred.weight", 1, cz, 1);
}

size_t tf_param_count_tensors(const tf_config *c) {
    builder b = {0};
    build(c, &b);
    return b.n;
}

size_t tf_param_count_floats(const tf_config *c) {
    builder b = {0};
    build(c, &b);
    return b.off;
}

void tf_param_table(const tf_config *c, tf_param_info *table) {
    builder b = {table, 0, 0};
    build(c, &b);
}
