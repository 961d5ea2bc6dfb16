/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): GEMMs: plain, with the residual input R and the DRELU epilogue, split K on the
 * tensor-core kernels, more plan keys than the cuBLASLt plan table holds. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                      B, s->ldb, s->sB, C, s->ldc, s->sC, s->batch, s->epi, NULL, NULL, 0, TF_F32, TF_F32};
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
                      B, s->ldb, s->sB, C, s->ldc, s->sC, s->batch, s->epi, R, X, 0, TF_F32, TF_F32};
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
                          C + (size_t)M * (M - 1) / 2 * PL_N, PL_N, 0, 1, TF_EPI_NONE, NULL, NULL, 0,
                          TF_F32, TF_F32};
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_r),
        cmocka_unit_test(test_gemm_split),
        cmocka_unit_test(test_gemm_plans),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_gemm", tests, sizeof tests / sizeof *tests);
}
