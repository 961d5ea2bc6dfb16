/* The residual streams' gradient copies (src/model/exec.h tf_stream_copy):
 * in half precision the LayerNorm backwards also store the stream gradient
 * they write rounded to the activations' type (op_list.h layernorm_bwd
 * dxh), and the next module's tf_x_stream_grad takes that copy instead of
 * converting the gradient again.
 *  - Training steps with the copies give the losses, parameters and
 *    gradients of the steps without them (caps.ln_stream_copy 0: every
 *    stream gradient converted), bit for bit, in bf16 and fp16, at levels 1
 *    and 3, with chunked pair modules and with a late weight-gradient lane
 *    (two copies a stream), with fewer converts, and with the arena's plan
 *    exact.
 *  - In the executor: a LayerNorm's copy is what tf_x_stream_grad gives (no
 *    convert issued), and any later write into the stream gradient (a GEMM
 *    accumulating into it, an elementwise op, a write into a part of it)
 *    drops it, so that the next call converts the new values; a write into
 *    the other stream's gradient does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "late_lane.h"
#include "model/exec.h"
#include "model_testutil.h"
#include "testutil.h"
#include "tinyfold.h"
#include "train/trainer.h"

/* ---- the convert ops issued, counted in front of the backend ---- */
static struct {
    const tf_ops *inner;
    tf_ops ops;
    long converts;
} K;

static void count_convert(tf_backend *be, void *dst, tf_dtype dt, const void *src, tf_dtype st,
                          long n) {
    K.converts++;
    K.inner->convert(be, dst, dt, src, st, n);
}

static const tf_ops *count_wrap(const tf_ops *inner) {
    K.inner = inner;
    K.ops = *inner;
    K.ops.convert = count_convert;
    return &K.ops;
}

/* ---- training steps with and without the copies ---- */
typedef struct {
    const char *name;
    tf_precision prec;
    tf_impl impl;
    int chunk, lane, blocks;
} variant;

typedef struct {
    float loss[3];
    float *params, *grad;
    long converts; /* in the steps */
    size_t arena, arena_peak;
} result;

static void config_of(const variant *v, tf_config *c) {
    tf_config_default(c);
    c->batch = 2;
    c->seq_len = 7;
    c->n_seqs = 3;
    c->n_blocks = v->blocks;
    c->msa_dim = 16;
    c->pair_dim = 12;
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
    c->precision = v->prec;
    c->impl = v->impl;
    c->fusion = tf_fusion_for_impl(v->impl);
    c->chunk_size = v->chunk;
}

static tf_trainer *make(const tf_config *c, const variant *v, int copies) {
    tf_backend_opts bo = {.threads = c->threads, .kernel_level = (int)c->impl};
    tf_backend_kind kind = TF_BACKEND_CPU;
    tf_backend *be;
    const tf_ops *ops;
    tf_backend_caps caps;
    char err[512];
    if (tf_backend_create(&kind, &bo, &be, &ops, &caps, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(caps.ln_stream_copy, 1);
    caps.ln_stream_copy = copies;
    if (v->lane) ops = late_lane_wrap(ops, &caps);
    ops = count_wrap(ops);
    tf_trainer *t;
    if (tf_trainer_create_on(&t, c, be, ops, &caps, err, sizeof err) != TF_OK)
        fail_msg("create: %s", err);
    float *w = tf_test_weights(c, 7);
    tf_trainer_set_params(t, w);
    free(w);
    return t;
}

/* three training steps, then one gradient */
static result run(const variant *v, int copies) {
    tf_config c;
    config_of(v, &c);
    late_lane_reset(-1);
    tf_trainer *t = make(&c, v, copies);
    const long nz = (long)c.batch * c.seq_len * c.seq_len;
    const size_t np = tf_param_count_floats(&c);
    tf_batch b = {c.batch, c.n_seqs, c.seq_len,
                  malloc(sizeof(int32_t) * c.batch * c.n_seqs * c.seq_len),
                  malloc(sizeof(float) * nz * 65), malloc(sizeof(float) * nz)};
    result r = {{0}, malloc(np * sizeof(float)), malloc(np * sizeof(float)), 0, 0, 0};
    K.converts = 0;
    for (int s = 0; s < 3; s++) {
        tf_data_batch(c.seed, s, &b);
        tf_step_stats st;
        assert_int_equal(tf_trainer_step_batch(t, &b, &st), TF_OK);
        r.loss[s] = st.loss;
    }
    r.converts = K.converts;
    float loss;
    assert_int_equal(tf_trainer_grad(t, &b, &loss, NULL), TF_OK);
    tf_trainer_get_params(t, r.params);
    tf_trainer_get_grads(t, r.grad);
    r.arena = tf_trainer_arena_bytes(t);
    r.arena_peak = tf_trainer_arena_peak(t);
    if (v->lane) assert_int_equal(L.left_at_sync, 0);
    free(b.tokens), free(b.pair), free(b.target);
    tf_trainer_destroy(t);
    return r;
}

static void test_steps_same_bits(void **state) {
    (void)state;
    static const variant vs[] = {
        {"bf16 v3", TF_PREC_BF16, TF_IMPL_V3, 0, 0, 3},
        {"fp16 v3", TF_PREC_FP16, TF_IMPL_V3, 0, 0, 2},
        {"bf16 v1", TF_PREC_BF16, TF_IMPL_V1, 0, 0, 2},
        {"bf16 v3 chunked", TF_PREC_BF16, TF_IMPL_V3, 3, 0, 2},
        {"bf16 v3 late lane", TF_PREC_BF16, TF_IMPL_V3, 0, 1, 3},
        {"fp16 v3 late lane", TF_PREC_FP16, TF_IMPL_V3, 0, 1, 2},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        const variant *v = &vs[i];
        tf_config c;
        config_of(v, &c);
        const size_t np = tf_param_count_floats(&c);
        result ref = run(v, 0), got = run(v, 1);
        printf("%s: %ld converts in 3 steps with the copies, %ld without\n", v->name,
               got.converts, ref.converts);
        if (memcmp(got.loss, ref.loss, sizeof got.loss))
            fail_msg("%s: losses %.9g %.9g %.9g, without the copies %.9g %.9g %.9g", v->name,
                     got.loss[0], got.loss[1], got.loss[2], ref.loss[0], ref.loss[1],
                     ref.loss[2]);
        if (!tf_test_bits_equal(got.params, ref.params, np))
            fail_msg("%s: the parameters differ from the steps without the copies", v->name);
        if (!tf_test_bits_equal(got.grad, ref.grad, np))
            fail_msg("%s: the gradients differ from the steps without the copies", v->name);
        if (!(got.converts < ref.converts))
            fail_msg("%s: %ld converts, not fewer than %ld", v->name, got.converts,
                     ref.converts);
        /* the plan is exact: the steps reach the planned arena, not more */
        if (got.arena_peak != got.arena || ref.arena_peak != ref.arena)
            fail_msg("%s: arena peak %zu / %zu planned (without the copies %zu / %zu)", v->name,
                     got.arena_peak, got.arena, ref.arena_peak, ref.arena);
        free(ref.params), free(ref.grad), free(got.params), free(got.grad);
    }
}

/* fp32: no copies, no convert, the same arena and bits */
static void test_fp32_untouched(void **state) {
    (void)state;
    const variant v = {"fp32 v3", TF_PREC_FP32, TF_IMPL_V3, 0, 0, 2};
    tf_config c;
    config_of(&v, &c);
    const size_t np = tf_param_count_floats(&c);
    result ref = run(&v, 0), got = run(&v, 1);
    assert_int_equal(got.converts, 0);
    assert_int_equal(ref.converts, 0);
    assert_memory_equal(got.loss, ref.loss, sizeof got.loss);
    assert_true(tf_test_bits_equal(got.grad, ref.grad, np));
    assert_int_equal(got.arena, ref.arena);
    free(ref.params), free(ref.grad), free(got.params), free(got.grad);
}

/* ---- the executor's records ---- */
typedef struct {
    tf_backend *be;
    tf_arena arena;
    tf_exec ex;
    float *dz, *dm, *x, *w, *dw, *g, *dg, *stats;
    void *dout;
} bench;

enum { ROWS = 96, C = 8, NZ = ROWS * C, NM = 40 };

static void bench_open(bench *b) {
    const tf_ops *ops;
    memset(b, 0, sizeof *b);
    assert_int_equal(tf_test_cpu_backend(&b->be, &ops), 0);
    b->arena.cap = (size_t)1 << 20;
    b->arena.base = malloc(b->arena.cap);
    tf_exec *ex = &b->ex;
    ex->ops = count_wrap(ops);
    ex->be = b->be;
    ex->arena = &b->arena;
    ex->at = TF_BF16;
    ex->level = 3;
    ex->stream_copies = 1;
    b->dz = tf_alloc_act(ex, NZ);
    b->dm = tf_alloc_act(ex, NM);
    b->x = tf_alloc_act(ex, NZ);
    b->w = tf_alloc_act(ex, C * C);
    b->dw = tf_alloc_act(ex, C * C);
    b->g = tf_alloc_act(ex, 2 * C);
    b->dg = tf_alloc_act(ex, 2 * C);
    b->stats = tf_alloc_act(ex, 2 * ROWS);
    b->dout = tf_alloc_at(ex, NZ);
    tf_test_fill_normal(b->dz, NZ, 0, 1, 1);
    tf_test_fill_normal(b->dm, NM, 0, 1, 2);
    tf_test_fill_normal(b->x, NZ, 1, 2, 3);
    tf_test_fill_normal(b->w, C * C, 0, 0.5f, 4);
    tf_test_fill_uniform(b->g, 2 * C, 0.5f, 1.5f, 5);
    memset(b->dg, 0, 2 * C * sizeof(float));
    memset(b->dw, 0, C * C * sizeof(float));
    float *d32 = tf_test_falloc(NZ);
    tf_test_fill_normal(d32, NZ, 0, 1, 6);
    tf_dtype_from_f32(b->dout, TF_BF16, d32, NZ);
    free(d32);
    void *y = tf_alloc_at(ex, NZ);
    tf_x_layernorm_fwd(ex, y, b->stats, b->stats + ROWS, b->x, TF_F32, b->g, b->g + C, ROWS, C);
    tf_x_stream_copies_begin(ex, b->dz, NZ, b->dm, NM);
    assert_int_equal(ex->nsc, 2);
}

static void bench_close(bench *b) {
    tf_x_stream_copies_end(&b->ex);
    free(b->arena.base);
    tf_cpu_backend_destroy(b->be);
}

/* the LayerNorm backward accumulating into rows [r0, r0 + nr) of dz */
static void ln_into_dz(bench *b, long r0, long nr) {
    tf_x_layernorm_bwd(&b->ex, b->dz + r0 * C, TF_F32, b->dg, b->dg + C,
                       tf_at(&b->ex, b->dout, r0 * C), b->x + r0 * C, b->stats + r0,
                       b->stats + ROWS + r0, b->g, nr, C, 1);
}

/* tf_x_stream_grad(p, n): what it gives must be p's current values rounded,
 * and it must have issued `converts` converts */
static void expect_grad(bench *b, const char *what, const float *p, long n, long converts) {
    const size_t mark = tf_arena_mark(b->ex.arena);
    K.converts = 0;
    const uint16_t *h = tf_x_stream_grad(&b->ex, p, n);
    uint16_t *want = malloc((size_t)n * sizeof *want);
    tf_dtype_from_f32(want, TF_BF16, p, (size_t)n);
    if (memcmp(h, want, (size_t)n * sizeof *want))
        fail_msg("%s: the stream gradient's copy is not its current values rounded", what);
    if (K.converts != converts)
        fail_msg("%s: %ld converts, expected %ld", what, K.converts, converts);
    free(want);
    tf_arena_release(b->ex.arena, mark);
}

static void test_record(void **state) {
    (void)state;
    bench b;
    bench_open(&b);
    tf_exec *ex = &b.ex;
    expect_grad(&b, "before any LayerNorm", b.dz, NZ, 1);
    ln_into_dz(&b, 0, ROWS);
    expect_grad(&b, "after the LayerNorm", b.dz, NZ, 0);
    expect_grad(&b, "a part of its range", b.dz + 5 * C, 20 * C, 0);
    /* a write into the MSA's gradient leaves the pair's record */
    tf_x_zero(ex, b.dm, NM);
    expect_grad(&b, "after a write into dm", b.dz, NZ, 0);

    /* a GEMM accumulating into dz (the row attention's pair bias, fp32) */
    tf_dtype at = tf_exec_fp32_begin(ex);
    tf_linear_bwd(ex, b.dz, b.dw, b.x, b.x, b.w, ROWS, C, C, 1);
    tf_exec_fp32_end(ex, at);
    expect_grad(&b, "after a GEMM into dz", b.dz, NZ, 1);

    /* an elementwise op into dz */
    ln_into_dz(&b, 0, ROWS);
    expect_grad(&b, "after the second LayerNorm", b.dz, NZ, 0);
    tf_x_add(ex, b.dz, b.dz, b.x, NZ);
    expect_grad(&b, "after an add into dz", b.dz, NZ, 1);

    /* a write into a few elements in the middle */
    ln_into_dz(&b, 0, ROWS);
    tf_x_zero(ex, b.dz + 50 * C + 3, 2);
    expect_grad(&b, "after a write into a part of dz", b.dz, NZ, 1);
    expect_grad(&b, "the rows before that part", b.dz, 40 * C, 1);

    /* chunks of one module join into one record */
    ln_into_dz(&b, 0, 32);
    ln_into_dz(&b, 32, 64);
    expect_grad(&b, "two chunks", b.dz, NZ, 0);

    /* a LayerNorm outside the tracked streams asks for no copy */
    float *other = tf_alloc_act(ex, NZ);
    tf_x_layernorm_bwd(ex, other, TF_F32, b.dg, b.dg + C, b.dout, b.x, b.stats, b.stats + ROWS,
                       b.g, ROWS, C, 0);
    expect_grad(&b, "another fp32 tensor", other, NZ, 1);
    expect_grad(&b, "dz after it", b.dz, NZ, 0);

    /* the end of the backward: nothing is tracked */
    tf_x_stream_copies_end(ex);
    expect_grad(&b, "after the end", b.dz, NZ, 1);
    bench_close(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_fp32_untouched),
        cmocka_unit_test(test_steps_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
