/* Helpers for the profiler tests (test_prof*.c, test_compare.c): a
 * synthetic workload that drives the hooks with ops of known minimum
 * duration, file reading, a small CSV reader and a trace nesting check.
 * Header-only (static functions) so each test stays one translation unit. */
#ifndef TF_TEST_PROF_UTIL_H
#define TF_TEST_PROF_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "prof/prof.h"
#include "prof/profiler.h"
#include "prof/summary.h"
#include "report/prof_table.h"

/* tf_prof_finish, then the printed profile to out (NULL: none), as the
 * CLI prints it. */
static inline int tp_finish(tf_prof *p, const cJSON *run, FILE *out, char *err, size_t errlen) {
    int rc = tf_prof_finish(p, run, err, errlen);
    tf_prof_summary s;
    if (out && tf_prof_summarize(p, &s) == 0) {
        tf_report_prof_table(&s, out);
        tf_prof_summary_free(&s);
    }
    return rc;
}

static inline int64_t tp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void tp_spin_us(int us) {
    int64_t t = tp_now();
    while (tp_now() - t < (int64_t)us * 1000) {
    }
}

/* ---- the synthetic workload ---- */
enum { TP_LOAD, TP_GEMM_NT, TP_SOFTMAX, TP_GEMM_TN, TP_ADAMW, TP_NNAMES };
static const char *const tp_names[TP_NNAMES] = {"load", "sgemm_nt", "softmax", "sgemm_tn", "adamw"};
/* what a selection keeps: bits of the places an op can be issued from */
enum { TP_DATA = 1, TP_FWD = 2, TP_QKV = 4, TP_BWD = 8, TP_OPT = 16, TP_ALL = 31 };

typedef struct {
    uint64_t calls[TP_NNAMES];
    int64_t lo[TP_NNAMES]; /* sum of the spin targets: a lower bound of the recorded total */
    int64_t hi[TP_NNAMES]; /* sum of the host intervals around begin..end: an upper bound */
    uint64_t launches;     /* collected launches */
} tp_expect;

static inline void tp_op(tf_prof *p, tp_expect *e, int collect, int name, int us) {
    int64_t a = tp_now();
    tf_prof_op_begin(p, tp_names[name]);
    tp_spin_us(us);
    tf_prof_op_end(p);
    int64_t b = tp_now();
    if (collect && e) {
        e->calls[name]++;
        e->lo[name] += (int64_t)us * 1000;
        e->hi[name] += b - a;
        e->launches++;
    }
}

/* One step: data_loading, forward over 2 blocks, backward, optimizer.
 * 14 launches. `keep` (TP_* bits) says which places the test expects to be
 * collected; `collect` is 0 for steps that must not be collected at all. */
static inline void tp_step(tf_prof *p, tp_expect *e, long step, int warmup, int collect, int keep) {
    char block[32];
    tf_prof_step_begin(p, step, warmup);
    tf_region_push(p, "data_loading");
    tp_op(p, e, collect && (keep & TP_DATA), TP_LOAD, 30);
    tf_region_pop(p);
    tf_prof_memory(p, 1000 + (size_t)step, 0);
    tf_region_push(p, "forward_pass");
    for (int b = 0; b < 2; b++) {
        snprintf(block, sizeof block, "block_%d", b); /* names from a reused buffer */
        tf_region_push(p, block);
        tf_region_push(p, "msa_row_attention");
        tf_region_push(p, "msa_qkv");
        for (int k = 0; k < 3; k++) tp_op(p, e, collect && (keep & (TP_FWD | TP_QKV)), TP_GEMM_NT, 60);
        tf_region_pop(p);
        tp_op(p, e, collect && (keep & TP_FWD), TP_SOFTMAX, 20);
        tf_region_pop(p);
        tf_region_push(p, "triangle_mult_outgoing");
        tp_op(p, e, collect && (keep & TP_FWD), TP_GEMM_NT, 40);
        tf_region_pop(p);
        tf_region_pop(p);
    }
    tf_region_pop(p);
    tf_prof_memory(p, 5000 + (size_t)step, 0);
    tf_region_push(p, "backward_pass");
    tf_region_push(p, "block_1");
    tf_region_push(p, "msa_row_attention");
    for (int k = 0; k < 2; k++) tp_op(p, e, collect && (keep & TP_BWD), TP_GEMM_TN, 80);
    tf_region_pop(p);
    tf_region_pop(p);
    tf_region_pop(p);
    tf_region_push(p, "optimizer_step");
    tp_op(p, e, collect && (keep & TP_OPT), TP_ADAMW, 30);
    tf_region_pop(p);
    tf_prof_step_end(p, step);
}

/* ---- a scratch output directory per test ---- */
/* Makes /tmp/tf_test_<tag>_XXXXXX into dir (n bytes); 0 ok. */
static inline int tp_mkdtemp(char *dir, size_t n, const char *tag) {
    snprintf(dir, n, "/tmp/tf_test_%s_XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes the profiler's four output files from dir, then dir. */
static inline void tp_rm_outputs(const char *dir) {
    static const char *const files[] = {"kernel_stats.csv", "kernel_trace.csv", "summary.json",
                                        "trace.json"};
    char path[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%.512s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- files ---- */
static inline char *tp_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static inline cJSON *tp_read_json(const char *path) {
    char *s = tp_read(path);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static inline int tp_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* ---- CSV: rows of fields, quotes as rocprofv3 writes them ("" inside) ---- */
#define TP_MAXF 16
typedef struct {
    char *f[TP_MAXF];
    int n;
} tp_csv_row;

/* Parses one line starting at *s (modified in place); returns 0 at the end. */
static inline int tp_csv_next(char **s, tp_csv_row *r) {
    char *p = *s;
    if (!*p) return 0;
    r->n = 0;
    for (;;) {
        char *out = p, *start = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '"' && p[1] == '"') *out++ = '"', p += 2;
                else if (*p == '"') { p++; break; }
                else if (!*p) break;
                else *out++ = *p++;
            }
        } else {
            while (*p && *p != ',' && *p != '\n') *out++ = *p++;
        }
        char sep = *p;
        *out = 0;
        if (r->n < TP_MAXF) r->f[r->n++] = start;
        if (sep == ',') {
            p++;
            continue;
        }
        if (sep == '\n') p++;
        break;
    }
    *s = p;
    return 1;
}

/* ---- trace.json: X events must nest per (pid, tid) ---- */
typedef struct {
    int pid, tid;
    int64_t start, end; /* ns, from the microsecond fields */
} tp_ev;

static inline int tp_ev_cmp(const void *a, const void *b) {
    const tp_ev *x = a, *y = b;
    if (x->pid != y->pid) return x->pid - y->pid;
    if (x->tid != y->tid) return x->tid - y->tid;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

/* Returns the number of X events, or -1 (with a message) if some do not nest. */
static inline int tp_check_nesting(const cJSON *events) {
    int n = cJSON_GetArraySize(events), m = 0;
    tp_ev *ev = calloc((size_t)n + 1, sizeof *ev);
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        const cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        const cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
        if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) || !cJSON_IsNumber(pid) || !cJSON_IsNumber(tid) ||
            dur->valuedouble < 0) {
            fprintf(stderr, "X event without numeric ts/dur/pid/tid\n");
            free(ev);
            return -1;
        }
        ev[m].pid = pid->valueint;
        ev[m].tid = tid->valueint;
        ev[m].start = llround(ts->valuedouble * 1000.0);
        ev[m].end = ev[m].start + llround(dur->valuedouble * 1000.0);
        m++;
    }
    qsort(ev, (size_t)m, sizeof *ev, tp_ev_cmp);
    int64_t stack[256];
    int depth = 0, bad = 0;
    for (int i = 0; i < m && !bad; i++) {
        if (i > 0 && (ev[i].pid != ev[i - 1].pid || ev[i].tid != ev[i - 1].tid)) depth = 0;
        while (depth && stack[depth - 1] <= ev[i].start) depth--;
        if (depth && ev[i].end > stack[depth - 1]) {
            fprintf(stderr, "X events overlap without nesting on pid %d tid %d at %lld ns\n",
                    ev[i].pid, ev[i].tid, (long long)ev[i].start);
            bad = 1;
        }
        if (depth < 256) stack[depth++] = ev[i].end;
    }
    free(ev);
    return bad ? -1 : m;
}

/* A run JSON as `train --json` writes it (the fields compare reads). */
static inline cJSON *tp_run_json(int batch, int seq_len, double sps, double step_ms) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "tinyfold_version", "0.1.0");
    cJSON_AddStringToObject(r, "command", "train");
    cJSON *c = cJSON_AddObjectToObject(r, "config");
    cJSON_AddNumberToObject(c, "batch", batch);
    cJSON_AddNumberToObject(c, "seq_len", seq_len);
    cJSON_AddNumberToObject(c, "n_seqs", 16);
    cJSON_AddNumberToObject(c, "n_blocks", 4);
    cJSON_AddNumberToObject(c, "msa_dim", 64);
    cJSON_AddNumberToObject(c, "pair_dim", 128);
    cJSON_AddNumberToObject(c, "num_steps", 30);
    cJSON_AddStringToObject(c, "impl", "v2");
    cJSON_AddStringToObject(c, "backend", "cpu");
    cJSON_AddStringToObject(c, "precision", "fp32");
    cJSON *s = cJSON_AddObjectToObject(r, "summary");
    cJSON_AddNumberToObject(s, "samples_per_sec", sps);
    cJSON_AddNumberToObject(s, "step_ms", step_ms);
    cJSON_AddNumberToObject(s, "forward_ms", step_ms * 0.4);
    cJSON_AddNumberToObject(s, "backward_ms", step_ms * 0.5);
    cJSON_AddNumberToObject(s, "optimizer_ms", step_ms * 0.1);
    cJSON_AddNumberToObject(s, "peak_memory_bytes", 512.0 * 1048576);
    return r;
}

#endif
