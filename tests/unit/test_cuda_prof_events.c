/* The profiler's GPU event timer (--gpu-timer events, HIP's only timer) on
 * a GPU (prints SKIP and exits 77, ctest's skipped, without one). The same
 * training run is profiled twice on CUDA, by CUPTI and by the events, and
 * the event timer's figures are checked against CUPTI's; on HIP (no CUPTI)
 * the checks of the events run alone apply.
 *
 *  1. every op the model issues is one timed record: the ops per step are
 *     the calls per step of the op table, the same in both runs, and every
 *     op that CUPTI saw launch a kernel has event time;
 *  2. per phase (forward_pass, backward_pass, optimizer_step), the ops'
 *     summed event time per step is at least CUPTI's summed kernel time (an
 *     op's events bracket its kernels) and at most the events run's own
 *     span of the phase on the GPU (the ops of one queue in order: lane
 *     off), each within r: the largest step-to-step deviation seen in the
 *     runs plus the difference between two CUPTI runs, one before and one
 *     after the events run (the drift from run to run);
 *  3. the peak memory is the backend's exact count: equal in both runs;
 *  4. with the weight-gradient lane (v3's default), lane GEMMs are records
 *     on the lane's track of trace.json, and bound 2's lower side holds.
 * The tolerances are derived next to each check. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/registry.h"
#include "test_prof_util.h"
#include "tinyfold.h"

#define WARM 2
#define STEPS 6
static const char *const phases[3] = {"forward_pass", "backward_pass", "optimizer_step"};

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return tp_mkdtemp(tmpdir, sizeof tmpdir, "cuda_prof_events");
}

static int teardown(void **state) {
    (void)state;
    tp_rm_outputs(tmpdir);
    return 0;
}

/* Per phase and timed step, from kernel_trace.csv: the records' summed
 * duration and the span from the first start to the last end. */
typedef struct {
    double sum[3][STEPS], first[3][STEPS], last[3][STEPS];
    cJSON *summary;
    int lane_track; /* trace.json has the event timer's lane track */
} run_t;

static void read_trace(run_t *r) {
    char path[512];
    snprintf(path, sizeof path, "%s/kernel_trace.csv", tmpdir);
    char *text = tp_read(path), *s = text;
    assert_non_null(text);
    tp_csv_row row;
    tp_csv_next(&s, &row); /* Name,Region,Step,StartNs,EndNs,DurationNs,... */
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < STEPS; i++) r->sum[k][i] = 0, r->first[k][i] = 1e300, r->last[k][i] = -1e300;
    while (tp_csv_next(&s, &row)) {
        if (row.n < 6 || row.f[0][0] == '[') continue; /* CUPTI's memcpy/memset rows */
        long step = atol(row.f[2]) - WARM;
        if (step < 0 || step >= STEPS) fail_msg("trace row of step %s", row.f[2]);
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(phases[k]);
            if (strncmp(row.f[1], phases[k], n) || (row.f[1][n] && row.f[1][n] != '/')) continue;
            double a = atof(row.f[3]), b = atof(row.f[4]);
            r->sum[k][step] += atof(row.f[5]);
            if (a < r->first[k][step]) r->first[k][step] = a;
            if (b > r->last[k][step]) r->last[k][step] = b;
        }
    }
    free(text);
    snprintf(path, sizeof path, "%s/trace.json", tmpdir);
    text = tp_read(path);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j); /* a well-formed trace */
    cJSON_Delete(j);
    r->lane_track = strstr(text, "\"wgrad lane") != NULL;
    free(text);
}

static void profile(tf_config *c, tf_prof_gpu_timer timer, run_t *r) {
    char err[512];
    tf_prof_opts o = {.out_dir = tmpdir, .trace_max_steps = STEPS, .gpu_timer = timer,
                      .backend = c->backend};
    tf_prof *p = tf_prof_create(&o, err, sizeof err); /* before the trainer: CUPTI */
    if (!p) fail_msg("prof: %s", err);
    tf_trainer *t;
    if (tf_trainer_create(&t, c, err, sizeof err) != TF_OK) fail_msg("trainer: %s", err);
    tf_trainer_set_prof(t, p);
    tf_step_stats st;
    for (long s = 0; s < WARM + STEPS; s++) assert_int_equal(tf_trainer_step(t, s, &st), TF_OK);
    if (tp_finish(p, NULL, stdout, err, sizeof err)) fail_msg("finish: %s", err);
    char path[512];
    snprintf(path, sizeof path, "%s/summary.json", tmpdir);
    r->summary = tp_read_json(path);
    assert_non_null(r->summary);
    read_trace(r);
    tf_trainer_destroy(t);
    tf_prof_destroy(p);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(const double *v) {
    double w[STEPS];
    memcpy(w, v, sizeof w);
    qsort(w, STEPS, sizeof *w, cmp_d);
    return 0.5 * (w[(STEPS - 1) / 2] + w[STEPS / 2]);
}
/* the largest deviation of a step from the median, relative to it */
static double spread(const double *v) {
    double m = median(v), d = 0;
    for (int i = 0; i < STEPS; i++) d = fmax(d, fabs(v[i] - m));
    return m > 0 ? d / m : 0;
}

static double num(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItem(o, a);
    if (b) v = cJSON_GetObjectItem(v, b);
    if (!cJSON_IsNumber(v)) fail_msg("summary: %s%s%s missing", a, b ? "." : "", b ? b : "");
    return v->valuedouble;
}

static const cJSON *op_entry(const cJSON *summary, const char *path, const char *name) {
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(summary, "op_costs"), "ops"), *e;
    cJSON_ArrayForEach(e, ops) {
        if (!strcmp(cJSON_GetObjectItem(e, "path")->valuestring, path) &&
            !strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name))
            return e;
    }
    return NULL;
}

/* check 1: the events run times every op call, once */
static double check_ops(const run_t *ev, const run_t *cu) {
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(ev->summary, "op_costs"), "ops"), *e;
    assert_non_null(ops);
    double calls = 0;
    cJSON_ArrayForEach(e, ops) {
        double c = num(e, "calls_per_step", NULL), l = num(e, "launches", NULL);
        if (l != c * STEPS)
            fail_msg("%s %s: %.0f records over %d steps, %.0f calls a step",
                     cJSON_GetObjectItem(e, "path")->valuestring,
                     cJSON_GetObjectItem(e, "name")->valuestring, l, STEPS, c);
        calls += c;
    }
    assert_true(num(ev->summary, "launches_per_step", NULL) == calls);
    const cJSON *steps = cJSON_GetObjectItem(ev->summary, "steps"), *s;
    cJSON_ArrayForEach(s, steps) assert_true(num(s, "launches", NULL) == calls);
    if (!cu) return calls;
    const cJSON *cops = cJSON_GetObjectItem(cJSON_GetObjectItem(cu->summary, "op_costs"), "ops");
    double ccalls = 0;
    cJSON_ArrayForEach(e, cops) {
        ccalls += num(e, "calls_per_step", NULL);
        /* ops only: a kernel launched outside any op is keyed by its own name */
        if (num(e, "calls_per_step", NULL) == 0 || num(e, "launches", NULL) == 0) continue;
        const char *path = cJSON_GetObjectItem(e, "path")->valuestring;
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        const cJSON *m = op_entry(ev->summary, path, name);
        if (!m || num(m, "launches", NULL) == 0)
            fail_msg("%s %s launched kernels under CUPTI but has no event record", path, name);
    }
    printf("ops per step: %.0f (events), %.0f op calls under CUPTI, which counted %.1f kernel "
           "launches per step\n", calls, ccalls, num(cu->summary, "launches_per_step", NULL));
    assert_true(calls == ccalls);
    return calls;
}

/* CUPTI's kernel time per step in phase k from kernels launched outside any
 * op (no event pair brackets them) */
static double outside_ops_ns(const run_t *cu, int k) {
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(cu->summary, "op_costs"), "ops"), *e;
    double ns = 0;
    size_t n = strlen(phases[k]);
    cJSON_ArrayForEach(e, ops) {
        const char *path = cJSON_GetObjectItem(e, "path")->valuestring;
        if (num(e, "calls_per_step", NULL) == 0 && !strncmp(path, phases[k], n) &&
            (!path[n] || path[n] == '/'))
            ns += num(e, "kernel_ns", NULL);
    }
    return ns / STEPS;
}

/* check 2 (lower side only with the lane: its GEMMs overlap the main queue);
 * cu and cu2 are the CUPTI runs before and after ev */
static void check_phases(const run_t *ev, const run_t *cu, const run_t *cu2, int lane) {
    for (int k = 0; k < 3; k++) {
        double E = median(ev->sum[k]), span[STEPS];
        for (int i = 0; i < STEPS; i++) span[i] = ev->last[k][i] - ev->first[k][i];
        double S = median(span), r = spread(ev->sum[k]);
        if (cu) {
            double out = outside_ops_ns(cu, k), K1 = median(cu->sum[k]) - out;
            double K2 = median(cu2->sum[k]) - outside_ops_ns(cu2, k), K = 0.5 * (K1 + K2);
            if (out > 0) printf("%s: %.3f ms of kernels outside ops (not timed by events)\n",
                                phases[k], out * 1e-6);
            r = fmax(r, fmax(spread(cu->sum[k]), spread(cu2->sum[k])));
            r += K > 0 ? fabs(K1 - K2) / K : 0;
            printf("%s: events %.3f ms, CUPTI kernels %.3f ms (events/CUPTI %.3f), events span "
                   "%.3f ms, step spread r %.3f%s\n",
                   phases[k], E * 1e-6, K * 1e-6, K > 0 ? E / K : 0, S * 1e-6, r,
                   lane ? " (lane on)" : "");
            assert_true(K > 0);
            /* the events bracket the kernels: never less kernel time */
            assert_true(E >= K * (1.0 - r));
        } else {
            printf("%s: events %.3f ms, span %.3f ms, step spread r %.3f\n", phases[k], E * 1e-6,
                   S * 1e-6, r);
        }
        assert_true(E > 0);
        /* one queue runs its ops in order: their spans fit in the phase's */
        if (!lane) assert_true(E <= S * (1.0 + r));
    }
}

static void configure(tf_config *c, const char *plan) {
    tf_config_default(c);
    c->batch = 2, c->seq_len = 64, c->n_seqs = 8, c->n_blocks = 2, c->msa_dim = 64, c->pair_dim = 64;
    c->backend = tf_backend_gpu()->kind;
    c->impl = TF_IMPL_V3;
    c->fusion = tf_fusion_for_impl(c->impl);
    c->warmup_steps = WARM;
    c->num_steps = STEPS;
    c->graph = 0; /* both runs eager: the event timer times the ops the host issues */
    snprintf(c->gpu_plan, sizeof c->gpu_plan, "%s", plan);
}

static void one_plan(const char *plan, int lane) {
    tf_config c;
    configure(&c, plan);
    run_t ev, cu, cu2, *cup = NULL;
    memset(&cu, 0, sizeof cu);
    memset(&cu2, 0, sizeof cu2);
    const int cupti = tf_backend_gpu()->cupti;
    if (cupti) profile(&c, TF_PROF_GPU_TIMER_CUPTI, &cu);
    profile(&c, TF_PROF_GPU_TIMER_EVENTS, &ev);
    assert_string_equal(cJSON_GetObjectItem(ev.summary, "timer")->valuestring, "events");
    assert_string_equal(cJSON_GetObjectItem(ev.summary, "launch_unit")->valuestring, "op");
    if (cupti) {
        profile(&c, TF_PROF_GPU_TIMER_CUPTI, &cu2);
        cup = &cu;
    }
    check_ops(&ev, cup);
    check_phases(&ev, cup, &cu2, lane);
    /* check 3: the backend counts its allocations exactly, whatever times the ops */
    double peak = num(ev.summary, "memory", "peak_backend_bytes");
    assert_true(peak > 0);
    if (cup) assert_true(peak == num(cu.summary, "memory", "peak_backend_bytes"));
    /* check 4 */
    printf("plan '%s': lane track in trace.json: %s\n", plan, ev.lane_track ? "yes" : "no");
    assert_int_equal(ev.lane_track, lane);
    cJSON_Delete(ev.summary);
    cJSON_Delete(cu.summary);
    cJSON_Delete(cu2.summary);
}

static void test_events_lane_off(void **state) {
    (void)state;
    one_plan("lane=off", 0);
}

static void test_events_lane_on(void **state) {
    (void)state;
    one_plan("lane=on", 1);
}

int main(void) {
    char why[256];
    if (!tf_cuda_backend_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77; /* ctest: skipped (SKIP_RETURN_CODE) */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_events_lane_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_lane_on, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
