/* The optimizer (optim.c): AdamW over the trainable ranges of the one
 * parameter buffer, with fp16's dynamic loss scale (loss_scale.h). Its
 * hyper-parameters live in backend memory (ops.h TF_HYPER_*), written before
 * each update, so a captured graph reads the current bias corrections, the
 * loss scale and the gradients' non-finite flag. After each update the
 * weights' copy in the activations' type, which the GEMMs read, is written
 * again. */
#ifndef TF_TRAIN_OPTIM_H
#define TF_TRAIN_OPTIM_H

#include "train/loss_scale.h"
#include "train/plan.h"

typedef struct {
    size_t off, n;
} tf_range;

typedef struct {
    tf_exec *ex; /* the plan's: its ops, backend and type */
    float lr;
    size_t n;
    float *params, *grads; /* the owner's */
    float *m, *v;          /* the moments */
    float *hyper;          /* TF_HYPER_COUNT floats */
    void *wh;              /* the weights in ex->at (NULL in fp32) */
    tf_range *ranges;      /* trainable contiguous ranges (pair_norm_outer gets no gradient) */
    int nranges;
    tf_loss_scaler scaler;
    long step; /* updates made: a step skipped by the loss scaler makes none */
} tf_optim;

/* For p's parameters (0, or 1 without the host memory). No backend memory
 * yet. */
int tf_optim_init(tf_optim *o, tf_plan *p);
/* The moments, the hyper-parameters and the weights' copy on the backend
 * (0, or 1 without the memory). */
int tf_optim_alloc(tf_optim *o);
/* Moments zero, no update made, the hyper-parameters neutral. */
void tf_optim_reset(tf_optim *o);
/* The weights' copy, after the parameters changed. */
void tf_optim_refresh(tf_optim *o);

/* Before a step: the loss scale its backward seeds with (fp16). pinned:
 * page-locked host memory for a queued upload, NULL to upload at once. */
void tf_optim_seed(tf_optim *o, float *pinned);
/* After the backward: counts the update and writes its hyper-parameters
 * (pinned as above: TF_HYPER_COUNT floats). */
void tf_optim_prepare(tf_optim *o, float *pinned);
/* The update: fp16's check of the gradients, AdamW, the weights' copy. */
void tf_optim_issue(tf_optim *o);
/* After the step, with the gradients' non-finite flag read back: the loss
 * scale's verdict (a skipped step made no update), into st when not NULL. */
void tf_optim_end(tf_optim *o, float nonfinite, tf_step_stats *st);

/* The moments and the update count to or from the host (NULL: left out). */
void tf_optim_get(const tf_optim *o, float *m, float *v, long *step);
void tf_optim_set(tf_optim *o, const float *m, const float *v, long step);

void tf_optim_free(tf_optim *o);

#endif
