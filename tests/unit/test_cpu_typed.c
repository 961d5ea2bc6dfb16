/* CPU backend: the bf16/fp16 contract of every typed op (ops.h). A half op
 * widens its inputs exactly, computes what the fp32 op computes and rounds
 * each output once, so its result must equal, bit for bit, the fp32 op run
 * on the widened inputs with its outputs rounded (tf_dtype.h): no tolerance.
 * Inputs are random values rounded to the type; accumulating outputs start
 * from random typed values; fp32 side outputs (LayerNorm statistics, lse,
 * parameter gradients, a residual stream) must equal the fp32 op's bits.
 * Shapes include odd sizes and sizes past the threading threshold.
 * Also: convert against the scalar conversions, check_finite, AdamW's
 * gradient multiplier and skipped step, mse_head_bwd's loss scale. */
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
#include "backend/tf_dtype.h"
#include "testutil.h"

static tf_backend *g_be;
static const tf_ops *g_ops;

static const tf_dtype g_half[2] = {TF_BF16, TF_F16};

static int group_setup(void **state) {
    (void)state;
    return tf_test_cpu_backend(&g_be, &g_ops);
}

static int group_teardown(void **state) {
    (void)state;
    tf_cpu_backend_destroy(g_be);
    return 0;
}

/* A tensor twice: h of type t (what the typed op reads or writes) and f, fp32
 * (what the fp32 op reads or writes). Made equal: f = widen(h). */
typedef struct {
    tf_dtype t;
    long n;
    void *h;
    float *f;
} tbuf;

static tbuf tb_new(tf_dtype t, long n, float mean, float std, uint64_t seed) {
    tbuf b = {t, n, malloc((size_t)(n > 0 ? n : 1) * tf_dtype_size(t)),
              tf_test_falloc((size_t)(n > 0 ? n : 1))};
    assert_non_null(b.h);
    tf_test_fill_normal(b.f, (size_t)n, mean, std, seed);
    tf_dtype_from_f32(b.h, t, b.f, (size_t)n);
    tf_dtype_to_f32(b.f, b.h, t, (size_t)n);
    return b;
}

static void tb_free(tbuf *b) {
    free(b->h);
    free(b->f);
}

static uint32_t elem_bits(const void *p, tf_dtype t, long i) {
    if (t == TF_F32) {
        uint32_t u;
        memcpy(&u, (const float *)p + i, sizeof u);
        return u;
    }
    return ((const uint16_t *)p)[i];
}

static uint32_t round_bits(float f, tf_dtype t) {
    return t == TF_F32 ? tf_f32_bits(f) : t == TF_BF16 ? tf_f32_to_bf16(f) : tf_f32_to_f16(f);
}

/* b.h must hold round(b.f) in every element; then b.f = widen(b.h), so that
 * the next op of a chain reads the same values in both runs */
static void tb_expect(const char *what, const tbuf *b) {
    long bad = 0;
    for (long i = 0; i < b->n; i++)
        if (elem_bits(b->h, b->t, i) != round_bits(b->f[i], b->t)) {
            if (bad < 4)
                fprintf(stderr, "%s (%s) [%ld]: got 0x%x, want 0x%x (fp32 %.9g)\n", what,
                        tf_dtype_name(b->t), i, elem_bits(b->h, b->t, i),
                        round_bits(b->f[i], b->t), b->f[i]);
            bad++;
        }
    if (bad)
        fprintf(stderr, "%s (%s): %ld of %ld differ\n", what, tf_dtype_name(b->t), bad, b->n);
    assert_int_equal(bad, 0);
    tf_dtype_to_f32(b->f, b->h, b->t, (size_t)b->n);
}

/* two fp32 arrays must be bit-identical */
static void f32_expect(const char *what, const float *got, const float *want, long n) {
    if (!tf_test_bits_equal(got, want, (size_t)n))
        fprintf(stderr, "%s: fp32 side output differs\n", what);
    assert_true(tf_test_bits_equal(got, want, (size_t)n));
}

/* dxh (type t: a LayerNorm backward's copy) must hold the bits the convert
 * op gives from dx (fp32) */
static void copy_expect(const char *what, const void *dxh, tf_dtype t, const float *dx, long n) {
    const size_t bytes = (size_t)(n > 0 ? n : 1) * tf_dtype_size(t);
    void *want = malloc(bytes);
    assert_non_null(want);
    g_ops->convert(g_be, want, t, dx, TF_F32, n);
    const int same = memcmp(dxh, want, (size_t)n * tf_dtype_size(t)) == 0;
    if (!same)
        fprintf(stderr, "%s (%s): the copy differs from convert(dx)\n", what, tf_dtype_name(t));
    free(want);
    assert_true(same);
}

static float *fdup(const float *x, long n) {
    float *y = tf_test_falloc((size_t)n);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

/* ---------------------------------------------------------- elementwise */

static void test_elementwise_typed(void **state) {
    (void)state;
    static const long sizes[] = {1, 1023, 1025, 40001};
    for (int ti = 0; ti < 2; ti++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const tf_dtype t = g_half[ti];
            const long n = sizes[si];
            const uint64_t s = 100 + 10 * si + ti;
            tbuf a = tb_new(t, n, 0.f, 2.f, s), b = tb_new(t, n, 0.5f, 1.f, s + 1);
            tbuf g = tb_new(t, n, 0.f, 3.f, s + 2), dy = tb_new(t, n, 0.f, 1.f, s + 3);
            tbuf y = tb_new(t, n, 0.f, 1.f, s + 4), y2 = tb_new(t, n, 0.f, 1.f, s + 5);
            g_ops->add(g_be, y.f, a.f, b.f, n, TF_F32);
            g_ops->add(g_be, y.h, a.h, b.h, n, t);
            tb_expect("add", &y);
            g_ops->mul(g_be, y.f, y.f, b.f, n, TF_F32); /* in place */
            g_ops->mul(g_be, y.h, y.h, b.h, n, t);
            tb_expect("mul in place", &y);
            g_ops->scale(g_be, y.f, a.f, -0.3f, n, TF_F32);
            g_ops->scale(g_be, y.h, a.h, -0.3f, n, t);
            tb_expect("scale", &y);
            for (int act = 0; act <= 1; act++) {
                const tf_act k = act ? TF_ACT_RELU : TF_ACT_SIGMOID;
                g_ops->act_fwd(g_be, k, y.f, g.f, n, TF_F32);
                g_ops->act_fwd(g_be, k, y.h, g.h, n, t);
                tb_expect(act ? "relu" : "sigmoid", &y);
                g_ops->act_bwd(g_be, k, y2.f, dy.f, y.f, n, TF_F32);
                g_ops->act_bwd(g_be, k, y2.h, dy.h, y.h, n, t);
                tb_expect(act ? "relu bwd" : "sigmoid bwd", &y2);
                g_ops->act_fwd(g_be, k, y2.f, y2.f, n, TF_F32); /* in place */
                g_ops->act_fwd(g_be, k, y2.h, y2.h, n, t);
                tb_expect("act in place", &y2);
            }
            g_ops->gate_fwd(g_be, y.f, a.f, g.f, n, TF_F32);
            g_ops->gate_fwd(g_be, y.h, a.h, g.h, n, t);
            tb_expect("gate_fwd", &y);
            g_ops->gate_bwd(g_be, y.f, y2.f, dy.f, a.f, g.f, n, TF_F32);
            g_ops->gate_bwd(g_be, y.h, y2.h, dy.h, a.h, g.h, n, t);
            tb_expect("gate_bwd da", &y);
            tb_expect("gate_bwd dg", &y2);
            {   /* da over dy, dg over g: in place */
                tbuf d2 = tb_new(t, n, 0.f, 1.f, s + 6), g2 = tb_new(t, n, 0.f, 3.f, s + 7);
                g_ops->gate_bwd(g_be, d2.f, g2.f, d2.f, a.f, g2.f, n, TF_F32);
                g_ops->gate_bwd(g_be, d2.h, g2.h, d2.h, a.h, g2.h, n, t);
                tb_expect("gate_bwd in place da", &d2);
                tb_expect("gate_bwd in place dg", &g2);
                tb_free(&d2), tb_free(&g2);
            }
            /* gate_residual: out and res fp32, a and g typed */
            float *res = tf_test_falloc((size_t)n);
            tf_test_fill_normal(res, (size_t)n, 0.f, 1.f, s + 8);
            float *o32 = tf_test_falloc((size_t)n), *oh = tf_test_falloc((size_t)n);
            g_ops->gate_residual_fwd(g_be, o32, res, a.f, g.f, n, TF_F32);
            g_ops->gate_residual_fwd(g_be, oh, res, a.h, g.h, n, t);
            f32_expect("gate_residual_fwd", oh, o32, n);
            float *r2 = fdup(res, n);
            g_ops->gate_residual_fwd(g_be, r2, r2, a.h, g.h, n, t); /* out = res */
            f32_expect("gate_residual_fwd in place", r2, o32, n);
            free(res), free(o32), free(oh), free(r2);
            tb_free(&a), tb_free(&b), tb_free(&g), tb_free(&dy), tb_free(&y), tb_free(&y2);
        }
}

/* gate_cmajor: strided a, g (ld > 2C: the merged projection) */
static void test_gate_cmajor_typed(void **state) {
    (void)state;
    const int C = 5;
    const long rows = 134, inners[] = {1, 67, 134}; /* inner divides rows */
    for (int ti = 0; ti < 2; ti++)
        for (int q = 0; q < 3; q++) {
            const tf_dtype t = g_half[ti];
            const long inner = inners[q];
            const long ld = 4 * C + 3, n = rows * ld, nt = rows * 2 * C;
            tbuf x = tb_new(t, n, 0.f, 2.f, 200 + ti), lr = tb_new(t, nt, 0, 1, 210);
            tbuf dlr = tb_new(t, nt, 0.f, 1.f, 220 + ti), d = tb_new(t, n, 0, 1, 230);
            g_ops->gate_cmajor_fwd(g_be, lr.f, x.f, x.f + 2 * C, ld, rows, inner, C, TF_F32);
            g_ops->gate_cmajor_fwd(g_be, lr.h, x.h, (uint16_t *)x.h + 2 * C, ld, rows, inner, C,
                                   t);
            tb_expect("gate_cmajor_fwd", &lr);
            /* da, dg into one strided buffer; what lies between stays */
            g_ops->gate_cmajor_bwd(g_be, d.f, d.f + 2 * C, dlr.f, x.f, x.f + 2 * C, ld, rows, inner,
                                   C, TF_F32);
            g_ops->gate_cmajor_bwd(g_be, d.h, (uint16_t *)d.h + 2 * C, dlr.h, x.h,
                                   (uint16_t *)x.h + 2 * C, ld, rows, inner, C, t);
            tb_expect("gate_cmajor_bwd", &d);
            tb_free(&x), tb_free(&lr), tb_free(&dlr), tb_free(&d);
        }
}

/* ------------------------------------------------------------- layouts */

static void test_layout_typed(void **state) {
    (void)state;
    static const int dims[][4] = {{3, 5, 7, 2}, {2, 33, 1, 65}, {4, 40, 40, 6}};
    static const int perms[][4] = {{2, 0, 3, 1}, {0, 2, 1, 3}, {3, 2, 1, 0}};
    for (int ti = 0; ti < 2; ti++) {
        const tf_dtype t = g_half[ti];
        for (int q = 0; q < 3; q++)
            for (int p = 0; p < 3; p++)
                for (int acc = 0; acc <= 1; acc++) {
                    tf_permute_args pa;
                    memset(&pa, 0, sizeof pa);
                    pa.rank = 4;
                    pa.accumulate = acc;
                    long n = 1;
                    for (int k = 0; k < 4; k++) {
                        pa.dims[k] = dims[q][k];
                        pa.perm[k] = perms[p][k];
                        n *= dims[q][k];
                    }
                    tbuf in = tb_new(t, n, 0, 1, 300 + q), out = tb_new(t, n, 0, 1, 310 + p);
                    g_ops->permute(g_be, out.f, in.f, &pa);
                    pa.t = t;
                    g_ops->permute(g_be, out.h, in.h, &pa);
                    tb_expect(acc ? "permute accumulate" : "permute", &out);
                    tb_free(&in), tb_free(&out);
                }
        /* broadcast add and sum over the middle axis */
        static const long shp[][3] = {{3, 5, 7}, {2, 300, 257}, {1, 1, 1}};
        for (int q = 0; q < 3; q++) {
            const long O = shp[q][0], M = shp[q][1], I = shp[q][2];
            tbuf x = tb_new(t, O * I, 0, 1, 320 + q), y = tb_new(t, O * M * I, 0, 1, 330 + q);
            g_ops->add_bcast_mid(g_be, y.f, x.f, O, M, I, TF_F32);
            g_ops->add_bcast_mid(g_be, y.h, x.h, O, M, I, t);
            tb_expect("add_bcast_mid", &y);
            for (int acc = 0; acc <= 1; acc++) {
                g_ops->sum_mid(g_be, x.f, y.f, O, M, I, acc, TF_F32);
                g_ops->sum_mid(g_be, x.h, y.h, O, M, I, acc, t);
                tb_expect(acc ? "sum_mid accumulate" : "sum_mid", &x);
            }
            tb_free(&x), tb_free(&y);
        }
        /* copy_rows: moves elements of t; what lies between stays */
        tbuf s = tb_new(t, 9 * 13, 0, 1, 340), d = tb_new(t, 9 * 17, 0, 1, 341);
        g_ops->copy_rows(g_be, d.f, 17, s.f, 13, 11, 9, TF_F32);
        g_ops->copy_rows(g_be, d.h, 17, s.h, 13, 11, 9, t);
        tb_expect("copy_rows", &d);
        tb_free(&s), tb_free(&d);
    }
}

/* ---------------------------------------------------- norms and softmax */

/* LayerNorm and layernorm2 over every pair (xt, yt) with a half type in it;
 * with xt fp32 (a residual stream's gradient) the backwards' copy dxh too */
static void test_layernorm_typed(void **state) {
    (void)state;
    static const int shapes[][2] = {{7, 33}, {300, 128}, {1, 1}, {65, 20}};
    for (int xt_i = 0; xt_i < TF_DTYPE_COUNT; xt_i++)
        for (int yt_i = 0; yt_i < TF_DTYPE_COUNT; yt_i++) {
            const tf_dtype xt = (tf_dtype)xt_i, yt = (tf_dtype)yt_i;
            if (xt == TF_F32 && yt == TF_F32)
                continue;
            for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                const long R = shapes[q][0];
                const int C = shapes[q][1];
                const long n = R * C;
                const uint64_t s = 400 + 10 * q;
                tbuf x = tb_new(xt, n, 1.f, 2.f, s), out = tb_new(yt, n, 0, 1, s + 1);
                tbuf dout = tb_new(yt, n, 0, 1, s + 2);
                float *g1 = tf_test_falloc(C), *b1 = tf_test_falloc(C);
                float *g2 = tf_test_falloc(C), *b2 = tf_test_falloc(C);
                tf_test_fill_normal(g1, C, 1, 0.3f, s + 3);
                tf_test_fill_normal(b1, C, 0, 0.3f, s + 4);
                tf_test_fill_normal(g2, C, 1, 0.3f, s + 5);
                tf_test_fill_normal(b2, C, 0, 0.3f, s + 6);
                float *st32 = tf_test_falloc(4 * R), *sth = tf_test_falloc(4 * R);
                g_ops->layernorm_fwd(g_be, out.f, st32, st32 + R, x.f, g1, b1, R, C, 1e-5f,
                                     TF_F32, TF_F32);
                g_ops->layernorm_fwd(g_be, out.h, sth, sth + R, x.h, g1, b1, R, C, 1e-5f, xt, yt);
                tb_expect("layernorm_fwd", &out);
                f32_expect("layernorm_fwd stats", sth, st32, 2 * R);
                for (int acc = 0; acc <= 1; acc++) {
                    tbuf dx = tb_new(xt, n, 0, 1, s + 7 + acc);
                    void *dxh = xt == TF_F32 ? malloc((size_t)n * tf_dtype_size(yt)) : NULL;
                    float *dp32 = tf_test_falloc(4 * C), *dph = tf_test_falloc(4 * C);
                    tf_test_fill_normal(dp32, 4 * C, 0, 1, s + 9);
                    memcpy(dph, dp32, 4 * C * sizeof(float));
                    g_ops->layernorm_bwd(g_be, dx.f, NULL, dp32, dp32 + C, dout.f, x.f, st32,
                                         st32 + R, g1, R, C, acc, TF_F32, TF_F32);
                    g_ops->layernorm_bwd(g_be, dx.h, dxh, dph, dph + C, dout.h, x.h, st32,
                                         st32 + R, g1, R, C, acc, xt, yt);
                    tb_expect(acc ? "layernorm_bwd accumulate" : "layernorm_bwd", &dx);
                    if (dxh) copy_expect("layernorm_bwd dxh", dxh, yt, dx.h, n);
                    f32_expect("layernorm_bwd dgamma, dbeta", dph, dp32, 2 * C);
                    if (C <= 128) { /* layernorm2 */
                        g_ops->layernorm2_fwd(g_be, out.f, st32, x.f, g1, b1, g2, b2, R, C, 1e-5f,
                                              TF_F32, TF_F32);
                        g_ops->layernorm2_fwd(g_be, out.h, sth, x.h, g1, b1, g2, b2, R, C, 1e-5f,
                                              xt, yt);
                        tb_expect("layernorm2_fwd", &out);
                        f32_expect("layernorm2_fwd stats", sth, st32, 4 * R);
                        g_ops->layernorm2_bwd(g_be, dx.f, NULL, dp32, dp32 + C, dp32 + 2 * C,
                                              dp32 + 3 * C, dout.f, x.f, st32, g1, b1, g2, R, C,
                                              acc, TF_F32, TF_F32);
                        g_ops->layernorm2_bwd(g_be, dx.h, dxh, dph, dph + C, dph + 2 * C,
                                              dph + 3 * C, dout.h, x.h, st32, g1, b1, g2, R, C,
                                              acc, xt, yt);
                        tb_expect(acc ? "layernorm2_bwd accumulate" : "layernorm2_bwd", &dx);
                        if (dxh) copy_expect("layernorm2_bwd dxh", dxh, yt, dx.h, n);
                        f32_expect("layernorm2_bwd parameter gradients", dph, dp32, 4 * C);
                    }
                    tb_free(&dx);
                    free(dxh), free(dp32), free(dph);
                }
                tb_free(&x), tb_free(&out), tb_free(&dout);
                free(g1), free(b1), free(g2), free(b2), free(st32), free(sth);
            }
        }
}

static void test_softmax_typed(void **state) {
    (void)state;
    static const int shapes[][2] = {{5, 1}, {3, 37}, {300, 129}};
    for (int ti = 0; ti < 2; ti++)
        for (int q = 0; q < 3; q++) {
            const tf_dtype t = g_half[ti];
            const long R = shapes[q][0], n = R * shapes[q][1];
            const int cols = shapes[q][1];
            tbuf x = tb_new(t, n, 0, 3, 500 + q), y = tb_new(t, n, 0, 1, 510 + q);
            tbuf dy = tb_new(t, n, 0, 1, 520 + q), dx = tb_new(t, n, 0, 1, 530 + q);
            g_ops->softmax_fwd(g_be, y.f, x.f, R, cols, TF_F32);
            g_ops->softmax_fwd(g_be, y.h, x.h, R, cols, t);
            tb_expect("softmax_fwd", &y);
            g_ops->softmax_bwd(g_be, dx.f, dy.f, y.f, R, cols, TF_F32);
            g_ops->softmax_bwd(g_be, dx.h, dy.h, y.h, R, cols, t);
            tb_expect("softmax_bwd", &dx);
            g_ops->softmax_fwd(g_be, x.f, x.f, R, cols, TF_F32); /* in place */
            g_ops->softmax_fwd(g_be, x.h, x.h, R, cols, t);
            tb_expect("softmax_fwd in place", &x);
            g_ops->softmax_bwd(g_be, dy.f, dy.f, x.f, R, cols, TF_F32);
            g_ops->softmax_bwd(g_be, dy.h, dy.h, x.h, R, cols, t);
            tb_expect("softmax_bwd in place", &dy);
            tb_free(&x), tb_free(&y), tb_free(&dy), tb_free(&dx);
        }
}

/* ----------------------------------------------------------- attention */

/* q, k, v in one fused, padded [nb, no, L, 3C + 3] buffer (dq, dk, dv
 * likewise), L-major across o when l_major; out, dout [nb, no, L, C]; bias
 * and dbias [nb, L, L, nh] (strided j and h). The typed and the fp32 call
 * see the same layouts. */
typedef struct {
    int nb, no, nh, L, d, l_major, bias;
} acase;

static tf_attn_view aview(void *base, tf_dtype t, long off, const acase *c, long row) {
    tf_attn_view v;
    v.p = (char *)base + off * (long)tf_dtype_size(t);
    v.sb = (long)c->no * c->L * row;
    v.so = c->l_major ? row : (long)c->L * row;
    v.sl = c->l_major ? (long)c->no * row : row;
    return v;
}

static void attn_args(tf_attn_args *a, const acase *c, tf_dtype t, void *qkv, void *dqkv, void *out,
                      void *dout, void *bias, void *dbias, float *lse, float *work) {
    const long C = (long)c->nh * c->d, row = 3 * C + 3;
    memset(a, 0, sizeof *a);
    a->nb = c->nb, a->no = c->no, a->nh = c->nh, a->L = c->L, a->d = c->d;
    a->scale = 1.0f / sqrtf((float)c->d);
    a->q = aview(qkv, t, 0, c, row), a->k = aview(qkv, t, C, c, row);
    a->v = aview(qkv, t, 2 * C, c, row);
    a->dq = aview(dqkv, t, 0, c, row), a->dk = aview(dqkv, t, C, c, row);
    a->dv = aview(dqkv, t, 2 * C, c, row);
    a->out = aview(out, t, 0, c, C), a->dout = aview(dout, t, 0, c, C);
    if (c->bias) {
        a->bias = bias, a->dbias = dbias;
        a->bias_sb = (long)c->L * c->L * c->nh, a->bias_si = (long)c->L * c->nh;
        a->bias_sj = c->nh, a->bias_sh = 1;
    }
    a->lse = lse, a->work = work;
    a->t = t;
}

static void attn_typed_case(const acase *c, tf_dtype t, uint64_t seed) {
    const long C = (long)c->nh * c->d, rows = (long)c->nb * c->no * c->L;
    const long nqkv = rows * (3 * C + 3), nout = rows * C, nbias = (long)c->nb * c->L * c->L * c->nh;
    const long nlse = (long)c->nb * c->no * c->nh * c->L;
    tbuf qkv = tb_new(t, nqkv, 0, 1, seed), dqkv = tb_new(t, nqkv, 0, 1, seed + 1);
    tbuf out = tb_new(t, nout, 0, 1, seed + 2), dout = tb_new(t, nout, 0, 1, seed + 3);
    tbuf bias = tb_new(t, nbias, 0, 1, seed + 4), dbias = tb_new(t, nbias, 0, 1, seed + 5);
    float *lse32 = tf_test_falloc(nlse), *lseh = tf_test_falloc(nlse);
    float *w32 = tf_test_falloc(nlse), *wh = tf_test_falloc(nlse);
    tf_attn_args af, ah;
    attn_args(&af, c, TF_F32, qkv.f, dqkv.f, out.f, dout.f, bias.f, dbias.f, lse32, w32);
    attn_args(&ah, c, t, qkv.h, dqkv.h, out.h, dout.h, bias.h, dbias.h, lseh, wh);
    g_ops->attn_fwd(g_be, &af);
    g_ops->attn_fwd(g_be, &ah);
    tb_expect("attn_fwd out", &out);
    f32_expect("attn_fwd lse", lseh, lse32, nlse);
    /* the backward reads the stored out: round(out) in both runs (tb_expect) */
    g_ops->attn_bwd(g_be, &af);
    g_ops->attn_bwd(g_be, &ah);
    tb_expect("attn_bwd dq, dk, dv (and the padding, untouched)", &dqkv);
    tb_expect("attn_bwd dbias", &dbias);
    tb_free(&qkv), tb_free(&dqkv), tb_free(&out), tb_free(&dout), tb_free(&bias), tb_free(&dbias);
    free(lse32), free(lseh), free(w32), free(wh);
}

static void test_attention_typed(void **state) {
    (void)state;
    static const acase cases[] = {
        {2, 3, 2, 7, 8, 0, 1},   /* register-blocked head size, bias */
        {1, 4, 3, 13, 5, 1, 1},  /* generic head size, L-major */
        {2, 2, 2, 17, 16, 1, 0}, /* no bias */
        {1, 2, 1, 1, 3, 0, 1},   /* one key */
    };
    for (int ti = 0; ti < 2; ti++)
        for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++)
            attn_typed_case(&cases[q], g_half[ti], 600 + 10 * q);
}

/* ------------------------------------------------- outer product mean */

static void test_opm_typed(void **state) {
    (void)state;
    static const int shapes[][4] = {{1, 3, 5, 2}, {2, 5, 7, 3}};
    for (int ti = 0; ti < 2; ti++)
        for (int q = 0; q < 2; q++) {
            const tf_dtype t = g_half[ti];
            const int B = shapes[q][0], S = shapes[q][1], N = shapes[q][2], co = shapes[q][3];
            const long na = (long)B * S * N * co, no = (long)B * N * N * co * co;
            tbuf a = tb_new(t, na, 0, 1, 700 + q), o = tb_new(t, no, 0, 1, 710 + q);
            tbuf da = tb_new(t, na, 0, 1, 720 + q);
            g_ops->opm_outer(g_be, o.f, a.f, B, S, N, co, TF_F32);
            g_ops->opm_outer(g_be, o.h, a.h, B, S, N, co, t);
            tb_expect("opm_outer", &o);
            g_ops->opm_bwd(g_be, da.f, o.f, a.f, B, S, N, co, TF_F32);
            g_ops->opm_bwd(g_be, da.h, o.h, a.h, B, S, N, co, t);
            tb_expect("opm_bwd", &da);
            tb_free(&a), tb_free(&o), tb_free(&da);
        }
}

/* ------------------------------------------------------------- convert */

/* values every conversion must get right: zeros, subnormals of fp32 and of
 * fp16, ties at both types' rounding points, the largest finite values and
 * past them, inf, and NaNs (quiet, signalling, with payloads, negative) */
static const uint32_t special_f32[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x3f800000u, 0xbf800000u,
    0x3f808000u, /* 1 + 2^-8: a bf16 tie to even (down) */
    0x3f818000u, /* 1 + 3 2^-8: a bf16 tie to even (up) */
    0x3f801000u, /* 1 + 2^-11: an fp16 tie */
    0x3f803000u, /* 1 + 3 2^-11: an fp16 tie up */
    0x33800000u, /* 2^-24: fp16's smallest subnormal */
    0x33000000u, /* 2^-25: a tie to zero */
    0x33000001u, /* just above: rounds up to 2^-24 */
    0x387fe000u, /* fp16 subnormal range, near 2^-14 */
    0x38800000u, /* 2^-14 */
    0x477fe000u, /* 65504 */
    0x477ff000u, /* 65520: fp16 inf */
    0x477fefffu, /* just below: 65504 */
    0x7f7fffffu, /* FLT_MAX: bf16 inf */
    0x7f7f7fffu, /* rounds to bf16's largest */
    0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, /* signalling NaN */
    0x7fa00000u, 0xff812345u, 0x7fffffffu, 0x3e2aaaabu, 0xc2f6e979u,
};

static float conv_ref(float v, tf_dtype dt) { /* fp32 -> dt -> fp32 */
    return dt == TF_BF16 ? tf_bf16_to_f32(tf_f32_to_bf16(v)) : tf_f16_to_f32(tf_f32_to_f16(v));
}

static void test_convert(void **state) {
    (void)state;
    const long nspec = (long)(sizeof special_f32 / sizeof special_f32[0]);
    static const long sizes[] = {0, 1, 4097, 70001};
    for (size_t q = 0; q < sizeof sizes / sizeof sizes[0]; q++) {
        const long n = sizes[q] + nspec;
        /* the source of each type: special fp32 patterns, wide random values,
         * and every 16-bit pattern (mod 2^16) for the half sources */
        float *f = tf_test_falloc((size_t)n);
        tf_test_fill_normal(f, (size_t)n, 0, 1e3f, 800 + q);
        for (long i = 0; i < n; i++)
            if (i % 3 == 1) f[i] *= 1e-6f; /* small ones too */
        for (long i = 0; i < nspec; i++) f[(i * 7919) % n] = tf_f32_from_bits(special_f32[i]);
        uint16_t *h16 = malloc((size_t)n * 2);
        for (long i = 0; i < n; i++) h16[i] = (uint16_t)(i * 40503u + 7u);
        for (int st = 0; st < TF_DTYPE_COUNT; st++)
            for (int dt = 0; dt < TF_DTYPE_COUNT; dt++) {
                const void *src = st == TF_F32 ? (const void *)f : (const void *)h16;
                void *dst = malloc((size_t)(n + 1) * 4);
                memset(dst, 0xab, (size_t)(n + 1) * 4);
                g_ops->convert(g_be, dst, (tf_dtype)dt, src, (tf_dtype)st, n);
                long bad = 0;
                for (long i = 0; i < n; i++) {
                    /* the scalar conversions: widen exactly, round once */
                    const float v = st == TF_F32    ? f[i]
                                    : st == TF_BF16 ? tf_bf16_to_f32(h16[i])
                                                    : tf_f16_to_f32(h16[i]);
                    uint32_t want = dt == TF_F32 ? tf_f32_bits(v) : round_bits(v, (tf_dtype)dt);
                    if (st == dt) /* a copy: the bits move, even a signalling NaN's */
                        want = st == TF_F32 ? tf_f32_bits(f[i]) : h16[i];
                    bad += elem_bits(dst, (tf_dtype)dt, i) != want;
                }
                if (bad)
                    fprintf(stderr, "convert %s -> %s, n %ld: %ld wrong\n",
                            tf_dtype_name((tf_dtype)st), tf_dtype_name((tf_dtype)dt), n, bad);
                assert_int_equal(bad, 0);
                if (n > 0) /* nothing past n written */
                    assert_int_equal(((unsigned char *)dst)[n * tf_dtype_size((tf_dtype)dt)],
                                     0xab);
                free(dst);
            }
        free(f), free(h16);
    }
    /* spot checks of the scalar conversions themselves on the special values */
    assert_true(conv_ref(tf_f32_from_bits(0x3f808000u), TF_BF16) == 1.0f);
    assert_true(conv_ref(tf_f32_from_bits(0x3f818000u), TF_BF16) ==
                tf_f32_from_bits(0x3f820000u));
    assert_true(conv_ref(tf_f32_from_bits(0x33000000u), TF_F16) == 0.0f);
    assert_true(conv_ref(tf_f32_from_bits(0x33000001u), TF_F16) == tf_f32_from_bits(0x33800000u));
    assert_true(isinf(conv_ref(65520.0f, TF_F16)) && conv_ref(65519.0f, TF_F16) == 65504.0f);
    assert_true(isinf(conv_ref(tf_f32_from_bits(0x7f7fffffu), TF_BF16)));
    assert_true(isnan(conv_ref(tf_f32_from_bits(0x7f800001u), TF_F16)));
    assert_true(isnan(conv_ref(tf_f32_from_bits(0x7f800001u), TF_BF16)));
    /* a subnormal fp32 keeps its value through bf16 when representable */
    assert_true(conv_ref(tf_f32_from_bits(0x00010000u), TF_BF16) == tf_f32_from_bits(0x00010000u));
}

/* --------------------------------------------------------- check_finite */

static void test_check_finite(void **state) {
    (void)state;
    static const long sizes[] = {1, 2, 31, 100003};
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    for (size_t q = 0; q < sizeof sizes / sizeof sizes[0]; q++) {
        const long n = sizes[q];
        float *x = tf_test_falloc((size_t)n);
        tf_test_fill_normal(x, (size_t)n, 0, 1e30f, 900 + q); /* large but finite */
        x[0] = tf_f32_from_bits(0x7f7fffffu);                 /* FLT_MAX: finite */
        if (n > 1) x[n - 1] = -tf_f32_from_bits(0x00000001u); /* a subnormal */
        float flag[2] = {0.0f, 5.0f};
        g_ops->check_finite(g_be, flag, x, n);
        assert_true(flag[0] == 0.0f && flag[1] == 5.0f);
        flag[0] = 2.0f; /* left as it is when finite */
        g_ops->check_finite(g_be, flag, x, n);
        assert_true(flag[0] == 2.0f);
        const long where[3] = {0, n / 2, n - 1};
        for (int k = 0; k < 3; k++)
            for (int w = 0; w < 3; w++) {
                const float keep = x[where[w]];
                x[where[w]] = bad[k];
                flag[0] = 0.0f;
                g_ops->check_finite(g_be, flag, x, n);
                assert_true(flag[0] == 1.0f && flag[1] == 5.0f);
                /* a range that ends before the bad value does not see it */
                if (where[w] > 0) {
                    flag[0] = 0.0f;
                    g_ops->check_finite(g_be, flag, x, where[w]);
                    assert_true(flag[0] == 0.0f);
                }
                x[where[w]] = keep;
            }
        flag[0] = 0.0f;
        g_ops->check_finite(g_be, flag, x, 0); /* empty */
        assert_true(flag[0] == 0.0f);
        free(x);
    }
}

/* --------------------------------------------------------------- adamw */

/* hyper-parameters of one step (ops.h TF_HYPER_*) */
static void adamw_hyper(float *h, int step, float gmul, float nonfinite) {
    const float b1 = 0.9f, b2 = 0.999f;
    memset(h, 0, TF_HYPER_COUNT * sizeof *h);
    h[TF_HYPER_LR] = 3e-4f, h[TF_HYPER_B1] = b1, h[TF_HYPER_B2] = b2, h[TF_HYPER_EPS] = 1e-8f;
    h[TF_HYPER_WD] = 0.01f;
    h[TF_HYPER_BC1] = 1.0f - powf(b1, (float)step), h[TF_HYPER_BC2] = 1.0f - powf(b2, (float)step);
    h[TF_HYPER_LOSS_SCALE] = 1.0f / gmul;
    h[TF_HYPER_GRAD_MUL] = gmul;
    h[TF_HYPER_NONFINITE] = nonfinite;
}

/* Two steps with a scaled gradient: GRAD_MUL = 1/3 (not a power of two)
 * against the formula in double on g/3; the tolerances of test_cpu_ops'
 * AdamW test (16 u of the magnitudes) plus what g * fl(1/3) adds: 2 u
 * relative (1/3's rounding and the product's), which m carries as 2 u of
 * its magnitude, v as 4 u, and the update as 4 u (m's 2, sqrt(v)'s 2).
 * GRAD_MUL = 4 on g/4 (exact) gives the bits of GRAD_MUL = 1 on g. A
 * skipped step leaves p, m and v byte-identical. */
static void test_adamw_grad_mul(void **state) {
    (void)state;
    const long n = 50001;
    float *p = tf_test_falloc(n), *g = tf_test_falloc(n), *m = tf_test_falloc(n),
          *v = tf_test_falloc(n);
    double *rp = tf_test_dalloc(n), *rm = tf_test_dalloc(n), *rv = tf_test_dalloc(n),
           *mm = tf_test_dalloc(n), *up = tf_test_dalloc(n);
    tf_test_fill_normal(p, n, 0, 0.02f, 1000);
    memset(m, 0, n * sizeof *m), memset(v, 0, n * sizeof *v);
    for (long i = 0; i < n; i++) rp[i] = p[i], rm[i] = rv[i] = mm[i] = up[i] = 0;
    float h[TF_HYPER_COUNT];
    const float gmul = 1.0f / 3.0f;
    for (int step = 1; step <= 2; step++) {
        tf_test_fill_normal(g, n, 0, 3e-2f, 1000 + step);
        adamw_hyper(h, step, gmul, 0.0f);
        g_ops->adamw(g_be, p, NULL, g, m, v, n, h, TF_F32);
        const double lr = h[TF_HYPER_LR], b1 = h[TF_HYPER_B1], b2 = h[TF_HYPER_B2];
        const double bc1 = h[TF_HYPER_BC1], bc2 = h[TF_HYPER_BC2], eps = h[TF_HYPER_EPS];
        for (long i = 0; i < n; i++) {
            const double gi = (double)g[i] / 3.0;
            rp[i] *= 1.0 - lr * (double)h[TF_HYPER_WD];
            rm[i] = b1 * rm[i] + (1.0 - b1) * gi;
            mm[i] = b1 * mm[i] + (1.0 - b1) * fabs(gi);
            rv[i] = b2 * rv[i] + (1.0 - b2) * gi * gi;
            const double den = sqrt(rv[i]) / sqrt(bc2) + eps;
            rp[i] -= lr / bc1 * rm[i] / den;
            up[i] += lr / bc1 * mm[i] / den;
        }
    }
    const double U = TF_TEST_U;
    size_t bad = 0;
    for (long i = 0; i < n; i++) {
        bad += !(fabs(p[i] - rp[i]) <= 20 * U * (fabs(rp[i]) + up[i]));
        bad += !(fabs(m[i] - rm[i]) <= 18 * U * mm[i]);
        bad += !(fabs(v[i] - rv[i]) <= 20 * U * rv[i]);
    }
    if (bad) fprintf(stderr, "adamw grad_mul: %zu mismatches\n", bad);
    assert_int_equal(bad, 0);

    /* an exact multiplier: the bits of the unscaled step */
    float *p2 = fdup(p, n), *m2 = fdup(m, n), *v2 = fdup(v, n), *g4 = tf_test_falloc(n);
    tf_test_fill_normal(g, n, 0, 3e-2f, 1100);
    for (long i = 0; i < n; i++) g4[i] = g[i] * 0.25f;
    adamw_hyper(h, 3, 1.0f, 0.0f);
    g_ops->adamw(g_be, p, NULL, g, m, v, n, h, TF_F32);
    adamw_hyper(h, 3, 4.0f, 0.0f);
    g_ops->adamw(g_be, p2, NULL, g4, m2, v2, n, h, TF_F32);
    assert_true(tf_test_bits_equal(p, p2, n) && tf_test_bits_equal(m, m2, n) &&
                tf_test_bits_equal(v, v2, n));

    /* a skipped step: nothing changes, even with NaN in the gradient */
    g[7] = NAN;
    g[n - 1] = INFINITY;
    adamw_hyper(h, 4, 1.0f, 1.0f);
    g_ops->adamw(g_be, p2, NULL, g, m2, v2, n, h, TF_F32);
    assert_memory_equal(p2, p, n * sizeof *p);
    assert_memory_equal(m2, m, n * sizeof *m);
    assert_memory_equal(v2, v, n * sizeof *v);
    free(p), free(g), free(m), free(v), free(rp), free(rm), free(rv), free(mm), free(up);
    free(p2), free(m2), free(v2), free(g4);
}

/* mse_head_bwd's seed: NULL and 1 give the same bits, 1024 (a power of two)
 * exactly 1024 times them */
static void test_mse_loss_scale(void **state) {
    (void)state;
    const long n = 40003;
    float *logit = tf_test_falloc(n), *tgt = tf_test_falloc(n), *pred = tf_test_falloc(n);
    float *d0 = tf_test_falloc(n), *d1 = tf_test_falloc(n), *d2 = tf_test_falloc(n);
    tf_test_fill_normal(logit, n, 0, 2, 1200);
    tf_test_fill_uniform(tgt, n, 0, 20, 1201);
    float loss, one = 1.0f, big = 1024.0f;
    g_ops->mse_head_fwd(g_be, pred, &loss, logit, tgt, n, 20.0f);
    g_ops->mse_head_bwd(g_be, d0, pred, tgt, n, 20.0f, NULL);
    g_ops->mse_head_bwd(g_be, d1, pred, tgt, n, 20.0f, &one);
    g_ops->mse_head_bwd(g_be, d2, pred, tgt, n, 20.0f, &big);
    assert_true(tf_test_bits_equal(d0, d1, n));
    for (long i = 0; i < n; i++) d1[i] = 1024.0f * d0[i];
    assert_true(tf_test_bits_equal(d2, d1, n));
    free(logit), free(tgt), free(pred), free(d0), free(d1), free(d2);
}

/* ------------------------------------------------------------------ caps */

static void test_caps_types(void **state) {
    (void)state;
    tf_backend_caps c;
    g_ops->caps(g_be, &c);
    assert_int_equal(c.act_types, (1u << TF_F32) | (1u << TF_BF16) | (1u << TF_F16));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_types),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_check_finite),
        cmocka_unit_test(test_elementwise_typed),
        cmocka_unit_test(test_gate_cmajor_typed),
        cmocka_unit_test(test_layout_typed),
        cmocka_unit_test(test_layernorm_typed),
        cmocka_unit_test(test_softmax_typed),
        cmocka_unit_test(test_attention_typed),
        cmocka_unit_test(test_opm_typed),
        cmocka_unit_test(test_adamw_grad_mul),
        cmocka_unit_test(test_mse_loss_scale),
    };
    return cmocka_run_group_tests_name("cpu_typed", tests, group_setup, group_teardown);
}
