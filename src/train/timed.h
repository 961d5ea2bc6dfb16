/* A trainer's steps timed for a benchmark (timed.c): warm-up steps, then
 * timed ones, and the median of the timed steps' times. The caller shows
 * the progress through a hook and words a failure. */
#ifndef TF_TRAIN_TIMED_H
#define TF_TRAIN_TIMED_H

#include "tinyfold.h"

typedef struct {
    double median_ms; /* the timed steps' median step_ms (TF_OK) */
    int failed;       /* the failed step (0-based, warm-up included), -1: none */
    tf_step_stats st; /* the failed step's figures */
} tf_timed;

/* Steps 0 .. warmup + steps - 1 of t (steps >= 1), before(ctx, i) ahead of
 * step i (NULL: none), until the last or the first failure: TF_OK with
 * r->median_ms, the failed step's status with r->failed and r->st, or
 * TF_ERR_NOMEM (no step run, r->failed -1) when the times find no room. */
tf_status tf_timed_steps(tf_trainer *t, int warmup, int steps, void (*before)(void *ctx, int i),
                         void *ctx, tf_timed *r);

#endif
