/* The half types' attention (bf16, fp16) against attention computed in
 * double on the host from the same rounded inputs: kernel6 on every shape
 * (the plan's attn=k6), kernel5 wherever it fits (attn=k5, L <= 128) and the
 * default route (kernel5 up to L 64, kernel6 above); kernel1 for all three
 * where the build has no mma.sync.
 *
 * Bound, element by element. The kernel computes scores, softmax and sums in
 * fp32 and rounds three things to the type t (unit roundoff u: 2^-8 bf16,
 * 2^-11 fp16): P before P V and P^T dout, dS before dS k and dS^T q, and each
 * output at its store. A rounded operand moves a sum sum_k a_k b_k by at most
 * u sum |a_k b_k|, so with the magnitudes
 *   out:   M = sum_j P_ij |v_jc|          dv: M = sum_i P_ij |dout_ic|
 *   dq:    M = scale sum_j E_ij |k_jc|     dk: M = scale sum_i E_ij |q_ic|
 *   dbias: M = sum_o E_ij,                 E_ij = P_ij (|dP_ij| + |D_i|)
 * (E bounds |dS| and the fp32 error of dP - D in units of its terms) the
 * error is at most u M + u |ref| plus fp32 roundings ~2^-24 of the same
 * terms (the tensor cores' truncating accumulation: L/16 ulps). fp16 also
 * has a floor: a rounding below 2^-14 (its smallest normal) errs by up to
 * eta = 2^-25 absolute, so a rounded operand adds eta sum |b_k| <= eta L
 * max|b| (b: v, dout, scale k, scale q; nothing for dbias) and the store eta
 * (bf16 has fp32's range: eta = 0). The test allows twice the sum,
 * 2u (M + |ref|) + 2 eta (L max|b| + 1): a key tile, a query row or an o
 * left out moves an element by O(M). lse (fp32): the sum of L exponentials in fp32 and
 * exp2/log2's few ulps, (L + 16) 2^-23 (1 + |lse|).
 * The backward's D uses the kernel's own out, as the op does. Shapes: L not a
 * multiple of the 64-wide tiles and above one tile, head sizes 16 and 32,
 * rows 16-byte aligned and not (scalar loads), keys masked by a bias of -60
 * and one query row masked everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/tf_dtype.h"
#include "cuda_testutil.h"

static float *rnd_t(size_t n, float sd, uint64_t seed, tf_dtype t)
{
    float *h = rnd(n, sd, seed);
    uint16_t *q = malloc(2 * n);
    tf_dtype_from_f32(q, t, h, n);
    tf_dtype_to_f32(h, q, t, n);
    free(q);
    return h;
}
static void *put_t(bk b, const float *h, size_t n, tf_dtype t)
{
    void *d = b_alloc(b, n);
    uint16_t *q = malloc(2 * n);
    tf_dtype_from_f32(q, t, h, n);
    b.ops->upload(b.be, d, q, 2 * n);
    free(q);
    return d;
}
static void get_t(bk b, float *h, const void *d, size_t n, tf_dtype t)
{
    uint16_t *q = malloc(2 * n);
    b.ops->sync(b.be);
    b.ops->download(b.be, q, d, 2 * n);
    tf_dtype_to_f32(h, q, t, n);
    free(q);
}

static double amax(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; ++i) m = fmax(m, fabs(x[i]));
    return m;
}

/* bmax: L max|b| of the rounded operand's partner (0: none) */
static void check_bound(const char *op, const char *shape, tf_dtype t, const float *got,
                        const double *ref, const double *mag, size_t n, int stride, int width,
                        double bmax)
{
    const double u = t == TF_BF16 ? 0x1p-8 : 0x1p-11, eta = t == TF_BF16 ? 0.0 : 0x1p-25;
    const double floor_ = 2.0 * eta * (bmax + 1.0);
    size_t bad = 0, first = 0, cnt = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (stride > width && (int)(i % stride) >= width) continue; /* a row's padding */
        ++cnt;
        const double err = fabs((double)got[i] - ref[i]), tol = 2.0 * u * (mag[i] + fabs(ref[i])) + floor_;
        if (!(err <= tol) && !bad++) first = i;
        if (tol > 0 && err / tol > worst) worst = err / tol;
    }
    if (bad)
        printf("FAIL %s %s %s: %zu of %zu past the bound (first %zu: %g vs %g, M %g)\n", op,
               tf_dtype_name(t), shape, bad, cnt, first, (double)got[first], ref[first], mag[first]);
    else
        printf("PASS %s %s %s: %zu within the bound, largest %.3f of the bound\n", op,
               tf_dtype_name(t), shape, cnt, worst);
    g_fail += bad != 0;
}

typedef struct {
    /* bias 0: none (the triangle attentions), 1: [nb, L, L, nh] (the
     * reference's Linear), 2: head-major [nh, nb, L, L] (the flash
     * composition's: kernel6 copies its tiles by 16 bytes where L % 8 == 0) */
    int nb, no, nh, L, d, sl, bias;
} shape_t;

static void run_case(bk be, const char *route, const shape_t *s, tf_dtype t)
{
    const int nb = s->nb, no = s->no, nh = s->nh, L = s->L, d = s->d, sl = s->sl, C = nh * d;
    const size_t n = (size_t)nb * no * L * sl, nbias = (size_t)nb * L * L * nh;
    const size_t nrow = (size_t)nb * no * nh * L;
    const double scale = 1.0 / sqrt((double)d);
    float *q = rnd_t(n, 1.f, 190, t), *k = rnd_t(n, 1.f, 191, t), *v = rnd_t(n, 1.f, 192, t);
    float *dout = rnd_t(n, 1.f, 194, t), *bias = rnd_t(nbias, 1.f, 193, t);
    /* masks: the last 3 keys of every row, and every key of query row 1;
     * without a bias: zeros in the reference */
    if (!s->bias) memset(bias, 0, 4 * nbias);
    for (int b = 0; b < nb && s->bias; ++b)
        for (int i = 0; i < L; ++i)
            for (int j = 0; j < L; ++j)
                for (int h = 0; h < nh; ++h)
                    if (j >= L - 3 || i == 1)
                        bias[s->bias == 2 ? (((size_t)h * nb + b) * L + i) * L + j
                                          : (((size_t)b * L + i) * L + j) * nh + h] = -60.f;
    tf_attn_args a;
    memset(&a, 0, sizeof a);
    a.nb = nb, a.no = no, a.nh = nh, a.L = L, a.d = d, a.scale = (float)scale, a.t = t;
    if (s->bias == 2)
        a.bias_sb = (long)L * L, a.bias_si = L, a.bias_sj = 1, a.bias_sh = (long)nb * L * L;
    else
        a.bias_sb = (long)L * L * nh, a.bias_si = (long)L * nh, a.bias_sj = nh, a.bias_sh = 1;
    tf_attn_view *views[] = {&a.q, &a.k, &a.v, &a.out, &a.dq, &a.dk, &a.dv, &a.dout};
    const float *src[] = {q, k, v, NULL, NULL, NULL, NULL, dout};
    for (int i = 0; i < 8; ++i) {
        views[i]->p = src[i] ? put_t(be, src[i], n, t) : b_nan(be, n);
        views[i]->sb = (long)no * L * sl, views[i]->so = (long)L * sl, views[i]->sl = sl;
    }
    a.bias = s->bias ? put_t(be, bias, nbias, t) : NULL;
    a.dbias = s->bias ? b_nan(be, nbias) : NULL;
    a.lse = b_nan(be, nrow), a.work = b_nan(be, nrow);
    be.ops->attn_fwd(be.be, &a);
    be.ops->attn_bwd(be.be, &a);
    float *out = malloc(4 * n), *g[4], *lse = malloc(4 * nrow);
    get_t(be, out, a.out.p, n, t);
    for (int i = 0; i < 3; ++i) g[i] = malloc(4 * n), get_t(be, g[i], views[4 + i]->p, n, t);
    g[3] = malloc(4 * nbias);
    if (s->bias) get_t(be, g[3], a.dbias, nbias, t);
    b_get(be, lse, a.lse, nrow);

    /* the reference in double, with magnitudes */
    double *ro = calloc(n, 8), *mo = calloc(n, 8), *rq = calloc(n, 8), *mq = calloc(n, 8);
    double *rk = calloc(n, 8), *mk = calloc(n, 8), *rv = calloc(n, 8), *mv = calloc(n, 8);
    double *rb = calloc(nbias, 8), *mb = calloc(nbias, 8), *rl = calloc(nrow, 8);
    double *P = malloc(8 * (size_t)L * L), *E = malloc(8 * (size_t)L * L), *dS = malloc(8 * (size_t)L * L);
    for (int b = 0; b < nb; ++b)
        for (int o = 0; o < no; ++o)
            for (int h = 0; h < nh; ++h) {
                const size_t base = (size_t)b * no * L * sl + (size_t)o * L * sl + (size_t)h * d;
                const size_t rowb = (((size_t)b * no + o) * nh + h) * L;
#define AT(x, l, c) ((x)[base + (size_t)(l) * sl + (c)])
#define BI(i, j) (size_t)(b * a.bias_sb + h * a.bias_sh + (i) * a.bias_si + (j) * a.bias_sj)
                for (int i = 0; i < L; ++i) {
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j < L; ++j) {
                        double dot = 0.0;
                        for (int c = 0; c < d; ++c) dot += (double)AT(q, i, c) * AT(k, j, c);
                        P[(size_t)i * L + j] = scale * dot + bias[BI(i, j)];
                        if (P[(size_t)i * L + j] > mx) mx = P[(size_t)i * L + j];
                    }
                    for (int j = 0; j < L; ++j) sum += exp(P[(size_t)i * L + j] - mx);
                    for (int j = 0; j < L; ++j) P[(size_t)i * L + j] = exp(P[(size_t)i * L + j] - mx) / sum;
                    rl[rowb + i] = mx + log(sum);
                    double D = 0.0;
                    for (int c = 0; c < d; ++c) {
                        double acc = 0.0, m = 0.0;
                        for (int j = 0; j < L; ++j) {
                            acc += P[(size_t)i * L + j] * AT(v, j, c);
                            m += P[(size_t)i * L + j] * fabs(AT(v, j, c));
                        }
                        AT(ro, i, c) = acc, AT(mo, i, c) = m;
                        D += (double)AT(dout, i, c) * AT(out, i, c); /* the kernel's out */
                    }
                    for (int j = 0; j < L; ++j) {
                        double dp = 0.0;
                        for (int c = 0; c < d; ++c) dp += (double)AT(dout, i, c) * AT(v, j, c);
                        const double p = P[(size_t)i * L + j];
                        dS[(size_t)i * L + j] = p * (dp - D);
                        E[(size_t)i * L + j] = p * (fabs(dp) + fabs(D));
                        rb[BI(i, j)] += dS[(size_t)i * L + j];
                        mb[BI(i, j)] += E[(size_t)i * L + j];
                    }
                }
                for (int i = 0; i < L; ++i)
                    for (int c = 0; c < d; ++c)
                        for (int j = 0; j < L; ++j) {
                            const double ds = dS[(size_t)i * L + j], e = E[(size_t)i * L + j];
                            const double p = P[(size_t)i * L + j];
                            AT(rq, i, c) += scale * ds * AT(k, j, c);
                            AT(mq, i, c) += scale * e * fabs(AT(k, j, c));
                            AT(rk, j, c) += scale * ds * AT(q, i, c);
                            AT(mk, j, c) += scale * e * fabs(AT(q, i, c));
                            AT(rv, j, c) += p * AT(dout, i, c);
                            AT(mv, j, c) += p * fabs(AT(dout, i, c));
                        }
#undef AT
#undef BI
            }
    char shape[112];
    snprintf(shape, sizeof shape, "%s nb%d no%d nh%d L%d d%d sl%d bias%d", route, nb, no, nh, L, d,
             sl, s->bias);
    check_bound("attn_fwd out", shape, t, out, ro, mo, n, sl, C, L * amax(v, n));
    {
        size_t bad = 0;
        for (size_t i = 0; i < nrow; ++i)
            if (!(fabs(lse[i] - rl[i]) <= (L + 16) * 0x1p-23 * (1.0 + fabs(rl[i])))) bad++;
        printf("%s attn_fwd lse %s %s: %zu of %zu past (L + 16) 2^-23 (1 + |lse|)\n",
               bad ? "FAIL" : "PASS", tf_dtype_name(t), shape, bad, nrow);
        g_fail += bad != 0;
    }
    check_bound("attn_bwd dq", shape, t, g[0], rq, mq, n, sl, C, scale * L * amax(k, n));
    check_bound("attn_bwd dk", shape, t, g[1], rk, mk, n, sl, C, scale * L * amax(q, n));
    check_bound("attn_bwd dv", shape, t, g[2], rv, mv, n, sl, C, L * amax(dout, n));
    if (s->bias) check_bound("attn_bwd dbias", shape, t, g[3], rb, mb, nbias, 0, 0, 0.0);
    for (int i = 0; i < 8; ++i) b_free(be, views[i]->p);
    if (s->bias) b_free(be, (void *)a.bias), b_free(be, a.dbias);
    b_free(be, a.lse), b_free(be, a.work);
    free(q), free(k), free(v), free(dout), free(bias), free(out), free(lse);
    for (int i = 0; i < 4; ++i) free(g[i]);
    free(ro), free(mo), free(rq), free(mq), free(rk), free(mk), free(rv), free(mv);
    free(rb), free(mb), free(rl), free(P), free(E), free(dS);
}

static void test_half_flash(void **state)
{
    (void)state;
    g_fail = 0;
    /* nb, no, nh, L, d, sl, bias: two key tiles and a part (L 131), one part
     * tile (37), scalar loads (sl not a multiple of 8), the MSA row shape (d
     * 16), no bias (the triangle attentions) below and above L 128; the
     * head-major bias by 16-byte tiles (L 64, 120: the one-block backward)
     * and element by element (L 37, 131); no 11: the bias gradient's warps
     * each take o three times (their copy buffers reused) */
    const shape_t shapes[] = {
        {2, 3, 2, 37, 16, 32, 1}, {1, 2, 2, 131, 32, 64, 1}, {2, 2, 2, 70, 32, 66, 1},
        {1, 5, 4, 64, 16, 64, 1}, {1, 3, 2, 96, 32, 64, 0},  {1, 2, 1, 150, 32, 32, 0},
        {2, 3, 2, 37, 16, 32, 2}, {1, 2, 2, 131, 32, 64, 2}, {2, 3, 4, 64, 16, 64, 2},
        {2, 3, 2, 120, 16, 64, 2}, {1, 11, 2, 64, 16, 32, 2},
    };
    const tf_gpu_plan k6 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K6);
    const tf_gpu_plan k5 = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K5);
    bk b6 = bk_create(3, 0, &k6, NULL), b5 = bk_create(3, 0, &k5, NULL);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; ++s)
        for (int k = 0; k < 2; ++k) {
            run_case(b6, "attn=k6", &shapes[s], k ? TF_F16 : TF_BF16);
            run_case(b5, "attn=k5", &shapes[s], k ? TF_F16 : TF_BF16);
            run_case(g_cu3, "default", &shapes[s], k ? TF_F16 : TF_BF16);
        }
    tf_cuda_backend_destroy(b6.be);
    tf_cuda_backend_destroy(b5.be);
    done();
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_half_flash)};
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_flash", tests, sizeof tests / sizeof *tests);
}
