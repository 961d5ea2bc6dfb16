/* The host's memory: /proc/meminfo, and malloc'd batches. */
#include "train/hostmem.h"

#include <stdio.h>
#include <stdlib.h>

size_t tf_hostmem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

size_t tf_hostmem_batch_bytes(const tf_config *c) {
    size_t B = (size_t)c->batch, S = (size_t)c->n_seqs, N = (size_t)c->seq_len;
    return B * S * N * sizeof(int32_t) +
           B * N * N * ((size_t)c->pair_input_dim + 1) * sizeof(float);
}

int tf_hostmem_batch_alloc(tf_batch *b, const tf_config *c) {
    size_t B = (size_t)c->batch, S = (size_t)c->n_seqs, N = (size_t)c->seq_len;
    b->B = c->batch;
    b->S = c->n_seqs;
    b->N = c->seq_len;
    b->tokens = malloc(B * S * N * sizeof *b->tokens);
    b->pair = malloc(B * N * N * (size_t)c->pair_input_dim * sizeof *b->pair);
    b->target = malloc(B * N * N * sizeof *b->target);
    return b->tokens && b->pair && b->target;
}

void tf_hostmem_batch_free(tf_batch *b) {
    free(b->tokens);
    free(b->pair);
    free(b->target);
    b->tokens = NULL;
    b->pair = b->target = NULL;
}
