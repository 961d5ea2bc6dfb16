/* The gradient buckets against the weight-gradient lane, on two MPI ranks
 * (tests/cli/test_mpi.sh runs `mpirun -np 2 dist_lane`).
 *
 * The CPU backend is wrapped with a lane that runs each weight-gradient GEMM
 * as late as the contract allows, only when a wait covers it
 * (tests/unit/late_lane.h, as in test_lane). A bucket all-reduced before the
 * lane's GEMMs that write it have run misses their part on its rank, or has
 * it added under the reduction, so 3 steps in 1 KiB buckets must give the weights of 3 steps
 * with one all-reduce after the backward, bit for bit (two ranks: each sum is
 * a + b either way, bucket.c). With the lane's waits before each bucket
 * (tf_x_grads_final) left out, they were 1.8e-3 apart.
 * Prints "PASS ..." on rank 0 and exits 0, or one line and 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "dist/dist.h"
#include "tinyfold.h"
#include "train/trainer.h"
#include "../unit/late_lane.h"

/* 3 steps on this rank's half of a batch of 2, buckets of `kb` KiB; the
 * weights after them into w. Returns the buckets a step. */
static int train(tf_dist *d, int kb, float *w, long *lane_gemms) {
    tf_config c;
    tf_config_default(&c);
    c.batch = 1; /* of 2 */
    c.seq_len = 7;
    c.n_seqs = 3;
    c.n_blocks = 3;
    c.msa_dim = 16;
    c.pair_dim = 12;
    c.backend = TF_BACKEND_CPU;
    c.threads = 1;
    c.warmup_steps = 0;
    tf_backend_opts bo = {.threads = c.threads, .kernel_level = (int)c.impl};
    tf_backend_kind kind = TF_BACKEND_CPU;
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_caps caps;
    char err[512];
    if (tf_backend_create(&kind, &bo, &be, &ops, &caps, err, sizeof err)) {
        fprintf(stderr, "dist_lane: %s\n", err);
        exit(1);
    }
    ops = late_lane_wrap(ops, &caps);
    tf_trainer *t;
    if (tf_trainer_create_on(&t, &c, be, ops, &caps, err, sizeof err) != TF_OK) {
        fprintf(stderr, "dist_lane: %s\n", err);
        exit(1);
    }
    d->bucket_bytes = kb * 1024.0;
    if (tf_trainer_set_dist(t, d)) {
        fprintf(stderr, "dist_lane: no memory for the buckets\n");
        exit(1);
    }
    late_lane_reset(-1);
    for (long s = 0; s < 3; s++) {
        tf_step_stats st;
        if (tf_trainer_step(t, s, &st) != TF_OK) {
            fprintf(stderr, "dist_lane: step %ld failed\n", s);
            exit(1);
        }
    }
    tf_trainer_get_params(t, w);
    tf_trainer_destroy(t);
    *lane_gemms = L.nq;
    return d->nbk;
}

int main(void) {
    tf_dist d;
    char err[256];
    if (tf_dist_init(&d, 60, err, sizeof err) || d.size != 2) {
        fprintf(stderr, "dist_lane: run it as 2 MPI ranks (%s)\n", err[0] ? err : "mpirun -np 2");
        return 1;
    }
    tf_config c;
    tf_config_default(&c);
    c.seq_len = 7, c.n_seqs = 3, c.n_blocks = 3, c.msa_dim = 16, c.pair_dim = 12;
    const size_t n = tf_param_count_floats(&c);
    float *one = malloc(n * sizeof *one), *bk = malloc(n * sizeof *bk);
    if (!one || !bk) return 1;
    long g1 = 0, g2 = 0;
    const int n1 = train(&d, 0, one, &g1);
    const int n2 = train(&d, 1, bk, &g2);
    const long left = L.left_at_sync;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = one[i] > bk[i] ? one[i] - bk[i] : bk[i] - one[i];
        if (e > worst) worst = e;
    }
    int bad = n1 != 1 || n2 < 2 || g2 == 0 || left != 0 || memcmp(one, bk, n * sizeof *one);
    bad = tf_dist_max_int(&d, bad);
    if (d.rank == 0) {
        if (bad)
            printf("FAIL: buckets %d and %d a step, %ld lane GEMMs, %ld left at a sync, weights "
                   "%.3g apart (expected 1 and > 1 buckets, GEMMs on the lane, none left, 0)\n",
                   n1, n2, g2, left, worst);
        else
            printf("PASS: %d buckets a step with %ld GEMMs on a late lane = one all-reduce, bit "
                   "for bit\n", n2, g2);
    }
    free(one);
    free(bk);
    tf_dist_finalize(&d);
    return bad;
}
