/* `tinyfold bench --scaling LIST`: how the cost grows with N. One run per N
 * (--batch-size, --num-seqs, --num-blocks, --impl and --recompute as given):
 * the planned peak memory (the dry run's figure, tf_trainer_plan), the median
 * step time, the step's model FLOPs (3 x forward) and the achieved GFLOP/s;
 * then the exponents of memory and time in N, fitted by least squares on
 * logs. A problem that does not fit is a row with its reason, out of the fit. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "backend/registry.h"
#include "train/timed.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int N;
    size_t peak_bytes;
    double step_ms, flops, gflops;
    tf_status status;
    char why[256];
} scaling_point;

/* The live progress line of step i of the run at N (1 warm-up step first). */
typedef struct {
    int N, steps;
} scaling_live;

static void show_step(void *ctx, int i) {
    const scaling_live *lv = ctx;
    fprintf(stderr, "\r\033[KN %d: %s %d/%d", lv->N, i < 1 ? "warm-up" : "step", i < 1 ? 1 : i,
            i < 1 ? 1 : lv->steps);
    fflush(stderr);
}

static void run_point(scaling_point *p, const tf_config *base, int steps, int live) {
    tf_config c = *base;
    c.seq_len = p->N;
    c.warmup_steps = 1;
    c.num_steps = steps;
    p->flops = 3.0 * tf_flops_forward(&c);
    p->status = tf_config_validate(&c, p->why, sizeof p->why);
    if (p->status == TF_OK) p->status = tf_trainer_plan(&c, &p->peak_bytes, p->why, sizeof p->why);
    tf_trainer *t = NULL;
    if (p->status == TF_OK) p->status = tf_trainer_create(&t, &c, p->why, sizeof p->why);
    if (p->status != TF_OK) return;
    scaling_live lv = {p->N, steps};
    tf_timed r;
    p->status = tf_timed_steps(t, 1, steps, live ? show_step : NULL, &lv, &r);
    if (p->status != TF_OK && r.failed < 0) {
        tf_trainer_destroy(t);
        snprintf(p->why, sizeof p->why, "out of host memory");
        return;
    }
    if (p->status != TF_OK)
        snprintf(p->why, sizeof p->why, "step %d failed (status %d)", r.failed, (int)p->status);
    if (live) fputs("\r\033[K", stderr);
    if (p->status == TF_OK) {
        p->step_ms = r.median_ms;
        p->gflops = p->step_ms > 0 ? p->flops / (p->step_ms * 1e-3) * 1e-9 : 0;
    }
    tf_trainer_destroy(t);
}

/* Slope of log y on log x over the points that have both; NAN below 2. */
static double fit_exponent(const scaling_point *p, int n, int time) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        double y = time ? p[i].step_ms : (double)p[i].peak_bytes;
        if (p[i].status != TF_OK || !(y > 0)) continue;
        double lx = log((double)p[i].N), ly = log(y);
        sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
        k++;
    }
    double den = k * sxx - sx * sx;
    return k >= 2 && den > 0 ? (k * sxy - sx * sy) / den : NAN;
}

static void add_num_or_null(cJSON *j, const char *k, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(j, k, v);
    else
        cJSON_AddNullToObject(j, k);
}

int tf_cli_bench_scaling(tf_cli_opts *o, const tf_config *base, int cpu) {
    static const char *const rnames[] = {"none", "blocks", "modules"};
    scaling_point pts[64];
    int n = 0;
    for (const char *p = o->scaling; n < 64;) {
        pts[n] = (scaling_point){.N = atoi(p)};
        n++;
        p += strcspn(p, ",");
        if (!*p) break;
        p++;
    }
    int live = !o->quiet && !o->no_progress && isatty(STDERR_FILENO);
    char chunk[16] = "off";
    if (base->chunk_size) snprintf(chunk, sizeof chunk, "%d", base->chunk_size);
    printf("tinyfold %s bench --scaling | backend %s | B%d S%d, %d blocks, %s, --recompute %s, "
           "--chunk-size %s | %d timed step%s after 1 warm-up, median\n\n",
           TF_VERSION, tf_backend_kind_name(base->backend), base->batch, base->n_seqs,
           base->n_blocks, tf_cli_impl_name(base->impl), rnames[base->recompute], chunk,
           o->bench_steps, o->bench_steps == 1 ? "" : "s");
    printf("%6s %14s %12s %14s %9s\n", "N", "peak MB", "step ms", "GFLOP/step", "GFLOP/s");
    fflush(stdout);
    int failures = 0;
    for (int i = 0; i < n; i++) {
        run_point(&pts[i], base, o->bench_steps, live);
        if (pts[i].status == TF_OK) {
            printf("%6d %14.1f %12.1f %14.2f %9.1f\n", pts[i].N,
                   pts[i].peak_bytes / (1024.0 * 1024.0), pts[i].step_ms, pts[i].flops * 1e-9,
                   pts[i].gflops);
        } else {
            printf("%6d %s\n", pts[i].N, pts[i].why);
            if (pts[i].status != TF_ERR_NOMEM) failures++;
        }
        fflush(stdout);
    }
    double em = fit_exponent(pts, n, 0), et = fit_exponent(pts, n, 1);
    if (isfinite(em) && isfinite(et))
        printf("\nfitted exponents in N (least squares on logs): memory %.2f, time %.2f\n", em, et);
    else
        printf("\nfitted exponents in N: none (they need two N that train)\n");
    int rc = failures ? TF_EXIT_FAIL : TF_EXIT_OK;
    if (o->json_path) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "tinyfold_version", TF_VERSION);
        cJSON_AddStringToObject(j, "command", "bench --scaling");
        cJSON_AddItemToObject(j, "build", tf_cli_build_json());
        cJSON_AddStringToObject(j, "backend", tf_backend_kind_name(base->backend));
        cJSON_AddNumberToObject(j, "threads", base->threads);
        cJSON_AddNumberToObject(j, "steps", o->bench_steps);
        cJSON_AddNumberToObject(j, "batch", base->batch);
        cJSON_AddNumberToObject(j, "num_seqs", base->n_seqs);
        cJSON_AddNumberToObject(j, "num_blocks", base->n_blocks);
        cJSON_AddStringToObject(j, "impl", tf_cli_impl_name(base->impl));
        cJSON_AddStringToObject(j, "precision", tf_precision_name(base->precision));
        cJSON_AddStringToObject(j, "recompute", rnames[base->recompute]);
        cJSON_AddNumberToObject(j, "chunk_size", base->chunk_size);
        (void)cpu;
        cJSON *arr = cJSON_AddArrayToObject(j, "points");
        for (int i = 0; i < n; i++) {
            cJSON *q = cJSON_CreateObject();
            cJSON_AddNumberToObject(q, "N", pts[i].N);
            if (pts[i].status == TF_OK) {
                cJSON_AddNumberToObject(q, "peak_bytes", (double)pts[i].peak_bytes);
                cJSON_AddNumberToObject(q, "step_ms", pts[i].step_ms);
                cJSON_AddNumberToObject(q, "flops", pts[i].flops);
                cJSON_AddNumberToObject(q, "gflops", pts[i].gflops);
            } else {
                cJSON_AddStringToObject(q, "error", pts[i].why);
            }
            cJSON_AddItemToArray(arr, q);
        }
        cJSON *f = cJSON_AddObjectToObject(j, "fit");
        add_num_or_null(f, "memory_exponent", em);
        add_num_or_null(f, "time_exponent", et);
        char err[512];
        if (tf_cli_write_json(o->json_path, j, err, sizeof err) != 0) {
            tf_cli_error("--json: %s", err);
            rc = TF_EXIT_FAIL;
        }
        cJSON_Delete(j);
    }
    return rc;
}
