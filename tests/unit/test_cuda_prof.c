/* The profiler's GPU path, on a CUDA device (prints SKIP and exits 77, ctest's
 * skipped, without one; CI has none, bench/gpu.sh runs it on the H200):
 *  1. --counters on a known kernel: add_kernel1 over 1 GiB operands must read
 *     2 GiB and write 1 GiB of DRAM, its launch geometry must equal the one
 *     CUPTI's kernel trace records, and the bandwidth its duration implies
 *     must be physical;
 *  2. a pattern that matches nothing, or only outside --selected-regions: no
 *     step is replayed, every timed step is collected, the report says so;
 *  3. launches per step (CUPTI activity, eager) equal the kernel nodes CUDA
 *     itself counts in the captured step graph, on every level, and the
 *     graph-replayed run traces that many kernels per step.
 * Tolerances are derived next to each check. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "test_prof_util.h"
#include "tinyfold.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return tp_mkdtemp(tmpdir, sizeof tmpdir, "cuda_prof");
}

static int teardown(void **state) {
    (void)state;
    tp_rm_outputs(tmpdir);
    return 0;
}

static cJSON *finish_json(tf_prof *p) {
    char err[256], path[512];
    int rc = tp_finish(p, NULL, stdout, err, sizeof err);
    if (rc) fail_msg("finish: %s", err);
    snprintf(path, sizeof path, "%s/summary.json", tmpdir);
    cJSON *j = tp_read_json(path);
    assert_non_null(j);
    return j;
}

static double metric(const cJSON *k, const char *name) {
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(k, "metrics"), name);
    if (!cJSON_IsNumber(v)) fail_msg("counter %s missing", name);
    return v->valuedouble;
}

/* The trace row of `kernel` in `step`: grid and block sizes (x*y*z), duration ns. */
static int trace_geometry(const char *kernel, long step, double *grid, double *block, double *dur_ns) {
    char path[512];
    snprintf(path, sizeof path, "%s/kernel_trace.csv", tmpdir);
    char *text = tp_read(path), *s = text;
    assert_non_null(text);
    tp_csv_row r;
    int found = 0;
    tp_csv_next(&s, &r); /* header: Name,Region,Step,StartNs,EndNs,DurationNs,Grid,Block,... */
    while (!found && tp_csv_next(&s, &r))
        if (r.n >= 8 && !strcmp(r.f[0], kernel) && atol(r.f[2]) == step) {
            unsigned g[3], b[3];
            if (sscanf(r.f[6], "%ux%ux%u", &g[0], &g[1], &g[2]) == 3 &&
                sscanf(r.f[7], "%ux%ux%u", &b[0], &b[1], &b[2]) == 3) {
                *grid = (double)g[0] * g[1] * g[2];
                *block = (double)b[0] * b[1] * b[2];
                *dur_ns = atof(r.f[5]);
                found = 1;
            }
        }
    free(text);
    return found;
}

static void one_add_step(tf_prof *p, tf_backend *be, const tf_ops *ops, long step, int warmup,
                         float *y, const float *a, const float *b, long n) {
    tf_prof_step_begin(p, step, warmup);
    tf_region_push(p, "copy_test");
    tf_prof_op_begin(p, "add");
    ops->add(be, y, a, b, n, TF_F32);
    tf_prof_op_end(p);
    tf_region_pop(p);
    ops->sync(be);
    tf_prof_step_end(p, step);
}

static void run_add(const char *pattern, const char *selected, cJSON **summary) {
    char err[512];
    tf_prof_opts o = {.out_dir = tmpdir,
                      .counters = pattern,
                      .selected_regions = selected,
                      .backend = TF_BACKEND_CUDA};
    tf_prof *p = tf_prof_create(&o, err, sizeof err); /* before any CUDA work */
    if (!p) fail_msg("prof: %s", err);
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_opts bo = {.device = 0, .kernel_level = 3};
    if (tf_cuda_backend_create(&be, &ops, &bo, err, sizeof err)) fail_msg("backend: %s", err);
    const long n = 1L << 28; /* 1 GiB per operand: far beyond any L2 */
    float *a = NULL, *b = NULL, *y = NULL;
    if (ops->alloc(be, (void **)&a, n * 4) || ops->alloc(be, (void **)&b, n * 4) ||
        ops->alloc(be, (void **)&y, n * 4))
        fail_msg("3 GiB of device memory are needed for this test");
    ops->zero(be, a, n * 4);
    ops->zero(be, b, n * 4);
    /* step 0 (warm-up) finds the op that launches the kernel, step 1 is the
     * counter step, step 2 a normal timed step (kernel trace) */
    for (long s = 0; s < 3; s++) one_add_step(p, be, ops, s, s == 0, y, a, b, n);
    *summary = finish_json(p);
    tf_prof_destroy(p);
    ops->free(be, a), ops->free(be, b), ops->free(be, y);
    tf_cuda_backend_destroy(be);
}

static void test_counters_known_kernel(void **state) {
    (void)state;
    cJSON *j;
    run_add("add_kernel1", NULL, &j);
    const double n = (double)(1L << 28), gib = 1024.0 * 1024.0 * 1024.0;
    const cJSON *c = cJSON_GetObjectItem(j, "counters");
    assert_non_null(c);
    const cJSON *e = cJSON_GetObjectItem(c, "error");
    if (e) fail_msg("counters: %s", e->valuestring);
    const cJSON *ks = cJSON_GetObjectItem(c, "kernels");
    assert_int_equal(cJSON_GetArraySize(ks), 1);
    const cJSON *k = cJSON_GetArrayItem(ks, 0);
    assert_string_equal(cJSON_GetObjectItem(k, "name")->valuestring, "add_kernel1");
    assert_int_equal((int)cJSON_GetObjectItem(k, "calls")->valuedouble, 1);
    assert_int_equal((int)cJSON_GetObjectItem(c, "step")->valuedouble, 1);

    /* y = a + b reads 2n floats and writes n. DRAM traffic differs from that
     * only by what the L2 holds when the kernel starts (lines of a, b still
     * resident) or ends (dirty lines of y not yet written back): at most the
     * L2 size, 50 MiB on the H100/H200, bounded here by 64 MiB, plus 1% for
     * other traffic (page tables, the profiler's own). */
    const double rd = metric(k, "dram__bytes_read.sum"), wr = metric(k, "dram__bytes_write.sum");
    const double slack = 64.0 * 1024 * 1024;
    printf("add_kernel1: DRAM read %.4f GiB (expect 2), written %.4f GiB (expect 1)\n", rd / gib,
           wr / gib);
    assert_true(fabs(rd - 8.0 * n) <= slack + 0.01 * 8.0 * n);
    assert_true(fabs(wr - 4.0 * n) <= slack + 0.01 * 4.0 * n);

    /* launch geometry comes from the activity trace: the kernel's record
     * of the timed step */
    double grid = 0, block = 0, dur = 0;
    assert_true(trace_geometry("add_kernel1", 2, &grid, &block, &dur));
    const cJSON *l = cJSON_GetObjectItem(k, "launch");
    assert_non_null(l);
    const cJSON *lg = cJSON_GetObjectItem(l, "grid"), *lb = cJSON_GetObjectItem(l, "block");
    assert_true(cJSON_GetArrayItem(lg, 0)->valuedouble * cJSON_GetArrayItem(lg, 1)->valuedouble *
                    cJSON_GetArrayItem(lg, 2)->valuedouble == grid);
    assert_true(cJSON_GetArrayItem(lb, 0)->valuedouble == block);
    assert_true(cJSON_GetObjectItem(l, "registers_per_thread")->valuedouble >= 1);

    /* bandwidth from the counted bytes and duration: physical (H200 peak 4.8
     * TB/s, nothing below 0.5 TB/s for a streaming kernel of 3 GiB) */
    const double ns = metric(k, "gpu__time_duration.sum"), tbs = (rd + wr) / ns * 1e-3;
    printf("add_kernel1: %.1f us, %.2f TB/s, DRAM throughput %.1f%% of peak\n", ns * 1e-3, tbs,
           metric(k, "dram__throughput.avg.pct_of_peak_sustained_elapsed"));
    assert_true(tbs > 0.5 && tbs < 5.0);
    /* the replayed launch does the same work as the traced one: a factor 2
     * covers clock changes under the profiler */
    printf("add_kernel1: %.1f us replayed (counters) vs %.1f us traced\n", ns * 1e-3, dur * 1e-3);
    assert_true(ns > 0.5 * dur && ns < 2.0 * dur);
    const double occ = metric(k, "sm__warps_active.avg.pct_of_peak_sustained_active");
    assert_true(occ > 0 && occ <= 100.0);

    /* the counter step is not a timed step: 1 timed step collected */
    assert_int_equal((int)cJSON_GetObjectItem(j, "steps_collected")->valuedouble, 1);
    cJSON_Delete(j);
}

/* nothing to profile: no kernel matches, or the match lies outside the
 * selected regions; every timed step is then collected */
static void no_counters(const char *pattern, const char *selected) {
    cJSON *j;
    run_add(pattern, selected, &j);
    const cJSON *c = cJSON_GetObjectItem(j, "counters");
    assert_non_null(c);
    assert_null(cJSON_GetObjectItem(c, "error"));
    assert_non_null(cJSON_GetObjectItem(c, "note"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "kernels")), 0);
    assert_int_equal((int)cJSON_GetObjectItem(j, "steps_collected")->valuedouble, 2);
    cJSON_Delete(j);
}

static void test_counters_no_match(void **state) {
    (void)state;
    no_counters("no_such_kernel", NULL);
    no_counters("add_kernel1", "some_other_region");
}

/* launches per step from a profiled run of `c` (eager or graph) */
static double profiled_launches(tf_config *c, size_t *graph_kernels) {
    char err[512];
    tf_prof_opts o = {.out_dir = tmpdir, .backend = TF_BACKEND_CUDA};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    if (!p) fail_msg("prof: %s", err);
    tf_trainer *t;
    if (tf_trainer_create(&t, c, err, sizeof err) != TF_OK) fail_msg("trainer: %s", err);
    tf_trainer_set_prof(t, p);
    tf_step_stats st;
    for (long s = 0; s < 4; s++) assert_int_equal(tf_trainer_step(t, s, &st), TF_OK);
    *graph_kernels = tf_trainer_graph_kernels(t);
    cJSON *j = finish_json(p);
    double l = cJSON_GetObjectItem(j, "launches_per_step")->valuedouble;
    cJSON_Delete(j);
    tf_trainer_destroy(t);
    tf_prof_destroy(p);
    return l;
}

static void test_launches_equal_graph_nodes(void **state) {
    (void)state;
    for (int impl = 1; impl <= 3; impl++) {
        tf_config c;
        tf_config_default(&c);
        c.batch = 2, c.seq_len = 16, c.n_seqs = 4, c.n_blocks = 2, c.msa_dim = 32, c.pair_dim = 64;
        c.backend = TF_BACKEND_CUDA;
        c.impl = (tf_impl)impl;
        c.fusion = tf_fusion_for_impl(c.impl);
        c.warmup_steps = 1;
        size_t nodes = 0, none = 0;
        c.graph = 0;
        double eager = profiled_launches(&c, &none);
        c.graph = 1;
        double replay = profiled_launches(&c, &nodes);
        printf("v%d: launches per step eager %.0f, graph-replayed %.0f; kernel nodes in the "
               "captured step graph %zu\n", impl, eager, replay, nodes);
        assert_true(nodes > 0 && none == 0);
        assert_true(eager == (double)nodes);
        assert_true(replay == (double)nodes);
    }
}

int main(void) {
    char why[256];
    if (!tf_cuda_backend_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77; /* ctest: skipped (SKIP_RETURN_CODE) */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counters_known_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counters_no_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_launches_equal_graph_nodes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
