/* CPU backend: every op of tf_ops against a naive double-precision reference
 * written here, at several shapes including odd ones.
 *
 * Tolerances. u = 2^-24 is the fp32 unit roundoff. A K-term fp32 dot product
 * has an error that behaves like a random walk, about sqrt(K) * u * sum|a_k b_k|;
 * over up to ~1e5 checked elements the maximum sits within ~4.5 standard
 * deviations, and a few more roundings (alpha/beta, scale, one exp/log) come on
 * top, so checks use 8 * sqrt(K) * u times the magnitude of the summed terms,
 * plus the extra terms each op's comment names. GEMMs with bf16/fp16 operands
 * or results are checked against a reference built from the rounded inputs,
 * with one more rounding to the output type on top (gemm_typed_case). Where an op does no arithmetic
 * (permute, copies, embedding forward) or the same float operations as the
 * reference (add, mul, scale), the check is bit-exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#undef I /* OpenBLAS's cblas.h brings <complex.h>'s I; the tests name variables I */

#include "backend/backend.h"
#include "backend/tf_dtype.h"
#include "testutil.h"

#define U TF_TEST_U

static tf_backend *g_be;
static const tf_ops *g_ops;

#define CHECK_LE(what, err, tol)                                                              \
    do {                                                                                      \
        const double e_ = (err), t_ = (tol);                                                  \
        if (!(e_ <= t_) || getenv("TF_TEST_VERBOSE"))                                         \
            fprintf(stderr, "%s %s: err %.3g tol %.3g\n", e_ <= t_ ? "ok  " : "FAIL", what,   \
                    e_, t_);                                                                  \
        assert_true(e_ <= t_);                                                                \
    } while (0)

static int group_setup(void **state) {
    (void)state;
    return tf_test_cpu_backend(&g_be, &g_ops);
}

static int group_teardown(void **state) {
    (void)state;
    tf_cpu_backend_destroy(g_be);
    return 0;
}

/* ------------------------------------------------------------------ memory */

static void test_memory(void **state) {
    (void)state;
    size_t peak0 = tf_cpu_backend_peak_bytes(g_be);
    void *a = NULL, *b = NULL;
    assert_int_equal(g_ops->alloc(g_be, &a, 1000), 0);
    assert_int_equal(g_ops->alloc(g_be, &b, 3), 0);
    assert_true(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0);
    assert_true(tf_cpu_backend_peak_bytes(g_be) >= peak0 + 1003);
    float h[250], r[250];
    tf_test_fill_normal(h, 250, 0, 1, 1);
    g_ops->upload(g_be, a, h, sizeof h);
    g_ops->download(g_be, r, a, sizeof r);
    assert_true(tf_test_bits_equal(h, r, 250));
    g_ops->zero(g_be, a, 100 * sizeof(float));
    g_ops->copy(g_be, r, a, sizeof r);
    for (int i = 0; i < 250; i++)
        assert_true(r[i] == (i < 100 ? 0.0f : h[i]));
    g_ops->sync(g_be);
    size_t peak1 = tf_cpu_backend_peak_bytes(g_be);
    g_ops->free(g_be, a);
    g_ops->free(g_be, b);
    g_ops->free(g_be, NULL);
    void *huge = (void *)1;
    assert_int_not_equal(g_ops->alloc(g_be, &huge, SIZE_MAX - 8), 0); /* fails cleanly */
    assert_null(huge);
    assert_true(g_ops->alloc(g_be, &a, 64) == 0);
    assert_true(tf_cpu_backend_peak_bytes(g_be) == peak1); /* freed bytes were returned */
    g_ops->free(g_be, a);
    /* host memory for per-step uploads: plain malloc here */
    float *hp = NULL;
    assert_int_equal(g_ops->host_alloc(g_be, (void **)&hp, sizeof h), 0);
    memcpy(hp, h, sizeof h);
    assert_int_equal(g_ops->alloc(g_be, &a, sizeof h), 0);
    g_ops->upload(g_be, a, hp, sizeof h);
    g_ops->download(g_be, r, a, sizeof r);
    assert_true(tf_test_bits_equal(h, r, 250));
    g_ops->free(g_be, a);
    g_ops->host_free(g_be, hp);
    g_ops->host_free(g_be, NULL);
    huge = (void *)1;
    assert_int_not_equal(g_ops->host_alloc(g_be, &huge, SIZE_MAX - 8), 0);
    assert_null(huge);
    char desc[256];
    tf_cpu_backend_describe(g_be, desc, sizeof desc);
    assert_non_null(strstr(desc, "OpenBLAS"));
    assert_non_null(strstr(desc, "2 threads"));
    assert_string_equal(g_ops->name, "cpu");
}

/* copy_rows: a block of rows into a wider tensor (small and threaded sizes);
 * what lies between the rows stays as it was */
static void test_copy_rows(void **state) {
    (void)state;
    static const long cases[][4] = {{3, 7, 5, 11}, {1, 1, 1, 1}, {300, 1024, 900, 2048}};
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        const long rows = cases[q][0], cols = cases[q][1], sld = cases[q][2] + cols,
                   dld = cases[q][3] + cols;
        const size_t ns = (size_t)(rows * sld), nd = (size_t)(rows * dld);
        float *src = malloc(ns * sizeof *src), *dst = malloc(nd * sizeof *dst),
              *want = malloc(nd * sizeof *want);
        for (size_t i = 0; i < ns; i++) src[i] = (float)i + 0.5f;
        for (size_t i = 0; i < nd; i++) dst[i] = want[i] = -(float)i;
        for (long r = 0; r < rows; r++)
            for (long j = 0; j < cols; j++) want[r * dld + j] = src[r * sld + j];
        g_ops->copy_rows(g_be, dst, dld, src, sld, cols, rows, TF_F32);
        assert_true(tf_test_bits_equal(dst, want, nd));
        free(src), free(dst), free(want);
    }
}

/* -------------------------------------------------------------------- gemm */

/* One GEMM case; checks every element with 8 sqrt(K) u (|alpha| sum_k |a b| + |beta r|)
 * and that C's padding (columns >= N) is untouched. rmode: 0 beta scales C; 1
 * a separate residual R (C then only written: poisoned with NaN; R unchanged);
 * 2 R == C. DRELU's mask aux holds exact zeros too (masked: only aux > 0 passes). */
static void gemm_case_x(int tA, int tB, int M, int N, int K, int batch, int pad, float alpha,
                        float beta, tf_epilogue epi, int rmode, uint64_t seed) {
    const long rowsA = tA ? K : M, colsA = tA ? M : K, rowsB = tB ? N : K, colsB = tB ? K : N;
    const long lda = colsA + pad, ldb = colsB + pad, ldc = N + pad;
    const long sA = rowsA * lda + 3, sB = rowsB * ldb + 5, sC = (long)M * ldc + 7;
    float *A = tf_test_falloc(sA * batch), *B = tf_test_falloc(sB * batch);
    float *C = tf_test_falloc(sC * batch), *C0 = tf_test_falloc(sC * batch);
    float *Rs = tf_test_falloc(sC * batch), *R0 = tf_test_falloc(sC * batch);
    float *X = tf_test_falloc(sC * batch);
    tf_test_fill_uniform(A, sA * batch, -1, 1, seed);
    tf_test_fill_uniform(B, sB * batch, -1, 1, seed + 1);
    tf_test_fill_uniform(C, sC * batch, -1, 1, seed + 2);
    tf_test_fill_uniform(Rs, sC * batch, -1, 1, seed + 3);
    tf_test_fill_uniform(X, sC * batch, -1, 1, seed + 4);
    for (long i = 0; i < sC * batch; i += 7)
        X[i] = 0.0f; /* relu output exactly 0: masked */
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < M; i++)
            for (long j = N; j < ldc; j++)
                C[p * sC + i * ldc + j] = 1234.5f; /* padding sentinel */
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < M; i++)
            for (long j = 0; j < N; j++) {
                if (beta == 0.0f || rmode == 1)
                    C[p * sC + i * ldc + j] = NAN; /* C must not be read */
                if (beta == 0.0f)
                    Rs[p * sC + i * ldc + j] = NAN; /* nor R */
            }
    memcpy(C0, C, sizeof(float) * sC * batch);
    memcpy(R0, Rs, sizeof(float) * sC * batch);
    const float *in = rmode == 1 ? R0 : C0; /* what beta scales */
    tf_gemm_args g = {.transA = tA, .transB = tB, .M = M, .N = N, .K = K, .alpha = alpha,
                      .beta = beta, .A = A, .lda = lda, .strideA = sA, .B = B, .ldb = ldb,
                      .strideB = sB, .C = C, .ldc = ldc, .strideC = sC, .batch = batch,
                      .epilogue = epi, .R = rmode == 1 ? Rs : rmode == 2 ? C : NULL,
                      .aux = epi == TF_EPI_DRELU ? X : NULL};
    g_ops->gemm(g_be, &g, "test_gemm");
    size_t bad = 0;
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < M; i++) {
            for (long j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (long k = 0; k < K; k++) {
                    const double a = tA ? A[p * sA + k * lda + i] : A[p * sA + i * lda + k];
                    const double b = tB ? B[p * sB + j * ldb + k] : B[p * sB + k * ldb + j];
                    s += a * b;
                    mag += fabs(a * b);
                }
                double ref = alpha * s, cmag = fabs(alpha) * mag;
                if (beta != 0.0f) {
                    ref += beta * (double)in[p * sC + i * ldc + j];
                    cmag += fabs(beta * (double)in[p * sC + i * ldc + j]);
                }
                if (epi == TF_EPI_RELU && ref < 0)
                    ref = 0;
                if (epi == TF_EPI_DRELU && !(X[p * sC + i * ldc + j] > 0.0f))
                    ref = 0;
                const double tol = 8.0 * sqrt((double)K + 2) * U * cmag + 1e-30;
                const double got = C[p * sC + i * ldc + j];
                if (!(fabs(got - ref) <= tol)) {
                    if (bad++ < 3)
                        fprintf(stderr, "gemm tA%d tB%d %dx%dx%d b%d epi%d r%d: C[%ld,%ld,%ld] "
                                "%.9g vs %.9g\n", tA, tB, M, N, K, batch, (int)epi, rmode, p, i, j,
                                got, ref);
                }
            }
            for (long j = N; j < ldc; j++)
                bad += C[p * sC + i * ldc + j] != 1234.5f;
        }
    if (rmode == 1 && !tf_test_bits_equal(Rs, R0, (size_t)(sC * batch))) {
        fprintf(stderr, "gemm: R was written\n");
        bad++;
    }
    assert_int_equal(bad, 0);
    free(A);
    free(B);
    free(C);
    free(C0);
    free(Rs);
    free(R0);
    free(X);
}

static void gemm_case(int tA, int tB, int M, int N, int K, int batch, int pad, float alpha,
                      float beta, int relu, uint64_t seed) {
    gemm_case_x(tA, tB, M, N, K, batch, pad, alpha, beta, relu ? TF_EPI_RELU : TF_EPI_NONE, 0,
                seed);
}

static void test_gemm(void **state) {
    (void)state;
    static const int shapes[][3] = {
        {1, 1, 1}, {7, 5, 3}, {33, 17, 64}, {64, 64, 64}, {130, 70, 33}};
    uint64_t seed = 100;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int batch = 1; batch <= 3; batch += 2)
                for (int beta = 0; beta <= 1; beta++)
                    for (int pad = 0; pad <= 3; pad += 3)
                        gemm_case(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], batch,
                                  pad, beta ? 0.75f : 1.25f, (float)beta, 0, seed++);
    /* relu epilogue (beta 0), both batch paths and the parallel relu path */
    gemm_case(0, 1, 33, 17, 20, 5, 2, 1.0f, 0.0f, 1, 7);
    gemm_case(1, 0, 300, 450, 16, 1, 0, 1.0f, 0.0f, 1, 8);
    /* entries at the threshold: 2 threads, a batch of 2 runs one entry per
     * thread, a batch of 3 (uneven, few) one threaded call per entry */
    gemm_case(0, 0, 128, 128, 128, 2, 1, 1.0f, 1.0f, 0, 9);
    gemm_case(1, 1, 128, 256, 96, 2, 0, 0.5f, 0.0f, 1, 10);
    gemm_case(0, 1, 128, 128, 128, 3, 1, 1.0f, 1.0f, 0, 11);
    gemm_case(1, 0, 128, 256, 96, 3, 0, 0.5f, 0.0f, 1, 12);
    /* strideC == 0: every entry accumulates into one C, in order (beta 1) */
    {
        const int M = 9, N = 11, K = 7, nb = 6;
        float *A = tf_test_falloc(M * K * nb), *B = tf_test_falloc(K * N * nb);
        float *C = tf_test_falloc(M * N);
        double *R = tf_test_dalloc(M * N), mag = 0;
        tf_test_fill_uniform(A, M * K * nb, -1, 1, 13);
        tf_test_fill_uniform(B, K * N * nb, -1, 1, 14);
        tf_test_fill_uniform(C, M * N, -1, 1, 15);
        for (int i = 0; i < M * N; i++)
            R[i] = C[i];
        for (int p = 0; p < nb; p++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++)
                    for (int k = 0; k < K; k++) {
                        R[i * N + j] += (double)A[p * M * K + i * K + k] * B[p * K * N + k * N + j];
                        mag = fmax(mag, fabs(R[i * N + j]));
                    }
        tf_gemm_args g = {.M = M, .N = N, .K = K, .alpha = 1, .beta = 1, .A = A, .lda = K,
                          .strideA = M * K, .B = B, .ldb = N, .strideB = K * N, .C = C,
                          .ldc = N, .strideC = 0, .batch = nb};
        g_ops->gemm(g_be, &g, NULL);
        /* sum |terms| <= K nb (entries in [-1, 1]) + |C0| */
        CHECK_LE("gemm strideC 0", tf_test_max_abs_err(C, R, M * N),
                 8 * U * sqrt(K * nb + 2.0) * (mag + K * nb));
        free(A); free(B); free(C); free(R);
    }
    /* K == 0: C = beta C */
    gemm_case(0, 0, 5, 6, 0, 2, 0, 1.0f, 1.0f, 0, 11);
    gemm_case(0, 0, 5, 6, 0, 2, 0, 1.0f, 0.0f, 0, 12);
    /* the residual input R (separate, and R == C) and the DRELU mask, at odd
     * shapes, batch 1 and > 1 (both batch paths), with and without padding,
     * K == 0 (C = beta R), and on the parallel epilogue path */
    static const int rshapes[][3] = {{7, 5, 3}, {33, 17, 64}, {130, 70, 33}};
    for (size_t s = 0; s < sizeof rshapes / sizeof rshapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int batch = 1; batch <= 3; batch += 2)
                for (int rmode = 0; rmode <= 2; rmode++)
                    for (int epi = 0; epi <= 2; epi += 2) {
                        if (rmode == 0 && epi == 0)
                            continue; /* above */
                        const float beta = rmode ? (t & 1 ? -0.5f : 1.0f) : 0.0f;
                        gemm_case_x(t & 1, t >> 1, rshapes[s][0], rshapes[s][1], rshapes[s][2],
                                    batch, (int)(s + t) % 3, 0.75f, beta, (tf_epilogue)epi, rmode,
                                    seed++);
                    }
    gemm_case_x(0, 1, 5, 6, 0, 2, 1, 1.0f, 0.5f, TF_EPI_NONE, 1, 30);  /* K == 0: C = beta R */
    gemm_case_x(0, 1, 5, 6, 0, 2, 1, 1.0f, 0.5f, TF_EPI_DRELU, 2, 31);
    gemm_case_x(1, 0, 300, 450, 16, 1, 0, 1.0f, 1.0f, TF_EPI_DRELU, 1, 32); /* parallel rows */
    gemm_case_x(0, 0, 128, 128, 128, 2, 1, 1.0f, 1.0f, TF_EPI_DRELU, 1, 33); /* threaded calls */
    gemm_case_x(1, 1, 40, 30, 20, 3, 2, 0.5f, 0.0f, TF_EPI_DRELU, 1, 34); /* beta 0: R unread */
}

/* ------------------------------------------------------ gemm, element types */

/* element i of a buffer of type t, as fp32, and stored rounded to t */
static float tget(const void *p, tf_dtype t, long i) {
    if (t == TF_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return t == TF_BF16 ? tf_bf16_to_f32(h) : tf_f16_to_f32(h);
}

static void tset(void *p, tf_dtype t, long i, float v) {
    if (t == TF_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == TF_BF16 ? tf_f32_to_bf16(v) : tf_f32_to_f16(v);
}

static void *talloc(long n, tf_dtype t) {
    void *p = malloc((size_t)n * tf_dtype_size(t));
    assert_non_null(p);
    return p;
}

/* bits of element i (a sentinel check that needs no float compare) */
static uint32_t tbits(const void *p, tf_dtype t, long i) {
    return t == TF_F32 ? tf_f32_bits(((const float *)p)[i]) : ((const uint16_t *)p)[i];
}

/* One GEMM with A, B of type ab and C, R, aux of type ct (ops.h: fp32
 * accumulation, one rounding to ct at the store). The inputs are drawn in
 * fp32 and stored rounded to their types; the reference is computed in double
 * FROM THOSE ROUNDED VALUES, so the conversions in are exact and what remains
 * is the fp32 GEMM's error e1 = 8 sqrt(K+2) u (|alpha| sum|ab| + |beta r|)
 * (the header's bound), then, for a half C, one rounding of the fp32 result y
 * to ct: |round(y) - y| <= u_c |y| + s_c, u_c the unit roundoff of ct (half an
 * ulp relative to the bottom of y's binade: 2^-p for p significant bits, bf16
 * p = 8: 2^-8, fp16 p = 11: 2^-11; fp32's own u is in e1) and s_c half the
 * smallest subnormal spacing (fp16 2^-25; bf16 2^-134, below anything here).
 * With |y| <= |ref| + e1: tol = e1 + u_c (|ref| + e1) + s_c. A conversion
 * that truncated instead (error up to 2 u_c |y|) fails it on about half the
 * elements, as does a C stored unrounded or in the wrong type. rmode as in
 * gemm_case_x; shared: B with batch stride 0 (one shared weight). */
static void gemm_typed_case(tf_dtype ab, tf_dtype ct, int tA, int tB, int M, int N, int K,
                            int batch, int pad, float alpha, float beta, tf_epilogue epi,
                            int rmode, int shared, uint64_t seed) {
    const long rowsA = tA ? K : M, colsA = tA ? M : K, rowsB = tB ? N : K, colsB = tB ? K : N;
    const long lda = colsA + pad, ldb = colsB + pad, ldc = N + pad;
    const long sA = rowsA * lda + 3, sB = shared ? 0 : rowsB * ldb + 5, sC = (long)M * ldc + 7;
    const long nA = sA * batch, nB = shared ? rowsB * ldb : sB * batch, nC = sC * batch;
    void *A = talloc(nA, ab), *B = talloc(nB, ab), *C = talloc(nC, ct), *C0 = talloc(nC, ct);
    void *Rs = talloc(nC, ct), *X = talloc(nC, ct);
    float *tmp = tf_test_falloc((size_t)(nA > nB ? (nA > nC ? nA : nC) : (nB > nC ? nB : nC)));
#define FILL(buf, n, t, s)                                                                     \
    do {                                                                                       \
        tf_test_fill_uniform(tmp, (size_t)(n), -1, 1, (s));                                    \
        for (long i_ = 0; i_ < (n); i_++) tset((buf), (t), i_, tmp[i_]);                       \
    } while (0)
    FILL(A, nA, ab, seed);
    FILL(B, nB, ab, seed + 1);
    FILL(C, nC, ct, seed + 2);
    FILL(Rs, nC, ct, seed + 3);
    FILL(X, nC, ct, seed + 4);
#undef FILL
    for (long i = 0; i < nC; i += 7) tset(X, ct, i, 0.0f); /* relu output exactly 0: masked */
    const float sentinel = 1234.5f; /* exact in every type */
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < M; i++) {
            for (long j = N; j < ldc; j++) tset(C, ct, p * sC + i * ldc + j, sentinel);
            for (long j = 0; j < N; j++) {
                if (beta == 0.0f || rmode == 1) tset(C, ct, p * sC + i * ldc + j, NAN);
                if (beta == 0.0f) tset(Rs, ct, p * sC + i * ldc + j, NAN);
            }
        }
    const size_t cbytes = (size_t)nC * tf_dtype_size(ct);
    memcpy(C0, C, cbytes);
    void *R0 = talloc(nC, ct);
    memcpy(R0, Rs, cbytes);
    const void *in = rmode == 1 ? R0 : C0; /* what beta scales */
    tf_gemm_args g = {.transA = tA, .transB = tB, .M = M, .N = N, .K = K, .alpha = alpha,
                      .beta = beta, .A = A, .lda = lda, .strideA = sA, .B = B, .ldb = ldb,
                      .strideB = sB, .C = C, .ldc = ldc, .strideC = sC, .batch = batch,
                      .epilogue = epi, .R = rmode == 1 ? Rs : rmode == 2 ? C : NULL,
                      .aux = epi == TF_EPI_DRELU ? X : NULL, .ab_type = ab, .c_type = ct};
    g_ops->gemm(g_be, &g, "test_gemm_typed");
    const double uc = ct == TF_BF16 ? 0x1p-8 : ct == TF_F16 ? 0x1p-11 : 0.0;
    const double sc = ct == TF_F16 ? 0x1p-25 : 0.0;
    size_t bad = 0;
    double worst = 0; /* max err / tol */
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < M; i++) {
            for (long j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (long k = 0; k < K; k++) {
                    const long ia = p * sA + (tA ? k * lda + i : i * lda + k);
                    const long ib = p * sB + (tB ? j * ldb + k : k * ldb + j);
                    const double a = tget(A, ab, ia), b = tget(B, ab, ib);
                    s += a * b;
                    mag += fabs(a * b);
                }
                const long ic = p * sC + i * ldc + j;
                double ref = alpha * s, cmag = fabs(alpha) * mag;
                if (beta != 0.0f) {
                    ref += beta * (double)tget(in, ct, ic);
                    cmag += fabs(beta * (double)tget(in, ct, ic));
                }
                if (epi == TF_EPI_RELU && ref < 0) ref = 0;
                if (epi == TF_EPI_DRELU && !(tget(X, ct, ic) > 0.0f)) ref = 0;
                const double e1 = 8.0 * sqrt((double)K + 2) * U * cmag + 1e-30;
                const double tol = e1 + uc * (fabs(ref) + e1) + sc;
                const double got = tget(C, ct, ic), err = fabs(got - ref);
                if (err / tol > worst) worst = err / tol;
                if (!(err <= tol) && bad++ < 3)
                    fprintf(stderr, "gemm %s/%s tA%d tB%d %dx%dx%d b%d epi%d r%d: C[%ld,%ld,%ld] "
                            "%.9g vs %.9g (tol %.3g)\n", tf_dtype_name(ab), tf_dtype_name(ct), tA,
                            tB, M, N, K, batch, (int)epi, rmode, p, i, j, got, ref, tol);
            }
            for (long j = N; j < ldc; j++)
                bad += tbits(C, ct, p * sC + i * ldc + j) != tbits(C0, ct, p * sC + i * ldc + j);
        }
    if (rmode == 1 && memcmp(Rs, R0, cbytes)) {
        fprintf(stderr, "gemm typed: R was written\n");
        bad++;
    }
    if (getenv("TF_TEST_VERBOSE"))
        fprintf(stderr, "gemm %s/%s %dx%dx%d b%d: max err/tol %.3f\n", tf_dtype_name(ab),
                tf_dtype_name(ct), M, N, K, batch, worst);
    assert_int_equal(bad, 0);
    free(A), free(B), free(C), free(C0), free(Rs), free(R0), free(X), free(tmp);
}

static void test_gemm_types(void **state) {
    (void)state;
    static const tf_dtype abs[3] = {TF_BF16, TF_F16, TF_F32};
    static const tf_dtype cts[3] = {TF_F32, TF_BF16, TF_F16};
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 64}, {130, 70, 33}};
    uint64_t seed = 500;
    for (int ai = 0; ai < 3; ai++)
        for (int ci = 0; ci < 3; ci++) {
            const tf_dtype ab = abs[ai], ct = cts[ci];
            if (ab == TF_F32 && ct == TF_F32) continue; /* test_gemm */
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int t = 0; t < 4; t++)
                    for (int batch = 1; batch <= 3; batch += 2)
                        gemm_typed_case(ab, ct, t & 1, t >> 1, shapes[s][0], shapes[s][1],
                                        shapes[s][2], batch, (int)(s + t) % 3,
                                        batch > 1 ? 0.75f : 1.25f, 0.0f, TF_EPI_NONE, 0, 0,
                                        seed++);
            /* beta on C, a separate R, R == C; the epilogues; a shared B; K == 0 */
            for (int rmode = 0; rmode <= 2; rmode++)
                for (int epi = 0; epi <= 2; epi += 2)
                    gemm_typed_case(ab, ct, rmode & 1, epi > 0, 33, 17, 20, 3, 1, 0.75f,
                                    rmode == 1 ? -0.5f : 1.0f, (tf_epilogue)epi, rmode, 0, seed++);
            gemm_typed_case(ab, ct, 0, 1, 33, 17, 20, 5, 2, 1.0f, 0.0f, TF_EPI_RELU, 0, 0, seed++);
            gemm_typed_case(ab, ct, 1, 0, 300, 450, 16, 1, 0, 1.0f, 1.0f, TF_EPI_DRELU, 1, 0,
                            seed++); /* parallel conversions and epilogue rows */
            gemm_typed_case(ab, ct, 0, 1, 64, 48, 40, 4, 1, 1.0f, 0.5f, TF_EPI_NONE, 1, 1, seed++);
            gemm_typed_case(ab, ct, 0, 0, 5, 6, 0, 2, 1, 1.0f, 0.5f, TF_EPI_NONE, 1, 0, seed++);
            gemm_typed_case(ab, ct, 1, 1, 128, 128, 128, 2, 1, 1.0f, 1.0f, TF_EPI_NONE, 2, 0,
                            seed++); /* one entry per thread */
        }
}

/* strideC == 0 with a half C: each entry stores C in its type and the next
 * reads it back (ops.h), so the batch equals its entries issued one by one */
static void test_gemm_types_shared_c(void **state) {
    (void)state;
    const int M = 9, N = 11, K = 7, nb = 6;
    for (int ci = 0; ci < 2; ci++) {
        const tf_dtype ct = ci ? TF_F16 : TF_BF16;
        uint16_t *A = talloc(M * K * nb, TF_BF16), *B = talloc(K * N * nb, TF_BF16);
        uint16_t *C = talloc(M * N, ct), *C1 = talloc(M * N, ct);
        float *tmp = tf_test_falloc(M * K * nb + K * N * nb + M * N);
        tf_test_fill_uniform(tmp, M * K * nb + K * N * nb + M * N, -1, 1, 40 + (uint64_t)ci);
        for (int i = 0; i < M * K * nb; i++) tset(A, TF_BF16, i, tmp[i]);
        for (int i = 0; i < K * N * nb; i++) tset(B, TF_BF16, i, tmp[M * K * nb + i]);
        for (int i = 0; i < M * N; i++) tset(C, ct, i, tmp[M * K * nb + K * N * nb + i]);
        memcpy(C1, C, sizeof(uint16_t) * M * N);
        tf_gemm_args g = {.M = M, .N = N, .K = K, .alpha = 1, .beta = 1, .A = A, .lda = K,
                          .strideA = M * K, .B = B, .ldb = N, .strideB = K * N, .C = C,
                          .ldc = N, .strideC = 0, .batch = nb, .ab_type = TF_BF16, .c_type = ct};
        g_ops->gemm(g_be, &g, NULL);
        for (int p = 0; p < nb; p++) {
            tf_gemm_args e = g;
            e.batch = 1, e.A = A + p * M * K, e.B = B + p * K * N, e.C = C1;
            g_ops->gemm(g_be, &e, NULL);
        }
        assert_memory_equal(C, C1, sizeof(uint16_t) * M * N);
        free(A), free(B), free(C), free(C1), free(tmp);
    }
}

/* fp32 types, zero-initialised or named, run the fp32 code path unchanged:
 * a batch-1 GEMM gives the bits of cblas_sgemm itself */
static void test_gemm_f32_bits(void **state) {
    (void)state;
    static const int shapes[][3] = {{7, 5, 3}, {33, 17, 64}, {130, 70, 33}, {256, 256, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int beta = 0; beta <= 1; beta++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], tA = t & 1,
                          tB = t >> 1;
                const int lda = (tA ? M : K) + 1, ldb = (tB ? K : N) + 2, ldc = N + 3;
                const long nA = (long)(tA ? K : M) * lda, nB = (long)(tB ? N : K) * ldb,
                           nC = (long)M * ldc;
                float *A = tf_test_falloc(nA), *B = tf_test_falloc(nB), *C = tf_test_falloc(nC);
                float *C1 = tf_test_falloc(nC), *C2 = tf_test_falloc(nC);
                tf_test_fill_uniform(A, nA, -1, 1, 60 + s);
                tf_test_fill_uniform(B, nB, -1, 1, 70 + s);
                tf_test_fill_uniform(C, nC, -1, 1, 80 + s);
                memcpy(C1, C, sizeof(float) * nC);
                memcpy(C2, C, sizeof(float) * nC);
                tf_gemm_args g = {.transA = tA, .transB = tB, .M = M, .N = N, .K = K,
                                  .alpha = 0.75f, .beta = (float)beta, .A = A, .lda = lda,
                                  .B = B, .ldb = ldb, .C = C, .ldc = ldc, .batch = 1};
                g_ops->gemm(g_be, &g, NULL);
                g.C = C1, g.ab_type = TF_F32, g.c_type = TF_F32;
                g_ops->gemm(g_be, &g, NULL);
                cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans,
                            tB ? CblasTrans : CblasNoTrans, M, N, K, 0.75f, A, lda, B, ldb,
                            (float)beta, C2, ldc);
                assert_true(tf_test_bits_equal(C, C2, (size_t)nC));
                assert_true(tf_test_bits_equal(C1, C2, (size_t)nC));
                free(A), free(B), free(C), free(C1), free(C2);
            }
}

/* --------------------------------------------------------------- layernorm */

/* Reference over double; fwd error: the mean and variance are C-term sums
 * (sqrt(C) u relative to max|x|, amplified by max|x|/std when the normalised
 * value is formed), then ~4 roundings for the affine part. */
static void test_layernorm(void **state) {
    (void)state;
    static const int rows_l[] = {1, 7, 33, 130};
    static const int C_l[] = {5, 64, 128};
    uint64_t seed = 200;
    for (size_t ri = 0; ri < 4; ri++)
        for (size_t ci = 0; ci < 3; ci++) {
            const long R = rows_l[ri];
            const int C = C_l[ci];
            const long n = R * C;
            float *x = tf_test_falloc(n), *out = tf_test_falloc(n), *g = tf_test_falloc(C);
            float *bta = tf_test_falloc(C), *mean = tf_test_falloc(R), *rstd = tf_test_falloc(R);
            tf_test_fill_normal(x, n, 3.0f, 2.0f, seed++); /* offset mean: two-pass matters */
            tf_test_fill_uniform(g, C, 0.5f, 1.5f, seed++);
            tf_test_fill_uniform(bta, C, -0.5f, 0.5f, seed++);
            g_ops->layernorm_fwd(g_be, out, mean, rstd, x, g, bta, R, C, 1e-5f, TF_F32, TF_F32);
            double *rout = tf_test_dalloc(n), *rmean = tf_test_dalloc(R), *rrs = tf_test_dalloc(R);
            double kappa = 1;
            for (long r = 0; r < R; r++) {
                double s = 0, v = 0, xm = 0;
                for (int c = 0; c < C; c++) {
                    s += x[r * C + c];
                    xm = fmax(xm, fabs(x[r * C + c]));
                }
                const double mu = s / C;
                for (int c = 0; c < C; c++)
                    v += (x[r * C + c] - mu) * (x[r * C + c] - mu);
                const double rs = 1.0 / sqrt(v / C + 1e-5);
                rmean[r] = mu;
                rrs[r] = rs;
                kappa = fmax(kappa, xm * rs);
                for (int c = 0; c < C; c++)
                    rout[r * C + c] = (x[r * C + c] - mu) * rs * g[c] + bta[c];
            }
            const double tol = 8 * U * (sqrt((double)C) * kappa + 4);
            CHECK_LE("layernorm_fwd out", tf_test_norm_err(out, rout, n, 1.0), tol);
            CHECK_LE("layernorm_fwd mean", tf_test_norm_err(mean, rmean, R, 1.0), tol);
            CHECK_LE("layernorm_fwd rstd", tf_test_norm_err(rstd, rrs, R, 0.0), tol);

            /* backward, from the op's own float mean/rstd (inputs of the bwd op) */
            for (int accum = 0; accum <= 1; accum++) {
                float *dout = tf_test_falloc(n), *dx = tf_test_falloc(n);
                float *dg = tf_test_falloc(C), *db = tf_test_falloc(C);
                tf_test_fill_normal(dout, n, 0, 1, seed++);
                tf_test_fill_normal(dx, n, 0, 1, seed++);
                tf_test_fill_uniform(dg, C, -1, 1, seed++);
                tf_test_fill_uniform(db, C, -1, 1, seed++);
                double *rdx = tf_test_dalloc(n), *rdg = tf_test_dalloc(C), *rdb = tf_test_dalloc(C);
                for (int c = 0; c < C; c++) {
                    rdg[c] = dg[c];
                    rdb[c] = db[c];
                }
                double dxmag = 0; /* sum |g| + |g xhat| per row, times rstd: dx's scale */
                for (long r = 0; r < R; r++) {
                    double m1 = 0, m2 = 0, a1 = 0;
                    for (int c = 0; c < C; c++) {
                        const double xh = ((double)x[r * C + c] - mean[r]) * rstd[r];
                        const double gg = (double)dout[r * C + c] * g[c];
                        m1 += gg;
                        m2 += gg * xh;
                        a1 += fabs(gg) * (1 + fabs(xh));
                        rdg[c] += (double)dout[r * C + c] * xh;
                        rdb[c] += dout[r * C + c];
                    }
                    m1 /= C;
                    m2 /= C;
                    dxmag = fmax(dxmag, a1 / C * rstd[r] * kappa);
                    for (int c = 0; c < C; c++) {
                        const double xh = ((double)x[r * C + c] - mean[r]) * rstd[r];
                        const double v = rstd[r] * ((double)dout[r * C + c] * g[c] - m1 - xh * m2);
                        rdx[r * C + c] = accum ? dx[r * C + c] + v : v;
                    }
                }
                g_ops->layernorm_bwd(g_be, dx, NULL, dg, db, dout, x, mean, rstd, g, R, C, accum,
                                     TF_F32, TF_F32);
                /* dx: C-term row sums; absolute error relative to dxmag (+|dx0| if accum) */
                const double tdx = 8 * U * (sqrt((double)C) + 4) * (dxmag + (accum ? 4.0 : 0.0));
                CHECK_LE("layernorm_bwd dx", tf_test_max_abs_err(dx, rdx, n), tdx);
                /* dgamma/dbeta: R-term sums of O(kappa) terms */
                const double tp = 8 * U * (sqrt((double)R) + 4) * (kappa * 4 + 1);
                CHECK_LE("layernorm_bwd dgamma", tf_test_norm_err(dg, rdg, C, 1.0), tp);
                CHECK_LE("layernorm_bwd dbeta", tf_test_norm_err(db, rdb, C, 1.0), tp);
                free(dout); free(dx); free(dg); free(db); free(rdx); free(rdg); free(rdb);
            }
            free(x); free(out); free(g); free(bta); free(mean); free(rstd);
            free(rout); free(rmean); free(rrs);
        }
}

/* dgamma/dbeta and dx are bit-identical run to run and across thread counts
 * (fixed row chunks, reduced in chunk order). */
static void test_layernorm_determinism(void **state) {
    (void)state;
    const long R = 4 * 64 * 64 + 13;
    const int C = 128;
    const long n = R * C;
    float *x = tf_test_falloc(n), *dout = tf_test_falloc(n), *g = tf_test_falloc(C);
    float *bta = tf_test_falloc(C), *out = tf_test_falloc(n), *mean = tf_test_falloc(R);
    float *rstd = tf_test_falloc(R), *dx[3], *dg[3], *db[3];
    tf_test_fill_normal(x, n, 0.5f, 1.5f, 300);
    tf_test_fill_normal(dout, n, 0, 1, 301);
    tf_test_fill_uniform(g, C, 0.5f, 1.5f, 302);
    tf_test_fill_const(bta, C, 0.1f);
    g_ops->layernorm_fwd(g_be, out, mean, rstd, x, g, bta, R, C, 1e-5f, TF_F32, TF_F32);
    for (int k = 0; k < 3; k++) {
        dx[k] = tf_test_falloc(n);
        dg[k] = tf_test_falloc(C);
        db[k] = tf_test_falloc(C);
        tf_test_fill_const(dg[k], C, 0.25f);
        tf_test_fill_const(db[k], C, -0.25f);
        tf_backend *be1 = NULL;
        const tf_ops *ops1 = NULL;
        if (k == 2) /* a one-thread backend */
            assert_int_equal(tf_test_cpu_backend_ex(&be1, &ops1, 1, 2), 0);
        tf_backend *be = k == 2 ? be1 : g_be;
        g_ops->layernorm_bwd(be, dx[k], NULL, dg[k], db[k], dout, x, mean, rstd, g, R, C, 0,
                             TF_F32, TF_F32);
        if (be1) {
            tf_cpu_backend_destroy(be1);
            tf_backend *tmp;
            assert_int_equal(tf_test_cpu_backend(&tmp, &ops1), 0); /* restore 2 threads */
            tf_cpu_backend_destroy(tmp);
        }
    }
    for (int k = 1; k < 3; k++) {
        assert_true(tf_test_bits_equal(dg[0], dg[k], C));
        assert_true(tf_test_bits_equal(db[0], db[k], C));
        assert_true(tf_test_bits_equal(dx[0], dx[k], n));
    }
    for (int k = 0; k < 3; k++) {
        free(dx[k]); free(dg[k]); free(db[k]);
    }
    free(x); free(dout); free(g); free(bta); free(out); free(mean); free(rstd);
}

/* layernorm2 (two LayerNorms in a row) is the composition of two layernorm
 * ops with the intermediate not stored: the same per-row arithmetic and the
 * same chunked sums, so bit-identical to it (test_layernorm checks the
 * arithmetic against double), at row counts around the 64-row chunks, widths
 * up to TF_LN2_MAX_C, with and without accumulation. */
static void test_layernorm2(void **state) {
    (void)state;
    static const long rows_l[] = {1, 63, 64, 130};
    static const int C_l[] = {1, 5, 64, TF_LN2_MAX_C};
    uint64_t seed = 260;
    for (size_t ri = 0; ri < 4; ri++)
        for (size_t ci = 0; ci < 4; ci++)
            for (int accum = 0; accum <= 1; accum++) {
                const long R = rows_l[ri], n = R * C_l[ci];
                const int C = C_l[ci];
                float *x = tf_test_falloc(n), *dout = tf_test_falloc(n), *p = tf_test_falloc(4 * C);
                tf_test_fill_normal(x, n, 3.0f, 2.0f, seed++);
                tf_test_fill_normal(dout, n, 0, 1, seed++);
                tf_test_fill_uniform(p, 4 * C, 0.5f, 1.5f, seed++);
                const float *g1 = p, *b1 = p + C, *g2 = p + 2 * C, *b2 = p + 3 * C;
                /* the composition: y1 stored, two ops each way */
                float *y1 = tf_test_falloc(n), *out = tf_test_falloc(n), *st = tf_test_falloc(4 * R);
                float *dy1 = tf_test_falloc(n), *dx = tf_test_falloc(n), *dp = tf_test_falloc(4 * C);
                tf_test_fill_normal(dx, n, 0, 1, seed);
                tf_test_fill_uniform(dp, 4 * C, -1, 1, seed + 1);
                g_ops->layernorm_fwd(g_be, y1, st, st + R, x, g1, b1, R, C, 1e-5f, TF_F32, TF_F32);
                g_ops->layernorm_fwd(g_be, out, st + 2 * R, st + 3 * R, y1, g2, b2, R, C, 1e-5f, TF_F32, TF_F32);
                g_ops->layernorm_bwd(g_be, dy1, NULL, dp + 2 * C, dp + 3 * C, dout, y1, st + 2 * R,
                                     st + 3 * R, g2, R, C, 0, TF_F32, TF_F32);
                /* with its copy dxh (of type yt, here fp32: dx's bits; test_cpu_typed
                 * checks the half types') */
                float *dxh = tf_test_falloc(n);
                g_ops->layernorm_bwd(g_be, dx, dxh, dp, dp + C, dy1, x, st, st + R, g1, R, C, accum,
                                     TF_F32, TF_F32);
                assert_true(tf_test_bits_equal(dxh, dx, n));
                /* the fused op */
                float *out2 = tf_test_falloc(n), *st2 = tf_test_falloc(4 * R);
                float *dx2 = tf_test_falloc(n), *dp2 = tf_test_falloc(4 * C);
                tf_test_fill_normal(dx2, n, 0, 1, seed++);
                tf_test_fill_uniform(dp2, 4 * C, -1, 1, seed++);
                g_ops->layernorm2_fwd(g_be, out2, st2, x, g1, b1, g2, b2, R, C, 1e-5f, TF_F32, TF_F32);
                g_ops->layernorm2_bwd(g_be, dx2, dxh, dp2, dp2 + C, dp2 + 2 * C, dp2 + 3 * C, dout,
                                      x, st2, g1, b1, g2, R, C, accum, TF_F32, TF_F32);
                assert_true(tf_test_bits_equal(dxh, dx2, n));
                assert_true(tf_test_bits_equal(out, out2, n));
                assert_true(tf_test_bits_equal(st, st2, 4 * R));
                assert_true(tf_test_bits_equal(dx, dx2, n));
                assert_true(tf_test_bits_equal(dp, dp2, 4 * C));
                free(x); free(dout); free(p); free(y1); free(out); free(st); free(dy1); free(dx);
                free(dp); free(out2); free(st2); free(dx2); free(dp2); free(dxh);
            }
}

/* ----------------------------------------------------------------- softmax */

/* fwd: exp is ~1 ulp, the row sum has `cols` terms: 8 u (sqrt(cols) + 4)
 * relative per element. The max is subtracted first, so large logits are
 * fine. bwd: a cols-term dot product, then one multiply. In place both ways. */
static void test_softmax(void **state) {
    (void)state;
    static const int shapes[][2] = {{1, 1}, {7, 5}, {33, 64}, {300, 128}, {3, 1000}};
    uint64_t seed = 400;
    for (size_t s = 0; s < 5; s++)
        for (int big = 0; big <= 1; big++) {
            const long R = shapes[s][0];
            const int Cc = shapes[s][1];
            const long n = R * Cc;
            float *x = tf_test_falloc(n), *y = tf_test_falloc(n), *dy = tf_test_falloc(n);
            double *ry = tf_test_dalloc(n), *rdx = tf_test_dalloc(n);
            tf_test_fill_uniform(x, n, big ? -80.0f : -3.0f, big ? 80.0f : 3.0f, seed++);
            tf_test_fill_normal(dy, n, 0, 1, seed++);
            double dmag = 0;
            for (long r = 0; r < R; r++) {
                double mx = -INFINITY, sum = 0, dot = 0, amag = 0;
                for (int c = 0; c < Cc; c++)
                    mx = fmax(mx, x[r * Cc + c]);
                for (int c = 0; c < Cc; c++)
                    sum += exp((double)x[r * Cc + c] - mx);
                for (int c = 0; c < Cc; c++) {
                    ry[r * Cc + c] = exp((double)x[r * Cc + c] - mx) / sum;
                    dot += ry[r * Cc + c] * dy[r * Cc + c];
                    amag += fabs(ry[r * Cc + c] * dy[r * Cc + c]);
                }
                for (int c = 0; c < Cc; c++) {
                    rdx[r * Cc + c] = ry[r * Cc + c] * (dy[r * Cc + c] - dot);
                    dmag = fmax(dmag, ry[r * Cc + c] * (fabs(dy[r * Cc + c]) + amag));
                }
            }
            /* exp's argument x - max carries |x| u of rounding: relative error |x|max u */
            const double tf = 8 * U * (sqrt((double)Cc) + 4 + (big ? 160.0 : 6.0));
            memcpy(y, x, n * sizeof(float));
            g_ops->softmax_fwd(g_be, y, y, R, Cc, TF_F32); /* in place */
            /* atol FLT_MIN: the backend's exp flushes results below FLT_MIN to 0 */
            CHECK_LE("softmax_fwd", tf_test_check_close("softmax_fwd", y, ry, n, 0x1p-126, tf), 0);
            g_ops->softmax_bwd(g_be, dy, dy, y, R, Cc, TF_F32); /* in place */
            const double tb = 8 * U * (sqrt((double)Cc) + 4) * dmag + tf * dmag;
            CHECK_LE("softmax_bwd", tf_test_max_abs_err(dy, rdx, n), tb);
            free(x); free(y); free(dy); free(ry); free(rdx);
        }
}

/* --------------------------------------------------------------- attention */

/* Operand layout of one attention test case. q/k/v live either in one fused
 * buffer (row = [q | k | v | pad], stride 3C + pad) or in separate buffers
 * (stride C + pad); rows are ordered (b, o, l) or, like MSA column attention,
 * (b, l, o). Gradients use the same layout, pre-filled with a sentinel to
 * check that exactly the view's elements are written. Bias is [b, i, j, h]. */
typedef struct {
    int nb, no, nh, L, d;
    int fused, l_major, pad, bias;
    float qk_std, bias_amp;
} attn_case;

typedef struct {
    attn_case c;
    long C, row, nrows, nqkv;
    float *qkv, *dqkv, *out, *dout, *bias, *dbias, *lse, *work;
    tf_attn_args a;
} attn_bufs;

#define SENTINEL 777.0f

static tf_attn_view mkview(float *base, long off, const attn_case *c, long row) {
    tf_attn_view v;
    v.p = base + off;
    v.sb = (long)c->no * c->L * row;
    v.so = c->l_major ? row : (long)c->L * row;
    v.sl = c->l_major ? (long)c->no * row : row;
    return v;
}

static double vget(const tf_attn_view *v, int b, int o, int l, int h, int d, int c) {
    return ((const float *)v->p)[b * v->sb + o * v->so + l * v->sl + h * d + c];
}

static void attn_setup(attn_bufs *t, const attn_case *c, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->c = *c;
    t->C = (long)c->nh * c->d;
    t->row = (c->fused ? 3 * t->C : t->C) + c->pad;
    t->nrows = (long)c->nb * c->no * c->L;
    t->nqkv = t->nrows * t->row * (c->fused ? 1 : 3);
    const long nout = t->nrows * t->C, nbias = (long)c->nb * c->L * c->L * c->nh;
    t->qkv = tf_test_falloc(t->nqkv);
    t->dqkv = tf_test_falloc(t->nqkv);
    t->out = tf_test_falloc(nout);
    t->dout = tf_test_falloc(nout);
    t->lse = tf_test_falloc((long)c->nb * c->no * c->nh * c->L);
    t->work = tf_test_falloc((long)c->nb * c->no * c->nh * c->L);
    tf_test_fill_normal(t->qkv, t->nqkv, 0, c->qk_std, seed);
    tf_test_fill_normal(t->dout, nout, 0, 1, seed + 1);
    tf_test_fill_const(t->dqkv, t->nqkv, SENTINEL);
    if (c->bias) {
        t->bias = tf_test_falloc(nbias);
        t->dbias = tf_test_falloc(nbias);
        tf_test_fill_uniform(t->bias, nbias, -c->bias_amp, c->bias_amp, seed + 2);
        tf_test_fill_const(t->dbias, nbias, NAN); /* assigned, never read */
    }
    tf_attn_args *a = &t->a;
    a->nb = c->nb; a->no = c->no; a->nh = c->nh; a->L = c->L; a->d = c->d;
    a->scale = 1.0f / sqrtf((float)c->d);
    const long part = c->fused ? t->C : t->nrows * t->row; /* offset between q, k, v */
    a->q = mkview(t->qkv, 0, c, t->row);
    a->k = mkview(t->qkv, part, c, t->row);
    a->v = mkview(t->qkv, 2 * part, c, t->row);
    a->dq = mkview(t->dqkv, 0, c, t->row);
    a->dk = mkview(t->dqkv, part, c, t->row);
    a->dv = mkview(t->dqkv, 2 * part, c, t->row);
    attn_case plain = *c;
    plain.l_major = 0;
    a->out = mkview(t->out, 0, &plain, t->C);
    a->dout = mkview(t->dout, 0, &plain, t->C);
    a->bias = t->bias;
    a->bias_sb = (long)c->L * c->L * c->nh;
    a->bias_si = (long)c->L * c->nh;
    a->bias_sj = c->nh;
    a->bias_sh = 1;
    a->lse = t->lse;
    a->dbias = t->dbias;
    a->work = t->work;
}

static void attn_free(attn_bufs *t) {
    free(t->qkv); free(t->dqkv); free(t->out); free(t->dout); free(t->lse); free(t->work);
    free(t->bias); free(t->dbias);
}

/* Materialised double reference: out, lse and the analytic gradients. Also
 * returns smag = max_ij (scale sum_c |q_c k_c| + |bias_ij|), the magnitude of
 * the terms that make a score. */
typedef struct {
    double *out, *lse, *dq, *dk, *dv, *dbias;
    double smag;
} attn_ref;

static void attn_reference(attn_ref *r, const attn_bufs *t) {
    const tf_attn_args *a = &t->a;
    const int L = a->L, d = a->d;
    const long nout = t->nrows * t->C, nbias = (long)a->nb * L * L * a->nh;
    r->out = tf_test_dalloc(nout);
    r->lse = tf_test_dalloc((long)a->nb * a->no * a->nh * L);
    r->dq = tf_test_dalloc(nout); r->dk = tf_test_dalloc(nout); r->dv = tf_test_dalloc(nout);
    r->dbias = tf_test_dalloc(nbias);
    memset(r->dbias, 0, nbias * sizeof(double));
    memset(r->dk, 0, nout * sizeof(double));
    memset(r->dv, 0, nout * sizeof(double));
    r->smag = 0;
    double *S = tf_test_dalloc((long)L * L), *dS = tf_test_dalloc((long)L * L);
    for (int b = 0; b < a->nb; b++)
        for (int o = 0; o < a->no; o++)
            for (int h = 0; h < a->nh; h++) {
                /* outputs indexed [(b, o, l), h*d + c] */
#define RIDX(l, c) ((((long)b * a->no + o) * L + (l)) * t->C + (long)h * d + (c))
#define BIDX(i, j) (b * a->bias_sb + h * a->bias_sh + (i) * a->bias_si + (j) * a->bias_sj)
                for (int i = 0; i < L; i++) {
                    double mx = -INFINITY, sum = 0;
                    for (int j = 0; j < L; j++) {
                        double s = 0, mag = 0;
                        for (int c = 0; c < d; c++) {
                            const double p =
                                vget(&a->q, b, o, i, h, d, c) * vget(&a->k, b, o, j, h, d, c);
                            s += p;
                            mag += fabs(p);
                        }
                        s *= a->scale;
                        mag *= a->scale;
                        if (a->bias) {
                            const double bb = ((const float *)a->bias)[BIDX(i, j)];
                            s += bb;
                            mag += fabs(bb);
                        }
                        r->smag = fmax(r->smag, mag);
                        S[i * L + j] = s;
                        mx = fmax(mx, s);
                    }
                    for (int j = 0; j < L; j++)
                        sum += exp(S[i * L + j] - mx);
                    r->lse[(((long)b * a->no + o) * a->nh + h) * L + i] = mx + log(sum);
                    for (int j = 0; j < L; j++)
                        S[i * L + j] = exp(S[i * L + j] - mx) / sum; /* now P */
                    for (int c = 0; c < d; c++) {
                        double s = 0;
                        for (int j = 0; j < L; j++)
                            s += S[i * L + j] * vget(&a->v, b, o, j, h, d, c);
                        r->out[RIDX(i, c)] = s;
                    }
                }
                for (int i = 0; i < L; i++) {
                    double D = 0;
                    for (int c = 0; c < d; c++)
                        D += vget(&a->dout, b, o, i, h, d, c) * r->out[RIDX(i, c)];
                    for (int j = 0; j < L; j++) {
                        double dp = 0;
                        for (int c = 0; c < d; c++)
                            dp += vget(&a->dout, b, o, i, h, d, c) * vget(&a->v, b, o, j, h, d, c);
                        dS[i * L + j] = S[i * L + j] * (dp - D);
                        if (a->bias)
                            r->dbias[BIDX(i, j)] += dS[i * L + j];
                    }
                }
                for (int i = 0; i < L; i++)
                    for (int c = 0; c < d; c++) {
                        double sq = 0;
                        for (int j = 0; j < L; j++)
                            sq += dS[i * L + j] * vget(&a->k, b, o, j, h, d, c);
                        r->dq[RIDX(i, c)] = a->scale * sq;
                    }
                for (int j = 0; j < L; j++)
                    for (int c = 0; c < d; c++) {
                        double sk = 0, sv = 0;
                        for (int i = 0; i < L; i++) {
                            sk += dS[i * L + j] * vget(&a->q, b, o, i, h, d, c);
                            sv += S[i * L + j] * vget(&a->dout, b, o, i, h, d, c);
                        }
                        r->dk[RIDX(j, c)] = a->scale * sk;
                        r->dv[RIDX(j, c)] = sv;
                    }
#undef RIDX
#undef BIDX
            }
    free(S);
    free(dS);
}

static void attn_ref_free(attn_ref *r) {
    free(r->out); free(r->lse); free(r->dq); free(r->dk); free(r->dv); free(r->dbias);
}

/* Gather a gradient view into [(b, o, l), C] order; count sentinel-damaged pads. */
static void gather_view(float *dst, const tf_attn_view *v, const attn_bufs *t) {
    const tf_attn_args *a = &t->a;
    for (int b = 0; b < a->nb; b++)
        for (int o = 0; o < a->no; o++)
            for (int l = 0; l < a->L; l++)
                for (int h = 0; h < a->nh; h++)
                    for (int c = 0; c < a->d; c++)
                        dst[(((long)b * a->no + o) * a->L + l) * t->C + h * a->d + c] =
                            (float)vget(v, b, o, l, h, a->d, c);
}

/* Runs fwd + bwd on one case and checks everything against the reference.
 * Tolerances: a score carries ~sqrt(d) u smag of rounding, which becomes a
 * relative error of P (twice: in P itself and through lse); exp/log add ~2 u;
 * the sums over j add sqrt(L) u. Normalised to the output's natural scale
 * (max |v| for out, max |ref| for the gradients):
 *   fwd: 8 u (2 sqrt(d) smag + sqrt(L) + 4)
 *   bwd: twice that plus sqrt(d) (dP and D are d-term dot products). */
static void attn_check(const attn_case *c, uint64_t seed) {
    attn_bufs t;
    attn_setup(&t, c, seed);
    g_ops->attn_fwd(g_be, &t.a);
    g_ops->attn_bwd(g_be, &t.a);
    attn_ref r;
    attn_reference(&r, &t);
    const long nout = t.nrows * t.C, nlse = (long)c->nb * c->no * c->nh * c->L;
    const long nbias = (long)c->nb * c->L * c->L * c->nh;
    char what[160];
    const double tf = 8 * U * (2 * sqrt((double)c->d) * r.smag + sqrt((double)c->L) + 4);
    const double tb = 2 * tf + 8 * U * sqrt((double)c->d);
    double vmax = 0;
    float *g = tf_test_falloc(nout);
    gather_view(g, &t.a.v, &t);
    vmax = tf_test_max_abs(g, nout);
#define CASE_NAME(x)                                                                          \
    snprintf(what, sizeof what, "attn %s nb%d no%d nh%d L%d d%d fused%d lmaj%d bias%d", x,     \
             c->nb, c->no, c->nh, c->L, c->d, c->fused, c->l_major, c->bias)
    CASE_NAME("out");
    CHECK_LE(what, tf_test_norm_err(t.out, r.out, nout, vmax), tf);
    CASE_NAME("lse");
    CHECK_LE(what, tf_test_max_abs_err(t.lse, r.lse, nlse),
             tf + 8 * U * tf_test_max_abs_d(r.lse, nlse));
    const tf_attn_view *gv[3] = {&t.a.dq, &t.a.dk, &t.a.dv};
    double *gr[3] = {r.dq, r.dk, r.dv};
    static const char *gn[3] = {"dq", "dk", "dv"};
    for (int k = 0; k < 3; k++) {
        gather_view(g, gv[k], &t);
        CASE_NAME(gn[k]);
        /* floor: the scale of these gradients when they vanish (L = 1) */
        CHECK_LE(what, tf_test_norm_err(g, gr[k], nout, 1e-3), tb);
    }
    if (c->bias) {
        CASE_NAME("dbias");
        CHECK_LE(what, tf_test_norm_err(t.dbias, r.dbias, nbias, 1e-3), tb);
    }
    /* exactly the views' elements were written: the pads still hold the sentinel */
    long bad = 0;
    for (long row = 0; row < t.nqkv / t.row; row++)
        for (long x = t.row - c->pad; x < t.row; x++)
            bad += t.dqkv[row * t.row + x] != SENTINEL;
    assert_int_equal(bad, 0);
    free(g);
    attn_ref_free(&r);
    attn_free(&t);
#undef CASE_NAME
}

static void test_attention(void **state) {
    (void)state;
    static const attn_case cases[] = {
        /* nb no nh  L   d  fused lmaj pad bias qk_std bias_amp */
        {1, 1, 1, 1, 8, 0, 0, 0, 0, 1.0f, 0},
        {1, 1, 1, 1, 16, 1, 0, 2, 1, 1.0f, 1},
        {2, 3, 2, 5, 16, 0, 0, 1, 1, 1.0f, 1},
        {2, 3, 2, 5, 8, 1, 1, 3, 0, 1.0f, 0},
        {1, 2, 3, 23, 32, 1, 0, 3, 1, 1.0f, 2},
        {2, 2, 2, 23, 8, 0, 1, 0, 1, 1.0f, 1},
        {2, 4, 2, 64, 16, 1, 0, 0, 1, 1.0f, 1},   /* MSA row attention shape, fused qkv */
        {1, 5, 4, 16, 16, 1, 1, 0, 0, 1.0f, 0},   /* MSA column attention: rows (b, l, o) */
        {1, 3, 2, 64, 32, 1, 0, 5, 0, 1.0f, 0},   /* triangle attention head size */
        {1, 2, 2, 37, 12, 0, 0, 2, 1, 1.0f, 1},   /* a head size without a special case */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        attn_check(&cases[i], 500 + 10 * i);
}

/* Scores of +-80 (from the bias and from q.k) must stay finite and correct;
 * the tolerance grows with smag as derived above. */
static void test_attention_large_logits(void **state) {
    (void)state;
    static const attn_case cases[] = {
        {1, 2, 2, 5, 8, 0, 0, 0, 1, 0.2f, 80},
        {1, 2, 2, 23, 16, 1, 0, 1, 0, 4.0f, 0}, /* q.k/sqrt(d) ~ +-64 std */
        {1, 1, 2, 1, 8, 1, 0, 0, 1, 6.0f, 80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_bufs t;
        attn_setup(&t, &cases[i], 600 + i);
        g_ops->attn_fwd(g_be, &t.a);
        g_ops->attn_bwd(g_be, &t.a);
        const long nout = t.nrows * t.C;
        assert_true(tf_test_all_finite(t.out, nout));
        assert_true(tf_test_all_finite(t.dqkv, t.nqkv));
        assert_true(tf_test_all_finite(t.lse, (long)t.a.nb * t.a.no * t.a.nh * t.a.L));
        attn_free(&t);
        attn_check(&cases[i], 600 + i);
    }
}

/* dbias (a sum over o) and all other gradients are bit-identical run to run
 * and with one thread instead of two. */
static void test_attention_determinism(void **state) {
    (void)state;
    const attn_case c = {2, 8, 4, 32, 16, 1, 0, 0, 1, 1.0f, 1};
    attn_bufs t;
    attn_setup(&t, &c, 700);
    const long nbias = (long)c.nb * c.L * c.L * c.nh;
    float *db0 = tf_test_falloc(nbias), *g0 = tf_test_falloc(t.nqkv);
    g_ops->attn_fwd(g_be, &t.a);
    g_ops->attn_bwd(g_be, &t.a);
    memcpy(db0, t.dbias, nbias * sizeof(float));
    memcpy(g0, t.dqkv, t.nqkv * sizeof(float));
    g_ops->attn_bwd(g_be, &t.a);
    assert_true(tf_test_bits_equal(db0, t.dbias, nbias));
    assert_true(tf_test_bits_equal(g0, t.dqkv, t.nqkv));
    tf_backend *be1;
    const tf_ops *ops1;
    assert_int_equal(tf_test_cpu_backend_ex(&be1, &ops1, 1, 2), 0);
    ops1->attn_bwd(be1, &t.a);
    tf_cpu_backend_destroy(be1);
    assert_int_equal(tf_test_cpu_backend(&be1, &ops1), 0); /* restore 2 threads */
    tf_cpu_backend_destroy(be1);
    assert_true(tf_test_bits_equal(db0, t.dbias, nbias));
    assert_true(tf_test_bits_equal(g0, t.dqkv, t.nqkv));
    free(db0);
    free(g0);
    attn_free(&t);
}

/* ----------------------------------------------------------------- permute */

/* Reference: walk `in` in order, place each element at its permuted index.
 * No arithmetic except the accumulate add (the same float add): bit-exact. */
static void permute_case(int rank, const int *dims, const int *perm, int accumulate,
                         uint64_t seed) {
    tf_permute_args pa;
    memset(&pa, 0, sizeof pa);
    pa.rank = rank;
    pa.accumulate = accumulate;
    long n = 1, ostr[6];
    for (int k = 0; k < rank; k++) {
        pa.dims[k] = dims[k];
        pa.perm[k] = perm[k];
        n *= dims[k];
    }
    long s = 1;
    for (int ax = rank - 1; ax >= 0; ax--) {
        ostr[ax] = s;
        s *= dims[perm[ax]];
    }
    float *in = tf_test_falloc(n), *out = tf_test_falloc(n), *ref = tf_test_falloc(n);
    tf_test_fill_normal(in, n, 0, 1, seed);
    tf_test_fill_normal(out, n, 0, 1, seed + 1);
    memcpy(ref, out, n * sizeof(float));
    for (long li = 0; li < n; li++) {
        long idx[6], rem = li, lo = 0;
        for (int k = rank - 1; k >= 0; k--) {
            idx[k] = rem % dims[k];
            rem /= dims[k];
        }
        for (int ax = 0; ax < rank; ax++)
            lo += idx[perm[ax]] * ostr[ax];
        ref[lo] = accumulate ? ref[lo] + in[li] : in[li];
    }
    g_ops->permute(g_be, out, in, &pa);
    if (!tf_test_bits_equal(out, ref, n))
        fprintf(stderr, "permute rank %d perm %d%d%d%d%d%d acc %d differs\n", rank, perm[0],
                rank > 1 ? perm[1] : 0, rank > 2 ? perm[2] : 0, rank > 3 ? perm[3] : 0,
                rank > 4 ? perm[4] : 0, rank > 5 ? perm[5] : 0, accumulate);
    assert_true(tf_test_bits_equal(out, ref, n));
    free(in);
    free(out);
    free(ref);
}

static void test_permute(void **state) {
    (void)state;
    uint64_t seed = 800;
    for (int acc = 0; acc <= 1; acc++) {
        permute_case(1, (int[]){7}, (int[]){0}, acc, seed++);
        permute_case(2, (int[]){5, 7}, (int[]){1, 0}, acc, seed++);
        permute_case(2, (int[]){33, 64}, (int[]){1, 0}, acc, seed++);
        permute_case(2, (int[]){300, 257}, (int[]){1, 0}, acc, seed++);
        static const int p3[6][3] = {
            {0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        for (int p = 0; p < 6; p++)
            permute_case(3, (int[]){2, 3, 4}, p3[p], acc, seed++);
        permute_case(4, (int[]){2, 5, 7, 3}, (int[]){0, 2, 1, 3}, acc, seed++);
        permute_case(4, (int[]){2, 5, 7, 3}, (int[]){0, 3, 1, 2}, acc, seed++);
        permute_case(4, (int[]){2, 5, 7, 3}, (int[]){0, 2, 3, 1}, acc, seed++);
        permute_case(4, (int[]){2, 1, 7, 1}, (int[]){3, 2, 1, 0}, acc, seed++);
        /* model shapes: [B,N,N,C] -> [B,C,N,N] (blocked transpose), [B,S,N,C] -> [B,N,S,C] */
        permute_case(4, (int[]){4, 64, 64, 128}, (int[]){0, 3, 1, 2}, acc, seed++);
        permute_case(4, (int[]){4, 128, 64, 64}, (int[]){0, 2, 3, 1}, acc, seed++);
        permute_case(4, (int[]){4, 16, 64, 64}, (int[]){0, 2, 1, 3}, acc, seed++);
        permute_case(5, (int[]){2, 3, 1, 4, 5}, (int[]){4, 2, 0, 3, 1}, acc, seed++);
        permute_case(5, (int[]){3, 4, 5, 6, 7}, (int[]){0, 1, 3, 2, 4}, acc, seed++);
        permute_case(6, (int[]){2, 3, 2, 3, 2, 3}, (int[]){5, 4, 3, 2, 1, 0}, acc, seed++);
        permute_case(6, (int[]){2, 3, 2, 3, 2, 3}, (int[]){1, 0, 3, 2, 5, 4}, acc, seed++);
        permute_case(6, (int[]){1, 1, 1, 1, 1, 1}, (int[]){5, 4, 3, 2, 1, 0}, acc, seed++);
    }
}

/* ------------------------------------------------------------ gated pairs */

/* gate_cmajor_fwd / _bwd are gate_fwd / gate_bwd on the L|R halves followed
 * (fwd) or preceded (bwd) by the permute [B, inner, 2, C] <-> [2, B, C, inner]
 * (inner = rows: [2, C, rows]): the same arithmetic, so the same bits; with the
 * merged layout (a and g in one [rows, 4C] buffer, ld 4C) and separate
 * [rows, 2C] ones (ld 2C) */
static void test_gate_cmajor(void **state) {
    (void)state;
    const long rows = 195; /* 64-row blocks (the CPU's unit) across the b boundaries */
    const int C = 12;
    const size_t n = (size_t)rows * 2 * C;
    for (int merged = 0; merged <= 1; merged++)
    for (long inner = 65; inner <= rows; inner += rows - 65) {
        const long ld = merged ? 4 * C : 2 * C;
        float *x = tf_test_falloc((size_t)rows * ld), *gx = tf_test_falloc(n);
        float *a = tf_test_falloc(n), *g = tf_test_falloc(n), *dyt = tf_test_falloc(n);
        tf_test_fill_normal(x, (size_t)rows * ld, 0.f, 2.f, 960);
        tf_test_fill_normal(gx, n, 0.f, 2.f, 961);
        tf_test_fill_normal(dyt, n, 0.f, 1.f, 962);
        const float *pa = x, *pg = merged ? x + 2 * C : gx; /* strided views */
        for (long r = 0; r < rows; r++)
            for (int c = 0; c < 2 * C; c++) {
                a[r * 2 * C + c] = pa[r * ld + c];
                g[r * 2 * C + c] = pg[r * ld + c];
            }
        /* fused */
        float *lr_t = tf_test_falloc(n), *dx = tf_test_falloc((size_t)rows * ld);
        float *dgs = tf_test_falloc((size_t)rows * ld);
        float *da_v = dx, *dg_v = merged ? dx + 2 * C : dgs;
        g_ops->gate_cmajor_fwd(g_be, lr_t, pa, pg, ld, rows, inner, C, TF_F32);
        g_ops->gate_cmajor_bwd(g_be, da_v, dg_v, dyt, pa, pg, ld, rows, inner, C, TF_F32);
        /* composed */
        float *y = tf_test_falloc(n), *y_t = tf_test_falloc(n), *dy = tf_test_falloc(n);
        float *da = tf_test_falloc(n), *dg = tf_test_falloc(n);
        const int nb = (int)(rows / inner);
        const int fdims[4] = {nb, (int)inner, 2, C}, fperm[4] = {2, 0, 3, 1};
        const int bdims[4] = {2, nb, C, (int)inner}, bperm[4] = {1, 3, 0, 2};
        tf_permute_args pf = {.rank = 4}, pb = {.rank = 4};
        for (int k = 0; k < 4; k++) {
            pf.dims[k] = fdims[k], pf.perm[k] = fperm[k];
            pb.dims[k] = bdims[k], pb.perm[k] = bperm[k];
        }
        g_ops->gate_fwd(g_be, y, a, g, (long)n, TF_F32);
        g_ops->permute(g_be, y_t, y, &pf);
        g_ops->permute(g_be, dy, dyt, &pb);
        g_ops->gate_bwd(g_be, da, dg, dy, a, g, (long)n, TF_F32);
        assert_true(tf_test_bits_equal(lr_t, y_t, n));
        for (long r = 0; r < rows; r++) {
            assert_true(tf_test_bits_equal(da_v + r * ld, da + r * 2 * C, 2 * (size_t)C));
            assert_true(tf_test_bits_equal(dg_v + r * ld, dg + r * 2 * C, 2 * (size_t)C));
        }
        free(x), free(gx), free(a), free(g), free(dyt), free(lr_t), free(dx), free(dgs);
        free(y), free(y_t), free(dy), free(da), free(dg);
    }
}

/* ------------------------------------------- outer product mean backward */

/* opm_bwd against the composition it replaces, in double: with D_b the
 * [N*co, N*co] gradient of the unpermuted outer product, D_b[(i,p),(j,q)] =
 * dop[b,i,j,p,q], dA_b = A_b (D_b^T + D_b) / S (A_b = a[b] as [S, N*co]).
 * fp32 sums of 2 N co products: (3 sqrt(K) + 4) u relative. */
static void opm_bwd_case(int B, int S, int N, int co, uint64_t seed) {
    const long NC = (long)N * co, na = (long)B * S * NC, nd = (long)B * NC * NC;
    float *a = tf_test_falloc((size_t)na), *dop = tf_test_falloc((size_t)nd);
    float *da = tf_test_falloc((size_t)na);
    tf_test_fill_normal(a, (size_t)na, 0.f, 1.f, seed);
    tf_test_fill_normal(dop, (size_t)nd, 0.f, 1.f, seed + 1);
    g_ops->opm_bwd(g_be, da, dop, a, B, S, N, co, TF_F32);
    double num = 0, den = 0;
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (long r = 0; r < NC; r++) { /* r = (i, p) */
                const long i = r / co, p = r % co;
                double ref = 0;
                for (long c = 0; c < NC; c++) { /* c = (j, q) */
                    const long j = c / co, q = c % co;
                    const double drc = dop[(((long)b * N + i) * N + j) * co * co + p * co + q];
                    const double dcr = dop[(((long)b * N + j) * N + i) * co * co + q * co + p];
                    ref += (double)a[((long)b * S + s) * NC + c] * (drc + dcr);
                }
                ref /= S;
                const double d = da[((long)b * S + s) * NC + r] - ref;
                num += d * d, den += ref * ref;
            }
    char what[64];
    snprintf(what, sizeof what, "opm_bwd B%d S%d N%d co%d", B, S, N, co);
    CHECK_LE(what, sqrt(num / den), (3.0 * sqrt(2.0 * NC) + 4.0) * U);
    free(a), free(dop), free(da);
}

static void test_opm_bwd(void **state) {
    (void)state;
    opm_bwd_case(1, 3, 5, 8, 900);
    opm_bwd_case(2, 4, 7, 6, 902);
    opm_bwd_case(2, 16, 12, 32, 904);
}

/* opm_outer against the definition in double: outer_p[b,i,j,p,q] = (1/S)
 * sum_s a[b,s,i,p] a[b,s,j,q]. fp32 sums of S products: (3 sqrt(S) + 4) u
 * relative (as the other sums here). */
static void opm_outer_case(int B, int S, int N, int co, uint64_t seed) {
    const long NC = (long)N * co, na = (long)B * S * NC, no = (long)B * N * N * co * co;
    float *a = tf_test_falloc((size_t)na), *o = tf_test_falloc((size_t)no);
    tf_test_fill_normal(a, (size_t)na, 0.f, 1.f, seed);
    g_ops->opm_outer(g_be, o, a, B, S, N, co, TF_F32);
    double num = 0, den = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++)
                for (int p = 0; p < co; p++)
                    for (int q = 0; q < co; q++) {
                        double ref = 0;
                        for (int s = 0; s < S; s++)
                            ref += (double)a[((long)b * S + s) * NC + (long)i * co + p] *
                                   a[((long)b * S + s) * NC + (long)j * co + q];
                        ref /= S;
                        const double d =
                            o[((((long)b * N + i) * N + j) * co + p) * co + q] - ref;
                        num += d * d, den += ref * ref;
                    }
    char what[64];
    snprintf(what, sizeof what, "opm_outer B%d S%d N%d co%d", B, S, N, co);
    CHECK_LE(what, sqrt(num / den), (3.0 * sqrt((double)S) + 4.0) * U);
    free(a), free(o);
}

static void test_opm_outer(void **state) {
    (void)state;
    opm_outer_case(1, 3, 5, 8, 910);
    opm_outer_case(2, 5, 7, 6, 912);
    opm_outer_case(2, 16, 12, 32, 914);
}

/* ------------------------------------------------------ bcast / sum over mid */

static void test_bcast_sum_mid(void **state) {
    (void)state;
    static const long shapes[][3] = {
        {1, 1, 1}, {3, 7, 5}, {2, 33, 300}, {64, 64, 128}, {1, 5000, 3}};
    uint64_t seed = 900;
    for (size_t s = 0; s < 5; s++) {
        const long O = shapes[s][0], M = shapes[s][1], I = shapes[s][2];
        float *y = tf_test_falloc(O * M * I), *x = tf_test_falloc(O * I);
        float *ref = tf_test_falloc(O * M * I);
        tf_test_fill_normal(y, O * M * I, 0, 1, seed++);
        tf_test_fill_normal(x, O * I, 0, 1, seed++);
        for (long o = 0; o < O; o++)
            for (long m = 0; m < M; m++)
                for (long i = 0; i < I; i++)
                    ref[(o * M + m) * I + i] = y[(o * M + m) * I + i] + x[o * I + i];
        g_ops->add_bcast_mid(g_be, y, x, O, M, I, TF_F32);
        assert_true(tf_test_bits_equal(y, ref, O * M * I)); /* one float add each */
        /* sum_mid: an M-term sum, 8 sqrt(M) u relative to sum |x| (plus the += term) */
        for (int acc = 0; acc <= 1; acc++) {
            float *z = tf_test_falloc(O * I);
            double *rz = tf_test_dalloc(O * I);
            tf_test_fill_normal(z, O * I, 0, 1, seed++);
            double tol = 0;
            for (long o = 0; o < O; o++)
                for (long i = 0; i < I; i++) {
                    double sm = 0, mag = 0;
                    for (long m = 0; m < M; m++) {
                        sm += y[(o * M + m) * I + i];
                        mag += fabs(y[(o * M + m) * I + i]);
                    }
                    rz[o * I + i] = acc ? z[o * I + i] + sm : sm;
                    tol = fmax(tol, 8 * U * (sqrt((double)M) + 2) * (mag + fabs(z[o * I + i])));
                }
            g_ops->sum_mid(g_be, z, y, O, M, I, acc, TF_F32);
            CHECK_LE("sum_mid", tf_test_max_abs_err(z, rz, O * I), tol);
            free(z);
            free(rz);
        }
        free(y); free(x); free(ref);
    }
}

/* ------------------------------------------------------------- elementwise */

/* add/mul/scale/relu are single float operations: bit-exact against the same
 * float expression. Sigmoid: exp (~1 ulp) + add + divide: 4 u relative (plus
 * 1e-37 absolute where the result underflows). Gates add one multiply each. */
static void test_elementwise(void **state) {
    (void)state;
    static const long sizes[] = {1, 7, 100003};
    uint64_t seed = 1000;
    for (size_t si = 0; si < 3; si++) {
        const long n = sizes[si];
        float *a = tf_test_falloc(n), *b = tf_test_falloc(n), *y = tf_test_falloc(n);
        float *e = tf_test_falloc(n), *da = tf_test_falloc(n), *dg = tf_test_falloc(n);
        double *r = tf_test_dalloc(n), *r2 = tf_test_dalloc(n);
        tf_test_fill_normal(a, n, 0, 3, seed++);
        tf_test_fill_normal(b, n, 0, 3, seed++);
        if (n > 10) { /* extreme gate values: underflow/overflow of exp */
            a[0] = -200.0f; a[1] = 200.0f; a[2] = -87.5f; a[3] = 88.5f; a[4] = 0.0f;
        }
        g_ops->add(g_be, y, a, b, n, TF_F32);
        for (long i = 0; i < n; i++) e[i] = a[i] + b[i];
        assert_true(tf_test_bits_equal(y, e, n));
        memcpy(y, a, n * sizeof(float));
        g_ops->mul(g_be, y, y, b, n, TF_F32); /* in place */
        for (long i = 0; i < n; i++) e[i] = a[i] * b[i];
        assert_true(tf_test_bits_equal(y, e, n));
        g_ops->scale(g_be, y, a, -0.3f, n, TF_F32);
        for (long i = 0; i < n; i++) e[i] = -0.3f * a[i];
        assert_true(tf_test_bits_equal(y, e, n));
        g_ops->act_fwd(g_be, TF_ACT_RELU, y, a, n, TF_F32);
        for (long i = 0; i < n; i++) e[i] = a[i] > 0 ? a[i] : 0.0f;
        assert_true(tf_test_bits_equal(y, e, n));
        g_ops->act_bwd(g_be, TF_ACT_RELU, da, b, y, n, TF_F32);
        for (long i = 0; i < n; i++) e[i] = y[i] > 0 ? b[i] : 0.0f;
        assert_true(tf_test_bits_equal(da, e, n));

        memcpy(y, a, n * sizeof(float));
        g_ops->act_fwd(g_be, TF_ACT_SIGMOID, y, y, n, TF_F32); /* in place */
        for (long i = 0; i < n; i++) r[i] = 1.0 / (1.0 + exp(-(double)a[i]));
        assert_int_equal(tf_test_check_close("sigmoid", y, r, n, 1e-37, 4 * U), 0);
        g_ops->act_bwd(g_be, TF_ACT_SIGMOID, da, b, y, n, TF_F32);
        for (long i = 0; i < n; i++) r[i] = (double)b[i] * y[i] * (1.0 - y[i]);
        assert_int_equal(tf_test_check_close("sigmoid_bwd", da, r, n, 1e-37, 4 * U), 0);

        /* gates: y = a sigmoid(g), here g = b */
        g_ops->gate_fwd(g_be, y, a, b, n, TF_F32);
        for (long i = 0; i < n; i++) r[i] = a[i] / (1.0 + exp(-(double)b[i]));
        assert_int_equal(tf_test_check_close("gate_fwd", y, r, n, 1e-37, 6 * U), 0);
        float *res = tf_test_falloc(n);
        tf_test_fill_normal(res, n, 0, 1, seed++);
        for (long i = 0; i < n; i++) r2[i] = res[i] + r[i];
        float *res2 = tf_test_falloc(n); /* out of place: the same floats */
        g_ops->gate_residual_fwd(g_be, res2, res, a, b, n, TF_F32);
        g_ops->gate_residual_fwd(g_be, res, res, a, b, n, TF_F32);
        assert_int_equal(memcmp(res, res2, (size_t)n * sizeof(float)), 0);
        free(res2);
        /* one more rounding of the sum: relative to |res| + |a s| */
        for (long i = 0; i < n; i++) r[i] = fabs(r2[i] - r[i]) + fabs(r[i]);
        double worst = 0;
        for (long i = 0; i < n; i++) worst = fmax(worst, fabs(res[i] - r2[i]) / (r[i] + 1e-37));
        CHECK_LE("gate_residual_fwd", worst, 8 * U);
        float *dy = tf_test_falloc(n);
        tf_test_fill_normal(dy, n, 0, 1, seed++);
        g_ops->gate_bwd(g_be, da, dg, dy, a, b, n, TF_F32);
        for (long i = 0; i < n; i++) {
            const double s = 1.0 / (1.0 + exp(-(double)b[i]));
            r[i] = dy[i] * s;
            r2[i] = (double)dy[i] * a[i] * s * (1 - s);
        }
        assert_int_equal(tf_test_check_close("gate_bwd da", da, r, n, 1e-37, 6 * U), 0);
        /* s (1 - s): 1 - s cancels for s -> 1, relative error u s / (1 - s) */
        for (long i = 0; i < n; i++) {
            const double s = 1.0 / (1.0 + exp(-(double)b[i]));
            if (fabs(dg[i] - r2[i]) > 1e-37 + 8 * U * fabs(r2[i]) * (1 + s / (1 - s + 1e-300)))
                fail_msg("gate_bwd dg[%ld] %.9g vs %.9g", i, (double)dg[i], r2[i]);
        }
        /* in place: da aliases dy */
        memcpy(e, dy, n * sizeof(float));
        g_ops->gate_bwd(g_be, dy, dg, dy, a, b, n, TF_F32);
        assert_true(tf_test_bits_equal(dy, da, n));
        free(res); free(dy);
        free(a); free(b); free(y); free(e); free(da); free(dg); free(r); free(r2);
    }
}

/* --------------------------------------------------------------- embedding */

static void test_embed(void **state) {
    (void)state;
    static const long ns[] = {1, 33, 5000};
    static const int Cs[] = {5, 64};
    const int V = 21;
    uint64_t seed = 1100;
    for (size_t ni = 0; ni < 3; ni++)
        for (size_t ci = 0; ci < 2; ci++) {
            const long n = ns[ni];
            const int C = Cs[ci];
            int32_t *tok = malloc(n * sizeof(int32_t));
            tf_test_rng rng;
            tf_test_rng_init(&rng, seed++);
            for (long t = 0; t < n; t++)
                tok[t] = tf_test_rng_int(&rng, V);
            float *table = tf_test_falloc((long)V * C), *out = tf_test_falloc(n * C);
            tf_test_fill_normal(table, (long)V * C, 0, 0.02f, seed++);
            g_ops->embed_fwd(g_be, out, table, tok, n, C, V);
            for (long t = 0; t < n; t++)
                assert_true(tf_test_bits_equal(out + t * C, table + (long)tok[t] * C, C));
            /* a token outside [0, V) reads nothing and gives a zero row */
            int32_t keep0 = tok[0], keepl = tok[n - 1];
            tok[0] = -3;
            tok[n - 1] = V;
            g_ops->embed_fwd(g_be, out, table, tok, n, C, V);
            for (int c = 0; c < C; c++)
                assert_true(out[c] == 0.0f && out[(n - 1) * C + c] == 0.0f);
            tok[0] = keep0;
            tok[n - 1] = keepl;
            /* bwd: each entry is a sum of count(v) terms onto its old value:
             * 8 sqrt(n) u relative to the sum of magnitudes */
            float *dout = tf_test_falloc(n * C), *dt = tf_test_falloc((long)V * C);
            float *dt2 = tf_test_falloc((long)V * C);
            double *rd = tf_test_dalloc((long)V * C), *mag = tf_test_dalloc((long)V * C);
            tf_test_fill_normal(dout, n * C, 0, 1, seed++);
            tf_test_fill_normal(dt, (long)V * C, 0, 1, seed++);
            memcpy(dt2, dt, (long)V * C * sizeof(float));
            for (long k = 0; k < (long)V * C; k++) {
                rd[k] = dt[k];
                mag[k] = fabs(dt[k]);
            }
            for (long t = 0; t < n; t++)
                for (int c = 0; c < C; c++) {
                    rd[(long)tok[t] * C + c] += dout[t * C + c];
                    mag[(long)tok[t] * C + c] += fabs(dout[t * C + c]);
                }
            g_ops->embed_bwd(g_be, dt, dout, tok, n, C, V);
            double worst = 0;
            for (long k = 0; k < (long)V * C; k++)
                worst = fmax(worst, fabs(dt[k] - rd[k]) / (8 * U * (sqrt((double)n) + 2) * mag[k]));
            CHECK_LE("embed_bwd (err / tol)", worst, 1.0);
            g_ops->embed_bwd(g_be, dt2, dout, tok, n, C, V); /* deterministic */
            assert_true(tf_test_bits_equal(dt, dt2, (long)V * C));
            free(tok); free(table); free(out); free(dout); free(dt); free(dt2); free(rd); free(mag);
        }
}

/* ---------------------------------------------------------------- mse head */

/* pred = dmax sigmoid(logit): 4 u relative. loss: (pred - t)^2 from float pred,
 * so its error is mean(2 |e| |dpred|) + a double sum (negligible).
 * bwd from the op's own pred: 5 float roundings: 8 u relative. */
static void test_mse_head(void **state) {
    (void)state;
    static const long ns[] = {1, 7, 20000};
    const float dmax = 20.0f;
    uint64_t seed = 1200;
    for (size_t ni = 0; ni < 3; ni++) {
        const long n = ns[ni];
        float *logit = tf_test_falloc(n), *tgt = tf_test_falloc(n), *pred = tf_test_falloc(n);
        float *dl = tf_test_falloc(n), loss = -1;
        double *rp = tf_test_dalloc(n), *rd = tf_test_dalloc(n);
        tf_test_fill_normal(logit, n, 0, 2, seed++);
        tf_test_fill_uniform(tgt, n, 0, dmax, seed++);
        g_ops->mse_head_fwd(g_be, pred, &loss, logit, tgt, n, dmax);
        double rl = 0, tl = 0;
        for (long i = 0; i < n; i++) {
            rp[i] = dmax / (1.0 + exp(-(double)logit[i]));
            const double e = rp[i] - tgt[i];
            rl += e * e;
            tl += 2 * fabs(e) * 4 * U * rp[i];
        }
        rl /= n;
        tl = tl / n + 2 * U * rl;
        assert_int_equal(tf_test_check_close("mse pred", pred, rp, n, 0, 4 * U), 0);
        CHECK_LE("mse loss", fabs(loss - rl), tl);
        g_ops->mse_head_bwd(g_be, dl, pred, tgt, n, dmax, NULL);
        for (long i = 0; i < n; i++)
            rd[i] = 2.0 / n * ((double)pred[i] - tgt[i]) * pred[i] * (1.0 - pred[i] / (double)dmax);
        /* pred - t and 1 - pred/dmax cancel: relative error u |pred|/|pred - t| etc. */
        size_t bad = 0;
        for (long i = 0; i < n; i++) {
            const double k = 8 + fabs((double)pred[i]) / (fabs((double)pred[i] - tgt[i]) + 1e-30) +
                             1.0 / (1.0 - pred[i] / (double)dmax + 1e-30);
            bad += !(fabs(dl[i] - rd[i]) <= 1e-37 + k * U * fabs(rd[i]));
        }
        assert_int_equal(bad, 0);
        float loss2 = -1;
        g_ops->mse_head_fwd(g_be, pred, &loss2, logit, tgt, n, dmax);
        assert_true(loss2 == loss);
        free(logit); free(tgt); free(pred); free(dl); free(rp); free(rd);
    }
}

/* ------------------------------------------------------------------- adamw */

/* Two steps against the formula in double. m = b1 m + (1-b1) g can cancel, so
 * m's error is measured against mag(m) = b1 mag(m) + (1-b1) |g| (3 roundings
 * a step); v has no cancellation. The update lr/bc1 * m / (sqrt(v)/sqrt(bc2)
 * + eps) inherits m's error: p's tolerance is 16 u (|p| + lr/bc1 * mag(m) /
 * (sqrt(v)/sqrt(bc2) + eps)), summed over the steps. */
static void test_adamw(void **state) {
    (void)state;
    const long n = 100003;
    float *p = tf_test_falloc(n), *g = tf_test_falloc(n);
    float *m = tf_test_falloc(n), *v = tf_test_falloc(n);
    double *rp = tf_test_dalloc(n), *rm = tf_test_dalloc(n), *rv = tf_test_dalloc(n);
    double *mm = tf_test_dalloc(n), *up = tf_test_dalloc(n);
    tf_test_fill_normal(p, n, 0, 0.02f, 1300);
    tf_test_fill_const(m, n, 0);
    tf_test_fill_const(v, n, 0);
    for (long i = 0; i < n; i++) {
        rp[i] = p[i];
        rm[i] = rv[i] = mm[i] = up[i] = 0;
    }
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    for (int step = 1; step <= 2; step++) {
        tf_test_fill_normal(g, n, 0, 1e-2f, 1300 + step);
        g[0] = 0; /* a zero gradient: only the decay acts */
        const float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
        const float hyper[TF_HYPER_COUNT] = {lr, b1, b2, eps, wd, bc1, bc2, 1.0f, 1.0f, 0.0f};
        g_ops->adamw(g_be, p, NULL, g, m, v, n, hyper, TF_F32);
        for (long i = 0; i < n; i++) {
            rp[i] *= 1.0 - (double)lr * wd;
            rm[i] = (double)b1 * rm[i] + (1.0 - (double)b1) * g[i];
            mm[i] = (double)b1 * mm[i] + (1.0 - (double)b1) * fabs(g[i]);
            rv[i] = (double)b2 * rv[i] + (1.0 - (double)b2) * (double)g[i] * g[i];
            const double den = sqrt(rv[i]) / sqrt((double)bc2) + eps;
            rp[i] -= (double)lr / bc1 * rm[i] / den;
            up[i] += (double)lr / bc1 * mm[i] / den;
        }
    }
    size_t bad = 0;
    for (long i = 0; i < n; i++) {
        bad += !(fabs(p[i] - rp[i]) <= 16 * U * (fabs(rp[i]) + up[i]));
        bad += !(fabs(m[i] - rm[i]) <= 16 * U * mm[i]);
        bad += !(fabs(v[i] - rv[i]) <= 16 * U * rv[i]);
    }
    if (bad)
        fprintf(stderr, "adamw: %zu mismatches\n", bad);
    assert_int_equal(bad, 0);
    free(p); free(g); free(m); free(v); free(rp); free(rm); free(rv); free(mm); free(up);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_types),
        cmocka_unit_test(test_gemm_types_shared_c),
        cmocka_unit_test(test_gemm_f32_bits),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm_determinism),
        cmocka_unit_test(test_layernorm2),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_large_logits),
        cmocka_unit_test(test_attention_determinism),
        cmocka_unit_test(test_permute),
        cmocka_unit_test(test_opm_bwd),
        cmocka_unit_test(test_opm_outer),
        cmocka_unit_test(test_gate_cmajor),
        cmocka_unit_test(test_bcast_sum_mid),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_mse_head),
        cmocka_unit_test(test_adamw),
    };
    return cmocka_run_group_tests_name("cpu_ops", tests, group_setup, group_teardown);
}
