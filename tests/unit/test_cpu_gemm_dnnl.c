/* CPU backend: bf16 GEMMs on oneDNN's matmul (cpu_gemm_dnnl.c) against the
 * widening path (bf16 widened to fp32, OpenBLAS sgemm) on the same inputs,
 * at the model's GEMM shapes, strides, epilogues, beta, R and batches.
 * Skipped where the build has no oneDNN or the CPU no AVX512-BF16.
 *
 * Tolerance. A bf16 x bf16 product is exact in fp32, so both routes sum the
 * same K exact terms in fp32 and differ only in the order. Any order's sum
 * of K terms is within (K - 1) u sum_k |a_ik b_kj| of the exact sum (u =
 * 2^-24, to first order); alpha's product, beta R's product and their sum
 * are three more roundings, so each route is within (K + 2) u m of the exact
 * value, m = |alpha| sum_k |a_ik b_kj| + |beta r_ij| (RELU and DRELU's select
 * do not widen a difference). The two routes then differ by at most
 * c (K + 2) u m with c = 2 (one bound per route), checked per element.
 * A bf16 C is rounded once from each route's fp32 value: the two agree, or
 * (an fp32 value on each side of a rounding boundary) are adjacent bf16
 * values whose midpoint, that boundary, lies within the same bound of the
 * exact value (computed in double). fp32 C variants check the values before
 * any rounding. Columns past N (ldc padding) must stay untouched.
 * The backend counts the GEMMs oneDNN ran: each case says whether the
 * route must be oneDNN's, so a GEMM that silently went elsewhere fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/tf_dtype.h"
#include "testutil.h"

static tf_backend *g_be;
static const tf_ops *g_ops;

static int group_setup(void **state) {
    (void)state;
    return tf_test_cpu_backend(&g_be, &g_ops);
}

static int group_teardown(void **state) {
    (void)state;
    tf_cpu_backend_destroy(g_be);
    return 0;
}

static void skip_without_dnnl(void) {
    if (g_be->bf16_dnnl) return;
#ifdef TF_HAVE_DNNL
    fprintf(stderr, "skipped: this CPU has no AVX512-BF16\n");
#else
    fprintf(stderr, "skipped: built without oneDNN\n");
#endif
    skip();
}

typedef struct {
    int tA, tB, M, N, K, batch;
    long lda, ldb, ldc, sA, sB, sC; /* lda..ldc 0: packed */
    float alpha, beta;
    tf_epilogue epi;
    int rmode;      /* beta scales C (0), a separate R (1), R == C (2) */
    tf_dtype ab, ct; /* 0 (fp32) means bf16 for ab */
    int dnnl;       /* 1: oneDNN must run it; 0: the widening path must */
} gcase;

static float tget(const void *p, tf_dtype t, long i) {
    if (t == TF_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return t == TF_BF16 ? tf_bf16_to_f32(h) : tf_f16_to_f32(h);
}

static void tset(void *p, tf_dtype t, long i, float v) {
    if (t == TF_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == TF_BF16 ? tf_f32_to_bf16(v) : tf_f32_to_f16(v);
}

static uint32_t tbits(const void *p, tf_dtype t, long i) {
    return t == TF_F32 ? tf_f32_bits(((const float *)p)[i]) : ((const uint16_t *)p)[i];
}

static void *talloc(long n, tf_dtype t) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * tf_dtype_size(t));
    assert_non_null(p);
    return p;
}

static void fill(void *p, tf_dtype t, long n, uint64_t seed) {
    tf_test_rng r;
    tf_test_rng_init(&r, seed);
    for (long i = 0; i < n; i++) tset(p, t, i, (float)(2.0 * tf_test_rng_uniform(&r) - 1.0));
}

/* two bf16 values next to each other (same sign, bits one apart) */
static int bf16_adjacent(uint32_t x, uint32_t y) {
    if ((x ^ y) & 0x8000u) return (x & 0x7fffu) == 0 && (y & 0x7fffu) == 0;
    return x == y + 1 || y == x + 1;
}

/* one GEMM both ways; returns the worst |diff| / tol */
static double run_case(gcase c, uint64_t seed) {
    const tf_dtype ab = c.ab ? c.ab : TF_BF16, ct = c.ct;
    const long rA = c.tA ? c.K : c.M, cA = c.tA ? c.M : c.K;
    const long rB = c.tB ? c.N : c.K, cB = c.tB ? c.K : c.N;
    const long lda = c.lda ? c.lda : cA, ldb = c.ldb ? c.ldb : cB, ldc = c.ldc ? c.ldc : c.N;
    const long sC = c.batch > 1 ? c.sC : 0, sA = c.batch > 1 ? c.sA : 0,
               sB = c.batch > 1 ? c.sB : 0;
    /* exactly the bytes the GEMM may touch, so that ASan sees any overrun */
    const long nA = (c.batch - 1) * sA + (rA - 1) * lda + cA;
    const long nB = (c.batch - 1) * sB + (rB - 1) * ldb + cB;
    const long nC = (c.batch - 1) * sC + (c.M - 1) * ldc + ldc;
    void *A = talloc(nA, ab), *B = talloc(nB, ab), *C0 = talloc(nC, ct), *R = talloc(nC, ct);
    void *X = talloc(nC, ct), *Cd = talloc(nC, ct), *Cw = talloc(nC, ct);
    fill(A, ab, nA, seed);
    fill(B, ab, nB, seed + 1);
    fill(C0, ct, nC, seed + 2);
    fill(R, ct, nC, seed + 3);
    fill(X, ct, nC, seed + 4);
    for (long i = 0; i < nC; i += 5) tset(X, ct, i, 0.0f); /* masked by DRELU */
    const float sentinel = 1234.5f;
    for (long p = 0; p < c.batch; p++)
        for (long i = 0; i < c.M; i++) {
            for (long j = c.N; j < ldc; j++) tset(C0, ct, p * sC + i * ldc + j, sentinel);
            if (c.beta == 0.0f || c.rmode == 1) /* C not read */
                for (long j = 0; j < c.N; j++) tset(C0, ct, p * sC + i * ldc + j, NAN);
        }
    const size_t cb = (size_t)nC * tf_dtype_size(ct);
    memcpy(Cd, C0, cb);
    memcpy(Cw, C0, cb);
    tf_gemm_args g = {.transA = c.tA, .transB = c.tB, .M = c.M, .N = c.N, .K = c.K,
                      .alpha = c.alpha, .beta = c.beta, .A = A, .lda = lda, .strideA = sA,
                      .B = B, .ldb = ldb, .strideB = sB, .ldc = ldc, .strideC = sC,
                      .batch = c.batch, .epilogue = c.epi,
                      .aux = c.epi == TF_EPI_DRELU ? X : NULL, .ab_type = ab, .c_type = ct};
    const long n0 = g_be->dnnl_gemms;
    g.C = Cd, g.R = c.rmode == 1 ? R : c.rmode == 2 ? Cd : NULL;
    g_ops->gemm(g_be, &g, "test_dnnl");
    const long ran = g_be->dnnl_gemms - n0;
    g_be->bf16_dnnl = 0;
    g.C = Cw, g.R = c.rmode == 1 ? R : c.rmode == 2 ? Cw : NULL;
    g_ops->gemm(g_be, &g, "test_widen");
    g_be->bf16_dnnl = 1;
    assert_int_equal(g_be->dnnl_gemms - n0, ran); /* the widening path ran the second */
    if (ran != c.dnnl)
        fprintf(stderr, "gemm tA%d tB%d %dx%dx%d b%d: oneDNN ran %ld, want %d\n", c.tA, c.tB,
                c.M, c.N, c.K, c.batch, ran, c.dnnl);
    assert_int_equal(ran, c.dnnl);
    const void *in = c.rmode == 1 ? R : C0; /* what beta scales */
    long bad = 0;
    double worst = 0;
    for (long p = 0; p < c.batch; p++)
        for (long i = 0; i < c.M; i++) {
            for (long j = 0; j < c.N; j++) {
                double s = 0, m = 0;
                for (long k = 0; k < c.K; k++) {
                    const long ia = p * sA + (c.tA ? k * lda + i : i * lda + k);
                    const long ib = p * sB + (c.tB ? j * ldb + k : k * ldb + j);
                    const double t = (double)tget(A, ab, ia) * tget(B, ab, ib);
                    s += t;
                    m += fabs(t);
                }
                const long ic = p * sC + i * ldc + j;
                double ref = c.alpha * s;
                m *= fabs(c.alpha);
                if (c.beta != 0.0f) {
                    ref += c.beta * (double)tget(in, ct, ic);
                    m += fabs(c.beta * (double)tget(in, ct, ic));
                }
                if (c.epi == TF_EPI_RELU && ref < 0) ref = 0;
                if (c.epi == TF_EPI_DRELU && !(tget(X, ct, ic) > 0.0f)) ref = 0;
                const double tol = 2.0 * (c.K + 2) * TF_TEST_U * m + 1e-37;
                const double d = tget(Cd, ct, ic), w = tget(Cw, ct, ic), diff = fabs(d - w);
                int ok = diff <= tol;
                if (!ok && ct == TF_BF16) /* a rounding boundary between the fp32 values */
                    ok = bf16_adjacent(tbits(Cd, ct, ic), tbits(Cw, ct, ic)) &&
                         fabs(ref - 0.5 * (d + w)) <= tol;
                if (ok && diff / tol > worst && ct == TF_F32) worst = diff / tol;
                if (!ok && bad++ < 3)
                    fprintf(stderr, "gemm %s C tA%d tB%d %dx%dx%d b%d epi%d r%d: C[%ld,%ld,%ld] "
                            "oneDNN %.9g, widened %.9g, exact %.9g (tol %.3g)\n",
                            tf_dtype_name(ct), c.tA, c.tB, c.M, c.N, c.K, c.batch, (int)c.epi,
                            c.rmode, p, i, j, d, w, ref, tol);
            }
            for (long j = c.N; j < ldc; j++) {
                const long ic = p * sC + i * ldc + j;
                bad += tbits(Cd, ct, ic) != tbits(C0, ct, ic) || tbits(Cw, ct, ic) != tbits(C0, ct, ic);
            }
        }
    if (getenv("TF_TEST_VERBOSE"))
        fprintf(stderr, "gemm %s C tA%d tB%d %dx%dx%d b%d epi%d r%d: oneDNN %ld, max diff/tol %.3f\n",
                tf_dtype_name(ct), c.tA, c.tB, c.M, c.N, c.K, c.batch, (int)c.epi, c.rmode, ran,
                worst);
    assert_int_equal(bad, 0);
    free(A), free(B), free(C0), free(R), free(X), free(Cd), free(Cw);
    return worst;
}

/* the model's GEMMs (src/model), rows scaled down from the small problem's
 * 16384 pair rows; pair 128, transition 4x, MSA 64 */
static void test_model_shapes(void **state) {
    (void)state;
    skip_without_dnnl();
    const int rows = 2048, cz = 128, L = 64, d = 32, S = 8, N = 16, co = 8;
    const long NC = (long)N * co;
    uint64_t seed = 1000;
    const gcase cases[] = {
        /* linear_fwd: y = x W^T, bf16 y; transition up with RELU */
        {.tB = 1, .M = rows, .N = cz, .K = cz, .batch = 1, .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        {.tB = 1, .M = rows, .N = 4 * cz, .K = cz, .batch = 1, .alpha = 1, .epi = TF_EPI_RELU,
         .ct = TF_BF16, .dnnl = 1},
        /* linear_fwd_res: the stream (fp32) = res + x W^T */
        {.tB = 1, .M = rows, .N = cz, .K = 4 * cz, .batch = 1, .alpha = 1, .beta = 1, .rmode = 1,
         .ct = TF_F32, .dnnl = 1},
        {.tB = 1, .M = rows, .N = cz, .K = cz, .batch = 1, .alpha = 1, .beta = 1, .rmode = 2,
         .ct = TF_F32, .dnnl = 1},
        /* linear_bwd_data: dx = dy W, assigned or accumulated, DRELU through the ReLU */
        {.M = rows, .N = cz, .K = 4 * cz, .batch = 1, .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        {.M = rows, .N = cz, .K = cz, .batch = 1, .alpha = 1, .beta = 1, .ct = TF_BF16, .dnnl = 1},
        {.M = rows, .N = 4 * cz, .K = cz, .batch = 1, .alpha = 1, .epi = TF_EPI_DRELU,
         .ct = TF_BF16, .dnnl = 1},
        {.M = rows, .N = 4 * cz, .K = cz, .batch = 1, .alpha = 1, .beta = 1,
         .epi = TF_EPI_DRELU, .ct = TF_BF16, .dnnl = 1},
        {.M = 300, .N = 70, .K = 33, .batch = 1, .alpha = 1, .beta = 0.5f, .rmode = 1,
         .epi = TF_EPI_DRELU, .ct = TF_F32, .dnnl = 1},
        /* linear_bwd_weight: dW += dy^T x (fp32) */
        {.tA = 1, .M = cz, .N = cz, .K = rows, .batch = 1, .alpha = 1, .beta = 1, .ct = TF_F32,
         .dnnl = 1},
        {.tA = 1, .M = 4 * cz, .N = cz, .K = rows, .batch = 1, .alpha = 1, .beta = 1,
         .ct = TF_F32, .dnnl = 1},
        /* the triangle products: B*C entries of N x N x N */
        {.tA = 1, .M = L, .N = L, .K = L, .batch = 6, .sA = L * L, .sB = L * L, .sC = L * L,
         .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        {.tB = 1, .M = L, .N = L, .K = L, .batch = 6, .sA = L * L, .sB = L * L, .sC = L * L,
         .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        /* channel-major triangle output projection, its weight and data gradients */
        {.tA = 1, .tB = 1, .M = rows, .N = cz, .K = cz, .batch = 1, .alpha = 1, .ct = TF_BF16,
         .dnnl = 1},
        {.tA = 1, .tB = 1, .M = cz, .N = cz, .K = rows, .batch = 1, .alpha = 1, .beta = 1,
         .ct = TF_F32, .dnnl = 1},
        {.tA = 1, .tB = 1, .M = cz, .N = rows, .K = cz, .batch = 1, .alpha = 1, .ct = TF_BF16,
         .dnnl = 1},
        /* attention (unfused): scores, P v and their gradients, per (batch, head) */
        {.tB = 1, .M = L, .N = L, .K = d, .batch = 8, .sA = L * d, .sB = L * d, .sC = L * L,
         .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        {.M = L, .N = d, .K = L, .batch = 8, .sA = L * L, .sB = L * d, .sC = L * d, .alpha = 1,
         .ct = TF_BF16, .dnnl = 1},
        {.tA = 1, .M = L, .N = d, .K = L, .batch = 8, .sA = L * L, .sB = L * d, .sC = L * d,
         .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        /* outer product mean: A^T A / S per sample, weight-first T with a
         * shared W slice, the output into z with R, and a chunk's rows */
        {.tA = 1, .M = NC, .N = NC, .K = S, .batch = 2, .sA = S * NC, .sB = S * NC,
         .sC = NC * NC, .alpha = 1.0f / S, .ct = TF_BF16, .dnnl = 1},
        {.tB = 1, .M = N, .N = cz, .K = co, .batch = 2 * S, .ldb = (long)co * co, .sA = N * co,
         .sB = 0, .ldc = cz, .sC = (long)co * N * cz, .alpha = 1, .ct = TF_BF16, .dnnl = 1},
        {.M = N, .N = N * cz, .K = S * co, .batch = 2, .sA = (long)N * S * co,
         .sB = (long)S * co * N * cz, .sC = (long)N * N * cz, .alpha = 1.0f / S, .beta = 1,
         .rmode = 1, .ct = TF_F32, .dnnl = 1},
        {.tA = 1, .M = 3 * co, .N = NC, .K = S, .batch = 1, .lda = NC, .alpha = 1.0f / S,
         .ct = TF_BF16, .dnnl = 1},
        {.M = S, .N = NC, .K = 3 * co, .batch = 1, .lda = NC, .alpha = 1.0f / S, .beta = 1,
         .ct = TF_BF16, .dnnl = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i], seed += 10);
}

/* odd shapes, every transpose, padded leading dimensions, batch strides
 * with slack, alpha and beta; c_type fp32 and bf16 */
static void test_odd_shapes(void **state) {
    (void)state;
    skip_without_dnnl();
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 64}, {130, 70, 33}};
    uint64_t seed = 2000;
    for (int ci = 0; ci < 2; ci++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int batch = 1; batch <= 3; batch += 2) {
                    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    const int tA = t & 1, tB = t >> 1, pad = (int)(s + t) % 3;
                    const long lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
                    gcase c = {.tA = tA, .tB = tB, .M = M, .N = N, .K = K, .batch = batch,
                               .lda = lda, .ldb = ldb, .ldc = ldc,
                               .sA = (tA ? K : M) * lda + 3, .sB = (tB ? N : K) * ldb + 5,
                               .sC = M * ldc + 7, .alpha = batch > 1 ? 0.75f : 1.25f,
                               .beta = (t & 1) ? -0.5f : 0.0f, .rmode = t >> 1,
                               .epi = (tf_epilogue)((s + t) % 3),
                               .ct = ci ? TF_BF16 : TF_F32, .dnnl = 1};
                    run_case(c, seed += 10);
                }
}

/* a batch stride of 0: one operand shared by every entry (A or B) */
static void test_shared_operand(void **state) {
    (void)state;
    skip_without_dnnl();
    gcase c = {.tB = 1, .M = 40, .N = 24, .K = 48, .batch = 4, .sA = 40 * 48, .sB = 0,
               .sC = 40 * 24, .alpha = 1, .beta = 0.5f, .rmode = 1, .ct = TF_BF16, .dnnl = 1};
    run_case(c, 3000);
    c.sA = 0, c.sB = 24 * 48;
    run_case(c, 3010);
    c.ct = TF_F32;
    run_case(c, 3020);
}

/* what the widening path keeps: entries accumulating into one C (strideC
 * 0), K == 0, fp16 operands, a half C of the other type */
static void test_widening_kept(void **state) {
    (void)state;
    skip_without_dnnl();
    run_case((gcase){.M = 9, .N = 11, .K = 7, .batch = 6, .sA = 63, .sB = 77, .sC = 0,
                     .alpha = 1, .beta = 1, .ct = TF_BF16, .dnnl = 0}, 4000);
    run_case((gcase){.M = 9, .N = 11, .K = 7, .batch = 6, .sA = 63, .sB = 77, .sC = 0,
                     .alpha = 1, .beta = 1, .ct = TF_F32, .dnnl = 0}, 4010);
    run_case((gcase){.M = 5, .N = 6, .K = 0, .batch = 2, .sC = 30, .alpha = 1, .beta = 0.5f,
                     .rmode = 1, .ct = TF_BF16, .dnnl = 0}, 4020);
    run_case((gcase){.M = 33, .N = 17, .K = 20, .batch = 1, .alpha = 1, .ab = TF_F16,
                     .ct = TF_F16, .dnnl = 0}, 4030);
    run_case((gcase){.M = 33, .N = 17, .K = 20, .batch = 1, .alpha = 1, .ct = TF_F16,
                     .dnnl = 0}, 4040);
}

/* more distinct GEMMs than the primitive cache holds, twice over: entries
 * are replaced and made again, and a repeated GEMM reuses its primitive */
static void test_cache_turnover(void **state) {
    (void)state;
    skip_without_dnnl();
    for (int rep = 0; rep < 2; rep++)
        for (int m = 1; m <= 80; m++)
            run_case((gcase){.tB = m & 1, .M = m, .N = 8, .K = 16, .batch = 1, .alpha = 1,
                             .beta = (m & 2) ? 1.0f : 0.0f, .ct = (m & 4) ? TF_F32 : TF_BF16,
                             .dnnl = 1},
                     5000 + (uint64_t)m);
}

/* describe names oneDNN where it runs the bf16 GEMMs, and says why not where
 * they widen */
static void test_describe(void **state) {
    (void)state;
    char desc[256] = "";
    g_ops->describe(g_be, desc, sizeof desc);
    const char *want = "bf16 GEMMs: oneDNN";
    if (!tf_cpu_dnnl_hw())
        want = tf_cpu_dnnl_version() ? "bf16 GEMMs: widened to fp32 (this CPU has no AVX512-BF16)"
                                     : "bf16 GEMMs: widened to fp32 (this build has no oneDNN)";
    if (!strstr(desc, want)) fail_msg("describe: '%s' does not say '%s'", desc, want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_shapes),   cmocka_unit_test(test_odd_shapes),
        cmocka_unit_test(test_shared_operand), cmocka_unit_test(test_widening_kept),
        cmocka_unit_test(test_cache_turnover), cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
