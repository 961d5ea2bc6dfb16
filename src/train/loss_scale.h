/* Dynamic loss scaling for fp16 training, with PyTorch GradScaler's
 * defaults: the loss's gradient is multiplied by `scale` so that small
 * gradients survive fp16's range (the smallest normal is 2^-14), and the
 * gradients are divided by it again before AdamW. A step whose gradients hold
 * an inf or a NaN is skipped (no parameter or moment changes) and the scale
 * halves; after `interval` clean steps in a row it doubles. */
#ifndef TF_TRAIN_LOSS_SCALE_H
#define TF_TRAIN_LOSS_SCALE_H

#define TF_LOSS_SCALE_INIT 65536.0f  /* 2^16 */
#define TF_LOSS_SCALE_GROWTH 2.0f
#define TF_LOSS_SCALE_BACKOFF 0.5f
#define TF_LOSS_SCALE_INTERVAL 2000

typedef struct {
    int enabled;      /* 0: scale stays 1 and nothing is ever skipped */
    float scale;
    long clean_steps; /* clean steps since the scale last changed */
    long skipped;     /* steps skipped so far */
} tf_loss_scaler;

/* enabled: scale TF_LOSS_SCALE_INIT; else 1 */
void tf_loss_scaler_init(tf_loss_scaler *s, int enabled);
/* After a step whose gradients were (nonfinite != 0) or were not finite:
 * updates the scale; returns 1 when the step was skipped. */
int tf_loss_scaler_update(tf_loss_scaler *s, int nonfinite);

#endif
