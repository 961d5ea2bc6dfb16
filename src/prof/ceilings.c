/* The machine's ceilings for the roofline, measured when the profiler
 * starts (not a datasheet): on the CPU the best of a few 1024^3 cblas_sgemm
 * calls, and a streaming copy over 64 MiB arrays with the run's OpenMP
 * threads (bytes read + written). Each takes well under a second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cblas.h>

#include "prof/prof_internal.h"

#define GEMM_N 1024
#define COPY_FLOATS (16u << 20) /* 64 MiB */
#define REPS 4

static double best_gemm(void) {
    size_t n = (size_t)GEMM_N * GEMM_N;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n; i++) {
            a[i] = (float)(i % 17) * 0.01f;
            b[i] = (float)(i % 13) * 0.01f;
        }
        for (int r = -1; r < REPS; r++) {
            int64_t t0 = prof_now_ns();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_N, GEMM_N, GEMM_N, 1.0f,
                        a, GEMM_N, b, GEMM_N, 0.0f, c, GEMM_N);
            int64_t dt = prof_now_ns() - t0;
            double rate = dt > 0 ? 2.0 * GEMM_N * GEMM_N * (double)GEMM_N / (dt * 1e-9) : 0;
            if (r >= 0 && rate > best) best = rate;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static double best_copy(void) {
    float *src = malloc(COPY_FLOATS * sizeof *src), *dst = malloc(COPY_FLOATS * sizeof *dst);
    double best = 0;
    if (src && dst) {
        long n = (long)COPY_FLOATS;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            src[i] = (float)i;
            dst[i] = 0.0f;
        }
        for (int r = -1; r < REPS; r++) {
            int64_t t0 = prof_now_ns();
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) dst[i] = src[i];
            int64_t dt = prof_now_ns() - t0;
            double rate = dt > 0 ? 2.0 * sizeof(float) * (double)n / (dt * 1e-9) : 0;
            if (r >= 0 && rate > best) best = rate;
        }
        /* keep the copy observable */
        if (dst[n - 1] != src[n - 1]) best = 0;
    }
    free(src);
    free(dst);
    return best;
}

void prof_ceilings_measure_cpu(prof_ceilings *c) {
    memset(c, 0, sizeof *c);
    c->gemm_flops = best_gemm();
    c->copy_bytes = best_copy();
    snprintf(c->gemm_what, sizeof c->gemm_what, "cblas_sgemm %dx%dx%d, best of %d", GEMM_N, GEMM_N,
             GEMM_N, REPS);
    snprintf(c->copy_what, sizeof c->copy_what, "copy of %u MiB (read + write), best of %d",
             (unsigned)(COPY_FLOATS * sizeof(float) >> 20), REPS);
}

double prof_compute_ceiling(const prof_ceilings *c, tf_precision prec) {
    if (prec == TF_PREC_TF32 && c->gemm_tf32_flops > 0) return c->gemm_tf32_flops;
    if ((prec == TF_PREC_BF16 || prec == TF_PREC_FP16) && c->gemm_half_flops > 0)
        return c->gemm_half_flops;
    return c->gemm_flops;
}

cJSON *prof_ceilings_json(const prof_ceilings *c) {
    if (c->gemm_flops <= 0 && c->copy_bytes <= 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source", "measured when the profile started");
    cJSON_AddNumberToObject(o, "compute_flops_per_s", c->gemm_flops);
    cJSON_AddStringToObject(o, "compute_kernel", c->gemm_what);
    if (c->gemm_tf32_flops > 0) /* the ceiling of --precision tf32 runs */
        cJSON_AddNumberToObject(o, "compute_tf32_flops_per_s", c->gemm_tf32_flops);
    if (c->gemm_half_flops > 0) /* the ceiling of bf16 and fp16 runs */
        cJSON_AddNumberToObject(o, "compute_half_flops_per_s", c->gemm_half_flops);
    cJSON_AddNumberToObject(o, "memory_bytes_per_s", c->copy_bytes);
    cJSON_AddStringToObject(o, "memory_kernel", c->copy_what);
    if (c->copy_bytes > 0)
        cJSON_AddNumberToObject(o, "ridge_flops_per_byte", c->gemm_flops / c->copy_bytes);
    return o;
}
