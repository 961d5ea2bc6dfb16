#include "train/loss_scale.h"

void tf_loss_scaler_init(tf_loss_scaler *s, int enabled) {
    s->enabled = enabled;
    s->scale = enabled ? TF_LOSS_SCALE_INIT : 1.0f;
    s->clean_steps = 0;
    s->skipped = 0;
}

int tf_loss_scaler_update(tf_loss_scaler *s, int nonfinite) {
    if (!s->enabled) return 0;
    if (nonfinite) {
        s->scale *= TF_LOSS_SCALE_BACKOFF;
        s->clean_steps = 0;
        s->skipped++;
        return 1;
    }
    if (++s->clean_steps == TF_LOSS_SCALE_INTERVAL) {
        s->scale *= TF_LOSS_SCALE_GROWTH;
        s->clean_steps = 0;
    }
    return 0;
}
