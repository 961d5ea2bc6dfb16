/* What the files of a model under training are written from and read into
 * (checkpoint.h, gradfile.h): its state, through the holder's functions
 * (the trainer's: train/trainer_io.h). Parameters, moments and gradients
 * are host copies of tf_param_count_floats(c) floats; the loss scaler is
 * fp16's. */
#ifndef TF_IO_HOLDER_H
#define TF_IO_HOLDER_H

#include "tinyfold.h"

typedef struct {
    const tf_config *c;
    void *ctx;
    void (*get_params)(void *ctx, float *p);
    void (*get_adam)(void *ctx, float *m, float *v, long *step);
    void (*get_loss_scale)(void *ctx, float *scale, long *clean_steps, long *skipped);
    void (*get_grads)(void *ctx, float *g);
    void (*set_params)(void *ctx, const float *p);
    void (*set_adam)(void *ctx, const float *m, const float *v, long step);
    void (*set_loss_scale)(void *ctx, float scale, long clean_steps, long skipped);
} tf_io_holder;

#endif
