/* Runs a fuzz target without libFuzzer, for ctest: every file of a corpus
 * directory, then a fixed sequence of mutations of them (byte flips,
 * insertions of JSON and safetensors tokens, deletions, truncations,
 * duplicated spans), the same sequence every run. A target's invariant
 * failure aborts (non-zero exit); a crash is a crash; ctest's time limit
 * catches a hang. libFuzzer's runs (tests/fuzz/run.sh) explore far more;
 * this keeps every target exercised on every build, the sanitizer build
 * included.
 *
 * usage: fuzz_replay_<target> CORPUS_DIR [MUTATIONS]   (default 2000) */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t *b;
    size_t n;
} blob;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static blob read_all(const char *path) {
    blob r = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (!f) return r;
    size_t cap = 4096;
    r.b = malloc(cap);
    for (size_t got; r.b && (got = fread(r.b + r.n, 1, cap - r.n, f)) > 0;) {
        r.n += got;
        if (r.n == cap) {
            uint8_t *q = realloc(r.b, cap *= 2);
            if (!q) break;
            r.b = q;
        }
    }
    fclose(f);
    return r;
}

/* One mutation of s into a new buffer of at most 2 * s->n + 64 bytes. */
static blob mutate(const blob *s) {
    static const char *const tokens[] = {"\"", "{", "}", "[", "]", ",", ":", "0", "-1",
                                         "1e999", "null", "\"name\"", "\"kernels\"",
                                         "\"run\"", "\"config\"", "\"points\"", "\\u0000",
                                         "\"traceEvents\"", "\"dtype\"", "\"shape\"",
                                         "\"data_offsets\"", "\"__metadata__\"", "\n", "|",
                                         "\x1b[31m", "\"Name\"", "9007199254740993"};
    blob r;
    r.b = malloc(2 * s->n + 64);
    if (!r.b) {
        r.n = 0;
        return r;
    }
    memcpy(r.b, s->b, s->n);
    r.n = s->n;
    int k = 1 + (int)(next() % 4);
    for (int i = 0; i < k; i++) {
        size_t at = r.n ? (size_t)(next() % r.n) : 0;
        switch (next() % 6) {
        case 0: /* flip bits of a byte */
            if (r.n) r.b[at] ^= (uint8_t)(1u << (next() % 8));
            break;
        case 1: { /* insert a token */
            const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(t);
            if (r.n + tl > 2 * s->n + 64) break;
            memmove(r.b + at + tl, r.b + at, r.n - at);
            memcpy(r.b + at, t, tl);
            r.n += tl;
            break;
        }
        case 2: { /* delete a span */
            size_t len = r.n - at ? 1 + (size_t)(next() % (r.n - at < 16 ? r.n - at : 16)) : 0;
            memmove(r.b + at, r.b + at + len, r.n - at - len);
            r.n -= len;
            break;
        }
        case 3: /* truncate */
            r.n = at;
            break;
        case 4: /* a random byte */
            if (r.n) r.b[at] = (uint8_t)next();
            break;
        default: { /* duplicate a span */
            size_t len = r.n - at < 32 ? r.n - at : 32;
            if (r.n + len > 2 * s->n + 64) break;
            memmove(r.b + at + len, r.b + at, r.n - at);
            r.n += len;
            break;
        }
        }
    }
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
        return 2;
    }
    long mutations = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "%s: cannot open %s\n", argv[0], argv[1]);
        return 2;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **q = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!q) return 1;
            names = q;
        }
        size_t l = strlen(argv[1]) + strlen(e->d_name) + 2;
        names[n] = malloc(l);
        if (!names[n]) return 1;
        snprintf(names[n++], l, "%s/%s", argv[1], e->d_name);
    }
    closedir(d);
    if (!n) {
        fprintf(stderr, "%s: no seeds in %s\n", argv[0], argv[1]);
        return 2;
    }
    qsort(names, n, sizeof *names, by_name);
    blob *seeds = calloc(n, sizeof *seeds);
    if (!seeds) return 1;
    for (size_t i = 0; i < n; i++) {
        seeds[i] = read_all(names[i]);
        LLVMFuzzerTestOneInput(seeds[i].b ? seeds[i].b : (const uint8_t *)"", seeds[i].n);
    }
    for (long m = 0; m < mutations; m++) {
        blob x = mutate(&seeds[next() % n]);
        if (x.b) LLVMFuzzerTestOneInput(x.b, x.n);
        free(x.b);
    }
    for (size_t i = 0; i < n; i++) {
        free(seeds[i].b);
        free(names[i]);
    }
    free(seeds);
    free(names);
    printf("%s: %zu seeds and %ld mutations run\n", argv[0], n, mutations);
    return 0;
}
