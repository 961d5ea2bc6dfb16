/* Training-step behaviour: AdamW against a hand-computed first step,
 * determinism, synthetic data, memory planning errors, non-finite loss. */
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
#include "train/nonfinite.h"

static void small_config(tf_config *c, int impl) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 9;
    c->n_seqs = 3;
    c->n_blocks = 1;
    c->msa_dim = 16;
    c->pair_dim = 16;
    c->impl = (tf_impl)impl;
    c->fusion = tf_fusion_for_impl((tf_impl)impl);
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
    c->warmup_steps = 1;
}

static tf_batch alloc_batch(const tf_config *c) {
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    tf_batch b = {c->batch, c->n_seqs, c->seq_len,
                  malloc(sizeof(int32_t) * c->batch * c->n_seqs * c->seq_len),
                  malloc(sizeof(float) * nz * 65), malloc(sizeof(float) * nz)};
    return b;
}

/* First AdamW step from zero moments: m_hat = g, v_hat = g^2, so
 * p1 = p0 (1 - lr wd) - lr g / (|g| + eps) for every trainable parameter, and
 * pair_norm_outer (no gradient) is left exactly as it was. */
static void test_adamw_first_step(void **s) {
    (void)s;
    tf_config c;
    small_config(&c, 3);
    c.learning_rate = 1e-2f;
    char err[256];
    tf_trainer *t;
    assert_int_equal(tf_trainer_create(&t, &c, err, sizeof err), TF_OK);
    size_t np = tf_param_count_floats(&c), nt = tf_param_count_tensors(&c);
    tf_param_info *tab = calloc(nt, sizeof *tab);
    tf_param_table(&c, tab);
    float *p0 = tf_test_weights(&c, 5), *g = malloc(np * 4), *p1 = malloc(np * 4);
    tf_trainer_set_params(t, p0);
    tf_batch b = alloc_batch(&c);
    tf_data_batch(c.seed, 0, &b);
    float loss;
    assert_int_equal(tf_trainer_grad(t, &b, &loss, NULL), TF_OK);
    tf_trainer_get_grads(t, g);
    tf_step_stats st;
    assert_int_equal(tf_trainer_step(t, 0, &st), TF_OK); /* step 0 uses the same batch */
    assert_true(st.loss == loss);
    tf_trainer_get_params(t, p1);
    const double lr = 1e-2, wd = 0.01, eps = 1e-8;
    double maxerr = 0;
    for (size_t i = 0; i < nt; i++)
        for (size_t k = tab[i].offset; k < tab[i].offset + tab[i].count; k++) {
            if (!tab[i].trainable) {
                assert_true(p1[k] == p0[k]);
                continue;
            }
            double want = p0[k] * (1 - lr * wd) - lr * g[k] / (fabs(g[k]) + eps);
            double e = fabs(p1[k] - want);
            if (e > maxerr) maxerr = e;
        }
    /* fp32: p ~ O(1) rounded once or twice (6e-8 each) plus the ratio m/sqrt(v)
     * (1 ulp): well under 1e-6 */
    printf("  max |p1 - hand-computed| = %.3e\n", maxerr);
    assert_true(maxerr < 1e-6);
    long step;
    tf_trainer_get_adam(t, NULL, NULL, &step);
    assert_int_equal(step, 1);
    free(p0), free(g), free(p1), free(tab), free(b.tokens), free(b.pair), free(b.target);
    tf_trainer_destroy(t);
}

static void test_determinism(void **s) {
    (void)s;
    for (int impl = 1; impl <= 3; impl++) {
        float losses[2][4];
        for (int run = 0; run < 2; run++) {
            tf_config c;
            small_config(&c, impl);
            char err[256];
            tf_trainer *t;
            assert_int_equal(tf_trainer_create(&t, &c, err, sizeof err), TF_OK);
            for (int k = 0; k < 4; k++) {
                tf_step_stats st;
                assert_int_equal(tf_trainer_step(t, k, &st), TF_OK);
                losses[run][k] = st.loss;
            }
            tf_trainer_destroy(t);
        }
        assert_memory_equal(losses[0], losses[1], sizeof losses[0]);
        assert_true(losses[0][0] != losses[0][1]); /* the model is actually training */
    }
}

static void test_synthetic_data(void **s) {
    (void)s;
    int32_t tok[3 * 5];
    float pair[5 * 5 * 65], tgt[25], pair2[5 * 5 * 65];
    tf_data_sample(1, 17, 3, 5, tok, pair, tgt);
    double mean = 0, var = 0;
    for (int i = 0; i < 15; i++) assert_true(tok[i] >= 0 && tok[i] < 21);
    for (int i = 0; i < 25; i++) assert_true(tgt[i] >= 0 && tgt[i] < 20);
    for (int i = 0; i < 5 * 5 * 65; i++) mean += pair[i];
    mean /= 5 * 5 * 65;
    for (int i = 0; i < 5 * 5 * 65; i++) var += (pair[i] - mean) * (pair[i] - mean);
    var /= 5 * 5 * 65;
    assert_true(fabs(mean) < 0.15 && fabs(var - 1) < 0.2); /* 1625 normals: 3 sigma bounds */
    tf_data_sample(1, 17, 3, 5, tok, pair2, tgt);
    assert_memory_equal(pair, pair2, sizeof pair); /* a pure function of (seed, index) */
    tf_data_sample(2, 17, 3, 5, tok, pair2, tgt);
    assert_memory_not_equal(pair, pair2, sizeof pair);
    long idx[8];
    tf_data_step_indices(42, 3, 8, idx);
    for (int i = 0; i < 8; i++) {
        assert_true(idx[i] >= 0 && idx[i] < TF_DATASET_SIZE);
        for (int j = 0; j < i; j++) assert_true(idx[i] != idx[j]);
    }
}

static void test_too_large(void **s) {
    (void)s;
    tf_config c;
    tf_config_default(&c);
    c.backend = TF_BACKEND_CPU;
    c.batch = 64;
    c.seq_len = 512;
    char err[512] = "";
    tf_trainer *t = NULL;
    assert_int_equal(tf_trainer_create(&t, &c, err, sizeof err), TF_ERR_NOMEM);
    assert_null(t);
    assert_non_null(strstr(err, "GB"));
    assert_null(strchr(err, '\n'));
}

static void test_nonfinite(void **s) {
    (void)s;
    tf_config c;
    small_config(&c, 2);
    char err[256];
    tf_trainer *t;
    assert_int_equal(tf_trainer_create(&t, &c, err, sizeof err), TF_OK);
    float *p = tf_test_weights(&c, 1);
    for (size_t i = 0; i < 21 * 16; i++) p[i] = NAN; /* the whole msa_embedding */
    tf_trainer_set_params(t, p);
    tf_step_stats st;
    assert_int_equal(tf_trainer_step(t, 0, &st), TF_ERR_NONFINITE);
    /* the step stopped after its forward: the NaN weights are found as they
     * were, not the update's */
    tf_nonfinite_why w;
    tf_nonfinite_explain(t, &w);
    assert_true(w.held);
    assert_int_equal(w.input_bad, 0);
    assert_int_equal(w.weights_bad, 21 * 16);
    assert_string_equal(w.weights_tensor, "msa_embedding.weight");
    char msg[640];
    tf_nonfinite_describe(&w, c.precision, 1, "initial weights", 0, msg, sizeof msg);
    assert_non_null(strstr(msg, "336 of the"));
    assert_non_null(strstr(msg, "initial weights"));
    assert_null(strstr(msg, "learning-rate"));
    tf_nonfinite_describe(&w, c.precision, 0, "initial weights", 7, msg, sizeof msg);
    assert_non_null(strstr(msg, "update of global step 6"));
    assert_non_null(strstr(msg, "--learning-rate"));
    free(p);
    tf_trainer_destroy(t);

    /* a non-finite sample, with finite weights: the input is named */
    assert_int_equal(tf_trainer_create(&t, &c, err, sizeof err), TF_OK);
    tf_batch b = alloc_batch(&c);
    tf_data_batch(c.seed, 0, &b);
    b.pair[(size_t)9 * 9 * 65 + 5] = INFINITY; /* sample 1 */
    assert_int_equal(tf_trainer_step_batch(t, &b, &st), TF_ERR_NONFINITE);
    tf_nonfinite_explain(t, &w);
    assert_int_equal(w.input_bad, 1);
    assert_int_equal(w.input_sample, 1);
    assert_int_equal(w.weights_bad, 0);
    tf_nonfinite_describe(&w, c.precision, 1, "initial weights", 0, msg, sizeof msg);
    assert_non_null(strstr(msg, "input sample itself is not finite"));
    assert_non_null(strstr(msg, "sample 1's pair features"));
    free(b.tokens);
    free(b.pair);
    free(b.target);
    tf_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_first_step), cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_synthetic_data),   cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
