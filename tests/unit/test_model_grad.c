/* Finite-difference checks of the model's backward pass.
 *
 * For every parameter tensor P (so every module's backward, and through the
 * chain every module's input gradient) we compare the analytic directional
 * derivative g.v with the central difference (L(p + h v) - L(p - h v)) / 2h
 * along two unit directions: v = g/|g| (catches wrong magnitudes) and a random
 * +-1 direction (catches errors orthogonal to g). Weights are drawn larger than
 * the 0.02 init of docs/model.md section 7 (and LayerNorm gamma/beta away from
 * 1/0) so that every tensor has a gradient well above fp32 noise.
 *
 * Tolerance: the loss is a mean of 50 fp32 terms of size O(30), so one
 * evaluation carries an absolute rounding error of about
 * eps_L ~ 30 * 6e-8 * sqrt(50) ~ 1.3e-5; the central difference then has a
 * rounding error eps_L / h ~ 6e-3 at h = 2e-3. Its truncation error h^2 |L'''|/6
 * was measured: at h = 1e-2 the largest tensors were off by up to 4% (curvature
 * of the larger test weights), at 1e-3 by < 0.1%, so ~0.2% at 2e-3.
 * We accept |fd - g.v| <= 2e-2 |g.v| + 1e-2: a wrong backward (missing term,
 * wrong transpose, factor) is off by O(|g.v|). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tinyfold.h"
#include "model_testutil.h"
#include "train/rng.h"

static void tiny_config(tf_config *c, int impl) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 5;
    c->n_seqs = 3;
    c->n_blocks = 2;
    c->msa_dim = 8;
    c->pair_dim = 12;
    c->outer_dim = 4;
    c->impl = (tf_impl)impl;
    c->fusion = tf_fusion_for_impl((tf_impl)impl);
    c->backend = TF_BACKEND_CPU;
    c->threads = 1;
    c->warmup_steps = 0;
}

static double loss_at(tf_trainer *tr, const tf_batch *b, const float *p) {
    tf_trainer_set_params(tr, p);
    float loss;
    assert_int_equal(tf_trainer_grad(tr, b, &loss, NULL), TF_OK);
    return loss;
}

static void fd_check(int impl) {
    tf_config c;
    tiny_config(&c, impl);
    char err[512];
    tf_trainer *tr;
    assert_int_equal(tf_trainer_create(&tr, &c, err, sizeof err), TF_OK);
    size_t nt = tf_param_count_tensors(&c), np = tf_param_count_floats(&c);
    tf_param_info *t = calloc(nt, sizeof *t);
    tf_param_table(&c, t);
    float *p = tf_test_weights(&c, 7), *g = malloc(np * sizeof *g), *q = malloc(np * sizeof *q);
    tf_batch b = {c.batch, c.n_seqs, c.seq_len, NULL, NULL, NULL};
    b.tokens = malloc(sizeof(int32_t) * c.batch * c.n_seqs * c.seq_len);
    b.pair = malloc(sizeof(float) * c.batch * c.seq_len * c.seq_len * 65);
    b.target = malloc(sizeof(float) * c.batch * c.seq_len * c.seq_len);
    tf_data_batch(c.seed, 0, &b);
    loss_at(tr, &b, p);
    tf_trainer_get_grads(tr, g);
    const double h = 2e-3;
    int checked = 0, failed = 0;
    tf_rng r;
    tf_rng_init(&r, 3, 4, 5);
    for (size_t i = 0; i < nt; i++) {
        const tf_param_info *ti = &t[i];
        double gn = 0;
        for (size_t k = 0; k < ti->count; k++) gn += (double)g[ti->offset + k] * g[ti->offset + k];
        gn = sqrt(gn);
        if (!ti->trainable) { /* pair_norm_outer: never used, gradient exactly zero */
            assert_true(gn == 0.0);
            continue;
        }
        for (int dir = 0; dir < 2; dir++) {
            double *v = malloc(ti->count * sizeof *v), vn = 0, gv = 0;
            for (size_t k = 0; k < ti->count; k++) {
                v[k] = dir == 0 ? g[ti->offset + k] : (tf_rng_next(&r) & 1 ? 1.0 : -1.0);
                vn += v[k] * v[k];
            }
            vn = sqrt(vn);
            if (vn == 0) vn = 1;
            for (size_t k = 0; k < ti->count; k++) {
                v[k] /= vn;
                gv += v[k] * g[ti->offset + k];
            }
            memcpy(q, p, np * sizeof *q);
            for (size_t k = 0; k < ti->count; k++) q[ti->offset + k] = (float)(p[ti->offset + k] + h * v[k]);
            double lp = loss_at(tr, &b, q);
            for (size_t k = 0; k < ti->count; k++) q[ti->offset + k] = (float)(p[ti->offset + k] - h * v[k]);
            double lm = loss_at(tr, &b, q);
            double fd = (lp - lm) / (2 * h);
            double tol = 2e-2 * fabs(gv) + 1e-2;
            checked++;
            if (fabs(fd - gv) > tol) {
                failed++;
                printf("  v%d %-62s dir %d: analytic %+.6e fd %+.6e\n", impl, ti->name, dir, gv, fd);
            }
            free(v);
        }
    }
    printf("  v%d: %d directional checks over %zu tensors, %d failed\n", impl, checked, nt,
           failed);
    assert_int_equal(failed, 0);
    free(p), free(g), free(q), free(t), free(b.tokens), free(b.pair), free(b.target);
    tf_trainer_destroy(tr);
}

static void test_fd_v1(void **s) { (void)s; fd_check(1); }
static void test_fd_v2(void **s) { (void)s; fd_check(2); }
static void test_fd_v3(void **s) { (void)s; fd_check(3); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_v1),
        cmocka_unit_test(test_fd_v2),
        cmocka_unit_test(test_fd_v3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
