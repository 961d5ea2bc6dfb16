/* The build without MPI: one rank. A launch of several (mpirun -np 2 of this
 * binary) is refused, never run as independent copies of one another. */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

int tf_dist_init(tf_dist *d, double timeout_s, char *err, size_t n) {
    *d = (tf_dist){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1,
                   .timeout_s = timeout_s};
    char var[64];
    int p = tf_dist_launch_size(var, sizeof var);
    d->launched = var[0] != 0;
    if (p > 1) {
        snprintf(err, n,
                 "launched as %d ranks (%s) but this build has no MPI (CMake TF_MPI found "
                 "none): install MPI and rebuild, or run one process",
                 p, var);
        return 2;
    }
    return 0;
}

void tf_dist_finalize(tf_dist *d) { tf_dist_plan_buckets(d, NULL, 0, 0); }
void tf_dist_abort(tf_dist *d, int code) {
    (void)d;
    exit(code);
}
int tf_dist_same_u64(tf_dist *d, uint64_t v) {
    (void)d, (void)v;
    return 1;
}
int tf_dist_max_int(tf_dist *d, int v) {
    (void)d;
    return v;
}
int tf_dist_devices_distinct(tf_dist *d, int device) {
    (void)d, (void)device;
    return 1;
}
/* one rank: the sum is the gradient itself */
void tf_dist_mpi_issue(tf_dist *d, float *g) {
    (void)g;
    d->next++;
}
void tf_dist_mpi_progress(tf_dist *d) { (void)d; }
void tf_dist_mpi_finish(tf_dist *d, float *g, size_t n) {
    (void)g, (void)n;
    d->next = 0;
}
double tf_dist_mean_scalar(tf_dist *d, double v) {
    (void)d;
    return v;
}
int tf_dist_bcast(tf_dist *d, void *buf, size_t n) {
    (void)d, (void)buf, (void)n;
    return 0;
}
