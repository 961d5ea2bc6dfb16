/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): the distance head, AdamW, type
 * conversion and the finiteness check, the plan a backend takes, memory
 * accounting and memory ops, graph capture. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- distance head + MSE ---- */
#define MSE_SEED 1024.f /* a loss scale: a power of two */
static void test_mse_head(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 33, 4096, 70000};
    for (size_t k = 0; k < 5; ++k) {
        const long n = ns[k];
        float *hl = rnd(n, 2.f, 91), *ht = tf_test_falloc(n), *pred[3], *dl[3], loss[3];
        float *dl1[2], *dlk[2]; /* seeded by 1 and by MSE_SEED: the CPU's, then the GPU's */
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
            b.ops->mse_head_bwd(b.be, d, p, tg, n, 20.f, NULL);
            b_get(b, dl[r], d, n);
            if (r < 2) { /* the seed is read from backend memory */
                const float seeds[2] = {1.f, MSE_SEED};
                float *sd = b_put(b, seeds, 2);
                dl1[r] = tf_test_falloc(n), dlk[r] = tf_test_falloc(n);
                b.ops->mse_head_bwd(b.be, d, p, tg, n, 20.f, sd);
                b_get(b, dl1[r], d, n);
                b.ops->mse_head_bwd(b.be, d, p, tg, n, 20.f, sd + 1);
                b_get(b, dlk[r], d, n);
                b_free(b, sd);
            }
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
        /* a seed of 1 keeps the bits; a power of two scales every product
         * exactly, so the seeded gradient is the unseeded one times it */
        float *want = tf_test_falloc(n);
        for (int r = 0; r < 2; ++r) {
            for (long i = 0; i < n; ++i) want[i] = MSE_SEED * dl[r][i];
            if (!tf_test_bits_equal(dl1[r], dl[r], n) || !tf_test_bits_equal(dlk[r], want, n)) {
                printf("FAIL mse_head_bwd(seed) %s %s: not the unseeded bits (times the seed)\n",
                       r ? "cuda" : "cpu", shape);
                ++g_fail;
            }
            free(dl1[r]), free(dlk[r]);
        }
        free(want);
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
    h[TF_HYPER_LOSS_SCALE] = 1.f, h[TF_HYPER_GRAD_MUL] = 1.f, h[TF_HYPER_NONFINITE] = 0.f;
}

/* one AdamW step of hyper hy from (hp, hg, hm, hv) on b: res[0..2] = p, m, v */
static void adamw_run(bk b, const float *hy, const float *hp, const float *hg, const float *hm,
                      const float *hv, long n, float *res[3])
{
    float *p = b_put(b, hp, n), *g = b_put(b, hg, n), *m = b_put(b, hm, n);
    float *v = b_put(b, hv, n), *hyd = b_put(b, hy, TF_HYPER_COUNT);
    b.ops->adamw(b.be, p, NULL, g, m, v, n, hyd, TF_F32);
    float *dv[3] = {p, m, v};
    for (int q = 0; q < 3; ++q) res[q] = tf_test_falloc(n), b_get(b, res[q], dv[q], n);
    b_free(b, p), b_free(b, g), b_free(b, m), b_free(b, v), b_free(b, hyd);
}

/* The weight copy ph (type t) AdamW writes with p: the bits of p rounded,
 * every element; on a skipped step (NONFINITE) left as it was */
static void adamw_copy(bk b, const char *be, tf_dtype t, const float *hy, const float *hp,
                       const float *hg, const float *hm, const float *hv, long n)
{
    float *p = b_put(b, hp, n), *g = b_put(b, hg, n), *m = b_put(b, hm, n);
    float *v = b_put(b, hv, n), *hyd = b_put(b, hy, TF_HYPER_COUNT);
    void *ph = b_alloc(b, n);
    uint16_t *got = malloc(2 * n), *want = malloc(2 * n), *before = malloc(2 * n);
    float *pp = tf_test_falloc(n);
    for (long i = 0; i < n; ++i) before[i] = (uint16_t)(0x3c00u + (i & 255));
    b.ops->upload(b.be, ph, before, 2 * n);
    b.ops->adamw(b.be, p, ph, g, m, v, n, hyd, t);
    b.ops->sync(b.be);
    b.ops->download(b.be, got, ph, 2 * n);
    b_get(b, pp, p, n);
    const int skipped = hy[TF_HYPER_NONFINITE] != 0.f;
    if (skipped)
        memcpy(want, before, 2 * n);
    else
        tf_dtype_from_f32(want, t, pp, n);
    size_t bad = 0;
    for (long i = 0; i < n; ++i) bad += got[i] != want[i];
    printf("%s adamw copy %s %s n=%ld%s: %zu of %ld differ from %s\n", bad ? "FAIL" : "PASS", be,
           tf_dtype_name(t), n, skipped ? " (skipped)" : "", bad, n,
           skipped ? "the copy before" : "p rounded");
    g_fail += bad != 0;
    b_free(b, p), b_free(b, g), b_free(b, m), b_free(b, v), b_free(b, hyd), b_free(b, ph);
    free(got), free(want), free(before), free(pp);
}

static void test_adamw(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 10001};
    for (size_t k = 0; k < 3; ++k) {
        const long n = ns[k];
        float hy[TF_HYPER_COUNT], *hp = rnd(n, 1.f, 101), *hg = rnd(n, 1.f, 102), *hm = rnd(n, 0.1f, 103);
        float *hv = tf_test_falloc(n), *res[3][3];
        tf_test_fill_uniform(hv, n, 0.f, 0.01f, 104);
        adamw_hyper(hy, 1e-2f, 3);
        for (int r = 0; r < 3; ++r) adamw_run(r == 0 ? g_cpu : g_cu3, hy, hp, hg, hm, hv, n, res[r]);
        for (int r = 0; r < 2; ++r)
            for (int k2 = 0; k2 < 2; ++k2)
                adamw_copy(r ? g_cu3 : g_cpu, r ? "cuda" : "cpu", k2 ? TF_F16 : TF_BF16, hy, hp, hg,
                           hm, hv, n);
        char shape[32];
        snprintf(shape, sizeof shape, "n=%ld", n);
        static const char *nm[3] = {"adamw.p", "adamw.m", "adamw.v"};
        for (int q = 0; q < 3; ++q) { /* a handful of roundings each, no long sums */
            check(nm[q], shape, res[1][q], res[0][q], n, 8 * U);
            check_same(nm[q], shape, res[1][q], res[2][q], n);
        }
        /* the gradient's multiplier: a gradient scaled by a power of two and
         * its inverse as GRAD_MUL give the unscaled step's bits (both
         * products exact); an inexact multiplier against the CPU's */
        float *hgs = tf_test_falloc(n), *scl[2][3], *skip[2][3];
        for (long i = 0; i < n; ++i) hgs[i] = hg[i] * MSE_SEED;
        float hys[TF_HYPER_COUNT];
        memcpy(hys, hy, sizeof hys);
        hys[TF_HYPER_GRAD_MUL] = 1.f / MSE_SEED;
        adamw_run(g_cu3, hys, hp, hgs, hm, hv, n, scl[0]);
        for (int q = 0; q < 3; ++q) {
            char nmq[48];
            snprintf(nmq, sizeof nmq, "%s(grad_mul 2^-10)", nm[q]);
            if (!tf_test_bits_equal(scl[0][q], res[1][q], n)) {
                printf("FAIL %s %s: not the unscaled step's bits\n", nmq, shape);
                ++g_fail;
            }
            free(scl[0][q]);
        }
        hys[TF_HYPER_GRAD_MUL] = 0.37f;
        for (int r = 0; r < 2; ++r) adamw_run(r == 0 ? g_cpu : g_cu3, hys, hp, hg, hm, hv, n, scl[r]);
        /* a skipped step (NONFINITE set) leaves p, m, v as they were, NaN
         * gradients or not */
        hys[TF_HYPER_NONFINITE] = 1.f;
        for (long i = 0; i < n; i += 3) hgs[i] = NAN;
        for (int r = 0; r < 2; ++r) adamw_run(r == 0 ? g_cpu : g_cu3, hys, hp, hgs, hm, hv, n, skip[r]);
        for (int r = 0; r < 2; ++r)
            adamw_copy(r ? g_cu3 : g_cpu, r ? "cuda" : "cpu", TF_BF16, hys, hp, hgs, hm, hv, n);
        const float *orig[3] = {hp, hm, hv};
        for (int q = 0; q < 3; ++q) { /* one rounding more (g * mul) than above */
            char nmq[48];
            snprintf(nmq, sizeof nmq, "%s(grad_mul 0.37)", nm[q]);
            check(nmq, shape, scl[1][q], scl[0][q], n, 8 * U);
            for (int r = 0; r < 2; ++r) {
                if (!tf_test_bits_equal(skip[r][q], orig[q], n)) {
                    printf("FAIL %s(skipped) %s %s: changed\n", nm[q], r ? "cuda" : "cpu", shape);
                    ++g_fail;
                }
                free(scl[r][q]), free(skip[r][q]);
            }
        }
        free(hgs);
        for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q) free(res[r][q]);
        free(hp), free(hg), free(hm), free(hv);
    }
    done();
}

/* ---- type conversion: every pair of types, the CPU's bits ---- */
static void test_convert(void **state)
{
    (void)state;
    g_fail = 0;
    /* fp32 sources: random bit patterns (every class: NaN payloads, inf,
     * subnormals, both signs), values around fp16's range and its
     * subnormals, exact ties; half sources: every 16-bit pattern */
    const long n32 = 70001, n16 = 65536;
    uint32_t *w = malloc(sizeof(uint32_t) * (size_t)n32);
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < n32; ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (uint32_t)(st >> 32);
    }
    float *f = (float *)w;
    for (long i = 0; i < n32; i += 4) f[i] = ldexpf((float)(w[i] >> 8) / 16777216.f - 0.5f,
                                                    (int)(i % 60) - 30);
    const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, 65504.f, 65519.99f, 65520.f,
                             -65520.f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1.002p0f,
                             0x1.006p0f, 0x1.0001p0f, 0x1.0003p0f, 3.4e38f, 1e-40f};
    memcpy(f, special, sizeof special);
    uint16_t *hh = malloc(sizeof(uint16_t) * (size_t)n16);
    for (long i = 0; i < n16; ++i) hh[i] = (uint16_t)i;
    for (int stt = 0; stt < TF_DTYPE_COUNT; ++stt)
        for (int dtt = 0; dtt < TF_DTYPE_COUNT; ++dtt) {
            const tf_dtype sty = (tf_dtype)stt, dty = (tf_dtype)dtt;
            const long n = sty == TF_F32 ? n32 : n16;
            const void *src = sty == TF_F32 ? (const void *)f : (const void *)hh;
            const size_t sb = tf_dtype_size(sty) * (size_t)n, db = tf_dtype_size(dty) * (size_t)n;
            unsigned char *out[2];
            for (int r = 0; r < 2; ++r) {
                const bk b = r == 0 ? g_cpu : g_cu3;
                void *s = b_alloc(b, (size_t)n), *d = b_alloc(b, (size_t)n); /* n floats: room for n of any type */
                b.ops->upload(b.be, s, src, sb);
                b.ops->convert(b.be, d, dty, s, sty, n);
                out[r] = malloc(db);
                b.ops->download(b.be, out[r], d, db);
                b_free(b, s), b_free(b, d);
            }
            const int ok = memcmp(out[0], out[1], db) == 0;
            printf("%s convert %s -> %s n=%ld%s\n", ok ? "PASS" : "FAIL", tf_dtype_name(sty),
                   tf_dtype_name(dty), n, ok ? "" : ": not the CPU's bits");
            g_fail += !ok;
            free(out[0]), free(out[1]);
        }
    free(w), free(hh);
    done();
}

/* ---- the finiteness check: sets the flag, or leaves it as it was ---- */
static void test_check_finite(void **state)
{
    (void)state;
    g_fail = 0;
    static const long ns[] = {1, 7, 70001};
    const float bad[] = {INFINITY, -INFINITY, NAN};
    for (size_t k = 0; k < 3; ++k) {
        const long n = ns[k];
        float *hx = rnd(n, 1e30f, 121);
        hx[0] = 3.4e38f; /* the largest values are finite */
        /* (bad value or none, where) x (flag before: 0, 0.5) */
        for (int c = 0; c <= 3; ++c)
            for (int at = 0; at < (n > 1 ? 2 : 1); ++at)
                for (int f0 = 0; f0 < 2; ++f0) {
                    const long pos = at ? n - 1 : n / 2;
                    const float keep = hx[pos], before[2] = {0.f, 0.5f};
                    if (c < 3) hx[pos] = bad[c];
                    float got[2];
                    for (int r = 0; r < 2; ++r) {
                        const bk b = r == 0 ? g_cpu : g_cu3;
                        float *x = b_put(b, hx, n), *fl = b_put(b, &before[f0], 1);
                        b.ops->check_finite(b.be, fl, x, n);
                        b_get(b, &got[r], fl, 1);
                        b_free(b, x), b_free(b, fl);
                    }
                    hx[pos] = keep;
                    const float want = c < 3 ? 1.f : before[f0];
                    const int ok = got[0] == want && got[1] == want;
                    if (!ok) {
                        printf("FAIL check_finite n=%ld value %d at %ld, flag %g: cpu %g cuda %g "
                               "(want %g)\n", n, c, pos, before[f0], got[0], got[1], want);
                        ++g_fail;
                    }
                }
        printf("%s check_finite n=%ld\n", g_fail ? "FAIL" : "PASS", n);
        free(hx);
    }
    done();
}

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

/* ---- memory accounting, memory ops, describe ---- */
static void test_memory(void **state)
{
    (void)state;
    g_fail = 0;
    const tf_ops *o = g_cu3.ops;
    tf_backend *be = g_cu3.be;
    assert_int_equal(tf_built_with_cuda(), 1);
    const size_t peak_created = tf_cuda_backend_peak_bytes(be);
    assert_true(peak_created >= ((size_t)32 << 20)); /* the cuBLAS workspace is counted */
    /* what the backend holds now may be below its peak (temporaries at
     * creation): a block as large as the peak puts the high-water mark at
     * what is held, from where every allocation counts exactly */
    void *pad = NULL;
    assert_int_equal(o->alloc(be, &pad, peak_created), 0);
    const size_t peak0 = tf_cuda_backend_peak_bytes(be);
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
    o->free(be, pad);
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
    s->b.ops->adamw(s->b.be, s->p, NULL, s->g, s->m, s->v, GN, s->hyper, TF_F32);
    s->b.ops->layernorm_fwd(s->b.be, s->ln, s->mu, s->rs, s->x, s->gam, s->bet, GR, GC, 1e-5f, TF_F32,
                            TF_F32);
    tf_gemm_args a = {0, 1, GR, GC, GC, 1.f, 1.f, s->ln, GC, 0, s->w, GC, 0, s->y, GC, 0, 1, TF_EPI_NONE,
                      NULL, NULL, 0, TF_F32, TF_F32};
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
    s->hyper = b_put(b, hy, TF_HYPER_COUNT);
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
    float h1[TF_HYPER_COUNT], h2[TF_HYPER_COUNT], pa[GN], pb[GN], pc[GN], ya[GR * GC], yb[GR * GC];
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
    /* a replay with the skip flag set leaves the parameters as they are */
    float h3[TF_HYPER_COUNT], ps[GN];
    memcpy(h3, h2, sizeof h3);
    h3[TF_HYPER_NONFINITE] = 1.f;
    A.b.ops->upload(A.b.be, A.hyper, h3, sizeof h3);
    assert_int_equal(tf_cuda_graph_launch(A.b.be, ge), 0);
    b_get(A.b, ps, A.p, GN);
    if (!tf_test_bits_equal(ps, pa, GN)) {
        printf("FAIL graph: a replay with the skip flag changed the parameters\n");
        ++g_fail;
    }
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        /* test_memory first: it counts the peak from g_cu3's fresh state */
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_gpu_plan),
        cmocka_unit_test(test_mse_head),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_check_finite),
        cmocka_unit_test(test_graph),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_misc", tests, sizeof tests / sizeof *tests);
}
