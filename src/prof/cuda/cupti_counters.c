/* --counters PATTERN on CUDA: hardware metrics from the CUPTI range profiler
 * (auto range = one range per kernel, kernel replay) over one step, the
 * first collectable one ("counter step"). Kernel replay runs each kernel
 * once per pass, so that step is left out of the timing statistics
 * (hooks.c). Ranges are named after their kernels; those whose (demangled)
 * name contains PATTERN are kept and averaged per kernel name. A metric the
 * chip does not support, or a profiler that cannot start (permissions,
 * unsupported GPU), is reported as "unavailable (...)", never as zeros. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cuda.h>

#include "prof/cuda/cu_driver.h"
#include <cuda_runtime_api.h>

#include "prof/cuda/range_profiler.h"
#include "prof/prof_internal.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static const struct {
    const char *metric, *label;
} metrics[] = {
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy %"},
    {"dram__bytes_read.sum", "DRAM bytes read"},
    {"dram__bytes_write.sum", "DRAM bytes written"},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput % of peak"},
    {"lts__t_sector_hit_rate.pct", "L2 hit rate %"},
    {"lts__t_bytes.sum", "L2 bytes"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput % of peak"},
    {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe active %"},
    {"launch__registers_per_thread", "registers per thread"},
    {"launch__shared_mem_per_block_static", "static shared mem per block"},
    {"launch__shared_mem_per_block_dynamic", "dynamic shared mem per block"},
    {"gpu__time_duration.sum", "duration ns"},
    {"launch__grid_size", "grid size"},
    {"launch__block_size", "block size"},
};
#define NMET ((int)(sizeof metrics / sizeof metrics[0]))
#define MAX_RANGES 8192 /* kernels in the counter step; more are dropped and reported */

typedef struct {
    char *name;
    uint64_t calls;
    double sum[NMET];
    uint64_t n[NMET]; /* calls with a finite value */
} ckernel;

typedef struct {
    tf_rp *rp;
    long step;
    int ran;
    char err[320];
    char why[NMET][128];
    ckernel *k;
    size_t nk, cap;
    size_t dropped, ranges;
} gpu_counters;

static gpu_counters *state(tf_prof *p) {
    if (!p->gpu_counters) p->gpu_counters = calloc(1, sizeof(gpu_counters));
    return p->gpu_counters;
}

void prof_gpu_counters_step_begin(tf_prof *p) {
    gpu_counters *c = state(p);
    if (!c || c->rp || c->ran) return;
    c->step = p->steps[p->cur_step].step;
    c->ran = 1;
    CUcontext ctx = NULL;
    cudaFree(0); /* makes the runtime's primary context current on this thread */
    if (tf_cu_ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
        snprintf(c->err, sizeof c->err, "no current CUDA context");
        return;
    }
    const char *names[NMET];
    for (int m = 0; m < NMET; m++) names[m] = metrics[m].metric;
    if (tf_rp_create(&c->rp, ctx, names, NMET, MAX_RANGES, c->err, sizeof c->err) != 0) return;
    for (int m = 0; m < NMET; m++) {
        const char *why = tf_rp_metric_why(c->rp, m);
        if (why) snprintf(c->why[m], sizeof c->why[m], "%s", why);
    }
    if (tf_rp_start(c->rp, c->err, sizeof c->err) != 0) {
        tf_rp_destroy(c->rp);
        c->rp = NULL;
    }
}

static void on_range(void *arg, const char *range, const double *v) {
    tf_prof *p = arg;
    gpu_counters *c = p->gpu_counters;
    c->ranges++;
    int status = -1;
    char *d = (range[0] == '_' && range[1] == 'Z') ? __cxa_demangle(range, NULL, NULL, &status) : NULL;
    const char *name = d && status == 0 ? d : range;
    if (!strstr(name, p->counters) && !strstr(range, p->counters)) {
        free(d);
        return;
    }
    size_t i = 0;
    while (i < c->nk && strcmp(c->k[i].name, name)) i++;
    if (i == c->nk) {
        char *copy = strdup(name);
        if (!copy || (c->nk == c->cap && prof_reserve((void **)&c->k, &c->cap, c->nk + 1, sizeof *c->k))) {
            free(copy);
            free(d);
            p->oom = 1;
            return;
        }
        memset(&c->k[i], 0, sizeof c->k[i]);
        c->k[i].name = copy;
        c->nk++;
    }
    c->k[i].calls++;
    for (int m = 0; m < NMET; m++)
        if (isfinite(v[m])) c->k[i].sum[m] += v[m], c->k[i].n[m]++;
    free(d);
}

void prof_gpu_counters_step_end(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c || !c->rp) return;
    cudaDeviceSynchronize(); /* every replayed kernel of the step has finished */
    tf_rp_stop(c->rp, on_range, p, &c->dropped, c->err, sizeof c->err);
    tf_rp_destroy(c->rp);
    c->rp = NULL;
}

void prof_gpu_counters_free(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c) return;
    if (c->rp) tf_rp_destroy(c->rp);
    for (size_t i = 0; i < c->nk; i++) free(c->k[i].name);
    free(c->k);
    free(c);
    p->gpu_counters = NULL;
}

cJSON *prof_gpu_counters_json(const tf_prof *p) {
    const gpu_counters *c = p->gpu_counters;
    if (!p->counters) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", "CUPTI range profiler (auto range, kernel replay)");
    cJSON_AddStringToObject(o, "pattern", p->counters);
    if (!c || !c->ran) {
        cJSON_AddStringToObject(o, "error", "unavailable (no step was run to collect counters)");
        return o;
    }
    cJSON_AddNumberToObject(o, "step", (double)c->step);
    if (c->err[0]) {
        char buf[400];
        snprintf(buf, sizeof buf, "unavailable (%s)", c->err);
        cJSON_AddStringToObject(o, "error", buf);
    }
    cJSON *ev = cJSON_AddObjectToObject(o, "events");
    for (int m = 0; m < NMET; m++)
        cJSON_AddStringToObject(ev, metrics[m].metric, c->err[0] ? "unavailable (profiler did not run)"
                                                      : c->why[m][0] ? c->why[m] : "ok");
    cJSON_AddNumberToObject(o, "ranges", (double)c->ranges);
    cJSON_AddNumberToObject(o, "ranges_dropped", (double)c->dropped);
    cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
    for (size_t i = 0; i < c->nk; i++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", c->k[i].name);
        cJSON_AddNumberToObject(k, "calls", (double)c->k[i].calls);
        cJSON *mj = cJSON_AddObjectToObject(k, "metrics"); /* mean per call */
        for (int m = 0; m < NMET; m++)
            if (c->k[i].n[m])
                cJSON_AddNumberToObject(mj, metrics[m].metric, c->k[i].sum[m] / (double)c->k[i].n[m]);
        cJSON_AddItemToArray(ks, k);
    }
    return o;
}

void prof_gpu_counters_print(const tf_prof *p, FILE *out) {
    const gpu_counters *c = p->gpu_counters;
    if (!p->counters) return;
    if (!c || !c->ran) {
        fprintf(out, "Counters: unavailable (no step was run to collect them)\n");
        return;
    }
    if (c->err[0]) {
        fprintf(out, "Counters: unavailable (%s)\n", c->err);
        return;
    }
    fprintf(out, "Counters (CUPTI range profiler, step %ld, not in the timings) for kernels matching '%s'",
            c->step, p->counters);
    if (!c->nk) fprintf(out, ": none of the step's %zu kernels matched\n", c->ranges);
    else fprintf(out, ", mean per call:\n");
    for (size_t i = 0; i < c->nk; i++) {
        fprintf(out, "  %s (%llu calls)\n", c->k[i].name, (unsigned long long)c->k[i].calls);
        for (int m = 0; m < NMET; m++)
            if (c->k[i].n[m])
                fprintf(out, "    %-30s %16.3f\n", metrics[m].label, c->k[i].sum[m] / (double)c->k[i].n[m]);
    }
    for (int m = 0; m < NMET; m++)
        if (c->why[m][0]) fprintf(out, "  %s: %s\n", metrics[m].metric, c->why[m]);
    if (c->dropped) fprintf(out, "  %zu kernels did not fit the counter buffer\n", c->dropped);
}
