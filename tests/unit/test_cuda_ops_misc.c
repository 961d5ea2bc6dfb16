/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): the distance head, AdamW, the plan a backend takes, memory accounting
 * and memory ops, graph capture. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    s->b.ops->adamw(s->b.be, s->p, s->g, s->m, s->v, GN, s->hyper);
    s->b.ops->layernorm_fwd(s->b.be, s->ln, s->mu, s->rs, s->x, s->gam, s->bet, GR, GC, 1e-5f);
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        /* test_memory first: it counts the peak from g_cu3's fresh state */
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_gpu_plan),
        cmocka_unit_test(test_mse_head),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_graph),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_misc", tests, sizeof tests / sizeof *tests);
}
