/* The profiler's private state, shared by the files of src/prof/.
 *
 * Everything here is touched from the thread that drives the model only
 * (the hooks, finish). The CUDA activity module receives CUPTI buffers on
 * CUPTI's own thread: it queues them under its own lock and hands them to
 * this state from the main thread (at step ends and at finish).
 *
 * Memory stays bounded: aggregates are per interned name and per region
 * path; per-launch rows are kept for the first trace_max_steps collected
 * steps only; arrays grow by doubling, and after the first traced step the
 * launch array is reserved for the whole trace window, so steady-state
 * recording does not allocate. */
#ifndef TF_PROF_INTERNAL_H
#define TF_PROF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prof/gpu_timer.h"
#include "prof/prof.h"
#include "prof/profiler.h"

#define PROF_MAX_DEPTH 64
#define PROF_MAX_OPS 8          /* ops nested inside ops (rare) */
#define PROF_ROOT 0u            /* path id of the empty path (no region) */
#define PROF_NONE UINT32_MAX
#define PROF_MAX_MEM_SAMPLES 65536

/* ---- string interning ---- */
typedef struct {
    char **strs;
    uint32_t *hashes;
    uint32_t n, cap;
    uint32_t *slots; /* id + 1; 0 = empty */
    uint32_t nslots; /* power of two */
} prof_intern;

int prof_intern_init(prof_intern *t);
void prof_intern_free(prof_intern *t);
/* Id of s, added if missing; PROF_NONE when out of memory. */
uint32_t prof_intern_id(prof_intern *t, const char *s);
/* Id of s or PROF_NONE. */
uint32_t prof_intern_find(const prof_intern *t, const char *s);

/* ---- aggregates ---- */
typedef enum { PROF_KIND_KERNEL = 0, PROF_KIND_MEMCPY = 1, PROF_KIND_MEMSET = 2 } prof_kind;

typedef struct {
    uint64_t calls;
    int64_t total_ns, min_ns, max_ns;
    double mean, m2; /* Welford: running mean and sum of squared deviations */
    uint8_t kind;
} prof_stat;

typedef struct {
    uint32_t parent, name;
    int depth;
    int selected;     /* this path lies inside a selected region (or no selection) */
    char *path;       /* "forward_pass/block_0/msa_qkv"; "" for the root */
    uint64_t calls;   /* collected entries */
    int64_t host_ns;  /* inclusive host wall time of collected entries */
    int64_t kernel_ns;/* inclusive kernel time (this region and below) */
    uint64_t launches;/* launches directly in this region */
    size_t peak_backend, peak_host; /* from memory samples in this region or below */
    /* the activation arena over the cost step (tf_prof_watch_arena): bytes
     * still allocated when the region ended (a forward module's saved
     * activations) and the most held above its entry level */
    int64_t arena_kept;
    size_t arena_hi;
    int arena_seen;
} prof_path;

typedef struct {
    long step;
    int warmup, collected, traced, counter_step;
    int64_t start, end; /* profiler clock, ns */
    uint64_t launches;
    int64_t kernel_ns;
} prof_step;

/* One launch (a CPU op, a GPU kernel, a memcpy/memset). */
/* prof_launch.stream of a replayed graph's work: CUDA runs a graph's branches
 * (the weight-gradient lane's) on internal streams of its own, dozens of
 * them, so the trace shows all of it as one track, overlaps beside it. */
#define PROF_STREAM_GRAPH 0xffffffffu

typedef struct {
    uint32_t name, op, path, step; /* step: index into steps */
    uint32_t stream;
    uint8_t kind;
    int64_t start, end;             /* profiler clock (CLOCK_MONOTONIC ns) */
    uint32_t grid[3], block[3];     /* 0 = unknown (CPU) */
    int32_t regs, smem;             /* -1 = unknown (CPU) */
} prof_launch;

typedef struct {
    uint32_t path, step;
    int64_t start, end;
} prof_region_ev;

typedef struct {
    int64_t t;
    size_t backend, host;
} prof_mem;

/* One all-reduce of a traced step (tf_prof_comm). */
typedef struct {
    int64_t start, end;
    double bytes;
    uint32_t step;
} prof_comm;

typedef struct prof_cpuc prof_cpuc; /* counters_cpu.c */

/* One op of the model at one region path (opcost.c): its analytic cost over
 * one step (tf_prof_op_cost) and the kernel time it took over the collected
 * steps. */
typedef struct {
    uint32_t path, name; /* name: the op's kernel name id */
    uint32_t calls;      /* calls in the cost step */
    int has_cost;
    double flops, bytes; /* per step */
    int64_t kernel_ns;   /* collected steps */
    uint64_t launches;
} prof_opcost;

/* Ceilings measured when the profiler starts (ceilings.c, or the CUDA
 * module's); 0 = not measured. */
typedef struct {
    double gemm_flops;    /* FLOP/s */
    double gemm_tf32_flops; /* CUDA: the same GEMM with TF32 tensor cores; 0 elsewhere */
    double gemm_half_flops; /* CUDA: bf16 operands, fp32 sums (bf16 and fp16 runs); 0 elsewhere */
    double copy_bytes;    /* bytes/s, read + write */
    char gemm_what[96], copy_what[96];
} prof_ceilings;

/* What timed the collected ops. */
typedef enum { PROF_TIMER_HOST = 0, PROF_TIMER_CUPTI = 1, PROF_TIMER_EVENTS = 2 } prof_timer;

struct tf_prof {
    /* options (strings owned) */
    char *out_dir, *selected, *counters;
    int include_warmup, trace_max_steps, top;
    prof_timer timer;
    const char *backend; /* the run's backend's word (registry.h) */
    tf_precision precision; /* the run's (the compute ceiling of its ops) */
    const char *records; /* where an events run's kernel records come from */
    int64_t t0;

    prof_intern names;
    uint32_t *sel_ids;
    int nsel;

    prof_path *paths;
    uint32_t npaths, cap_paths;
    uint32_t *path_slots; /* hash (parent, name) -> id + 1 */
    uint32_t path_nslots;

    struct { uint32_t path; int64_t start; size_t mem_in, mem_hi; } stack[PROF_MAX_DEPTH];
    const size_t *arena_top; /* the model's arena fill level (tf_prof_watch_arena) */
    int depth, overflow;
    long unbalanced;
    struct { uint32_t name; int64_t start; int counted; } ops[PROF_MAX_OPS];
    int nops, ops_overflow;

    prof_stat *kstats; /* indexed by name id */
    size_t kstats_cap;
    int64_t kernel_total_ns;
    uint64_t launches_total;

    prof_step *steps;
    size_t nsteps, cap_steps;
    int in_step;
    size_t cur_step;
    size_t steps_collected, steps_traced;
    int trace_cap_hit;
    int reserved_trace;
    int steps_collected_counter_done; /* CUDA: the counter step has run */

    prof_launch *launches;
    size_t nlaunch, cap_launch;
    prof_region_ev *rev;
    size_t nrev, cap_rev;
    prof_mem *mem;
    size_t nmem, cap_mem;
    prof_comm *comm;
    size_t ncomm, cap_comm;
    uint64_t mem_samples;
    size_t peak_backend, peak_host;

    prof_cpuc *cpuc;
    int8_t *name_match; /* per name: -1 unknown, 0/1 matches the counter pattern */
    size_t name_match_cap;

    prof_opcost *opc;
    size_t nopc, cap_opc;
    uint32_t *opc_slots; /* hash (path, name) -> index + 1 */
    size_t opc_nslots;
    long cost_step;     /* steps[] index whose ops were costed; -1 none yet */
    prof_ceilings ceil;
    int ceil_measured;  /* CUDA: measured at the first step's begin */

    void *gpu;          /* CUPTI activity state (src/prof/cuda), NULL otherwise */
    prof_evt *evt;      /* the GPU event timer (gpu_timer.h), NULL otherwise */
    void *gpu_counters; /* CUDA range-profiler state for --counters */
    uint64_t ctx;       /* CUDA: encoded (step, path, op) of the current host position */
    int oom;            /* some record was dropped for lack of memory */
    int finished;
    int written;        /* finish wrote the files to out_dir */
};

/* ---- the encoded host context of a CUDA launch ---- */
#define PROF_CTX_PATH_BITS 20
#define PROF_CTX_OP_BITS 19
#define PROF_CTX_STEP_NONE 0xFFFFFFu
static inline uint64_t prof_ctx_make(uint32_t step, uint32_t path, uint32_t op) {
    return ((uint64_t)(step & 0xFFFFFFu) << 40) | (1ull << 39) |
           ((uint64_t)(op & ((1u << PROF_CTX_OP_BITS) - 1)) << PROF_CTX_PATH_BITS) |
           (uint64_t)(path & ((1u << PROF_CTX_PATH_BITS) - 1));
}
static inline int prof_ctx_valid(uint64_t c) { return (int)((c >> 39) & 1); }
static inline uint32_t prof_ctx_step(uint64_t c) { return (uint32_t)(c >> 40); }
static inline uint32_t prof_ctx_path(uint64_t c) {
    return (uint32_t)(c & ((1u << PROF_CTX_PATH_BITS) - 1));
}
static inline uint32_t prof_ctx_op(uint64_t c) {
    return (uint32_t)((c >> PROF_CTX_PATH_BITS) & ((1u << PROF_CTX_OP_BITS) - 1));
}
/* op field value meaning "no op" */
#define PROF_CTX_NO_OP ((1u << PROF_CTX_OP_BITS) - 1)

/* The ops' times are the device's (CUPTI or events), not the host's. */
static inline int prof_device_timed(const tf_prof *p) { return p->timer != PROF_TIMER_HOST; }

/* ---- the system (prof_sys.c) ---- */
int64_t prof_now_ns(void);
/* Grow *arr to hold at least need elements of size elem; 0 ok, -1 out of memory. */
int prof_reserve(void **arr, size_t *cap, size_t need, size_t elem);
/* Resident set size of the process now (/proc/self/statm), 0 if unknown. */
size_t prof_current_rss(void);
/* Peak resident set size of the process so far (getrusage). */
size_t prof_host_peak_rss(void);

/* ---- region paths (intern.c) ---- */
/* Child path of parent named name_id (created if missing); PROF_NONE on OOM. */
uint32_t prof_path_child(tf_prof *p, uint32_t parent, uint32_t name_id);

/* ---- launches (record.c) ---- */
/* Record one collected launch (stats, regions, step, trace rows). */
void prof_record_launch(tf_prof *p, const prof_launch *l);
/* Does name id match the counter pattern (cached)? */
int prof_name_matches(tf_prof *p, uint32_t name);

/* ---- op costs (opcost.c) ---- */
/* Adds a kernel's duration to op (path, name) */
void prof_opcost_time(tf_prof *p, uint32_t path, uint32_t name, int64_t ns);
struct cJSON *prof_opcost_json(const tf_prof *p);
struct cJSON *prof_arena_json(const tf_prof *p);
/* Is the arena followed in the current step (the cost step)? */
static inline int prof_arena_step(const tf_prof *p) {
    return p->arena_top && p->in_step && (p->cost_step < 0 || p->cost_step == (long)p->cur_step);
}
/* The arena may have grown: every open region's high-water mark follows. */
static inline void prof_arena_touch(tf_prof *p) {
    size_t top = *p->arena_top;
    for (int d = 0; d < p->depth; d++)
        if (top > p->stack[d].mem_hi) p->stack[d].mem_hi = top;
}
void prof_opcost_free(tf_prof *p);
/* ---- ceilings (ceilings.c; CUDA: src/prof/cuda) ---- */
void prof_ceilings_measure_cpu(prof_ceilings *c);
/* FLOP/s the run's precision is held to: TF32's, the half types' or fp32's
 * GEMM (the fp32 one where the other was not measured); 0: none measured */
double prof_compute_ceiling(const prof_ceilings *c, tf_precision prec);
/* 0 ok, else -1 (nothing measured) */
int prof_gpu_ceilings(prof_ceilings *c);
struct cJSON *prof_ceilings_json(const prof_ceilings *c);

/* ---- CPU software counters (counters_cpu.c) ---- */
#define PROF_CPUC_MAX 8
prof_cpuc *prof_cpuc_open(void);
void prof_cpuc_close(prof_cpuc *c);
/* Reads the open counters into v (PROF_CPUC_MAX entries). */
void prof_cpuc_read(prof_cpuc *c, uint64_t *v);
void prof_cpuc_begin(prof_cpuc *c);
/* Closes the bracket opened by prof_cpuc_begin and adds it to name's sums. */
void prof_cpuc_end(prof_cpuc *c, uint32_t name);
struct cJSON *prof_cpuc_json(const prof_cpuc *c, const tf_prof *p);
void prof_cpuc_print(const prof_cpuc *c, const tf_prof *p, FILE *out);

/* ---- outputs (finish.c calls them) ---- */
/* kernel_stats.csv, kernel_trace.csv, summary.json (prof_outputs.c) */
int prof_write_stats_csv(const tf_prof *p, const char *path, char *err, size_t errlen);
int prof_write_trace_csv(const tf_prof *p, const char *path, char *err, size_t errlen);
int prof_write_summary(const tf_prof *p, const struct cJSON *run, const char *path, char *err,
                       size_t errlen);
/* trace.json (prof_trace.c) */
int prof_write_trace_json(const tf_prof *p, const char *path, char *err, size_t errlen);

/* ---- derived figures (prof_stats.c) ---- */
/* Kernel name ids sorted by total time descending (kind == kernel, calls > 0). */
uint32_t *prof_sorted_kernels(const tf_prof *p, size_t *n, int kind);
/* Indices of the trace rows in start order (CUDA buffers arrive out of order). */
size_t *prof_launch_order(const tf_prof *p);
/* Totals the printed profile's summary and summary.json share. */
typedef struct {
    int64_t step_ns;                 /* wall time of the collected steps */
    int64_t phase_ns[4];             /* data_loading, forward_pass, backward_pass, optimizer_step */
    int64_t phase_kernel_ns[4];      /* summed kernel durations (concurrent kernels add up) */
    int64_t phase_busy_ns[4];        /* traced steps: time at least one kernel ran */
    size_t busy_steps;               /* traced steps behind phase_busy_ns (0: none) */
    int phase_seen[4];
    uint64_t phase_calls[4];         /* region entries (fewer than steps under graph replay) */
    double launches_per_step;
} prof_totals;
extern const char *const prof_phase_names[4];
void prof_compute_totals(const tf_prof *p, prof_totals *t);

/* Module aggregate: a module region (e.g. msa_row_attention) over all blocks. */
typedef struct {
    uint32_t name;
    int64_t fwd_ns, bwd_ns, other_ns; /* host time on the CPU, kernel time on CUDA */
    uint64_t calls;
    double flops, bytes; /* its ops' analytic costs, one step (opcost.c) */
} prof_module;
prof_module *prof_modules(const tf_prof *p, size_t *n);

/* An op of a module over all blocks, one pass: its analytic costs (one step)
 * and its time over the collected steps (kernel time on a GPU). */
typedef struct {
    uint32_t module, name; /* name: the op's */
    int phase;             /* 0 forward, 1 backward, 2 other */
    double flops, bytes;
    int64_t ns;
} prof_op_row;
/* Every (module, pass, op) with costs and time, unordered (NULL: none or out
 * of memory) */
prof_op_row *prof_op_rows(const tf_prof *p, size_t *n);


/* ---- GPU (src/prof/cuda or the stub in prof_gpu_stub.c) ---- */
/* Start CUPTI activity collection; 0 ok, else one line in err. */
int prof_gpu_start(tf_prof *p, char *err, size_t errlen);
/* Flush finished CUPTI buffers and fold them into p (main thread). */
void prof_gpu_drain(tf_prof *p, int force);
void prof_gpu_stop(tf_prof *p);
/* Stops (if needed) and frees the CUDA state, counters included. */
void prof_gpu_free(tf_prof *p);
void prof_gpu_counters_free(tf_prof *p);
/* Counters (range profiler, cupti_counters.c): learning which (path, op)
 * launch matching kernels, then one window per such op in the counter step. */
int prof_gpu_counters_pending(const tf_prof *p);
void prof_gpu_counters_learn(tf_prof *p, const char *symbol);
int prof_gpu_counters_ready(const tf_prof *p);
void prof_gpu_counters_learning_done(tf_prof *p);
void prof_gpu_counters_step_begin(tf_prof *p);
void prof_gpu_counters_step_end(tf_prof *p);
int prof_gpu_counters_op_begin(tf_prof *p);
void prof_gpu_counters_op_end(tf_prof *p);
struct cJSON *prof_gpu_counters_json(const tf_prof *p);
void prof_gpu_counters_print(const tf_prof *p, FILE *out);
/* CUDA builds: the demangled form of a C++ kernel name (malloc'd), or NULL
 * when name is not mangled (cupti_activity.c). */
char *prof_cuda_demangle(const char *name);
/* Recorded dropped CUPTI records etc.: one line or NULL. */
const char *prof_gpu_warning(const tf_prof *p);
/* CUDA builds: an external profiler's collection on (1) or off (0)
 * (cudaProfilerStart/Stop; markers.h); nothing while the GPU module is not
 * loaded. */
void prof_gpu_profiler_collect(int on);

#endif
