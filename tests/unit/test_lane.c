/* The weight-gradient lane's waits, checked on the CPU.
 *
 * A wrapped CPU backend gets a lane (ops.h wgrad_*) that runs as late as the
 * contract allows: each weight-gradient GEMM is queued and runs only when a
 * wgrad_wait covers it. A missing wait then lets a later op overwrite what a
 * queued GEMM reads (or the step end with GEMMs still queued), and the
 * gradients differ from the run without the lane. So:
 *  - with the lane, loss, predictions and every gradient equal the run
 *    without it, bit for bit, and no GEMM is queued at a sync;
 *  - dropping any one of the waits the model issues (a planted missing
 *    wait) is caught: the gradients differ or GEMMs are left queued;
 *  - the waits issued are counted (each costs an event wait on the GPU);
 *  - a queue of its own (a bucket's all-reduce) gets the ticket of the
 *    newest pending GEMM that writes, or reads, what it touches
 *    (tf_x_lane_ticket), and nothing is waited for on the main queue.
 * Also the op-table entries and caps of the CPU backend (ops.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "late_lane.h"
#include "model/exec.h"
#include "model_testutil.h"
#include "tinyfold.h"
#include "train/trainer.h"

/* ---- runs ---- */
static void lane_config(tf_config *c) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 7;
    c->n_seqs = 3;
    c->n_blocks = 3; /* the two backward slots are each used twice */
    c->msa_dim = 16;
    c->pair_dim = 12;
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
}

typedef struct {
    float loss;
    float *pred, *grad;
} result;

static tf_trainer *make(const tf_config *c, int lane) {
    tf_backend_opts bo = {.threads = c->threads, .kernel_level = (int)c->impl};
    tf_backend_kind kind = TF_BACKEND_CPU;
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_caps caps;
    char err[512];
    if (tf_backend_create(&kind, &bo, &be, &ops, &caps, err, sizeof err)) fail_msg("%s", err);
    if (lane) ops = late_lane_wrap(ops, &caps);
    tf_trainer *t;
    if (tf_trainer_create_on(&t, c, be, ops, &caps, err, sizeof err) != TF_OK)
        fail_msg("create: %s", err);
    float *w = tf_test_weights(c, 5);
    tf_trainer_set_params(t, w);
    free(w);
    return t;
}

static result run(tf_trainer *t, const tf_config *c) {
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    tf_batch b = {c->batch, c->n_seqs, c->seq_len,
                  malloc(sizeof(int32_t) * c->batch * c->n_seqs * c->seq_len),
                  malloc(sizeof(float) * nz * 65), malloc(sizeof(float) * nz)};
    tf_data_batch(c->seed, 0, &b);
    result r = {0, malloc(sizeof(float) * nz), malloc(sizeof(float) * tf_param_count_floats(c))};
    assert_int_equal(tf_trainer_grad(t, &b, &r.loss, r.pred), TF_OK);
    tf_trainer_get_grads(t, r.grad);
    free(b.tokens), free(b.pair), free(b.target);
    return r;
}

static int same(const tf_config *c, const result *a, const result *b) {
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    return a->loss == b->loss && !memcmp(a->pred, b->pred, sizeof(float) * nz) &&
           !memcmp(a->grad, b->grad, sizeof(float) * tf_param_count_floats(c));
}

static void drop(result *r) {
    free(r->pred);
    free(r->grad);
}

static void check_waits(tf_config *c, const char *label) {
    tf_trainer *t0 = make(c, 0);
    result ref = run(t0, c);
    tf_trainer_destroy(t0);

    tf_trainer *t = make(c, 1);
    late_lane_reset(-1);
    result r = run(t, c);
    const long waits = L.waits, gemms = L.nq;
    printf("  %-22s %ld weight gradients on the lane, %ld waits\n", label, gemms, waits);
    assert_true(gemms > 0);
    assert_int_equal(L.left_at_sync, 0);
    assert_true(same(c, &r, &ref));
    drop(&r);
    /* each wait is needed: without it a later op overwrites what a queued
     * GEMM reads, or GEMMs are left queued at the step's end */
    for (long k = 0; k < waits; k++) {
        late_lane_reset(k);
        result x = run(t, c);
        const int caught = L.left_at_sync > 0 || !same(c, &x, &ref);
        if (!caught) printf("  %s: dropping wait %ld of %ld goes unnoticed\n", label, k, waits);
        assert_true(caught);
        drop(&x);
    }
    tf_trainer_destroy(t);
    drop(&ref);
}

static void test_lane_waits_v3(void **state) {
    (void)state;
    tf_config c;
    lane_config(&c);
    check_waits(&c, "v3");
}

static void test_lane_waits_v3_unfused(void **state) {
    (void)state;
    tf_config c;
    lane_config(&c);
    memset(&c.fusion, 0, sizeof c.fusion); /* the unfused compositions at level 3 */
    check_waits(&c, "v3, fusions off");
}

/* Three weight-gradient GEMMs on the late lane, C = dy^T x into three
 * gradient ranges; the second reads the first's C as its x. The ticket of a
 * span is the newest GEMM whose C it overlaps, or whose operand it would
 * overwrite; the GEMMs stay queued (no wait) and the main queue's own wait
 * (tf_x_grads_final) still runs them. */
static void test_lane_ticket_for_another_queue(void **state) {
    (void)state;
    tf_backend_opts bo = {.threads = 1, .kernel_level = (int)TF_IMPL_V3};
    tf_backend_kind kind = TF_BACKEND_CPU;
    tf_backend *be;
    const tf_ops *cpu;
    tf_backend_caps caps;
    char err[256];
    assert_int_equal(tf_backend_create(&kind, &bo, &be, &cpu, &caps, err, sizeof err), 0);
    assert_null(cpu->wgrad_wait_queue); /* the CPU has no queue of another's */
    const tf_ops *ops = late_lane_wrap(cpu, &caps);
    late_lane_reset(-1);
    enum { R = 4, K = 3 };
    float grads[3 * K * K + 8] = {0}, dy[R * K], x[R * K];
    for (int i = 0; i < R * K; i++) dy[i] = (float)(i % 5) - 2.0f, x[i] = (float)(i % 3);
    tf_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.ops = ops;
    ex.be = be;
    ex.wgrad_async = 1;
    assert_int_equal(ops->wgrad_enable(be), 0);
    float *C[3] = {grads, grads + K * K, grads + 2 * K * K};
    for (int g = 0; g < 3; g++) {
        tf_gemm_args a = tf_gemm_make(&ex, 1, 0, K, K, R, 1.0f, 1.0f, dy, K, 0,
                                      g == 1 ? C[0] : x, K, 0, C[g], K, 0, 1);
        a.c_type = TF_F32;
        a.wgrad = 1;
        tf_gemm(&ex, &a, "wgrad");
    }
    assert_int_equal(ex.lane.n, 3);
    assert_int_equal(L.nq, 3);
    assert_int_equal(tf_x_lane_ticket(&ex, C[2], K * K), 3);
    assert_int_equal(tf_x_lane_ticket(&ex, C[1] + 1, 2), 2);
    assert_int_equal(tf_x_lane_ticket(&ex, C[0], K * K), 2); /* GEMM 2 reads it */
    assert_int_equal(tf_x_lane_ticket(&ex, grads + 3 * K * K, 8), 0);
    assert_int_equal(L.done, 0); /* nothing ran: no wait was issued */
    assert_int_equal(ex.lane.n, 3);
    ex.planning = 1;
    assert_int_equal(tf_x_lane_ticket(&ex, C[2], K * K), 0);
    ex.planning = 0;
    tf_x_grads_final(&ex, C[1], K * K); /* the main queue's wait runs 1 and 2 */
    assert_int_equal(L.done, 2);
    assert_int_equal(ex.lane.n, 1);
    tf_x_lane_join(&ex);
    assert_int_equal(L.done, 3);
    cpu->destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_waits_v3),
        cmocka_unit_test(test_lane_waits_v3_unfused),
        cmocka_unit_test(test_lane_ticket_for_another_queue),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(L.q);
    return rc;
}
