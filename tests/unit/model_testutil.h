/* Helpers shared by the model-level tests. */
#ifndef TF_MODEL_TESTUTIL_H
#define TF_MODEL_TESTUTIL_H

#include <math.h>
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

#endif
