/* libFuzzer target over the safetensors reader (src/io/safetensors.c).
 *
 * Any input must either be refused with one non-empty line of error, or
 * yield an index whose every promise holds: tensors sorted by name and found
 * by name, each byte range inside the input and of the size its shape and
 * dtype say, ranges tiling the data section, metadata sorted and found. Every
 * byte handed out is read, so ASan sees any pointer past the input.
 *
 * Build and run: tests/fuzz/run.sh [seconds]. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_safetensors: invariant failed: %s (line %d)\n", #cond,           \
                    __LINE__);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static volatile unsigned g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tf_st_file *f = (tf_st_file *)&f;
    char err[512];
    err[0] = '\0';
    tf_status st = tf_st_parse_buffer(&f, data, size, "fuzz", err, sizeof err);
    if (st != TF_OK) {
        CHECK(f == NULL);
        CHECK(st == TF_ERR_USAGE || st == TF_ERR_NOMEM);
        CHECK(strncmp(err, "fuzz: ", 6) == 0 && strlen(err) > 6);
        CHECK(strchr(err, '\n') == NULL);
        return 0;
    }
    CHECK(f != NULL && size >= 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    CHECK(hlen <= size - 8);
    const uint8_t *section = data + 8 + hlen;
    uint64_t section_len = size - 8 - hlen, covered = 0;
    unsigned acc = 0;
    size_t n = tf_st_count(f);
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *t = tf_st_at(f, i);
        CHECK(t != NULL && t->name != NULL);
        if (i > 0) CHECK(strcmp(tf_st_at(f, i - 1)->name, t->name) < 0);
        CHECK(tf_st_find(f, t->name) == t);
        CHECK((unsigned)t->dtype < TF_ST_DTYPE_COUNT);
        CHECK(t->ndim >= 0 && t->ndim <= TF_ST_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] >= 0);
            numel *= (uint64_t)t->shape[d]; /* no overflow: the reader checked */
        }
        CHECK(numel == t->numel);
        CHECK(t->nbytes == numel * tf_st_dtype_size(t->dtype));
        CHECK(t->begin <= section_len && t->nbytes <= section_len - t->begin);
        CHECK((const uint8_t *)t->data == section + t->begin);
        const uint8_t *p = t->data;
        for (uint64_t k = 0; k < t->nbytes; k++)
            acc += p[k];
        covered += t->nbytes;
    }
    CHECK(covered == section_len); /* exact tiling (no overlap, no gap) */
    CHECK(tf_st_at(f, n) == NULL);
    for (size_t i = 0; i < tf_st_meta_count(f); i++) {
        const char *k, *v;
        tf_st_meta_at(f, i, &k, &v);
        CHECK(k && v);
        CHECK(tf_st_meta_get(f, k) == v);
        acc += (unsigned)strlen(v);
    }
    g_sink = acc;
    tf_st_close(f);
    return 0;
}
