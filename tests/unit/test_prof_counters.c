/* Profiler --counters on the CPU: perf_event_open software counters around
 * the ops whose name matches; hardware counters are "unavailable (...)"
 * when the machine has no PMU, never zeros. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_prof_util.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return tp_mkdtemp(tmpdir, sizeof tmpdir, "profc");
}

static int teardown(void **state) {
    (void)state;
    tp_rm_outputs(tmpdir);
    return 0;
}

static char *finish(tf_prof *p) {
    char err[256], *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    int rc = tp_finish(p, NULL, out, err, sizeof err);
    if (rc) fprintf(stderr, "finish: %s\n", err);
    assert_int_equal(rc, 0);
    fclose(out);
    return text;
}

static void test_counters_match(void **state) {
    (void)state;
    char err[256];
    tf_prof_opts o = {.out_dir = tmpdir, .counters = "sgemm"};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    tp_expect e;
    memset(&e, 0, sizeof e);
    tp_step(p, NULL, 0, 1, 0, TP_ALL); /* warm-up: not counted */
    for (int s = 1; s <= 3; s++) tp_step(p, &e, s, 0, 1, TP_ALL);
    char *rep = finish(p);
    tf_prof_destroy(p);

    char path[512];
    snprintf(path, sizeof path, "%s/summary.json", tmpdir);
    cJSON *sum = tp_read_json(path);
    assert_non_null(sum);
    const cJSON *c = cJSON_GetObjectItem(sum, "counters");
    assert_non_null(c);
    assert_non_null(strstr(cJSON_GetObjectItem(c, "source")->valuestring, "perf_event_open"));
    assert_string_equal(cJSON_GetObjectItem(c, "pattern")->valuestring, "sgemm");
    const cJSON *ev, *events = cJSON_GetObjectItem(c, "events");
    int n_ok = 0, task_clock_ok = 0;
    cJSON_ArrayForEach(ev, events) {
        assert_true(cJSON_IsString(ev));
        if (!strcmp(ev->valuestring, "ok")) {
            n_ok++;
            task_clock_ok |= !strcmp(ev->string, "task-clock");
        } else {
            /* an unavailable event says why, in the report too */
            assert_memory_equal(ev->valuestring, "unavailable (", 13);
            char line[160];
            snprintf(line, sizeof line, "%s: %s", ev->string, ev->valuestring);
            assert_non_null(strstr(rep, line));
        }
    }
    assert_true(cJSON_GetArraySize(events) >= 4);
    const cJSON *k, *ks = cJSON_GetObjectItem(c, "kernels");
    int nk = 0;
    cJSON_ArrayForEach(k, ks) {
        const char *name = cJSON_GetObjectItem(k, "name")->valuestring;
        assert_non_null(strstr(name, "sgemm"));
        int id = !strcmp(name, "sgemm_nt") ? TP_GEMM_NT : TP_GEMM_TN;
        double calls = cJSON_GetObjectItem(k, "calls")->valuedouble;
        assert_true(calls == (double)e.calls[id]);
        const cJSON *m = cJSON_GetObjectItem(k, "metrics");
        /* only the events that opened carry values */
        assert_int_equal(cJSON_GetArraySize(m), n_ok);
        const cJSON *m2;
        cJSON_ArrayForEach(m2, m) {
            assert_string_equal(cJSON_GetObjectItem(events, m2->string)->valuestring, "ok");
        }
        if (task_clock_ok) {
            /* the ops spin on this thread: CPU time ~ wall time of the op, bounded
             * above by the host interval around begin..end (plus read() slack) and
             * below by half the spin target (preemption on a busy machine) */
            double tc = cJSON_GetObjectItem(cJSON_GetObjectItem(k, "totals"), "task-clock")->valuedouble;
            assert_true(tc >= 0.5 * (double)e.lo[id]);
            assert_true(tc <= 1.01 * (double)e.hi[id] + calls * 10000.0);
        }
        nk++;
    }
    assert_int_equal(nk, 2);
    assert_non_null(strstr(rep, "Counters (perf_event_open"));
    cJSON_Delete(sum);
    free(rep);
}

static void test_counters_no_match(void **state) {
    (void)state;
    char err[256];
    tf_prof_opts o = {.counters = "no_such_kernel"};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    tp_step(p, NULL, 0, 0, 0, TP_ALL);
    char *rep = finish(p);
    tf_prof_destroy(p);
    assert_non_null(strstr(rep, "no collected op matched"));
    free(rep);

    tf_prof_opts bad = {.counters = ""};
    assert_null(tf_prof_create(&bad, err, sizeof err));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_match),
        cmocka_unit_test(test_counters_no_match),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
