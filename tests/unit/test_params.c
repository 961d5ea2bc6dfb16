/* The parameter table against docs/model.md (section 3): count, names,
 * shapes, order, and the FLOP count against its section 10. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tinyfold.h"

static tf_param_info *table_for(const tf_config *c, size_t *n) {
    *n = tf_param_count_tensors(c);
    tf_param_info *t = calloc(*n, sizeof *t);
    tf_param_table(c, t);
    return t;
}

static const tf_param_info *find(const tf_param_info *t, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

static void test_counts_at_defaults(void **state) {
    (void)state;
    tf_config c;
    tf_config_default(&c);
    size_t n;
    tf_param_info *t = table_for(&c, &n);
    assert_int_equal(n, 255);
    assert_int_equal(tf_param_count_floats(&c), 2653760);
    /* 56 LayerNorms (14 per block: 4 on the MSA, 10 on the pair) of width 64 or 128, weight and bias */
    size_t ln = 0, nln = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i].ndim == 1) ln += t[i].count, nln++;
    assert_int_equal(nln, 2 * 14 * 4);
    assert_int_equal(ln, 4 * 2 * (4 * 64 + 10 * 128));
    /* offsets contiguous in order */
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(t[i].offset, off);
        off += t[i].count;
    }
    free(t);
}

static void test_names_shapes_order(void **state) {
    (void)state;
    tf_config c;
    tf_config_default(&c);
    size_t n;
    tf_param_info *t = table_for(&c, &n);
    assert_string_equal(t[0].name, "msa_embedding.weight");
    assert_int_equal(t[0].shape[0], 21);
    assert_int_equal(t[0].shape[1], 64);
    assert_string_equal(t[1].name, "pair_embedding.weight");
    assert_int_equal(t[1].shape[0], 128);
    assert_int_equal(t[1].shape[1], 65);
    assert_string_equal(t[n - 1].name, "structure_module.distance_pred.weight");
    assert_int_equal(t[n - 1].shape[0], 1);
    assert_int_equal(t[n - 1].shape[1], 128);
    /* the full order of one block, as docs/model.md lists it */
    static const char *blk[] = {
        "msa_row_attention.q_proj.weight", "msa_row_attention.k_proj.weight",
        "msa_row_attention.v_proj.weight", "msa_row_attention.o_proj.weight",
        "msa_row_attention.pair_bias_proj.weight", "msa_column_attention.q_proj.weight",
        "msa_column_attention.k_proj.weight", "msa_column_attention.v_proj.weight",
        "msa_column_attention.o_proj.weight", "msa_transition.linear1.weight",
        "msa_transition.linear2.weight", "msa_norm_row.weight", "msa_norm_row.bias",
        "msa_norm_col.weight", "msa_norm_col.bias", "msa_norm_trans.weight",
        "msa_norm_trans.bias", "outer_product_mean.msa_to_outer.weight",
        "outer_product_mean.outer_to_pair.weight", "outer_product_mean.layer_norm.weight",
        "outer_product_mean.layer_norm.bias", "triangle_mult_outgoing.left_proj.weight",
        "triangle_mult_outgoing.right_proj.weight", "triangle_mult_outgoing.left_gate.weight",
        "triangle_mult_outgoing.right_gate.weight", "triangle_mult_outgoing.output_proj.weight",
        "triangle_mult_outgoing.output_gate.weight", "triangle_mult_outgoing.layer_norm.weight",
        "triangle_mult_outgoing.layer_norm.bias", "triangle_mult_incoming.left_proj.weight",
        "triangle_mult_incoming.right_proj.weight", "triangle_mult_incoming.left_gate.weight",
        "triangle_mult_incoming.right_gate.weight", "triangle_mult_incoming.output_proj.weight",
        "triangle_mult_incoming.output_gate.weight", "triangle_mult_incoming.layer_norm.weight",
        "triangle_mult_incoming.layer_norm.bias", "triangle_attn_starting.q_proj.weight",
        "triangle_attn_starting.k_proj.weight", "triangle_attn_starting.v_proj.weight",
        "triangle_attn_starting.o_proj.weight", "triangle_attn_starting.layer_norm.weight",
        "triangle_attn_starting.layer_norm.bias", "triangle_attn_ending.q_proj.weight",
        "triangle_attn_ending.k_proj.weight", "triangle_attn_ending.v_proj.weight",
        "triangle_attn_ending.o_proj.weight", "triangle_attn_ending.layer_norm.weight",
        "triangle_attn_ending.layer_norm.bias", "pair_transition.linear1.weight",
        "pair_transition.linear2.weight", "pair_norm_outer.weight", "pair_norm_outer.bias",
        "pair_norm_tri_out.weight", "pair_norm_tri_out.bias", "pair_norm_tri_in.weight",
        "pair_norm_tri_in.bias", "pair_norm_attn_start.weight", "pair_norm_attn_start.bias",
        "pair_norm_attn_end.weight", "pair_norm_attn_end.bias", "pair_norm_trans.weight",
        "pair_norm_trans.bias"};
    size_t per = sizeof blk / sizeof blk[0];
    assert_int_equal(per, 63);
    for (int b = 0; b < 4; b++)
        for (size_t i = 0; i < per; i++) {
            char want[128];
            snprintf(want, sizeof want, "evoformer_blocks.%d.%s", b, blk[i]);
            assert_string_equal(t[2 + b * per + i].name, want);
        }
    const tf_param_info *p = find(t, n, "evoformer_blocks.2.outer_product_mean.outer_to_pair.weight");
    assert_non_null(p);
    assert_int_equal(p->shape[0], 128);
    assert_int_equal(p->shape[1], 1024);
    p = find(t, n, "evoformer_blocks.0.msa_row_attention.pair_bias_proj.weight");
    assert_int_equal(p->shape[0], 4);
    assert_int_equal(p->shape[1], 128);
    p = find(t, n, "evoformer_blocks.3.pair_transition.linear1.weight");
    assert_int_equal(p->shape[0], 512);
    assert_int_equal(p->shape[1], 128);
    /* only pair_norm_outer is untrainable */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(t[i].trainable, strstr(t[i].name, "pair_norm_outer") == NULL);
    free(t);
}

static void test_flops(void **state) {
    (void)state;
    tf_config c;
    tf_config_default(&c);
    double f = tf_flops_forward(&c);
    assert_true(f > 88.3e9 && f < 89.3e9); /* docs/model.md: ~88.8 GFLOP */
    c.seq_len = 128;
    c.n_seqs = 32;
    f = tf_flops_forward(&c);
    assert_true(f > 386e9 && f < 396e9); /* docs/model.md: ~391 GFLOP */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_at_defaults),
        cmocka_unit_test(test_names_shapes_order),
        cmocka_unit_test(test_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
