/* The CUDA backend's gradient reduction through NCCL: every NCCL call of
 * tinyfold is in this file, so that RCCL on HIP takes the same code through
 * the portability header (cuda* names mapped to hip*, nccl.h to rccl.h).
 *
 * One communicator over the job's ranks (its id broadcast over MPI), a
 * stream of its own. Each bucket (dist.h) waits for an event of the
 * backend's stream recorded when its gradients are final, inside the
 * backward, and is all-reduced (ncclAvg: the sum then 1/P, the mean the CPU
 * path computes too) while the backward goes on; after the backward the
 * backend's stream waits for the last one, before the optimizer. The host
 * never blocks in NCCL: the communicator is non-blocking (NCCL >= 2.14),
 * every call's completion and the reductions' end are polled against
 * --dist-timeout, and past it the communicator is aborted and every rank
 * ended, with one line (a rank that died or hangs leaves the others in a
 * collective that never ends).
 *
 * Under whole-phase graph capture (--graph) the same calls are captured into
 * the backward's graph: the communication stream joins the capture by
 * waiting for the capturing stream's event (a fork), each all-reduce becomes
 * NCCL's graph nodes (NCCL >= 2.9; the non-blocking communicator's enqueue
 * is settled within the capture, as outside it), and the backend's stream
 * waits for the last one before the capture ends (the join). The timing
 * events are recorded as event-record nodes (cudaEventRecordExternal), which
 * every replay records again, so a replayed step is timed as an eager one;
 * the host waits for a replayed step on such an event too, with the
 * deadline (tf_dist_nccl_replayed, tf_dist_nccl_wait). */
#include <cuda_runtime.h>
#if defined(TF_HAVE_HIP)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cuda/tf_gpu_port.h"
#include "dist/dist.h"

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define TF_NCCL_NONBLOCKING 1
#else
#define TF_NCCL_NONBLOCKING 0 /* older NCCL: its calls block, no deadline */
#endif

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready;   /* recorded on the backend's stream for each bucket */
    cudaEvent_t reduced; /* after the last bucket: the backend's stream waits for it */
    cudaEvent_t done;    /* the same point for the host, recorded by a captured graph */
    cudaEvent_t poll;    /* what the host waits for: reduced, or done after a capture */
    cudaEvent_t bwd_end; /* the backend's stream at the end of the backward */
    cudaEvent_t *t0, *t1; /* a pair a bucket: its all-reduce on the stream */
    int nev;             /* pairs created */
    int timed;           /* buckets of the last step to read */
    double bytes;
    double step_bytes;   /* issued since the last finish */
    int graph_nbk;       /* what the captured graph reduces each replay */
    double graph_bytes;
} tf_nccl;

static int capturing(cudaStream_t s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
}

/* An event on `s` that the host reads later (a wait or a time): during a
 * capture an event-record node, which each replay records; otherwise a
 * plain record (the eager step is unchanged). */
static void record_for_host(cudaEvent_t e, cudaStream_t s) {
    if (capturing(s))
        cudaEventRecordWithFlags(e, s, cudaEventRecordExternal);
    else
        cudaEventRecord(e, s);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_poll(double waited_s) {
    if (waited_s > 1e-3) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* Past the deadline or on an error: the communicator aborted, one line,
 * every rank ended (MPI_Abort under mpirun). */
static void fail(tf_dist *d, tf_nccl *c, const char *what, const char *why) {
    fprintf(stderr, "tinyfold: rank %d of %d: NCCL %s: %s; ending every rank\n", d->rank,
            d->size, what, why);
    fflush(stderr);
    if (c && c->comm) ncclCommAbort(c->comm);
    tf_dist_abort(d, 1);
}

static void timed_out(tf_dist *d, tf_nccl *c, const char *what) {
    char why[160];
    snprintf(why, sizeof why,
             "no answer from the other ranks within %g s (--dist-timeout): a rank died or hangs",
             d->timeout_s);
    fail(d, c, what, why);
}

/* An NCCL call's result on a non-blocking communicator: ncclInProgress
 * until its enqueue has completed, polled with the deadline. */
static void settle(tf_dist *d, tf_nccl *c, ncclResult_t r, const char *what) {
    const double t0 = now_s();
    while (r == ncclInProgress) {
        double el = now_s() - t0;
        if (d->timeout_s > 0 && el > d->timeout_s) timed_out(d, c, what);
        pause_poll(el);
        if (ncclCommGetAsyncError(c->comm, &r) != ncclSuccess) break;
    }
    if (r != ncclSuccess) fail(d, c, what, ncclGetErrorString(r));
}

extern "C" int tf_dist_nccl_init(tf_dist *d, int device, char *err, size_t n) {
    ncclUniqueId id;
    if (d->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
        snprintf(err, n, "NCCL: ncclGetUniqueId failed");
        return 1;
    }
    if (tf_dist_bcast(d, &id, sizeof id)) {
        snprintf(err, n, "NCCL: could not send the communicator's id to the ranks");
        return 1;
    }
    tf_nccl *c = (tf_nccl *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, n, "NCCL: out of host memory");
        return 1;
    }
    cudaSetDevice(device);
#if TF_NCCL_NONBLOCKING
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, d->size, id, d->rank, &cfg);
    if (r == ncclInProgress) settle(d, c, r, "ncclCommInitRank (joining the other ranks)");
    else if (r != ncclSuccess) c->comm = NULL;
#else
    ncclResult_t r = ncclCommInitRank(&c->comm, d->size, id, d->rank);
#endif
    if (r != ncclSuccess && r != ncclInProgress) {
        snprintf(err, n, "NCCL: ncclCommInitRank on device %d: %s", device,
                 ncclGetErrorString(r));
        free(c);
        return 1;
    }
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->reduced, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreate(&c->bwd_end) != cudaSuccess) {
        snprintf(err, n, "NCCL: could not create the communication stream and its events");
        ncclCommDestroy(c->comm);
        free(c);
        return 1;
    }
    c->poll = c->reduced;
    d->nccl = c;
    return 0;
}

extern "C" void tf_dist_nccl_destroy(tf_dist *d) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    if (!c) return;
    cudaStreamSynchronize(c->stream);
#if TF_NCCL_NONBLOCKING
    settle(d, c, ncclCommFinalize(c->comm), "ending the communicator");
#endif
    ncclCommDestroy(c->comm);
    cudaEventDestroy(c->ready);
    cudaEventDestroy(c->reduced);
    cudaEventDestroy(c->done);
    cudaEventDestroy(c->bwd_end);
    for (int i = 0; i < c->nev; i++) {
        cudaEventDestroy(c->t0[i]);
        cudaEventDestroy(c->t1[i]);
    }
    free(c->t0);
    free(c->t1);
    cudaStreamDestroy(c->stream);
    free(c);
    d->nccl = NULL;
}

/* a timing pair for each of the plan's buckets */
static void events_for(tf_dist *d, tf_nccl *c) {
    if (c->nev >= d->nbk) return;
    cudaEvent_t *a = (cudaEvent_t *)realloc(c->t0, (size_t)d->nbk * sizeof *a);
    if (a) c->t0 = a;
    cudaEvent_t *b = a ? (cudaEvent_t *)realloc(c->t1, (size_t)d->nbk * sizeof *b) : NULL;
    if (b) c->t1 = b;
    if (!a || !b) fail(d, c, "all-reduce of the gradients", "out of host memory for its events");
    for (; c->nev < d->nbk; c->nev++)
        if (cudaEventCreate(&c->t0[c->nev]) != cudaSuccess ||
            cudaEventCreate(&c->t1[c->nev]) != cudaSuccess)
            fail(d, c, "all-reduce of the gradients", "could not create its events");
}

extern "C" void tf_dist_nccl_issue(tf_dist *d, float *g, void *queue) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    events_for(d, c);
    const int i = d->next;
    const tf_dist_bucket *b = &d->bk[i];
    /* the fork: under capture this joins the stream to it */
    cudaEventRecord(c->ready, (cudaStream_t)queue);
    cudaStreamWaitEvent(c->stream, c->ready, 0);
    record_for_host(c->t0[i], c->stream);
    settle(d, c, ncclAllReduce(g + b->lo, g + b->lo, b->n, ncclFloat, ncclAvg, c->comm, c->stream),
           "all-reduce of the gradients");
    record_for_host(c->t1[i], c->stream);
    c->step_bytes += (double)b->n * sizeof(float);
    d->next++;
}

extern "C" void *tf_dist_nccl_queue(tf_dist *d) { return ((tf_nccl *)d->nccl)->stream; }

extern "C" void tf_dist_nccl_finish(tf_dist *d, void *queue) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    cudaStream_t main = (cudaStream_t)queue;
    const int graph = capturing(main);
    record_for_host(c->bwd_end, main);
    /* before the join: the stream's last captured work is what the
     * backend's stream waits for (else the capture ends unjoined) */
    if (graph) record_for_host(c->done, c->stream);
    /* the join: under capture the stream leaves it here */
    cudaEventRecord(c->reduced, c->stream);
    cudaStreamWaitEvent(main, c->reduced, 0);
    if (graph) { /* nothing ran: each replay does (tf_dist_nccl_replayed) */
        c->graph_nbk = d->next;
        c->graph_bytes = c->step_bytes;
        c->poll = c->done;
        c->timed = 0;
    } else {
        c->bytes += c->step_bytes;
        c->poll = c->reduced;
        c->timed = d->next;
    }
    c->step_bytes = 0;
    d->next = 0;
}

extern "C" void tf_dist_nccl_replayed(tf_dist *d) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    c->bytes += c->graph_bytes;
    c->poll = c->done;
    c->timed = c->graph_nbk;
}

extern "C" void tf_dist_nccl_wait(tf_dist *d) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    if (!c->timed) return;
    const double t0 = now_s();
    for (;;) {
        cudaError_t e = cudaEventQuery(c->poll);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) fail(d, c, "all-reduce of the gradients", cudaGetErrorString(e));
        ncclResult_t r = ncclSuccess;
        if (ncclCommGetAsyncError(c->comm, &r) == ncclSuccess && r != ncclSuccess &&
            r != ncclInProgress)
            fail(d, c, "all-reduce of the gradients", ncclGetErrorString(r));
        double el = now_s() - t0;
        if (d->timeout_s > 0 && el > d->timeout_s) timed_out(d, c, "all-reduce of the gradients");
        pause_poll(el);
    }
}

/* The last step's reductions, read after its wait: the device time of the
 * all-reduces (one stream: they do not overlap one another) and the part
 * after the backward's last kernel (exposed). */
extern "C" double tf_dist_nccl_take_ms(tf_dist *d, double *bytes, double *exposed) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    double ms = 0, x = 0;
    if (c->timed && cudaEventSynchronize(c->t1[c->timed - 1]) == cudaSuccess) {
        for (int i = 0; i < c->timed; i++) {
            float e = 0;
            if (cudaEventElapsedTime(&e, c->t0[i], c->t1[i]) == cudaSuccess) ms += e;
        }
        float e = 0;
        if (cudaEventElapsedTime(&e, c->bwd_end, c->t1[c->timed - 1]) == cudaSuccess && e > 0)
            x = e;
    }
    c->timed = 0;
    if (bytes) *bytes = c->bytes;
    if (exposed) *exposed = x;
    c->bytes = 0;
    return ms;
}
