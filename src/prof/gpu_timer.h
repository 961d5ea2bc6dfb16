/* The GPU event timer of the profiler (--gpu-timer events; the only GPU
 * timer on HIP): every collected op is bracketed by two events on the queue
 * it runs on, and after the step's last wait each pair becomes one record
 * of the op (its start and end as offsets from an event recorded when the
 * step began), folded in like a CUPTI kernel record or a CPU op.
 *
 * The bookkeeping here is plain C over a clock (prof_gpu_clock): the events
 * of the GPU build (gpu/gpu_events.cu, CUDA or HIP runtime through
 * tf_gpu_port.h), or a fake one in the unit tests.
 *
 * The weight-gradient lane: a GEMM the backend sends to its lane runs on the
 * lane's queue. The clock counts the lane's GEMMs; an op during which the
 * count moved ran there, so its end event goes on the lane, and it started
 * at the later of its begin event (on the main queue, which the lane waits
 * for) and the end of the lane's previous op of the step. */
#ifndef TF_PROF_GPU_TIMER_H
#define TF_PROF_GPU_TIMER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tf_prof;
struct tf_ops;
struct tf_backend;

#define PROF_EVT_MAX_EVENTS (1 << 18) /* events per step (2 per op + 1) */

typedef struct {
    void *ctx;
    /* Records an event on the main queue (lane 0) or the lane's (1) and
     * returns its index in this step, or -1 (pool full, no lane, failure). */
    int (*record)(void *ctx, int lane);
    /* GEMMs issued to the lane so far (0 without a lane). */
    long (*lane_ops)(void *ctx);
    /* Waits until every event recorded in this step has happened; 0 ok. */
    int (*wait)(void *ctx);
    /* Nanoseconds from event a to event b (both waited for); 0 ok. */
    int (*elapsed_ns)(void *ctx, int a, int b, int64_t *ns);
    /* The next step records from index 0 again (events are reused). */
    void (*rewind)(void *ctx);
    void (*close)(void *ctx);
} prof_gpu_clock;

typedef struct {
    uint32_t name, path, step;
    int ev_begin, ev_end, ev_after; /* ev_after: the lane's previous end, or -1 */
    uint8_t lane;
} prof_evt_span;

typedef struct {
    prof_gpu_clock clk;
    int have_clk;
    prof_evt_span *spans;
    size_t nspans, cap_spans;
    int ev_step;       /* this step's start event, -1 when not recording */
    int64_t host_step; /* the profiler clock when it was recorded */
    int last_lane_end; /* this step's last op on the lane: its end event, or -1 */
    struct {
        int ev;
        long lane;
    } open[8]; /* PROF_MAX_OPS: the ops being issued */
    size_t dropped;    /* ops not timed: the pool was full or an event failed */
    int failed;        /* waiting or reading an event failed */
    char warn[256];
} prof_evt;

/* The GPU build's event clock on the queues of backend be (ops->queue;
 * gpu/gpu_events.cu); -1 with one line in err where the build has no GPU
 * backend (prof_gpu_stub.c) or the backend no queues. */
int prof_gpu_events_open(prof_gpu_clock *clk, const struct tf_ops *ops, struct tf_backend *be,
                         char *err, size_t errlen);
/* Does this build have the event clock? */
int prof_gpu_events_built(void);

/* The hooks' side (gpu_timer.c). p->evt is set. */
void prof_evt_step_begin(struct tf_prof *p);
void prof_evt_op_begin(struct tf_prof *p, int slot);
void prof_evt_op_end(struct tf_prof *p, int slot, uint32_t name, uint32_t path);
/* After the step: wait, read the pairs, record them. */
void prof_evt_step_end(struct tf_prof *p);
void prof_evt_free(prof_evt *e);
/* One line when some ops were not timed, else NULL. */
const char *prof_evt_warning(prof_evt *e);

#ifdef __cplusplus
}
#endif
#endif
