/* The trainer's side of data parallel (data_parallel.c; the ranks and their
 * collectives are dist/dist.h). Each rank trains on its slice of the global
 * batch and its gradients are averaged across the ranks before the
 * optimizer, so every rank makes the same update: in buckets issued at the
 * end of the backward stages that make them final, or in one all-reduce
 * after the backward. With --graph and NCCL the backward phase itself
 * issues the reduction, so that its captured graph holds the all-reduces
 * and their join. */
#ifndef TF_TRAIN_DATA_PARALLEL_H
#define TF_TRAIN_DATA_PARALLEL_H

#include "dist/dist.h"
#include "train/plan.h"

typedef struct {
    tf_dist *dist; /* NULL: one process */
    tf_exec *ex;   /* the plan's: its stage-end and op hooks */
    const tf_ops *ops;
    tf_backend *be; /* the gradients' backend; NULL where they are host memory */
    float *grads;   /* the owner's */
    size_t n;
    int in_backward; /* the backward phase issues the reduction */
} tf_dp;

/* d for the gradients of p: the buckets from what each backward stage writes
 * (p->grad_hi), issued from the stage ends. 0, or 1 when the buckets' host
 * memory is missing. */
int tf_dp_attach(tf_dp *x, tf_dist *d, tf_plan *p, float *grads);
/* Ranks in the job (1 without data parallel). */
int tf_dp_ranks(const tf_dp *x);

/* The backward phase's part (in_backward): the buckets not yet issued, then
 * the join. */
void tf_dp_reduce_in_backward(tf_dp *x, tf_prof *prof);
/* After the backward phase was issued (in_backward): a replayed graph's
 * reduction is noted (counted, timed), and where the host waits for the
 * phase (wait) it first polls the reduction with the deadline: a collective
 * that never ends would hold the backend's wait. */
void tf_dp_after_backward(tf_dp *x, int replayed, int wait);
/* Between the backward and the optimizer (unless in_backward): the
 * reduction, waited for with the deadline where the phase is (wait). */
void tf_dp_reduce(tf_dp *x, tf_prof *prof, int wait);
/* Before the host waits for the backend: polls the reductions with the
 * deadline (NCCL). */
void tf_dp_wait(tf_dp *x);
/* The loss every rank reports (the mean), so that they all stop alike;
 * TF_ERR_NONFINITE when it is not finite. */
tf_status tf_dp_mean_loss(tf_dp *x, float *loss);
/* The step's time in collectives into st, and its spans to the profiler. */
void tf_dp_stats(tf_dp *x, tf_prof *prof, tf_step_stats *st);

#endif
