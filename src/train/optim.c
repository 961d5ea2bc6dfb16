/* AdamW with fp16's loss scale, on the backend's ops. */
#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tf_optim_init(tf_optim *o, tf_plan *p) {
    *o = (tf_optim){.ex = &p->ex, .lr = p->cfg.learning_rate, .n = p->nparams};
    tf_loss_scaler_init(&o->scaler, p->cfg.precision == TF_PREC_FP16);
    o->ranges = calloc(p->ntensors, sizeof *o->ranges);
    if (!o->ranges) return 1;
    for (size_t i = 0; i < p->ntensors; i++) {
        const tf_param_info *q = &p->table[i];
        if (!q->trainable) continue;
        tf_range *last = o->nranges ? &o->ranges[o->nranges - 1] : NULL;
        if (last && last->off + last->n == q->offset)
            last->n += q->count;
        else
            o->ranges[o->nranges++] = (tf_range){q->offset, q->count};
    }
    return 0;
}

int tf_optim_alloc(tf_optim *o) {
    const tf_ops *ops = o->ex->ops;
    tf_backend *be = o->ex->be;
    const size_t bytes = o->n * sizeof(float);
    return ops->alloc(be, (void **)&o->m, bytes) || ops->alloc(be, (void **)&o->v, bytes) ||
           ops->alloc(be, (void **)&o->hyper, TF_HYPER_COUNT * sizeof(float)) ||
           (o->ex->at != TF_F32 && ops->alloc(be, &o->wh, o->n * tf_dtype_size(o->ex->at)));
}

void tf_optim_reset(tf_optim *o) {
    const tf_ops *ops = o->ex->ops;
    tf_backend *be = o->ex->be;
    const float h0[TF_HYPER_COUNT] = {[TF_HYPER_LOSS_SCALE] = 1.0f, [TF_HYPER_GRAD_MUL] = 1.0f};
    ops->upload(be, o->hyper, h0, sizeof h0);
    ops->zero(be, o->m, o->n * sizeof(float));
    ops->zero(be, o->v, o->n * sizeof(float));
    o->step = 0;
}

void tf_optim_refresh(tf_optim *o) {
    if (o->wh) tf_x_convert(o->ex, o->wh, o->ex->at, o->params, TF_F32, (long)o->n);
}

static void put(tf_optim *o, float *dst, const float *src, size_t n, float *pinned) {
    if (pinned) {
        memcpy(pinned, src, n * sizeof(float)); /* read by the device: set once a step */
        o->ex->ops->upload_async(o->ex->be, dst, pinned, n * sizeof(float));
    } else {
        o->ex->ops->upload(o->ex->be, dst, src, n * sizeof(float));
    }
}

void tf_optim_seed(tf_optim *o, float *pinned) {
    if (o->scaler.enabled) put(o, o->hyper + TF_HYPER_LOSS_SCALE, &o->scaler.scale, 1, pinned);
}

void tf_optim_prepare(tf_optim *o, float *pinned) {
    const double b1 = 0.9, b2 = 0.999;
    const long s = ++o->step;
    const float scale = o->scaler.scale;
    float h[TF_HYPER_COUNT] = {o->lr,
                               (float)b1,
                               (float)b2,
                               1e-8f,
                               0.01f,
                               (float)(1.0 - pow(b1, (double)s)),
                               (float)(1.0 - pow(b2, (double)s))};
    h[TF_HYPER_LOSS_SCALE] = scale;
    h[TF_HYPER_GRAD_MUL] = 1.0f / scale; /* exact: the scale is a power of two */
    h[TF_HYPER_NONFINITE] = 0.0f;
    put(o, o->hyper, h, TF_HYPER_COUNT, pinned);
}

void tf_optim_issue(tf_optim *o) {
    /* fp16: a step whose gradients overflowed is skipped (the flag, zeroed
     * by tf_optim_prepare, is read by AdamW and by the host after the step) */
    if (o->scaler.enabled)
        tf_x_check_finite(o->ex, o->hyper + TF_HYPER_NONFINITE, o->grads, (long)o->n);
    /* the weight copy of each range with it (the untrained ones' copies, set
     * by tf_optim_refresh, do not change) */
    for (int i = 0; i < o->nranges; i++) {
        const tf_range *r = &o->ranges[i];
        void *wh = o->wh ? tf_at(o->ex, o->wh, (long)r->off) : NULL;
        tf_x_adamw(o->ex, o->params + r->off, wh, o->grads + r->off, o->m + r->off,
                   o->v + r->off, (long)r->n, o->hyper);
    }
}

void tf_optim_end(tf_optim *o, float nonfinite, tf_step_stats *st) {
    const float scale = o->scaler.scale;
    const int skipped = tf_loss_scaler_update(&o->scaler, nonfinite != 0.0f);
    if (skipped) o->step--;
    if (st) {
        st->skipped = skipped;
        st->loss_scale = scale;
    }
}

void tf_optim_get(const tf_optim *o, float *m, float *v, long *step) {
    if (m) o->ex->ops->download(o->ex->be, m, o->m, o->n * sizeof(float));
    if (v) o->ex->ops->download(o->ex->be, v, o->v, o->n * sizeof(float));
    if (step) *step = o->step;
}

void tf_optim_set(tf_optim *o, const float *m, const float *v, long step) {
    if (m) o->ex->ops->upload(o->ex->be, o->m, m, o->n * sizeof(float));
    if (v) o->ex->ops->upload(o->ex->be, o->v, v, o->n * sizeof(float));
    o->step = step;
}

void tf_optim_free(tf_optim *o) {
    void *bufs[] = {o->m, o->v, o->hyper, o->wh};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) o->ex->ops->free(o->ex->be, bufs[i]);
    free(o->ranges);
    memset(o, 0, sizeof *o);
}
