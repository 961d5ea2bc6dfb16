/* What the CUDA op tests share (tests/unit/test_cuda_ops_*.c, one binary per
 * op family: gemm, norm, attn, data, opm, misc). Together they check every op
 * of tf_ops against the CPU backend, at several shapes
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
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
bk g_cpu, g_cu1, g_cu3, g_cu3k2, g_cu3k3, g_cu3k4, g_cu3k5, g_cu3lt, g_tf32, g_tf32mma,
    g_tf32k5, g_cu3wg, g_cu3wgs;
int g_fail;
/* the default backends' plan: `test_cuda_ops_* --gpu-plan SPEC` (default: none) */
tf_gpu_plan g_plan;

double tol_sum(double K) { return (3.0 * sqrt(K) + 4.0) * U; }
/* 3xTF32 (cuda_gemm_mma.cu): each product carries the split's residue, at
 * most 3 * 2^-22 = 12u relative (a_small*b_small and the roundings of the
 * small parts); and the tensor cores accumulate in fp32 with truncation, not
 * rounding (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021):
 * each of the 3K/8 MMAs into an accumulator may lose up to one ulp (2u) of
 * it. Worst case, on top of tol_sum: 12u + 0.75 K u. (Measured on the H200:
 * 4e-6 at K = 3000, 7e-6 at K = 16384, 10-100x inside; the bound still fails
 * an indexing error, and 1xTF32, 2^-11 per product, at K <= 128.) */
double tol_x3(double K) { return tol_sum(K) + (12.0 + 0.75 * K) * U; }

/* ---- buffers on a backend ---- */
void *b_alloc(bk b, size_t n)
{
    void *p = NULL;
    assert_int_equal(b.ops->alloc(b.be, &p, n * sizeof(float) + 16), 0);
    return p;
}
float *b_put(bk b, const float *h, size_t n)
{
    float *d = b_alloc(b, n);
    b.ops->upload(b.be, d, h, n * sizeof(float));
    return d;
}
float *b_nan(bk b, size_t n) /* poisoned output */
{
    float *d = b_alloc(b, n);
    unsigned char *h = malloc(n * sizeof(float) + 1);
    memset(h, 0xFF, n * sizeof(float) + 1);
    b.ops->upload(b.be, d, h, n * sizeof(float));
    free(h);
    return d;
}
void b_get(bk b, float *h, const float *d, size_t n)
{
    b.ops->sync(b.be);
    b.ops->download(b.be, h, d, n * sizeof(float));
}
void b_free(bk b, void *p) { b.ops->free(b.be, p); }
float *rnd(size_t n, float sd, uint64_t seed)
{
    float *h = tf_test_falloc(n ? n : 1);
    tf_test_fill_normal(h, n, 0.f, sd, seed);
    return h;
}

/* ---- comparison ---- */
void check(const char *op, const char *shape, const float *got, const float *ref,
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
void check_scaled(const char *op, const char *shape, const float *got, const float *ref,
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
void check_same(const char *op, const char *shape, const float *a, const float *b,
                       size_t n)
{
    const int ok = tf_test_bits_equal(a, b, n);
    if (!ok) {
        printf("FAIL %s %s: two runs differ (not deterministic)\n", op, shape);
        ++g_fail;
    }
}
void done(void) { assert_int_equal(g_fail, 0); }

/* a plan over the default: the GEMM, wide-split and attention policies */
tf_gpu_plan plan_of(tf_gpu_gemm_policy gemm, tf_gpu_dw_policy dw, tf_gpu_attn_policy attn)
{
    tf_gpu_plan p;
    memset(&p, 0, sizeof p);
    p.gemm = gemm, p.dw = dw, p.attn = attn;
    return p;
}

/* sms: the SM count hostemu reports (HOSTEMU_SMS; NULL: its default; a GPU
 * reports its own) */
int bk_create_rc(bk *b, int level, int tf32, const tf_gpu_plan *plan, const char *sms,
                        char *err, size_t errlen)
{
    tf_backend_opts o;
    memset(&o, 0, sizeof o);
    o.kernel_level = level;
    o.tf32 = tf32;
    if (plan) o.gpu_plan = *plan;
    if (sms) setenv("HOSTEMU_SMS", sms, 1);
    const int rc = tf_cuda_backend_create(&b->be, &b->ops, &o, err, errlen);
    if (sms) unsetenv("HOSTEMU_SMS");
    return rc;
}

bk bk_create(int level, int tf32, const tf_gpu_plan *plan, const char *sms)
{
    bk b;
    char err[256];
    const int rc = bk_create_rc(&b, level, tf32, plan, sms, err, sizeof err);
    if (rc) fprintf(stderr, "cuda backend: %s\n", err);
    assert_int_equal(rc, 0);
    return b;
}

int tf_cuda_group_setup(void **state)
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

int tf_cuda_group_teardown(void **state)
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

int tf_cuda_test_main(int argc, char **argv, const char *prog, const struct CMUnitTest *tests,
                      size_t n)
{
    char why[256], err[256];
    if (argc == 3 && !strcmp(argv[1], "--gpu-plan")) {
        if (tf_gpu_plan_parse(argv[2], &g_plan, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        printf("the default backends run on the plan %s\n", argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--gpu-plan SPEC]\n", prog);
        return 2;
    }
    if (!tf_cuda_backend_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return TF_TEST_SKIP;
    }
    if (getenv("TF_TEST_FILTER")) cmocka_set_test_filter(getenv("TF_TEST_FILTER")); /* e.g. "*attention*" */
    return _cmocka_run_group_tests(prog, tests, n, tf_cuda_group_setup, tf_cuda_group_teardown);
}
