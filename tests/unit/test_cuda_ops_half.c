/* The CUDA ops in bf16 and fp16 (ops.h: compute in fp32, round once at the
 * store).
 *
 * Every input is drawn in fp32 and rounded to the half type, so the half op
 * and the fp32 op see the same values: the half op on the half buffers, the
 * fp32 op of the same backend on their exact fp32 widening. Where both run
 * the same kernel body (shapes chosen so that the fp32 path takes the general
 * kernels the half types use), the half result must be the fp32 result
 * rounded once, bit for bit ("exact"). Where the fp32 path takes another
 * kernel (tensor-core tiles, the model's shapes), the two differ
 * by the half rounding (unit roundoff u: 2^-8 bf16, 2^-11 fp16) plus the fp32
 * kernels' own difference (their tolerances in the other test files):
 * "bounded". GEMMs: half products are exact in fp32, the sums differ in order
 * and, on tensor cores, truncate (K/16 MMA accumulations of up to 2 fp32 ulps
 * each, as tol_x3's comment counts them: K/8 u), against an fp32 reference
 * within tol_x3 (3xTF32 at level 3), plus u of a half result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/tf_dtype.h"
#include "cuda_testutil.h"

static const tf_dtype k_half[2] = {TF_BF16, TF_F16};

static double u_of(tf_dtype t) { return t == TF_BF16 ? 0x1p-8 : t == TF_F16 ? 0x1p-11 : 0.0; }

/* h rounded to t in place (kept as fp32 values) */
static void round_t(float *h, size_t n, tf_dtype t)
{
    uint16_t *q = malloc(2 * (n ? n : 1));
    if (t != TF_F32) {
        tf_dtype_from_f32(q, t, h, n);
        tf_dtype_to_f32(h, q, t, n);
    }
    free(q);
}
/* n normal values of sd, rounded to t */
static float *rnd_t(size_t n, float sd, uint64_t seed, tf_dtype t)
{
    float *h = rnd(n, sd, seed);
    round_t(h, n, t);
    return h;
}
/* device copies of h as type t / as fp32 */
static void *put_t(bk b, const float *h, size_t n, tf_dtype t)
{
    void *d = b_alloc(b, n); /* n floats: room for n of any type */
    void *q = malloc(tf_dtype_size(t) * (n ? n : 1));
    tf_dtype_from_f32(q, t, h, n);
    b.ops->upload(b.be, d, q, tf_dtype_size(t) * n);
    free(q);
    return d;
}
static void get_t(bk b, float *h, const void *d, size_t n, tf_dtype t)
{
    void *q = malloc(tf_dtype_size(t) * (n ? n : 1));
    b.ops->sync(b.be);
    b.ops->download(b.be, q, d, tf_dtype_size(t) * n);
    tf_dtype_to_f32(h, q, t, n);
    free(q);
}

/* got (type t, widened) against ref32 (the fp32 op) rounded to t: bit for bit,
 * but for ties. The two ops run one kernel body, yet the compiler may contract
 * a multiply-add into an FMA in one instantiation and not in the other: their
 * fp32 values then differ by a few fp32 ulps of the sums' terms (more than
 * of the result where the terms cancel, as in LayerNorm's backward; the
 * output's largest magnitude stands for the terms' scale), and rounding to t
 * flips where ref32 lies that close to the midpoint of two neighbours of t.
 * Such a flip (got one step of t from the rounded ref32, ref32 within K_TIE
 * fp32 ulps of max(|midpoint|, max |ref32|) of their midpoint) is counted,
 * not failed; any other difference fails. */
#define K_TIE 4
static int tie_flip(uint16_t ga, uint16_t gr, float ref32, float amax, tf_dtype t)
{
    const int da = (int)ga - (int)gr;
    if ((ga ^ gr) & 0x8000u || (da != 1 && da != -1)) return 0;
    const float wa = t == TF_BF16 ? tf_bf16_to_f32(ga) : tf_f16_to_f32(ga);
    const float wr = t == TF_BF16 ? tf_bf16_to_f32(gr) : tf_f16_to_f32(gr);
    const float mid = 0.5f * (wa + wr); /* exact: t has fewer significand bits */
    const float m = fmaxf(fabsf(mid), amax);
    const float ulp = nextafterf(m, INFINITY) - m;
    return fabsf(ref32 - mid) <= K_TIE * ulp;
}
static void check_exact(const char *op, const char *shape, tf_dtype t, const float *got,
                        const float *ref32, size_t n)
{
    uint16_t *a = malloc(2 * (n ? n : 1)), *r = malloc(2 * (n ? n : 1));
    size_t bad = 0, first = 0, ties = 0;
    if (t == TF_F32) {
        for (size_t i = 0; i < n; ++i)
            if (memcmp(&got[i], &ref32[i], 4) && !bad++) first = i;
    } else {
        tf_dtype_from_f32(a, t, got, n);
        tf_dtype_from_f32(r, t, ref32, n);
        float amax = 0.f;
        for (size_t i = 0; i < n; ++i)
            if (isfinite(ref32[i])) amax = fmaxf(amax, fabsf(ref32[i]));
        for (size_t i = 0; i < n; ++i) {
            if (a[i] == r[i]) continue;
            if (tie_flip(a[i], r[i], ref32[i], amax, t)) ++ties;
            else if (!bad++) first = i;
        }
    }
    if (bad)
        printf("FAIL %s %s %s: %zu of %zu differ from the rounded fp32 op (first %zu: %g vs %g)\n",
               op, tf_dtype_name(t), shape, bad, n, first, (double)got[first],
               (double)ref32[first]);
    else
        printf("PASS %s %s %s: exact (%zu, %zu ties rounded the other way)\n", op,
               tf_dtype_name(t), shape, n, ties);
    g_fail += bad != 0;
    free(a), free(r);
}

/* A LayerNorm backward's copy dxh (type t) against the convert op of the dx
 * it wrote (fp32): the same bits, every element (no tie is allowed here:
 * both round one fp32 value) */
static void check_copy(bk b, const char *op, const char *shape, tf_dtype t, const void *dxh,
                       const void *dx, size_t n)
{
    void *cv = b_alloc(b, n);
    b.ops->convert(b.be, cv, t, dx, TF_F32, (long)n);
    uint16_t *got = malloc(2 * n), *want = malloc(2 * n);
    b.ops->download(b.be, got, dxh, 2 * n);
    b.ops->download(b.be, want, cv, 2 * n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i] && !bad++) first = i;
    if (bad)
        printf("FAIL %s %s %s: %zu of %zu differ from convert(dx) (first %zu: 0x%x vs 0x%x)\n",
               op, tf_dtype_name(t), shape, bad, n, first, got[first], want[first]);
    else
        printf("PASS %s %s %s: the bits of convert(dx) (%zu)\n", op, tf_dtype_name(t), shape, n);
    g_fail += bad != 0;
    b_free(b, cv);
    free(got), free(want);
}

/* ---- elementwise and gating ---- */
static void test_half_elementwise(void **state)
{
    (void)state;
    g_fail = 0;
    const size_t n = 1003;
    const bk b = g_cu3;
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        float *ha = rnd_t(n, 1.5f, 11, t), *hb = rnd_t(n, 1.f, 12, t), *hg = rnd_t(n, 2.f, 13, t);
        float *hy = rnd_t(n, 1.f, 14, t), *hs = rnd_t(n, 1.f, 15, t);
        for (size_t i = 0; i < n; ++i) hs[i] = 1.f / (1.f + expf(-hs[i])); /* a sigmoid's output */
        round_t(hs, n, t);
        void *a = put_t(b, ha, n, t), *bb = put_t(b, hb, n, t), *g = put_t(b, hg, n, t),
             *dy = put_t(b, hy, n, t), *s = put_t(b, hs, n, t);
        float *a32 = b_put(b, ha, n), *b32 = b_put(b, hb, n), *g32 = b_put(b, hg, n),
              *dy32 = b_put(b, hy, n), *s32 = b_put(b, hs, n);
        void *y = b_alloc(b, n), *y2 = b_alloc(b, n);
        float *r32 = b_alloc(b, n), *r32b = b_alloc(b, n);
        float *got = malloc(4 * n), *ref = malloc(4 * n);
        char shape[32];
        snprintf(shape, sizeof shape, "n=%zu", n);
#define EW_CHECK(name, half_call, f32_call, out, out32)                                            \
    do {                                                                                           \
        half_call;                                                                                 \
        f32_call;                                                                                  \
        get_t(b, got, out, n, t);                                                                  \
        b_get(b, ref, out32, n);                                                                   \
        check_exact(name, shape, t, got, ref, n);                                                  \
    } while (0)
        EW_CHECK("add", b.ops->add(b.be, y, a, bb, (long)n, t),
                 b.ops->add(b.be, r32, a32, b32, (long)n, TF_F32), y, r32);
        EW_CHECK("mul", b.ops->mul(b.be, y, a, bb, (long)n, t),
                 b.ops->mul(b.be, r32, a32, b32, (long)n, TF_F32), y, r32);
        EW_CHECK("scale", b.ops->scale(b.be, y, a, 0.37f, (long)n, t),
                 b.ops->scale(b.be, r32, a32, 0.37f, (long)n, TF_F32), y, r32);
        EW_CHECK("act_fwd sigmoid", b.ops->act_fwd(b.be, TF_ACT_SIGMOID, y, a, (long)n, t),
                 b.ops->act_fwd(b.be, TF_ACT_SIGMOID, r32, a32, (long)n, TF_F32), y, r32);
        EW_CHECK("act_fwd relu", b.ops->act_fwd(b.be, TF_ACT_RELU, y, a, (long)n, t),
                 b.ops->act_fwd(b.be, TF_ACT_RELU, r32, a32, (long)n, TF_F32), y, r32);
        EW_CHECK("act_bwd sigmoid", b.ops->act_bwd(b.be, TF_ACT_SIGMOID, y, dy, s, (long)n, t),
                 b.ops->act_bwd(b.be, TF_ACT_SIGMOID, r32, dy32, s32, (long)n, TF_F32), y, r32);
        EW_CHECK("act_bwd relu", b.ops->act_bwd(b.be, TF_ACT_RELU, y, dy, a, (long)n, t),
                 b.ops->act_bwd(b.be, TF_ACT_RELU, r32, dy32, a32, (long)n, TF_F32), y, r32);
        EW_CHECK("gate_fwd", b.ops->gate_fwd(b.be, y, a, g, (long)n, t),
                 b.ops->gate_fwd(b.be, r32, a32, g32, (long)n, TF_F32), y, r32);
        b.ops->gate_bwd(b.be, y, y2, dy, a, g, (long)n, t);
        b.ops->gate_bwd(b.be, r32, r32b, dy32, a32, g32, (long)n, TF_F32);
        get_t(b, got, y, n, t), b_get(b, ref, r32, n);
        check_exact("gate_bwd da", shape, t, got, ref, n);
        get_t(b, got, y2, n, t), b_get(b, ref, r32b, n);
        check_exact("gate_bwd dg", shape, t, got, ref, n);
        /* in place: a = a * b */
        void *ai = put_t(b, ha, n, t);
        EW_CHECK("mul in place", b.ops->mul(b.be, ai, ai, bb, (long)n, t),
                 b.ops->mul(b.be, r32, a32, b32, (long)n, TF_F32), ai, r32);
        b_free(b, ai);
        /* gate_residual: fp32 residual stream, half a and g */
        float *res = rnd(n, 1.f, 16);
        float *o = b_put(b, res, n), *o32 = b_put(b, res, n);
        b.ops->gate_residual_fwd(b.be, o, o, a, g, (long)n, t);
        b.ops->gate_residual_fwd(b.be, o32, o32, a32, g32, (long)n, TF_F32);
        b_get(b, got, o, n), b_get(b, ref, o32, n);
        check_exact("gate_residual_fwd (fp32 out)", shape, TF_F32, got, ref, n);
#undef EW_CHECK
        b_free(b, o), b_free(b, o32), free(res);
        b_free(b, a), b_free(b, bb), b_free(b, g), b_free(b, dy), b_free(b, s);
        b_free(b, a32), b_free(b, b32), b_free(b, g32), b_free(b, dy32), b_free(b, s32);
        b_free(b, y), b_free(b, y2), b_free(b, r32), b_free(b, r32b);
        free(ha), free(hb), free(hg), free(hy), free(hs), free(got), free(ref);
    }
    done();
}

/* ---- data movement: permute, broadcast add, sum, copy_rows, gate_cmajor ---- */
/* pair_bias_fwd and _bwd (every type): the CUDA ops against the CPU's bit
 * for bit (both sum by fmaf in order and round or add once: the same IEEE
 * operations); dzh the bits of dz rounded, db32 dbias exactly; and against
 * double: an n-term fmaf chain and the add round at most n + 1 times, each
 * within u of the running magnitude, so |got - ref| <= (n + 1) u M (M the
 * sum of the magnitudes; bwd: n = H, M = |dz0| + sum |d w|; fwd: n = C, M =
 * sum |z w|, plus the rounding to t, u_t |ref|), 2x margin. Shapes: C a
 * multiple of 4 (bwd: 4 columns a thread) and not, odd rows (fwd: past a
 * block of 128), H 4 and 3 (fwd: a second group of 4 heads with 6). */
static void check_bits(const char *op, const char *shape, const float *got, const float *want,
                       size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
        if (memcmp(&got[i], &want[i], 4) && !bad++) first = i;
    if (bad)
        printf("FAIL %s %s: %zu of %zu differ (first %zu: %.9g vs %.9g)\n", op, shape, bad, n,
               first, got[first], want[first]);
    else
        printf("PASS %s %s: the same bits (%zu)\n", op, shape, n);
    g_fail += bad != 0;
}

static void test_half_pair_bias(void **state)
{
    (void)state;
    g_fail = 0;
    const tf_dtype types[3] = {TF_BF16, TF_F16, TF_F32};
    const int shapes[3][3] = {{301, 128, 4}, {37, 6, 3}, {130, 40, 6}}; /* rows, C, H */
    for (int k = 0; k < 3; ++k)
        for (int sh = 0; sh < 3; ++sh) {
            const tf_dtype t = types[k];
            const long rows = shapes[sh][0];
            const int C = shapes[sh][1], H = shapes[sh][2];
            const size_t n = (size_t)rows * C, nb = (size_t)H * rows;
            float *hz = rnd(n, 1.f, 40 + sh), *hd = rnd_t(nb, 1.f, 41 + sh, t);
            float *hw = rnd((size_t)H * C, 0.5f, 42 + sh);
            const bk be[2] = {g_cpu, g_cu3};
            float *z[2], *db[2], *gz[2], *gdb[2], *gh[2];
            void *zh[2];
            for (int i = 0; i < 2; ++i) {
                const bk b = be[i];
                z[i] = b_put(b, hz, n);
                zh[i] = t == TF_F32 ? NULL : b_alloc(b, n);
                db[i] = b_alloc(b, nb);
                void *d = put_t(b, hd, nb, t);
                float *w = b_put(b, hw, (size_t)H * C);
                b.ops->pair_bias_bwd(b.be, z[i], zh[i], db[i], d, w, rows, C, H, t);
                gz[i] = malloc(4 * n), gdb[i] = malloc(4 * nb), gh[i] = malloc(4 * n);
                b_get(b, gz[i], z[i], n);
                b_get(b, gdb[i], db[i], nb);
                if (zh[i]) get_t(b, gh[i], zh[i], n, t);
                b_free(b, d), b_free(b, w);
            }
            char shape[48];
            snprintf(shape, sizeof shape, "%s rows %ld C %d H %d", tf_dtype_name(t), rows, C, H);
            check_bits("pair_bias_bwd dz (cuda vs cpu)", shape, gz[1], gz[0], n);
            check_bits("pair_bias_bwd db32", shape, gdb[1], hd, nb);
            if (t != TF_F32) {
                check_bits("pair_bias_bwd dzh (cuda vs cpu)", shape, gh[1], gh[0], n);
                float *want = malloc(4 * n);
                memcpy(want, gz[1], 4 * n);
                round_t(want, n, t);
                check_bits("pair_bias_bwd dzh = dz rounded", shape, gh[1], want, n);
                free(want);
            }
            for (int i = 0; i < 2; ++i) {
                size_t bad = 0;
                for (long r = 0; r < rows; ++r)
                    for (int c = 0; c < C; ++c) {
                        double ref = hz[r * C + c], mag = fabs(ref);
                        for (int h = 0; h < H; ++h) {
                            const double v = (double)hd[h * rows + r] * hw[h * C + c];
                            ref += v, mag += fabs(v);
                        }
                        bad += !(fabs(gz[i][r * C + c] - ref) <= 2.0 * (H + 1) * 0x1p-24 * mag);
                    }
                printf("%s pair_bias_bwd dz (%s) vs double %s: %zu past 2 (H + 1) u (|dz| + "
                       "sum |d w|)\n",
                       bad ? "FAIL" : "PASS", i ? "cuda" : "cpu", shape, bad);
                g_fail += bad != 0;
            }
            /* the forward from hz: bias [H, rows] of type t */
            float *gb[2];
            for (int i = 0; i < 2; ++i) {
                const bk b = be[i];
                float *zz = b_put(b, hz, n), *w = b_put(b, hw, (size_t)H * C);
                void *bias = b_alloc(b, nb);
                b.ops->pair_bias_fwd(b.be, bias, zz, w, rows, C, H, t);
                gb[i] = malloc(4 * nb);
                get_t(b, gb[i], bias, nb, t);
                b_free(b, zz), b_free(b, w), b_free(b, bias);
            }
            check_bits("pair_bias_fwd (cuda vs cpu)", shape, gb[1], gb[0], nb);
            {
                const double ut = t == TF_F32 ? 0x1p-24 : t == TF_BF16 ? 0x1p-8 : 0x1p-11;
                size_t bad = 0;
                for (int h = 0; h < H; ++h)
                    for (long r = 0; r < rows; ++r) {
                        double ref = 0.0, mag = 0.0;
                        for (int c = 0; c < C; ++c) {
                            const double v = (double)hz[r * C + c] * hw[h * C + c];
                            ref += v, mag += fabs(v);
                        }
                        const double tol = 2.0 * ((C + 1) * 0x1p-24 * mag + ut * fabs(ref));
                        bad += !(fabs(gb[1][h * rows + r] - ref) <= tol);
                    }
                printf("%s pair_bias_fwd vs double %s: %zu past 2 ((C + 1) u sum |z w| + u_t "
                       "|ref|)\n",
                       bad ? "FAIL" : "PASS", shape, bad);
                g_fail += bad != 0;
            }
            for (int i = 0; i < 2; ++i) {
                free(gb[i]);
                b_free(be[i], z[i]), b_free(be[i], db[i]);
                if (zh[i]) b_free(be[i], zh[i]);
                free(gz[i]), free(gdb[i]), free(gh[i]);
            }
            free(hz), free(hd), free(hw);
        }
    done();
}

static void test_half_data(void **state)
{
    (void)state;
    g_fail = 0;
    const int lv[2] = {1, 3};
    for (int li = 0; li < 2; ++li) {
        const bk b = lv[li] == 1 ? g_cu1 : g_cu3;
        for (int k = 0; k < 2; ++k) {
            const tf_dtype t = k_half[k];
            char shape[64];
            /* permutes: a transpose, a kept inner run, a generic gather; plain and accumulating */
            const int dims[3][4] = {{2, 3, 40, 36}, {3, 5, 4, 8}, {2, 3, 5, 4}};
            const int perms[3][4] = {{0, 1, 3, 2}, {2, 0, 1, 3}, {3, 1, 0, 2}};
            for (int c = 0; c < 3; ++c)
                for (int acc = 0; acc < 2; ++acc) {
                    tf_permute_args pa;
                    memset(&pa, 0, sizeof pa);
                    pa.rank = 4;
                    size_t n = 1;
                    for (int i = 0; i < 4; ++i) pa.dims[i] = dims[c][i], pa.perm[i] = perms[c][i];
                    for (int i = 0; i < 4; ++i) n *= (size_t)dims[c][i];
                    pa.accumulate = acc;
                    float *hx = rnd_t(n, 1.f, 20 + c, t), *ho = rnd_t(n, 1.f, 30 + c, t);
                    void *x = put_t(b, hx, n, t), *o = put_t(b, ho, n, t);
                    float *x32 = b_put(b, hx, n), *o32 = b_put(b, ho, n);
                    pa.t = t;
                    b.ops->permute(b.be, o, x, &pa);
                    pa.t = TF_F32;
                    b.ops->permute(b.be, o32, x32, &pa);
                    float *got = malloc(4 * n), *ref = malloc(4 * n);
                    get_t(b, got, o, n, t), b_get(b, ref, o32, n);
                    snprintf(shape, sizeof shape, "L%d case %d acc %d", lv[li], c, acc);
                    check_exact("permute", shape, t, got, ref, n);
                    b_free(b, x), b_free(b, o), b_free(b, x32), b_free(b, o32);
                    free(hx), free(ho), free(got), free(ref);
                }
            /* add_bcast_mid, sum_mid */
            {
                const long outer = 3, mid = 17, inner = 29;
                const size_t nb = (size_t)(outer * mid * inner), ns = (size_t)(outer * inner);
                float *hy = rnd_t(nb, 1.f, 40, t), *hx = rnd_t(ns, 1.f, 41, t);
                void *y = put_t(b, hy, nb, t), *x = put_t(b, hx, ns, t);
                float *y32 = b_put(b, hy, nb), *x32 = b_put(b, hx, ns);
                float *got = malloc(4 * nb), *ref = malloc(4 * nb);
                b.ops->add_bcast_mid(b.be, y, x, outer, mid, inner, t);
                b.ops->add_bcast_mid(b.be, y32, x32, outer, mid, inner, TF_F32);
                get_t(b, got, y, nb, t), b_get(b, ref, y32, nb);
                snprintf(shape, sizeof shape, "L%d %ldx%ldx%ld", lv[li], outer, mid, inner);
                check_exact("add_bcast_mid", shape, t, got, ref, nb);
                b.ops->upload(b.be, y32, got, 4 * nb); /* the sums' input: the half op's */
                for (int acc = 0; acc < 2; ++acc) {
                    b.ops->sum_mid(b.be, x, y, outer, mid, inner, acc, t);
                    b.ops->sum_mid(b.be, x32, y32, outer, mid, inner, acc, TF_F32);
                    /* the next round accumulates into x: the fp32 op's gets the half op's */
                    get_t(b, got, x, ns, t), b_get(b, ref, x32, ns);
                    check_exact(acc ? "sum_mid acc" : "sum_mid", shape, t, got, ref, ns);
                    b.ops->upload(b.be, x32, got, 4 * ns);
                }
                b_free(b, y), b_free(b, x), b_free(b, y32), b_free(b, x32);
                free(hy), free(hx), free(got), free(ref);
            }
            /* copy_rows: 7 rows of 13 from a 20-wide source into a 15-wide dest */
            {
                const long rows = 7, cols = 13, sld = 20, dld = 15;
                float *hs = rnd_t((size_t)(rows * sld), 1.f, 50, t);
                float *hd = rnd_t((size_t)(rows * dld), 1.f, 51, t);
                void *s = put_t(b, hs, (size_t)(rows * sld), t),
                     *d = put_t(b, hd, (size_t)(rows * dld), t);
                b.ops->copy_rows(b.be, (char *)d + 2 * tf_dtype_size(t), dld, s, sld, cols, rows,
                                 t);
                for (long r = 0; r < rows; ++r)
                    for (long c = 0; c < cols; ++c) hd[r * dld + 2 + c] = hs[r * sld + c];
                float *got = malloc(4 * (size_t)(rows * dld));
                get_t(b, got, d, (size_t)(rows * dld), t);
                snprintf(shape, sizeof shape, "L%d %ldx%ld", lv[li], rows, cols);
                check_exact("copy_rows", shape, t, got, hd, (size_t)(rows * dld));
                b_free(b, s), b_free(b, d);
                free(hs), free(hd), free(got);
            }
            /* gate_cmajor: rows 70 = 2 x 35, C 24, ld 2C + 5 (element by
             * element); rows 192 = 2 x 96, C 96, ld 2C + 2 (element pairs in
             * the full tiles, a tile across the two b, an edge tile in c) */
            for (int gs = 0; gs < 2; ++gs) {
                const long rows = gs ? 192 : 70, inner = gs ? 96 : 35, ld = gs ? 194 : 53;
                const int C = gs ? 96 : 24;
                const size_t na = (size_t)(rows * ld), nt = (size_t)(2 * C * rows);
                float *ha = rnd_t(na, 1.f, 60, t), *hg = rnd_t(na, 1.f, 61, t);
                float *hd = rnd_t(nt, 1.f, 62, t);
                void *a = put_t(b, ha, na, t), *g = put_t(b, hg, na, t), *dl = put_t(b, hd, nt, t);
                float *a32 = b_put(b, ha, na), *g32 = b_put(b, hg, na), *dl32 = b_put(b, hd, nt);
                void *lr = b_alloc(b, nt), *da = b_alloc(b, na), *dg = b_alloc(b, na);
                float *lr32 = b_alloc(b, nt), *da32 = b_alloc(b, na), *dg32 = b_alloc(b, na);
                float *got = malloc(4 * na), *ref = malloc(4 * na);
                snprintf(shape, sizeof shape, "L%d rows %ld C %d", lv[li], rows, C);
                b.ops->gate_cmajor_fwd(b.be, lr, a, g, ld, rows, inner, C, t);
                b.ops->gate_cmajor_fwd(b.be, lr32, a32, g32, ld, rows, inner, C, TF_F32);
                get_t(b, got, lr, nt, t), b_get(b, ref, lr32, nt);
                check_exact("gate_cmajor_fwd", shape, t, got, ref, nt);
                /* the bwd writes only the a/g columns: compare those */
                b.ops->zero(b.be, da, 2 * na), b.ops->zero(b.be, dg, 2 * na);
                b.ops->zero(b.be, da32, 4 * na), b.ops->zero(b.be, dg32, 4 * na);
                b.ops->gate_cmajor_bwd(b.be, da, dg, dl, a, g, ld, rows, inner, C, t);
                b.ops->gate_cmajor_bwd(b.be, da32, dg32, dl32, a32, g32, ld, rows, inner, C,
                                       TF_F32);
                get_t(b, got, da, na, t), b_get(b, ref, da32, na);
                check_exact("gate_cmajor_bwd da", shape, t, got, ref, na);
                get_t(b, got, dg, na, t), b_get(b, ref, dg32, na);
                check_exact("gate_cmajor_bwd dg", shape, t, got, ref, na);
                b_free(b, a), b_free(b, g), b_free(b, dl), b_free(b, a32), b_free(b, g32);
                b_free(b, dl32), b_free(b, lr), b_free(b, da), b_free(b, dg), b_free(b, lr32);
                b_free(b, da32), b_free(b, dg32);
                free(ha), free(hg), free(hd), free(got), free(ref);
            }
        }
    }
    done();
}

/* ---- LayerNorm, LayerNorm2, softmax ----
 * From a residual stream (x, dx fp32) the backwards also store dx's copy in
 * the half type (dxh), the model's next stream gradient: checked against
 * convert(dx). */
static void test_half_norm(void **state)
{
    (void)state;
    g_fail = 0;
    const int lv[2] = {1, 3};
    for (int li = 0; li < 2; ++li) {
        const bk b = lv[li] == 1 ? g_cu1 : g_cu3;
        for (int k = 0; k < 2; ++k) {
            const tf_dtype h = k_half[k];
            /* (xt, yt): a residual stream into a half activation, half to half, half to fp32 */
            const tf_dtype xts[3] = {TF_F32, h, h}, yts[3] = {h, h, TF_F32};
            /* 48: the general kernels; 64, 128: the vector-row kernels at level 3 */
            const int Cs[3] = {48, 64, 128};
            for (int ci = 0; ci < 3; ++ci)
                for (int p = 0; p < 3; ++p) {
                    const int C = Cs[ci];
                    const long rows = 77;
                    const size_t n = (size_t)rows * (size_t)C;
                    const tf_dtype xt = xts[p], yt = yts[p];
                    float *hx = rnd_t(n, 1.f, 70, xt), *hd = rnd_t(n, 1.f, 71, yt);
                    float *hdx = rnd_t(n, 1.f, 72, xt);
                    float *gm = rnd((size_t)C, 1.f, 73), *bt = rnd((size_t)C, 0.5f, 74);
                    void *x = put_t(b, hx, n, xt), *dout = put_t(b, hd, n, yt),
                         *dx = put_t(b, hdx, n, xt), *out = b_alloc(b, n);
                    float *x32 = b_put(b, hx, n), *d32 = b_put(b, hd, n), *dx32 = b_put(b, hdx, n),
                          *o32 = b_alloc(b, n);
                    float *g_ = b_put(b, gm, (size_t)C), *b_ = b_put(b, bt, (size_t)C);
                    float *mean = b_alloc(b, (size_t)rows * 4), *mean32 = b_alloc(b, (size_t)rows * 4);
                    float *dp = b_alloc(b, 4 * (size_t)C), *dp32 = b_alloc(b, 4 * (size_t)C);
                    float *got = malloc(4 * n), *ref = malloc(4 * n);
                    /* the copy aligned (the model's), or one element off for every
                     * other shape (the vector-row kernels' scalar stores) */
                    void *dxh_base = xt == TF_F32 ? b_alloc(b, n + 1) : NULL;
                    void *dxh = dxh_base && (ci + k) % 2 ? (uint16_t *)dxh_base + 1 : dxh_base;
                    char shape[64];
                    snprintf(shape, sizeof shape, "L%d rows %ld C %d x %s out %s", lv[li], rows, C,
                             tf_dtype_name(xt), tf_dtype_name(yt));
                    b.ops->layernorm_fwd(b.be, out, mean, mean + rows, x, g_, b_, rows, C, 1e-5f,
                                         xt, yt);
                    b.ops->layernorm_fwd(b.be, o32, mean32, mean32 + rows, x32, g_, b_, rows, C,
                                         1e-5f, TF_F32, TF_F32);
                    get_t(b, got, out, n, yt), b_get(b, ref, o32, n);
                    check_exact("layernorm_fwd", shape, yt, got, ref, n);
                    b.ops->zero(b.be, dp, 8 * (size_t)C), b.ops->zero(b.be, dp32, 8 * (size_t)C);
                    b.ops->layernorm_bwd(b.be, dx, dxh, dp, dp + C, dout, x, mean32, mean32 + rows,
                                         g_, rows, C, 1, xt, yt);
                    b.ops->layernorm_bwd(b.be, dx32, NULL, dp32, dp32 + C, d32, x32, mean32,
                                         mean32 + rows, g_, rows, C, 1, TF_F32, TF_F32);
                    get_t(b, got, dx, n, xt), b_get(b, ref, dx32, n);
                    check_exact("layernorm_bwd dx (acc)", shape, xt, got, ref, n);
                    if (dxh) check_copy(b, "layernorm_bwd dxh", shape, yt, dxh, dx, n);
                    b_get(b, got, dp, 2 * (size_t)C), b_get(b, ref, dp32, 2 * (size_t)C);
                    check_exact("layernorm_bwd dgamma dbeta", shape, TF_F32, got, ref,
                                2 * (size_t)C);
                    /* layernorm2 (C <= 128): the same pairs */
                    float *st = b_alloc(b, 4 * (size_t)rows), *st32 = b_alloc(b, 4 * (size_t)rows);
                    b.ops->layernorm2_fwd(b.be, out, st, x, g_, b_, b_, g_, rows, C, 1e-5f, xt, yt);
                    b.ops->layernorm2_fwd(b.be, o32, st32, x32, g_, b_, b_, g_, rows, C, 1e-5f,
                                          TF_F32, TF_F32);
                    get_t(b, got, out, n, yt), b_get(b, ref, o32, n);
                    check_exact("layernorm2_fwd", shape, yt, got, ref, n);
                    float *dq = b_alloc(b, 4 * (size_t)C), *dq32 = b_alloc(b, 4 * (size_t)C);
                    b.ops->zero(b.be, dq, 16 * (size_t)C), b.ops->zero(b.be, dq32, 16 * (size_t)C);
                    b.ops->layernorm2_bwd(b.be, dx, dxh, dq, dq + C, dq + 2 * C, dq + 3 * C, dout,
                                          x, st32, g_, b_, b_, rows, C, 0, xt, yt);
                    b.ops->layernorm2_bwd(b.be, dx32, NULL, dq32, dq32 + C, dq32 + 2 * C,
                                          dq32 + 3 * C, d32, x32, st32, g_, b_, b_, rows, C, 0,
                                          TF_F32, TF_F32);
                    get_t(b, got, dx, n, xt), b_get(b, ref, dx32, n);
                    check_exact("layernorm2_bwd dx", shape, xt, got, ref, n);
                    if (dxh) check_copy(b, "layernorm2_bwd dxh", shape, yt, dxh, dx, n);
                    b_get(b, got, dq, 4 * (size_t)C), b_get(b, ref, dq32, 4 * (size_t)C);
                    check_exact("layernorm2_bwd dg1 db1 dg2 db2", shape, TF_F32, got, ref,
                                4 * (size_t)C);
                    b_free(b, st), b_free(b, st32), b_free(b, dq), b_free(b, dq32);
                    b_free(b, x), b_free(b, dout), b_free(b, dx), b_free(b, out), b_free(b, x32);
                    b_free(b, d32), b_free(b, dx32), b_free(b, o32), b_free(b, g_), b_free(b, b_);
                    b_free(b, mean), b_free(b, mean32), b_free(b, dp), b_free(b, dp32);
                    if (dxh_base) b_free(b, dxh_base);
                    free(hx), free(hd), free(hdx), free(gm), free(bt), free(got), free(ref);
                }
            /* softmax: forward in place, backward */
            {
                const long rows = 45;
                const int cols = 70;
                const size_t n = (size_t)rows * cols;
                float *hx = rnd_t(n, 2.f, 80, h), *hd = rnd_t(n, 1.f, 81, h);
                void *y = put_t(b, hx, n, h), *dy = put_t(b, hd, n, h), *dx = b_alloc(b, n);
                float *y32 = b_put(b, hx, n), *dy32 = b_put(b, hd, n), *dx32 = b_alloc(b, n);
                float *got = malloc(4 * n), *ref = malloc(4 * n);
                char shape[48];
                snprintf(shape, sizeof shape, "L%d %ldx%d", lv[li], rows, cols);
                b.ops->softmax_fwd(b.be, y, y, rows, cols, h);
                b.ops->softmax_fwd(b.be, y32, y32, rows, cols, TF_F32);
                get_t(b, got, y, n, h), b_get(b, ref, y32, n);
                check_exact("softmax_fwd", shape, h, got, ref, n);
                b.ops->upload(b.be, y32, got, 4 * n); /* the bwd's y: the half op's, widened */
                b.ops->softmax_bwd(b.be, dx, dy, y, rows, cols, h);
                b.ops->softmax_bwd(b.be, dx32, dy32, y32, rows, cols, TF_F32);
                get_t(b, got, dx, n, h), b_get(b, ref, dx32, n);
                check_exact("softmax_bwd", shape, h, got, ref, n);
                b_free(b, y), b_free(b, dy), b_free(b, dx), b_free(b, y32), b_free(b, dy32);
                b_free(b, dx32), free(hx), free(hd), free(got), free(ref);
            }
        }
    }
    done();
}

/* ---- attention: at level 1 the half types and fp32 run kernel1; at level 3
 * (L <= 128, d 16 or 32, mma.sync) kernel5 with one TF32 product (exact on
 * half inputs), as TF32 does with attention kernel5 ---- */
static void test_half_attention(void **state)
{
    (void)state;
    g_fail = 0;
    /* kernel1 (level 1) and kernel5 (level 3, attn=k5): the fp32 kernel's
     * result rounded once; kernel6 is test_cuda_ops_flash's */
    const int shapes[2][2] = {{37, 16}, {70, 32}}; /* L, d */
    for (int li = 0; li < 4; ++li) {
        const int lv = li < 2 ? 1 : 3, L = shapes[li % 2][0], d = shapes[li % 2][1];
        const int nb = 2, no = 3, nh = 2, C = nh * d;
        const size_t n = (size_t)nb * no * L * C, nbias = (size_t)nb * nh * L * L;
        const size_t nrow = (size_t)nb * no * nh * L;
        const bk b = lv == 1 ? g_cu1 : g_cu3k5, ref_b = lv == 1 ? g_cu1 : g_tf32k5;
        for (int k = 0; k < 2; ++k) {
            const tf_dtype t = k_half[k];
            float *hq = rnd_t(n, 1.f, 90, t), *hk = rnd_t(n, 1.f, 91, t), *hv = rnd_t(n, 1.f, 92, t);
            float *hbias = rnd_t(nbias, 1.f, 93, t), *hdo = rnd_t(n, 1.f, 94, t);
            tf_attn_args a, r;
            memset(&a, 0, sizeof a);
            a.nb = nb, a.no = no, a.nh = nh, a.L = L, a.d = d, a.scale = 0.25f;
            a.bias_sb = (long)nh * L * L, a.bias_sh = (long)L * L, a.bias_si = L, a.bias_sj = 1;
            r = a;
            const long sb = (long)no * L * C, so = (long)L * C, sl = C;
            tf_attn_view *va[] = {&a.q, &a.k, &a.v, &a.out, &a.dq, &a.dk, &a.dv, &a.dout};
            tf_attn_view *vr[] = {&r.q, &r.k, &r.v, &r.out, &r.dq, &r.dk, &r.dv, &r.dout};
            const float *src[] = {hq, hk, hv, NULL, NULL, NULL, NULL, hdo};
            for (int i = 0; i < 8; ++i) {
                va[i]->p = src[i] ? put_t(b, src[i], n, t) : b_alloc(b, n);
                vr[i]->p = src[i] ? b_put(ref_b, src[i], n) : b_alloc(ref_b, n);
                va[i]->sb = vr[i]->sb = sb, va[i]->so = vr[i]->so = so, va[i]->sl = vr[i]->sl = sl;
            }
            a.bias = put_t(b, hbias, nbias, t), r.bias = b_put(ref_b, hbias, nbias);
            a.dbias = b_alloc(b, nbias), r.dbias = b_alloc(ref_b, nbias);
            a.lse = b_alloc(b, nrow), r.lse = b_alloc(ref_b, nrow);
            a.work = b_alloc(b, nrow), r.work = b_alloc(ref_b, nrow);
            a.t = t, r.t = TF_F32;
            b.ops->attn_fwd(b.be, &a);
            ref_b.ops->attn_fwd(ref_b.be, &r);
            float *got = malloc(4 * nbias > 4 * n ? 4 * nbias : 4 * n);
            float *ref = malloc(4 * nbias > 4 * n ? 4 * nbias : 4 * n);
            char shape[64];
            snprintf(shape, sizeof shape, "level%d nb%d no%d nh%d L%d d%d", lv, nb, no, nh, L, d);
            get_t(b, got, a.out.p, n, t), b_get(ref_b, ref, r.out.p, n);
            check_exact("attn_fwd out", shape, t, got, ref, n);
            b_get(b, got, a.lse, nrow), b_get(ref_b, ref, r.lse, nrow);
            check_exact("attn_fwd lse (fp32)", shape, TF_F32, got, ref, nrow);
            /* the backward reads out: the fp32 reference gets the half op's */
            get_t(b, got, a.out.p, n, t);
            ref_b.ops->upload(ref_b.be, r.out.p, got, 4 * n);
            b.ops->attn_bwd(b.be, &a);
            ref_b.ops->attn_bwd(ref_b.be, &r);
            const char *names[] = {"attn_bwd dq", "attn_bwd dk", "attn_bwd dv"};
            for (int i = 0; i < 3; ++i) {
                get_t(b, got, va[4 + i]->p, n, t), b_get(ref_b, ref, vr[4 + i]->p, n);
                check_exact(names[i], shape, t, got, ref, n);
            }
            get_t(b, got, a.dbias, nbias, t), b_get(ref_b, ref, r.dbias, nbias);
            check_exact("attn_bwd dbias", shape, t, got, ref, nbias);
            for (int i = 0; i < 8; ++i) b_free(b, va[i]->p), b_free(ref_b, vr[i]->p);
            b_free(b, (void *)a.bias), b_free(ref_b, (void *)r.bias), b_free(b, a.dbias);
            b_free(ref_b, r.dbias), b_free(b, a.lse), b_free(ref_b, r.lse), b_free(b, a.work);
            b_free(ref_b, r.work);
            free(hq), free(hk), free(hv), free(hbias), free(hdo), free(got), free(ref);
        }
    }
    done();
}

/* ---- outer product mean: backward and the permuted product ---- */
static void test_half_opm(void **state)
{
    (void)state;
    g_fail = 0;
    const bk b = g_cu3;
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        /* co 12: kernel2 and kernel1, exact; co 32 (aligned): the mma.sync
         * kernels where the device has them (else kernel3), S 40 with two
         * chunks of s. Against fp32's FFMA kernel3: exact products, fp32 sums
         * in another order with the tensor cores' truncation (K/8 MMAs of up
         * to 2u each: K/4 u, K = 2 N co products for the backward, S for the
         * product), and one rounding to t that may fall either side (one ulp
         * of t, 2 u_of(t) of the largest output) */
        const int shapes[3][2] = {{12, 9}, {32, 9}, {32, 40}}; /* co, S */
        for (int ci = 0; ci < 3; ++ci) {
            const int B = 2, S = shapes[ci][1], N = 11, co = shapes[ci][0];
            const size_t na = (size_t)B * S * N * co, nop = (size_t)B * N * N * co * co;
            float *ha = rnd_t(na, 1.f, 100, t), *hd = rnd_t(nop, 1.f, 101, t);
            void *a = put_t(b, ha, na, t), *dop = put_t(b, hd, nop, t), *da = b_alloc(b, na),
                 *op = b_alloc(b, nop);
            float *a32 = b_put(b, ha, na), *dop32 = b_put(b, hd, nop), *da32 = b_alloc(b, na),
                  *op32 = b_alloc(b, nop);
            float *got = malloc(4 * nop), *ref = malloc(4 * nop);
            char shape[48];
            snprintf(shape, sizeof shape, "B%d S%d N%d co%d", B, S, N, co);
            b.ops->opm_bwd(b.be, da, dop, a, B, S, N, co, t);
            b.ops->opm_bwd(b.be, da32, dop32, a32, B, S, N, co, TF_F32);
            get_t(b, got, da, na, t), b_get(b, ref, da32, na);
            const double kb = 2.0 * N * co, ko = S;
            if (co == 32)
                check("opm_bwd (bounded)", shape, got, ref, na,
                      2 * u_of(t) + tol_sum(kb) + kb / 4.0 * U);
            else
                check_exact("opm_bwd", shape, t, got, ref, na);
            b.ops->opm_outer(b.be, op, a, B, S, N, co, t);
            b.ops->opm_outer(b.be, op32, a32, B, S, N, co, TF_F32);
            get_t(b, got, op, nop, t), b_get(b, ref, op32, nop);
            if (co == 32)
                check("opm_outer (bounded)", shape, got, ref, nop,
                      2 * u_of(t) + tol_sum(ko) + ko / 4.0 * U);
            else
                check_exact("opm_outer", shape, t, got, ref, nop);
            b_free(b, a), b_free(b, dop), b_free(b, da), b_free(b, op), b_free(b, a32);
            b_free(b, dop32), b_free(b, da32), b_free(b, op32);
            free(ha), free(hd), free(got), free(ref);
        }
    }
    done();
}

/* ---- the outer product mean as one op each way (op_list.h opm_fwd,
 * opm_bwd_dz) against the CPU's ops, the compositions they replace (opm_outer
 * + GEMM; opm_outer, dop = dz W, dW += dz^T o, opm_bwd). Both sides round
 * the product o and dop to t from fp32 sums that differ in order and, on
 * the tensor cores, by truncation (~1e-6 relative), so a few land on the
 * other neighbour of t: one ulp (2u) of a few terms of a sum.
 *   z_out - z_in (the projection, K = 1024 terms): 2u + tol_sum(1024) +
 *     1024/8 U, against its largest value and normwise;
 *   da (K = 2 N co terms, rounded once more): 4u + tol_sum(K) + K/4 U (as
 *     opm_bwd's test);
 *   dW's increment (fp32, K = B N N pairs): 2u + tol_sum(K) + K/8 U.
 * A dropped chunk of 2 p (1/16 of an output's terms) is off by ~25%, a
 * mirror term left out (half of da) by ~70%, an exchanged pair by ~100%.
 * N 11 and 21 leave the pair tiles partial; S 9 and 40 pad the s steps of
 * 16; S 64 is the largest the kernels take (the backward's one buffer). ---- */
static void test_half_opm_fused(void **state)
{
    (void)state;
    g_fail = 0;
    tf_gpu_plan fused = plan_of(TF_GPU_GEMM_MMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
    fused.opm = TF_GPU_OPM_FUSED;
    const bk b = bk_create(3, 0, &fused, NULL), c = g_cpu;
    tf_backend_caps caps;
    b.ops->caps(b.be, &caps);
    const int shapes[4][4] = {{2, 9, 11, 64}, {1, 40, 21, 128}, {1, 64, 9, 128}, {2, 1, 5, 64}};
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        if (!(caps.opm_fused_op & 1u << t)) {
            printf("SKIP opm_fwd, opm_bwd_dz %s: the plan composes them (caps.opm_fused_op 0x%x)\n",
                   tf_dtype_name(t), caps.opm_fused_op);
            continue;
        }
        const double u = u_of(t);
        for (int si = 0; si < 4; ++si) {
            const int B = shapes[si][0], S = shapes[si][1], N = shapes[si][2], cz = shapes[si][3];
            const int co = 32;
            const size_t na = (size_t)B * S * N * co, nw = (size_t)cz * co * co,
                         nz = (size_t)B * N * N * cz;
            const uint64_t sd = 400 + 10 * k + si;
            float *ha = rnd_t(na, 1.f, sd, t), *hw = rnd_t(nw, 1.f / 32.f, sd + 1, t);
            float *hz = rnd(nz, 1.f, sd + 2), *hdz = rnd_t(nz, 1.f, sd + 3, t);
            float *hdw = rnd(nw, 1.f, sd + 4);
            float *zo[2], *da[2], *dw[2];
            const bk be2[2] = {b, c};
            for (int e = 0; e < 2; ++e) {
                const bk q = be2[e];
                void *a = put_t(q, ha, na, t), *w = put_t(q, hw, nw, t), *dz = put_t(q, hdz, nz, t);
                float *z = b_put(q, hz, nz), *zod = b_nan(q, nz), *dwd = b_put(q, hdw, nw);
                void *dad = b_nan(q, na);
                q.ops->opm_fwd(q.be, zod, z, a, w, B, S, N, co, cz, t);
                q.ops->opm_bwd_dz(q.be, dad, dwd, dz, a, w, B, S, N, co, cz, t);
                zo[e] = malloc(4 * nz), da[e] = malloc(4 * na), dw[e] = malloc(4 * nw);
                b_get(q, zo[e], zod, nz);
                get_t(q, da[e], dad, na, t);
                b_get(q, dw[e], dwd, nw);
                b_free(q, a), b_free(q, w), b_free(q, dz), b_free(q, z), b_free(q, zod);
                b_free(q, dwd), b_free(q, dad);
            }
            for (int e = 0; e < 2; ++e) {
                for (size_t i = 0; i < nz; ++i) zo[e][i] -= hz[i];
                for (size_t i = 0; i < nw; ++i) dw[e][i] -= hdw[i];
            }
            char shape[64], op[40];
            snprintf(shape, sizeof shape, "B%d S%d N%d cz%d", B, S, N, cz);
            const double kda = 2.0 * N * co, kdw = (double)B * N * N;
            snprintf(op, sizeof op, "opm_fwd %s", tf_dtype_name(t));
            check(op, shape, zo[0], zo[1], nz, 2 * u + tol_sum(1024) + 1024 / 8.0 * U);
            snprintf(op, sizeof op, "opm_bwd_dz da %s", tf_dtype_name(t));
            check(op, shape, da[0], da[1], na, 4 * u + tol_sum(kda) + kda / 4.0 * U);
            snprintf(op, sizeof op, "opm_bwd_dz dW %s", tf_dtype_name(t));
            check(op, shape, dw[0], dw[1], nw, 2 * u + tol_sum(kdw) + kdw / 8.0 * U);
            for (int e = 0; e < 2; ++e) free(zo[e]), free(da[e]), free(dw[e]);
            free(ha), free(hw), free(hz), free(hdz), free(hdw);
        }
    }
    tf_cuda_backend_destroy(b.be);
    done();
}

/* The triangle multiplication's channel-major tensors for a chunk of rows:
 * nch channels of `rows` values at channel stride ldt >= rows. spread_t puts
 * h [nch, rows] there with NaN in the gaps (a kernel that reads one poisons
 * its output); gather_t takes the values back and counts the gap elements
 * that are no longer NaN (written outside the rows). */
static float *spread_t(const float *h, int nch, long rows, long ldt)
{
    float *w = malloc(sizeof(float) * (size_t)nch * ldt);
    for (long i = 0; i < (long)nch * ldt; ++i) w[i] = NAN;
    for (int c = 0; c < nch; ++c) memcpy(w + c * ldt, h + c * rows, sizeof(float) * rows);
    return w;
}
static long gather_t(float *h, const float *w, int nch, long rows, long ldt)
{
    long bad = 0;
    for (int c = 0; c < nch; ++c) {
        memcpy(h + c * rows, w + c * ldt, sizeof(float) * rows);
        for (long r = rows; r < ldt; ++r) bad += !isnan(w[c * ldt + r]);
    }
    return bad;
}
/* (rows, channel stride) of the triangle multiplication's op tests: whole
 * tensors whose last 128-row block is partial (37, 300), then chunks of
 * them, unaligned (37 of 45) and aligned (296 of 312) */
static const long k_trimul_rows[4][2] = {{37, 37}, {300, 300}, {37, 45}, {296, 312}};
static void check_gaps(const char *op, const char *shape, long bad)
{
    printf("%s %s %s: %ld elements written outside the rows\n", bad ? "FAIL" : "PASS", op, shape,
           bad);
    if (bad) ++g_fail;
}

/* ---- the triangle multiplication's norms, projections and gates (op_list.h
 * trimul_proj_fwd/_bwd) against the CPU's composition (layernorm2_fwd, the
 * merged GEMM, gate_cmajor_fwd/_bwd, og's GEMM). The forward's statistics
 * are fp32 sums of C terms in another order: tol_sum(C); y is rounded to t
 * from them: 2u. The forward's projections start from the y each computed,
 * the backward's from one given y. Both round proj and og to t from K = C
 * fp32 sums that differ in order and truncation (~1e-6 relative), so a few
 * land on the other neighbour of t: og within 2u of its largest value, plus
 * the flipped y's share of the sum (2u |y_k W_k| against og's sum of C such
 * terms: well under u): 3u; the gated L|R and the gradients are products of
 * a value and a gate's sigmoid (or its derivative) that may each have
 * flipped, rounded once more: 4u.
 * k_trimul_rows: partial 128-row blocks, unaligned channel-major rows, and
 * chunks of a longer tensor; a value read from the wrong channel or a gate's
 * half exchanged is off by ~100%. ---- */
static void test_half_trimul_proj(void **state)
{
    (void)state;
    g_fail = 0;
    tf_gpu_plan fused = plan_of(TF_GPU_GEMM_MMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
    fused.trimul = TF_GPU_TRIMUL_FUSED;
    const bk b = bk_create(3, 0, &fused, NULL), c = g_cpu;
    tf_backend_caps caps;
    b.ops->caps(b.be, &caps);
    const int C = 128;
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        if (!(caps.trimul_proj_op & 1u << t)) {
            printf("SKIP trimul_proj %s: the plan composes it (caps.trimul_proj_op 0x%x)\n",
                   tf_dtype_name(t), caps.trimul_proj_op);
            continue;
        }
        const double u = u_of(t);
        for (int ri = 0; ri < 4; ++ri) {
            const long rows = k_trimul_rows[ri][0], ldt = k_trimul_rows[ri][1];
            const size_t n = (size_t)rows * C, nw = (size_t)C * C, nt = (size_t)2 * C * ldt;
            const uint64_t sd = 500 + 10 * k + ri;
            float *hy = rnd_t(n, 1.f, sd, t), *hw4 = rnd_t(4 * nw, 1.f / sqrtf((float)C), sd + 1, t);
            float *hwo = rnd_t(nw, 1.f / sqrtf((float)C), sd + 2, t), *hd = rnd_t(2 * n, 1.f, sd + 3, t);
            float *hdt = spread_t(hd, 2 * C, rows, ldt), *wt = malloc(4 * nt);
            float *hx = rnd(n, 2.f, sd + 4), *hg = rnd(4 * C, 0.2f, sd + 5); /* g1 b1 g2 b2 */
            for (int i = 0; i < C; ++i) hg[i] += 1.f, hg[2 * C + i] += 1.f;
            for (size_t i = 0; i < n; ++i) hx[i] += 0.5f;
            float *lr[2], *og[2], *dp[2], *yo[2], *st[2];
            long gaps = 0;
            const bk be2[2] = {b, c};
            for (int e = 0; e < 2; ++e) {
                const bk q = be2[e];
                void *y = put_t(q, hy, n, t), *w4 = put_t(q, hw4, 4 * nw, t), *wo = put_t(q, hwo, nw, t);
                void *dl = put_t(q, hdt, nt, t);
                void *lrd = b_nan(q, nt), *ogd = b_nan(q, n), *dpd = b_nan(q, 4 * n);
                float *x = b_put(q, hx, n), *gb = b_put(q, hg, 4 * C), *std = b_nan(q, 4 * rows);
                void *yd = b_nan(q, n);
                q.ops->trimul_proj_fwd(q.be, lrd, ogd, yd, std, x, gb, gb + C, gb + 2 * C,
                                       gb + 3 * C, 1e-5f, w4, wo, rows, ldt, C, t);
                q.ops->trimul_proj_bwd(q.be, dpd, dl, y, w4, rows, ldt, C, t);
                lr[e] = malloc(8 * n), og[e] = malloc(4 * n), dp[e] = malloc(16 * n);
                yo[e] = malloc(4 * n), st[e] = malloc(16 * rows);
                get_t(q, yo[e], yd, n, t);
                b_get(q, st[e], std, 4 * rows);
                b_free(q, x), b_free(q, gb), b_free(q, std), b_free(q, yd);
                get_t(q, wt, lrd, nt, t);
                gaps += gather_t(lr[e], wt, 2 * C, rows, ldt);
                get_t(q, og[e], ogd, n, t);
                get_t(q, dp[e], dpd, 4 * n, t);
                b_free(q, y), b_free(q, w4), b_free(q, wo), b_free(q, dl), b_free(q, lrd);
                b_free(q, ogd), b_free(q, dpd);
            }
            char shape[48], op[48];
            snprintf(shape, sizeof shape, "rows %ld of %ld C %d", rows, ldt, C);
            snprintf(op, sizeof op, "trimul_proj_fwd lr_t %s", tf_dtype_name(t));
            check_gaps(op, shape, gaps);
            snprintf(op, sizeof op, "trimul_proj_fwd lr_t %s", tf_dtype_name(t));
            check(op, shape, lr[0], lr[1], 2 * n, 4 * u);
            snprintf(op, sizeof op, "trimul_proj_fwd og %s", tf_dtype_name(t));
            check(op, shape, og[0], og[1], n, 3 * u);
            snprintf(op, sizeof op, "trimul_proj_fwd y %s", tf_dtype_name(t));
            check(op, shape, yo[0], yo[1], n, 2 * u);
            snprintf(op, sizeof op, "trimul_proj_fwd stats %s", tf_dtype_name(t));
            check(op, shape, st[0], st[1], 4 * rows, tol_sum(C));
            snprintf(op, sizeof op, "trimul_proj_bwd dproj %s", tf_dtype_name(t));
            check(op, shape, dp[0], dp[1], 4 * n, 4 * u);
            for (int e = 0; e < 2; ++e)
                free(lr[e]), free(og[e]), free(dp[e]), free(yo[e]), free(st[e]);
            free(hy), free(hw4), free(hwo), free(hd), free(hdt), free(wt), free(hx), free(hg);
        }
    }
    tf_cuda_backend_destroy(b.be);
    done();
}

/* ---- the triangle multiplication's output stage (op_list.h trimul_out_fwd/
 * _bwd) against the CPU's composition (the GEMM, gate_residual_fwd; the
 * conversion of dz, gate_bwd, du's GEMM). Both round out = u^T Wo^T to t from
 * K = C fp32 sums in another order, so a few land on the other neighbour:
 * z_out - z_in within 2u of its largest value (plus the sums' own
 * tol_sum(C)); dout = dy sigmoid(og) reads no sum: 2u for the sigmoid's
 * last bit; dog multiplies a flipped out and is rounded again: 4u; du sums
 * C products of dout and is rounded: 4u + tol_sum(C). Shapes
 * k_trimul_rows, the odd ones with the forward in place (z_out = z_in). A
 * row or channel exchanged, or the gate taken from the wrong element, is off
 * by ~100%. ---- */
static void test_half_trimul_out(void **state)
{
    (void)state;
    g_fail = 0;
    tf_gpu_plan fused = plan_of(TF_GPU_GEMM_MMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
    fused.trimul = TF_GPU_TRIMUL_FUSED;
    const bk b = bk_create(3, 0, &fused, NULL), c = g_cpu;
    tf_backend_caps caps;
    b.ops->caps(b.be, &caps);
    const int C = 128;
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        if (!(caps.trimul_proj_op & 1u << t)) {
            printf("SKIP trimul_out %s: the plan composes it (caps.trimul_proj_op 0x%x)\n",
                   tf_dtype_name(t), caps.trimul_proj_op);
            continue;
        }
        const double u = u_of(t);
        for (int ri = 0; ri < 4; ++ri) {
            const long rows = k_trimul_rows[ri][0], ldt = k_trimul_rows[ri][1];
            const size_t n = (size_t)rows * C, nw = (size_t)C * C, nt = (size_t)C * ldt;
            const uint64_t sd = 600 + 10 * k + ri;
            float *hu = rnd_t(n, 1.f, sd, t), *hwo = rnd_t(nw, 1.f / sqrtf((float)C), sd + 1, t);
            float *hog = rnd_t(n, 1.f, sd + 2, t), *hz = rnd(n, 1.f, sd + 3);
            float *hdz = rnd(n, 1.f, sd + 4);
            float *hut = spread_t(hu, C, rows, ldt), *wt = malloc(4 * nt);
            float *zo[2], *dout[2], *dog[2], *du[2];
            long gaps = 0;
            char shape[48], op[64];
            snprintf(shape, sizeof shape, "rows %ld of %ld C %d", rows, ldt, C);
            const bk be2[2] = {b, c};
            for (int e = 0; e < 2; ++e) {
                const bk q = be2[e];
                void *ut = put_t(q, hut, nt, t), *wo = put_t(q, hwo, nw, t), *og = put_t(q, hog, n, t);
                float *z = b_put(q, hz, n), *dz = b_put(q, hdz, n);
                float *zod = ri & 1 ? z : b_nan(q, n);
                void *d1 = b_nan(q, n), *d2 = b_nan(q, n), *d3 = b_nan(q, nt);
                q.ops->trimul_out_fwd(q.be, zod, z, ut, wo, og, rows, ldt, C, t);
                q.ops->trimul_out_bwd(q.be, d1, d2, d3, dz, ut, wo, og, rows, ldt, C, t);
                void *d4 = b_nan(q, n), *d5 = b_nan(q, n); /* du not wanted: the same dout, dog */
                q.ops->trimul_out_bwd(q.be, d4, d5, NULL, dz, ut, wo, og, rows, ldt, C, t);
                zo[e] = malloc(4 * n), dout[e] = malloc(4 * n), dog[e] = malloc(4 * n);
                du[e] = malloc(4 * n);
                float *again = malloc(8 * n);
                get_t(q, again, d4, n, t), get_t(q, again + n, d5, n, t);
                b_get(q, zo[e], zod, n);
                get_t(q, dout[e], d1, n, t), get_t(q, dog[e], d2, n, t), get_t(q, wt, d3, nt, t);
                gaps += gather_t(du[e], wt, C, rows, ldt);
                snprintf(op, sizeof op, "trimul_out_bwd du NULL, dout %s %s", tf_dtype_name(t),
                         e ? "cpu" : "cuda");
                check_same(op, shape, again, dout[e], n);
                snprintf(op, sizeof op, "trimul_out_bwd du NULL, dog %s %s", tf_dtype_name(t),
                         e ? "cpu" : "cuda");
                check_same(op, shape, again + n, dog[e], n);
                free(again), b_free(q, d4), b_free(q, d5);
                b_free(q, ut), b_free(q, wo), b_free(q, og), b_free(q, z), b_free(q, dz);
                if (!(ri & 1)) b_free(q, zod);
                b_free(q, d1), b_free(q, d2), b_free(q, d3);
                for (size_t i = 0; i < n; ++i) zo[e][i] -= hz[i];
            }
            snprintf(op, sizeof op, "trimul_out_bwd du %s", tf_dtype_name(t));
            check_gaps(op, shape, gaps);
            snprintf(op, sizeof op, "trimul_out_fwd z_out %s", tf_dtype_name(t));
            check(op, shape, zo[0], zo[1], n, 2 * u + tol_sum(C));
            snprintf(op, sizeof op, "trimul_out_bwd dout %s", tf_dtype_name(t));
            check(op, shape, dout[0], dout[1], n, 2 * u);
            snprintf(op, sizeof op, "trimul_out_bwd dog %s", tf_dtype_name(t));
            check(op, shape, dog[0], dog[1], n, 4 * u);
            snprintf(op, sizeof op, "trimul_out_bwd du %s", tf_dtype_name(t));
            check(op, shape, du[0], du[1], n, 4 * u + tol_sum(C));
            for (int e = 0; e < 2; ++e) free(zo[e]), free(dout[e]), free(dog[e]), free(du[e]);
            free(hu), free(hwo), free(hog), free(hz), free(hdz), free(hut), free(wt);
        }
    }
    tf_cuda_backend_destroy(b.be);
    done();
}

/* ---- GEMMs: ab bf16/fp16 x c fp32/the same half, the epilogues and R ---- */
static void test_half_gemm(void **state)
{
    (void)state;
    g_fail = 0;
    typedef struct {
        int tA, tB, M, N, K, batch;
        float beta;
        tf_epilogue epi;
        int use_r;
    } gcase;
    const gcase cases[] = {
        {0, 0, 37, 29, 45, 1, 0.f, TF_EPI_NONE, 0},  {1, 0, 64, 48, 96, 1, 0.f, TF_EPI_NONE, 0},
        {0, 1, 33, 70, 17, 3, 0.f, TF_EPI_NONE, 0},  {1, 1, 20, 24, 40, 2, 0.5f, TF_EPI_NONE, 0},
        {0, 0, 40, 32, 64, 1, 0.f, TF_EPI_RELU, 0},  {0, 1, 48, 16, 32, 2, 0.f, TF_EPI_DRELU, 0},
        {0, 0, 31, 27, 50, 1, 1.f, TF_EPI_NONE, 1},  {0, 0, 64, 64, 128, 1, 1.f, TF_EPI_DRELU, 1},
        /* weight gradients (A^T B, K >= 1024: the wide split on the half wgmma
         * kernel where the GPU has it): K not a multiple of its 64-row slices,
         * N past a tile, a batch with R, M 130 (no 16-byte copies) */
        {1, 0, 128, 128, 1100, 1, 1.f, TF_EPI_NONE, 0}, {1, 0, 72, 200, 2048, 1, 0.f, TF_EPI_NONE, 0},
        {1, 0, 64, 48, 1536, 2, 1.f, TF_EPI_NONE, 1},   {1, 0, 130, 72, 1030, 1, 1.f, TF_EPI_NONE, 0},
    };
    /* level 1 (cuBLAS), level 3 under gemm=mma (the libraries) and under
     * dw=half (the weight gradients on the half wgmma kernel, where the
     * build and GPU have sm_90a code) */
    const tf_gpu_plan dwh = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_HALF, TF_GPU_ATTN_AUTO);
    const bk lb[3] = {g_cu1, g_cu3, bk_create(3, 0, &dwh, NULL)};
    const char *const lname[3] = {"L1", "L3", "L3dw"};
    for (int li = 0; li < 3; ++li) {
        const bk b = lb[li];
        for (int k = 0; k < 2; ++k)
            for (int ck = 0; ck < 2; ++ck)
                for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ++ci) {
                    const gcase *g = &cases[ci];
                    /* dw=half changes only the weight gradients' route */
                    if (li == 2 && !(g->tA && !g->tB && g->K >= 1024)) continue;
                    const tf_dtype ab = k_half[k], ct = ck ? ab : TF_F32;
                    const long lda = g->tA ? g->M : g->K, ldb = g->tB ? g->K : g->N, ldc = g->N;
                    const long sA = (long)g->M * g->K, sB = (long)g->K * g->N,
                               sC = (long)g->M * g->N;
                    const size_t nA = (size_t)(sA * g->batch), nB = (size_t)(sB * g->batch),
                                 nC = (size_t)(sC * g->batch);
                    float *hA = rnd_t(nA, 1.f, 110 + ci, ab), *hB = rnd_t(nB, 1.f, 120 + ci, ab);
                    float *hC = rnd_t(nC, 1.f, 130 + ci, ct), *hX = rnd_t(nC, 1.f, 140 + ci, ct);
                    tf_gemm_args a, r;
                    memset(&a, 0, sizeof a);
                    a.transA = g->tA, a.transB = g->tB, a.M = g->M, a.N = g->N, a.K = g->K;
                    a.alpha = 0.75f, a.beta = g->beta, a.lda = lda, a.ldb = ldb, a.ldc = ldc;
                    a.strideA = sA, a.strideB = sB, a.strideC = sC, a.batch = g->batch;
                    a.epilogue = g->epi;
                    r = a;
                    a.ab_type = ab, a.c_type = ct;
                    a.A = put_t(b, hA, nA, ab), a.B = put_t(b, hB, nB, ab);
                    a.C = put_t(b, hC, nC, ct);
                    r.A = b_put(b, hA, nA), r.B = b_put(b, hB, nB), r.C = b_put(b, hC, nC);
                    if (g->use_r) a.R = put_t(b, hX, nC, ct), r.R = b_put(b, hX, nC);
                    if (g->epi == TF_EPI_DRELU)
                        a.aux = put_t(b, hX, nC, ct), r.aux = b_put(b, hX, nC);
                    b.ops->gemm(b.be, &a, "half");
                    b.ops->gemm(b.be, &r, "half_ref");
                    float *got = malloc(4 * nC), *ref = malloc(4 * nC);
                    get_t(b, got, a.C, nC, ct), b_get(b, ref, r.C, nC);
                    char shape[96];
                    snprintf(shape, sizeof shape, "%s %s x %s -> %s %c%c M%d N%d K%d b%d%s%s",
                             lname[li], tf_dtype_name(ab), tf_dtype_name(ab), tf_dtype_name(ct),
                             g->tA ? 'T' : 'N', g->tB ? 'T' : 'N', g->M, g->N, g->K, g->batch,
                             g->epi == TF_EPI_RELU ? " relu" : g->epi == TF_EPI_DRELU ? " drelu" : "",
                             g->use_r ? " R" : "");
                    check("gemm", shape, got, ref, nC,
                          u_of(ct) + tol_x3(g->K) + g->K / 8.0 * U);
                    if (a.R) b_free(b, (void *)a.R), b_free(b, (void *)r.R);
                    if (a.aux) b_free(b, (void *)a.aux), b_free(b, (void *)r.aux);
                    b_free(b, (void *)a.A), b_free(b, (void *)a.B), b_free(b, a.C);
                    b_free(b, (void *)r.A), b_free(b, (void *)r.B), b_free(b, r.C);
                    free(hA), free(hB), free(hC), free(hX), free(got), free(ref);
                }
    }
    tf_cuda_backend_destroy(lb[2].be);
    done();
}

/* ---- the transition's MLP as one op each way (op_list.h transition_fwd/_bwd)
 * against the CPU's op, which is the composition of its LayerNorm and GEMM
 * ops. Both round xn, h, dh and dxn to t where the composition stores them;
 * their fp32 values differ only in the order of the sums (tol_sum of the
 * longest, 4C = 512 terms: ~1e-5 relative), so a rounding to t lands on the
 * other neighbour only where a value lies within that of a midpoint: one ulp
 * of t (2 u) on a few elements. Outputs of type t (xn, h, dh): 2u of the
 * largest (check()'s max) and normwise. x_out = x + h W2^T and the
 * gradients are products and sums over those: each flipped input moves a
 * K-term sum by 2u of one of its terms, in quadrature over the few flips,
 * well under 2u of the sum's magnitude; the LayerNorm's backward subtracts
 * row means (dx's terms cancel to ~1/3 of their size here), so dx and dgamma
 * get 3 x 2u. mean, rstd: fp32 sums in another order, tol_sum(C). A wrong
 * kernel (a hidden chunk of 64 dropped: 1/8 of every sum) is off by ~10%,
 * far above. Rows 37 and 200 are not multiples of the 128-row block. ---- */
static void test_half_transition(void **state)
{
    (void)state;
    g_fail = 0;
    tf_gpu_plan fused = plan_of(TF_GPU_GEMM_MMA, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
    fused.mlp = TF_GPU_MLP_FUSED;
    const bk b = bk_create(3, 0, &fused, NULL), c = g_cpu;
    tf_backend_caps caps;
    b.ops->caps(b.be, &caps);
    const int Cs[2] = {64, 128};
    const long Rs[2] = {37, 200};
    for (int k = 0; k < 2; ++k) {
        const tf_dtype t = k_half[k];
        if (!(caps.transition_op & 1u << t)) {
            printf("SKIP transition %s: the plan composes it (caps.transition_op 0x%x)\n",
                   tf_dtype_name(t), caps.transition_op);
            continue;
        }
        const double u = u_of(t);
        for (int ci = 0; ci < 2; ++ci)
            for (int ri = 0; ri < 2; ++ri) {
                const int C = Cs[ci], H = 4 * C;
                const long rows = Rs[ri];
                const size_t n = (size_t)rows * C, nh = (size_t)rows * H, nw = (size_t)H * C;
                const uint64_t sd = 300 + 10 * k + 4 * ci + 2 * ri;
                float *hx = rnd(n, 1.f, sd), *hg = rnd(C, 0.1f, sd + 1), *hb = rnd(C, 0.1f, sd + 2);
                for (int i = 0; i < C; ++i) hg[i] += 1.f;
                float *hw1 = rnd_t(nw, 1.f / sqrtf((float)C), sd + 3, t);
                float *hw2 = rnd_t(nw, 1.f / sqrtf((float)H), sd + 4, t);
                float *hdy = rnd_t(n, 1.f, sd + 5, t), *hdx = rnd(n, 1.f, sd + 6);
                float *hdg = rnd(2 * C, 1.f, sd + 7);
                char shape[64];
                snprintf(shape, sizeof shape, "rows %ld C %d", rows, C);
                /* the same inputs on both backends */
                float *xo[2], *mu[2], *rs[2], *dx[2], *dg[2];
                void *w1[2], *w2[2], *dy[2], *xn[2], *h[2], *dh[2];
                const bk be2[2] = {b, c};
                for (int e = 0; e < 2; ++e) {
                    const bk q = be2[e];
                    float *x = b_put(q, hx, n), *g = b_put(q, hg, C), *bb = b_put(q, hb, C);
                    xo[e] = b_alloc(q, n), mu[e] = b_alloc(q, rows), rs[e] = b_alloc(q, rows);
                    w1[e] = put_t(q, hw1, nw, t), w2[e] = put_t(q, hw2, nw, t);
                    dy[e] = put_t(q, hdy, n, t), dx[e] = b_put(q, hdx, n);
                    dg[e] = b_put(q, hdg, 2 * C);
                    xn[e] = b_alloc(q, n), h[e] = b_alloc(q, nh), dh[e] = b_alloc(q, nh);
                    q.ops->transition_fwd(q.be, xo[e], mu[e], rs[e], x, g, bb, w1[e], w2[e], rows,
                                          C, 1e-5f, t);
                    q.ops->transition_bwd(q.be, dx[e], dg[e], dg[e] + C, xn[e], h[e], dh[e], dy[e],
                                          x, mu[e], rs[e], g, bb, w1[e], w2[e], rows, C, t);
                    q.ops->sync(q.be);
                    b_free(q, x), b_free(q, g), b_free(q, bb);
                }
                float *got = malloc(4 * nh), *ref = malloc(4 * nh);
                char op[64];
#define TR_CMP(name, dev, nn, tol, half)                                          \
    do {                                                                          \
        if (half) get_t(b, got, dev[0], nn, t), get_t(c, ref, dev[1], nn, t);     \
        else b_get(b, got, (const float *)dev[0], nn), b_get(c, ref, (const float *)dev[1], nn); \
        snprintf(op, sizeof op, "transition %s %s", name, tf_dtype_name(t));      \
        check(op, shape, got, ref, nn, tol);                                      \
    } while (0)
                TR_CMP("x_out", xo, n, 2 * u, 0);
                TR_CMP("mean", mu, (size_t)rows, tol_sum(C), 0);
                TR_CMP("rstd", rs, (size_t)rows, tol_sum(C), 0);
                TR_CMP("xn", xn, n, 2 * u, 1);
                TR_CMP("h", h, nh, 2 * u, 1);
                TR_CMP("dh", dh, nh, 2 * u, 1);
                TR_CMP("dx", dx, n, 6 * u, 0);
                TR_CMP("dgamma dbeta", dg, (size_t)(2 * C), 6 * u, 0);
#undef TR_CMP
                for (int e = 0; e < 2; ++e) {
                    const bk q = be2[e];
                    b_free(q, xo[e]), b_free(q, mu[e]), b_free(q, rs[e]), b_free(q, dx[e]);
                    b_free(q, dg[e]), b_free(q, w1[e]), b_free(q, w2[e]), b_free(q, dy[e]);
                    b_free(q, xn[e]), b_free(q, h[e]), b_free(q, dh[e]);
                }
                free(hx), free(hg), free(hb), free(hw1), free(hw2), free(hdy), free(hdx);
                free(hdg), free(got), free(ref);
            }
    }
    tf_cuda_backend_destroy(b.be);
    done();
}

/* ---- caps: the activation types by compute capability ---- */
static void test_half_caps(void **state)
{
    (void)state;
    g_fail = 0;
    tf_backend_caps c;
    g_cu3.ops->caps(g_cu3.be, &c);
    const int ok = (c.act_types & 1u << TF_F32) != 0;
    printf("%s caps act_types 0x%x (fp32 %s, bf16 %s, fp16 %s)\n", ok ? "PASS" : "FAIL",
           c.act_types, c.act_types & 1u << TF_F32 ? "yes" : "no",
           c.act_types & 1u << TF_BF16 ? "yes" : "no", c.act_types & 1u << TF_F16 ? "yes" : "no");
    g_fail += !ok;
    done();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_caps),      cmocka_unit_test(test_half_elementwise),
        cmocka_unit_test(test_half_data),      cmocka_unit_test(test_half_norm),
        cmocka_unit_test(test_half_attention), cmocka_unit_test(test_half_opm),
        cmocka_unit_test(test_half_gemm),      cmocka_unit_test(test_half_transition),
        cmocka_unit_test(test_half_opm_fused),
        cmocka_unit_test(test_half_trimul_proj),
        cmocka_unit_test(test_half_trimul_out),
        cmocka_unit_test(test_half_pair_bias),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_half", tests, sizeof tests / sizeof *tests);
}
