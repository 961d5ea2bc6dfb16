/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): attention: every kernel the plans reach against the CPU. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                        const float *qi = (const float *)q->p + b * q->sb + o * q->so + i * q->sl + h * s->d;
                        const float *kj = (const float *)k->p + b * k->sb + o * k->so + j * k->sl + h * s->d;
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


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_attn", tests, sizeof tests / sizeof *tests);
}
