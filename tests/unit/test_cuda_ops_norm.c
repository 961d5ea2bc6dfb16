/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): LayerNorm, two LayerNorms in a row, softmax. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- LayerNorm ----
 * The backward also writes dx's copy dxh (of the type of dout, here fp32:
 * dx's bits; test_cuda_ops_half checks the half types'). */
static void run_ln(bk b, long rows, int C, const float *hx, const float *hg, const float *hb,
                   const float *hdo, const float *hdx0, const float *hdg0, const float *hdb0,
                   int acc, float *out, float *mean, float *rstd, float *dx, float *dg, float *db,
                   float *dxh)
{
    const size_t n = (size_t)rows * C;
    float *x = b_put(b, hx, n), *g = b_put(b, hg, C), *be = b_put(b, hb, C);
    float *o = b_nan(b, n), *mu = b_nan(b, rows), *rs = b_nan(b, rows);
    b.ops->layernorm_fwd(b.be, o, mu, rs, x, g, be, rows, C, 1e-5f, TF_F32, TF_F32);
    b_get(b, out, o, n);
    b_get(b, mean, mu, rows);
    b_get(b, rstd, rs, rows);
    float *dout = b_put(b, hdo, n), *dxd = acc ? b_put(b, hdx0, n) : b_nan(b, n);
    float *dgd = b_put(b, hdg0, C), *dbd = b_put(b, hdb0, C), *dxhd = b_nan(b, n);
    b.ops->layernorm_bwd(b.be, dxd, dxhd, dgd, dbd, dout, x, mu, rs, g, rows, C, acc, TF_F32,
                         TF_F32);
    b_get(b, dx, dxd, n);
    b_get(b, dxh, dxhd, n);
    b_get(b, dg, dgd, C);
    b_get(b, db, dbd, C);
    b_free(b, x), b_free(b, g), b_free(b, be), b_free(b, o), b_free(b, mu), b_free(b, rs);
    b_free(b, dout), b_free(b, dxd), b_free(b, dgd), b_free(b, dbd), b_free(b, dxhd);
}

static void ln_case(bk cu, int level, long rows, int C, int acc)
{
    const size_t n = (size_t)rows * C;
    float *hx = rnd(n, 2.f, 21), *hg = rnd(C, 1.f, 22), *hb = rnd(C, 1.f, 23);
    float *hdo = rnd(n, 1.f, 24), *hdx0 = rnd(n, 1.f, 25), *hdg0 = rnd(C, 1.f, 26),
          *hdb0 = rnd(C, 1.f, 27);
    for (size_t i = 0; i < n; ++i) hx[i] += 3.f; /* a mean away from 0 */
    float *o[3][7];
    for (int r = 0; r < 3; ++r) {
        o[r][0] = tf_test_falloc(n), o[r][1] = tf_test_falloc(rows), o[r][2] = tf_test_falloc(rows);
        o[r][3] = tf_test_falloc(n), o[r][4] = tf_test_falloc(C), o[r][5] = tf_test_falloc(C);
        o[r][6] = tf_test_falloc(n);
        run_ln(r == 0 ? g_cpu : cu, rows, C, hx, hg, hb, hdo, hdx0, hdg0, hdb0, acc, o[r][0],
               o[r][1], o[r][2], o[r][3], o[r][4], o[r][5], o[r][6]);
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
    check_same("layernorm_bwd.dxh", shape, o[1][6], o[1][3], n);
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 7; ++k) free(o[r][k]);
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
                    float *dp, float *dxh)
{
    const size_t n = (size_t)rows * C;
    float *x = b_put(b, hx, n), *p = b_put(b, hp, 4 * (size_t)C);
    float *o = b_nan(b, n), *s = b_nan(b, 4 * (size_t)rows);
    b.ops->layernorm2_fwd(b.be, o, s, x, p, p + C, p + 2 * C, p + 3 * C, rows, C, 1e-5f,
                          TF_F32, TF_F32);
    b_get(b, out, o, n);
    b_get(b, st, s, 4 * (size_t)rows);
    float *dout = b_put(b, hdo, n), *dxd = acc ? b_put(b, hdx0, n) : b_nan(b, n);
    float *dpd = b_put(b, hdp0, 4 * (size_t)C), *dxhd = b_nan(b, n);
    b.ops->layernorm2_bwd(b.be, dxd, dxhd, dpd, dpd + C, dpd + 2 * C, dpd + 3 * C, dout, x, s, p,
                          p + C, p + 2 * C, rows, C, acc, TF_F32, TF_F32);
    b_get(b, dx, dxd, n);
    b_get(b, dxh, dxhd, n);
    b_get(b, dp, dpd, 4 * (size_t)C);
    b_free(b, x), b_free(b, p), b_free(b, o), b_free(b, s), b_free(b, dout), b_free(b, dxd);
    b_free(b, dpd), b_free(b, dxhd);
}

static void ln2_case(bk cu, int level, long rows, int C, int acc)
{
    const size_t n = (size_t)rows * C;
    float *hx = rnd(n, 2.f, 31), *hp = rnd(4 * (size_t)C, 1.f, 32), *hdo = rnd(n, 1.f, 33);
    float *hdx0 = rnd(n, 1.f, 34), *hdp0 = rnd(4 * (size_t)C, 1.f, 35);
    for (size_t i = 0; i < n; ++i) hx[i] += 3.f; /* a mean away from 0 */
    float *o[3][5];
    for (int r = 0; r < 3; ++r) {
        o[r][0] = tf_test_falloc(n), o[r][1] = tf_test_falloc(4 * (size_t)rows);
        o[r][2] = tf_test_falloc(n), o[r][3] = tf_test_falloc(4 * (size_t)C);
        o[r][4] = tf_test_falloc(n);
        run_ln2(r == 0 ? g_cpu : cu, rows, C, hx, hp, hdo, hdx0, hdp0, acc, o[r][0], o[r][1],
                o[r][2], o[r][3], o[r][4]);
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
    check_same("layernorm2_bwd.dxh", shape, o[1][4], o[1][2], n);
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 5; ++k) free(o[r][k]);
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
            b.ops->softmax_fwd(b.be, yd, x, rows, cols, TF_F32);
            b.ops->softmax_bwd(b.be, dxd, dy, yd, rows, cols, TF_F32);
            b_get(b, y[r], yd, n);
            b_get(b, dx[r], dxd, n);
            if (r == 1) { /* in place (y aliases x, dx aliases dy) gives the same bits */
                b.ops->softmax_fwd(b.be, x, x, rows, cols, TF_F32);
                b.ops->softmax_bwd(b.be, dy, dy, x, rows, cols, TF_F32);
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm2),
        cmocka_unit_test(test_softmax),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_norm", tests, sizeof tests / sizeof *tests);
}
