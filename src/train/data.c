/* Synthetic data (docs/model.md, section 8), generated on demand: sample `index` of a
 * virtual 1000-sample dataset is a pure function of (seed, index), and step t
 * picks B distinct indices as a pure function of (seed, t). No pool is held. */
#include <stdlib.h>

#include "train/rng.h"
#include "tinyfold.h"

/* Values are drawn in chunks, each from its own stream (seed, index, chunk), so
 * a sample is the same whatever the number of threads that draw it. */
#define TF_DATA_CHUNK 4096

void tf_data_sample(uint64_t seed, long index, int S, int N, int32_t *tokens, float *pair,
                    float *target) {
    const long ntok = (long)S * N, npair = (long)N * N * 65, ntgt = (long)N * N;
    const long ctok = (ntok + TF_DATA_CHUNK - 1) / TF_DATA_CHUNK;
    const long cpair = (npair + TF_DATA_CHUNK - 1) / TF_DATA_CHUNK;
    const long ctgt = (ntgt + TF_DATA_CHUNK - 1) / TF_DATA_CHUNK;
    const long nchunks = ctok + cpair + ctgt;
    /* stream index: (sample index, chunk) -> one 64-bit counter */
    const uint64_t base = (uint64_t)index << 24;
#pragma omp parallel for schedule(static) if (npair > 8 * TF_DATA_CHUNK)
    for (long c = 0; c < nchunks; c++) {
        tf_rng r;
        tf_rng_init(&r, seed, TF_STREAM_DATA, base + (uint64_t)c);
        if (c < ctok) {
            long lo = c * TF_DATA_CHUNK, hi = lo + TF_DATA_CHUNK < ntok ? lo + TF_DATA_CHUNK : ntok;
            for (long i = lo; i < hi; i++) tokens[i] = (int32_t)(tf_rng_next(&r) % 21u);
        } else if (c < ctok + cpair) {
            long lo = (c - ctok) * TF_DATA_CHUNK;
            long hi = lo + TF_DATA_CHUNK < npair ? lo + TF_DATA_CHUNK : npair;
            for (long i = lo; i < hi; i += 2) {
                double z1;
                double z0 = tf_rng_normal2(&r, &z1);
                pair[i] = (float)z0;
                if (i + 1 < hi) pair[i + 1] = (float)z1;
            }
        } else {
            long lo = (c - ctok - cpair) * TF_DATA_CHUNK;
            long hi = lo + TF_DATA_CHUNK < ntgt ? lo + TF_DATA_CHUNK : ntgt;
            for (long i = lo; i < hi; i++) target[i] = (float)(20.0 * tf_rng_uniform(&r));
        }
    }
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

void tf_data_batch_slice(uint64_t seed, long step, int B_global, int first, tf_batch *b) {
    long stack_idx[64];
    long *idx = B_global <= 64 ? stack_idx : malloc(sizeof(long) * (size_t)B_global);
    if (!idx) abort(); /* a few bytes: nothing sensible to do */
    tf_data_step_indices(seed, step, B_global, idx);
    for (int j = 0; j < b->B; j++)
        tf_data_sample(seed, idx[first + j], b->S, b->N, b->tokens + (long)j * b->S * b->N,
                       b->pair + (long)j * b->N * b->N * 65, b->target + (long)j * b->N * b->N);
    if (idx != stack_idx) free(idx);
}

void tf_data_batch(uint64_t seed, long step, tf_batch *b) {
    tf_data_batch_slice(seed, step, b->B, 0, b);
}
