/* The trainer's plan (plan.c): the model laid out on a backend and composed
 * for it, and the activation arena sized by running the step's forward and
 * backward once with planning on (no op executes, pointers are offsets). The
 * trainer runs the plan it was sized by, so the figure cannot disagree with
 * the code; tf_trainer_plan (tinyfold.h) is the plan alone. */
#ifndef TF_TRAIN_PLAN_H
#define TF_TRAIN_PLAN_H

#include "backend/backend.h"
#include "model/model.h"

typedef struct {
    tf_config cfg; /* cfg.batch: this rank's samples */
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_caps caps; /* what the backend prefers and provides */
    tf_dtype at;          /* the activations' type (tinyfold.h tf_precision) */
    tf_param_info *table; /* the parameters, in the one buffer's order */
    size_t ntensors, nparams;
    tf_model M; /* offsets and activation records; its buffers are the owner's */
    tf_exec ex;
    tf_arena arena; /* its memory is the owner's */
    /* what each backward stage writes into the gradients (exec.h grad_hi,
     * recorded while planning): the data parallel buckets follow from it
     * (NULL: one bucket) */
    size_t *grad_hi;
    int nstages;
    /* bytes on the backend: the parameters (each of params, grads and the
     * two moments), their copy in the activations' type, the arena, and the
     * batch's inputs and outputs */
    size_t param_bytes, half_bytes, arena_bytes, batch_bytes;
} tf_plan;

/* Validates c, creates the backend it names and builds the plan on it. */
tf_status tf_plan_open(tf_plan *p, const tf_config *c, char *err, size_t errlen);
/* The plan of c (not validated again) on be, which p owns from here on,
 * also on failure. */
tf_status tf_plan_build(tf_plan *p, const tf_config *c, tf_backend *be, const tf_ops *ops,
                        const tf_backend_caps *caps, char *err, size_t errlen);
/* What a trainer of this plan holds on its backend. */
size_t tf_plan_need(const tf_plan *p);
/* After tf_plan_open or tf_plan_build, whatever they returned: the host
 * tables, and the backend (its buffers freed by the owner before). */
void tf_plan_close(tf_plan *p);

#endif
