/* kernel_stats.csv (rocprofv3 layout), kernel_trace.csv (one row per traced
 * launch) and summary.json. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "fileio/outfile.h"
#include "fileio/text_escape.h"
#include "prof/prof_internal.h"

/* Every profile file is written atomically (fileio/outfile.h). */
static FILE *open_out(const char *path, char *err, size_t errlen) {
    return tf_io_open_out(path, err, errlen);
}

static int close_out(FILE *f, const char *path, char *err, size_t errlen) {
    return tf_io_close_out(f, path, 1, err, errlen);
}

static double stddev(const prof_stat *s) {
    return s->calls > 1 ? sqrt(s->m2 / (double)(s->calls - 1)) : 0.0;
}

/* Percentage of each kernel in the file's total; equal shares if all are 0 ns. */
static double pct_of(int64_t v, int64_t total, size_t n) {
    if (total > 0) return 100.0 * (double)v / (double)total;
    return n ? 100.0 / (double)n : 0.0;
}

int prof_write_stats_csv(const tf_prof *p, const char *path, char *err, size_t errlen) {
    size_t n;
    uint32_t *ids = prof_sorted_kernels(p, &n, PROF_KIND_KERNEL);
    if (!ids) {
        snprintf(err, errlen, "profiler: out of memory");
        return -1;
    }
    FILE *f = open_out(path, err, errlen);
    if (!f) {
        free(ids);
        return -1;
    }
    fprintf(f, "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\","
               "\"MaxNs\",\"StdDev\"\n");
    for (size_t i = 0; i < n; i++) {
        const prof_stat *s = &p->kstats[ids[i]];
        tf_csv_str(f, p->names.strs[ids[i]]);
        fprintf(f, ",%llu,%lld,%.3f,%.6f,%lld,%lld,%.3f\n", (unsigned long long)s->calls,
                (long long)s->total_ns, (double)s->total_ns / (double)s->calls,
                pct_of(s->total_ns, p->kernel_total_ns, n), (long long)s->min_ns,
                (long long)s->max_ns, stddev(s));
    }
    free(ids);
    return close_out(f, path, err, errlen);
}

int prof_write_trace_csv(const tf_prof *p, const char *path, char *err, size_t errlen) {
    size_t *idx = prof_launch_order(p);
    if (!idx) {
        snprintf(err, errlen, "profiler: out of memory");
        return -1;
    }
    FILE *f = open_out(path, err, errlen);
    if (!f) {
        free(idx);
        return -1;
    }
    fprintf(f, "\"Name\",\"Region\",\"Step\",\"StartNs\",\"EndNs\",\"DurationNs\",\"Grid\","
               "\"Block\",\"Registers\",\"SharedMemBytes\"\n");
    for (size_t i = 0; i < p->nlaunch; i++) {
        const prof_launch *l = &p->launches[idx[i]];
        tf_csv_str(f, p->names.strs[l->name]);
        fputc(',', f);
        tf_csv_str(f, p->paths[l->path].path);
        fprintf(f, ",%ld,%lld,%lld,%lld,", p->steps[l->step].step, (long long)(l->start - p->t0),
                (long long)(l->end - p->t0), (long long)(l->end - l->start));
        if (l->grid[0]) {
            fprintf(f, "\"%ux%ux%u\",\"%ux%ux%u\",%d,%d\n", l->grid[0], l->grid[1], l->grid[2],
                    l->block[0], l->block[1], l->block[2], l->regs, l->smem);
        } else {
            fputs(",,,\n", f);
        }
    }
    free(idx);
    return close_out(f, path, err, errlen);
}

static cJSON *kernels_json(const tf_prof *p, int kind, int with_pct) {
    size_t n;
    uint32_t *ids = prof_sorted_kernels(p, &n, kind);
    cJSON *arr = cJSON_CreateArray();
    if (!ids || !arr) {
        free(ids);
        return arr;
    }
    for (size_t i = 0; i < n; i++) {
        const prof_stat *s = &p->kstats[ids[i]];
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", p->names.strs[ids[i]]);
        cJSON_AddNumberToObject(k, "calls", (double)s->calls);
        cJSON_AddNumberToObject(k, "total_ns", (double)s->total_ns);
        cJSON_AddNumberToObject(k, "avg_ns", (double)s->total_ns / (double)s->calls);
        if (with_pct) cJSON_AddNumberToObject(k, "pct", pct_of(s->total_ns, p->kernel_total_ns, n));
        cJSON_AddNumberToObject(k, "min_ns", (double)s->min_ns);
        cJSON_AddNumberToObject(k, "max_ns", (double)s->max_ns);
        cJSON_AddNumberToObject(k, "stddev_ns", stddev(s));
        cJSON_AddItemToArray(arr, k);
    }
    free(ids);
    return arr;
}

static double pct_step(int64_t v, int64_t step_ns) {
    return step_ns > 0 ? 100.0 * (double)v / (double)step_ns : 0.0;
}

static cJSON *summary_json(const tf_prof *p, const cJSON *run) {
    prof_totals t;
    prof_compute_totals(p, &t);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "schema_version", TF_PROF_SUMMARY_SCHEMA);
    cJSON_AddStringToObject(root, "tinyfold_version", TF_VERSION);
    static const char *const timers[3] = {"host", "cupti", "events"};
    cJSON_AddStringToObject(root, "backend", p->backend);
    cJSON_AddStringToObject(root, "timer", timers[p->timer]);
    cJSON_AddStringToObject(root, "kernel_time_source",
                            p->timer == PROF_TIMER_CUPTI    ? "CUPTI activity (device)"
                            : p->timer == PROF_TIMER_EVENTS ? "GPU events around each op (device)"
                                                            : "host timer around each op");
    /* under the event timer a row of "kernels" is an op (one or more kernels) */
    cJSON_AddStringToObject(root, "launch_unit", p->evt ? "op" : "kernel");
    if (run) cJSON_AddItemToObject(root, "run", cJSON_Duplicate(run, 1));
    else cJSON_AddNullToObject(root, "run");
    if (p->nsel) {
        cJSON *sel = cJSON_AddArrayToObject(root, "selected_regions");
        for (int i = 0; i < p->nsel; i++)
            cJSON_AddItemToArray(sel, cJSON_CreateString(p->names.strs[p->sel_ids[i]]));
    } else {
        cJSON_AddNullToObject(root, "selected_regions");
    }
    cJSON_AddBoolToObject(root, "include_warmup", p->include_warmup);
    cJSON_AddNumberToObject(root, "steps_collected", (double)p->steps_collected);
    cJSON_AddNumberToObject(root, "launches_per_step", t.launches_per_step);
    cJSON_AddNumberToObject(root, "kernel_total_ns", (double)p->kernel_total_ns);
    cJSON_AddItemToObject(root, "kernels", kernels_json(p, PROF_KIND_KERNEL, 1));
    if (p->gpu) {
        cJSON_AddItemToObject(root, "memcpy", kernels_json(p, PROF_KIND_MEMCPY, 0));
        cJSON_AddItemToObject(root, "memset", kernels_json(p, PROF_KIND_MEMSET, 0));
    }

    cJSON *steps = cJSON_AddArrayToObject(root, "steps");
    for (size_t i = 0; i < p->nsteps; i++) {
        const prof_step *s = &p->steps[i];
        if (!s->collected) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", (double)s->step);
        cJSON_AddBoolToObject(o, "warmup", s->warmup);
        cJSON_AddNumberToObject(o, "wall_ns", (double)(s->end - s->start));
        cJSON_AddNumberToObject(o, "launches", (double)s->launches);
        cJSON_AddNumberToObject(o, "kernel_ns", (double)s->kernel_ns);
        cJSON_AddItemToArray(steps, o);
    }

    cJSON *ph = cJSON_AddObjectToObject(root, "phases");
    cJSON_AddNumberToObject(ph, "step_ns", (double)t.step_ns);
    for (int k = 0; k < 4; k++) {
        if (!t.phase_seen[k]) continue;
        cJSON *o = cJSON_AddObjectToObject(ph, prof_phase_names[k]);
        cJSON_AddNumberToObject(o, "calls", (double)t.phase_calls[k]);
        cJSON_AddNumberToObject(o, "total_ns", (double)t.phase_ns[k]);
        cJSON_AddNumberToObject(o, "pct", pct_step(t.phase_ns[k], t.step_ns));
        cJSON_AddNumberToObject(o, "kernel_ns", (double)t.phase_kernel_ns[k]);
        if (t.busy_steps) /* per traced step: the union of the kernels' spans */
            cJSON_AddNumberToObject(o, "busy_ns_per_step",
                                    (double)t.phase_busy_ns[k] / (double)t.busy_steps);
    }

    /* regions: "pct" is the share of the collected steps' wall time */
    cJSON *regs = cJSON_AddArrayToObject(root, "regions");
    for (uint32_t id = 1; id < p->npaths; id++) {
        const prof_path *q = &p->paths[id];
        if (!q->calls && !q->kernel_ns) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", q->path);
        cJSON_AddNumberToObject(o, "calls", (double)q->calls);
        cJSON_AddNumberToObject(o, "total_ns", (double)q->host_ns);
        cJSON_AddNumberToObject(o, "pct", pct_step(q->host_ns, t.step_ns));
        cJSON_AddNumberToObject(o, "kernel_ns", (double)q->kernel_ns);
        cJSON_AddNumberToObject(o, "launches", (double)q->launches);
        cJSON_AddItemToArray(regs, o);
    }

    size_t nm;
    prof_module *mods = prof_modules(p, &nm);
    cJSON *mj = cJSON_AddArrayToObject(root, "modules");
    for (size_t i = 0; mods && i < nm; i++) {
        cJSON *o = cJSON_CreateObject();
        int64_t tot = mods[i].fwd_ns + mods[i].bwd_ns + mods[i].other_ns;
        cJSON_AddStringToObject(o, "name", p->names.strs[mods[i].name]);
        cJSON_AddNumberToObject(o, "calls", (double)mods[i].calls);
        cJSON_AddNumberToObject(o, "forward_ns", (double)mods[i].fwd_ns);
        cJSON_AddNumberToObject(o, "backward_ns", (double)mods[i].bwd_ns);
        cJSON_AddNumberToObject(o, "other_ns", (double)mods[i].other_ns);
        cJSON_AddNumberToObject(o, "total_ns", (double)tot);
        cJSON_AddNumberToObject(o, "pct", pct_step(tot, t.step_ns));
        cJSON_AddNumberToObject(o, "flops_per_step", mods[i].flops);
        cJSON_AddNumberToObject(o, "bytes_per_step", mods[i].bytes);
        cJSON_AddItemToArray(mj, o);
    }
    free(mods);
    cJSON_AddStringToObject(root, "module_time_source",
                            p->evt ? "op" : p->gpu ? "kernel" : "host");

    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    size_t rss = prof_host_peak_rss();
    cJSON_AddNumberToObject(mem, "peak_backend_bytes", (double)p->peak_backend);
    cJSON_AddNumberToObject(mem, "peak_host_rss_bytes",
                            (double)(rss > p->peak_host ? rss : p->peak_host));
    cJSON_AddNumberToObject(mem, "samples", (double)p->mem_samples);
    cJSON *mr = cJSON_AddArrayToObject(mem, "regions");
    for (uint32_t id = 0; id < p->npaths; id++) {
        const prof_path *q = &p->paths[id];
        if (!q->peak_backend && !q->peak_host) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", id == PROF_ROOT ? "(all)" : q->path);
        cJSON_AddNumberToObject(o, "peak_backend_bytes", (double)q->peak_backend);
        cJSON_AddNumberToObject(o, "peak_host_rss_bytes", (double)q->peak_host);
        cJSON_AddItemToArray(mr, o);
    }

    cJSON *tr = cJSON_AddObjectToObject(root, "trace");
    cJSON_AddNumberToObject(tr, "max_steps", p->trace_max_steps);
    cJSON_AddNumberToObject(tr, "traced_steps", (double)p->steps_traced);
    cJSON_AddBoolToObject(tr, "cap_hit", p->trace_cap_hit);
    cJSON_AddNumberToObject(tr, "launch_rows", (double)p->nlaunch);
    cJSON_AddNumberToObject(tr, "region_rows", (double)p->nrev);

    cJSON *counters = p->gpu ? prof_gpu_counters_json(p) : p->cpuc ? prof_cpuc_json(p->cpuc, p) : NULL;
    if (counters) cJSON_AddItemToObject(root, "counters", counters);

    cJSON *ops = prof_opcost_json(p); /* the roofline's data (opcost.c, ceilings.c) */
    if (ops) cJSON_AddItemToObject(root, "op_costs", ops);
    cJSON *arena = prof_arena_json(p);
    if (arena) cJSON_AddItemToObject(mem, "arena", arena);
    cJSON *ceil = prof_ceilings_json(&p->ceil);
    if (ceil) cJSON_AddItemToObject(root, "ceilings", ceil);

    cJSON *warn = cJSON_AddArrayToObject(root, "warnings");
    if (p->oom) cJSON_AddItemToArray(warn, cJSON_CreateString("out of memory: some records were dropped"));
    if (p->unbalanced)
        cJSON_AddItemToArray(warn, cJSON_CreateString("unbalanced region/op pops were ignored"));
    const char *gw = p->gpu ? prof_gpu_warning(p) : NULL;
    if (gw) cJSON_AddItemToArray(warn, cJSON_CreateString(gw));
    const char *ew = p->evt && p->steps_collected ? prof_evt_warning(p->evt) : NULL;
    if (ew) cJSON_AddItemToArray(warn, cJSON_CreateString(ew));
    return root;
}

int prof_write_summary(const tf_prof *p, const cJSON *run, const char *path, char *err,
                       size_t errlen) {
    cJSON *root = summary_json(p, run);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        snprintf(err, errlen, "profiler: out of memory writing summary.json");
        return -1;
    }
    FILE *f = open_out(path, err, errlen);
    if (!f) {
        cJSON_free(text);
        return -1;
    }
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    return close_out(f, path, err, errlen);
}
