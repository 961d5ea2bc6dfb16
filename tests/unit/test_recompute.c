/* --recompute blocks and modules: the backward runs the forward again from the
 * kept inputs, with the same ops on the same bits, so the loss, predictions and
 * every parameter gradient are bit-for-bit those of --recompute none, on every
 * level. The planned arena must shrink (the test fails if nothing is freed).
 * --chunk-size K: the same comparison per chunk size (see the assertion for
 * which compositions are bit-exact). */
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
#include "train/memplan.h"

typedef tf_test_grads result;

static void odd_config(tf_config *c, tf_impl impl) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 9;
    c->n_seqs = 5;
    c->n_blocks = 2;
    c->msa_dim = 12;  /* head dim 3 */
    c->pair_dim = 20; /* head dim 5 */
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
    c->impl = impl;
    c->fusion = tf_fusion_for_impl(impl);
}

static result run(const tf_config *c) {
    char err[512];
    result r;
    /* twice: the second step must not depend on what the first left behind */
    if (tf_test_grads_run(c, 2, &r, err, sizeof err)) fail_msg("%s", err);
    /* the plan is exact: the steps reach the planned arena, not less */
    if (r.arena_peak != r.arena)
        fail_msg("recompute %d v%d: the steps' arena peak %zu, planned %zu", (int)c->recompute,
                 (int)c->impl, r.arena_peak, r.arena);
    size_t planned = 0;
    assert_int_equal(tf_trainer_plan(c, &planned, err, sizeof err), TF_OK);
    assert_true(planned > r.arena);
    return r;
}

static void assert_same_bits(const tf_config *c, const result *ref, const result *x,
                             const char *label) {
    size_t np = tf_param_count_floats(c);
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    if (memcmp(&ref->loss, &x->loss, sizeof x->loss))
        fail_msg("%s v%d: loss %.9g vs %.9g", label, (int)c->impl, (double)x->loss,
                 (double)ref->loss);
    if (memcmp(ref->pred, x->pred, sizeof(float) * (size_t)nz))
        fail_msg("%s v%d: predictions differ", label, (int)c->impl);
    for (size_t i = 0; i < np; i++)
        if (memcmp(&ref->grad[i], &x->grad[i], sizeof(float)))
            fail_msg("%s v%d: gradient float %zu: %.9g vs %.9g", label, (int)c->impl, i,
                     (double)x->grad[i], (double)ref->grad[i]);
}

static void test_recompute_bits(void **s) {
    (void)s;
    for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
        tf_config c;
        odd_config(&c, (tf_impl)lv);
        result ref = run(&c);
        static const tf_recompute modes[2] = {TF_RECOMPUTE_BLOCKS, TF_RECOMPUTE_MODULES};
        static const char *names[2] = {"blocks", "modules"};
        size_t last = ref.arena;
        for (int m = 0; m < 2; m++) {
            c.recompute = modes[m];
            result x = run(&c);
            assert_same_bits(&c, &ref, &x, names[m]);
            if (!(x.arena < last))
                fail_msg("%s v%d: arena %zu not below %zu", names[m], lv, x.arena, last);
            last = x.arena;
            tf_test_grads_free(&x);
        }
        tf_test_grads_free(&ref);
    }
}

/* The advice of a refusal and --memory-budget's choice follow the plans. */
static void test_memplan(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    char err[256], msg[256];
    size_t plan[3];
    for (int m = 0; m < 3; m++) {
        tf_config x = c;
        x.recompute = (tf_recompute)m;
        assert_int_equal(tf_trainer_plan(&x, &plan[m], err, sizeof err), TF_OK);
    }
    assert_true(plan[2] < plan[1] && plan[1] < plan[0]);
    tf_memplan_suggest(&c, (double)plan[1], msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute blocks"));
    tf_memplan_suggest(&c, (double)plan[1] - 1, msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute modules"));
    tf_memplan_suggest(&c, (double)plan[2] - 1, msg, sizeof msg);
    assert_non_null(strstr(msg, "the least is"));
    tf_memplan_suggest(&c, -1.0, msg, sizeof msg);
    assert_non_null(strstr(msg, "--recompute blocks needs"));
    assert_non_null(strstr(msg, "--recompute modules needs"));
    size_t b = 0;
    tf_config x = c;
    assert_int_equal(tf_memplan_choose(&x, (double)plan[0], &b, err, sizeof err), TF_OK);
    assert_int_equal(x.recompute, TF_RECOMPUTE_NONE);
    assert_int_equal(tf_memplan_choose(&x, (double)plan[0] - 1, &b, err, sizeof err), TF_OK);
    assert_int_equal(x.recompute, TF_RECOMPUTE_BLOCKS);
    assert_true(b == plan[1]);
    assert_int_equal(tf_memplan_choose(&x, 1.0, &b, err, sizeof err), TF_ERR_NOMEM);
    assert_int_equal(x.recompute, TF_RECOMPUTE_MODULES);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recompute_bits),
        cmocka_unit_test(test_memplan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
