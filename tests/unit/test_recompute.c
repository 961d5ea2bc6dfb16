/* --recompute blocks and modules: the backward runs the forward again from the
 * kept inputs, with the same ops on the same bits, so the loss, predictions and
 * every parameter gradient are bit-for-bit those of --recompute none, on every
 * level. The planned arena must shrink (the test fails if nothing is freed).
 * --chunk-size K: the same comparison per chunk size, within fp32 rounding
 * (assert_chunked_close says why). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_testutil.h"
#include "tinyfold.h"
#include "train/memplan.h"

typedef tf_test_grads result;

static void odd_config(tf_config *c, tf_impl impl) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 9;
    c->n_seqs = 5;
    c->n_blocks = 2;
    c->msa_dim = 12;  /* head dim 3 */
    c->pair_dim = 20; /* head dim 5 */
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
    c->impl = impl;
    c->fusion = tf_fusion_for_impl(impl);
}

static result run(const tf_config *c) {
    char err[512];
    result r;
    /* twice: the second step must not depend on what the first left behind */
    if (tf_test_grads_run(c, 2, &r, err, sizeof err)) fail_msg("%s", err);
    /* the plan is exact: the steps reach the planned arena, not less */
    if (r.arena_peak != r.arena)
        fail_msg("recompute %d v%d: the steps' arena peak %zu, planned %zu", (int)c->recompute,
                 (int)c->impl, r.arena_peak, r.arena);
    size_t planned = 0;
    assert_int_equal(tf_trainer_plan(c, &planned, err, sizeof err), TF_OK);
    assert_true(planned > r.arena);
    return r;
}

static void assert_same_bits(const tf_config *c, const result *ref, const result *x,
                             const char *label) {
    size_t np = tf_param_count_floats(c);
    long nz = (long)c->batch * c->seq_len * c->seq_len;
    if (memcmp(&ref->loss, &x->loss, sizeof x->loss))
        fail_msg("%s v%d: loss %.9g vs %.9g", label, (int)c->impl, (double)x->loss,
                 (double)ref->loss);
    if (memcmp(ref->pred, x->pred, sizeof(float) * (size_t)nz))
        fail_msg("%s v%d: predictions differ", label, (int)c->impl);
    for (size_t i = 0; i < np; i++)
        if (memcmp(&ref->grad[i], &x->grad[i], sizeof(float)))
            fail_msg("%s v%d: gradient float %zu: %.9g vs %.9g", label, (int)c->impl, i,
                     (double)x->grad[i], (double)ref->grad[i]);
}

static void test_recompute_bits(void **s) {
    (void)s;
    for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
        tf_config c;
        odd_config(&c, (tf_impl)lv);
        result ref = run(&c);
        static const tf_recompute modes[2] = {TF_RECOMPUTE_BLOCKS, TF_RECOMPUTE_MODULES};
        static const char *names[2] = {"blocks", "modules"};
        size_t last = ref.arena;
        for (int m = 0; m < 2; m++) {
            c.recompute = modes[m];
            result x = run(&c);
            assert_same_bits(&c, &ref, &x, names[m]);
            if (!(x.arena < last))
                fail_msg("%s v%d: arena %zu not below %zu", names[m], lv, x.arena, last);
            last = x.arena;
            tf_test_grads_free(&x);
        }
        tf_test_grads_free(&ref);
    }
}

/* --chunk-size: every position is computed by the same ops from the same
 * inputs as unchunked, but the chunks' GEMMs have fewer rows, and whether a
 * row's dot products keep their order whatever the row count is the BLAS's
 * choice (OpenBLAS picks its kernels by shape); the chunked modules'
 * parameter gradients are sums over the B*N*N pair rows taken chunk by
 * chunk. So the loss, the predictions and the gradients are within fp32
 * rounding of unchunked: two orders of a sum of n terms differ by at most
 * 2 gamma_n sum|t| (gamma_n = n u / (1 - n u), u = 2^-24); with n the pair
 * rows, the longest sum of the step, and sum|t| ~ |g| (no cancellation to
 * speak of at these weights), each tensor's relative L2 difference is at
 * most 2 gamma_n. The chunked outer product mean's other reordered sum,
 * da = A (dOuter^T + dOuter) / S taken chunk by chunk, has 2 N co terms per
 * element: no longer than the pair rows while 2 co <= B N (both tests
 * below: 1472 <= 1587, 2048 <= 2048). A missed, doubled or misplaced chunk
 * is off by O(1). */
static void assert_chunked_close(const tf_config *c, const result *ref, const result *x) {
    const long nz = (long)c->batch * c->seq_len * c->seq_len;
    const double u = 1.0 / (1 << 24), bound = 2 * (double)nz * u / (1.0 - (double)nz * u);
    char label[64];
    snprintf(label, sizeof label, "chunk %d recompute %d v%d", c->chunk_size, (int)c->recompute,
             (int)c->impl);
    const double dl = fabs((double)x->loss - ref->loss) / fabs((double)ref->loss);
    if (!(dl <= bound)) fail_msg("%s: loss %.9g vs %.9g", label, (double)x->loss, (double)ref->loss);
    const double dp = tf_test_rel_l2(x->pred, ref->pred, (size_t)nz);
    if (!(dp <= bound)) fail_msg("%s: predictions off by %.3g (bound %.3g)", label, dp, bound);
    const size_t nt = tf_param_count_tensors(c);
    tf_param_info *t = calloc(nt, sizeof *t);
    tf_param_table(c, t);
    for (size_t i = 0; i < nt; i++) {
        if (!t[i].trainable) continue;
        const double d = tf_test_rel_l2(x->grad + t[i].offset, ref->grad + t[i].offset,
                                        t[i].count);
        if (!(d <= bound))
            fail_msg("%s: %s's gradient off by %.3g relative (bound %.3g)", label, t[i].name, d,
                     bound);
    }
    free(t);
}

static const tf_recompute none_modules[2] = {TF_RECOMPUTE_NONE, TF_RECOMPUTE_MODULES};
static const tf_recompute blocks_only[1] = {TF_RECOMPUTE_BLOCKS};

/* every level, each of the recompute modes, each chunk size against none */
static void chunk_cases(tf_config *c, const int *ks, int nks, int must_shrink,
                        const tf_recompute *modes, int nmodes) {
    for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
        c->impl = (tf_impl)lv;
        c->fusion = tf_fusion_for_impl((tf_impl)lv);
        for (int m = 0; m < nmodes; m++) {
            c->recompute = modes[m];
            c->chunk_size = 0;
            result ref = run(c);
            for (int i = 0; i < nks; i++) {
                c->chunk_size = ks[i];
                result x = run(c);
                assert_chunked_close(c, &ref, &x);
                if (must_shrink && lv == TF_IMPL_V3 && modes[m] == TF_RECOMPUTE_NONE &&
                    !(x.arena < ref.arena))
                    fail_msg("chunk %d v%d: arena %zu not below %zu", ks[i], lv, x.arena,
                             ref.arena);
                tf_test_grads_free(&x);
            }
            tf_test_grads_free(&ref);
        }
    }
    c->chunk_size = 0;
}

/* an odd shape: chunks that do not divide N (5 into 23), one row, all of N */
static void test_chunk_odd(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    c.batch = 3;
    c.seq_len = 23;
    static const int ks[3] = {5, 1, 23};
    chunk_cases(&c, ks, 3, 0, none_modules, 2);
    chunk_cases(&c, ks, 1, 0, blocks_only, 1); /* and blocks, at K 5 */
}

/* the default model widths (one block) on a pair that dominates; at level 3
 * with --recompute none the arena shrinks (the chunked modules keep
 * nothing). With modules it need not: the outer product mean's weight-first
 * T ([B, S, co, N, C], eight pair-sized buffers) is the peak, and it is not
 * chunked. B 2, N 32, S 8 (the small problem's N / 2 and S / 2, half its
 * batch) with K = N / 4 as K 16 is of N 64: the same chunking at an eighth of
 * the pair rows and a sixteenth of the triangle products; the smallest B N
 * the bound above allows (2 co = 64). */
static void test_chunk_small(void **s) {
    (void)s;
    tf_config c;
    tf_config_default(&c);
    c.backend = TF_BACKEND_CPU;
    c.threads = 2;
    c.n_blocks = 1;
    c.batch = 2;
    c.seq_len = 32;
    c.n_seqs = 8;
    static const int ks[1] = {8};
    chunk_cases(&c, ks, 1, 1, none_modules, 2);
}

/* The advice of a refusal and --memory-budget's choice follow the plans. */
static void test_memplan(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    char err[256], msg[256];
    size_t plan[3];
    for (int m = 0; m < 3; m++) {
        tf_config x = c;
        x.recompute = (tf_recompute)m;
        assert_int_equal(tf_trainer_plan(&x, &plan[m], err, sizeof err), TF_OK);
    }
    assert_true(plan[2] < plan[1] && plan[1] < plan[0]);
    tf_memplan_suggest(&c, (double)plan[1], msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute blocks"));
    tf_memplan_suggest(&c, (double)plan[1] - 1, msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute modules"));
    tf_memplan_suggest(&c, (double)plan[2] - 1, msg, sizeof msg);
    assert_non_null(strstr(msg, "the least is"));
    tf_memplan_suggest(&c, -1.0, msg, sizeof msg);
    assert_non_null(strstr(msg, "--recompute blocks needs"));
    assert_non_null(strstr(msg, "--recompute modules needs"));
    assert_non_null(strstr(msg, "--recompute modules --chunk-size 1 needs")); /* N 9: 8 / 8 */
    size_t b = 0;
    tf_config x = c;
    assert_int_equal(tf_memplan_choose(&x, (double)plan[0], &b, err, sizeof err), TF_OK);
    assert_int_equal(x.recompute, TF_RECOMPUTE_NONE);
    assert_int_equal(tf_memplan_choose(&x, (double)plan[0] - 1, &b, err, sizeof err), TF_OK);
    assert_int_equal(x.recompute, TF_RECOMPUTE_BLOCKS);
    assert_true(b == plan[1]);
    assert_int_equal(tf_memplan_choose(&x, 1.0, &b, err, sizeof err), TF_ERR_NOMEM);
    size_t again = 0; /* the least, with its setting */
    assert_int_equal(tf_trainer_plan(&x, &again, err, sizeof err), TF_OK);
    assert_true(again == b && b <= plan[2]);
}

/* Where the pair dominates, the chunk sizes come after modules, the largest
 * that fits first (then blocks with them); a chunk size given stays. */
static void test_memplan_chunk(void **s) {
    (void)s;
    tf_config c;
    odd_config(&c, TF_IMPL_V3);
    c.batch = 1;
    c.seq_len = 40;
    c.n_seqs = 2;
    c.n_blocks = 1;
    char err[256], msg[256];
    size_t mod = 0, k32 = 0, k16 = 0, b = 0;
    tf_config x = c;
    x.recompute = TF_RECOMPUTE_MODULES;
    assert_int_equal(tf_trainer_plan(&x, &mod, err, sizeof err), TF_OK);
    x.chunk_size = 32; /* the largest power of two below 40 */
    assert_int_equal(tf_trainer_plan(&x, &k32, err, sizeof err), TF_OK);
    x.chunk_size = 16;
    assert_int_equal(tf_trainer_plan(&x, &k16, err, sizeof err), TF_OK);
    if (!(k16 < k32 && k32 < mod)) fail_msg("plans: modules %zu, K32 %zu, K16 %zu", mod, k32, k16);
    tf_memplan_suggest(&c, (double)mod - 1, msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute modules --chunk-size 32:"));
    tf_memplan_suggest(&c, (double)k16, msg, sizeof msg);
    assert_non_null(strstr(msg, "fits with --recompute modules --chunk-size 16:"));
    x = c;
    assert_int_equal(tf_memplan_choose(&x, (double)k16, &b, err, sizeof err), TF_OK);
    assert_int_equal(x.recompute, TF_RECOMPUTE_MODULES);
    assert_int_equal(x.chunk_size, 16);
    assert_true(b == k16);
    tf_memplan_suggest(&c, 1.0, msg, sizeof msg);
    assert_non_null(strstr(msg, "the least is"));
    assert_non_null(strstr(msg, "--chunk-size"));
    x = c;
    x.chunk_size = 3;
    assert_int_equal(tf_memplan_choose(&x, 1.0, &b, err, sizeof err), TF_ERR_NOMEM);
    assert_int_equal(x.chunk_size, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recompute_bits),
        cmocka_unit_test(test_memplan),
        cmocka_unit_test(test_memplan_chunk),
        cmocka_unit_test(test_chunk_odd),
        cmocka_unit_test(test_chunk_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
