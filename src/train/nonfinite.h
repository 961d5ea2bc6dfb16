/* After a step whose loss was not finite: what the trainer can check about
 * why (nonfinite.c), for a message that names the cause found. */
#ifndef TF_TRAIN_NONFINITE_H
#define TF_TRAIN_NONFINITE_H

#include <stddef.h>

#include "tinyfold.h"

typedef struct {
    int held;            /* the weights and the batch are those the failing forward read */
    long input_bad;      /* values of the batch (pair features, targets) not finite */
    const char *input_what; /* the first one's tensor: "pair features", "target distances" */
    int input_sample;    /* and its sample in the batch */
    double pair_max;     /* the largest |pair feature| of the batch (finite ones) */
    size_t weights_bad;  /* held: weights not finite */
    size_t weights;      /* of this many */
    char weights_tensor[96]; /* the first tensor holding one */
    int fp32_checked;    /* held, half precision: the forward again in fp32 */
    float fp32_loss;     /* its loss */
} tf_nonfinite_why;

/* Checks the last step's batch, and where the trainer held them, its
 * weights and (bf16, fp16) the same forward in fp32 on a second trainer
 * (skipped when that cannot be created). */
void tf_nonfinite_explain(tf_trainer *t, tf_nonfinite_why *w);

/* The finding as the end of a message (no advice the finding does not
 * support): first_update says whether the run had made an update before the
 * step (else the weights are the initial or loaded ones, named by
 * weights_src), step the global step. */
void tf_nonfinite_describe(const tf_nonfinite_why *w, tf_precision p, int first_update,
                           const char *weights_src, long step, char *buf, size_t n);

#endif
