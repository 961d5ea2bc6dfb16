/* The printed profile, at finish: top kernels, launches per step, phase
 * shares, time per module over all blocks, peak memory, trace window,
 * counters. What reads the files afterwards (compare, report) is src/report. */
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

#define NAME_W 48

/* Long (demangled template) names are cut in the middle of the table only. */
static void put_name(FILE *out, const char *s, int width) {
    int n = (int)strlen(s);
    if (n <= width) {
        fprintf(out, "%-*s", width, s);
        return;
    }
    fprintf(out, "%.*s...", width - 3, s);
}

static void print_kernels(const tf_prof *p, FILE *out) {
    size_t n;
    uint32_t *ids = prof_sorted_kernels(p, &n, PROF_KIND_KERNEL);
    if (!ids) return;
    if (n == 0) {
        fprintf(out, "No kernel launches were collected.\n");
        free(ids);
        return;
    }
    size_t top = (size_t)p->top < n ? (size_t)p->top : n;
    const int ops = p->timer == PROF_TIMER_EVENTS; /* a row per op, not per kernel */
    fprintf(out, "Top %zu of %zu %s by total time (%s):\n", top, n, ops ? "ops" : "kernels",
            p->timer == PROF_TIMER_CUPTI ? "device time, CUPTI"
            : ops ? "device time, GPU events around each op"
                  : "host time around each op");
    if (ops)
        fprintf(out, "(kernel records: %s)\n", p->records);
    put_name(out, ops ? "Op" : "Kernel", NAME_W);
    fprintf(out, " | %9s | %11s | %9s\n", "Calls", "Total ms", "% of time");
    for (int i = 0; i < NAME_W; i++) fputc('-', out);
    fprintf(out, "-|-----------|-------------|----------\n");
    double tot = (double)p->kernel_total_ns;
    int64_t shown = 0;
    for (size_t i = 0; i < top; i++) {
        const prof_stat *s = &p->kstats[ids[i]];
        put_name(out, p->names.strs[ids[i]], NAME_W);
        fprintf(out, " | %9llu | %11.3f | %8.2f%%\n", (unsigned long long)s->calls,
                (double)s->total_ns / 1e6, tot > 0 ? 100.0 * (double)s->total_ns / tot : 0.0);
        shown += s->total_ns;
    }
    if (top < n)
        fprintf(out, "(%zu more %s: %.3f ms, %.2f%% of time)\n", n - top, ops ? "ops" : "kernels",
                (double)(p->kernel_total_ns - shown) / 1e6,
                tot > 0 ? 100.0 * (double)(p->kernel_total_ns - shown) / tot : 0.0);
    free(ids);
}

static void print_phases(const tf_prof *p, const prof_totals *t, FILE *out) {
    if (!p->steps_collected) return;
    double steps = (double)p->steps_collected;
    fprintf(out, "Step: %.3f ms mean wall time;", (double)t->step_ns / 1e6 / steps);
    int any = 0, partial = 0;
    for (int k = 0; k < 4; k++) {
        if (!t->phase_seen[k]) continue;
        if (t->phase_calls[k] < p->steps_collected) { /* graph replay: not re-entered */
            partial = 1;
            continue;
        }
        fprintf(out, "%s %s %.3f ms (%.1f%%)", any ? "," : "", prof_phase_names[k],
                (double)t->phase_ns[k] / 1e6 / steps,
                t->step_ns ? 100.0 * (double)t->phase_ns[k] / (double)t->step_ns : 0.0);
        any = 1;
    }
    if (!any && !partial) fprintf(out, " phases not collected (outside the selected regions)");
    if (partial) fprintf(out, "%s some phase regions were not entered every step (graph replay)",
                         any ? ";" : "");
    fputc('\n', out);
    int gpu_any = 0;
    for (int k = 0; k < 4; k++) gpu_any |= t->phase_seen[k];
    if (prof_device_timed(p) && gpu_any && t->busy_steps) {
        /* the union of the kernels' spans: kernels beside each other count once */
        fprintf(out, "GPU busy per step (%zu traced step%s):", t->busy_steps,
                t->busy_steps == 1 ? "" : "s");
        for (int k = 0, c = 0; k < 4; k++)
            if (t->phase_seen[k])
                fprintf(out, "%s %s %.3f ms", c++ ? "," : "", prof_phase_names[k],
                        (double)t->phase_busy_ns[k] / 1e6 / (double)t->busy_steps);
        fputc('\n', out);
    }
    if (prof_device_timed(p) && gpu_any) {
        fprintf(out, "%s time per step (summed; %s beside each other add up):",
                p->evt ? "Op" : "Kernel", p->evt ? "ops" : "kernels");
        for (int k = 0, c = 0; k < 4; k++)
            if (t->phase_seen[k])
                fprintf(out, "%s %s %.3f ms", c++ ? "," : "", prof_phase_names[k],
                        (double)t->phase_kernel_ns[k] / 1e6 / steps);
        fputc('\n', out);
    }
}

static void print_modules(const tf_prof *p, const prof_totals *t, FILE *out) {
    size_t n;
    prof_module *m = prof_modules(p, &n);
    if (!m) return;
    if (n) {
        fprintf(out, "Time per module, all blocks, %s time over %zu steps:\n",
                p->evt ? "op (GPU events)" : p->gpu ? "kernel" : "host", p->steps_collected);
        fprintf(out, "%-28s | %11s | %11s | %11s | %9s\n", "Region", "Forward ms", "Backward ms",
                "Total ms", "% of step");
        fprintf(out, "-----------------------------|-------------|-------------|-------------|"
                     "----------\n");
        for (size_t i = 0; i < n; i++) {
            int64_t tot = m[i].fwd_ns + m[i].bwd_ns + m[i].other_ns;
            put_name(out, p->names.strs[m[i].name], 28);
            fprintf(out, " | %11.3f | %11.3f | %11.3f | %8.2f%%\n", (double)m[i].fwd_ns / 1e6,
                    (double)m[i].bwd_ns / 1e6, (double)tot / 1e6,
                    t->step_ns ? 100.0 * (double)tot / (double)t->step_ns : 0.0);
        }
    }
    free(m);
}

static void bytes_h(char *buf, size_t n, double b) {
    if (b >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else snprintf(buf, n, "%.1f MiB", b / 1048576.0);
}

void prof_print(const tf_prof *p, FILE *out) {
    prof_totals t;
    prof_compute_totals(p, &t);
    fprintf(out, "== tinyfold profile: %s, %zu step%s collected (warm-up %s), regions: %s ==\n",
            p->backend, p->steps_collected, p->steps_collected == 1 ? "" : "s",
            p->include_warmup ? "included" : "excluded", p->selected ? p->selected : "all");
    print_kernels(p, out);
    if (p->evt) /* an op is one or more kernel launches */
        fprintf(out, "Ops per step: %.1f (%llu timed ops over %zu step%s; each launches one or "
                     "more kernels)\n",
                t.launches_per_step, (unsigned long long)p->launches_total, p->steps_collected,
                p->steps_collected == 1 ? "" : "s");
    else
        fprintf(out, "Kernel launches per step: %.1f (%llu launches over %zu step%s)\n",
                t.launches_per_step, (unsigned long long)p->launches_total, p->steps_collected,
                p->steps_collected == 1 ? "" : "s");
    print_phases(p, &t, out);
    print_modules(p, &t, out);
    char b1[32], b2[32];
    size_t rss = prof_host_peak_rss();
    bytes_h(b1, sizeof b1, (double)p->peak_backend);
    bytes_h(b2, sizeof b2, (double)(rss > p->peak_host ? rss : p->peak_host));
    fprintf(out, "Peak memory: backend %s, host RSS %s (%llu samples)\n", b1, b2,
            (unsigned long long)p->mem_samples);
    if (p->steps_traced) {
        long first = -1, last = -1;
        for (size_t i = 0; i < p->nsteps; i++)
            if (p->steps[i].traced) {
                if (first < 0) first = p->steps[i].step;
                last = p->steps[i].step;
            }
        fprintf(out, "Trace: steps %ld..%ld (%zu %s)", first, last, p->nlaunch,
                p->evt ? "ops" : "launches");
        if (p->trace_cap_hit)
            fprintf(out, "; cap of %d steps reached: the %zu later steps are in the statistics "
                         "but not in the trace",
                    p->trace_max_steps, p->steps_collected - p->steps_traced);
        fputc('\n', out);
    }
    if (p->gpu) prof_gpu_counters_print(p, out);
    else if (p->cpuc) prof_cpuc_print(p->cpuc, p, out);
    if (p->oom) fprintf(out, "warning: out of memory, some profile records were dropped\n");
    if (p->unbalanced) fprintf(out, "warning: %ld unbalanced region/op pops ignored\n", p->unbalanced);
    const char *gw = p->gpu ? prof_gpu_warning(p) : NULL;
    if (gw) fprintf(out, "warning: %s\n", gw);
    const char *ew = p->evt && p->steps_collected ? prof_evt_warning(p->evt) : NULL;
    if (ew) fprintf(out, "warning: %s\n", ew);
}
