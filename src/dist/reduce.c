/* The step's gradient reduction in buckets: MPI on host memory, NCCL on
 * device memory (dist_nccl.cu, in builds with NCCL). */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

static void no_nccl(void) {
    /* the CLI refuses a multi-rank GPU run without NCCL before the first step */
    fprintf(stderr, "tinyfold: internal error: device gradients and no NCCL\n");
    abort();
}

void tf_dist_issue(tf_dist *d, float *g, void *queue) {
    if (d->next >= d->nbk) return;
    if (!queue) {
        tf_dist_mpi_issue(d, g);
        return;
    }
#ifdef TF_HAVE_NCCL
    if (d->nccl) {
        tf_dist_nccl_issue(d, g, queue);
        return;
    }
#endif
    no_nccl();
}

void tf_dist_progress(tf_dist *d) {
    if (!d->nccl) tf_dist_mpi_progress(d);
}

void tf_dist_reduce_grads(tf_dist *d, float *g, size_t n, void *queue) {
    if (d->nbk == 0) { /* no plan: one all-reduce */
        const double keep = d->bucket_bytes;
        size_t hi = 0;
        d->bucket_bytes = 0;
        if (tf_dist_plan_buckets(d, &hi, 1, n)) {
            fprintf(stderr, "tinyfold: rank %d of %d: out of host memory for the buckets\n",
                    d->rank, d->size);
            tf_dist_abort(d, 1);
        }
        d->bucket_bytes = keep;
    }
    while (d->next < d->nbk) tf_dist_issue(d, g, queue);
    if (!queue) {
        tf_dist_mpi_finish(d, g, n);
        return;
    }
#ifdef TF_HAVE_NCCL
    if (d->nccl) {
        tf_dist_nccl_finish(d, queue);
        return;
    }
#endif
    no_nccl();
}

void tf_dist_wait_device(tf_dist *d) {
#ifdef TF_HAVE_NCCL
    if (d->nccl) tf_dist_nccl_wait(d);
#else
    (void)d;
#endif
}

void *tf_dist_queue(tf_dist *d) {
#ifdef TF_HAVE_NCCL
    if (d->nccl) return tf_dist_nccl_queue(d);
#else
    (void)d;
#endif
    return NULL;
}

void tf_dist_replayed(tf_dist *d) {
#ifdef TF_HAVE_NCCL
    if (d->nccl) tf_dist_nccl_replayed(d);
#else
    (void)d;
#endif
}

double tf_dist_take_comm_ms(tf_dist *d, double *bytes, double *exposed) {
    double ms = d->comm_ms, b = d->comm_bytes, x = d->exposed_ms;
#ifdef TF_HAVE_NCCL
    if (d->nccl) {
        double nb = 0, nx = 0;
        ms += tf_dist_nccl_take_ms(d, &nb, &nx);
        b += nb;
        x += nx;
    }
#endif
    if (bytes) *bytes = b;
    if (exposed) *exposed = x;
    d->comm_ms = 0, d->comm_bytes = 0, d->exposed_ms = 0;
    return ms;
}
