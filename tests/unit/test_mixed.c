/* Mixed precision (--precision bf16 / fp16) against fp32, from the same
 * weights and batch, at every level, on the CPU backend: loss, predictions
 * and all gradients together; fp16's loss scaling and its skipped step; the
 * planned arena of a half run is the one it reaches.
 *
 * Tolerance. A half run stores every activation but the residual streams in
 * the half type and computes in fp32, so each stored value carries one
 * rounding, relative error uniform in [-u, u] (bf16 u = 2^-8 = 3.9e-3, fp16
 * u = 2^-11 = 4.9e-4), std u / sqrt(3). A gradient element is a chain of
 * about 2 x 9 modules x 2 blocks, a few stored tensors each: k ~ 40-80
 * independent roundings add in quadrature, sqrt(k) u / sqrt(3) ~ 1.4e-2 to
 * 2e-2 (bf16) relative on all gradients together, less on the loss (a mean
 * over B N^2 terms averages the roundings out). The bounds are the targets of
 * the design, loss 1e-2 and gradients 3e-2 (bf16), 1.5-2x above that
 * estimate; fp16's are 8x tighter (its u is 8x smaller) as long as nothing
 * leaves its range: the gradients are seeded with the loss scale 2^16 and
 * undone exactly (a power of two). A half path that is wrong (a stale or
 * missing rounding is not wrong; a wrong element, offset or type is) moves
 * the gradients by O(1). */
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

static void odd_config(tf_config *c, tf_impl impl) {
    tf_config_default(c);
    c->batch = 3;
    c->seq_len = 23;
    c->n_seqs = 5;
    c->n_blocks = 2;
    c->impl = impl;
    c->fusion = tf_fusion_for_impl(impl);
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
}

static tf_test_grads run(const tf_config *c) {
    char err[512];
    tf_test_grads r;
    if (tf_test_grads_run(c, 1, &r, err, sizeof err)) fail_msg("%s", err);
    return r;
}

/* fp32, then bf16 and fp16 from the same weights and batch, at each level */
static void test_half_against_fp32(void **s) {
    (void)s;
    static const char *lv[] = {"", "v1", "v2", "v3"};
    static const tf_precision half[2] = {TF_PREC_BF16, TF_PREC_FP16};
    /* bf16's bounds; fp16's u is 8x smaller */
    static const double loss_tol[2] = {1e-2, 1e-2 / 8}, grad_tol[2] = {3e-2, 3e-2 / 8};
    for (int impl = 1; impl <= 3; impl++) {
        tf_config c;
        odd_config(&c, (tf_impl)impl);
        tf_test_grads ref = run(&c);
        for (int k = 0; k < 2; k++) {
            c.precision = half[k];
            tf_test_grads h = run(&c);
            const long nz = (long)c.batch * c.seq_len * c.seq_len;
            const double le = fabs((double)h.loss - ref.loss) / fabs(ref.loss);
            const double pe = tf_test_rel_l2(h.pred, ref.pred, (size_t)nz);
            const double ge = tf_test_rel_l2(h.grad, ref.grad, tf_param_count_floats(&c));
            printf("  %s %s: loss %.3e  pred %.3e  gradients %.3e  arena %.3f of fp32's\n",
                   lv[impl], tf_precision_name(half[k]), le, pe, ge,
                   (double)h.arena / ref.arena);
            assert_true(le <= loss_tol[k]);
            assert_true(ge <= grad_tol[k]);
            /* the plan is exact in the half type too */
            assert_int_equal(h.arena, h.arena_peak);
            assert_true(h.arena < ref.arena);
            tf_test_grads_free(&h);
        }
        tf_test_grads_free(&ref);
    }
}

/* A loss scale that overflows fp16 skips the step: parameters, moments and
 * the optimizer's step count stay, the scale halves; the next step at a
 * sane scale updates. */
static void test_fp16_overflow_skips(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    c.precision = TF_PREC_FP16;
    c.warmup_steps = 0;
    char err[512];
    tf_trainer *t;
    if (tf_trainer_create(&t, &c, err, sizeof err) != TF_OK) fail_msg("%s", err);
    const size_t np = tf_param_count_floats(&c);
    float *p0 = malloc(np * sizeof *p0), *p1 = malloc(np * sizeof *p1);
    float *m1 = malloc(np * sizeof *m1);
    float scale;
    long clean, skipped, step;
    tf_trainer_get_loss_scale(t, &scale, &clean, &skipped);
    assert_true(scale == 65536.0f && clean == 0 && skipped == 0);

    tf_trainer_set_loss_scale(t, 0x1p100f, 0, 0); /* gradients past 65504 */
    tf_trainer_get_params(t, p0);
    tf_step_stats st;
    assert_int_equal(tf_trainer_step(t, 0, &st), TF_OK);
    assert_int_equal(st.skipped, 1);
    assert_true(st.loss_scale == 0x1p100f);
    tf_trainer_get_params(t, p1);
    tf_trainer_get_adam(t, m1, NULL, &step);
    assert_memory_equal(p0, p1, np * sizeof *p0);
    assert_int_equal(step, 0);
    for (size_t i = 0; i < np; i++) assert_true(m1[i] == 0.0f);
    tf_trainer_get_loss_scale(t, &scale, &clean, &skipped);
    assert_true(scale == 0x1p99f && clean == 0 && skipped == 1);

    tf_trainer_set_loss_scale(t, 65536.0f, 0, skipped);
    assert_int_equal(tf_trainer_step(t, 1, &st), TF_OK);
    assert_int_equal(st.skipped, 0);
    tf_trainer_get_params(t, p1);
    tf_trainer_get_adam(t, NULL, NULL, &step);
    assert_int_equal(step, 1);
    assert_true(memcmp(p0, p1, np * sizeof *p0) != 0);
    tf_trainer_get_loss_scale(t, &scale, &clean, &skipped);
    assert_true(scale == 65536.0f && clean == 1 && skipped == 1);
    free(p0), free(p1), free(m1);
    tf_trainer_destroy(t);
}

/* bf16 and the fp32 precisions keep the scale at 1 and never skip */
static void test_bf16_unscaled(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    c.precision = TF_PREC_BF16;
    char err[512];
    tf_trainer *t;
    if (tf_trainer_create(&t, &c, err, sizeof err) != TF_OK) fail_msg("%s", err);
    tf_step_stats st;
    assert_int_equal(tf_trainer_step(t, 0, &st), TF_OK);
    assert_int_equal(st.skipped, 0);
    assert_true(st.loss_scale == 1.0f);
    tf_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_against_fp32),
        cmocka_unit_test(test_fp16_overflow_skips),
        cmocka_unit_test(test_bf16_unscaled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
