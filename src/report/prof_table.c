/* The printed profile (prof_table.h). */
#include <stdlib.h>
#include <string.h>

#include "report/prof_table.h"

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

static void print_kernels(const tf_prof_summary *s, FILE *out) {
    if (!s->kernels) return;
    size_t n = s->nkernels, top = s->nshown;
    if (n == 0) {
        fprintf(out, "No kernel launches were collected.\n");
        return;
    }
    const int ops = s->timed == TF_PROF_TIMED_EVENTS; /* a row per op, not per kernel */
    fprintf(out, "Top %zu of %zu %s by total time (%s):\n", top, n, ops ? "ops" : "kernels",
            s->timed == TF_PROF_TIMED_CUPTI ? "device time, CUPTI"
            : ops ? "device time, GPU events around each op"
                  : "host time around each op");
    if (ops)
        fprintf(out, "(kernel records: %s)\n", s->records);
    put_name(out, ops ? "Op" : "Kernel", NAME_W);
    fprintf(out, " | %9s | %11s | %9s\n", "Calls", "Total ms", "% of time");
    for (int i = 0; i < NAME_W; i++) fputc('-', out);
    fprintf(out, "-|-----------|-------------|----------\n");
    double tot = (double)s->kernel_total_ns;
    int64_t shown = 0;
    for (size_t i = 0; i < top; i++) {
        const tf_prof_kernel_row *k = &s->kernels[i];
        put_name(out, k->name, NAME_W);
        fprintf(out, " | %9llu | %11.3f | %8.2f%%\n", (unsigned long long)k->calls,
                (double)k->total_ns / 1e6, tot > 0 ? 100.0 * (double)k->total_ns / tot : 0.0);
        shown += k->total_ns;
    }
    if (top < n)
        fprintf(out, "(%zu more %s: %.3f ms, %.2f%% of time)\n", n - top, ops ? "ops" : "kernels",
                (double)(s->kernel_total_ns - shown) / 1e6,
                tot > 0 ? 100.0 * (double)(s->kernel_total_ns - shown) / tot : 0.0);
}

static void print_phases(const tf_prof_summary *s, FILE *out) {
    if (!s->steps_collected) return;
    double steps = (double)s->steps_collected;
    const int device = s->timed != TF_PROF_TIMED_HOST;
    fprintf(out, "Step: %.3f ms mean wall time;", (double)s->step_ns / 1e6 / steps);
    int any = 0, partial = 0;
    for (int k = 0; k < 4; k++) {
        if (!s->phase_seen[k]) continue;
        if (s->phase_calls[k] < s->steps_collected) { /* graph replay: not re-entered */
            partial = 1;
            continue;
        }
        fprintf(out, "%s %s %.3f ms (%.1f%%)", any ? "," : "", s->phase_names[k],
                (double)s->phase_ns[k] / 1e6 / steps,
                s->step_ns ? 100.0 * (double)s->phase_ns[k] / (double)s->step_ns : 0.0);
        any = 1;
    }
    if (!any && !partial) fprintf(out, " phases not collected (outside the selected regions)");
    if (partial) fprintf(out, "%s some phase regions were not entered every step (graph replay)",
                         any ? ";" : "");
    fputc('\n', out);
    int gpu_any = 0;
    for (int k = 0; k < 4; k++) gpu_any |= s->phase_seen[k];
    if (device && gpu_any && s->busy_steps) {
        /* the union of the kernels' spans: kernels beside each other count once */
        fprintf(out, "GPU busy per step (%zu traced step%s):", s->busy_steps,
                s->busy_steps == 1 ? "" : "s");
        for (int k = 0, c = 0; k < 4; k++)
            if (s->phase_seen[k])
                fprintf(out, "%s %s %.3f ms", c++ ? "," : "", s->phase_names[k],
                        (double)s->phase_busy_ns[k] / 1e6 / (double)s->busy_steps);
        fputc('\n', out);
    }
    if (device && gpu_any) {
        fprintf(out, "%s time per step (summed; %s beside each other add up):",
                s->events ? "Op" : "Kernel", s->events ? "ops" : "kernels");
        for (int k = 0, c = 0; k < 4; k++)
            if (s->phase_seen[k])
                fprintf(out, "%s %s %.3f ms", c++ ? "," : "", s->phase_names[k],
                        (double)s->phase_kernel_ns[k] / 1e6 / steps);
        fputc('\n', out);
    }
}

static void print_modules(const tf_prof_summary *s, FILE *out) {
    if (!s->modules || !s->nmodules) return;
    int costs = 0;
    for (size_t i = 0; i < s->nmodules; i++) costs |= s->modules[i].flops > 0 || s->modules[i].bytes > 0;
    fprintf(out, "Time per module, all blocks, %s time over %zu steps",
            s->events ? "op (GPU events)" : s->cupti ? "kernel" : "host", s->steps_collected);
    if (costs) {
        fprintf(out, "; a step's FLOPs and least bytes (the ops' shapes)");
        if (s->ceil_flops > 0 && s->ceil_bytes > 0)
            fprintf(out, " and its time over the roof's (at %.3g TFLOP/s and %.3g TB/s, the "
                         "measured GEMM of the run's precision and copy)",
                    s->ceil_flops / 1e12, s->ceil_bytes / 1e12);
    }
    fprintf(out, ":\n%-28s | %11s | %11s | %11s | %9s", "Region", "Forward ms", "Backward ms",
            "Total ms", "% of step");
    if (costs) fprintf(out, " | %8s | %7s | %6s", "GFLOP", "GB", "x roof");
    fprintf(out, "\n-----------------------------|-------------|-------------|-------------|"
                 "----------");
    if (costs) fprintf(out, "|----------|---------|-------");
    fputc('\n', out);
    const double steps = s->steps_collected ? (double)s->steps_collected : 1.0;
    for (size_t i = 0; i < s->nmodules; i++) {
        const tf_prof_module_row *m = &s->modules[i];
        int64_t tot = m->fwd_ns + m->bwd_ns + m->other_ns;
        put_name(out, m->name, 28);
        fprintf(out, " | %11.3f | %11.3f | %11.3f | %8.2f%%", (double)m->fwd_ns / 1e6,
                (double)m->bwd_ns / 1e6, (double)tot / 1e6,
                s->step_ns ? 100.0 * (double)tot / (double)s->step_ns : 0.0);
        if (costs) {
            const double r = m->roof_ns;
            fprintf(out, " | %8.2f | %7.3f | ", m->flops / 1e9, m->bytes / 1e9);
            if (r > 0 && tot > 0) fprintf(out, "%6.1f", (double)tot / steps / r);
            else fprintf(out, "%6s", "-");
        }
        fputc('\n', out);
    }
}

/* The recoverable time: each module's ops (over all blocks, one pass) with
 * the most time a step above what their FLOPs and bytes need at the
 * ceilings (without ceilings: the most time). */
static void print_ops(const tf_prof_summary *s, FILE *out) {
    if (!s->ops || !s->nops) return;
    const int roof = s->ceil_flops > 0 && s->ceil_bytes > 0;
    const double steps = s->steps_collected ? (double)s->steps_collected : 1.0;
    fprintf(out, "%s, a step (a module's op over all blocks, one pass):\n",
            roof ? "Ops with the most time above their roof" : "Ops with the most time");
    enum { W = 60 }; /* module / pass / op */
    put_name(out, "Module / pass / op", W);
    fprintf(out, " | %9s | %8s | %7s", "ms", "GFLOP", "GB");
    if (roof) fprintf(out, " | %6s | %9s", "x roof", "above ms");
    fputc('\n', out);
    for (int i = 0; i < W; i++) fputc('-', out);
    fprintf(out, "-|-----------|----------|---------");
    if (roof) fprintf(out, "|--------|----------");
    fputc('\n', out);
    for (size_t i = 0; i < s->nops; i++) {
        const tf_prof_op_row *o = &s->ops[i];
        char name[160];
        snprintf(name, sizeof name, "%s / %s / %s", o->module, o->pass, o->name);
        put_name(out, name, W);
        fprintf(out, " | %9.3f | %8.2f | %7.3f", (double)o->ns / steps / 1e6, o->flops / 1e9,
                o->bytes / 1e9);
        if (roof) {
            if (o->roof_ns > 0) fprintf(out, " | %6.1f", (double)o->ns / steps / o->roof_ns);
            else fprintf(out, " | %6s", "-");
            fprintf(out, " | %9.3f", o->above_ns / 1e6);
        }
        fputc('\n', out);
    }
}

static void bytes_h(char *buf, size_t n, double b) {
    if (b >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else snprintf(buf, n, "%.1f MiB", b / 1048576.0);
}

void tf_report_prof_table(const tf_prof_summary *s, FILE *out) {
    fprintf(out, "== tinyfold profile: %s, %zu step%s collected (warm-up %s), regions: %s ==\n",
            s->backend, s->steps_collected, s->steps_collected == 1 ? "" : "s",
            s->include_warmup ? "included" : "excluded", s->selected ? s->selected : "all");
    print_kernels(s, out);
    if (s->events) /* an op is one or more kernel launches */
        fprintf(out, "Ops per step: %.1f (%llu timed ops over %zu step%s; each launches one or "
                     "more kernels)\n",
                s->launches_per_step, (unsigned long long)s->launches_total, s->steps_collected,
                s->steps_collected == 1 ? "" : "s");
    else
        fprintf(out, "Kernel launches per step: %.1f (%llu launches over %zu step%s)\n",
                s->launches_per_step, (unsigned long long)s->launches_total, s->steps_collected,
                s->steps_collected == 1 ? "" : "s");
    print_phases(s, out);
    print_modules(s, out);
    print_ops(s, out);
    char b1[32], b2[32];
    bytes_h(b1, sizeof b1, (double)s->peak_backend);
    bytes_h(b2, sizeof b2, (double)s->peak_host);
    fprintf(out, "Peak memory: backend %s, host RSS %s (%llu samples)\n", b1, b2,
            (unsigned long long)s->mem_samples);
    if (s->steps_traced) {
        fprintf(out, "Trace: steps %ld..%ld (%zu %s)", s->trace_first, s->trace_last,
                s->trace_rows, s->events ? "ops" : "launches");
        if (s->trace_cap_hit)
            fprintf(out, "; cap of %d steps reached: the %zu later steps are in the statistics "
                         "but not in the trace",
                    s->trace_max_steps, s->steps_collected - s->steps_traced);
        fputc('\n', out);
    }
    if (s->counters) fputs(s->counters, out);
    if (s->oom) fprintf(out, "warning: out of memory, some profile records were dropped\n");
    if (s->unbalanced) fprintf(out, "warning: %ld unbalanced region/op pops ignored\n", s->unbalanced);
    if (s->gpu_warning) fprintf(out, "warning: %s\n", s->gpu_warning);
    if (s->events_warning) fprintf(out, "warning: %s\n", s->events_warning);
    if (s->written_dir)
        fprintf(out, "Profile written to %s/ (kernel_stats.csv, kernel_trace.csv, "
                     "summary.json, trace.json: open trace.json in ui.perfetto.dev)\n",
                s->written_dir);
    fflush(out);
}
