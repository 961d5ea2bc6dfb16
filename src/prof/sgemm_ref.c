/* bench's sgemm reference (sgemm_ref.h). A median of a few short calls,
 * taken once at the start, reads low whenever another process holds a core
 * meanwhile, and steps timed later on a quiet machine would then show more
 * than all of it: a reference taken around each row, its fastest call, does
 * not. */
#define _POSIX_C_SOURCE 200809L
#include "prof/sgemm_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cblas.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double tf_sgemm_best_rate(const double *ms, int n, double flops) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (ms[i] > 0 && flops / (ms[i] * 1e-3) * 1e-9 > best) best = flops / (ms[i] * 1e-3) * 1e-9;
    return best;
}

double tf_sgemm_ref_for_row(const tf_sgemm_ref *before, const tf_sgemm_ref *after) {
    const double v[4] = {before->big, before->skinny, after->big, after->skinny};
    double best = 0;
    for (int i = 0; i < 4; i++)
        if (v[i] > best) best = v[i];
    return best;
}

int tf_sgemm_pct_cell(char *out, size_t n, double gflops, double ref) {
    if (!n) return 0;
    out[0] = '\0';
    if (!(ref > 0)) return 0;
    const int low = gflops > ref;
    snprintf(out, n, "%.0f%%%s", 100.0 * gflops / ref, low ? "!" : "");
    return low;
}

#define MAX_CALLS 4096

/* C[M,N] = A[M,K] B[K,N]: the fastest call's GFLOP/s; 0 when out of memory */
static double shape_rate(int M, int N, int K, double min_ms) {
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B),
          *C = malloc((size_t)M * N * sizeof *C);
    double *ms = malloc(MAX_CALLS * sizeof *ms), rate = 0;
    if (A && B && C && ms) {
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)((i % 17) * 0.01);
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)((i % 13) * 0.01);
        int n = 0;
        const double start = now_ms();
        for (int r = -1; r < MAX_CALLS && (r < 5 || now_ms() - start < min_ms); r++) {
            const double t0 = now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f,
                        C, N);
            if (r >= 0) ms[n++] = now_ms() - t0;
        }
        rate = tf_sgemm_best_rate(ms, n, 2.0 * M * N * K);
    }
    free(A);
    free(B);
    free(C);
    free(ms);
    return rate;
}

void tf_sgemm_ref_measure(tf_sgemm_ref *r, double min_ms) {
    r->big = shape_rate(1024, 1024, 1024, min_ms);
    r->skinny = shape_rate(16384, 128, 128, min_ms);
}
