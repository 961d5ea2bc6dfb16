/* `tinyfold validate`'s run (selfcheck.h). */
#include "train/selfcheck.h"

#include <math.h>
#include <stdio.h>

void tf_selfcheck_problem(tf_config *c) {
    c->batch = 1;
    c->seq_len = 8;
    c->n_seqs = 4;
    c->n_blocks = 1;
    c->msa_dim = 16;
    c->pair_dim = 32;
    c->warmup_steps = 0;
    c->num_steps = 3;
}

int tf_selfcheck_describe(const tf_backend_entry *e, const tf_backend_opts *bo, char *desc,
                          size_t n, char *err, size_t errlen) {
    tf_backend *be = NULL;
    const tf_ops *ops = NULL;
    if (e->create(&be, &ops, bo, err, errlen) != 0)
        return 1;
    e->describe(be, desc, n);
    e->destroy(be);
    return 0;
}

tf_status tf_selfcheck_steps(const tf_config *c, const tf_selfcheck_hooks *h, tf_selfcheck *r,
                             char *err, size_t errlen) {
    r->loss0 = NAN;
    r->failed = -1;
    tf_trainer *t = NULL;
    tf_status s = tf_trainer_create(&t, c, err, errlen);
    if (s != TF_OK)
        return s;
    if (h->created)
        h->created(h->ctx, t);
    for (int i = 0; i < c->num_steps; i++) {
        tf_step_stats st = {0};
        s = tf_trainer_step(t, i, &st);
        if (s != TF_OK || !isfinite(st.loss)) {
            tf_trainer_destroy(t);
            r->failed = i;
            r->st = st;
            r->step_status = s;
            return TF_ERR_NONFINITE;
        }
        if (i == 0)
            r->loss0 = st.loss;
        h->step(h->ctx, i, &st);
    }
    tf_trainer_destroy(t);
    return TF_OK;
}

/* Step 0's loss at a level; a status, its message in err. */
static tf_status level_loss(const tf_config *base, tf_impl impl, float *loss, char *err,
                            size_t errlen, int *stepped) {
    tf_config c = *base;
    c.impl = impl;
    c.fusion = tf_fusion_for_impl(impl);
    tf_trainer *t = NULL;
    tf_status s = tf_trainer_create(&t, &c, err, errlen);
    if (s != TF_OK)
        return s;
    tf_step_stats st = {0};
    s = tf_trainer_step(t, 0, &st);
    *loss = st.loss;
    *stepped = 1;
    tf_trainer_destroy(t);
    if (s != TF_OK)
        snprintf(err, errlen, "step 0 failed (status %d, loss %g)", (int)s, (double)st.loss);
    return s;
}

tf_status tf_selfcheck_levels(const tf_config *c, const tf_selfcheck_hooks *h, tf_selfcheck *r,
                              char *err, size_t errlen) {
    r->worst = 0;
    for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
        float l = NAN;
        int stepped = 0;
        tf_status s = level_loss(c, (tf_impl)lv, &l, err, errlen, &stepped);
        if (s != TF_OK) {
            r->level = (tf_impl)lv;
            r->level_stepped = stepped;
            return s;
        }
        double rel = fabs((double)l - r->loss0) / fmax(fabs((double)r->loss0), 1e-30);
        r->worst = fmax(r->worst, rel);
        h->level(h->ctx, (tf_impl)lv, l);
    }
    return TF_OK;
}
