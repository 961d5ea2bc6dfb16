/* hostemu: the profiler's GPU event timer end to end (run_prof.sh builds
 * it): the trainer attaches the emulated CUDA backend, the model's ops are
 * bracketed by events (src/prof/gpu/gpu_events.cu) on the main queue and on
 * the weight-gradient lane, and the outputs are read back:
 *  - summary.json says events / op, no warning, and every op call of every
 *    timed step is one record (ops per step = the op table's calls per step);
 *  - every record ends at or after its start, and per phase and step the
 *    records' summed time fits in their span (the emulator runs each queue's
 *    work as it is issued, so even the lane's ops are one after another);
 *  - each phase's op time is at most its host wall time (the host waits for
 *    the device at each phase end);
 *  - trace.json is valid and has the main queue's and the lane's tracks.
 *   prof_check DIR     (exit status 1 on a failed check, 2 on a setup error) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "test_prof_util.h"
#include "tinyfold.h"

#define STEPS 2
static int fails;
#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            fails++;                                            \
            printf("prof_check: FAIL %s: ", #cond);             \
            printf(__VA_ARGS__);                                \
            printf("\n");                                       \
        }                                                       \
    } while (0)

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: prof_check DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char err[512], path[1024];
    tf_config c;
    tf_config_default(&c);
    c.batch = 1, c.seq_len = 16, c.n_seqs = 4, c.n_blocks = 1, c.msa_dim = 32, c.pair_dim = 32;
    c.backend = TF_BACKEND_CUDA;
    c.impl = TF_IMPL_V3; /* the weight-gradient lane */
    c.fusion = tf_fusion_for_impl(c.impl);
    c.warmup_steps = 1;
    c.graph = 0;
    snprintf(c.gpu_plan, sizeof c.gpu_plan, "lane=on");
    tf_prof_opts o = {.out_dir = dir,
                      .backend = TF_BACKEND_CUDA,
                      .gpu_timer = TF_PROF_GPU_TIMER_EVENTS,
                      .trace_max_steps = STEPS};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    tf_trainer *t = NULL;
    if (!p || tf_trainer_create(&t, &c, err, sizeof err) != TF_OK) {
        fprintf(stderr, "prof_check: %s\n", err);
        return 2;
    }
    tf_trainer_set_prof(t, p);
    tf_step_stats st;
    for (long s = 0; s < 1 + STEPS; s++)
        if (tf_trainer_step(t, s, &st) != TF_OK) {
            fprintf(stderr, "prof_check: step %ld failed\n", s);
            return 2;
        }
    if (tp_finish(p, NULL, stdout, err, sizeof err)) {
        fprintf(stderr, "prof_check: finish: %s\n", err);
        return 2;
    }
    tf_trainer_destroy(t);
    tf_prof_destroy(p);

    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *j = tp_read_json(path);
    if (!j) {
        fprintf(stderr, "prof_check: %s unreadable\n", path);
        return 2;
    }
    CHECK(!strcmp(str(j, "timer"), "events"), "timer '%s'", str(j, "timer"));
    CHECK(!strcmp(str(j, "launch_unit"), "op"), "launch_unit '%s'", str(j, "launch_unit"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "warnings")) == 0, "warnings present");
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "op_costs"), "ops"), *e;
    double calls = 0;
    cJSON_ArrayForEach(e, ops) {
        double cs = num(e, "calls_per_step"), l = num(e, "launches");
        CHECK(l == cs * STEPS, "%s %s: %.0f records, %.0f calls a step", str(e, "path"),
              str(e, "name"), l, cs);
        calls += cs;
    }
    CHECK(calls > 0 && num(j, "launches_per_step") == calls, "ops per step %.1f, calls %.0f",
          num(j, "launches_per_step"), calls);
    static const char *const ph[3] = {"forward_pass", "backward_pass", "optimizer_step"};
    const cJSON *phases = cJSON_GetObjectItem(j, "phases");
    for (int k = 0; k < 3; k++) {
        const cJSON *q = cJSON_GetObjectItem(phases, ph[k]);
        CHECK(num(q, "kernel_ns") > 0 && num(q, "kernel_ns") <= num(q, "total_ns"),
              "%s: op time %.0f ns, host wall %.0f ns", ph[k], num(q, "kernel_ns"),
              num(q, "total_ns"));
    }

    /* records: per phase and step, the sum within the span */
    snprintf(path, sizeof path, "%s/kernel_trace.csv", dir);
    char *text = tp_read(path), *s = text;
    if (!text) {
        fprintf(stderr, "prof_check: %s unreadable\n", path);
        return 2;
    }
    double sum[3][STEPS] = {{0}}, lo[3][STEPS], hi[3][STEPS];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < STEPS; i++) lo[k][i] = 1e300, hi[k][i] = -1e300;
    tp_csv_row r;
    size_t rows = 0;
    tp_csv_next(&s, &r);
    while (tp_csv_next(&s, &r)) {
        if (r.n < 6) continue;
        rows++;
        long step = atol(r.f[2]) - 1;
        double a = atof(r.f[3]), b = atof(r.f[4]);
        CHECK(b >= a, "%s ends before it starts", r.f[0]);
        CHECK(step >= 0 && step < STEPS, "a record of step %s", r.f[2]);
        if (step < 0 || step >= STEPS) continue;
        for (int k = 0; k < 3; k++)
            if (!strncmp(r.f[1], ph[k], strlen(ph[k]))) {
                sum[k][step] += b - a;
                lo[k][step] = fmin(lo[k][step], a);
                hi[k][step] = fmax(hi[k][step], b);
            }
    }
    free(text);
    CHECK(rows == (size_t)(calls * STEPS), "%zu trace rows", rows);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < STEPS; i++)
            CHECK(sum[k][i] <= hi[k][i] - lo[k][i], "%s step %d: %.0f ns of ops in a %.0f ns span",
                  ph[k], i, sum[k][i], hi[k][i] - lo[k][i]);

    snprintf(path, sizeof path, "%s/trace.json", dir);
    text = tp_read(path);
    cJSON *tr = text ? cJSON_Parse(text) : NULL;
    CHECK(tr != NULL, "trace.json does not parse");
    CHECK(text && strstr(text, "\"main queue\""), "no main-queue track");
    CHECK(text && strstr(text, "\"wgrad lane"), "no lane track");
    cJSON_Delete(tr);
    free(text);
    cJSON_Delete(j);
    printf("prof_check: %.0f ops per step, %zu records: %s\n", calls, rows,
           fails ? "FAILED" : "all checks passed");
    return fails ? 1 : 0;
}
