/* Profiler, CPU path: drive the hooks with a synthetic workload of ops that
 * spin a known minimum time, and check the files and the report against
 * what was issued. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "prof/prof_internal.h"
#include "test_prof_util.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return tp_mkdtemp(tmpdir, sizeof tmpdir, "prof");
}

static int teardown(void **state) {
    (void)state;
    static const char *const subs[] = {"a", "b", "c", "d", "e", "f", "g"};
    char path[512];
    for (size_t s = 0; s < sizeof subs / sizeof subs[0]; s++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, subs[s]);
        tp_rm_outputs(path);
    }
    snprintf(path, sizeof path, "%s/file", tmpdir);
    unlink(path);
    rmdir(tmpdir);
    return 0;
}

static void dir_of(char *buf, size_t n, const char *sub) { snprintf(buf, n, "%s/%s", tmpdir, sub); }

/* Runs warm-up + timed steps with the given options; returns the finished
 * profiler's report text (caller frees). */
static char *run(const tf_prof_opts *o, tp_expect *e, int nwarm, int nsteps, int keep) {
    char err[256] = "";
    tf_prof *p = tf_prof_create(o, err, sizeof err);
    if (!p) fprintf(stderr, "create: %s\n", err);
    assert_non_null(p);
    memset(e, 0, sizeof *e);
    for (int s = 0; s < nwarm + nsteps; s++) {
        int warm = s < nwarm;
        tp_step(p, e, s, warm, !warm || o->include_warmup, keep);
    }
    cJSON *runj = tp_run_json(4, 64, 100.0, 40.0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    int rc = tp_finish(p, runj, out, err, sizeof err);
    if (rc) fprintf(stderr, "finish: %s\n", err);
    assert_int_equal(rc, 0);
    fclose(out);
    cJSON_Delete(runj);
    tf_prof_destroy(p);
    return text;
}

static char *file_in(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tp_read(path);
}

/* kernel_stats.csv: exact header, sort order, calls and totals, percentages. */
static void check_stats_csv(const char *dir, const tp_expect *e) {
    char *csv = file_in(dir, "kernel_stats.csv");
    assert_non_null(csv);
    const char *header =
        "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\","
        "\"StdDev\"\n";
    assert_memory_equal(csv, header, strlen(header));
    char *s = csv + strlen(header);
    tp_csv_row r;
    double pct = 0, prev_total = INFINITY;
    int rows = 0;
    uint64_t seen[TP_NNAMES] = {0};
    while (tp_csv_next(&s, &r)) {
        assert_int_equal(r.n, 8);
        int k = -1;
        for (int i = 0; i < TP_NNAMES; i++)
            if (!strcmp(r.f[0], tp_names[i])) k = i;
        assert_true(k >= 0);
        uint64_t calls = strtoull(r.f[1], NULL, 10);
        double total = strtod(r.f[2], NULL), avg = strtod(r.f[3], NULL);
        double mn = strtod(r.f[5], NULL), mx = strtod(r.f[6], NULL), sd = strtod(r.f[7], NULL);
        assert_true(total <= prev_total); /* sorted by total, descending */
        prev_total = total;
        assert_int_equal(calls, e->calls[k]);
        assert_true(total >= (double)e->lo[k]);
        assert_true(total <= (double)e->hi[k]);
        assert_true(fabs(avg - total / (double)calls) <= 1e-3 + 1e-9 * avg);
        assert_true(mn <= avg + 1e-3 && avg <= mx + 1e-3);
        assert_true(sd >= 0 && sd <= mx - mn + 1e-3);
        pct += strtod(r.f[4], NULL);
        seen[k] = calls;
        rows++;
    }
    int expect_rows = 0;
    for (int i = 0; i < TP_NNAMES; i++) {
        expect_rows += e->calls[i] > 0;
        assert_int_equal(seen[i], e->calls[i]);
    }
    assert_int_equal(rows, expect_rows);
    if (rows) assert_true(fabs(pct - 100.0) <= 0.01);
    free(csv);
}

/* kernel_trace.csv: only traced steps, one row per launch, durations consistent. */
static int check_trace_csv(const char *dir, long first, long last) {
    char *csv = file_in(dir, "kernel_trace.csv");
    assert_non_null(csv);
    const char *header = "\"Name\",\"Region\",\"Step\",\"StartNs\",\"EndNs\",\"DurationNs\",\"Grid\","
                         "\"Block\",\"Registers\",\"SharedMemBytes\"\n";
    assert_memory_equal(csv, header, strlen(header));
    char *s = csv + strlen(header);
    tp_csv_row r;
    int rows = 0;
    long long prev_start = -1;
    while (tp_csv_next(&s, &r)) {
        assert_int_equal(r.n, 10);
        long step = strtol(r.f[2], NULL, 10);
        assert_true(step >= first && step <= last);
        long long st = strtoll(r.f[3], NULL, 10), en = strtoll(r.f[4], NULL, 10);
        assert_int_equal(en - st, strtoll(r.f[5], NULL, 10));
        assert_true(st >= prev_start);
        prev_start = st;
        for (int i = 6; i < 10; i++) assert_string_equal(r.f[i], ""); /* CPU: no grid etc. */
        rows++;
    }
    free(csv);
    return rows;
}

static const cJSON *jget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fprintf(stderr, "missing key %s\n", k);
    assert_non_null(v);
    return v;
}

static const cJSON *find_by(const cJSON *arr, const char *key, const char *val) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
        if (cJSON_IsString(v) && !strcmp(v->valuestring, val)) return e;
    }
    return NULL;
}

static int count_ph(const cJSON *events, const char *ph, int tid) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *p = cJSON_GetObjectItem(e, "ph"), *t = cJSON_GetObjectItem(e, "tid");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, ph) &&
            (tid < 0 || (cJSON_IsNumber(t) && t->valueint == tid)))
            n++;
    }
    return n;
}

static void test_full_run(void **state) {
    (void)state;
    char dir[300];
    dir_of(dir, sizeof dir, "a");
    tf_prof_opts o = {.out_dir = dir};
    tp_expect e;
    char *report = run(&o, &e, 2, 6, TP_ALL);
    assert_int_equal(e.launches, 6 * 14);
    check_stats_csv(dir, &e);
    /* default trace cap: the first 5 collected steps (2..6) */
    assert_int_equal(check_trace_csv(dir, 2, 6), 5 * 14);

    cJSON *sum = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/summary.json"));
    assert_non_null(sum);
    assert_string_equal(jget(jget(jget(sum, "run"), "config"), "impl")->valuestring, "v2");
    assert_int_equal(jget(sum, "steps_collected")->valueint, 6);
    assert_true(fabs(jget(sum, "launches_per_step")->valuedouble - 14.0) < 1e-9);
    assert_true(cJSON_IsNull(jget(sum, "selected_regions")));
    const cJSON *tr = jget(sum, "trace");
    assert_true(cJSON_IsTrue(jget(tr, "cap_hit")));
    assert_int_equal(jget(tr, "traced_steps")->valueint, 5);
    /* kernels in summary agree with the CSV expectations */
    const cJSON *ks = jget(sum, "kernels");
    double pct = 0;
    for (int i = 0; i < TP_NNAMES; i++) {
        const cJSON *k = find_by(ks, "name", tp_names[i]);
        assert_non_null(k);
        assert_int_equal((uint64_t)jget(k, "calls")->valuedouble, e.calls[i]);
        pct += jget(k, "pct")->valuedouble;
    }
    assert_true(fabs(pct - 100.0) <= 0.01);
    /* regions: full paths, calls per collected step */
    const cJSON *regs = jget(sum, "regions");
    const cJSON *qkv = find_by(regs, "path", "forward_pass/block_0/msa_row_attention/msa_qkv");
    assert_non_null(qkv);
    assert_int_equal(jget(qkv, "calls")->valueint, 6);
    assert_true(jget(qkv, "total_ns")->valuedouble >= 6 * 180e3);
    const cJSON *fwd = find_by(regs, "path", "forward_pass");
    assert_non_null(fwd);
    assert_true(jget(fwd, "total_ns")->valuedouble >= jget(qkv, "total_ns")->valuedouble);
    assert_true(jget(fwd, "pct")->valuedouble > 0 && jget(fwd, "pct")->valuedouble < 100);
    /* modules: msa_row_attention over both blocks, forward and backward */
    const cJSON *mra = find_by(jget(sum, "modules"), "name", "msa_row_attention");
    assert_non_null(mra);
    assert_int_equal(jget(mra, "calls")->valueint, 3 * 6);
    assert_true(jget(mra, "forward_ns")->valuedouble >= 6 * 2 * 200e3);
    assert_true(jget(mra, "backward_ns")->valuedouble >= 6 * 160e3);
    /* memory: the largest backend sample of the run, per region too */
    const cJSON *mem = jget(sum, "memory");
    assert_int_equal(jget(mem, "peak_backend_bytes")->valueint, 5000 + 7);
    assert_true(jget(mem, "peak_host_rss_bytes")->valuedouble > 0);
    const cJSON *mroot = find_by(jget(mem, "regions"), "path", "(all)");
    assert_non_null(mroot);
    assert_int_equal(jget(mroot, "peak_backend_bytes")->valueint, 5007);
    cJSON_Delete(sum);

    /* trace.json parses, X events nest per tid, 5 step markers, memory counter */
    cJSON *tj = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/trace.json"));
    assert_non_null(tj);
    const cJSON *ev = jget(tj, "traceEvents");
    int nx = tp_check_nesting(ev);
    assert_true(nx > 0);
    int regions_per_step = 1 + 1 + 2 * 4 + 3 + 1; /* data, fwd, 2x(block, mra, qkv, tri), bwd 3, opt */
    assert_int_equal(nx, 5 * (1 + regions_per_step + 14));
    assert_int_equal(count_ph(ev, "X", 2), 5); /* steps track */
    assert_int_equal(count_ph(ev, "C", -1), 5 * 2);
    assert_true(count_ph(ev, "M", -1) >= 4);
    cJSON_Delete(tj);

    /* the report */
    assert_non_null(strstr(report, "Kernel "));
    assert_non_null(strstr(report, "Calls |"));
    assert_non_null(strstr(report, "Total ms"));
    assert_non_null(strstr(report, "% of time"));
    assert_non_null(strstr(report, "Kernel launches per step: 14.0"));
    assert_non_null(strstr(report, "forward_pass"));
    assert_non_null(strstr(report, "msa_row_attention"));
    assert_non_null(strstr(report, "triangle_mult_outgoing"));
    assert_non_null(strstr(report, "Peak memory"));
    assert_non_null(strstr(report, "cap of 5 steps reached"));
    assert_non_null(strstr(report, dir));
    if (getenv("TF_TEST_VERBOSE")) fputs(report, stderr);
    free(report);
}

/* --selected-regions: nothing outside the selected regions is recorded. */
static void test_selected_regions(void **state) {
    (void)state;
    char dir[300];
    dir_of(dir, sizeof dir, "b");
    tf_prof_opts o = {.out_dir = dir, .selected_regions = "forward_pass, backward_pass"};
    tp_expect e;
    free(run(&o, &e, 1, 3, TP_FWD | TP_QKV | TP_BWD));
    assert_int_equal(e.calls[TP_LOAD] + e.calls[TP_ADAMW], 0);
    check_stats_csv(dir, &e); /* no load/adamw rows, exact calls of the others */
    cJSON *sum = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/summary.json"));
    assert_non_null(sum);
    const cJSON *r;
    cJSON_ArrayForEach(r, jget(sum, "regions")) {
        const char *path = jget(r, "path")->valuestring;
        assert_true(!strncmp(path, "forward_pass", 12) || !strncmp(path, "backward_pass", 13));
    }
    assert_int_equal(cJSON_GetArraySize(jget(sum, "selected_regions")), 2);
    cJSON_Delete(sum);
    cJSON *tj = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/trace.json"));
    assert_non_null(tj);
    assert_true(tp_check_nesting(jget(tj, "traceEvents")) > 0);
    cJSON_Delete(tj);

    /* a nested selection: only msa_qkv's three GEMMs per block */
    dir_of(dir, sizeof dir, "c");
    o.out_dir = dir;
    o.selected_regions = "msa_qkv";
    char *rep = run(&o, &e, 0, 2, TP_QKV);
    assert_int_equal(e.calls[TP_GEMM_NT], 2 * 2 * 3);
    assert_int_equal(e.calls[TP_SOFTMAX], 0);
    check_stats_csv(dir, &e);
    assert_int_equal(check_trace_csv(dir, 0, 1), 12);
    assert_non_null(strstr(rep, "outside the selected regions"));
    free(rep);
    sum = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/summary.json"));
    assert_non_null(sum);
    int nreg = 0;
    cJSON_ArrayForEach(r, jget(sum, "regions")) {
        assert_non_null(strstr(jget(r, "path")->valuestring, "msa_qkv")); /* nothing above it */
        nreg++;
    }
    assert_int_equal(nreg, 2); /* block_0 and block_1 */
    assert_null(cJSON_GetObjectItem(jget(sum, "phases"), "forward_pass"));
    cJSON_Delete(sum);
}

/* Warm-up steps are excluded by default and included on request. */
static void test_warmup(void **state) {
    (void)state;
    char dir[300];
    dir_of(dir, sizeof dir, "d");
    tf_prof_opts o = {.out_dir = dir, .include_warmup = 1};
    tp_expect e;
    free(run(&o, &e, 3, 2, TP_ALL));
    assert_int_equal(e.launches, 5 * 14);
    check_stats_csv(dir, &e);
    assert_int_equal(check_trace_csv(dir, 0, 4), 5 * 14);
    cJSON *sum = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/summary.json"));
    assert_int_equal(jget(sum, "steps_collected")->valueint, 5);
    assert_true(cJSON_IsFalse(jget(jget(sum, "trace"), "cap_hit")));
    cJSON_Delete(sum);

    /* only warm-up steps, not included: nothing collected, files still valid */
    dir_of(dir, sizeof dir, "e");
    o.out_dir = dir;
    o.include_warmup = 0;
    char *rep = run(&o, &e, 2, 0, TP_ALL);
    assert_int_equal(e.launches, 0);
    check_stats_csv(dir, &e);
    assert_int_equal(check_trace_csv(dir, 0, 0), 0);
    assert_non_null(strstr(rep, "No kernel launches were collected"));
    free(rep);
}

/* The trace keeps per-launch rows for trace_max_steps steps only. */
static void test_trace_cap(void **state) {
    (void)state;
    char dir[300];
    dir_of(dir, sizeof dir, "f");
    tf_prof_opts o = {.out_dir = dir, .trace_max_steps = 2};
    tp_expect e;
    char *rep = run(&o, &e, 1, 7, TP_ALL);
    check_stats_csv(dir, &e); /* statistics still cover all 7 steps */
    assert_int_equal(check_trace_csv(dir, 1, 2), 2 * 14);
    cJSON *tj = tp_read_json(strcat(strcpy((char[400]){0}, dir), "/trace.json"));
    assert_non_null(tj);
    assert_int_equal(count_ph(jget(tj, "traceEvents"), "X", 2), 2);
    assert_true(cJSON_IsTrue(jget(jget(tj, "otherData"), "trace_cap_hit")));
    cJSON_Delete(tj);
    assert_non_null(strstr(rep, "cap of 2 steps reached"));
    free(rep);
}

/* GPU busy time is the union of the kernels' spans per phase and traced step:
 * kernels beside each other (the weight-gradient lane) count once, a memcpy
 * not at all, and the summed kernel time stays the sum. A tf_prof built by
 * hand: paths root, forward_pass, forward_pass/x, backward_pass. */
static void test_busy_union(void **state) {
    (void)state;
    tf_prof p;
    memset(&p, 0, sizeof p);
    char *names[] = {"", "forward_pass", "x", "backward_pass"};
    prof_path paths[4];
    memset(paths, 0, sizeof paths);
    paths[1].parent = PROF_ROOT, paths[1].name = 1;
    paths[2].parent = 1, paths[2].name = 2;
    paths[3].parent = PROF_ROOT, paths[3].name = 3;
    prof_step steps[2];
    memset(steps, 0, sizeof steps);
    steps[0].collected = steps[0].traced = 1;
    steps[1].collected = steps[1].traced = 1;
    /* step 0 forward: [0,10) [5,20) [30,40) -> 30; a memcpy [50,90) ignored;
     * step 0 backward: [100,110) [100,105) -> 10; step 1 forward: [0,4) [4,8) -> 8 */
    prof_launch l[7] = {
        {.path = 2, .step = 0, .start = 0, .end = 10},   {.path = 1, .step = 0, .start = 5, .end = 20},
        {.path = 2, .step = 0, .start = 30, .end = 40},  {.path = 2, .step = 0, .kind = PROF_KIND_MEMCPY, .start = 50, .end = 90},
        {.path = 3, .step = 0, .start = 100, .end = 110}, {.path = 3, .step = 0, .start = 100, .end = 105},
        {.path = 1, .step = 1, .start = 4, .end = 8}};
    prof_launch l7 = {.path = 1, .step = 1, .start = 0, .end = 4};
    prof_launch all[8];
    memcpy(all, l, sizeof l);
    all[7] = l7;
    p.names.strs = names;
    p.paths = paths, p.npaths = 4;
    p.steps = steps, p.nsteps = 2;
    p.launches = all, p.nlaunch = 8;
    p.timer = PROF_TIMER_CUPTI; /* a device timer (CUPTI or events) */
    prof_totals t;
    prof_compute_totals(&p, &t);
    assert_int_equal(t.busy_steps, 2);
    assert_int_equal(t.phase_busy_ns[1], 30 + 8);
    assert_int_equal(t.phase_busy_ns[2], 10);
    assert_int_equal(t.phase_busy_ns[0], 0);
    p.timer = PROF_TIMER_HOST; /* the CPU: no busy time */
    prof_compute_totals(&p, &t);
    assert_int_equal(t.busy_steps, 0);
}

/* A NULL profiler: every hook is a no-op. */
static void test_null_prof(void **state) {
    (void)state;
    tp_step(NULL, NULL, 0, 0, 0, 0);
    tf_prof_memory(NULL, 1, 1);
    tf_prof_destroy(NULL);
    char err[128] = "";
    assert_int_not_equal(tf_prof_finish(NULL, NULL, err, sizeof err), 0);
}

/* Unbalanced pops, deep nesting, ops outside steps, and no out_dir. */
static void test_robustness(void **state) {
    (void)state;
    char err[256];
    tf_prof_opts o = {0};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    tf_region_pop(p);
    tf_prof_op_end(p);
    tf_prof_op_begin(p, "outside_step"); /* not in a step: not collected */
    tf_prof_op_end(p);
    tf_prof_step_begin(p, 0, 0);
    for (int i = 0; i < 100; i++) tf_region_push(p, "deep");
    tf_prof_op_begin(p, "deep_op");
    tf_prof_op_end(p);
    for (int i = 0; i < 100; i++) tf_region_pop(p);
    tf_region_push(p, "after");
    tf_prof_op_begin(p, "after_op");
    tf_prof_op_end(p);
    tf_region_pop(p);
    tf_prof_step_end(p, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_int_equal(tp_finish(p, NULL, out, err, sizeof err), 0);
    fclose(out);
    assert_non_null(strstr(text, "deep_op"));
    assert_non_null(strstr(text, "after_op"));
    assert_null(strstr(text, "outside_step"));
    assert_non_null(strstr(text, "unbalanced"));
    assert_int_not_equal(tf_prof_finish(p, NULL, err, sizeof err), 0); /* twice */
    free(text);
    tf_prof_destroy(p);
}

static void test_create_errors(void **state) {
    (void)state;
    char err[256] = "";
    tf_prof_opts o = {.selected_regions = "forward_pass,,loss"};
    assert_null(tf_prof_create(&o, err, sizeof err));
    assert_non_null(strstr(err, "empty region name"));

    char file[300];
    snprintf(file, sizeof file, "%s/file", tmpdir);
    assert_int_equal(tp_write(file, "x"), 0);
    tf_prof_opts o2 = {.out_dir = file};
    err[0] = 0;
    assert_null(tf_prof_create(&o2, err, sizeof err));
    assert_non_null(strstr(err, file));

    tf_prof_opts o3 = {.backend = TF_BACKEND_CUDA};
    err[0] = 0;
#ifndef TF_HAVE_CUDA
    assert_null(tf_prof_create(&o3, err, sizeof err));
    assert_non_null(strstr(err, "no CUDA"));
#else
    /* without a device the CUDA profiler refuses cleanly; with one it starts */
    tf_prof *pc = tf_prof_create(&o3, err, sizeof err);
    if (pc) tf_prof_destroy(pc);
    else assert_non_null(strstr(err, "CUDA"));
#endif
}

/* an op of `flops` and `bytes` (the costs count in the first collected step
 * only) in the region path `path` (components split at '/') */
static void cost_op(tf_prof *p, const char *path, double flops, double bytes) {
    char buf[256], *save = NULL;
    int depth = 0;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save), depth++)
        tf_region_push(p, c);
    tf_prof_op_begin(p, "op");
    tf_prof_op_cost(p, "op", flops, bytes);
    tp_spin_us(20);
    tf_prof_op_end(p);
    while (depth--) tf_region_pop(p);
}

/* Each module's FLOPs and bytes: its ops' at any depth, over all blocks and
 * both passes, one step's (not the sum over the collected steps); nothing
 * from outside the modules; the roof by the run's precision's ceiling. */
static void test_module_costs(void **state) {
    (void)state;
    char err[256] = "";
    tf_prof_opts o = {.precision = TF_PREC_BF16};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    for (long s = 0; s < 3; s++) {
        tf_prof_step_begin(p, s, 0);
        cost_op(p, "forward_pass/block_0/triangle_attn_ending/qkv", 2e9, 1e8);
        cost_op(p, "forward_pass/block_1/triangle_attn_ending", 1e9, 5e7);
        cost_op(p, "backward_pass/block_0/triangle_attn_ending/attention/inner", 3e9, 2e8);
        cost_op(p, "forward_pass/block_0/pair_transition", 4e9, 1e8);
        cost_op(p, "optimizer_step", 7e9, 7e9);
        tf_prof_step_end(p, s);
    }
    assert_int_equal(tf_prof_finish(p, NULL, err, sizeof err), 0);
    /* ceilings as a written profile measures them: bf16 is held to the half GEMM's */
    p->ceil.gemm_flops = 1e12, p->ceil.gemm_half_flops = 4e12, p->ceil.copy_bytes = 1e11;
    tf_prof_summary s;
    assert_int_equal(tf_prof_summarize(p, &s), 0);
    assert_true(s.ceil_flops == 4e12 && s.ceil_bytes == 1e11);
    int seen = 0;
    for (size_t i = 0; i < s.nmodules; i++) {
        const tf_prof_module_row *m = &s.modules[i];
        if (!strcmp(m->name, "triangle_attn_ending")) {
            assert_true(m->flops == 6e9 && m->bytes == 3.5e8);
            assert_true(m->roof_ns == 3.5e6); /* its bytes: 3.5e8 at 1e11 B/s */
            seen |= 1;
        } else if (!strcmp(m->name, "pair_transition")) {
            assert_true(m->flops == 4e9 && m->bytes == 1e8);
            assert_true(m->roof_ns == 1e6);
            seen |= 2;
        } else {
            fail_msg("unexpected module %s", m->name);
        }
    }
    assert_int_equal(seen, 3);
    /* the ops, by time a step above their roof: each (module, pass, op) over
     * the blocks; at the ceilings above, pair_transition's forward needs 1 ms,
     * triangle_attn_ending's forward 1.5 ms (its bytes), its backward 2 ms */
    assert_int_equal(s.nops, 3);
    assert_string_equal(s.ops[0].module, "pair_transition");
    assert_true(s.ops[0].roof_ns == 1e6);
    assert_string_equal(s.ops[1].pass, "forward");
    assert_true(s.ops[1].flops == 3e9 && s.ops[1].bytes == 1.5e8 && s.ops[1].roof_ns == 1.5e6);
    assert_string_equal(s.ops[2].module, "triangle_attn_ending");
    assert_string_equal(s.ops[2].pass, "backward");
    assert_true(s.ops[2].flops == 3e9 && s.ops[2].bytes == 2e8 && s.ops[2].roof_ns == 2e6);
    assert_true(s.ops[0].above_ns > s.ops[1].above_ns && s.ops[1].above_ns > s.ops[2].above_ns);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    tf_report_prof_table(&s, out);
    fclose(out);
    assert_non_null(strstr(text, "at 4 TFLOP/s and 0.1 TB/s"));
    assert_non_null(strstr(text, "|    GFLOP |      GB | x roof"));
    assert_non_null(strstr(text, "|     6.00 |   0.350 |"));
    assert_non_null(strstr(text, "|     4.00 |   0.100 |"));
    assert_non_null(strstr(text, "Ops with the most time above their roof"));
    assert_non_null(strstr(text, "triangle_attn_ending / backward / op"));
    free(text);
    tf_prof_summary_free(&s);
    /* tf32 without a TF32 ceiling, and fp32: the fp32 GEMM's */
    assert_true(prof_compute_ceiling(&p->ceil, TF_PREC_TF32) == 1e12);
    assert_true(prof_compute_ceiling(&p->ceil, TF_PREC_FP32) == 1e12);
    assert_true(prof_compute_ceiling(&p->ceil, TF_PREC_FP16) == 4e12);
    tf_prof_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_costs),
        cmocka_unit_test(test_full_run),     cmocka_unit_test(test_selected_regions),
        cmocka_unit_test(test_warmup),       cmocka_unit_test(test_trace_cap),
        cmocka_unit_test(test_null_prof),    cmocka_unit_test(test_robustness),
        cmocka_unit_test(test_busy_union),
        cmocka_unit_test(test_create_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
