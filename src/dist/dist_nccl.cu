/* The CUDA backend's gradient reduction through NCCL: every NCCL call of
 * tinyfold is in this file, so that RCCL on HIP takes the same code through
 * the portability header (cuda* names mapped to hip*, nccl.h to rccl.h).
 *
 * One communicator over the job's ranks (its id broadcast over MPI), a
 * stream of its own: the all-reduce waits for the backend's stream at the end
 * of the backward (an event), the backend's stream waits for the all-reduce
 * before the optimizer (another), and the host does not wait at all.
 * ncclAvg: the sum then 1/P, the mean the CPU path computes too.
 *
 * Not yet: buckets issued as each module's weight gradients are ready (the
 * wgrad lane's ends), overlapping the rest of the backward; today it is one
 * all-reduce of the one gradient buffer after the backward. NCCL calls block
 * without a deadline (--dist-timeout covers MPI's collectives only). */
#include <cuda_runtime.h>
#if defined(TF_HAVE_HIP)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_common.h"
#include "dist/dist.h"

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t grads_ready, reduced, t0, t1;
    int timed; /* t0, t1 hold a reduction not yet read */
    double bytes;
} tf_nccl;

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
    ncclResult_t r = ncclCommInitRank(&c->comm, d->size, id, d->rank);
    if (r != ncclSuccess) {
        snprintf(err, n, "NCCL: ncclCommInitRank on device %d: %s", device,
                 ncclGetErrorString(r));
        free(c);
        return 1;
    }
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->grads_ready, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->reduced, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreate(&c->t0) != cudaSuccess || cudaEventCreate(&c->t1) != cudaSuccess) {
        snprintf(err, n, "NCCL: could not create the communication stream and its events");
        ncclCommDestroy(c->comm);
        free(c);
        return 1;
    }
    d->nccl = c;
    return 0;
}

extern "C" void tf_dist_nccl_destroy(tf_dist *d) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    ncclCommDestroy(c->comm);
    cudaEventDestroy(c->grads_ready);
    cudaEventDestroy(c->reduced);
    cudaEventDestroy(c->t0);
    cudaEventDestroy(c->t1);
    cudaStreamDestroy(c->stream);
    free(c);
    d->nccl = NULL;
}

extern "C" void tf_dist_nccl_mean(tf_dist *d, float *g, size_t n, struct tf_backend *be) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    cudaEventRecord(c->grads_ready, be->stream);
    cudaStreamWaitEvent(c->stream, c->grads_ready, 0);
    cudaEventRecord(c->t0, c->stream);
    ncclResult_t r = ncclAllReduce(g, g, n, ncclFloat, ncclAvg, c->comm, c->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "tinyfold: rank %d of %d: NCCL all-reduce of the gradients: %s\n",
                d->rank, d->size, ncclGetErrorString(r));
        tf_dist_abort(d, 1);
    }
    cudaEventRecord(c->t1, c->stream);
    cudaEventRecord(c->reduced, c->stream);
    cudaStreamWaitEvent(be->stream, c->reduced, 0);
    c->timed = 1;
    c->bytes += (double)n * sizeof(float);
}

/* The device time of the last reduction (read after the step's wait). */
extern "C" double tf_dist_nccl_take_ms(tf_dist *d, double *bytes) {
    tf_nccl *c = (tf_nccl *)d->nccl;
    float ms = 0;
    if (c->timed && cudaEventSynchronize(c->t1) == cudaSuccess)
        cudaEventElapsedTime(&ms, c->t0, c->t1);
    c->timed = 0;
    if (bytes) *bytes = c->bytes;
    c->bytes = 0;
    return ms;
}
