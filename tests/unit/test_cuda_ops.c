/* CUDA backend: every op of tf_ops against the CPU backend, at several shapes
 * (odd ones too), plus determinism (each CUDA op runs twice and must give the
 * same bits), TF32 GEMM, memory accounting and graph capture.
 * Without a usable CUDA device it prints "SKIP: <why>" and exits 77 (ctest:
 * skipped).
 *
 * Output buffers are poisoned with NaN (0xFF bytes) before every op, so an
 * element an op forgets to write fails the check. One line per op and shape:
 *   PASS|FAIL <op> <shape>: rel <||cuda-cpu||/||cpu||> max <max|cuda-cpu|/max|cpu|> tol <t>
 * (rel and max must both be <= tol, all values finite).
 *
 * Tolerances. u = 2^-24. Both backends round, independently; a K-term fp32
 * sum has a normwise error of about 0.4*sqrt(K)*u in each (random-walk
 * rounding), so the difference of two implementations stays below
 *   tol_sum(K) = (3*sqrt(K) + 4) * u
 * with a margin of ~5x (the +4u covers the few roundings around the sum).
 * Ops doing the same single IEEE operation (add, mul, scale, relu, copies,
 * permute, broadcast add, embedding lookup) are checked bit-exact (tol 0).
 * Ops with one expf (sigmoid, gates, softmax entries, the distance head) add
 * the libraries' expf error (CUDA <= 2 ulp, the CPU's expf <= 2 ulp): 8u, and
 * 32u for dg = dy*a*s*(1-s), where 1-s loses up to 4 more bits as s -> 1.
 * Other per-op reasons sit next to each check. TF32 GEMMs: 5e-3 (TF32 keeps
 * 10 mantissa bits: 2^-11 ~ 4.9e-4 per input, and K-term sums of those). */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
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
#include "backend/gpu_plan.h"
#include "testutil.h"

#define U TF_TEST_U

typedef struct {
    tf_backend *be;
    const tf_ops *ops;
} bk;

/* CPU; CUDA kernel level 1 and 3 (the default plan); level 3 with the plan
 * (gpu_plan.h) forcing attention kernel2, 3, 4 or 5 wherever it runs
 * (attn=k2..k5), every GEMM on the library (g_cu3lt, gemm=cublas), every
 * GEMM the mma.sync kernel takes on it (g_cu3, gemm=mma, 3xTF32; the default
 * takes it only where it measured faster), CUDA TF32 (cuBLASLt), and TF32 on
 * the mma.sync kernel (g_tf32mma); g_cu3wg every fp32 GEMM on the wgmma
 * 3xTF32 kernel (gemm=wgmma, where the build and GPU have sm_90a code;
 * elsewhere it is the default backend), and g_cu3wgs the same with one SM
 * under hostemu (HOSTEMU_SMS=1), so that the two-blocks-an-SM schedule for
 * short K runs on small shapes there (on a GPU it is g_cu3wg again) */
static bk g_cpu, g_cu1, g_cu3, g_cu3k2, g_cu3k3, g_cu3k4, g_cu3k5, g_cu3lt, g_tf32, g_tf32mma,
    g_tf32k5, g_cu3wg, g_cu3wgs;
static int g_fail;
/* the default backends' plan: `test_cuda_ops --gpu-plan SPEC` (default: none) */
static tf_gpu_plan g_plan;

static double tol_sum(double K) { return (3.0 * sqrt(K) + 4.0) * U; }
/* 3xTF32 (cuda_gemm_mma.cu): each product carries the split's residue, at
 * most 3 * 2^-22 = 12u relative (a_small*b_small and the roundings of the
 * small parts); and the tensor cores accumulate in fp32 with truncation, not
 * rounding (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021):
 * each of the 3K/8 MMAs into an accumulator may lose up to one ulp (2u) of
 * it. Worst case, on top of tol_sum: 12u + 0.75 K u. (Measured on the H200:
 * 4e-6 at K = 3000, 7e-6 at K = 16384, 10-100x inside; the bound still fails
 * an indexing error, and 1xTF32, 2^-11 per product, at K <= 128.) */
static double tol_x3(double K) { return tol_sum(K) + (12.0 + 0.75 * K) * U; }

/* ---- buffers on a backend ---- */
static void *b_alloc(bk b, size_t n)
{
    void *p = NULL;
    assert_int_equal(b.ops->alloc(b.be, &p, n * sizeof(float) + 16), 0);
    return p;
}
static float *b_put(bk b, const float *h, size_t n)
{
    float *d = b_alloc(b, n);
    b.ops->upload(b.be, d, h, n * sizeof(float));
    return d;
}
static float *b_nan(bk b, size_t n) /* poisoned output */
{
    float *d = b_alloc(b, n);
    unsigned char *h = malloc(n * sizeof(float) + 1);
    memset(h, 0xFF, n * sizeof(float) + 1);
    b.ops->upload(b.be, d, h, n * sizeof(float));
    free(h);
    return d;
}
static void b_get(bk b, float *h, const float *d, size_t n)
{
    b.ops->sync(b.be);
    b.ops->download(b.be, h, d, n * sizeof(float));
}
static void b_free(bk b, void *p) { b.ops->free(b.be, p); }
static float *rnd(size_t n, float sd, uint64_t seed)
{
    float *h = tf_test_falloc(n ? n : 1);
    tf_test_fill_normal(h, n, 0.f, sd, seed);
    return h;
}

/* ---- comparison ---- */
static void check(const char *op, const char *shape, const float *got, const float *ref,
                  size_t n, double tol)
{
    double num = 0, den = 0, dmax = 0, rmax = 0;
    int finite = 1;
    for (size_t i = 0; i < n; ++i) {
        const double d = (double)got[i] - ref[i];
        if (!isfinite(got[i])) finite = 0;
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > dmax) dmax = fabs(d);
        if (fabs(ref[i]) > rmax) rmax = fabs(ref[i]);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const double mx = rmax > 0 ? dmax / rmax : dmax;
    const int ok = finite && rel <= tol && mx <= tol;
    printf("%s %s %s: rel %.2e max %.2e tol %.2e%s\n", ok ? "PASS" : "FAIL", op, shape, rel, mx,
           tol, finite ? "" : " (non-finite values)");
    if (!ok) ++g_fail;
}
/* check() for an output that may cancel to ~0 (dbias at L = 1, where dS =
 * P (dP - D) with P = 1 and dP = D exactly): errors are measured against
 * `scale`, the magnitude of the operands of the cancelling subtraction, when
 * that is larger than the output itself. */
static void check_scaled(const char *op, const char *shape, const float *got, const float *ref,
                         size_t n, double tol, double scale)
{
    double num = 0, den = 0, dmax = 0, rmax = 0;
    int finite = 1;
    for (size_t i = 0; i < n; ++i) {
        const double d = (double)got[i] - ref[i];
        if (!isfinite(got[i])) finite = 0;
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > dmax) dmax = fabs(d);
        if (fabs(ref[i]) > rmax) rmax = fabs(ref[i]);
    }
    if (den < (double)n * scale * scale) den = (double)n * scale * scale;
    if (rmax < scale) rmax = scale;
    const double rel = sqrt(num / den), mx = dmax / rmax;
    const int ok = finite && rel <= tol && mx <= tol;
    printf("%s %s %s: rel %.2e max %.2e tol %.2e (scale %.2e)%s\n", ok ? "PASS" : "FAIL", op,
           shape, rel, mx, tol, scale, finite ? "" : " (non-finite values)");
    if (!ok) ++g_fail;
}
static void check_same(const char *op, const char *shape, const float *a, const float *b,
                       size_t n)
{
    const int ok = tf_test_bits_equal(a, b, n);
    if (!ok) {
        printf("FAIL %s %s: two runs differ (not deterministic)\n", op, shape);
        ++g_fail;
    }
}
static void done(void) { assert_int_equal(g_fail, 0); }

/* ---- GEMM ---- */
typedef struct {
    int ta, tb, M, N, K, batch;
    long lda, ldb, ldc, sA, sB, sC;
    float alpha, beta;
    tf_epilogue epi;
} gshape;

static void run_gemm(bk b, const gshape *s, const float *hA, const float *hB, const float *hC,
                     float *out, size_t nA, size_t nB, size_t nC)
{
    float *A = b_put(b, hA, nA), *B = b_put(b, hB, nB);
    float *C = s->beta != 0.f ? b_put(b, hC, nC) : b_nan(b, nC);
    tf_gemm_args a = {s->ta, s->tb, s->M, s->N, s->K, s->alpha, s->beta, A, s->lda, s->sA,
                      B, s->ldb, s->sB, C, s->ldc, s->sC, s->batch, s->epi, NULL, NULL, 0};
    b.ops->gemm(b.be, &a, "test_gemm");
    b_get(b, out, C, nC);
    b_free(b, A);
    b_free(b, B);
    b_free(b, C);
}

/* the [M,N] parts of the batch's C blocks (padding of C is never written) */
static void gemm_parts(const gshape *s, const float *c, float *x)
{
    for (int p = 0; p < s->batch; ++p)
        for (int i = 0; i < s->M; ++i)
            for (int j = 0; j < s->N; ++j)
                x[((size_t)p * s->M + i) * s->N + j] = c[(size_t)p * s->sC + (size_t)i * s->ldc + j];
}

/* CPU reference; level 3 twice (3xTF32 on the tensor cores; split K among
 * them: same bits), level 3 on cuBLASLt; level 3 on timed cuBLASLt plans twice
 * (the first call of a shape times the candidates, the second reuses the
 * chosen one: same bits), level 1 (cuBLAS, the RELU epilogue in cuBLASLt at batch
 * 1 only), TF32 */
static void gemm_case(int ta, int tb, int M, int N, int K, int batch, int pad, float beta,
                      tf_epilogue epi)
{
    gshape s = {ta, tb, M, N, K, batch, 0, 0, 0, 0, 0, 0, 0.5f, beta, epi};
    const long ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    s.lda = ac + pad;
    s.ldb = bc + pad;
    s.ldc = N + pad;
    s.sA = ar * s.lda + pad;
    s.sB = br * s.ldb;
    s.sC = (long)M * s.ldc + 2 * pad;
    const size_t nA = (size_t)(s.sA * batch), nB = (size_t)(s.sB * batch),
                 nC = (size_t)(s.sC * batch);
    float *hA = rnd(nA, 1.f, 11), *hB = rnd(nB, 1.f, 12), *hC = rnd(nC, 1.f, 13);
    float *ref = tf_test_falloc(nC), *g1 = tf_test_falloc(nC), *g2 = tf_test_falloc(nC);
    char shape[160];
    snprintf(shape, sizeof shape, "%c%c M=%d N=%d K=%d batch=%d pad=%d beta=%g%s", ta ? 'T' : 'N',
             tb ? 'T' : 'N', M, N, K, batch, pad, beta, epi == TF_EPI_RELU ? " relu" : "");
    run_gemm(g_cpu, &s, hA, hB, hC, ref, nA, nB, nC);
    const size_t nout = (size_t)M * N * batch;
    float *r = tf_test_falloc(nout), *x = tf_test_falloc(nout), *y = tf_test_falloc(nout);
    gemm_parts(&s, ref, r);
    /* one backend against the reference; twice: the second run the same bits */
#define GEMM_ON(b, op, tol, twice)                                  \
    do {                                                            \
        run_gemm(b, &s, hA, hB, hC, g1, nA, nB, nC);                \
        gemm_parts(&s, g1, x);                                      \
        check(op, shape, x, r, nout, tol);                          \
        if (twice) {                                                \
            run_gemm(b, &s, hA, hB, hC, g2, nA, nB, nC);            \
            gemm_parts(&s, g2, y);                                  \
            check_same(op, shape, x, y, nout);                      \
        }                                                           \
    } while (0)
    GEMM_ON(g_cu3, "gemm", tol_x3(K), 1);
    GEMM_ON(g_cu3wg, "gemm(wgmma)", tol_x3(K), 1); /* the same 3xTF32 products */
    GEMM_ON(g_cu3wgs, "gemm(wgmma, short K schedule)", tol_x3(K), 1);
    GEMM_ON(g_cu3lt, "gemm(cuBLASLt)", tol_sum(K), 0);
    GEMM_ON(g_cu1, "gemm(level=1)", tol_sum(K), 0);
    GEMM_ON(g_tf32, "gemm_tf32", 5e-3, 0);
    GEMM_ON(g_tf32mma, "gemm_tf32(mma)", 5e-3, 1);
#undef GEMM_ON
    free(hA), free(hB), free(hC), free(ref), free(g1), free(g2), free(r), free(x), free(y);
}

static void test_gemm(void **state)
{
    (void)state;
    g_fail = 0;
    static const int shp[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 64, 17}, {64, 128, 128}, {5, 33, 256}};
    for (int t = 0; t < 4; ++t)
        for (size_t k = 0; k < sizeof shp / sizeof shp[0]; ++k) {
            const int M = shp[k][0], N = shp[k][1], K = shp[k][2];
            gemm_case(t & 1, t >> 1, M, N, K, 1, 0, 0.f, TF_EPI_NONE);
            gemm_case(t & 1, t >> 1, M, N, K, 3, 3, 1.f, TF_EPI_NONE); /* C read: saved while timed */
            gemm_case(t & 1, t >> 1, M, N, K, 1, 1, 0.f, TF_EPI_RELU); /* cuBLASLt epilogue */
            gemm_case(t & 1, t >> 1, M, N, K, 2, 0, 0.f, TF_EPI_RELU); /* level 3: epilogue; 1: kernel */
            gemm_case(t & 1, t >> 1, M, N, K, 3, 1, 0.f, TF_EPI_RELU); /* unaligned batch strides */
        }
    /* K = 0: C = beta C (cuBLAS at every level; beta 0 does not read C) */
    gemm_case(0, 0, 7, 5, 0, 1, 1, 0.f, TF_EPI_NONE);
    gemm_case(1, 1, 7, 5, 0, 2, 1, 0.5f, TF_EPI_NONE);
    gemm_case(0, 1, 7, 5, 0, 2, 1, 0.f, TF_EPI_RELU);
    /* beta != 0 with C larger than the backend's scratch area: the copy of C
     * kept while the candidates are timed is a temporary allocation */
    gemm_case(0, 1, 1100, 1000, 8, 1, 0, 1.f, TF_EPI_NONE);
    gemm_case(1, 0, 300, 1000, 8, 4, 2, -0.5f, TF_EPI_NONE);
    /* the tensor-core kernel's paths: several tiles with ragged edges, the
     * 128 x 128 tiles (at least 2 per SM: 8 under hostemu's 4 SMs), split K
     * (at most one tile per two SMs and K >= 1024), with and without 16-byte
     * copies, C read, RELU */
    for (int t = 0; t < 4; ++t) {
        gemm_case(t & 1, t >> 1, 200, 76, 100, 2, 0, 0.f, TF_EPI_NONE);
        gemm_case(t & 1, t >> 1, 256, 516, 36, 2, 0, 0.5f, TF_EPI_RELU);
        gemm_case(t & 1, t >> 1, 40, 36, 3000, 1, 0, 0.f, TF_EPI_NONE);
        gemm_case(t & 1, t >> 1, 40, 36, 3001, 2, 1, 1.f, TF_EPI_NONE);
        /* short K over at least 3 tiles per SM: wgmma on two blocks an SM
         * (hostemu's 4 SMs: 16 tiles; the H200's 132: 432, below) */
        gemm_case(t & 1, t >> 1, 512, 400, 40, 1, 0, 0.5f, TF_EPI_NONE);
        if (!getenv("TF_TEST_HOSTEMU")) { /* GPU-sized: hours in the emulator */
            gemm_case(t & 1, t >> 1, 3000, 2200, 200, 1, 1, 1.f, TF_EPI_NONE);
            gemm_case(t & 1, t >> 1, 2048, 2176, 24, 1, 0, 0.f, TF_EPI_RELU);
            gemm_case(t & 1, t >> 1, 128, 128, 16384, 1, 0, 0.f, TF_EPI_NONE);
            gemm_case(t & 1, t >> 1, 64, 100, 16385, 3, 1, 1.f, TF_EPI_NONE);
        }
    }
    done();
}

/* ---- GEMM with the residual input R and the DRELU epilogue ----
 * Against a float64 reference computed here (the CPU backend's own R/DRELU
 * are checked against one in test_cpu_ops). rmode: 0 beta scales C; 1 a
 * separate R (C is then only written: poisoned with NaN; R must come back
 * unchanged); 2 R == C. The mask aux (normal, a third of it exactly 0, which
 * masks too) has C's layout. Everything of C outside the [M, N] parts (row
 * padding, gaps between matrices) must come back bit-identical. */
static bk g_blas; /* level 3 without cuBLASLt algorithms under hostemu: the cuBLAS fallback */

/* a plan over the default: the GEMM, wide-split and attention policies */
static tf_gpu_plan plan_of(tf_gpu_gemm_policy gemm, tf_gpu_dw_policy dw, tf_gpu_attn_policy attn)
{
    tf_gpu_plan p;
    memset(&p, 0, sizeof p);
    p.gemm = gemm, p.dw = dw, p.attn = attn;
    return p;
}

/* sms: the SM count hostemu reports (HOSTEMU_SMS; NULL: its default; a GPU
 * reports its own) */
static int bk_create_rc(bk *b, int level, int tf32, const tf_gpu_plan *plan, const char *sms,
                        char *err, size_t errlen)
{
    tf_backend_opts o;
    memset(&o, 0, sizeof o);
    o.kernel_level = level;
    o.tf32 = tf32;
    o.gpu_plan = plan;
    if (sms) setenv("HOSTEMU_SMS", sms, 1);
    const int rc = tf_cuda_backend_create(&b->be, &b->ops, &o, err, errlen);
    if (sms) unsetenv("HOSTEMU_SMS");
    return rc;
}

static bk bk_create(int level, int tf32, const tf_gpu_plan *plan, const char *sms)
{
    bk b;
    char err[256];
    const int rc = bk_create_rc(&b, level, tf32, plan, sms, err, sizeof err);
    if (rc) fprintf(stderr, "cuda backend: %s\n", err);
    assert_int_equal(rc, 0);
    return b;
}

typedef struct {
    gshape s;
    int rmode;
    size_t nA, nB, nC;
    const float *hA, *hB, *hC, *hR, *hX;
} rcase;

static void run_gemm_r(bk b, const rcase *c, float *out)
{
    const gshape *s = &c->s;
    float *A = b_put(b, c->hA, c->nA), *B = b_put(b, c->hB, c->nB);
    float *C = c->rmode != 1 && s->beta != 0.f ? b_put(b, c->hC, c->nC) : b_nan(b, c->nC);
    float *R = c->rmode == 1 ? b_put(b, c->hR, c->nC) : c->rmode == 2 ? C : NULL;
    float *X = s->epi == TF_EPI_DRELU ? b_put(b, c->hX, c->nC) : NULL;
    tf_gemm_args a = {s->ta, s->tb, s->M, s->N, s->K, s->alpha, s->beta, A, s->lda, s->sA,
                      B, s->ldb, s->sB, C, s->ldc, s->sC, s->batch, s->epi, R, X, 0};
    b.ops->gemm(b.be, &a, "test_gemm_r");
    b_get(b, out, C, c->nC);
    if (c->rmode == 1) { /* R is only read */
        float *r = tf_test_falloc(c->nC);
        b_get(b, r, R, c->nC);
        if (!tf_test_bits_equal(r, c->hR, c->nC)) {
            printf("FAIL gemm R M=%d N=%d K=%d: R was written\n", s->M, s->N, s->K);
            ++g_fail;
        }
        free(r);
        b_free(b, R);
    }
    if (X) b_free(b, X);
    b_free(b, A), b_free(b, B), b_free(b, C);
}

/* C outside the [M, N] parts as it was before the call */
static void check_guard(const char *op, const char *shape, const rcase *c, const float *got)
{
    const gshape *s = &c->s;
    const int poisoned = c->rmode == 1 || s->beta == 0.f;
    size_t bad = 0;
    for (size_t i = 0; i < c->nC; ++i) {
        const long p = (long)i / s->sC, o = (long)i % s->sC, r = o / s->ldc, col = o % s->ldc;
        if (p < s->batch && r < s->M && col < s->N) continue;
        uint32_t g, w = 0xFFFFFFFFu;
        memcpy(&g, &got[i], 4);
        if (!poisoned) memcpy(&w, &c->hC[i], 4);
        bad += g != w;
    }
    if (bad) {
        printf("FAIL %s %s: %zu elements outside the matrices written\n", op, shape, bad);
        ++g_fail;
    }
}

/* float64 reference of the [M, N] parts */
static void gemm_ref_r(const rcase *c, float *r)
{
    const gshape *s = &c->s;
    const float *in = c->rmode == 1 ? c->hR : c->hC;
    for (int p = 0; p < s->batch; ++p)
        for (int i = 0; i < s->M; ++i)
            for (int j = 0; j < s->N; ++j) {
                const float *A = c->hA + (size_t)p * s->sA, *B = c->hB + (size_t)p * s->sB;
                double acc = 0;
                for (int k = 0; k < s->K; ++k)
                    acc += (double)(s->ta ? A[(size_t)k * s->lda + i] : A[(size_t)i * s->lda + k]) *
                           (s->tb ? B[(size_t)j * s->ldb + k] : B[(size_t)k * s->ldb + j]);
                const size_t o = (size_t)p * s->sC + (size_t)i * s->ldc + j;
                double v = s->alpha * acc;
                if (s->beta != 0.f) v += (double)s->beta * in[o];
                if (s->epi == TF_EPI_RELU && v < 0) v = 0;
                if (s->epi == TF_EPI_DRELU && !(c->hX[o] > 0.f)) v = 0;
                r[((size_t)p * s->M + i) * s->N + j] = (float)v;
            }
}

/* runs on every GEMM backend of gemm_case plus the cuBLAS fallback; nb, bs:
 * extra backends and their names (split K, test_gemm_split) */
static void gemm_r_case_on(int ta, int tb, int M, int N, int K, int batch, int pad, float beta,
                           tf_epilogue epi, int rmode, const bk *xb, const char *const *xname,
                           int nx, int all)
{
    rcase c;
    memset(&c, 0, sizeof c);
    gshape *s = &c.s;
    s->ta = ta, s->tb = tb, s->M = M, s->N = N, s->K = K, s->batch = batch;
    s->alpha = 0.5f, s->beta = beta, s->epi = epi;
    c.rmode = rmode;
    const long ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    s->lda = ac + pad;
    s->ldb = bc + pad;
    s->ldc = N + pad;
    s->sA = ar * s->lda + pad;
    s->sB = br * s->ldb;
    s->sC = (long)M * s->ldc + 2 * pad;
    c.nA = (size_t)(s->sA * batch), c.nB = (size_t)(s->sB * batch), c.nC = (size_t)(s->sC * batch);
    float *hA = rnd(c.nA, 1.f, 71), *hB = rnd(c.nB, 1.f, 72), *hC = rnd(c.nC, 1.f, 73);
    float *hR = rnd(c.nC, 1.f, 74), *hX = rnd(c.nC, 1.f, 75);
    for (size_t i = 0; i < c.nC; i += 3) hX[i] = 0.f; /* a ReLU output of exactly 0 masks */
    c.hA = hA, c.hB = hB, c.hC = hC, c.hR = hR, c.hX = hX;
    const size_t nout = (size_t)M * N * batch;
    float *r = tf_test_falloc(nout), *x = tf_test_falloc(nout), *y = tf_test_falloc(nout);
    float *g1 = tf_test_falloc(c.nC), *g2 = tf_test_falloc(c.nC);
    char shape[192];
    snprintf(shape, sizeof shape, "%c%c M=%d N=%d K=%d batch=%d pad=%d beta=%g%s%s",
             ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, batch, pad, beta,
             epi == TF_EPI_RELU ? " relu" : epi == TF_EPI_DRELU ? " drelu" : "",
             rmode == 1 ? " R" : rmode == 2 ? " R=C" : "");
    gemm_ref_r(&c, r);
#define GEMM_R_ON(b, op, tol, twice)                                \
    do {                                                            \
        run_gemm_r(b, &c, g1);                                      \
        gemm_parts(s, g1, x);                                       \
        check(op, shape, x, r, nout, tol);                          \
        check_guard(op, shape, &c, g1);                             \
        if (twice) {                                                \
            run_gemm_r(b, &c, g2);                                  \
            gemm_parts(s, g2, y);                                   \
            check_same(op, shape, x, y, nout);                      \
        }                                                           \
    } while (0)
    if (all) {
        GEMM_R_ON(g_cu3, "gemm_r", tol_x3(K), 1);
        GEMM_R_ON(g_cu3wg, "gemm_r(wgmma)", tol_x3(K), 1);
        GEMM_R_ON(g_cu3wgs, "gemm_r(wgmma, short K schedule)", tol_x3(K), 0);
        GEMM_R_ON(g_cu3lt, "gemm_r(cuBLASLt)", tol_sum(K), 0);
        GEMM_R_ON(g_cu1, "gemm_r(level=1)", tol_sum(K), 0);
        setenv("HOSTEMU_LT_NONE", "all", 1); /* hostemu: no cuBLASLt algorithm */
        GEMM_R_ON(g_blas, "gemm_r(cuBLAS fallback)", tol_sum(K), 0);
        unsetenv("HOSTEMU_LT_NONE");
        GEMM_R_ON(g_tf32, "gemm_r_tf32", 5e-3, 0);
        GEMM_R_ON(g_tf32mma, "gemm_r_tf32(mma)", 5e-3, 0);
    }
    /* the extra backends twice, the second run with the blocks in another
     * order under hostemu (on a GPU, just a second run): the same bits */
    for (int i = 0; i < nx; ++i) {
        run_gemm_r(xb[i], &c, g1);
        gemm_parts(s, g1, x);
        /* names ending in "tf32)" run one TF32 product */
        const size_t ln = strlen(xname[i]);
        const int tf = ln >= 5 && !strcmp(xname[i] + ln - 5, "tf32)");
        check(xname[i], shape, x, r, nout, tf ? 5e-3 : tol_x3(K));
        check_guard(xname[i], shape, &c, g1);
        setenv("HOSTEMU_BLOCK_ORDER", i & 1 ? "reverse" : "shuffle", 1);
        run_gemm_r(xb[i], &c, g2);
        unsetenv("HOSTEMU_BLOCK_ORDER");
        gemm_parts(s, g2, y);
        check_same(xname[i], shape, x, y, nout);
    }
#undef GEMM_R_ON
    free(hA), free(hB), free(hC), free(hR), free(hX), free(r), free(x), free(y), free(g1),
        free(g2);
}

static void gemm_r_case(int ta, int tb, int M, int N, int K, int batch, int pad, float beta,
                        tf_epilogue epi, int rmode)
{
    gemm_r_case_on(ta, tb, M, N, K, batch, pad, beta, epi, rmode, NULL, NULL, 0, 1);
}

static void test_gemm_r(void **state)
{
    (void)state;
    g_fail = 0;
    const tf_gpu_plan lib = plan_of(TF_GPU_GEMM_CUBLAS, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
    g_blas = bk_create(3, 0, &lib, NULL);
    /* every path: M, N < 16 (no tensor-core kernel: cuBLASLt at level 3), small
     * and big mma.sync tiles, ragged wgmma tiles, split K (mma.sync, wgmma),
     * odd ldc (no float2 stores), batch > 1 with unaligned strides, full
     * aligned wgmma tiles (its epilogue's float4 path); per shape
     * the five combinations of R (separate, == C) and DRELU, with rotating
     * transposes, plus beta 0 with R (R not read) and RELU after R */
    static const int shp[][5] = {/* M, N, K, batch, pad */
                                 {7, 5, 3, 2, 1},     {33, 64, 17, 1, 0}, {200, 76, 100, 2, 0},
                                 {130, 136, 40, 1, 1}, {40, 36, 3000, 2, 0}, {40, 36, 2001, 1, 1},
                                 {256, 128, 136, 2, 0}};
    for (size_t k = 0; k < sizeof shp / sizeof shp[0]; ++k)
        for (int cmb = 0; cmb < 5; ++cmb) {
            const int t = (int)(cmb + k) % 4, rmode = cmb < 4 ? 1 + (cmb & 1) : 0;
            const tf_epilogue epi = cmb >= 2 ? TF_EPI_DRELU : TF_EPI_NONE;
            const float beta = rmode ? (cmb & 2 ? -0.75f : 1.f) : 0.f;
            gemm_r_case(t & 1, t >> 1, shp[k][0], shp[k][1], shp[k][2], shp[k][3], shp[k][4],
                        beta, epi, rmode);
        }
    gemm_r_case(0, 1, 64, 80, 48, 2, 0, 0.f, TF_EPI_DRELU, 1); /* beta 0: R not read */
    gemm_r_case(1, 0, 64, 80, 48, 1, 1, 1.f, TF_EPI_RELU, 1);
    /* K = 0: C = beta R (cuBLAS at every level after the copy) */
    gemm_r_case(0, 0, 7, 5, 0, 2, 1, 0.5f, TF_EPI_NONE, 1);
    gemm_r_case(1, 1, 7, 5, 0, 2, 1, 0.5f, TF_EPI_DRELU, 2);
    tf_cuda_backend_destroy(g_blas.be);
    done();
}

/* Split K on the tensor-core kernels: the weight-gradient shapes (few tiles,
 * long K; transA: dy^T x). Four backends (plans, gpu_plan.h):
 *   - gemm=wgmma: the default wide split (dw=auto: one wave of splits, wgmma
 *     on full 128 x 128 tiles, the partials added by a separate kernel in a
 *     fixed order), and split K left to the GEMM kernels (other shapes: up
 *     to 16 splits whose partials the last split to arrive adds in split
 *     order);
 *   - gemm=wgmma, dw=lt: the capped split on every shape;
 *   - dw=mma: the wide split on mma.sync only;
 *   - tf32, dw=mma: the wide split on mma.sync with one TF32 product.
 * Ragged last splits, beta 0 / 1, R, DRELU, batches, odd N (scalar partials
 * and reduce). The backends report the H200's 132 SMs (HOSTEMU_SMS under
 * hostemu; a GPU reports its own), so the splits are the ones the H200 would
 * run. Each case runs twice, the second time with the blocks in another
 * order under hostemu (another split arrives last): the same bits. */
static void test_gemm_split(void **state)
{
    (void)state;
    g_fail = 0;
    const tf_gpu_plan p1 = plan_of(TF_GPU_GEMM_WGMMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO),
                      p3 = plan_of(TF_GPU_GEMM_WGMMA, TF_GPU_DW_LT, TF_GPU_ATTN_AUTO),
                      p4 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_MMA, TF_GPU_ATTN_AUTO);
    const bk xb[4] = {bk_create(3, 0, &p1, "132"), bk_create(3, 0, &p3, "132"),
                      bk_create(3, 0, &p4, "132"), bk_create(3, 1, &p4, "132")};
    static const char *const xn[4] = {"gemm_split(wg)", "gemm_split(wg, capped)",
                                      "gemm_split(mma)", "gemm_split(mma, tf32)"};
    const int emu = getenv("TF_TEST_HOSTEMU") != NULL;
    /* ta, tb, M, N, K, batch, pad, beta (x2), epi, rmode; hostemu runs the
     * first six, the others take minutes each there */
    static const int cs[][10] = {
        {1, 0, 128, 128, 16384, 1, 0, 2, TF_EPI_NONE, 2},  /* dW += dy^T x */
        {1, 0, 64, 64, 4096, 1, 0, 0, TF_EPI_NONE, 0},     /* the MSA's */
        {1, 0, 128, 128, 10000, 1, 1, 2, TF_EPI_NONE, 1},  /* ragged last split */
        {0, 1, 128, 96, 6000, 2, 1, -1, TF_EPI_DRELU, 1},  /* batch 2, N ragged */
        {1, 0, 45, 37, 3000, 1, 1, 2, TF_EPI_RELU, 0},     /* odd N: scalar partials */
        {1, 1, 40, 130, 2600, 3, 1, 2, TF_EPI_NONE, 2},    /* batch 3, odd total */
        {1, 0, 128, 128, 65536, 1, 0, 2, TF_EPI_NONE, 2},  /* the large problem's */
        {1, 0, 512, 128, 16384, 1, 0, 2, TF_EPI_NONE, 0},  /* 4 tiles */
        {1, 0, 128, 512, 16384, 2, 0, 0, TF_EPI_NONE, 0},  /* 8 tiles */
        {1, 0, 256, 64, 16384, 1, 0, 2, TF_EPI_NONE, 1},   /* 2 tiles, N 64 */
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; ++k) {
        if (emu && k >= 6) break;
        const int *c = cs[k];
        gemm_r_case_on(c[0], c[1], c[2], c[3], c[4], c[5], c[6], 0.5f * (float)c[7],
                       (tf_epilogue)c[8], c[9], xb, xn, 4, 0);
    }
    for (int k = 0; k < 4; ++k) tf_cuda_backend_destroy(xb[k].be);
    done();
}

/* More distinct GEMM keys than the plan table holds (3/4 of TF_CU_LT_CACHE =
 * 768 slots): the later keys run on one-off plans. Every result against the
 * CPU, and a second pass (cached plans and one-off plans again, C poisoned in
 * between) bit-identical to the first. A backend of its own, so that the
 * other tests keep a table with room. */
enum { PL_KEYS = 900, PL_N = 3, PL_K = 2 };
static void plans_pass(bk b, const float *A, const float *B, float *C)
{
    for (int M = 1; M <= PL_KEYS; ++M) { /* C at offset 3 M (M-1) / 2: alignments vary too */
        tf_gemm_args a = {0, 1, M, PL_N, PL_K, 1.f, 0.f, A, PL_K, 0, B, PL_K, 0,
                          C + (size_t)M * (M - 1) / 2 * PL_N, PL_N, 0, 1, TF_EPI_NONE, NULL, NULL, 0};
        b.ops->gemm(b.be, &a, "test_gemm_plans");
    }
}

static void test_gemm_plans(void **state)
{
    (void)state;
    g_fail = 0;
    bk cu;
    tf_backend_opts o;
    char err[256];
    memset(&o, 0, sizeof o);
    o.kernel_level = 3;
    assert_int_equal(tf_cuda_backend_create(&cu.be, &cu.ops, &o, err, sizeof err), 0);
    const size_t nA = (size_t)PL_KEYS * PL_K, nB = PL_N * PL_K,
                 nC = (size_t)PL_KEYS * (PL_KEYS + 1) / 2 * PL_N;
    float *hA = rnd(nA, 1.f, 61), *hB = rnd(nB, 1.f, 62);
    float *ref = tf_test_falloc(nC), *x = tf_test_falloc(nC), *y = tf_test_falloc(nC);
    unsigned char *poison = malloc(nC * sizeof(float));
    memset(poison, 0xFF, nC * sizeof(float));
    for (int r = 0; r < 2; ++r) {
        const bk b = r == 0 ? g_cpu : cu;
        float *A = b_put(b, hA, nA), *B = b_put(b, hB, nB), *C = b_nan(b, nC);
        plans_pass(b, A, B, C);
        b_get(b, r == 0 ? ref : x, C, nC);
        if (r == 1) {
            b.ops->upload(b.be, C, poison, nC * sizeof(float));
            plans_pass(b, A, B, C);
            b_get(b, y, C, nC);
        }
        b_free(b, A), b_free(b, B), b_free(b, C);
    }
    check("gemm_plans", "900 keys", x, ref, nC, tol_sum(PL_K));
    check_same("gemm_plans", "900 keys", x, y, nC);
    free(hA), free(hB), free(ref), free(x), free(y), free(poison);
    tf_cuda_backend_destroy(cu.be);
    done();
}

/* ---- LayerNorm ---- */
static void run_ln(bk b, long rows, int C, const float *hx, const float *hg, const float *hb,
                   const float *hdo, const float *hdx0, const float *hdg0, const float *hdb0,
                   int acc, float *out, float *mean, float *rstd, float *dx, float *dg, float *db)
{
    const size_t n = (size_t)rows * C;
    float *x = b_put(b, hx, n), *g = b_put(b, hg, C), *be = b_put(b, hb, C);
    float *o = b_nan(b, n), *mu = b_nan(b, rows), *rs = b_nan(b, rows);
    b.ops->layernorm_fwd(b.be, o, mu, rs, x, g, be, rows, C, 1e-5f);
    b_get(b, out, o, n);
    b_get(b, mean, mu, rows);
    b_get(b, rstd, rs, rows);
    float *dout = b_put(b, hdo, n), *dxd = acc ? b_put(b, hdx0, n) : b_nan(b, n);
    float *dgd = b_put(b, hdg0, C), *dbd = b_put(b, hdb0, C);
    b.ops->layernorm_bwd(b.be, dxd, dgd, dbd, dout, x, mu, rs, g, rows, C, acc);
    b_get(b, dx, dxd, n);
    b_get(b, dg, dgd, C);
    b_get(b, db, dbd, C);
    b_free(b, x), b_free(b, g), b_free(b, be), b_free(b, o), b_free(b, mu), b_free(b, rs);
    b_free(b, dout), b_free(b, dxd), b_free(b, dgd), b_free(b, dbd);
}

static void ln_case(bk cu, int level, long rows, int C, int acc)
{
    const size_t n = (size_t)rows * C;
    float *hx = rnd(n, 2.f, 21), *hg = rnd(C, 1.f, 22), *hb = rnd(C, 1.f, 23);
    float *hdo = rnd(n, 1.f, 24), *hdx0 = rnd(n, 1.f, 25), *hdg0 = rnd(C, 1.f, 26),
          *hdb0 = rnd(C, 1.f, 27);
    for (size_t i = 0; i < n; ++i) hx[i] += 3.f; /* a mean away from 0 */
    float *o[3][6];
    for (int r = 0; r < 3; ++r) {
        o[r][0] = tf_test_falloc(n), o[r][1] = tf_test_falloc(rows), o[r][2] = tf_test_falloc(rows);
        o[r][3] = tf_test_falloc(n), o[r][4] = tf_test_falloc(C), o[r][5] = tf_test_falloc(C);
        run_ln(r == 0 ? g_cpu : cu, rows, C, hx, hg, hb, hdo, hdx0, hdg0, hdb0, acc, o[r][0],
               o[r][1], o[r][2], o[r][3], o[r][4], o[r][5]);
    }
    char shape[96];
    snprintf(shape, sizeof shape, "level=%d rows=%ld C=%d acc=%d", level, rows, C, acc);
    static const char *names[6] = {"layernorm_fwd.out", "layernorm_fwd.mean", "layernorm_fwd.rstd",
                                   "layernorm_bwd.dx", "layernorm_bwd.dgamma", "layernorm_bwd.dbeta"};
    const size_t cnt[6] = {n, (size_t)rows, (size_t)rows, n, (size_t)C, (size_t)C};
    /* out/mean/rstd: C-term sums; dx: three terms of C-term sums (2x);
     * dgamma/dbeta: rows-term sums of x-hat products (plus x-hat's own error) */
    const double tol[6] = {tol_sum(C), tol_sum(C), tol_sum(C), 2 * tol_sum(C),
                           tol_sum(rows) + tol_sum(C), tol_sum(rows)};
    for (int k = 0; k < 6; ++k) {
        check(names[k], shape, o[1][k], o[0][k], cnt[k], tol[k]);
        check_same(names[k], shape, o[1][k], o[2][k], cnt[k]);
    }
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 6; ++k) free(o[r][k]);
    free(hx), free(hg), free(hb), free(hdo), free(hdx0), free(hdg0), free(hdb0);
}

static void test_layernorm(void **state)
{
    (void)state;
    g_fail = 0;
    static const long rows[] = {1, 7, 33, 300};
    static const int Cs[] = {5, 64, 128, 200};
    for (int lv = 0; lv < 2; ++lv)
        for (size_t r = 0; r < 4; ++r)
            for (size_t c = 0; c < 4; ++c)
                ln_case(lv ? g_cu3 : g_cu1, lv ? 3 : 1, rows[r], Cs[c], (int)((r + c) & 1));
    ln_case(g_cu1, 1, 5000, 64, 0); /* several dgamma chunks */
    ln_case(g_cu3, 3, 5000, 64, 1);
    /* level 3, C <= 128: dx and dgamma/dbeta partials in one pass (16 rows per
     * block), the model's shapes (MSA: B*S*N x 64, pair: B*N*N x 128), a partial
     * last block, C not a multiple of 32, and rows beyond what 16-row blocks
     * can leave in the scratch area (more rows per block) */
    ln_case(g_cu3, 3, 4096, 64, 0);
    ln_case(g_cu3, 3, 16384, 128, 1);
    ln_case(g_cu3, 3, 4097, 100, 0);
    ln_case(g_cu3, 3, 17, 33, 1);
    ln_case(g_cu3, 3, 66000, 128, 0);
    done();
}

/* ---- two LayerNorms in a row (layernorm2) ----
 * Against the CPU's layernorm2, which is bit-identical to two layernorm ops
 * (test_cpu_ops), whose arithmetic test_cpu_ops checks against double. The
 * tolerances compose test_layernorm's: the second norm adds its own C-term
 * sums to the first's (out, mean2, rstd2: 2 tol_sum(C)); dx goes back through
 * two LayerNorm backwards (2 x 2 tol_sum(C)); dgamma/dbeta are rows-term sums
 * of products whose factors carry those errors (tol_sum(rows) + 2 or 4
 * tol_sum(C) for the first norm's, whose factor dy1 is one backward deep). */
static void run_ln2(bk b, long rows, int C, const float *hx, const float *hp, const float *hdo,
                    const float *hdx0, const float *hdp0, int acc, float *out, float *st, float *dx,
                    float *dp)
{
    const size_t n = (size_t)rows * C;
    float *x = b_put(b, hx, n), *p = b_put(b, hp, 4 * (size_t)C);
    float *o = b_nan(b, n), *s = b_nan(b, 4 * (size_t)rows);
    b.ops->layernorm2_fwd(b.be, o, s, x, p, p + C, p + 2 * C, p + 3 * C, rows, C, 1e-5f);
    b_get(b, out, o, n);
    b_get(b, st, s, 4 * (size_t)rows);
    float *dout = b_put(b, hdo, n), *dxd = acc ? b_put(b, hdx0, n) : b_nan(b, n);
    float *dpd = b_put(b, hdp0, 4 * (size_t)C);
    b.ops->layernorm2_bwd(b.be, dxd, dpd, dpd + C, dpd + 2 * C, dpd + 3 * C, dout, x, s, p, p + C,
                          p + 2 * C, rows, C, acc);
    b_get(b, dx, dxd, n);
    b_get(b, dp, dpd, 4 * (size_t)C);
    b_free(b, x), b_free(b, p), b_free(b, o), b_free(b, s), b_free(b, dout), b_free(b, dxd);
    b_free(b, dpd);
}

static void ln2_case(bk cu, int level, long rows, int C, int acc)
{
    const size_t n = (size_t)rows * C;
    float *hx = rnd(n, 2.f, 31), *hp = rnd(4 * (size_t)C, 1.f, 32), *hdo = rnd(n, 1.f, 33);
    float *hdx0 = rnd(n, 1.f, 34), *hdp0 = rnd(4 * (size_t)C, 1.f, 35);
    for (size_t i = 0; i < n; ++i) hx[i] += 3.f; /* a mean away from 0 */
    float *o[3][4];
    for (int r = 0; r < 3; ++r) {
        o[r][0] = tf_test_falloc(n), o[r][1] = tf_test_falloc(4 * (size_t)rows);
        o[r][2] = tf_test_falloc(n), o[r][3] = tf_test_falloc(4 * (size_t)C);
        run_ln2(r == 0 ? g_cpu : cu, rows, C, hx, hp, hdo, hdx0, hdp0, acc, o[r][0], o[r][1],
                o[r][2], o[r][3]);
    }
    char shape[96];
    snprintf(shape, sizeof shape, "level=%d rows=%ld C=%d acc=%d", level, rows, C, acc);
    const double t = tol_sum(C), tr = tol_sum(rows);
    check("layernorm2_fwd.out", shape, o[1][0], o[0][0], n, 2 * t);
    check("layernorm2_fwd.mean1,rstd1", shape, o[1][1], o[0][1], 2 * (size_t)rows, t);
    check("layernorm2_fwd.mean2,rstd2", shape, o[1][1] + 2 * rows, o[0][1] + 2 * rows,
          2 * (size_t)rows, 2 * t);
    check("layernorm2_bwd.dx", shape, o[1][2], o[0][2], n, 4 * t);
    static const char *pn[4] = {"layernorm2_bwd.dgamma1", "layernorm2_bwd.dbeta1",
                                "layernorm2_bwd.dgamma2", "layernorm2_bwd.dbeta2"};
    const double tp[4] = {tr + 4 * t, tr + 4 * t, tr + 2 * t, tr + 2 * t};
    for (int k = 0; k < 4; ++k)
        check(pn[k], shape, o[1][3] + (size_t)k * C, o[0][3] + (size_t)k * C, (size_t)C, tp[k]);
    const size_t cnt[4] = {n, 4 * (size_t)rows, n, 4 * (size_t)C};
    for (int k = 0; k < 4; ++k) check_same("layernorm2", shape, o[1][k], o[2][k], cnt[k]);
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 4; ++k) free(o[r][k]);
    free(hx), free(hp), free(hdo), free(hdx0), free(hdp0);
}

static void test_layernorm2(void **state)
{
    (void)state;
    g_fail = 0;
    static const long rows[] = {1, 7, 33, 300};
    static const int Cs[] = {5, 64, 100, TF_LN2_MAX_C};
    for (int lv = 0; lv < 2; ++lv)
        for (size_t r = 0; r < 4; ++r)
            for (size_t c = 0; c < 4; ++c)
                ln2_case(lv ? g_cu3 : g_cu1, lv ? 3 : 1, rows[r], Cs[c], (int)((r + c) & 1));
    /* the model's pair shapes (B*N*N x 128), a partial last block, C not a
     * multiple of 32, and rows beyond what 16-row blocks can leave in the
     * scratch area (more rows per block; 4C floats a partial row) */
    ln2_case(g_cu3, 3, 16384, 128, 1);
    ln2_case(g_cu3, 3, 4097, 100, 0);
    ln2_case(g_cu3, 3, 17, 33, 1);
    ln2_case(g_cu3, 3, 66000, 128, 0);
    done();
}

/* ---- softmax ---- */
static void test_softmax(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][2] = {{1, 1}, {7, 5}, {33, 64}, {100, 128}, {3, 1000}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k) {
        const long rows = sh[k][0];
        const int cols = sh[k][1];
        const size_t n = (size_t)rows * cols;
        float *hx = rnd(n, 3.f, 31), *hdy = rnd(n, 1.f, 32);
        float *y[3], *dx[3];
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            y[r] = tf_test_falloc(n), dx[r] = tf_test_falloc(n);
            float *x = b_put(b, hx, n), *yd = b_nan(b, n), *dy = b_put(b, hdy, n);
            float *dxd = b_nan(b, n);
            b.ops->softmax_fwd(b.be, yd, x, rows, cols);
            b.ops->softmax_bwd(b.be, dxd, dy, yd, rows, cols);
            b_get(b, y[r], yd, n);
            b_get(b, dx[r], dxd, n);
            if (r == 1) { /* in place (y aliases x, dx aliases dy) gives the same bits */
                b.ops->softmax_fwd(b.be, x, x, rows, cols);
                b.ops->softmax_bwd(b.be, dy, dy, x, rows, cols);
                float *t = tf_test_falloc(n);
                b_get(b, t, x, n);
                check_same("softmax_fwd(in place)", "", t, y[r], n);
                b_get(b, t, dy, n);
                check_same("softmax_bwd(in place)", "", t, dx[r], n);
                free(t);
            }
            b_free(b, x), b_free(b, yd), b_free(b, dy), b_free(b, dxd);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "rows=%ld cols=%d", rows, cols);
        /* entries: one expf each (8u) plus the cols-term normaliser */
        check("softmax_fwd", shape, y[1], y[0], n, tol_sum(cols) + 8 * U);
        check_same("softmax_fwd", shape, y[1], y[2], n);
        /* dx = y*(dy - s): s is a cols-term sum; y carries the forward's error */
        check("softmax_bwd", shape, dx[1], dx[0], n, 2 * (tol_sum(cols) + 8 * U));
        check_same("softmax_bwd", shape, dx[1], dx[2], n);
        for (int r = 0; r < 3; ++r) free(y[r]), free(dx[r]);
        free(hx), free(hdy);
    }
    done();
}

/* ---- attention ----
 * layout 0: q,k,v,out separate [nb,no,L,C]; 1: q,k,v fused in one [nb,no,L,3C]
 * (and dq,dk,dv likewise); 2: "column" order [nb,L,no,C] (o inside l).
 * bias 0: none; 1: [nb,L,L,nh] (the pair bias layout); 2: [nb,nh,L,L].
 * off: every q/k/v/out/dout/dq/dk/dv buffer starts `off` floats into its
 * allocation (off 1-3 breaks the 16-byte alignment of the float4 paths). */
typedef struct {
    int nb, no, nh, L, d, layout, bias, off;
} ashape;

static tf_attn_view aview(const ashape *s, float *base, int width, int off)
{
    tf_attn_view v;
    v.p = base + off;
    if (s->layout == 2) {
        v.sl = (long)s->no * width, v.so = width, v.sb = (long)s->L * s->no * width;
    } else {
        v.sl = width, v.so = (long)s->L * width, v.sb = (long)s->no * s->L * width;
    }
    return v;
}

/* q, k, v (or dq, dk, dv) inside one buffer of 3*nb*no*L*C floats */
static void qkv_views(const ashape *s, float *base, tf_attn_view *q, tf_attn_view *k,
                      tf_attn_view *v)
{
    const int C = s->nh * s->d, fused = s->layout == 1, W = fused ? 3 * C : C;
    const size_t part = fused ? 0 : (size_t)s->nb * s->no * s->L * C; /* one after another */
    const int off = fused ? C : 0;
    *q = aview(s, base, W, 0), *k = aview(s, base + part, W, off);
    *v = aview(s, base + 2 * part, W, 2 * off);
}

/* in: q,k,v (3*rows*C floats); fwd writes out, lse; bwd (given out/lse) writes gin, dbias */
static void run_attn(bk b, const ashape *s, const float *hin, const float *hbias,
                     const float *hdout, const float *hout, const float *hlse, float *out,
                     float *lse, float *gin, float *dbias)
{
    const int C = s->nh * s->d;
    const size_t rows = (size_t)s->nb * s->no * s->L, nrow = (size_t)s->nb * s->no * s->nh * s->L;
    const size_t nbias = (size_t)s->nb * s->nh * s->L * s->L, off = (size_t)s->off;
    float *in0 = b_nan(b, 3 * rows * C + off), *gi0 = b_nan(b, 3 * rows * C + off);
    float *in = in0 + off, *gi = gi0 + off;
    b.ops->upload(b.be, in, hin, 3 * rows * C * sizeof(float));
    float *bias = s->bias ? b_put(b, hbias, nbias) : NULL;
    float *od0 = b_nan(b, rows * C + off), *od = od0 + off;
    float *ld = b_nan(b, nrow), *work = b_nan(b, nrow);
    tf_attn_args a;
    memset(&a, 0, sizeof a);
    a.nb = s->nb, a.no = s->no, a.nh = s->nh, a.L = s->L, a.d = s->d;
    a.scale = 1.f / sqrtf((float)s->d);
    qkv_views(s, in, &a.q, &a.k, &a.v);
    qkv_views(s, gi, &a.dq, &a.dk, &a.dv);
    a.out = aview(s, od, C, 0);
    a.bias = bias;
    if (s->bias == 1)
        a.bias_sb = (long)s->L * s->L * s->nh, a.bias_sh = 1, a.bias_si = (long)s->L * s->nh,
        a.bias_sj = s->nh;
    else
        a.bias_sb = (long)s->nh * s->L * s->L, a.bias_sh = (long)s->L * s->L, a.bias_si = s->L,
        a.bias_sj = 1;
    a.lse = ld;
    b.ops->attn_fwd(b.be, &a);
    b_get(b, out, od, rows * C);
    b_get(b, lse, ld, nrow);
    /* backward from the reference forward's out and lse, so it is tested alone */
    float *dout0 = b_nan(b, rows * C + off), *dout = dout0 + off;
    float *db = s->bias ? b_nan(b, nbias) : NULL;
    b.ops->upload(b.be, dout, hdout, rows * C * sizeof(float));
    b.ops->upload(b.be, od, hout, rows * C * sizeof(float));
    b.ops->upload(b.be, ld, hlse, nrow * sizeof(float));
    a.dout = aview(s, dout, C, 0);
    a.dbias = db;
    a.work = work;
    b.ops->attn_bwd(b.be, &a);
    b_get(b, gin, gi, 3 * rows * C);
    if (db) b_get(b, dbias, db, nbias);
    b_free(b, in0), b_free(b, gi0), b_free(b, od0), b_free(b, ld), b_free(b, work);
    b_free(b, dout0);
    if (bias) b_free(b, bias), b_free(b, db);
}

/* max |scale * q.k| over all scores, on the host (it scales the error of exp(S)) */
static double attn_smax_qk(const ashape *s, const tf_attn_view *q, const tf_attn_view *k)
{
    double m = 0;
    for (int b = 0; b < s->nb; ++b)
        for (int o = 0; o < s->no; ++o)
            for (int h = 0; h < s->nh; ++h)
                for (int i = 0; i < s->L; ++i)
                    for (int j = 0; j < s->L; ++j) {
                        const float *qi = q->p + b * q->sb + o * q->so + i * q->sl + h * s->d;
                        const float *kj = k->p + b * k->sb + o * k->so + j * k->sl + h * s->d;
                        double t = 0;
                        for (int c = 0; c < s->d; ++c) t += (double)qi[c] * kj[c];
                        m = fmax(m, fabs(t) / sqrt((double)s->d));
                    }
    return m;
}

/* CPU, then the CUDA backend `cu` twice; `ver` names its kernel version */
/* prec: how the CUDA forward computes its two products: 0 fp32 FFMA; 1
 * 3xTF32 on the tensor cores (kernel5 in fp32: each sum also carries tol_x3's
 * residue and truncated accumulation, over d for the scores, over L for the
 * outputs); 2 TF32 (kernel5 in tf32: the formula with TF32's 2^-11 per
 * rounded input in place of u). bprec: the same for the backward's products
 * (kernel5's backward: S and dP over d, then dV, dK and dQ over L) */
static void attn_case_prec(bk cu, const char *ver, ashape s, int prec, int bprec);
static void attn_case(bk cu, const char *ver, ashape s) { attn_case_prec(cu, ver, s, 0, 0); }
static void attn_case_prec(bk cu, const char *ver, ashape s, int prec, int bprec)
{
    const int C = s.nh * s.d;
    const size_t rows = (size_t)s.nb * s.no * s.L, nrow = (size_t)s.nb * s.no * s.nh * s.L;
    const size_t nbias = (size_t)s.nb * s.nh * s.L * s.L, nin = 3 * rows * C;
    float *hin = rnd(nin, 1.f, 41), *hbias = rnd(nbias, 1.f, 42), *hdout = rnd(rows * C, 1.f, 43);
    float *out[3], *lse[3], *gin[3], *db[3];
    for (int r = 0; r < 3; ++r) {
        out[r] = tf_test_falloc(rows * C), lse[r] = tf_test_falloc(nrow);
        gin[r] = tf_test_falloc(nin), db[r] = tf_test_falloc(nbias);
        /* r = 0 (CPU) first: its out/lse feed every backward */
        run_attn(r == 0 ? g_cpu : cu, &s, hin, hbias, hdout, out[0], lse[0], out[r], lse[r],
                 gin[r], db[r]);
    }
    tf_attn_view q, k, v;
    qkv_views(&s, hin, &q, &k, &v);
    const double smax = attn_smax_qk(&s, &q, &k) + (s.bias ? tf_test_max_abs(hbias, nbias) : 0);
    /* scores: d-term dots (abs error ~ sqrt(d)*u*|S|, which exp turns into a
     * relative error of P); outputs: L-term sums of P v */
    const double tf = (3 * sqrt((double)s.L) + 3 * sqrt((double)s.d) * (1 + smax) + 8) * U;
    const double tff = prec == 1   ? tf + ((12 + 0.75 * s.d) * (1 + smax) + 12 + 0.75 * s.L) * U
                       : prec == 2 ? tf / U * 0x1p-11
                                   : tf;
    char shape[160];
    snprintf(shape, sizeof shape, "%s nb=%d no=%d nh=%d L=%d d=%d layout=%d bias=%d off=%d", ver,
             s.nb, s.no, s.nh, s.L, s.d, s.layout, s.bias, s.off);
    check("attn_fwd.out", shape, out[1], out[0], rows * C, tff);
    check("attn_fwd.lse", shape, lse[1], lse[0], nrow, tff);
    /* backward: dS = P (dout.v - D) then a d- or L-term sum: two chained sums.
     * On the tensor cores (bprec 1) each of its sums adds the 3xTF32 terms: the
     * recomputed scores (d terms, relative to 1 + smax as the forward's), dP
     * (d terms) and the output's L-term sum; in TF32 (bprec 2) u -> 2^-11 */
    const double tfb = bprec == 1 ? 2 * tf + ((12 + 0.75 * s.d) * (2 + smax) + 12 + 0.75 * s.L) * U
                       : bprec == 2 ? 2 * tf / U * 0x1p-11
                                    : 2 * tf;
    check("attn_bwd.dqkv", shape, gin[1], gin[0], nin, tfb);
    check_same("attn_fwd.out", shape, out[1], out[2], rows * C);
    check_same("attn_fwd.lse", shape, lse[1], lse[2], nrow);
    check_same("attn_bwd.dqkv", shape, gin[1], gin[2], nin);
    if (s.bias) { /* plus the no-term sum over o */
        /* the rounding of dS = P (dP - D) is relative to P (|dP| + |D|), where dP and D
         * are d-term dots of dout with v (~sqrt(d) max|dout| max|v|) and P averages
         * 1/L: summed over o, that is the scale of dbias' rounding even where dbias
         * itself cancels to ~0 (L = 1) */
        const double ds_scale = s.no * 2 * sqrt((double)s.d) * tf_test_max_abs(hdout, rows * C) *
                                tf_test_max_abs(hin, nin) / s.L;
        check_scaled("attn_bwd.dbias", shape, db[1], db[0], nbias, 2 * tf + tol_sum(s.no),
                     ds_scale);
        check_same("attn_bwd.dbias", shape, db[1], db[2], nbias);
    }
    for (int r = 0; r < 3; ++r) free(out[r]), free(lse[r]), free(gin[r]), free(db[r]);
    free(hin), free(hbias), free(hdout);
}

static void test_attention(void **state)
{
    (void)state;
    g_fail = 0;
    /* both kernel versions: kernel1 (levels 1-2) and kernel2 (level 3) */
    static const ashape both[] = {
        {1, 1, 1, 1, 3, 0, 0, 0},   {1, 1, 1, 1, 3, 0, 1, 0},   {2, 3, 2, 5, 5, 0, 1, 0},
        {2, 3, 2, 5, 5, 2, 2, 0},   {1, 2, 4, 23, 16, 1, 1, 0}, {1, 2, 4, 23, 16, 0, 0, 0},
        {2, 2, 4, 64, 32, 1, 1, 0}, {1, 3, 4, 64, 16, 2, 0, 0}, {1, 1, 2, 128, 16, 0, 2, 0},
        {1, 2, 1, 33, 64, 1, 1, 0}, {1, 1, 1, 70, 8, 0, 1, 0},  {1, 2, 2, 130, 32, 2, 1, 0},
        {1, 1, 3, 17, 2, 1, 2, 0},
    };
    /* level 3: the model's shapes (fewer batches / rows) and the tile classes
     * (t16: L <= 16, t32: L <= 32 or d > 32, t64: L > 32 with one key tile up
     * to L = 64, two (and the separate dQ pass) beyond), at odd L and d, with
     * and without 16-byte alignment; t64 runs kernel3 at d 17..32 and kernel2
     * at d <= 16 by default, and the other one on the backends made with
     * TF_CUDA_ATTN_KERNEL=2 (d 17..32) and =3 (d <= 16). kernel4 is the default
     * where it measured fastest at d 16 and 32 (then kernel2 and kernel3 run
     * forced too), and runs forced (=4) at every L <= 128. Each case runs the CUDA backend
     * twice: outputs, dq/dk/dv and dbias must repeat bit for bit. */
    static const ashape lv3[] = {
        {1, 4, 4, 64, 32, 1, 0, 0},   /* triangle starting: fused qkv, row-wise */
        {1, 4, 4, 64, 32, 2, 0, 0},   /* triangle ending: column-wise */
        {1, 2, 2, 128, 32, 1, 0, 0},  /* triangle, N = 128 */
        {1, 5, 4, 64, 16, 1, 1, 0},   /* MSA row with the pair bias */
        {1, 3, 2, 128, 16, 1, 1, 0},  /* MSA row, N = 128 */
        {1, 8, 4, 16, 16, 2, 0, 0},   /* MSA column, S = 16 */
        {1, 4, 4, 32, 16, 2, 0, 0},   /* MSA column, S = 32 */
        {1, 1, 1, 1, 2, 0, 1, 0},     {2, 2, 1, 1, 64, 1, 2, 0},  {2, 3, 2, 5, 3, 0, 1, 0},
        {1, 2, 2, 5, 32, 2, 2, 0},    {1, 2, 2, 23, 5, 1, 1, 0},  {1, 2, 3, 23, 16, 0, 2, 1},
        {1, 2, 2, 64, 2, 0, 1, 0},    {1, 1, 2, 64, 64, 1, 1, 0}, {1, 2, 1, 70, 3, 2, 2, 0},
        {1, 2, 2, 70, 32, 1, 1, 1},   {1, 1, 2, 128, 5, 0, 1, 0}, {1, 1, 1, 128, 64, 2, 2, 0},
        {1, 2, 1, 130, 16, 1, 1, 0},  {1, 1, 2, 130, 2, 0, 2, 3}, {1, 2, 2, 16, 32, 1, 1, 0},
        {1, 2, 2, 17, 16, 0, 1, 0},   {1, 2, 2, 32, 64, 1, 2, 0}, {1, 2, 2, 33, 32, 2, 1, 0},
        {1, 2, 1, 65, 32, 1, 1, 0},   {1, 2, 2, 64, 32, 1, 1, 2}, {1, 3, 1, 48, 64, 0, 1, 1},
        {1, 2, 2, 32, 32, 2, 1, 0},   {1, 2, 2, 29, 24, 1, 2, 0},
        {3, 17, 3, 64, 16, 1, 1, 0},  /* dbias: 9 chunks of 2 (the last 1) o each */
        /* kernel4 (L <= 128): every key class (16, 32, 64, 128), partial chunks
         * and key quads, both head sizes and odd ones (padded), bias / dbias
         * on and off, all layouts, unaligned views */
        {1, 2, 2, 5, 16, 1, 1, 1},    {1, 2, 2, 5, 32, 0, 2, 0},  {1, 3, 2, 16, 16, 1, 1, 0},
        {1, 2, 2, 16, 32, 2, 2, 3},   {1, 2, 2, 23, 32, 1, 1, 2}, {1, 2, 2, 23, 16, 2, 0, 0},
        {1, 2, 2, 32, 16, 0, 1, 1},   {1, 2, 2, 32, 32, 1, 2, 0}, {1, 2, 2, 64, 16, 2, 2, 3},
        {1, 2, 2, 64, 32, 2, 1, 0},   {1, 2, 2, 128, 32, 1, 1, 0}, {1, 2, 1, 128, 32, 2, 2, 1},
        {1, 2, 2, 128, 16, 0, 1, 2},  {1, 1, 2, 100, 32, 1, 0, 0}, {1, 2, 2, 97, 16, 1, 1, 1},
        {1, 2, 2, 40, 24, 1, 1, 0},   {1, 2, 1, 50, 7, 0, 2, 1},  {1, 2, 2, 128, 20, 1, 0, 3},
        {2, 5, 2, 128, 16, 1, 1, 0},  /* MSA row with dbias over 5 o, 2 batches */
    };
    for (size_t k = 0; k < sizeof both / sizeof both[0]; ++k) {
        attn_case(g_cu1, "level=1", both[k]);
        attn_case(g_cu3, "level=3", both[k]);
    }
    for (size_t k = 0; k < sizeof lv3 / sizeof lv3[0]; ++k) {
        const ashape s = lv3[k];
        /* the default: kernel5 (forward and backward) at d 32, L > 32, and
         * kernel4 elsewhere where it measured fastest at d 16 and 32
         * (tf_attn4_use: the backward at L <= 128, the forward at short L),
         * else kernel2 (L <= 32) or kernel3 (d 17..32) / kernel2 (d <= 16);
         * the forced ones cover the rest, kernel4 at every L <= 128 */
        const int def4 = s.L <= 128 && (s.d == 16 || s.d == 32);
        /* the default forward and backward at d 32, L > 32 is kernel5's 3xTF32
         * (tf_attn5_use, tf_attn5_bwd_use) */
        const int def5 = def4 && s.d == 32 && s.L > 32;
        attn_case_prec(g_cu3,
                       def5   ? "level=3(default, kernel5)"
                       : def4 ? "level=3(default, kernel4 in part)"
                              : "level=3",
                       s, def5, def5);
        if (def4) attn_case(g_cu3k2, "level=3(kernel2)", s);
        if (s.L > 32 && s.d <= 32 && (def4 || s.d <= 16)) attn_case(g_cu3k3, "level=3(kernel3)", s);
        if (s.L > 32 && s.d > 16 && s.d <= 32 && !def4) attn_case(g_cu3k2, "level=3(kernel2)", s);
        if (s.L <= 128 && s.d <= 32) attn_case(g_cu3k4, "level=3(kernel4)", s);
        /* =5: kernel5's forward and backward */
        if (def4) attn_case_prec(g_cu3k5, "level=3(kernel5, 3xTF32)", s, 1, 1);
        if (def4) attn_case_prec(g_tf32k5, "level=3 tf32(kernel5)", s, 2, 2);
    }
    done();
}

/* ---- permute (pure data movement: bit-exact) ---- */
/* CPU, then `cu` twice; in and out start `off` floats into their allocations
 * (off 1 takes the scalar paths of the float4 kernels) */
static void perm_case(bk cu, int level, int rank, const int *dims, const int *perm, int acc,
                      int off)
{
    tf_permute_args a;
    memset(&a, 0, sizeof a);
    a.rank = rank, a.accumulate = acc;
    size_t n = 1;
    for (int k = 0; k < rank; ++k) a.dims[k] = dims[k], a.perm[k] = perm[k], n *= dims[k];
    float *hin = rnd(n, 1.f, 51), *hout0 = rnd(n, 1.f, 52), *res[3];
    for (int r = 0; r < 3; ++r) {
        const bk b = r == 0 ? g_cpu : cu;
        float *in0 = b_nan(b, n + off), *out0 = b_nan(b, n + off);
        float *in = in0 + off, *out = out0 + off;
        b.ops->upload(b.be, in, hin, n * sizeof(float));
        if (acc) b.ops->upload(b.be, out, hout0, n * sizeof(float));
        b.ops->permute(b.be, out, in, &a);
        res[r] = tf_test_falloc(n);
        b_get(b, res[r], out, n);
        b_free(b, in0), b_free(b, out0);
    }
    char shape[160];
    int len = snprintf(shape, sizeof shape, "level=%d off=%d dims=(", level, off);
    for (int k = 0; k < rank; ++k) len += snprintf(shape + len, sizeof shape - len, "%s%d", k ? "," : "", dims[k]);
    len += snprintf(shape + len, sizeof shape - len, ") perm=(");
    for (int k = 0; k < rank; ++k) len += snprintf(shape + len, sizeof shape - len, "%s%d", k ? "," : "", perm[k]);
    snprintf(shape + len, sizeof shape - len, ") acc=%d", acc);
    check("permute", shape, res[1], res[0], n, 0.0);
    check_same("permute", shape, res[1], res[2], n);
    for (int r = 0; r < 3; ++r) free(res[r]);
    free(hin), free(hout0);
}

static void test_permute(void **state)
{
    (void)state;
    g_fail = 0;
    static const struct {
        int rank, dims[6], perm[6];
    } c[] = {
        {1, {10}, {0}},
        {2, {7, 5}, {1, 0}},
        {3, {4, 33, 17}, {0, 2, 1}},
        {3, {3, 100, 70}, {0, 2, 1}},
        {4, {2, 5, 7, 3}, {0, 2, 1, 3}},
        {4, {2, 5, 7, 3}, {0, 3, 1, 2}},
        {4, {2, 5, 7, 3}, {0, 1, 3, 2}},
        {4, {3, 1, 4, 5}, {2, 0, 3, 1}},
        {3, {1, 64, 1}, {2, 1, 0}},
        {5, {2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}},
        {6, {2, 1, 3, 2, 4, 3}, {5, 4, 3, 2, 1, 0}},
        {6, {2, 3, 2, 2, 3, 2}, {0, 1, 4, 5, 2, 3}},
        /* the model's permutes (smaller N) and the kernel2 paths: */
        {5, {2, 6, 32, 6, 32}, {0, 1, 3, 2, 4}}, /* outer product mean: rows, float4 */
        {5, {1, 4, 8, 4, 8}, {0, 1, 3, 2, 4}},   /* short rows: float4 gather */
        {5, {2, 3, 40, 5, 12}, {0, 1, 3, 2, 4}}, /* 3 float4s per run */
        {4, {2, 30, 5, 3}, {0, 2, 1, 3}},        /* runs of 3 floats: scalar rows */
        {4, {1, 20, 24, 16}, {0, 2, 1, 3}},      /* [B,N,N,C] swap of i and j */
        {4, {2, 7, 9, 8}, {0, 2, 1, 3}},
        {3, {40, 3, 8}, {1, 0, 2}},              /* rank 3 rows (P = 1) */
        {6, {2, 3, 4, 3, 2, 8}, {3, 0, 1, 4, 2, 5}}, /* fused q/k/v to heads: gather */
        {4, {2, 33, 17, 40}, {0, 3, 1, 2}},      /* triangle mult: to channels first */
        {4, {1, 64, 64, 64}, {0, 3, 1, 2}},
        {4, {1, 64, 64, 64}, {0, 2, 3, 1}},      /* and back */
        {4, {2, 40, 33, 17}, {0, 2, 3, 1}},
        {2, {130, 67}, {1, 0}},
        /* fused triangle L|R: [B,N,N,2,C] -> [2,B,C,N,N] and back (kernel2's
         * transpose with two outer axes / a split inner axis) */
        {5, {2, 33, 17, 2, 40}, {3, 0, 4, 1, 2}},
        {5, {2, 2, 40, 33, 17}, {1, 3, 4, 0, 2}},
        {5, {1, 20, 20, 2, 24}, {3, 0, 4, 1, 2}},
        {5, {2, 1, 24, 20, 20}, {1, 3, 4, 0, 2}},
        {4, {3, 5, 40, 6}, {1, 3, 0, 2}},        /* thin side: kernel1 */
        /* level 3's channel-major triangle product without the triangle
         * fusion: [B,N,N,C] -> [C,B,N,N], [C,B*N*N] -> [B*N*N,C] */
        {4, {2, 33, 17, 40}, {3, 0, 1, 2}},
        {4, {40, 1122, 1, 1}, {1, 0, 2, 3}},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; ++k)
        for (int acc = 0; acc < 2; ++acc) {
            perm_case(g_cu1, 1, c[k].rank, c[k].dims, c[k].perm, acc, 0);
            perm_case(g_cu3, 3, c[k].rank, c[k].dims, c[k].perm, acc, 0);
            perm_case(g_cu3, 3, c[k].rank, c[k].dims, c[k].perm, acc, 1);
        }
    done();
}

/* ---- broadcast add (one add: exact) and sum over the middle axis ---- */
static void test_bcast_sum(void **state)
{
    (void)state;
    g_fail = 0;
    static const long sh[][3] = {{1, 1, 1}, {3, 7, 5}, {2, 33, 64}, {4, 16, 128}, {1, 300, 1}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k)
        for (int acc = 0; acc < 2; ++acc) {
            const long O = sh[k][0], M = sh[k][1], I = sh[k][2];
            const size_t nb = (size_t)(O * M * I), ns = (size_t)(O * I);
            float *hx = rnd(ns, 1.f, 61), *hy = rnd(nb, 1.f, 62), *hs0 = rnd(ns, 1.f, 63);
            float *ya[3], *sa[3];
            for (int r = 0; r < 3; ++r) {
                const bk b = r == 0 ? g_cpu : g_cu3;
                float *x = b_put(b, hx, ns), *y = b_put(b, hy, nb);
                float *s = acc ? b_put(b, hs0, ns) : b_nan(b, ns);
                b.ops->add_bcast_mid(b.be, y, x, O, M, I);
                b.ops->sum_mid(b.be, s, y, O, M, I, acc);
                ya[r] = tf_test_falloc(nb), sa[r] = tf_test_falloc(ns);
                b_get(b, ya[r], y, nb);
                b_get(b, sa[r], s, ns);
                b_free(b, x), b_free(b, y), b_free(b, s);
            }
            char shape[96];
            snprintf(shape, sizeof shape, "outer=%ld mid=%ld inner=%ld acc=%d", O, M, I, acc);
            check("add_bcast_mid", shape, ya[1], ya[0], nb, 0.0);
            check_same("add_bcast_mid", shape, ya[1], ya[2], nb);
            check("sum_mid", shape, sa[1], sa[0], ns, tol_sum((double)M + acc));
            check_same("sum_mid", shape, sa[1], sa[2], ns);
            for (int r = 0; r < 3; ++r) free(ya[r]), free(sa[r]);
            free(hx), free(hy), free(hs0);
        }
    done();
}

/* ---- elementwise ---- */
enum { EW_ADD, EW_MUL, EW_SCALE, EW_SIG, EW_RELU, EW_SIGB, EW_RELUB, EW_GATE, EW_GATEB, EW_GRES, EW_N };
static const char *ew_name[EW_N] = {"add", "mul", "scale", "act_fwd(sigmoid)", "act_fwd(relu)",
                                    "act_bwd(sigmoid)", "act_bwd(relu)", "gate_fwd", "gate_bwd.da",
                                    "gate_residual_fwd"};

/* inputs u, v, w; outputs y (and z for gate_bwd); `off` floats into each buffer
 * (off = 1 breaks 16-byte alignment: the scalar path); inplace: y aliases u */
static void run_ew(bk b, int op, size_t n, int off, int inplace, const float *hu, const float *hv,
                   const float *hw, float *y, float *z)
{
    float *u = b_put(b, hu, n + off), *v = b_put(b, hv, n + off), *w = b_put(b, hw, n + off);
    float *yd = inplace ? u : b_nan(b, n + off), *zd = b_nan(b, n + off);
    float *U_ = u + off, *V = v + off, *W = w + off, *Y = yd + off, *Z = zd + off;
    switch (op) {
    case EW_ADD: b.ops->add(b.be, Y, U_, V, (long)n); break;
    case EW_MUL: b.ops->mul(b.be, Y, U_, V, (long)n); break;
    case EW_SCALE: b.ops->scale(b.be, Y, U_, 0.37f, (long)n); break;
    case EW_SIG: b.ops->act_fwd(b.be, TF_ACT_SIGMOID, Y, U_, (long)n); break;
    case EW_RELU: b.ops->act_fwd(b.be, TF_ACT_RELU, Y, U_, (long)n); break;
    case EW_SIGB: b.ops->act_bwd(b.be, TF_ACT_SIGMOID, Y, U_, W, (long)n); break;
    case EW_RELUB: b.ops->act_bwd(b.be, TF_ACT_RELU, Y, U_, W, (long)n); break;
    case EW_GATE: b.ops->gate_fwd(b.be, Y, U_, V, (long)n); break;
    case EW_GATEB: b.ops->gate_bwd(b.be, Y, Z, U_, V, W, (long)n); break;
    default: b.ops->gate_residual_fwd(b.be, Y, U_, V, W, (long)n); break;
    }
    b_get(b, y, Y, n);
    if (op == EW_GATEB) b_get(b, z, Z, n);
    b_free(b, u), b_free(b, v), b_free(b, w), b_free(b, zd);
    if (!inplace) b_free(b, yd);
}

static void test_elementwise(void **state)
{
    (void)state;
    g_fail = 0;
    /* exact: one IEEE op; one expf: 8u; dy*y*(1-y): 3 roundings; dg: see top */
    static const double tol[EW_N] = {0, 0, 0, 8 * U, 0, 4 * U, 0, 8 * U, 8 * U, 8 * U};
    static const size_t ns[] = {1, 7, 33, 4099};
    for (int op = 0; op < EW_N; ++op)
        for (size_t k = 0; k < 4; ++k)
            for (int off = 0; off < 2; ++off) {
                const size_t n = ns[k];
                float *hu = rnd(n + 1, 2.f, 71), *hv = rnd(n + 1, 2.f, 72), *hw = rnd(n + 1, 2.f, 73);
                if (op == EW_SIGB) tf_test_fill_uniform(hw, n + 1, 0.f, 1.f, 74); /* sigmoid output */
                if (op == EW_RELUB)
                    for (size_t i = 0; i < n + 1; ++i) hw[i] = hw[i] < 0 ? 0 : hw[i];
                float *y[3], *z[3];
                for (int r = 0; r < 3; ++r) {
                    y[r] = tf_test_falloc(n), z[r] = tf_test_falloc(n);
                    run_ew(r == 0 ? g_cpu : g_cu3, op, n, off, 0, hu, hv, hw, y[r], z[r]);
                }
                char shape[64];
                snprintf(shape, sizeof shape, "n=%zu offset=%d", n, off);
                check(ew_name[op], shape, y[1], y[0], n, tol[op]);
                check_same(ew_name[op], shape, y[1], y[2], n);
                if (op == EW_GATEB) {
                    check("gate_bwd.dg", shape, z[1], z[0], n, 32 * U);
                    check_same("gate_bwd.dg", shape, z[1], z[2], n);
                }
                if (op != EW_GATEB) { /* y aliasing the first input */
                    run_ew(g_cu3, op, n, off, 1, hu, hv, hw, y[2], z[2]);
                    check_same(ew_name[op], "in place", y[1], y[2], n);
                }
                for (int r = 0; r < 3; ++r) free(y[r]), free(z[r]);
                free(hu), free(hv), free(hw);
            }
    done();
}

/* ---- gated L|R to channel-major (gate_cmajor_fwd / _bwd) ----
 * Against the CPU: gate_fwd / gate_bwd's arithmetic (8u; dg 32u). On the GPU
 * itself: the same bits as its gate_fwd / gate_bwd with the permute
 * [rows, 2, C] <-> [2, C, rows] after / before. Merged layout (a, g in one
 * [rows, 4C] buffer, ld 4C) and separate [rows, 2C] buffers (ld 2C); C below,
 * at and across the 64-wide tiles, rows with a partial last tile; lr_t as
 * [2, C, rows] (inner = rows) and [2, B, C, inner] with B = 3 (tiles across
 * the b boundaries where inner % 64 != 0). */
static void gc_run(bk b, int composed, long rows, long inner, int C, long ld, int merged,
                   const float *hx, const float *hg, const float *hdy, float *lr_t, float *da,
                   float *dg)
{
    const size_t n = (size_t)rows * 2 * C, nx = (size_t)rows * ld;
    float *x = b_put(b, hx, nx), *gx = b_put(b, hg, nx), *dyt = b_put(b, hdy, n);
    const float *pa = x, *pg = merged ? x + 2 * C : gx;
    float *o = b_nan(b, n), *dx = b_nan(b, nx), *dgs = b_nan(b, nx);
    float *dav = dx, *dgv = merged ? dx + 2 * C : dgs;
    if (!composed) {
        b.ops->gate_cmajor_fwd(b.be, o, pa, pg, ld, rows, inner, C);
        b.ops->gate_cmajor_bwd(b.be, dav, dgv, dyt, pa, pg, ld, rows, inner, C);
    } else { /* contiguous [rows, 2C] copies of the strided views, then the ops */
        float *ha = tf_test_falloc(n), *hgg = tf_test_falloc(n);
        for (long r = 0; r < rows; ++r)
            for (int c = 0; c < 2 * C; ++c) {
                ha[r * 2 * C + c] = hx[r * ld + c];
                hgg[r * 2 * C + c] = merged ? hx[r * ld + 2 * C + c] : hg[r * ld + c];
            }
        float *a = b_put(b, ha, n), *g = b_put(b, hgg, n), *y = b_nan(b, n), *dy = b_nan(b, n);
        float *dac = b_nan(b, n), *dgc = b_nan(b, n);
        const int nb = (int)(rows / inner);
        tf_permute_args pf = {.rank = 4, .dims = {nb, (int)inner, 2, C}, .perm = {2, 0, 3, 1}};
        tf_permute_args pb = {.rank = 4, .dims = {2, nb, C, (int)inner}, .perm = {1, 3, 0, 2}};
        b.ops->gate_fwd(b.be, y, a, g, (long)n);
        b.ops->permute(b.be, o, y, &pf);
        b.ops->permute(b.be, dy, dyt, &pb);
        b.ops->gate_bwd(b.be, dac, dgc, dy, a, g, (long)n);
        float *h1 = tf_test_falloc(n), *h2 = tf_test_falloc(n);
        b_get(b, h1, dac, n);
        b_get(b, h2, dgc, n);
        for (long r = 0; r < rows; ++r) /* into the strided outputs' places */
            for (int c = 0; c < 2 * C; ++c) {
                da[r * 2 * C + c] = h1[r * 2 * C + c];
                dg[r * 2 * C + c] = h2[r * 2 * C + c];
            }
        b_get(b, lr_t, o, n);
        free(ha), free(hgg), free(h1), free(h2);
        b_free(b, a), b_free(b, g), b_free(b, y), b_free(b, dy), b_free(b, dac), b_free(b, dgc);
        b_free(b, x), b_free(b, gx), b_free(b, dyt), b_free(b, o), b_free(b, dx), b_free(b, dgs);
        return;
    }
    b_get(b, lr_t, o, n);
    float *hd = tf_test_falloc(nx), *hdg = tf_test_falloc(nx);
    b_get(b, hd, dx, nx);
    b_get(b, hdg, merged ? dx : dgs, nx);
    for (long r = 0; r < rows; ++r)
        for (int c = 0; c < 2 * C; ++c) {
            da[r * 2 * C + c] = hd[r * ld + c];
            dg[r * 2 * C + c] = hdg[r * ld + (merged ? 2 * C : 0) + c];
        }
    free(hd), free(hdg);
    b_free(b, x), b_free(b, gx), b_free(b, dyt), b_free(b, o), b_free(b, dx), b_free(b, dgs);
}

static void test_gate_cmajor(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][2] = {{3, 1}, {21, 3}, {33, 8}, {300, 64}, {129, 100}, {3072, 128}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k)
        for (int merged = 0; merged < 2; ++merged)
        for (int split = 0; split < 2; ++split) {
            const long rows = sh[k][0], inner = split ? rows / 3 : rows;
            const int C = sh[k][1];
            const long ld = merged ? 4 * C : 2 * C;
            const size_t n = (size_t)rows * 2 * C, nx = (size_t)rows * ld;
            float *hx = rnd(nx, 2.f, 75), *hg = rnd(nx, 2.f, 77), *hd = rnd(n, 2.f, 76);
            float *o[4][3];
            for (int r = 0; r < 4; ++r) { /* CPU, GPU, GPU again, GPU composed */
                for (int q = 0; q < 3; ++q) o[r][q] = tf_test_falloc(n);
                gc_run(r == 0 ? g_cpu : g_cu3, r == 3, rows, inner, C, ld, merged, hx, hg, hd,
                       o[r][0], o[r][1], o[r][2]);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "rows=%ld inner=%ld C=%d ld=%ld", rows, inner, C, ld);
            static const char *nm[3] = {"gate_cmajor_fwd", "gate_cmajor_bwd.da",
                                        "gate_cmajor_bwd.dg"};
            const double tol[3] = {8 * U, 8 * U, 32 * U};
            for (int q = 0; q < 3; ++q) {
                check(nm[q], shape, o[1][q], o[0][q], n, tol[q]);
                check_same(nm[q], shape, o[1][q], o[2][q], n);
                if (!tf_test_bits_equal(o[1][q], o[3][q], n)) {
                    printf("FAIL %s %s: not the bits of the gating op and the permute\n", nm[q],
                           shape);
                    ++g_fail;
                }
            }
            for (int r = 0; r < 4; ++r)
                for (int q = 0; q < 3; ++q) free(o[r][q]);
            free(hx), free(hg), free(hd);
        }
    done();
}

/* ---- embedding ---- */
static void test_embed(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 300, 4096};
    static const int Cs[] = {5, 64};
    const int V = 21;
    for (size_t k = 0; k < 4; ++k)
        for (size_t c = 0; c < 2; ++c) {
            const long n = ns[k];
            const int C = Cs[c];
            int32_t *tok = malloc(n * sizeof *tok);
            tf_test_rng rng;
            tf_test_rng_init(&rng, 81);
            for (long t = 0; t < n; ++t) tok[t] = tf_test_rng_int(&rng, V);
            float *ht = rnd((size_t)V * C, 1.f, 82), *hd = rnd((size_t)n * C, 1.f, 83);
            float *out[3], *dt[3];
            for (int r = 0; r < 3; ++r) {
                const bk b = r == 0 ? g_cpu : g_cu3;
                void *tk = NULL;
                assert_int_equal(b.ops->alloc(b.be, &tk, n * sizeof *tok), 0);
                b.ops->upload(b.be, tk, tok, n * sizeof *tok);
                float *tab = b_put(b, ht, (size_t)V * C), *o = b_nan(b, (size_t)n * C);
                float *dout = b_put(b, hd, (size_t)n * C), *dtab = b_put(b, ht, (size_t)V * C);
                b.ops->embed_fwd(b.be, o, tab, tk, n, C);
                b.ops->embed_bwd(b.be, dtab, dout, tk, n, C, V); /* accumulates onto ht */
                out[r] = tf_test_falloc((size_t)n * C), dt[r] = tf_test_falloc((size_t)V * C);
                b_get(b, out[r], o, (size_t)n * C);
                b_get(b, dt[r], dtab, (size_t)V * C);
                b_free(b, tk), b_free(b, tab), b_free(b, o), b_free(b, dout), b_free(b, dtab);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "n=%ld C=%d vocab=%d", n, C, V);
            check("embed_fwd", shape, out[1], out[0], (size_t)n * C, 0.0);
            check_same("embed_fwd", shape, out[1], out[2], (size_t)n * C);
            check("embed_bwd", shape, dt[1], dt[0], (size_t)V * C, tol_sum((double)n + 1));
            check_same("embed_bwd", shape, dt[1], dt[2], (size_t)V * C);
            for (int r = 0; r < 3; ++r) free(out[r]), free(dt[r]);
            free(tok), free(ht), free(hd);
        }
    done();
}

/* ---- outer product mean backward (opm_bwd): each output sums 2 N co products
 * (of a and the pre-added pair of dop values, added the same way on both
 * sides), in another order: tol_sum(2 N co). Shapes: kernel2's float4 and
 * scalar paths (co % 4), two s chunks (S > 32), two p chunks (co > 32);
 * kernel3 (co 32) with 16 rows a block (S <= 16: the small problem's, and a
 * partial chunk at S 5), 32 (S 17, 32) and two chunks (S 40), N not a
 * multiple of its 8 warps ---- */
static void test_opm_bwd(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][4] = {{1, 3, 5, 8},   {2, 5, 7, 6},    {2, 16, 20, 32},
                                {1, 40, 9, 32}, {1, 3, 4, 36},   {4, 16, 64, 32},
                                {3, 5, 23, 32}, {2, 32, 24, 32}, {1, 17, 11, 32}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k) {
        const int B = sh[k][0], S = sh[k][1], N = sh[k][2], co = sh[k][3];
        const size_t na = (size_t)B * S * N * co, nd = (size_t)B * N * N * co * co;
        float *ha = rnd(na, 1.f, 91), *hd = rnd(nd, 1.f, 92), *res[3];
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *a = b_put(b, ha, na), *dop = b_put(b, hd, nd), *da = b_nan(b, na);
            b.ops->opm_bwd(b.be, da, dop, a, B, S, N, co);
            res[r] = tf_test_falloc(na);
            b_get(b, res[r], da, na);
            b_free(b, a), b_free(b, dop), b_free(b, da);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d S=%d N=%d co=%d", B, S, N, co);
        check("opm_bwd", shape, res[1], res[0], na, tol_sum(2.0 * N * co));
        check_same("opm_bwd", shape, res[1], res[2], na);
        for (int r = 0; r < 3; ++r) free(res[r]);
        free(ha), free(hd);
    }
    done();
}

/* ---- outer product mean's permuted product (opm_outer): each output sums S
 * products in another order than the CPU's: tol_sum(S). Shapes: kernel3
 * (co 32: one s chunk, two (S 40), N not a multiple of its 8 j), kernel1
 * (co 8, 6, 36) ---- */
static void test_opm_outer(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][4] = {{1, 3, 5, 8},    {2, 5, 7, 6},   {1, 3, 4, 36}, {2, 16, 20, 32},
                                {1, 40, 9, 32},  {3, 5, 23, 32}, {4, 16, 64, 32}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k) {
        const int B = sh[k][0], S = sh[k][1], N = sh[k][2], co = sh[k][3];
        const size_t na = (size_t)B * S * N * co, no = (size_t)B * N * N * co * co;
        float *ha = rnd(na, 1.f, 93), *res[3];
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *a = b_put(b, ha, na), *o = b_nan(b, no);
            b.ops->opm_outer(b.be, o, a, B, S, N, co);
            res[r] = tf_test_falloc(no);
            b_get(b, res[r], o, no);
            b_free(b, a), b_free(b, o);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d S=%d N=%d co=%d", B, S, N, co);
        check("opm_outer", shape, res[1], res[0], no, tol_sum((double)S));
        check_same("opm_outer", shape, res[1], res[2], no);
        for (int r = 0; r < 3; ++r) free(res[r]);
        free(ha);
    }
    done();
}

/* ---- distance head + MSE ---- */
static void test_mse_head(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 33, 4096, 70000};
    for (size_t k = 0; k < 5; ++k) {
        const long n = ns[k];
        float *hl = rnd(n, 2.f, 91), *ht = tf_test_falloc(n), *pred[3], *dl[3], loss[3];
        tf_test_fill_uniform(ht, n, 0.f, 20.f, 92);
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *lg = b_put(b, hl, n), *tg = b_put(b, ht, n), *p = b_nan(b, n), *ls = b_nan(b, 1);
            float *d = b_nan(b, n);
            b.ops->mse_head_fwd(b.be, p, ls, lg, tg, n, 20.f);
            pred[r] = tf_test_falloc(n), dl[r] = tf_test_falloc(n);
            b_get(b, pred[r], p, n);
            b_get(b, &loss[r], ls, 1);
            b.ops->upload(b.be, p, pred[0], n * sizeof(float)); /* bwd from the same pred */
            b.ops->mse_head_bwd(b.be, d, p, tg, n, 20.f);
            b_get(b, dl[r], d, n);
            b_free(b, lg), b_free(b, tg), b_free(b, p), b_free(b, ls), b_free(b, d);
        }
        /* bwd: dl = k (p-t) p (1 - p/dmax). The two backends' 1 - p/dmax differ by
         * up to ~2u absolutely (p/dmax <= 1), which is not small relative to
         * 1 - p/dmax when p -> dmax: so |diff| <= (2 + 6)u |k (p-t) p|, and the
         * tolerance is 8u times how much |k (p-t) p| outweighs |dl| */
        double num = 0, den = 0, mn = 0, md = 0;
        for (long i = 0; i < n; ++i) {
            const double kap = 2.0 / n * ((double)pred[0][i] - ht[i]) * pred[0][i];
            num += kap * kap, den += (double)dl[0][i] * dl[0][i];
            mn = fmax(mn, fabs(kap)), md = fmax(md, fabs(dl[0][i]));
        }
        const double amp = fmax(sqrt(num / den), mn / md);
        char shape[32];
        snprintf(shape, sizeof shape, "n=%ld", n);
        check("mse_head_fwd.pred", shape, pred[1], pred[0], n, 8 * U);
        /* n positive terms (no cancellation in the sum); each (p-t)^2 carries
         * p's 8u relative error amplified by |p|/|p-t| on average ~ 2x */
        check("mse_head_fwd.loss", shape, &loss[1], &loss[0], 1, tol_sum(n) + 32 * U);
        check("mse_head_bwd", shape, dl[1], dl[0], n, 8 * U * amp);
        check_same("mse_head_fwd.pred", shape, pred[1], pred[2], n);
        check_same("mse_head_fwd.loss", shape, &loss[1], &loss[2], 1);
        check_same("mse_head_bwd", shape, dl[1], dl[2], n);
        for (int r = 0; r < 3; ++r) free(pred[r]), free(dl[r]);
        free(hl), free(ht);
    }
    done();
}

/* ---- AdamW ---- */
static void adamw_hyper(float *h, float lr, int step)
{
    h[0] = lr, h[1] = 0.9f, h[2] = 0.999f, h[3] = 1e-8f, h[4] = 0.01f;
    h[5] = 1.f - powf(0.9f, (float)step), h[6] = 1.f - powf(0.999f, (float)step);
}

static void test_adamw(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 10001};
    for (size_t k = 0; k < 3; ++k) {
        const long n = ns[k];
        float hy[7], *hp = rnd(n, 1.f, 101), *hg = rnd(n, 1.f, 102), *hm = rnd(n, 0.1f, 103);
        float *hv = tf_test_falloc(n), *res[3][3];
        tf_test_fill_uniform(hv, n, 0.f, 0.01f, 104);
        adamw_hyper(hy, 1e-2f, 3);
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *p = b_put(b, hp, n), *g = b_put(b, hg, n), *m = b_put(b, hm, n);
            float *v = b_put(b, hv, n), *hyd = b_put(b, hy, 7);
            b.ops->adamw(b.be, p, g, m, v, n, hyd);
            float *dv[3] = {p, m, v};
            for (int q = 0; q < 3; ++q) res[r][q] = tf_test_falloc(n), b_get(b, res[r][q], dv[q], n);
            b_free(b, p), b_free(b, g), b_free(b, m), b_free(b, v), b_free(b, hyd);
        }
        char shape[32];
        snprintf(shape, sizeof shape, "n=%ld", n);
        static const char *nm[3] = {"adamw.p", "adamw.m", "adamw.v"};
        for (int q = 0; q < 3; ++q) { /* a handful of roundings each, no long sums */
            check(nm[q], shape, res[1][q], res[0][q], n, 8 * U);
            check_same(nm[q], shape, res[1][q], res[2][q], n);
        }
        for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q) free(res[r][q]);
        free(hp), free(hg), free(hm), free(hv);
    }
    done();
}

/* ---- memory accounting, memory ops, describe ---- */
/* ---- the plan: a backend takes the one it is given ---- */
static void test_gpu_plan(void **state)
{
    (void)state;
    g_fail = 0;
    static const char *const good[] = {"portable", "gemm=cublas,attn=k4,lane=off", "dw=mma"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; ++k) {
        tf_gpu_plan p;
        char err[256] = "", desc[512] = "", want[128] = "";
        bk b;
        assert_int_equal(tf_gpu_plan_parse(good[k], &p, err, sizeof err), 0);
        const int rc = bk_create_rc(&b, 3, 0, &p, NULL, err, sizeof err);
        if (rc) {
            printf("FAIL plan %s: create: %s\n", good[k], err);
            g_fail++;
            continue;
        }
        tf_cuda_backend_describe(b.be, desc, sizeof desc);
        /* describe names the plan in force: the given fields over the
         * default, which is all auto on a GPU with mma.sync and cp.async */
        const tf_gpu_caps caps = tf_gpu_caps_h200();
        const tf_gpu_plan full = tf_gpu_plan_apply(tf_gpu_plan_default(&caps, 0, 3), &p);
        tf_gpu_plan_format(&full, want, sizeof want);
        const int ok = strstr(desc, want) != NULL;
        printf("%s plan %s: %s\n", ok ? "PASS" : "FAIL", good[k], desc);
        g_fail += !ok;
        tf_cuda_backend_destroy(b.be);
    }
    done();
}

static void test_memory(void **state)
{
    (void)state;
    g_fail = 0;
    const tf_ops *o = g_cu3.ops;
    tf_backend *be = g_cu3.be;
    assert_int_equal(tf_built_with_cuda(), 1);
    const size_t peak0 = tf_cuda_backend_peak_bytes(be);
    assert_true(peak0 >= ((size_t)32 << 20)); /* the cuBLAS workspace is counted */
    void *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(o->alloc(be, &a, 1000), 0);
    assert_int_equal(o->alloc(be, &b, 3), 0);
    assert_int_equal(tf_cuda_backend_peak_bytes(be), peak0 + 1003); /* exact */
    o->free(be, b);
    assert_int_equal(o->alloc(be, &b, 2), 0);
    assert_int_equal(tf_cuda_backend_peak_bytes(be), peak0 + 1003); /* 1002 < peak */
    o->free(be, b);
    /* out of memory is an answer, not a crash; the backend stays usable */
    assert_int_not_equal(o->alloc(be, &c, (size_t)1 << 52), 0);
    assert_int_equal(tf_cuda_backend_peak_bytes(be), peak0 + 1003);
    float h[250], r[250];
    tf_test_fill_normal(h, 250, 0, 1, 1);
    o->upload(be, a, h, sizeof h);
    o->zero(be, a, 100 * sizeof(float));
    assert_int_equal(o->alloc(be, &b, sizeof r), 0);
    o->copy(be, b, a, sizeof r);
    o->download(be, r, b, sizeof r);
    for (int i = 0; i < 250; i++) assert_true(r[i] == (i < 100 ? 0.0f : h[i]));
    o->free(be, a), o->free(be, b), o->free(be, NULL);
    /* page-locked host memory (the trainer's batch buffers): a round trip,
     * no device bytes counted, and a size the host cannot lock fails cleanly */
    float *hp = NULL;
    const size_t pk = tf_cuda_backend_peak_bytes(be);
    assert_int_equal(o->host_alloc(be, (void **)&hp, sizeof h), 0);
    memcpy(hp, h, sizeof h);
    assert_int_equal(o->alloc(be, &a, sizeof h), 0);
    o->upload(be, a, hp, sizeof h);
    memset(hp, 0, sizeof h);
    o->download(be, hp, a, sizeof h);
    assert_true(tf_test_bits_equal(h, hp, 250));
    o->free(be, a);
    o->host_free(be, hp);
    o->host_free(be, NULL);
    assert_int_equal(tf_cuda_backend_peak_bytes(be), pk);
    void *hh = (void *)1;
    assert_int_not_equal(o->host_alloc(be, &hh, (size_t)1 << 52), 0);
    assert_null(hh);
    char desc[512];
    tf_cuda_backend_describe(be, desc, sizeof desc);
    printf("describe: %s\n", desc);
    assert_non_null(strstr(desc, "SMs"));
    done();
}

/* ---- graph capture: replays read the current AdamW hyper-parameters ---- */
typedef struct {
    bk b;
    float *p, *g, *m, *v, *hyper, *x, *y, *w, *ln, *mu, *rs, *gam, *bet;
} gstate;
#define GN 1000
#define GR 33
#define GC 64

static void graph_step(void *arg)
{
    gstate *s = arg;
    s->b.ops->adamw(s->b.be, s->p, s->g, s->m, s->v, GN, s->hyper);
    s->b.ops->layernorm_fwd(s->b.be, s->ln, s->mu, s->rs, s->x, s->gam, s->bet, GR, GC, 1e-5f);
    tf_gemm_args a = {0, 1, GR, GC, GC, 1.f, 1.f, s->ln, GC, 0, s->w, GC, 0, s->y, GC, 0, 1, TF_EPI_NONE,
                      NULL, NULL, 0};
    s->b.ops->gemm(s->b.be, &a, "graph_gemm"); /* y += ln(x) w^T: changes every replay */
    tf_gemm_args r = a;
    r.beta = 0.f, r.epilogue = TF_EPI_RELU, r.A = s->y, r.C = s->x;
    s->b.ops->gemm(s->b.be, &r, "graph_gemm_relu"); /* x = relu(y w^T): cuBLASLt */
}

static void gstate_init(gstate *s, bk b, const float *hy)
{
    float *h = rnd(GN + GR * GC, 1.f, 111), *w = rnd(GC * GC, 0.1f, 112);
    s->b = b;
    s->p = b_put(b, h, GN), s->g = b_put(b, h + 1, GN), s->m = b_put(b, h + 2, GN);
    s->v = b_put(b, w, GN); /* any values; squares keep v meaningful enough */
    s->hyper = b_put(b, hy, 7);
    s->x = b_put(b, h + GN, GR * GC), s->y = b_put(b, h + 3, GR * GC), s->w = b_put(b, w, GC * GC);
    s->ln = b_nan(b, GR * GC), s->mu = b_nan(b, GR), s->rs = b_nan(b, GR);
    s->gam = b_put(b, w + 5, GC), s->bet = b_put(b, w + 9, GC);
    for (int i = 0; i < GN; ++i) h[i] = fabsf(w[i]);
    b.ops->upload(b.be, s->v, h, GN * sizeof(float));
    free(h), free(w);
}
static void gstate_free(gstate *s)
{
    float *bufs[] = {s->p, s->g, s->m, s->v, s->hyper, s->x, s->y, s->w, s->ln, s->mu, s->rs, s->gam, s->bet};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) b_free(s->b, bufs[i]);
}

static void test_graph(void **state)
{
    (void)state;
    g_fail = 0;
    float h1[7], h2[7], pa[GN], pb[GN], pc[GN], ya[GR * GC], yb[GR * GC];
    adamw_hyper(h1, 1e-2f, 1);
    adamw_hyper(h2, 3e-2f, 2);
    gstate A, B, Cs;
    /* A: captured once, replayed with h1 then h2 */
    gstate_init(&A, g_cu3, h1);
    void *ge = NULL;
    assert_int_equal(tf_cuda_graph_capture(A.b.be, graph_step, &A, &ge), 0);
    assert_non_null(ge);
    assert_int_equal(tf_cuda_graph_launch(A.b.be, ge), 0);
    A.b.ops->upload(A.b.be, A.hyper, h2, sizeof h2);
    assert_int_equal(tf_cuda_graph_launch(A.b.be, ge), 0);
    b_get(A.b, pa, A.p, GN);
    b_get(A.b, ya, A.y, GR * GC);
    tf_cuda_graph_destroy(ge);
    /* B: the same ops issued directly */
    gstate_init(&B, g_cu3, h1);
    graph_step(&B);
    B.b.ops->upload(B.b.be, B.hyper, h2, sizeof h2);
    graph_step(&B);
    b_get(B.b, pb, B.p, GN);
    b_get(B.b, yb, B.y, GR * GC);
    check_same("graph replay vs direct: adamw.p", "", pa, pb, GN);
    check_same("graph replay vs direct: gemm.y", "", ya, yb, GR * GC);
    /* C: h1 twice must differ, or the replay did not read the new hyper */
    gstate_init(&Cs, g_cu3, h1);
    graph_step(&Cs);
    graph_step(&Cs);
    b_get(Cs.b, pc, Cs.p, GN);
    if (tf_test_bits_equal(pa, pc, GN)) {
        printf("FAIL graph: replay ignored the updated AdamW hyper-parameters\n");
        ++g_fail;
    } else {
        printf("PASS graph capture/replay (bit-identical to direct issue; reads hyper at run time)\n");
    }
    gstate_free(&A), gstate_free(&B), gstate_free(&Cs);
    done();
}

/* ---- the weight-gradient lane (ops wgrad_*, cuda_wgrad.cu) ----
 * One step: a weight gradient w2 += dy^T x on the lane, beside it on the main
 * queue y = x w1^T, then the wait and dy halved (what a module's backward does
 * after the wait: overwrite what the lane read). Captured and replayed twice it
 * must give the bits of the same ops issued on the main queue alone, also
 * with the lane held back 2 ms a GEMM (the plan's wgrad_delay_us): without the
 * wait the halving would come first. A capture that leaves the lane unjoined
 * fails with one line instead of giving a graph. fp32 (our wide split) and
 * tf32 (cuBLASLt's split K). */
#define LK 4096
#define LMN 128
typedef struct {
    bk b;
    float *x, *dy, *w1, *w2, *y;
    int wgrad, wait;
} lstate;

static void lane_step(void *arg)
{
    lstate *s = arg;
    const tf_ops *o = s->b.ops;
    tf_gemm_args g = {1, 0, LMN, LMN, LK, 1.f, 1.f, s->dy, LMN, 0, s->x, LMN, 0, s->w2, LMN, 0, 1,
                      TF_EPI_NONE, NULL, NULL, s->wgrad};
    o->gemm(s->b.be, &g, "lane_dw");
    const long t = o->wgrad_mark(s->b.be);
    tf_gemm_args h = {0, 1, LK, LMN, LMN, 1.f, 0.f, s->x, LMN, 0, s->w1, LMN, 0, s->y, LMN, 0, 1,
                      TF_EPI_NONE, NULL, NULL, 0};
    o->gemm(s->b.be, &h, "lane_main");
    if (s->wait) o->wgrad_wait(s->b.be, t);
    o->scale(s->b.be, s->dy, s->dy, 0.5f, (long)LK * LMN);
}

static void lane_init(lstate *s, bk b, int wgrad, int wait)
{
    float *h = rnd((size_t)LK * LMN * 2 + LMN * LMN * 2, 1.f, 121);
    s->b = b, s->wgrad = wgrad, s->wait = wait;
    s->x = b_put(b, h, (size_t)LK * LMN), s->dy = b_put(b, h + (size_t)LK * LMN, (size_t)LK * LMN);
    s->w1 = b_put(b, h + (size_t)2 * LK * LMN, LMN * LMN);
    s->w2 = b_put(b, h + (size_t)2 * LK * LMN + LMN * LMN, LMN * LMN);
    s->y = b_nan(b, (size_t)LK * LMN);
    free(h);
}

static void lane_free(lstate *s)
{
    float *bufs[] = {s->x, s->dy, s->w1, s->w2, s->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) b_free(s->b, bufs[i]);
}

static void test_wgrad_lane(void **state)
{
    (void)state;
    g_fail = 0;
    static float w_ref[LMN * LMN], w_got[LMN * LMN], y_ref[LK * LMN], y_got[LK * LMN];
    for (int prec = 0; prec <= 1; ++prec)
        for (int delay = 0; delay <= 1; ++delay) {
            tf_backend_opts o;
            char err[256], what[64];
            memset(&o, 0, sizeof o);
            o.kernel_level = 3, o.tf32 = prec;
            tf_gpu_plan held = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
            held.wgrad_delay_us = 2000;
            if (delay) o.gpu_plan = &held;
            bk b;
            const int rc = tf_cuda_backend_create(&b.be, &b.ops, &o, err, sizeof err);
            if (rc) fail_msg("create: %s", err);
            assert_int_equal(b.ops->wgrad_enable(b.be), 0);
            lstate ref, s;
            lane_init(&ref, b, 0, 1); /* the main queue alone, issued directly */
            lane_step(&ref), lane_step(&ref);
            b_get(b, w_ref, ref.w2, LMN * LMN), b_get(b, y_ref, ref.y, (size_t)LK * LMN);
            lane_init(&s, b, 1, 1); /* on the lane, captured, replayed twice */
            void *ge = NULL;
            assert_int_equal(tf_cuda_graph_capture(b.be, lane_step, &s, &ge), 0);
            assert_int_equal(tf_cuda_graph_launch(b.be, ge), 0);
            assert_int_equal(tf_cuda_graph_launch(b.be, ge), 0);
            tf_cuda_graph_destroy(ge);
            b_get(b, w_got, s.w2, LMN * LMN), b_get(b, y_got, s.y, (size_t)LK * LMN);
            snprintf(what, sizeof what, "lane, graph, %s%s", prec ? "tf32" : "fp32",
                     delay ? ", held back 2 ms" : "");
            check_same(what, "dW", w_ref, w_got, LMN * LMN);
            check_same(what, "y", y_ref, y_got, (size_t)LK * LMN);
            lane_free(&s);
            lane_init(&s, b, 1, 1); /* on the lane, issued directly */
            lane_step(&s), lane_step(&s);
            b.ops->sync(b.be);
            b_get(b, w_got, s.w2, LMN * LMN);
            snprintf(what, sizeof what, "lane, eager, %s%s", prec ? "tf32" : "fp32",
                     delay ? ", held back 2 ms" : "");
            check_same(what, "dW", w_ref, w_got, LMN * LMN);
            lane_free(&s);
            lane_free(&ref);
            if (!delay) { /* a step that leaves the lane unjoined is refused */
                lane_init(&s, b, 1, 0);
                ge = NULL;
                const int bad = tf_cuda_graph_capture(b.be, lane_step, &s, &ge);
                if (!bad || ge) {
                    printf("FAIL lane: a capture with the lane unjoined gave a graph\n");
                    ++g_fail;
                    if (ge) tf_cuda_graph_destroy(ge);
                } else {
                    printf("PASS lane: a capture with the lane unjoined is refused (%s)\n",
                           prec ? "tf32" : "fp32");
                }
                lane_free(&s);
            }
            tf_cuda_backend_destroy(b.be);
        }
    done();
}

static int group_setup(void **state)
{
    (void)state;
    char err[256];
    if (tf_test_cpu_backend(&g_cpu.be, &g_cpu.ops)) return 1;
    const tf_gpu_plan dflt = g_plan,
                      mma = plan_of(TF_GPU_GEMM_MMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO),
                      lib = plan_of(TF_GPU_GEMM_CUBLAS, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO),
                      wg = plan_of(TF_GPU_GEMM_WGMMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO),
                      k2 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K2),
                      k3 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K3),
                      k4 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K4),
                      k5 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K5);
    const struct {
        bk *b;
        int level, tf32;
        const tf_gpu_plan *plan;
        const char *sms;
    } cu[] = {{&g_cu1, 1, 0, &dflt, NULL},   {&g_cu3, 3, 0, &mma, NULL},
              {&g_cu3k2, 3, 0, &k2, NULL},   {&g_cu3k3, 3, 0, &k3, NULL},
              {&g_cu3k4, 3, 0, &k4, NULL},   {&g_cu3k5, 3, 0, &k5, NULL},
              {&g_cu3lt, 3, 0, &lib, NULL},  {&g_tf32, 3, 1, &dflt, NULL},
              {&g_tf32mma, 3, 1, &mma, NULL}, {&g_tf32k5, 3, 1, &k5, NULL},
              {&g_cu3wg, 3, 0, &wg, NULL},   {&g_cu3wgs, 3, 0, &wg, "1"}};
    for (size_t k = 0; k < sizeof cu / sizeof cu[0]; ++k)
        if (bk_create_rc(cu[k].b, cu[k].level, cu[k].tf32, cu[k].plan, cu[k].sms, err,
                         sizeof err)) {
            fprintf(stderr, "cuda backend: %s\n", err);
            return 1;
        }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tf_cuda_backend_destroy(g_cu1.be);
    tf_cuda_backend_destroy(g_cu3.be);
    tf_cuda_backend_destroy(g_cu3k2.be);
    tf_cuda_backend_destroy(g_cu3k3.be);
    tf_cuda_backend_destroy(g_cu3k4.be);
    tf_cuda_backend_destroy(g_cu3k5.be);
    tf_cuda_backend_destroy(g_tf32k5.be);
    tf_cuda_backend_destroy(g_cu3lt.be);
    tf_cuda_backend_destroy(g_tf32.be);
    tf_cuda_backend_destroy(g_tf32mma.be);
    tf_cuda_backend_destroy(g_cu3wg.be);
    tf_cuda_backend_destroy(g_cu3wgs.be);
    tf_cpu_backend_destroy(g_cpu.be);
    return 0;
}

int main(int argc, char **argv)
{
    char why[256], err[256];
    if (argc == 3 && !strcmp(argv[1], "--gpu-plan")) {
        if (tf_gpu_plan_parse(argv[2], &g_plan, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        printf("the default backends run on the plan %s\n", argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: test_cuda_ops [--gpu-plan SPEC]\n");
        return 2;
    }
    if (!tf_cuda_backend_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return TF_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_plan),   cmocka_unit_test(test_memory),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_r),
        cmocka_unit_test(test_gemm_split),
        cmocka_unit_test(test_gemm_plans),
        cmocka_unit_test(test_layernorm),   cmocka_unit_test(test_layernorm2),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_attention),   cmocka_unit_test(test_permute),
        cmocka_unit_test(test_opm_bwd),
        cmocka_unit_test(test_opm_outer),
        cmocka_unit_test(test_gate_cmajor),
        cmocka_unit_test(test_bcast_sum),   cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_embed),       cmocka_unit_test(test_mse_head),
        cmocka_unit_test(test_adamw),       cmocka_unit_test(test_graph),
        cmocka_unit_test(test_wgrad_lane),
    };
    if (getenv("TF_TEST_FILTER")) cmocka_set_test_filter(getenv("TF_TEST_FILTER")); /* e.g. "*attention*" */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
