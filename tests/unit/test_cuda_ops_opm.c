/* CUDA backend against the CPU backend (cuda_testutil.c: the conventions,
 * the backends and the tolerances): the outer product mean's ops and the weight-gradient lane. */
#define _POSIX_C_SOURCE 200809L /* setenv: the emulator's own settings (HOSTEMU_*) */
#include "cuda_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- outer product mean backward (opm_bwd): each output sums 2 N co products
 * (of a and the pre-added pair of dop values, added the same way on both
 * sides), in another order: tol_sum(2 N co). Shapes: kernel2's float4 and
 * scalar paths (co % 4), two s chunks (S > 32), two p chunks (co > 32);
 * kernel3 (co 32) with 16 rows a block (S <= 16: the small problem's, and a
 * partial chunk at S 5), 32 (S 17, 32) and two chunks (S 40), N not a
 * multiple of its 8 warps ---- */
static void test_opm_bwd(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][4] = {{1, 3, 5, 8},   {2, 5, 7, 6},    {2, 16, 20, 32},
                                {1, 40, 9, 32}, {1, 3, 4, 36},   {4, 16, 64, 32},
                                {3, 5, 23, 32}, {2, 32, 24, 32}, {1, 17, 11, 32}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k) {
        const int B = sh[k][0], S = sh[k][1], N = sh[k][2], co = sh[k][3];
        const size_t na = (size_t)B * S * N * co, nd = (size_t)B * N * N * co * co;
        float *ha = rnd(na, 1.f, 91), *hd = rnd(nd, 1.f, 92), *res[3];
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *a = b_put(b, ha, na), *dop = b_put(b, hd, nd), *da = b_nan(b, na);
            b.ops->opm_bwd(b.be, da, dop, a, B, S, N, co, TF_F32);
            res[r] = tf_test_falloc(na);
            b_get(b, res[r], da, na);
            b_free(b, a), b_free(b, dop), b_free(b, da);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d S=%d N=%d co=%d", B, S, N, co);
        check("opm_bwd", shape, res[1], res[0], na, tol_sum(2.0 * N * co));
        check_same("opm_bwd", shape, res[1], res[2], na);
        for (int r = 0; r < 3; ++r) free(res[r]);
        free(ha), free(hd);
    }
    done();
}

/* ---- outer product mean's permuted product (opm_outer): each output sums S
 * products in another order than the CPU's: tol_sum(S). Shapes: kernel3
 * (co 32: one s chunk, two (S 40), N not a multiple of its 8 j), kernel1
 * (co 8, 6, 36) ---- */
static void test_opm_outer(void **state)
{
    (void)state;
    g_fail = 0;
    static const int sh[][4] = {{1, 3, 5, 8},    {2, 5, 7, 6},   {1, 3, 4, 36}, {2, 16, 20, 32},
                                {1, 40, 9, 32},  {3, 5, 23, 32}, {4, 16, 64, 32}};
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; ++k) {
        const int B = sh[k][0], S = sh[k][1], N = sh[k][2], co = sh[k][3];
        const size_t na = (size_t)B * S * N * co, no = (size_t)B * N * N * co * co;
        float *ha = rnd(na, 1.f, 93), *res[3];
        for (int r = 0; r < 3; ++r) {
            const bk b = r == 0 ? g_cpu : g_cu3;
            float *a = b_put(b, ha, na), *o = b_nan(b, no);
            b.ops->opm_outer(b.be, o, a, B, S, N, co, TF_F32);
            res[r] = tf_test_falloc(no);
            b_get(b, res[r], o, no);
            b_free(b, a), b_free(b, o);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d S=%d N=%d co=%d", B, S, N, co);
        check("opm_outer", shape, res[1], res[0], no, tol_sum((double)S));
        check_same("opm_outer", shape, res[1], res[2], no);
        for (int r = 0; r < 3; ++r) free(res[r]);
        free(ha);
    }
    done();
}

/* ---- the weight-gradient lane (ops wgrad_*, cuda_wgrad.cu) ----
 * One step: a weight gradient w2 += dy^T x on the lane, beside it on the main
 * queue y = x w1^T, then the wait and dy halved (what a module's backward does
 * after the wait: overwrite what the lane read). Captured and replayed twice it
 * must give the bits of the same ops issued on the main queue alone, also
 * with the lane held back 2 ms a GEMM (the plan's wgrad_delay_us): without the
 * wait the halving would come first. A capture that leaves the lane unjoined
 * fails with one line instead of giving a graph. fp32 (our wide split) and
 * tf32 (cuBLASLt's split K). */
#define LK 4096
#define LMN 128
typedef struct {
    bk b;
    float *x, *dy, *w1, *w2, *y;
    int wgrad, wait;
} lstate;

static void lane_step(void *arg)
{
    lstate *s = arg;
    const tf_ops *o = s->b.ops;
    tf_gemm_args g = {1, 0, LMN, LMN, LK, 1.f, 1.f, s->dy, LMN, 0, s->x, LMN, 0, s->w2, LMN, 0, 1,
                      TF_EPI_NONE, NULL, NULL, s->wgrad, TF_F32, TF_F32};
    o->gemm(s->b.be, &g, "lane_dw");
    const long t = o->wgrad_mark(s->b.be);
    tf_gemm_args h = {0, 1, LK, LMN, LMN, 1.f, 0.f, s->x, LMN, 0, s->w1, LMN, 0, s->y, LMN, 0, 1,
                      TF_EPI_NONE, NULL, NULL, 0, TF_F32, TF_F32};
    o->gemm(s->b.be, &h, "lane_main");
    if (s->wait) o->wgrad_wait(s->b.be, t);
    o->scale(s->b.be, s->dy, s->dy, 0.5f, (long)LK * LMN, TF_F32);
}

static void lane_init(lstate *s, bk b, int wgrad, int wait)
{
    float *h = rnd((size_t)LK * LMN * 2 + LMN * LMN * 2, 1.f, 121);
    s->b = b, s->wgrad = wgrad, s->wait = wait;
    s->x = b_put(b, h, (size_t)LK * LMN), s->dy = b_put(b, h + (size_t)LK * LMN, (size_t)LK * LMN);
    s->w1 = b_put(b, h + (size_t)2 * LK * LMN, LMN * LMN);
    s->w2 = b_put(b, h + (size_t)2 * LK * LMN + LMN * LMN, LMN * LMN);
    s->y = b_nan(b, (size_t)LK * LMN);
    free(h);
}

static void lane_free(lstate *s)
{
    float *bufs[] = {s->x, s->dy, s->w1, s->w2, s->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) b_free(s->b, bufs[i]);
}

static void test_wgrad_lane(void **state)
{
    (void)state;
    g_fail = 0;
    static float w_ref[LMN * LMN], w_got[LMN * LMN], y_ref[LK * LMN], y_got[LK * LMN];
    for (int prec = 0; prec <= 1; ++prec)
        for (int delay = 0; delay <= 1; ++delay) {
            tf_backend_opts o;
            char err[256], what[64];
            memset(&o, 0, sizeof o);
            o.kernel_level = 3, o.tf32 = prec;
            tf_gpu_plan held = plan_of(TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_AUTO);
            held.wgrad_delay_us = 2000;
            if (delay) o.gpu_plan = held;
            bk b;
            const int rc = tf_cuda_backend_create(&b.be, &b.ops, &o, err, sizeof err);
            if (rc) fail_msg("create: %s", err);
            assert_int_equal(b.ops->wgrad_enable(b.be), 0);
            lstate ref, s;
            lane_init(&ref, b, 0, 1); /* the main queue alone, issued directly */
            lane_step(&ref), lane_step(&ref);
            b_get(b, w_ref, ref.w2, LMN * LMN), b_get(b, y_ref, ref.y, (size_t)LK * LMN);
            lane_init(&s, b, 1, 1); /* on the lane, captured, replayed twice */
            void *ge = NULL;
            assert_int_equal(tf_cuda_graph_capture(b.be, lane_step, &s, &ge), 0);
            assert_int_equal(tf_cuda_graph_launch(b.be, ge), 0);
            assert_int_equal(tf_cuda_graph_launch(b.be, ge), 0);
            tf_cuda_graph_destroy(ge);
            b_get(b, w_got, s.w2, LMN * LMN), b_get(b, y_got, s.y, (size_t)LK * LMN);
            snprintf(what, sizeof what, "lane, graph, %s%s", prec ? "tf32" : "fp32",
                     delay ? ", held back 2 ms" : "");
            check_same(what, "dW", w_ref, w_got, LMN * LMN);
            check_same(what, "y", y_ref, y_got, (size_t)LK * LMN);
            lane_free(&s);
            lane_init(&s, b, 1, 1); /* on the lane, issued directly */
            lane_step(&s), lane_step(&s);
            b.ops->sync(b.be);
            b_get(b, w_got, s.w2, LMN * LMN);
            snprintf(what, sizeof what, "lane, eager, %s%s", prec ? "tf32" : "fp32",
                     delay ? ", held back 2 ms" : "");
            check_same(what, "dW", w_ref, w_got, LMN * LMN);
            lane_free(&s);
            lane_free(&ref);
            if (!delay) { /* a step that leaves the lane unjoined is refused */
                lane_init(&s, b, 1, 0);
                ge = NULL;
                const int bad = tf_cuda_graph_capture(b.be, lane_step, &s, &ge);
                if (!bad || ge) {
                    printf("FAIL lane: a capture with the lane unjoined gave a graph\n");
                    ++g_fail;
                    if (ge) tf_cuda_graph_destroy(ge);
                } else {
                    printf("PASS lane: a capture with the lane unjoined is refused (%s)\n",
                           prec ? "tf32" : "fp32");
                }
                lane_free(&s);
            }
            tf_cuda_backend_destroy(b.be);
        }
    done();
}


int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opm_bwd),
        cmocka_unit_test(test_opm_outer),
        cmocka_unit_test(test_wgrad_lane),
    };
    return tf_cuda_test_main(argc, argv, "test_cuda_ops_opm", tests, sizeof tests / sizeof *tests);
}
