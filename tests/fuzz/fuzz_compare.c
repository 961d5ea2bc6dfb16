/* libFuzzer target over `tinyfold compare`'s reader and table
 * (src/report/compare.c, compare_render.c).
 *
 * The input is two documents split at the first NUL byte (the same text
 * twice when there is none); the output format comes from the input's
 * length. compare must return 0 or 2, and never crash, leak or overrun,
 * whatever the JSON holds (trailing data, huge or odd kernel lists,
 * counters, missing fields). Messages go to stderr (run.sh closes it).
 *
 * Build and run: tests/fuzz/run.sh [seconds]. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/compare.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_compare: invariant failed: %s (line %d)\n", #cond, __LINE__);  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static FILE *g_out;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_out) g_out = fopen("/dev/null", "w");
    CHECK(g_out != NULL);
    const uint8_t *nul = memchr(data, 0, size);
    size_t la = nul ? (size_t)(nul - data) : size, lb = nul ? size - la - 1 : size;
    char *a = malloc(la + 1), *b = malloc(lb + 1);
    CHECK(a && b);
    memcpy(a, data, la);
    a[la] = '\0';
    memcpy(b, nul ? nul + 1 : data, lb);
    b[lb] = '\0';
    const char *labels[2] = {"fuzz_a/summary.json", "fuzz_b.json"};
    const char *texts[2] = {a, b};
    size_t lens[2] = {la, lb};
    int rc = tf_compare_texts(2, labels, texts, lens, (int)(size & 1), (int)(size % 4), g_out);
    CHECK(rc == 0 || rc == 2);
    free(a);
    free(b);
    return 0;
}
