/* Helpers shared by the test_io_*.c tests (header-only, everything static):
 * a scratch directory, whole-file read/write, and hand-built safetensors
 * images (so that malformed files are made byte by byte, independently of the
 * writer under test). Include after <cmocka.h>. */
#ifndef TEST_IO_UTIL_H
#define TEST_IO_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

/* A fresh scratch directory under $TMPDIR (or /tmp). */
static inline int io_dir_setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/tf_io_test.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static inline int io_dir_teardown(void **state) {
    (void)state;
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            if (unlink(p) != 0) rmdir(p);
        }
        closedir(d);
    }
    rmdir(g_dir);
    return 0;
}

static inline const char *io_path(const char *name) {
    static char p[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

/* Number of entries in the scratch dir whose name contains s. */
static inline int io_dir_count(const char *s) {
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, s)) n++;
    if (d) closedir(d);
    return n;
}

static inline unsigned char *io_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static inline void io_write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* A safetensors image: 8-byte LE length of json (as given, unpadded), json,
 * then dlen bytes of data (a deterministic pattern when data is NULL). */
static inline unsigned char *io_image(const char *json, const void *data, size_t dlen,
                                      size_t *len) {
    size_t hl = strlen(json);
    *len = 8 + hl + dlen;
    unsigned char *b = malloc(*len ? *len : 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((unsigned long long)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    for (size_t i = 0; i < dlen; i++)
        b[8 + hl + i] = data ? ((const unsigned char *)data)[i] : (unsigned char)(i * 7 + 1);
    return b;
}

/* The status is `want` and the message contains every fragment given. */
#define assert_fails_with(st, want, err, ...)                                                      \
    do {                                                                                           \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        if ((int)(st) != (int)(want)) {                                                            \
            print_error("status %d, expected %d; message: %s\n", (int)(st), (int)(want), err);     \
            fail();                                                                                \
        }                                                                                          \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            if (!strstr(err, frags_[k_])) {                                                        \
                print_error("message '%s' lacks '%s'\n", err, frags_[k_]);                         \
                fail();                                                                            \
            }                                                                                      \
        if (strchr(err, '\n')) {                                                                   \
            print_error("message is not one line: '%s'\n", err);                                   \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

#endif
