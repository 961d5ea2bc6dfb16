/* fp16's dynamic loss scale (src/train/loss_scale.c) against PyTorch
 * GradScaler's defaults, written out here as numbers rather than taken from
 * the header: start at 2^16; a step with an inf/NaN gradient is skipped, the
 * scale halves and the clean count restarts; the 2000th clean step in a row
 * doubles the scale (not the 1999th, not the 2001st) and restarts the count.
 * A disabled scaler (every other precision) stays at 1 and skips nothing.
 * Through the trainer: an fp16 trainer starts at 2^16 and counts its clean
 * steps, an fp32 one stays at 1 and ignores tf_trainer_set_loss_scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tinyfold.h"
#include "train/loss_scale.h"

static void assert_float_bits(float got, float want) {
    if (memcmp(&got, &want, sizeof got) != 0) fail_msg("scale %.9g, expected %.9g", got, want);
}

static void test_defaults(void **state) {
    (void)state;
    /* GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000) */
    assert_float_bits(TF_LOSS_SCALE_INIT, 65536.0f);
    assert_float_bits(TF_LOSS_SCALE_GROWTH, 2.0f);
    assert_float_bits(TF_LOSS_SCALE_BACKOFF, 0.5f);
    assert_int_equal(TF_LOSS_SCALE_INTERVAL, 2000);
    tf_loss_scaler s;
    tf_loss_scaler_init(&s, 1);
    assert_true(s.enabled);
    assert_float_bits(s.scale, 65536.0f);
    assert_int_equal(s.clean_steps, 0);
    assert_int_equal(s.skipped, 0);
}

static void test_growth_at_2000(void **state) {
    (void)state;
    tf_loss_scaler s;
    tf_loss_scaler_init(&s, 1);
    for (int i = 1; i < 2000; i++) {
        assert_int_equal(tf_loss_scaler_update(&s, 0), 0);
        assert_int_equal(s.clean_steps, i);
    }
    assert_float_bits(s.scale, 65536.0f); /* 1999 clean steps: not yet */
    assert_int_equal(tf_loss_scaler_update(&s, 0), 0);
    assert_float_bits(s.scale, 131072.0f); /* the 2000th doubles it */
    assert_int_equal(s.clean_steps, 0);
    for (int i = 1; i < 2000; i++)
        tf_loss_scaler_update(&s, 0);
    assert_float_bits(s.scale, 131072.0f);
    tf_loss_scaler_update(&s, 0);
    assert_float_bits(s.scale, 262144.0f); /* and again 2000 later */
    assert_int_equal(s.skipped, 0);
}

static void test_backoff_and_skips(void **state) {
    (void)state;
    tf_loss_scaler s;
    tf_loss_scaler_init(&s, 1);
    for (int i = 0; i < 1500; i++)
        tf_loss_scaler_update(&s, 0);
    assert_int_equal(tf_loss_scaler_update(&s, 1), 1); /* skipped */
    assert_float_bits(s.scale, 32768.0f);
    assert_int_equal(s.clean_steps, 0); /* the count starts again */
    assert_int_equal(s.skipped, 1);
    assert_int_equal(tf_loss_scaler_update(&s, 1), 1);
    assert_int_equal(tf_loss_scaler_update(&s, 1), 1);
    assert_float_bits(s.scale, 8192.0f);
    assert_int_equal(s.skipped, 3);
    /* 1500 clean steps before the overflow do not count towards growth */
    for (int i = 1; i < 2000; i++)
        assert_int_equal(tf_loss_scaler_update(&s, 0), 0);
    assert_float_bits(s.scale, 8192.0f);
    tf_loss_scaler_update(&s, 0);
    assert_float_bits(s.scale, 16384.0f);
    assert_int_equal(s.skipped, 3); /* clean steps leave the skip count alone */
    /* halving is exact down to the smallest normal float and below */
    tf_loss_scaler_init(&s, 1);
    for (int i = 0; i < 16; i++)
        tf_loss_scaler_update(&s, 1);
    assert_float_bits(s.scale, 1.0f);
    tf_loss_scaler_update(&s, 1);
    assert_float_bits(s.scale, 0.5f);
    assert_int_equal(s.skipped, 17);
}

static void test_disabled(void **state) {
    (void)state;
    tf_loss_scaler s;
    tf_loss_scaler_init(&s, 0);
    assert_false(s.enabled);
    assert_float_bits(s.scale, 1.0f);
    for (int i = 0; i < 4100; i++)
        assert_int_equal(tf_loss_scaler_update(&s, i % 3 == 0), 0);
    assert_float_bits(s.scale, 1.0f);
    assert_int_equal(s.clean_steps, 0);
    assert_int_equal(s.skipped, 0);
}

static tf_trainer *tiny_trainer(tf_precision p) {
    tf_config c;
    tf_config_default(&c);
    c.msa_dim = 8;
    c.pair_dim = 8;
    c.n_blocks = 1;
    c.n_heads_msa = 2;
    c.n_heads_pair = 2;
    c.outer_dim = 4;
    c.batch = 1;
    c.seq_len = 4;
    c.n_seqs = 2;
    c.backend = TF_BACKEND_CPU;
    c.threads = 1;
    c.precision = p;
    tf_trainer *t = NULL;
    char err[512] = "";
    tf_status st = tf_trainer_create(&t, &c, err, sizeof err);
    if (st != TF_OK) fail_msg("tf_trainer_create (%s): %s", tf_precision_name(p), err);
    return t;
}

/* The trainer's steps report the scale they used and count into the scaler. */
static void test_trainer(void **state) {
    (void)state;
    tf_trainer *h = tiny_trainer(TF_PREC_FP16), *f = tiny_trainer(TF_PREC_FP32);
    float s;
    long clean, skipped;
    tf_trainer_get_loss_scale(h, &s, &clean, &skipped);
    assert_float_bits(s, 65536.0f);
    long steps = 3, seen_skips = 0;
    for (long i = 0; i < steps; i++) {
        tf_step_stats a, b;
        assert_int_equal(tf_trainer_step(h, i, &a), TF_OK);
        assert_int_equal(tf_trainer_step(f, i, &b), TF_OK);
        assert_true(a.loss_scale > 0);
        seen_skips += a.skipped != 0;
        assert_float_bits(b.loss_scale, 1.0f);
        assert_int_equal(b.skipped, 0);
    }
    tf_trainer_get_loss_scale(h, &s, &clean, &skipped);
    assert_int_equal(skipped, seen_skips);
    assert_int_equal(clean + skipped, steps); /* far from 2000: no growth yet */
    tf_trainer_set_loss_scale(h, 256.0f, 1999, 4);
    tf_trainer_get_loss_scale(h, &s, &clean, &skipped);
    assert_float_bits(s, 256.0f);
    assert_int_equal(clean, 1999);
    assert_int_equal(skipped, 4);
    tf_step_stats a;
    assert_int_equal(tf_trainer_step(h, steps, &a), TF_OK);
    assert_float_bits(a.loss_scale, 256.0f); /* the scale the step used */
    tf_trainer_get_loss_scale(h, &s, &clean, &skipped);
    if (a.skipped)
        assert_float_bits(s, 128.0f);
    else
        assert_float_bits(s, 512.0f); /* its 2000th clean step */
    assert_int_equal(clean, 0);
    /* fp32: nothing to set */
    tf_trainer_set_loss_scale(f, 256.0f, 7, 3);
    tf_trainer_get_loss_scale(f, &s, &clean, &skipped);
    assert_float_bits(s, 1.0f);
    assert_int_equal(clean, 0);
    assert_int_equal(skipped, 0);
    tf_trainer_destroy(h);
    tf_trainer_destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_growth_at_2000),
        cmocka_unit_test(test_backoff_and_skips),
        cmocka_unit_test(test_disabled),
        cmocka_unit_test(test_trainer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
