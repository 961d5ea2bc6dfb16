/* v1 = v2 = v3: every implementation level and every fusion switch computes the
 * same function. Loss, predictions and every parameter gradient are compared
 * with the v1 (fully unfused, eager) composition at an odd shape.
 *
 * Tolerance: the compositions differ only in summation order (fused vs separate
 * GEMMs, streaming vs materialised softmax, fused epilogues). One fp32 rounding
 * is 6e-8 relative; a gradient here passes through ~10 modules per block, each a
 * few dot products of length <= 128, so differences of a few 1e-7..1e-6 relative
 * per tensor are expected. We accept ||g - g_v1|| / ||g_v1|| <= 2e-5 per tensor
 * (and 1e-5 on the loss), 10x over the largest difference measured, and far
 * below anything a wrong composition gives (>= 1e-3). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_testutil.h"
#include "tinyfold.h"

typedef tf_test_grads result;

static void odd_config(tf_config *c) {
    tf_config_default(c);
    c->batch = 3;
    c->seq_len = 7;
    c->n_seqs = 5;
    c->n_blocks = 2;
    c->msa_dim = 12;  /* head dim 3 */
    c->pair_dim = 20; /* head dim 5 */
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
}

static result run(const tf_config *c) {
    char err[512];
    result r;
    if (tf_test_grads_run(c, 1, &r, err, sizeof err)) fail_msg("%s", err);
    return r;
}

static double worst;

static void compare(const tf_config *c, const result *ref, const result *x, const char *label) {
    size_t nt = tf_param_count_tensors(c);
    tf_param_info *t = calloc(nt, sizeof *t);
    tf_param_table(c, t);
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    double lerr = fabs((double)x->loss - ref->loss) / fabs(ref->loss);
    double perr = tf_test_rel_l2(x->pred, ref->pred, (size_t)nz), gmax = 0;
    const char *gworst = "";
    for (size_t i = 0; i < nt; i++) {
        double e = tf_test_rel_l2(x->grad + t[i].offset, ref->grad + t[i].offset, t[i].count);
        if (e > gmax) gmax = e, gworst = t[i].name;
        if (e > 2e-5) printf("  %s: %s rel err %.3e\n", label, t[i].name, e);
    }
    printf("  %-34s loss %.2e pred %.2e worst grad %.2e (%s)\n", label, lerr, perr, gmax, gworst);
    if (gmax > worst) worst = gmax;
    assert_true(lerr <= 1e-5);
    assert_true(perr <= 2e-5);
    assert_true(gmax <= 2e-5);
    free(t);
}

static void test_levels_and_switches(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c);
    c.impl = TF_IMPL_V1;
    c.fusion = tf_fusion_for_impl(TF_IMPL_V1);
    result ref = run(&c);
    struct { tf_impl impl; const char *name; int flip; } cases[] = {
        {TF_IMPL_V2, "v2", -1}, {TF_IMPL_V3, "v3", -1},
        {TF_IMPL_V1, "v1 +qkv_msa", 0}, {TF_IMPL_V1, "v1 +qkv_triangle", 1},
        {TF_IMPL_V1, "v1 +flash", 2}, {TF_IMPL_V1, "v1 +triangle", 3},
        {TF_IMPL_V2, "v2 -qkv_msa", 0}, {TF_IMPL_V2, "v2 -qkv_triangle", 1},
        {TF_IMPL_V2, "v2 -flash", 2}, {TF_IMPL_V2, "v2 -triangle", 3},
        {TF_IMPL_V3, "v3 -flash", 2}, {TF_IMPL_V3, "v3 -triangle", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.impl = cases[i].impl;
        c.fusion = tf_fusion_for_impl(cases[i].impl);
        int *f[4] = {&c.fusion.qkv_msa, &c.fusion.qkv_triangle, &c.fusion.flash, &c.fusion.triangle};
        if (cases[i].flip >= 0) *f[cases[i].flip] ^= 1;
        result x = run(&c);
        compare(&c, &ref, &x, cases[i].name);
        tf_test_grads_free(&x);
    }
    printf("  largest per-tensor gradient difference from v1: %.2e\n", worst);
    tf_test_grads_free(&ref);
}

/* --disable-all-fusion at v2 is v1: the same arena, byte for byte. */
static void test_disable_all_is_v1(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c);
    char err[256];
    tf_trainer *a, *b;
    c.impl = TF_IMPL_V1;
    c.fusion = tf_fusion_for_impl(TF_IMPL_V1);
    assert_int_equal(tf_trainer_create(&a, &c, err, sizeof err), TF_OK);
    c.impl = TF_IMPL_V2;
    assert_int_equal(tf_trainer_create(&b, &c, err, sizeof err), TF_OK);
    assert_int_equal(tf_trainer_arena_bytes(a), tf_trainer_arena_bytes(b));
    tf_trainer_destroy(b);
    c.fusion = tf_fusion_for_impl(TF_IMPL_V2);
    assert_int_equal(tf_trainer_create(&b, &c, err, sizeof err), TF_OK);
    assert_true(tf_trainer_arena_bytes(b) < tf_trainer_arena_bytes(a)); /* flash saves memory */
    tf_trainer_destroy(a);
    tf_trainer_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_and_switches),
        cmocka_unit_test(test_disable_all_is_v1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
