/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): data movement and elementwise ops: permute, broadcast add and sum over a
 * middle axis, the elementwise ops, the gated channel-major transposes, the
 * embedding. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
/* ---- copy_rows: a block of rows into a wider tensor, the gaps untouched
 * (bit-exact) ---- */
static void test_copy_rows(void **state)
{
    (void)state;
    g_fail = 0;
    static const long c[][4] = {{3, 7, 5, 11}, {128, 1024, 0, 4096 - 1024}, {1, 1, 0, 0}};
    for (size_t q = 0; q < sizeof c / sizeof c[0]; q++) {
        const long rows = c[q][0], cols = c[q][1], sld = c[q][2] + cols, dld = c[q][3] + cols;
        const size_t ns = (size_t)(rows * sld), nd = (size_t)(rows * dld);
        float *hs = rnd(ns, 1.f, 61), *hd = rnd(nd, 1.f, 62), *res[2];
        for (int r = 0; r < 2; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *s = b_nan(b, ns), *d = b_nan(b, nd);
            b.ops->upload(b.be, s, hs, ns * sizeof(float));
            b.ops->upload(b.be, d, hd, nd * sizeof(float));
            b.ops->copy_rows(b.be, d, dld, s, sld, cols, rows, TF_F32);
            res[r] = tf_test_falloc(nd);
            b_get(b, res[r], d, nd);
            b_free(b, s), b_free(b, d);
        }
        char shape[96];
        snprintf(shape, sizeof shape, "rows=%ld cols=%ld src_ld=%ld dst_ld=%ld", rows, cols, sld, dld);
        check("copy_rows", shape, res[1], res[0], nd, 0.0);
        free(res[0]), free(res[1]), free(hs), free(hd);
    }
    assert_int_equal(g_fail, 0);
}

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
                b.ops->add_bcast_mid(b.be, y, x, O, M, I, TF_F32);
                b.ops->sum_mid(b.be, s, y, O, M, I, acc, TF_F32);
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
    case EW_ADD: b.ops->add(b.be, Y, U_, V, (long)n, TF_F32); break;
    case EW_MUL: b.ops->mul(b.be, Y, U_, V, (long)n, TF_F32); break;
    case EW_SCALE: b.ops->scale(b.be, Y, U_, 0.37f, (long)n, TF_F32); break;
    case EW_SIG: b.ops->act_fwd(b.be, TF_ACT_SIGMOID, Y, U_, (long)n, TF_F32); break;
    case EW_RELU: b.ops->act_fwd(b.be, TF_ACT_RELU, Y, U_, (long)n, TF_F32); break;
    case EW_SIGB: b.ops->act_bwd(b.be, TF_ACT_SIGMOID, Y, U_, W, (long)n, TF_F32); break;
    case EW_RELUB: b.ops->act_bwd(b.be, TF_ACT_RELU, Y, U_, W, (long)n, TF_F32); break;
    case EW_GATE: b.ops->gate_fwd(b.be, Y, U_, V, (long)n, TF_F32); break;
    case EW_GATEB: b.ops->gate_bwd(b.be, Y, Z, U_, V, W, (long)n, TF_F32); break;
    default: b.ops->gate_residual_fwd(b.be, Y, U_, V, W, (long)n, TF_F32); break;
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
        b.ops->gate_cmajor_fwd(b.be, o, pa, pg, ld, rows, inner, C, TF_F32);
        b.ops->gate_cmajor_bwd(b.be, dav, dgv, dyt, pa, pg, ld, rows, inner, C, TF_F32);
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
        b.ops->gate_fwd(b.be, y, a, g, (long)n, TF_F32);
        b.ops->permute(b.be, o, y, &pf);
        b.ops->permute(b.be, dy, dyt, &pb);
        b.ops->gate_bwd(b.be, dac, dgc, dy, a, g, (long)n, TF_F32);
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
                b.ops->embed_fwd(b.be, o, tab, tk, n, C, V);
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_bcast_sum),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_gate_cmajor),
        cmocka_unit_test(test_embed),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_data", tests, sizeof tests / sizeof *tests);
}
