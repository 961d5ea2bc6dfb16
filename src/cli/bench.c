/* `tinyfold bench`: problems x levels, median step time, and on the CPU the
 * machine's own sgemm rate to read the step's GFLOP/s against: the fastest
 * call of either shape measured just before and just after the row
 * (prof/sgemm_ref.h), so that a neighbour holding a core while the
 * reference is taken cannot make a step look faster than sgemm. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "backend/registry.h"
#include "prof/sgemm_ref.h"
#include "train/timed.h"

#include <cJSON.h>
#include <math.h>
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int B, N, S, blocks;
} bench_problem;

/* each shape of the sgemm reference is called for this long (fastest call) */
#define SGEMM_MS 150.0

static const bench_problem problems[] = {
    {"tiny", 2, 32, 8, 2},
    {"small", 4, 64, 16, 4},
    {"large", 4, 128, 32, 4},
};

static int listed(const char *list, const char *item)
{
    size_t len = strlen(item);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, item, len) == 0)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

typedef struct {
    const bench_problem *p;
    tf_impl impl;
    double step_ms, samples, gflops;
    double sgemm; /* CPU: the sgemm reference of this row (GFLOP/s), 0 elsewhere */
    size_t bytes;
    int status; /* TF_OK, or why the row has no numbers */
    char why[256];
} bench_row;

/* The live progress line of a row's step i (2 warm-up steps first). */
typedef struct {
    const bench_row *row;
    int steps;
} bench_live;

static void show_step(void *ctx, int i)
{
    const bench_live *lv = ctx;
    fprintf(stderr, "\r\033[K%s %s: %s %d/%d", lv->row->p->name, tf_cli_impl_name(lv->row->impl),
            i < 2 ? "warm-up" : "step", i < 2 ? i + 1 : i - 1, i < 2 ? 2 : lv->steps);
    fflush(stderr);
}

static void run_one(bench_row *row, const tf_config *base, int steps, int live)
{
    tf_config c = *base;
    c.batch = row->p->B;
    c.seq_len = row->p->N;
    c.n_seqs = row->p->S;
    c.n_blocks = row->p->blocks;
    c.impl = row->impl;
    c.fusion = tf_fusion_for_impl(row->impl);
    c.warmup_steps = 2;
    c.num_steps = steps;
    tf_trainer *t = NULL;
    row->status = tf_trainer_create(&t, &c, row->why, sizeof row->why);
    if (row->status != TF_OK)
        return;
    bench_live lv = {row, steps};
    tf_timed r;
    row->status = tf_timed_steps(t, 2, steps, live ? show_step : NULL, &lv, &r);
    if (row->status != TF_OK && r.failed < 0) {
        tf_trainer_destroy(t);
        snprintf(row->why, sizeof row->why, "out of host memory");
        return;
    }
    if (row->status != TF_OK)
        snprintf(row->why, sizeof row->why, "step %d failed (status %d, loss %g)", r.failed,
                 (int)row->status, (double)r.st.loss);
    if (live) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    if (row->status == TF_OK) {
        row->step_ms = r.median_ms;
        row->samples = row->step_ms > 0 ? c.batch / (row->step_ms * 1e-3) : 0;
        row->gflops =
            row->step_ms > 0 ? 3.0 * tf_flops_forward(&c) / (row->step_ms * 1e-3) * 1e-9 : 0;
        row->bytes = tf_trainer_backend_bytes(t);
    }
    tf_trainer_destroy(t);
}

static cJSON *row_json(const bench_row *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "problem", r->p->name);
    cJSON_AddStringToObject(j, "impl", tf_cli_impl_name(r->impl));
    if (r->status != TF_OK) {
        cJSON_AddStringToObject(j, "error", r->why);
        return j;
    }
    cJSON_AddNumberToObject(j, "median_step_ms", r->step_ms);
    cJSON_AddNumberToObject(j, "samples_per_sec", r->samples);
    cJSON_AddNumberToObject(j, "gflops", r->gflops);
    cJSON_AddNumberToObject(j, "peak_memory_bytes", (double)r->bytes);
    if (r->sgemm > 0) {
        cJSON_AddNumberToObject(j, "sgemm_gflops", r->sgemm);
        cJSON_AddNumberToObject(j, "pct_sgemm", 100.0 * r->gflops / r->sgemm);
        cJSON_AddBoolToObject(j, "sgemm_measured_low", r->gflops > r->sgemm);
    }
    return j;
}

int tf_cli_bench(tf_cli_opts *o)
{
    tf_config base = o->cfg;
    char note[384], err[512];
    if (tf_config_validate(&base, err, sizeof err) != TF_OK) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    int rc = tf_cli_resolve_backend(&base, note, sizeof note);
    if (rc != TF_EXIT_OK)
        return rc;
    int cpu = base.backend == TF_BACKEND_CPU;
    if (o->scaling)
        return tf_cli_bench_scaling(o, &base, cpu);
    const char *plist = o->problems ? o->problems : cpu ? "tiny,small" : "tiny,small,large";
    const char *ilist = o->impls ? o->impls : "v1,v2,v3";
    int live = !o->quiet && !o->no_progress && isatty(STDERR_FILENO);

    printf("tinyfold %s bench | backend %s%s%s%s | precision %s | %d timed step%s after 2 "
           "warm-up, median\n",
           TF_VERSION, tf_backend_kind_name(base.backend), note[0] ? " (" : "", note,
           note[0] ? ")" : "", tf_precision_name(base.precision), o->bench_steps,
           o->bench_steps == 1 ? "" : "s");
    tf_sgemm_ref ref = {0, 0}, run_best = {0, 0};
    if (cpu) {
        omp_set_num_threads(base.threads);
        openblas_set_num_threads(base.threads);
        tf_sgemm_ref_measure(&ref, SGEMM_MS);
        run_best = ref;
        printf("BLAS: %s\n", tf_cli_blas_info());
        printf("OpenMP wait: %s\n", tf_cli_omp_wait_info());
        printf("Machine sgemm (cblas, %d threads, fastest call in %.0f ms): 1024x1024x1024 %.1f "
               "GFLOP/s | 16384x128x128 %.1f GFLOP/s\n"
               "%% sgemm: of the faster shape, measured again after each row (the better of "
               "before and after)\n",
               base.threads, SGEMM_MS, ref.big, ref.skinny);
    }
    printf("\n%-8s %-5s %12s %11s %9s %8s %9s\n", "problem", "level", "step ms", "samples/s",
           "GFLOP/s", cpu ? "% sgemm" : "", "peak MB");
    fflush(stdout);

    cJSON *rows = cJSON_CreateArray();
    int failures = 0, low = 0;
    for (size_t pi = 0; pi < sizeof problems / sizeof problems[0]; pi++) {
        if (!listed(plist, problems[pi].name))
            continue;
        for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
            if (!listed(ilist, tf_cli_impl_name((tf_impl)lv)))
                continue;
            bench_row row = {.p = &problems[pi], .impl = (tf_impl)lv};
            run_one(&row, &base, o->bench_steps, live);
            if (cpu) { /* the reference around this row */
                tf_sgemm_ref after;
                tf_sgemm_ref_measure(&after, SGEMM_MS);
                row.sgemm = tf_sgemm_ref_for_row(&ref, &after);
                ref = after;
                run_best.big = fmax(run_best.big, after.big);
                run_best.skinny = fmax(run_best.skinny, after.skinny);
            }
            if (row.status == TF_OK) {
                char pct[24];
                low += tf_sgemm_pct_cell(pct, sizeof pct, row.gflops, row.sgemm);
                printf("%-8s %-5s %12.1f %11.2f %9.1f %8s %9.1f\n", row.p->name,
                       tf_cli_impl_name(row.impl), row.step_ms, row.samples, row.gflops, pct,
                       row.bytes / (1024.0 * 1024.0));
            } else {
                printf("%-8s %-5s %s\n", row.p->name, tf_cli_impl_name(row.impl), row.why);
                /* Too large for this machine is a result; anything else is a failure. */
                if (row.status != TF_ERR_NOMEM)
                    failures++;
            }
            fflush(stdout);
            cJSON_AddItemToArray(rows, row_json(&row));
        }
    }
    if (low)
        printf("\n!: above 100%%: the sgemm measured around the row ran at fewer GFLOP/s than "
               "the model's step, so other work held the processors while it was measured (the "
               "OpenMP line above says how busy they were at start): not a share of this "
               "machine's sgemm; read it on idle processors\n");
    rc = failures ? TF_EXIT_FAIL : TF_EXIT_OK;
    if (o->json_path) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "tinyfold_version", TF_VERSION);
        cJSON_AddStringToObject(j, "command", "bench");
        cJSON_AddItemToObject(j, "build", tf_cli_build_json());
        cJSON_AddStringToObject(j, "backend", tf_backend_kind_name(base.backend));
        cJSON_AddNumberToObject(j, "threads", base.threads);
        cJSON_AddStringToObject(j, "precision", tf_precision_name(base.precision));
        cJSON_AddNumberToObject(j, "steps", o->bench_steps);
        if (cpu) {
            cJSON *s = cJSON_AddObjectToObject(j, "sgemm_gflops"); /* the best over the run */
            cJSON_AddNumberToObject(s, "1024x1024x1024", run_best.big);
            cJSON_AddNumberToObject(s, "16384x128x128", run_best.skinny);
        }
        cJSON_AddItemToObject(j, "rows", rows);
        rows = NULL;
        if (tf_cli_write_json(o->json_path, j, err, sizeof err) != 0) {
            tf_cli_error("--json: %s", err);
            rc = TF_EXIT_FAIL;
        }
        cJSON_Delete(j);
    }
    cJSON_Delete(rows);
    return rc;
}
