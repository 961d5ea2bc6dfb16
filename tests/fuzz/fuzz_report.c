/* libFuzzer target over `tinyfold report`'s readers and page
 * (src/report/report_load.c, report_html.c, report_svg.c): the files it
 * reads, written from the input, then the whole command.
 *
 * The input's first byte picks the layout, the rest is two documents split
 * at the first NUL byte (A, and B or A again):
 *   0: a profile directory, A its summary.json and B its trace.json
 *   1: A a run JSON (or any JSON file)
 *   2: A a kernel_stats.csv
 *   3: A a run JSON and B a bench --scaling JSON
 * report must return 0 or 2 and never crash, leak, overrun or hang; an
 * accepted page is complete HTML. Messages go to stderr (run.sh closes it).
 *
 * Build and run: tests/fuzz/run.sh [seconds] report. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/commands.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_report: invariant failed: %s (line %d)\n", #cond, __LINE__);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char g_dir[256];

static void put(const char *name, const uint8_t *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static void drop(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    unlink(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/fuzz_report.XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(g_dir) != NULL);
        char p[512];
        snprintf(p, sizeof p, "%s/prof", g_dir);
        CHECK(mkdir(p, 0700) == 0);
        CHECK(freopen("/dev/null", "w", stdout) != NULL); /* "report written to ..." */
    }
    if (size < 1) return 0;
    int layout = data[0] % 4;
    data++, size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t la = nul ? (size_t)(nul - data) : size;
    const uint8_t *b = nul ? nul + 1 : data;
    size_t lb = nul ? size - la - 1 : size;
    static const char *const files[] = {"prof/summary.json", "prof/trace.json", "run.json",
                                        "k.csv", "scaling.json", "out.html"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) drop(files[i]);
    char a1[512], a2[512], out[512];
    snprintf(out, sizeof out, "%s/out.html", g_dir);
    char *argv[8] = {"report", a1, NULL, NULL, NULL, NULL, NULL, NULL};
    int argc = 2;
    switch (layout) {
    case 0:
        put("prof/summary.json", data, la);
        put("prof/trace.json", b, lb);
        snprintf(a1, sizeof a1, "%s/prof", g_dir);
        break;
    case 1:
        put("run.json", data, la);
        snprintf(a1, sizeof a1, "%s/run.json", g_dir);
        break;
    case 2:
        put("k.csv", data, la);
        snprintf(a1, sizeof a1, "%s/k.csv", g_dir);
        break;
    default:
        put("run.json", data, la);
        put("scaling.json", b, lb);
        snprintf(a1, sizeof a1, "%s/run.json", g_dir);
        snprintf(a2, sizeof a2, "%s/scaling.json", g_dir);
        argv[argc++] = a2;
        break;
    }
    argv[argc++] = "--out";
    argv[argc++] = out;
    if (size & 1) argv[argc++] = "--force";
    int rc = tf_report_main(argc, argv);
    CHECK(rc == 0 || rc == 2);
    if (rc == 0) { /* a complete page, nothing left beside it */
        FILE *f = fopen(out, "rb");
        CHECK(f != NULL);
        char tail[16] = "";
        CHECK(fseek(f, -8, SEEK_END) == 0);
        size_t got = fread(tail, 1, 8, f);
        fclose(f);
        CHECK(got == 8 && strstr(tail, "</html>") != NULL);
    }
    return 0;
}
