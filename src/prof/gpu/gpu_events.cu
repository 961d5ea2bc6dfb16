/* The GPU event timer's clock (prof/gpu_timer.h) on the backend's queues,
 * which its op table hands out (ops->queue, ops->wgrad_mark): one source for
 * nvcc (CUDA runtime) and hipcc (HIP runtime), through tf_gpu_port.h's
 * names. A pool of timing events grows to what a step needs (two per op)
 * and is reused every step after that, so steady-state steps create none.
 * Failures are reported to the timer (it drops the op and says so), never
 * fatal: the run's results do not depend on its profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/tf_gpu_port.h"
#include "backend/ops.h"
#include "prof/gpu_timer.h"

typedef struct {
    const tf_ops *ops;
    tf_backend *be;
    cudaEvent_t *ev;
    int nev, cap; /* recorded this step, created */
    int last[2];  /* the last event recorded on each queue this step, or -1 */
} evclock;

static int ec_record(void *ctx, int lane)
{
    evclock *c = (evclock *)ctx;
    cudaStream_t s = (cudaStream_t)c->ops->queue(c->be, lane);
    if ((lane && !s) || c->nev >= PROF_EVT_MAX_EVENTS) return -1;
    /* grown one event early: the pool grows before an op's begin event (index
     * odd, the step's own being 0), not between its two, where the host's
     * time creating events would count as the op's (the queue idles) */
    if (c->nev + 1 >= c->cap && c->cap < PROF_EVT_MAX_EVENTS) {
        int nc = c->cap ? 2 * c->cap : 1024;
        if (nc > PROF_EVT_MAX_EVENTS) nc = PROF_EVT_MAX_EVENTS;
        cudaEvent_t *q = (cudaEvent_t *)realloc(c->ev, (size_t)nc * sizeof *q);
        if (!q) return -1;
        c->ev = q;
        for (; c->cap < nc; c->cap++)
            if (cudaEventCreate(&c->ev[c->cap]) != cudaSuccess) {
                (void)cudaGetLastError();
                break;
            }
        if (c->nev >= c->cap) return -1;
    }
    if (cudaEventRecord(c->ev[c->nev], s) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    c->last[lane] = c->nev;
    return c->nev++;
}

static long ec_lane_ops(void *ctx)
{
    evclock *c = (evclock *)ctx;
    return c->ops->wgrad_mark ? c->ops->wgrad_mark(c->be) : 0;
}

static int ec_wait(void *ctx)
{
    evclock *c = (evclock *)ctx;
    for (int q = 0; q < 2; q++)
        if (c->last[q] >= 0 && cudaEventSynchronize(c->ev[c->last[q]]) != cudaSuccess) {
            (void)cudaGetLastError();
            return -1;
        }
    return 0;
}

static int ec_elapsed(void *ctx, int a, int b, int64_t *ns)
{
    evclock *c = (evclock *)ctx;
    float ms = 0.f;
    if (a < 0 || b < 0 || a >= c->nev || b >= c->nev ||
        cudaEventElapsedTime(&ms, c->ev[a], c->ev[b]) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    *ns = (int64_t)((double)ms * 1e6 + (ms >= 0.f ? 0.5 : -0.5));
    return 0;
}

static void ec_rewind(void *ctx)
{
    evclock *c = (evclock *)ctx;
    c->nev = 0;
    c->last[0] = c->last[1] = -1;
}

static void ec_close(void *ctx)
{
    evclock *c = (evclock *)ctx;
    for (int i = 0; i < c->cap; i++) (void)cudaEventDestroy(c->ev[i]);
    free(c->ev);
    free(c);
}

extern "C" int prof_gpu_events_built(void) { return 1; }

extern "C" int prof_gpu_events_open(prof_gpu_clock *clk, const tf_ops *ops, tf_backend *be,
                                    char *err, size_t errlen)
{
    if (!ops->queue) {
        if (err && errlen)
            snprintf(err, errlen, "GPU event timing: the %s backend has no queues", ops->name);
        return -1;
    }
    evclock *c = (evclock *)calloc(1, sizeof *c);
    if (!c) {
        if (err && errlen) snprintf(err, errlen, "profiler: out of memory");
        return -1;
    }
    c->ops = ops;
    c->be = be;
    c->last[0] = c->last[1] = -1;
    clk->ctx = c;
    clk->record = ec_record;
    clk->lane_ops = ec_lane_ops;
    clk->wait = ec_wait;
    clk->elapsed_ns = ec_elapsed;
    clk->rewind = ec_rewind;
    clk->close = ec_close;
    return 0;
}
