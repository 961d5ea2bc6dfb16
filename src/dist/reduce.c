/* The gradient reduction the trainer calls once a step: MPI on host memory,
 * NCCL on device memory (dist_nccl.c, in builds with NCCL). */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

#ifdef TF_HAVE_NCCL
void tf_dist_nccl_mean(tf_dist *d, float *g, size_t n, struct tf_backend *be);
#endif

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
