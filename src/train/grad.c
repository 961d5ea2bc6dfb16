/* One batch through a checkpoint's model, its gradients written (grad.h). */
#include "train/grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/limits.h"
#include "io/checkpoint.h"
#include "io/text_quote.h"
#include "train/hostmem.h"
#include "train/trainer_io.h"

tf_status tf_grad_configure(tf_grad *g, const tf_grad_opts *o, char *err, size_t errlen) {
    char why[2 * 4096];
    memset(g, 0, sizeof *g);
    g->o = *o;
    tf_config *c = &g->c;
    long gs = 0;
    if (tf_checkpoint_peek_config(o->load_path, c, &gs, why, sizeof why) != TF_OK) {
        snprintf(err, errlen, "--load: %s", why);
        return TF_ERR_USAGE;
    }
    /* The model is the checkpoint's; how to compute it is the command line's. */
    c->impl = o->cfg.impl;
    c->fusion = o->cfg.fusion;
    c->backend = o->cfg.backend;
    c->device = o->cfg.device;
    c->threads = o->cfg.threads;
    c->precision = o->cfg.precision;
    memcpy(c->gpu_plan, o->cfg.gpu_plan, sizeof c->gpu_plan);
    c->graph = 0;

    if (tf_datafile_open(o->data_path, &g->d, why, sizeof why) != TF_OK) {
        snprintf(err, errlen, "--data: %s", why);
        return TF_ERR_USAGE;
    }
    int count = tf_datafile_count(g->d);
    c->seq_len = tf_datafile_N(g->d);
    c->n_seqs = tf_datafile_S(g->d);
    c->batch = o->batch_given ? o->cfg.batch : count;
    c->warmup_steps = 0;
    if (c->num_steps < 1)
        c->num_steps = 1;
    if (!o->batch_given && count > TF_LIM_BATCH_MAX) {
        char q[64];
        tf_text_quote(q, sizeof q, o->data_path);
        snprintf(err, errlen, "--data: '%s' holds %d samples, more than one batch (%d): pass "
                 "--batch-size", q, count, TF_LIM_BATCH_MAX);
        return TF_ERR_USAGE;
    }
    if (tf_config_validate(c, err, errlen) != TF_OK)
        return TF_ERR_USAGE;
    return TF_OK;
}

tf_status tf_grad_prepare(tf_grad *g, char *err, size_t errlen) {
    char why[2 * 4096];
    tf_status s = tf_trainer_create(&g->t, &g->c, err, errlen);
    if (s != TF_OK) {
        g->t = NULL;
        return s;
    }
    long gs = 0;
    s = tf_checkpoint_load(g->t, g->o.load_path, 0, &gs, why, sizeof why);
    if (s != TF_OK) {
        snprintf(err, errlen, "--load: %s", why);
        return s == TF_ERR_INTERNAL ? TF_ERR_INTERNAL : TF_ERR_USAGE;
    }
    g->npred = (long)g->c.batch * g->c.seq_len * g->c.seq_len;
    g->pred = malloc((size_t)g->npred * sizeof *g->pred);
    if (!g->pred || !tf_hostmem_batch_alloc(&g->b, &g->c)) {
        snprintf(err, errlen, "out of host memory for the batch");
        return TF_ERR_NOMEM;
    }
    return TF_OK;
}

tf_status tf_grad_compute(tf_grad *g, char *err, size_t errlen) {
    tf_datafile_batch(g->d, 0, &g->b);
    g->loss = 0;
    tf_status s = tf_trainer_grad(g->t, &g->b, &g->loss, g->pred);
    if (s == TF_ERR_NONFINITE)
        snprintf(err, errlen, "loss is not finite (loss %g)", (double)g->loss);
    else if (s != TF_OK)
        snprintf(err, errlen, "grad: forward/backward failed (status %d)", (int)s);
    return s;
}

tf_status tf_grad_save(tf_grad *g, char *err, size_t errlen) {
    char why[2 * 4096];
    tf_status s = tf_gradfile_save(g->o.out_path, g->t, g->loss, g->pred, g->npred, why, sizeof why);
    if (s != TF_OK)
        snprintf(err, errlen, "--out: %s", why);
    return s;
}

void tf_grad_close(tf_grad *g) {
    free(g->pred);
    tf_hostmem_batch_free(&g->b);
    if (g->t)
        tf_trainer_destroy(g->t);
    tf_datafile_close(g->d);
    memset(g, 0, sizeof *g);
}
