/* The GPU event timer's bookkeeping (src/prof/gpu_timer.c) over a fake
 * clock: two queues whose times the test advances as if kernels ran, so
 * every op's expected start and end is known exactly. Also the timer choice
 * of tf_prof_create (what it refuses, one line each). No GPU needed. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/registry.h"
#include "prof/prof_internal.h"
#include "test_prof_util.h"

/* ---- the fake clock: queue 0 (main) and 1 (lane), times in ns ---- */
#define FK_MAX 64
typedef struct {
    int64_t q[2];       /* when each queue's work issued so far ends */
    int64_t t[FK_MAX];  /* when each recorded event happens */
    int n, cap;         /* recorded this step; pool size (record fails beyond) */
    long lane_n;        /* GEMMs issued to the lane */
    int records, rewinds, fail_wait, closed;
} fake;

static int fk_record(void *c, int lane) {
    fake *f = c;
    f->records++;
    if (f->n >= f->cap) return -1;
    f->t[f->n] = f->q[lane];
    return f->n++;
}
static long fk_lane(void *c) { return ((fake *)c)->lane_n; }
static int fk_wait(void *c) { return ((fake *)c)->fail_wait ? -1 : 0; }
static int fk_elapsed(void *c, int a, int b, int64_t *ns) {
    fake *f = c;
    if (a < 0 || b < 0 || a >= f->n || b >= f->n) return -1;
    *ns = f->t[b] - f->t[a];
    return 0;
}
static void fk_rewind(void *c) {
    fake *f = c;
    f->n = 0;
    f->rewinds++;
}
static void fk_close(void *c) { ((fake *)c)->closed = 1; }

/* A host-timed profiler switched to the event timer on the fake clock (a
 * CPU-only build has no GPU clock to open). */
static tf_prof *events_prof(fake *f, int cap) {
    char err[256];
    tf_prof_opts o = {.trace_max_steps = 10};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    memset(f, 0, sizeof *f);
    f->cap = cap;
    p->timer = PROF_TIMER_EVENTS;
    p->backend = tf_backend_find(TF_BACKEND_HIP)->name;
    p->records = tf_backend_find(TF_BACKEND_HIP)->records;
    p->evt = calloc(1, sizeof *p->evt);
    assert_non_null(p->evt);
    p->evt->ev_step = -1;
    p->evt->clk = (prof_gpu_clock){f, fk_record, fk_lane, fk_wait, fk_elapsed, fk_rewind, fk_close};
    p->evt->have_clk = 1;
    return p;
}

/* an op of `ns` on the main queue */
static void main_op(tf_prof *p, fake *f, const char *name, int64_t ns) {
    tf_prof_op_begin(p, name);
    f->q[0] += ns;
    tf_prof_op_end(p);
}

/* a GEMM the backend sends to the lane: it waits for the main queue's work
 * issued before it and for the lane's previous work */
static void lane_op(tf_prof *p, fake *f, const char *name, int64_t ns) {
    tf_prof_op_begin(p, name);
    int64_t start = f->q[0] > f->q[1] ? f->q[0] : f->q[1];
    f->q[1] = start + ns;
    f->lane_n++;
    tf_prof_op_end(p);
}

static const prof_launch *launch_named(const tf_prof *p, const char *name, size_t nth) {
    for (size_t i = 0; i < p->nlaunch; i++)
        if (!strcmp(p->names.strs[p->launches[i].name], name) && nth-- == 0) return &p->launches[i];
    fail_msg("no launch %s", name);
    return NULL;
}

static uint32_t path_id(const tf_prof *p, const char *path) {
    for (uint32_t i = 0; i < p->npaths; i++)
        if (!strcmp(p->paths[i].path, path)) return i;
    fail_msg("no region %s", path);
    return 0;
}

/* One step: the times each op's events give, the lane's overlap, the region
 * sums and the launches; then a warm-up step that records no event. */
static void test_spans(void **state) {
    (void)state;
    fake f;
    tf_prof *p = events_prof(&f, FK_MAX);
    f.q[0] = f.q[1] = 1000; /* the step's start event happens at 1000 */
    tf_prof_step_begin(p, 0, 0);
    const int64_t host0 = p->evt->host_step;
    tf_region_push(p, "forward_pass");
    main_op(p, &f, "a", 500);     /* main 1000..1500 */
    lane_op(p, &f, "w", 300);     /* lane 1500..1800 */
    lane_op(p, &f, "w", 300);     /* behind the first: 1800..2100, not 1500..2100 */
    main_op(p, &f, "b", 200);     /* main 1500..1700, beside the lane */
    tf_region_pop(p);
    tf_region_push(p, "optimizer_step");
    tf_prof_op_begin(p, "outer"); /* nested ops are timed each, as on the CPU */
    main_op(p, &f, "inner", 50);  /* 1700..1750 */
    f.q[0] += 25;
    tf_prof_op_end(p);            /* outer 1700..1775 */
    tf_region_pop(p);
    tf_prof_step_end(p, 0);

    assert_int_equal(f.rewinds, 1);
    assert_int_equal(f.n, 1 + 2 * 6);
    assert_int_equal((int)p->nlaunch, 6);
    struct { const char *name; size_t nth; int64_t start, end; uint32_t stream; } want[] = {
        {"a", 0, 0, 500, 0},       {"w", 0, 500, 800, 1},      {"w", 1, 800, 1100, 1},
        {"b", 0, 500, 700, 0},     {"inner", 0, 700, 750, 0},  {"outer", 0, 700, 775, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const prof_launch *l = launch_named(p, want[i].name, want[i].nth);
        assert_int_equal(l->start - host0, want[i].start);
        assert_int_equal(l->end - host0, want[i].end);
        assert_int_equal(l->stream, want[i].stream);
        assert_int_equal(l->kind, PROF_KIND_KERNEL);
    }
    /* each op is one record: the region sums are the ops' spans */
    assert_int_equal(p->paths[path_id(p, "forward_pass")].kernel_ns, 500 + 300 + 300 + 200);
    assert_int_equal(p->paths[path_id(p, "optimizer_step")].kernel_ns, 50 + 75);
    assert_int_equal((int)p->launches_total, 6);
    assert_int_equal((int)p->steps[0].launches, 6);
    assert_int_equal(p->kstats[prof_intern_find(&p->names, "w")].calls, 2);

    /* warm-up: not collected, no event recorded */
    int before = f.records;
    tf_prof_step_begin(p, 1, 1);
    tf_region_push(p, "forward_pass");
    main_op(p, &f, "a", 500);
    tf_region_pop(p);
    tf_prof_step_end(p, 1);
    assert_int_equal(f.records, before);
    assert_int_equal((int)p->launches_total, 6);
    assert_null(prof_evt_warning(p->evt));

    /* the report says what a row is */
    char err[256], *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(tp_finish(p, NULL, out, err, sizeof err), 0);
    fclose(out);
    assert_non_null(strstr(text, "ops by total time (device time, GPU events around each op)"));
    assert_non_null(strstr(text, "rocprofv3 --kernel-trace --stats"));
    assert_non_null(strstr(text, "Ops per step: 6.0"));
    assert_null(strstr(text, "warning"));
    free(text);
    tf_prof_destroy(p);
    assert_int_equal(f.closed, 1);
}

/* A full pool and a failed wait: the ops are counted as not timed, the
 * others still are, and the report warns. */
static void test_drops(void **state) {
    (void)state;
    fake f;
    tf_prof *p = events_prof(&f, 3); /* the step's event and one op's pair, then full */
    tf_prof_step_begin(p, 0, 0);
    tf_region_push(p, "forward_pass");
    main_op(p, &f, "a", 100);
    main_op(p, &f, "b", 100); /* its events are refused */
    main_op(p, &f, "c", 100);
    tf_region_pop(p);
    tf_prof_step_end(p, 0);
    assert_int_equal((int)p->launches_total, 1);
    assert_int_equal((int)p->evt->dropped, 2);
    const char *w = prof_evt_warning(p->evt);
    assert_non_null(w);
    assert_non_null(strstr(w, "2 ops were not timed"));

    f.cap = FK_MAX;
    f.fail_wait = 1;
    tf_prof_step_begin(p, 1, 0);
    main_op(p, &f, "a", 100);
    tf_prof_step_end(p, 1);
    assert_int_equal((int)p->launches_total, 1);
    assert_int_equal((int)p->evt->dropped, 3);
    assert_non_null(strstr(prof_evt_warning(p->evt), "could not be recorded or read"));
    tf_prof_destroy(p);
}

/* The timer a backend may have: one line for each refusal. */
static void refused(tf_prof_opts o, const char *expect) {
    char err[256] = "";
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    if (p) fail_msg("accepted, expected a refusal mentioning '%s'", expect);
    if (!strstr(err, expect)) fail_msg("'%s' does not mention '%s'", err, expect);
    assert_null(strchr(err, '\n'));
}

static void test_timer_choice(void **state) {
    (void)state;
    refused((tf_prof_opts){.backend = TF_BACKEND_HIP, .counters = "layernorm"},
            "CUPTI's (NVIDIA); on AMD GPUs collect them with rocprofv3 --pmc or rocprof-compute");
    refused((tf_prof_opts){.backend = TF_BACKEND_HIP, .gpu_timer = TF_PROF_GPU_TIMER_CUPTI},
            "'cupti' is NVIDIA's; on hip the ops are timed by hipEvents ('events')");
    refused((tf_prof_opts){.gpu_timer = TF_PROF_GPU_TIMER_EVENTS}, "host clock");
    refused((tf_prof_opts){.gpu_timer = TF_PROF_GPU_TIMER_CUPTI},
            "a GPU timer applies to the cuda and hip backends");
    refused((tf_prof_opts){.backend = TF_BACKEND_AUTO}, "not one of cpu, cuda, hip or auto");
    refused((tf_prof_opts){.backend = TF_BACKEND_CUDA,
                           .gpu_timer = TF_PROF_GPU_TIMER_EVENTS,
                           .counters = "x"},
            "CUPTI timer");
    refused((tf_prof_opts){.backend = TF_BACKEND_CUDA, .gpu_timer = (tf_prof_gpu_timer)7},
            "unknown timer");
#if !defined(TF_HAVE_CUDA) && !defined(TF_HAVE_HIP)
    refused((tf_prof_opts){.backend = TF_BACKEND_HIP}, "no GPU backend");
    refused((tf_prof_opts){.backend = TF_BACKEND_CUDA, .gpu_timer = TF_PROF_GPU_TIMER_EVENTS},
            "no GPU backend");
#else
    /* a GPU build: the event timer is created without a device (its events
     * are made on the first step), and says so when no backend is attached */
    char err[256];
    tf_prof_opts o = {.backend = tf_backend_gpu()->kind,
                      .gpu_timer = TF_PROF_GPU_TIMER_EVENTS};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    assert_non_null(p->evt);
    tf_prof_step_begin(p, 0, 0);
    tf_prof_step_end(p, 0);
    assert_non_null(strstr(prof_evt_warning(p->evt), "no GPU backend was attached"));
    tf_prof_destroy(p);
#endif
    /* the CPU's host timer is unchanged by all this */
    char err2[256];
    tf_prof_opts cpu = {0};
    tf_prof *q = tf_prof_create(&cpu, err2, sizeof err2);
    assert_non_null(q);
    assert_int_equal(q->timer, PROF_TIMER_HOST);
    assert_null(q->evt);
    tf_prof_destroy(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_drops),
        cmocka_unit_test(test_timer_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
