/* Synthetic data (SPEC "Data"), generated on demand: sample `index` of a
 * virtual 1000-sample dataset is a pure function of (seed, index), and step t
 * picks B distinct indices as a pure function of (seed, t). No pool is held. */
#include <stdlib.h>

#include "train/rng.h"
#include "tinyfold.h"

void tf_data_sample(uint64_t seed, long index, int S, int N, int32_t *tokens, float *pair,
                    float *target) {
    tf_rng r;
    tf_rng_init(&r, seed, TF_STREAM_DATA, (uint64_t)index);
    for (long i = 0; i < (long)S * N; i++) tokens[i] = (int32_t)(tf_rng_next(&r) % 21u);
    for (long i = 0; i < (long)N * N * 65; i++) pair[i] = (float)tf_rng_normal(&r);
    for (long i = 0; i < (long)N * N; i++) target[i] = (float)(20.0 * tf_rng_uniform(&r));
}

void tf_data_step_indices(uint64_t seed, long step, int B, long *idx) {
    tf_rng r;
    tf_rng_init(&r, seed, TF_STREAM_STEP, (uint64_t)step);
    for (int j = 0; j < B; j++) {
        for (;;) {
            long v = (long)(tf_rng_next(&r) % TF_DATASET_SIZE);
            int dup = 0;
            for (int k = 0; k < j; k++) dup |= idx[k] == v;
            if (!dup || B > TF_DATASET_SIZE) {
                idx[j] = v;
                break;
            }
        }
    }
}

void tf_data_batch(uint64_t seed, long step, tf_batch *b) {
    long stack_idx[64];
    long *idx = b->B <= 64 ? stack_idx : malloc(sizeof(long) * (size_t)b->B);
    if (!idx) abort(); /* a few bytes: nothing sensible to do */
    tf_data_step_indices(seed, step, b->B, idx);
    for (int j = 0; j < b->B; j++)
        tf_data_sample(seed, idx[j], b->S, b->N, b->tokens + (long)j * b->S * b->N,
                       b->pair + (long)j * b->N * b->N * 65, b->target + (long)j * b->N * b->N);
    if (idx != stack_idx) free(idx);
}
