/* The figures of a finished profile that its printed table shows
 * (summary.c): taken from the profiler after tf_prof_finish, rendered by
 * the reporting side (report/prof_table.h). Names point into the profiler,
 * which must outlive the summary. */
#ifndef TF_PROF_SUMMARY_H
#define TF_PROF_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What timed the ops. */
typedef enum {
    TF_PROF_TIMED_HOST = 0,  /* the host clock around each op */
    TF_PROF_TIMED_CUPTI = 1, /* the device, CUPTI's records */
    TF_PROF_TIMED_EVENTS = 2 /* the device, GPU events around each op */
} tf_prof_timed;

/* A kernel (an op under the event timer) over the collected steps. */
typedef struct {
    const char *name;
    uint64_t calls;
    int64_t total_ns;
} tf_prof_kernel_row;

/* A module's op over all blocks, one pass (the ops furthest above their
 * roof). */
typedef struct {
    const char *module, *name;
    const char *pass; /* "forward", "backward" or "other" */
    double flops, bytes; /* one step */
    int64_t ns;          /* over the collected steps */
    double roof_ns;      /* a step's FLOPs and bytes at the ceilings (0: not measured) */
    double above_ns;     /* its time a step less roof_ns */
} tf_prof_op_row;

/* A module region over all blocks. */
typedef struct {
    const char *name;
    int64_t fwd_ns, bwd_ns, other_ns;
    double flops, bytes; /* its ops' analytic costs, one step (0: none recorded) */
    double roof_ns;      /* those at the ceilings (0: not measured) */
} tf_prof_module_row;

typedef struct {
    const char *backend;  /* the run's backend's word */
    const char *selected; /* the selected regions, NULL: all */
    const char *records;  /* the event timer's kernel records */
    int include_warmup;
    tf_prof_timed timed;
    int cupti; /* the CUPTI activity state was started */
    int events; /* the GPU event timer ran */
    size_t steps_collected;

    /* the top kernels by total time, descending (NULL: out of memory) */
    tf_prof_kernel_row *kernels;
    size_t nshown, nkernels; /* rows in kernels, kernels collected */
    int64_t kernel_total_ns;
    uint64_t launches_total;
    double launches_per_step;

    /* the phases: data_loading, forward_pass, backward_pass, optimizer_step */
    const char *phase_names[4];
    int64_t step_ns;            /* wall time of the collected steps */
    int64_t phase_ns[4];        /* the phase regions' wall time */
    int64_t phase_kernel_ns[4]; /* summed kernel durations */
    int64_t phase_busy_ns[4];   /* traced steps: time at least one kernel ran */
    size_t busy_steps;          /* traced steps behind phase_busy_ns */
    int phase_seen[4];
    uint64_t phase_calls[4]; /* region entries */

    /* the modules (NULL: out of memory) */
    tf_prof_module_row *modules;
    size_t nmodules;
    /* the ceilings the run's ops are held to (FLOP/s of its precision's GEMM,
     * bytes/s read + written), measured when files are written; 0: none */
    double ceil_flops, ceil_bytes;
    /* the ops with the most time a step above their roof (without ceilings:
     * the most time), descending (NULL: none) */
    tf_prof_op_row *ops;
    size_t nops;

    size_t peak_backend, peak_host; /* bytes; host: the process's peak RSS too */
    uint64_t mem_samples;

    size_t steps_traced; /* 0: no trace window */
    long trace_first, trace_last;
    size_t trace_rows;
    int trace_cap_hit, trace_max_steps;

    char *counters; /* the hardware counters' table as their collector words it, NULL: none */

    int oom;
    long unbalanced;
    const char *gpu_warning, *events_warning; /* NULL: none */
    const char *written_dir; /* the directory the files went to, NULL: none written */
} tf_prof_summary;

/* The summary of p (finished); 0, or -1 when p is not finished. */
int tf_prof_summarize(const tf_prof *p, tf_prof_summary *s);
void tf_prof_summary_free(tf_prof_summary *s);

#ifdef __cplusplus
}
#endif
#endif
