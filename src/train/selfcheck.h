/* `tinyfold validate`'s run (selfcheck.c): a tiny problem trained a few
 * steps, which must give finite losses, and its step 0 at each level, whose
 * losses must agree; a backend of the registry started and described. The
 * caller prints: it hears of each step and level through hooks. */
#ifndef TF_TRAIN_SELFCHECK_H
#define TF_TRAIN_SELFCHECK_H

#include <stddef.h>

#include "backend/registry.h"
#include "tinyfold.h"

/* The levels compute the same math in different orders: at step 0 (the
 * initial weights) their losses differ by fp32 rounding, ~1e-6 relative at
 * this size. 1e-4 leaves room for that and still catches any real mistake,
 * which moves the loss by O(1). */
#define TF_SELFCHECK_LEVEL_RTOL 1e-4

typedef struct {
    void *ctx;
    void (*created)(void *ctx, const tf_trainer *t);              /* NULL: none */
    void (*step)(void *ctx, int i, const tf_step_stats *st);      /* a finite step */
    void (*level)(void *ctx, tf_impl impl, float loss);           /* a level's step 0 */
} tf_selfcheck_hooks;

typedef struct {
    float loss0;        /* step 0's loss */
    int failed;         /* the step that failed or whose loss is not finite, -1: none */
    tf_step_stats st;   /* its figures */
    tf_status step_status;
    tf_impl level;      /* the level whose step 0 failed */
    int level_stepped;  /* its trainer was created: err words its step's failure */
    double worst;       /* the levels' largest relative difference from loss0 */
} tf_selfcheck;

/* The tiny problem's shape and steps, into c. */
void tf_selfcheck_problem(tf_config *c);
/* One line from a backend of the registry: created, described, destroyed;
 * 0, or 1 with one line in err. */
int tf_selfcheck_describe(const tf_backend_entry *e, const tf_backend_opts *bo, char *desc,
                          size_t n, char *err, size_t errlen);
/* Steps 0 .. c->num_steps - 1 of a trainer for c until the first that fails
 * or gives a non-finite loss: TF_OK, TF_ERR_NONFINITE with r->failed, or the
 * status of a trainer that was not created (r->failed -1, one line in err). */
tf_status tf_selfcheck_steps(const tf_config *c, const tf_selfcheck_hooks *h, tf_selfcheck *r,
                             char *err, size_t errlen);
/* Step 0 at each level against r->loss0 (r->worst): TF_OK, or the status
 * of the level r->level that failed, with one line in err (not naming the
 * level). */
tf_status tf_selfcheck_levels(const tf_config *c, const tf_selfcheck_hooks *h, tf_selfcheck *r,
                              char *err, size_t errlen);

#endif
