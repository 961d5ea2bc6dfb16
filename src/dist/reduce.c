/* The gradient reduction the trainer calls once a step: MPI on host memory,
 * NCCL on device memory (dist_nccl.c, in builds with NCCL). */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

void tf_dist_reduce_grads(tf_dist *d, float *g, size_t n, struct tf_backend *be) {
    if (!be) {
        tf_dist_mean_host(d, g, n);
        return;
    }
#ifdef TF_HAVE_NCCL
    if (d->nccl) {
        tf_dist_nccl_mean(d, g, n, be);
        return;
    }
#endif
    /* the CLI refuses a multi-rank GPU run without NCCL before the first step */
    fprintf(stderr, "tinyfold: internal error: device gradients and no NCCL\n");
    abort();
}

double tf_dist_take_comm_ms(tf_dist *d, double *bytes) {
    double ms = d->comm_ms, b = d->comm_bytes;
#ifdef TF_HAVE_NCCL
    if (d->nccl) {
        double nb = 0;
        ms += tf_dist_nccl_take_ms(d, &nb);
        b += nb;
    }
#endif
    if (bytes) *bytes = b;
    d->comm_ms = 0, d->comm_bytes = 0;
    return ms;
}
