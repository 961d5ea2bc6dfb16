/* libFuzzer target over the data-file loader (src/io/datafile.c) on top of
 * the safetensors reader.
 *
 * Any input must either be refused with one non-empty line naming the input,
 * or give a data file whose every promise holds: count, S, N >= 1, and every
 * batch drawn from it (steps 0, 1, a large and a negative one) holds tokens
 * in [0, 21) and finite features and targets. Batches are read whole, so
 * ASan sees any read past the input.
 *
 * Build and run: tests/fuzz/run.sh [seconds]. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/datafile.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_datafile: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tf_datafile *d = (tf_datafile *)&d;
    char err[512];
    err[0] = '\0';
    tf_status st = tf_datafile_parse(data, size, "fuzz", &d, err, sizeof err);
    if (st != TF_OK) {
        CHECK(d == NULL);
        CHECK(st == TF_ERR_USAGE || st == TF_ERR_NOMEM);
        CHECK(strncmp(err, "fuzz: ", 6) == 0 && strlen(err) > 6);
        CHECK(strchr(err, '\n') == NULL);
        return 0;
    }
    int n = tf_datafile_count(d), S = tf_datafile_S(d), N = tf_datafile_N(d);
    CHECK(n >= 1 && S >= 1 && N >= 1);
    size_t SN = (size_t)S * N, NN = (size_t)N * N;
    /* every byte of a batch comes from the input: bounded by it */
    CHECK(SN * 4 <= size && NN * TF_DATA_PAIR_DIM * 4 <= size);
    tf_batch b = {.B = 2, .S = S, .N = N};
    b.tokens = malloc(2 * SN * sizeof *b.tokens);
    b.pair = malloc(2 * NN * TF_DATA_PAIR_DIM * sizeof *b.pair);
    b.target = malloc(2 * NN * sizeof *b.target);
    CHECK(b.tokens && b.pair && b.target);
    static const long steps[] = {0, 1, 1L << 40, -7};
    for (int k = 0; k < 4; k++) {
        tf_datafile_batch(d, steps[k], &b);
        for (size_t i = 0; i < 2 * SN; i++)
            CHECK(b.tokens[i] >= 0 && b.tokens[i] < TF_DATA_VOCAB);
        for (size_t i = 0; i < 2 * NN * TF_DATA_PAIR_DIM; i++)
            CHECK(isfinite(b.pair[i]));
        for (size_t i = 0; i < 2 * NN; i++)
            CHECK(isfinite(b.target[i]));
    }
    free(b.tokens);
    free(b.pair);
    free(b.target);
    tf_datafile_close(d);
    return 0;
}
