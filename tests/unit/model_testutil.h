/* Helpers shared by the model-level tests. */
#ifndef TF_MODEL_TESTUTIL_H
#define TF_MODEL_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinyfold.h"
#include "train/rng.h"

/* Weights larger than the 0.02 init of docs/model.md section 7 (std
 * ~0.5/sqrt(fan_in)) and LayerNorm gamma/beta away from 1/0, so that every
 * tensor matters to the loss and a gradient bug anywhere shows. Returns a
 * malloc'd host buffer. */
static inline float *tf_test_weights(const tf_config *c, uint64_t seed) {
    size_t nt = tf_param_count_tensors(c), np = tf_param_count_floats(c);
    tf_param_info *t = calloc(nt, sizeof *t);
    float *p = malloc(np * sizeof *p);
    tf_param_table(c, t);
    tf_rng r;
    tf_rng_init(&r, seed, 99, 0);
    for (size_t i = 0; i < nt; i++) {
        float *w = p + t[i].offset;
        int is_ln = t[i].ndim == 1;
        int is_bias = is_ln && strstr(t[i].name, ".bias") != NULL;
        double sd = is_ln ? 0.2 : 0.525 / sqrt((double)t[i].shape[1]);
        for (size_t k = 0; k < t[i].count; k++)
            w[k] = (float)((is_ln && !is_bias ? 1.0 : 0.0) + sd * tf_rng_normal(&r));
    }
    free(t);
    return p;
}

/* ||a - b|| / ||b|| (or ||a - b|| when b is all zeros) */
static inline double tf_test_rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One gradient of c's first batch (tf_data_batch(seed, 0)) from the weights
 * tf_test_weights(c, 11), taken `steps` times on one trainer (a later step
 * must not depend on what an earlier one left behind): the loss, the
 * prediction, every parameter gradient, and the arena planned and reached.
 * 0 ok, else -1 with err set; tf_test_grads_free releases it. */
typedef struct {
    float loss;
    float *pred, *grad;
    size_t arena, arena_peak;
} tf_test_grads;

static inline int tf_test_grads_run(const tf_config *c, int steps, tf_test_grads *r, char *err,
                                    size_t errlen) {
    memset(r, 0, sizeof *r);
    tf_trainer *t;
    if (tf_trainer_create(&t, c, err, errlen) != TF_OK) return -1;
    size_t np = tf_param_count_floats(c);
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    tf_batch b = {c->batch, c->n_seqs, c->seq_len,
                  malloc(sizeof(int32_t) * c->batch * c->n_seqs * c->seq_len),
                  malloc(sizeof(float) * nz * 65), malloc(sizeof(float) * nz)};
    tf_data_batch(c->seed, 0, &b);
    float *w = tf_test_weights(c, 11);
    tf_trainer_set_params(t, w);
    free(w);
    r->pred = malloc(sizeof(float) * nz);
    r->grad = malloc(sizeof(float) * np);
    int rc = 0;
    for (int s = 0; s < steps && !rc; s++)
        if (tf_trainer_grad(t, &b, &r->loss, r->pred) != TF_OK) {
            snprintf(err, errlen, "tf_trainer_grad failed at step %d", s + 1);
            rc = -1;
        }
    if (!rc) {
        tf_trainer_get_grads(t, r->grad);
        r->arena = tf_trainer_arena_bytes(t);
        r->arena_peak = tf_trainer_arena_peak(t);
    }
    free(b.tokens), free(b.pair), free(b.target);
    tf_trainer_destroy(t);
    return rc;
}

static inline void tf_test_grads_free(tf_test_grads *r) {
    free(r->pred);
    free(r->grad);
    r->pred = r->grad = NULL;
}

#endif
