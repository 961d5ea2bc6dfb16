/* --counters PATTERN on CUDA: hardware metrics from the CUPTI range profiler
 * (auto range = one range per kernel, kernel replay) for the launches of
 * kernels whose (demangled) name contains PATTERN, and only those.
 *
 *  1. Learning: while counters are pending, the CUPTI launch callback
 *     (cupti_activity.c) hands every launched kernel's symbol to
 *     prof_gpu_counters_learn, which remembers the (region path, op) that
 *     launched a matching kernel. Any step that issues kernels teaches it
 *     (warm-up included); graph replays issue none, so the trainer runs
 *     eagerly until the counters are done (tf_prof_wants_eager). Only ops
 *     inside the selected regions count (--selected-regions), as on the CPU.
 *  2. Counter step: the first collectable step after something matched. Each
 *     op issued at a learned (path, op) is one profiling window: the device
 *     is drained, the range profiler started, the op runs (each of its
 *     kernels replayed once per counter pass), the profiler stopped and the
 *     window's ranges decoded. Ranges whose kernel matches are averaged per
 *     kernel name; the op's other kernels are dropped. At most MAX_WINDOWS
 *     windows per run (each window replays its kernels once per counter pass,
 *     far longer than the kernels take: the bound keeps a run short), the rest are
 *     counted as skipped. That step is left out of the timing statistics.
 * A metric the chip does not support, or a profiler that cannot start
 * (permissions, unsupported GPU), is reported as "unavailable (...)", never
 * as zeros. */
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
    {"gpu__time_duration.sum", "duration ns"},
};
/* Launch geometry, registers and shared memory are not range-profiler
 * metrics: they come from the CUPTI activity record of the same kernel
 * (kernel trace), see launch_info. */
#define NMET ((int)(sizeof metrics / sizeof metrics[0]))
#define MAX_WINDOWS 64   /* matching ops profiled per run */
#define MAX_RANGES 512   /* kernels in all windows together (counter data image) */
#define SYM_CACHE 512    /* launched symbols whose match is remembered */
#define WIN_LAUNCHES 8   /* kernels named per window (an op launches 1-3) */
#define SYM_LEN 512

typedef struct {
    char *name;
    uint64_t calls;
    double sum[NMET];
    uint64_t n[NMET]; /* calls with a finite value */
} ckernel;

typedef struct {
    tf_rp *rp;
    long step;
    int ran, failed, in_window, saw_launch;
    char err[320];
    char why[NMET][128];
    ckernel *k;
    size_t nk, cap;
    size_t dropped, ranges, windows, skipped, unwindowed;
    uint64_t *keys; /* learned (path, op) pairs that launched a matching kernel */
    size_t nkeys, cap_keys;
    const char *sym[SYM_CACHE]; /* symbol pointers seen, and whether they matched */
    signed char sym_match[SYM_CACHE];
    size_t nsym;
    /* the current window's launches, in order: range i is launch i (the
     * range profiler names auto ranges by index, not by kernel) */
    char win_sym[WIN_LAUNCHES][SYM_LEN], win_range_name[WIN_LAUNCHES][SYM_LEN];
    double win_val[WIN_LAUNCHES][NMET];
    int nwin, win_range;
    size_t unnamed; /* windows whose ranges could not be matched to launches */
    char range_name_seen[64]; /* how CUPTI named a range, for the report */
} gpu_counters;

static gpu_counters *state(tf_prof *p) {
    if (!p->gpu_counters) p->gpu_counters = calloc(1, sizeof(gpu_counters));
    return p->gpu_counters;
}

static int name_matches(const tf_prof *p, const char *sym) {
    if (strstr(sym, p->counters)) return 1;
    char *d = prof_cuda_demangle(sym);
    int m = d && strstr(d, p->counters) != NULL;
    free(d);
    return m;
}

static uint64_t key_of(uint64_t ctx) {
    return ((uint64_t)prof_ctx_op(ctx) << 32) | prof_ctx_path(ctx);
}

static int has_key(const gpu_counters *c, uint64_t key) {
    for (size_t i = 0; i < c->nkeys; i++)
        if (c->keys[i] == key) return 1;
    return 0;
}

int prof_gpu_counters_pending(const tf_prof *p) {
    const gpu_counters *c = p->gpu_counters;
    return p->gpu && p->counters && !p->steps_collected_counter_done && !(c && c->failed);
}

/* Called on the launching thread at every kernel launch while pending. */
void prof_gpu_counters_learn(tf_prof *p, const char *symbol) {
    gpu_counters *c = state(p);
    if (!c || !symbol) return;
    c->saw_launch = 1;
    if (c->in_window) {
        if (c->nwin < WIN_LAUNCHES) snprintf(c->win_sym[c->nwin], SYM_LEN, "%s", symbol);
        c->nwin++;
        return;
    }
    int match = -1;
    for (size_t i = 0; i < c->nsym; i++)
        if (c->sym[i] == symbol) {
            match = c->sym_match[i];
            break;
        }
    if (match < 0) {
        match = name_matches(p, symbol);
        if (c->nsym < SYM_CACHE) {
            c->sym[c->nsym] = symbol;
            c->sym_match[c->nsym++] = (signed char)match;
        }
    }
    if (!match) return;
    if (!p->paths[prof_ctx_path(p->ctx)].selected) return; /* --selected-regions, as on the CPU */
    if (prof_ctx_op(p->ctx) == PROF_CTX_NO_OP) { /* launched outside any op: no window */
        c->unwindowed++;
        return;
    }
    uint64_t key = key_of(p->ctx);
    if (has_key(c, key)) return;
    if (c->nkeys == c->cap_keys &&
        prof_reserve((void **)&c->keys, &c->cap_keys, c->nkeys + 1, sizeof *c->keys)) {
        p->oom = 1;
        return;
    }
    c->keys[c->nkeys++] = key;
}

int prof_gpu_counters_ready(const tf_prof *p) {
    const gpu_counters *c = p->gpu_counters;
    return c && c->nkeys > 0;
}

void prof_gpu_counters_step_begin(tf_prof *p) {
    gpu_counters *c = state(p);
    if (!c) return;
    c->step = p->steps[p->cur_step].step;
    c->ran = 1;
}

static int create(gpu_counters *c) {
    CUcontext ctx = NULL;
    if (tf_cu_ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) {
        snprintf(c->err, sizeof c->err, "no current CUDA context");
        return -1;
    }
    const char *names[NMET];
    for (int m = 0; m < NMET; m++) names[m] = metrics[m].metric;
    if (tf_rp_create(&c->rp, ctx, names, NMET, MAX_RANGES, c->err, sizeof c->err) != 0) {
        c->rp = NULL;
        return -1;
    }
    for (int m = 0; m < NMET; m++) {
        const char *why = tf_rp_metric_why(c->rp, m);
        if (why) snprintf(c->why[m], sizeof c->why[m], "%s", why);
    }
    return 0;
}

int prof_gpu_counters_op_begin(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c || c->failed || c->in_window || !has_key(c, key_of(p->ctx))) return 0;
    if (c->windows >= MAX_WINDOWS || c->ranges >= MAX_RANGES) {
        c->skipped++;
        return 0;
    }
    cudaDeviceSynchronize(); /* the window holds this op's kernels only */
    if (!c->rp && create(c) != 0) {
        c->failed = 1;
        return 0;
    }
    if (tf_rp_start(c->rp, c->err, sizeof c->err) != 0) {
        c->failed = 1;
        return 0;
    }
    c->windows++;
    c->in_window = 1;
    c->nwin = c->win_range = 0;
    return 1;
}

/* Adds one range's values to its kernel's means (name demangled). */
static void add_range(tf_prof *p, gpu_counters *c, const char *range, const double *v) {
    char *d = prof_cuda_demangle(range);
    const char *name = d ? d : range;
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

/* Buffers the window's ranges; they are named at the window's end. */
static void on_range(void *arg, const char *range, const double *v) {
    tf_prof *p = arg;
    gpu_counters *c = p->gpu_counters;
    c->ranges++;
    if (!c->range_name_seen[0]) snprintf(c->range_name_seen, sizeof c->range_name_seen, "%s", range);
    int i = c->win_range++;
    if (i < WIN_LAUNCHES) {
        snprintf(c->win_range_name[i], SYM_LEN, "%s", range);
        memcpy(c->win_val[i], v, sizeof c->win_val[i]);
    }
}

void prof_gpu_counters_op_end(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c || !c->in_window) return;
    c->in_window = 0;
    cudaDeviceSynchronize(); /* every replayed kernel of the window has finished */
    size_t dropped = 0;
    if (tf_rp_stop(c->rp, on_range, p, &dropped, c->err, sizeof c->err) != 0) c->failed = 1;
    c->dropped += dropped;
    /* The range profiler names auto ranges by their index, so range i is the
     * window's launch i, which the launch callback named, when the counts
     * agree; otherwise only CUPTI's names are left (and the window is counted
     * as unnamed). */
    int n = c->win_range < WIN_LAUNCHES ? c->win_range : WIN_LAUNCHES;
    int named = c->win_range == c->nwin && c->nwin <= WIN_LAUNCHES;
    if (!named) c->unnamed++;
    for (int i = 0; i < n; i++) add_range(p, c, named ? c->win_sym[i] : c->win_range_name[i], c->win_val[i]);
}

void prof_gpu_counters_step_end(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c) return;
    if (c->in_window) prof_gpu_counters_op_end(p);
    if (c->rp) tf_rp_destroy(c->rp);
    c->rp = NULL;
}

void prof_gpu_counters_learning_done(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (c && c->saw_launch && !c->nkeys && !c->ran) p->steps_collected_counter_done = 1;
}

void prof_gpu_counters_free(tf_prof *p) {
    gpu_counters *c = p->gpu_counters;
    if (!c) return;
    if (c->rp) tf_rp_destroy(c->rp);
    for (size_t i = 0; i < c->nk; i++) free(c->k[i].name);
    free(c->k);
    free(c->keys);
    free(c);
    p->gpu_counters = NULL;
}

/* The kernel's launch as CUPTI's activity trace recorded it (first traced
 * launch of that name), or NULL when no step was traced. */
static const prof_launch *launch_info(const tf_prof *p, const char *name) {
    for (size_t i = 0; i < p->nlaunch; i++) {
        const prof_launch *l = &p->launches[i];
        if (l->grid[0] && !strcmp(p->names.strs[l->name], name)) return l;
    }
    return NULL;
}

static const char *not_run_reason(const gpu_counters *c) {
    if (!c || !c->saw_launch) return "unavailable (no step issued kernels)";
    if (!c->nkeys) return NULL; /* ran the learning, nothing matched: not an error */
    return "unavailable (no collectable step after the kernels were found: use more --num-steps)";
}

cJSON *prof_gpu_counters_json(const tf_prof *p) {
    const gpu_counters *c = p->gpu_counters;
    if (!p->counters) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source",
                            "CUPTI range profiler (auto range, kernel replay), matching launches of one step");
    cJSON_AddStringToObject(o, "pattern", p->counters);
    if (!c || !c->ran) {
        const char *why = not_run_reason(c);
        if (why) cJSON_AddStringToObject(o, "error", why);
        else cJSON_AddStringToObject(o, "note", "no kernel launched in the collected regions matched the pattern");
        cJSON_AddArrayToObject(o, "kernels");
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
    cJSON_AddNumberToObject(o, "windows", (double)c->windows);
    cJSON_AddNumberToObject(o, "windows_skipped", (double)c->skipped);
    cJSON_AddNumberToObject(o, "ranges", (double)c->ranges);
    cJSON_AddNumberToObject(o, "ranges_dropped", (double)c->dropped);
    cJSON_AddNumberToObject(o, "windows_unnamed", (double)c->unnamed);
    if (c->range_name_seen[0]) cJSON_AddStringToObject(o, "cupti_range_name_example", c->range_name_seen);
    cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
    for (size_t i = 0; i < c->nk; i++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", c->k[i].name);
        cJSON_AddNumberToObject(k, "calls", (double)c->k[i].calls);
        cJSON *mj = cJSON_AddObjectToObject(k, "metrics"); /* mean per call */
        for (int m = 0; m < NMET; m++)
            if (c->k[i].n[m])
                cJSON_AddNumberToObject(mj, metrics[m].metric, c->k[i].sum[m] / (double)c->k[i].n[m]);
        const prof_launch *l = launch_info(p, c->k[i].name);
        if (l) {
            cJSON *lj = cJSON_AddObjectToObject(k, "launch");
            cJSON_AddStringToObject(lj, "source", "kernel trace (CUPTI activity)");
            cJSON_AddItemToObject(lj, "grid", cJSON_CreateIntArray((const int[]){(int)l->grid[0], (int)l->grid[1], (int)l->grid[2]}, 3));
            cJSON_AddItemToObject(lj, "block", cJSON_CreateIntArray((const int[]){(int)l->block[0], (int)l->block[1], (int)l->block[2]}, 3));
            cJSON_AddNumberToObject(lj, "registers_per_thread", l->regs);
            cJSON_AddNumberToObject(lj, "shared_mem_bytes", l->smem);
        }
        cJSON_AddItemToArray(ks, k);
    }
    return o;
}

void prof_gpu_counters_print(const tf_prof *p, FILE *out) {
    const gpu_counters *c = p->gpu_counters;
    if (!p->counters) return;
    if (!c || !c->ran) {
        const char *why = not_run_reason(c);
        if (why) fprintf(out, "Counters: %s\n", why);
        else fprintf(out, "Counters: no kernel launched in the collected regions matched '%s' "
                          "(see kernel_stats.csv for names)\n", p->counters);
        return;
    }
    if (c->err[0]) {
        fprintf(out, "Counters: unavailable (%s)\n", c->err);
        return;
    }
    fprintf(out, "Counters (CUPTI range profiler, kernel replay, step %ld, not in the timings) for kernels "
                 "matching '%s': %zu ops profiled",
            c->step, p->counters, c->windows);
    if (c->skipped) fprintf(out, ", %zu more matching ops not profiled (cap %d per run)", c->skipped, MAX_WINDOWS);
    fprintf(out, c->nk ? "; mean per call:\n" : "; no range matched\n");
    for (size_t i = 0; i < c->nk; i++) {
        fprintf(out, "  %s (%llu calls)\n", c->k[i].name, (unsigned long long)c->k[i].calls);
        const prof_launch *l = launch_info(p, c->k[i].name);
        if (l)
            fprintf(out, "    %-30s grid %ux%ux%u, block %ux%ux%u, %d registers/thread, %d B shared\n",
                    "launch (kernel trace)", l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                    l->block[2], l->regs, l->smem);
        for (int m = 0; m < NMET; m++)
            if (c->k[i].n[m])
                fprintf(out, "    %-30s %16.3f\n", metrics[m].label, c->k[i].sum[m] / (double)c->k[i].n[m]);
    }
    for (int m = 0; m < NMET; m++)
        if (c->why[m][0]) fprintf(out, "  %s: %s\n", metrics[m].metric, c->why[m]);
    if (c->dropped) fprintf(out, "  %zu kernels did not fit the counter buffer\n", c->dropped);
    if (c->unnamed)
        fprintf(out, "  %zu windows' ranges did not match their launches one to one (named by CUPTI)\n", c->unnamed);
    if (c->unwindowed) fprintf(out, "  %zu matching launches happened outside any op and were not profiled\n",
                               c->unwindowed);
}
