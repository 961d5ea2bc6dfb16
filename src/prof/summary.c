/* The figures of a finished profile that its printed table shows
 * (summary.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"
#include "prof/summary.h"

static void kernels(const tf_prof *p, tf_prof_summary *s) {
    size_t n;
    uint32_t *ids = prof_sorted_kernels(p, &n, PROF_KIND_KERNEL);
    if (!ids) return;
    size_t top = (size_t)p->top < n ? (size_t)p->top : n;
    s->kernels = calloc(top + 1, sizeof *s->kernels);
    if (s->kernels) {
        for (size_t i = 0; i < top; i++) {
            const prof_stat *k = &p->kstats[ids[i]];
            s->kernels[i] = (tf_prof_kernel_row){p->names.strs[ids[i]], k->calls, k->total_ns};
        }
        s->nshown = top;
        s->nkernels = n;
    }
    free(ids);
}

/* A step's FLOPs and bytes at the ceilings: the larger of the two times
 * (the roofline's bound); 0 where a ceiling was not measured. */
static double roof_ns(const tf_prof_summary *s, double flops, double bytes) {
    if (s->ceil_flops <= 0 || s->ceil_bytes <= 0) return 0;
    const double f = flops / s->ceil_flops, b = bytes / s->ceil_bytes;
    return 1e9 * (f > b ? f : b);
}

static void modules(const tf_prof *p, tf_prof_summary *s) {
    size_t n;
    prof_module *m = prof_modules(p, &n);
    if (!m) return;
    s->modules = calloc(n + 1, sizeof *s->modules);
    if (s->modules) {
        for (size_t i = 0; i < n; i++)
            s->modules[i] = (tf_prof_module_row){p->names.strs[m[i].name], m[i].fwd_ns,
                                                 m[i].bwd_ns, m[i].other_ns, m[i].flops,
                                                 m[i].bytes, roof_ns(s, m[i].flops, m[i].bytes)};
        s->nmodules = n;
    }
    free(m);
}

#define TOP_OPS 10

static int by_above(const void *a, const void *b) {
    const double x = ((const tf_prof_op_row *)a)->above_ns, y = ((const tf_prof_op_row *)b)->above_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void top_ops(const tf_prof *p, tf_prof_summary *s) {
    static const char *const pass[3] = {"forward", "backward", "other"};
    size_t n;
    prof_op_row *r = prof_op_rows(p, &n);
    if (!r || !n) {
        free(r);
        return;
    }
    tf_prof_op_row *o = calloc(n, sizeof *o);
    if (o) {
        const double steps = s->steps_collected ? (double)s->steps_collected : 1.0;
        for (size_t i = 0; i < n; i++) {
            const double roof = roof_ns(s, r[i].flops, r[i].bytes);
            o[i] = (tf_prof_op_row){p->names.strs[r[i].module], p->names.strs[r[i].name],
                                    pass[r[i].phase], r[i].flops, r[i].bytes, r[i].ns, roof,
                                    (double)r[i].ns / steps - roof};
        }
        qsort(o, n, sizeof *o, by_above);
        s->ops = o;
        s->nops = n < TOP_OPS ? n : TOP_OPS;
    }
    free(r);
}

static void trace_window(const tf_prof *p, tf_prof_summary *s) {
    s->steps_traced = p->steps_traced;
    s->trace_first = s->trace_last = -1;
    for (size_t i = 0; i < p->nsteps; i++)
        if (p->steps[i].traced) {
            if (s->trace_first < 0) s->trace_first = p->steps[i].step;
            s->trace_last = p->steps[i].step;
        }
    s->trace_rows = p->nlaunch;
    s->trace_cap_hit = p->trace_cap_hit;
    s->trace_max_steps = p->trace_max_steps;
}

/* The counters' collectors word their own tables. */
static void counters(const tf_prof *p, tf_prof_summary *s) {
    if (!p->gpu && !p->cpuc) return;
    size_t len = 0;
    FILE *f = open_memstream(&s->counters, &len);
    if (!f) return;
    if (p->gpu) prof_gpu_counters_print(p, f);
    else prof_cpuc_print(p->cpuc, p, f);
    fclose(f);
}

int tf_prof_summarize(const tf_prof *p, tf_prof_summary *s) {
    memset(s, 0, sizeof *s);
    if (!p || !p->finished) return -1;
    s->backend = p->backend;
    s->selected = p->selected;
    s->records = p->records;
    s->include_warmup = p->include_warmup;
    s->timed = p->timer == PROF_TIMER_CUPTI    ? TF_PROF_TIMED_CUPTI
               : p->timer == PROF_TIMER_EVENTS ? TF_PROF_TIMED_EVENTS
                                               : TF_PROF_TIMED_HOST;
    s->cupti = p->gpu != NULL;
    s->events = p->evt != NULL;
    s->steps_collected = p->steps_collected;
    kernels(p, s);
    s->kernel_total_ns = p->kernel_total_ns;
    s->launches_total = p->launches_total;

    prof_totals t;
    prof_compute_totals(p, &t);
    s->launches_per_step = t.launches_per_step;
    s->step_ns = t.step_ns;
    for (int k = 0; k < 4; k++) {
        s->phase_names[k] = prof_phase_names[k];
        s->phase_ns[k] = t.phase_ns[k];
        s->phase_kernel_ns[k] = t.phase_kernel_ns[k];
        s->phase_busy_ns[k] = t.phase_busy_ns[k];
        s->phase_seen[k] = t.phase_seen[k];
        s->phase_calls[k] = t.phase_calls[k];
    }
    s->busy_steps = t.busy_steps;
    s->ceil_flops = prof_compute_ceiling(&p->ceil, p->precision);
    s->ceil_bytes = p->ceil.copy_bytes;
    modules(p, s);
    top_ops(p, s);

    size_t rss = prof_host_peak_rss();
    s->peak_backend = p->peak_backend;
    s->peak_host = rss > p->peak_host ? rss : p->peak_host;
    s->mem_samples = p->mem_samples;
    trace_window(p, s);
    counters(p, s);
    s->oom = p->oom;
    s->unbalanced = p->unbalanced;
    s->gpu_warning = p->gpu ? prof_gpu_warning(p) : NULL;
    s->events_warning = p->evt && p->steps_collected ? prof_evt_warning(p->evt) : NULL;
    s->written_dir = p->written ? p->out_dir : NULL;
    return 0;
}

void tf_prof_summary_free(tf_prof_summary *s) {
    free(s->kernels);
    free(s->modules);
    free(s->ops);
    free(s->counters);
    memset(s, 0, sizeof *s);
}
