/* The analytic op costs (src/model/op_cost.h) against hand counts at small
 * shapes, and one profiled training step's per-op costs against the FLOPs
 * estimate tf_flops_forward. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "model/op_cost.h"
#include "prof/prof_internal.h"
#include "tinyfold.h"

static void gemm_counts(void **s) {
    (void)s;
    float dummy = 0;
    tf_gemm_args g = {0};
    g.M = 2, g.N = 3, g.K = 4, g.batch = 1, g.alpha = 1.0f;
    tf_op_cost c = tf_cost_gemm(&g);
    /* 2 * 2*3*4 = 48; A 8 + B 12 + C 6 floats */
    assert_true(c.flops == 48.0);
    assert_true(c.bytes == 4.0 * (8 + 12 + 6));
    g.beta = 1.0f; /* C read too */
    c = tf_cost_gemm(&g);
    assert_true(c.bytes == 4.0 * (8 + 12 + 12));
    g.aux = &dummy; /* and the ReLU mask */
    c = tf_cost_gemm(&g);
    assert_true(c.bytes == 4.0 * (8 + 12 + 18));
    /* batch 5 against one shared B (stride 0): B read once */
    tf_gemm_args h = {0};
    h.M = 2, h.N = 3, h.K = 4, h.batch = 5, h.strideA = 8, h.strideC = 6;
    c = tf_cost_gemm(&h);
    assert_true(c.flops == 240.0);
    assert_true(c.bytes == 4.0 * (5 * 8 + 12 + 5 * 6));
    /* element types: A, B 2 bytes (bf16), C, R, aux in c_type */
    g.ab_type = TF_BF16; /* beta 1, aux set (above) */
    c = tf_cost_gemm(&g);
    assert_true(c.bytes == 2.0 * (8 + 12) + 4.0 * 18);
    g.c_type = TF_F16;
    c = tf_cost_gemm(&g);
    assert_true(c.flops == 48.0 && c.bytes == 2.0 * (8 + 12 + 18));
}

static void attention_counts(void **s) {
    (void)s;
    float bias = 0, dbias = 0;
    tf_attn_args a;
    memset(&a, 0, sizeof a);
    a.nb = 1, a.no = 2, a.nh = 1, a.L = 3, a.d = 2;
    /* 2 heads: q k^T and P v are 2 * 9 * 2 each, 6 softmax FLOPs a score */
    tf_op_cost c = tf_cost_attn_fwd(&a);
    assert_true(c.flops == 2.0 * (2 * 18 + 2 * 18 + 6 * 9));
    assert_true(c.bytes == 4.0 * (4 * 2 * 3 * 2 + 2 * 3)); /* q k v out, lse */
    a.bias = &bias; /* + 1 FLOP a score; the [1, 1, 3, 3] bias read once */
    c = tf_cost_attn_fwd(&a);
    assert_true(c.flops == 2.0 * (72 + 7 * 9));
    assert_true(c.bytes == 4.0 * (48 + 6 + 9));
    a.dbias = &dbias;
    c = tf_cost_attn_bwd(&a);
    /* five L x L x d products, 6 a score, D = rowsum(dO o) 2 per output */
    assert_true(c.flops == 2.0 * (10 * 18 + 6 * 9 + 2 * 6));
    assert_true(c.bytes == 4.0 * (8 * 12 + 6 + 9 + 9));
}

static void norm_and_elementwise_counts(void **s) {
    (void)s;
    tf_op_cost c = tf_cost_layernorm_fwd(3, 4);
    assert_true(c.flops == 8 * 12 + 2 * 3);
    assert_true(c.bytes == 4.0 * (12 + 12 + 6 + 8)); /* x, out, mean+rstd, gamma+beta */
    c = tf_cost_layernorm_bwd(3, 4, 0);
    assert_true(c.flops == 13 * 12);
    assert_true(c.bytes == 4.0 * (36 + 6 + 20)); /* dout x dx; mean rstd; gamma, dg db r+w */
    c = tf_cost_layernorm_bwd(3, 4, 1);
    assert_true(c.bytes == 4.0 * (48 + 6 + 20));
    c = tf_cost_softmax_fwd(2, 5);
    assert_true(c.flops == 50 && c.bytes == 80);
    c = tf_cost_elementwise(5, 2, 1, 1.0); /* add */
    assert_true(c.flops == 5 && c.bytes == 60);
    c = tf_cost_elementwise(5, 3, 2, TF_FLOPS_GATE_BWD);
    assert_true(c.flops == 45 && c.bytes == 100);
    c = tf_cost_permute(10, 0);
    assert_true(c.flops == 0 && c.bytes == 80);
    c = tf_cost_permute(10, 1);
    assert_true(c.flops == 10 && c.bytes == 120);
    c = tf_cost_adamw(10);
    assert_true(c.flops == 140 && c.bytes == 280);
    c = tf_cost_sum_mid(2, 3, 4, 0); /* 24 read, 8 written */
    assert_true(c.flops == 24 && c.bytes == 4.0 * 32);
    c = tf_cost_add_bcast_mid(2, 3, 4); /* y read and written (24 each), x 8 */
    assert_true(c.flops == 24 && c.bytes == 4.0 * 56);
    /* outer product mean: a [1, 2, 3, 2] -> [1, 3, 3, 2, 2]: 2 S (N co)^2 */
    c = tf_cost_opm_outer(1, 2, 3, 2);
    assert_true(c.flops == 144 && c.bytes == 4.0 * (12 + 36));
    c = tf_cost_opm_bwd(1, 2, 3, 2);
    assert_true(c.flops == 144 + 36 && c.bytes == 4.0 * (36 + 24));
    c = tf_cost_embed_fwd(6, 4);
    assert_true(c.flops == 0 && c.bytes == 4.0 * (6 + 48));
}

static void config(tf_config *c, int impl) {
    tf_config_default(c);
    c->batch = 1;
    c->seq_len = 8;
    c->n_seqs = 3;
    c->n_blocks = 2;
    c->msa_dim = 16;
    c->pair_dim = 16;
    c->outer_dim = 8;
    c->impl = (tf_impl)impl;
    c->fusion = tf_fusion_for_impl((tf_impl)impl);
    c->backend = TF_BACKEND_CPU;
    c->threads = 1;
    c->warmup_steps = 0;
}

/* One profiled step; sums[phase][is_gemm] of the recorded FLOPs. Every op
 * that ran must carry a cost, and the arena's share per region adds up. */
static void step_flops(const tf_config *c, double sums[4][2]) {
    char err[256];
    tf_prof_opts o;
    memset(&o, 0, sizeof o);
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    tf_trainer *t;
    assert_int_equal(tf_trainer_create(&t, c, err, sizeof err), TF_OK);
    tf_trainer_set_prof(t, p);
    tf_step_stats st;
    assert_int_equal(tf_trainer_step(t, 0, &st), TF_OK);
    memset(sums, 0, 4 * 2 * sizeof sums[0][0]);
    size_t costed = 0;
    for (size_t i = 0; i < p->nopc; i++) {
        const prof_opcost *e = &p->opc[i];
        if (e->launches) assert_true(e->has_cost); /* every op that ran is costed */
        if (!e->has_cost) continue;
        costed++;
        const char *path = p->paths[e->path].path;
        int ph = -1;
        for (int k = 0; k < 4; k++)
            if (strncmp(path, prof_phase_names[k], strlen(prof_phase_names[k])) == 0) ph = k;
        assert_true(ph >= 0);
        sums[ph][strncmp(p->names.strs[e->name], "sgemm", 5) == 0] += e->flops;
    }
    assert_true(costed > 20);
    /* the arena: the forward's saved activations and the backward's working
     * set above them are the planned arena, to the byte */
    int64_t kept = -1;
    size_t bwd = 0;
    for (uint32_t id = 1; id < p->npaths; id++) {
        if (!p->paths[id].arena_seen) continue;
        if (strcmp(p->paths[id].path, "forward_pass") == 0) kept = p->paths[id].arena_kept;
        if (strcmp(p->paths[id].path, "backward_pass") == 0) bwd = p->paths[id].arena_hi;
    }
    assert_true(kept > 0 && bwd > 0);
    assert_true((size_t)kept + bwd == tf_trainer_arena_bytes(t));
    tf_trainer_set_prof(t, NULL);
    tf_trainer_destroy(t);
    tf_prof_destroy(p);
}

/* v1 materialises every product as a GEMM, as tf_flops_forward counts them:
 * the forward's GEMM FLOPs are that estimate exactly, and the backward's are
 * twice it (an input and a weight gradient per product) less the one input
 * gradient nobody needs, the pair features' [B N N, 65] x [65, cz]. */
static void v1_totals_match_estimate(void **s) {
    (void)s;
    tf_config c;
    config(&c, 1);
    double sums[4][2];
    step_flops(&c, sums);
    double fwd = tf_flops_forward(&c);
    double pair_in = 2.0 * c.batch * c.seq_len * c.seq_len * c.pair_input_dim * c.pair_dim;
    assert_true(sums[1][1] == fwd);
    assert_true(sums[2][1] == 2.0 * fwd - pair_in);
    /* the rest (norms, softmax, elementwise, the optimizer) is small beside it */
    assert_true(sums[1][0] > 0 && sums[1][0] < 0.25 * fwd);
    assert_true(sums[3][0] > 0 && sums[3][0] <= 14.0 * (double)tf_param_count_floats(&c));
}

/* v3 moves the attention products into fused ops and composes the outer
 * product weight-first: its GEMMs do less than the estimate, never more,
 * and every op, fused ones included, is costed (step_flops). */
static void v3_costed_and_below_estimate(void **s) {
    (void)s;
    tf_config c;
    config(&c, 3);
    double sums[4][2];
    step_flops(&c, sums);
    double fwd = tf_flops_forward(&c);
    assert_true(sums[1][1] > 0 && sums[1][1] < fwd);
    assert_true(sums[2][1] > 0 && sums[2][1] < 2.0 * fwd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_counts),
        cmocka_unit_test(attention_counts),
        cmocka_unit_test(norm_and_elementwise_counts),
        cmocka_unit_test(v1_totals_match_estimate),
        cmocka_unit_test(v3_costed_and_below_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
