/* The trainer's ways of issuing a step, checked on the CPU.
 *
 * The GPU backend draws the next batch on a thread of its own, stages it on
 * its side queue during the backward, issues the three phases back to back
 * and replays them as captured graphs (ops.h tf_backend_caps); the CPU
 * backend does none of these. A wrapped CPU op table provides what they
 * need, at once: timing marks, queued copies that copy on the spot, and a
 * graph that keeps the phase it was given and runs it at each launch (a
 * capture issues nothing, as CUDA's does not). Every way must train as the
 * plain CPU step does: the same losses, parameters and moments, bit for bit,
 * over warm-up and timed steps, in fp32 and in fp16 (its loss scale read
 * back after the step). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "model_testutil.h"
#include "testutil.h"
#include "tinyfold.h"
#include "train/trainer.h"

enum { PREFETCH = 1, STAGE = 2, PIPELINE = 4, GRAPHS = 8 };

/* ---- the wrapped op table ---- */
static double marks[8];

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static void mark(tf_backend *be, int k) {
    (void)be;
    marks[k] = now_ms();
}
static double mark_ms(tf_backend *be, int a, int b) {
    (void)be;
    return marks[b] - marks[a];
}

typedef struct {
    void (*fn)(void *);
    void *arg;
} graph;
static int captures, launches;

static int capture(tf_backend *be, void (*fn)(void *), void *arg, void **g) {
    (void)be;
    graph *x = malloc(sizeof *x);
    if (!x) return 1;
    *x = (graph){fn, arg};
    *g = x;
    captures++;
    return 0;
}
static int launch(tf_backend *be, void *g) {
    (void)be;
    const graph *x = g;
    x->fn(x->arg);
    launches++;
    return 0;
}
static void graph_free(tf_backend *be, void *g) {
    (void)be;
    free(g);
}
static size_t kernels(const tf_backend *be) {
    (void)be;
    return 0;
}

/* the staged uploads: the side queue's copies */
static const tf_ops *cpu;
static int side_uploads;
static void side_upload(tf_backend *be, void *dst, const void *src, size_t bytes) {
    side_uploads++;
    cpu->side_upload(be, dst, src, bytes);
}

static tf_ops wrapped;

/* ---- runs ---- */
static void config(tf_config *c, tf_precision p) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 7;
    c->n_seqs = 3;
    c->n_blocks = 2;
    c->msa_dim = 16;
    c->pair_dim = 12;
    c->warmup_steps = 2;
    c->num_steps = 3;
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
    c->precision = p;
}

typedef struct {
    float loss[8];
    float *w, *m, *v;
    long updates;
} result;

static result run(tf_config c, int ways) {
    tf_backend_opts bo = {.threads = c.threads, .kernel_level = (int)c.impl};
    tf_backend_kind kind = TF_BACKEND_CPU;
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_caps caps;
    char err[512];
    if (tf_backend_create(&kind, &bo, &be, &ops, &caps, err, sizeof err)) fail_msg("%s", err);
    cpu = ops;
    wrapped = *ops;
    wrapped.side_upload = side_upload;
    wrapped.mark = mark;
    wrapped.mark_ms = mark_ms;
    wrapped.upload_async = ops->upload;
    wrapped.download_async = ops->download;
    wrapped.graph_capture = capture;
    wrapped.graph_launch = launch;
    wrapped.graph_destroy = graph_free;
    wrapped.graph_captured_kernels = kernels;
    caps.prefetch_batches = (ways & PREFETCH) != 0;
    caps.stage_batches = (ways & STAGE) != 0;
    caps.pipelined_phases = (ways & PIPELINE) != 0;
    caps.graphs = (ways & GRAPHS) != 0;
    c.graph = caps.graphs;
    tf_trainer *t;
    if (tf_trainer_create_on(&t, &c, be, &wrapped, &caps, err, sizeof err) != TF_OK)
        fail_msg("create: %s", err);
    float *w0 = tf_test_weights(&c, 7);
    tf_trainer_set_params(t, w0);
    free(w0);
    result r = {{0}, NULL, NULL, NULL, 0};
    const int n = c.warmup_steps + c.num_steps;
    for (int i = 0; i < n; i++) {
        tf_step_stats st;
        assert_int_equal(tf_trainer_step(t, i, &st), TF_OK);
        r.loss[i] = st.loss;
    }
    const size_t np = tf_param_count_floats(&c);
    r.w = malloc(np * sizeof(float));
    r.m = malloc(np * sizeof(float));
    r.v = malloc(np * sizeof(float));
    tf_trainer_get_params(t, r.w);
    tf_trainer_get_adam(t, r.m, r.v, &r.updates);
    tf_trainer_destroy(t);
    return r;
}

static void drop(result *r) {
    free(r->w);
    free(r->m);
    free(r->v);
}

static void check_ways(tf_precision p) {
    static const struct {
        int ways;
        const char *name;
    } cases[] = {{PREFETCH, "prefetch"},
                 {PREFETCH | STAGE, "prefetch, staging"},
                 {PIPELINE, "back to back"},
                 {GRAPHS, "graphs"},
                 {PREFETCH | STAGE | PIPELINE | GRAPHS, "all of them"}};
    tf_config c;
    config(&c, p);
    const size_t np = tf_param_count_floats(&c);
    const int n = c.warmup_steps + c.num_steps;
    result ref = run(c, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        captures = launches = side_uploads = 0;
        result r = run(c, cases[k].ways);
        printf("  %s, %-18s loss %.9g, %ld updates, %d batches staged, %d phases captured, "
               "%d launched\n",
               tf_precision_name(p), cases[k].name,
               (double)r.loss[c.warmup_steps + c.num_steps - 1], r.updates, side_uploads / 3,
               captures, launches);
        assert_memory_equal(r.loss, ref.loss, sizeof r.loss);
        assert_true(tf_test_bits_equal(r.w, ref.w, np));
        assert_true(tf_test_bits_equal(r.m, ref.m, np));
        assert_true(tf_test_bits_equal(r.v, ref.v, np));
        assert_int_equal(r.updates, ref.updates);
        /* each step stages the next one's batch (the last one's goes unused) */
        assert_int_equal(side_uploads, cases[k].ways & STAGE ? 3 * n : 0);
        /* captured once, at the last warm-up step, then every phase replayed */
        if (cases[k].ways & GRAPHS) {
            assert_int_equal(captures, 3);
            assert_int_equal(launches, 3 * (c.num_steps + 1));
        }
        drop(&r);
    }
    drop(&ref);
}

static void test_fp32(void **state) {
    (void)state;
    check_ways(TF_PREC_FP32);
}

static void test_fp16(void **state) {
    (void)state;
    check_ways(TF_PREC_FP16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_fp16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
