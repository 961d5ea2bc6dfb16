/* Profiler management: create a profiler before the trainer, attach it with
 * tf_trainer_set_prof, and finish it after the last step. The hooks the
 * model and trainer call are in prof.h.
 *
 * What is collected (the same rules on the CPU and on CUDA):
 *  - only work between tf_prof_step_begin and tf_prof_step_end;
 *  - warm-up steps only when include_warmup;
 *  - with selected_regions, only ops and regions whose region stack holds one
 *    of the selected names (exact match of one path component);
 *  - kernel statistics over every collected step; per-launch trace rows (and
 *    trace.json) for the first trace_max_steps collected steps only.
 * On GPUs the ops are timed on the device (CUPTI or events, tf_prof_gpu_timer).
 * On CUDA a step used for hardware counters (--counters) runs every kernel
 * several times (kernel replay): it is not counted in the timing statistics. */
#ifndef TF_PROF_PROFILER_H
#define TF_PROF_PROFILER_H

#include <stdio.h>

#include "tinyfold.h"

/* summary.json's schema (its "schema_version"); raised when a field changes
 * meaning or goes away. The run JSON under "run" carries its own. */
#define TF_PROF_SUMMARY_SCHEMA 1

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;
struct tf_backend;
struct tf_ops;

/* What times the ops of a GPU run: CUPTI's activity records (CUDA's default:
 * every kernel, memcpy and memset), or a pair of GPU events around each op
 * (HIP's only timer; on CUDA where CUPTI is unavailable, or to check one
 * against the other). The CPU backend's ops are timed by the host clock. */
typedef enum {
    TF_PROF_GPU_TIMER_DEFAULT = 0, /* CUDA: cupti, HIP: events */
    TF_PROF_GPU_TIMER_CUPTI = 1,
    TF_PROF_GPU_TIMER_EVENTS = 2
} tf_prof_gpu_timer;

typedef struct {
    const char *out_dir;          /* files go here; NULL = no files */
    const char *selected_regions; /* comma-separated region names, NULL = collect everywhere */
    int include_warmup;           /* also collect warm-up steps (default 0) */
    int trace_max_steps;          /* Perfetto trace cap in steps (<= 0 means the default, 5) */
    const char *counters;         /* kernel-name substring for hardware counters, or NULL */
    tf_backend_kind backend;      /* the run's (not auto; 0: the CPU) */
    tf_prof_gpu_timer gpu_timer;  /* GPU runs only */
    int top;                      /* kernels in the printed table (<= 0 means 15) */
    tf_precision precision;       /* the run's: which compute ceiling its ops are held to */
} tf_prof_opts;

/* NULL + one line in err on failure. On CUDA create it BEFORE the trainer
 * (CUPTI must see the first CUDA work). */
tf_prof *tf_prof_create(const tf_prof_opts *o, char *err, size_t errlen);
/* The GPU backend whose queues (ops->queue) the event timer records on (the
 * trainer calls it from tf_trainer_set_prof); nothing without the event timer. */
void tf_prof_attach_gpu(tf_prof *p, const struct tf_ops *ops, struct tf_backend *be);
/* A memory sample (the trainer calls it at phase boundaries). host_bytes == 0
 * means "read this process's resident set size now". */
void tf_prof_memory(tf_prof *p, size_t backend_bytes, size_t host_bytes);
/* One all-reduce of the current step (data parallel): its span on the
 * host's CLOCK_MONOTONIC in ns, from issue to completion, and its bytes;
 * traced steps show it on a track of its own. */
void tf_prof_comm(tf_prof *p, int64_t start_ns, int64_t end_ns, double bytes);
/* The model's activation arena fill level (bytes in use), read at region
 * boundaries and ops of one step to give each region's share of it. */
void tf_prof_watch_arena(tf_prof *p, const size_t *top);
/* Writes DIR/kernel_stats.csv, kernel_trace.csv, summary.json (embeds `run`
 * under "run"), trace.json. Returns 0, or non-zero with one line in err.
 * What it collected is then read with tf_prof_summarize (summary.h). */
int tf_prof_finish(tf_prof *p, const struct cJSON *run, char *err, size_t errlen);
void tf_prof_destroy(tf_prof *p);

#ifdef __cplusplus
}
#endif
#endif
