/* Backend creation by kind, the op table's lifecycle entries and each
 * backend's capabilities (ops.h tf_backend_caps), and the trainer honouring
 * them. The CUDA cases run where a device is usable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "tinyfold.h"
#include "train/trainer.h"

static tf_backend *create(tf_backend_kind *kind, int level, int tf32, const tf_ops **ops,
                          tf_backend_caps *caps) {
    tf_backend_opts bo = {.threads = 2, .device = 0, .kernel_level = level, .tf32 = tf32};
    tf_backend *be = NULL;
    char err[512] = "";
    if (tf_backend_create(kind, &bo, &be, ops, caps, err, sizeof err)) fail_msg("%s", err);
    assert_non_null(be);
    return be;
}

/* what every backend's table has; graphs exactly where the caps say so */
static void check_table(const tf_ops *ops, const tf_backend_caps *k) {
    assert_non_null(ops->destroy);
    assert_non_null(ops->peak_bytes);
    assert_non_null(ops->describe);
    assert_non_null(ops->caps);
    assert_string_equal(ops->name, k->name);
    const int g = ops->graph_capture != NULL;
    assert_int_equal(g, k->graphs != 0);
    assert_int_equal(ops->graph_launch != NULL, g);
    assert_int_equal(ops->graph_destroy != NULL, g);
    assert_int_equal(ops->graph_captured_kernels != NULL, g);
    if (k->wgrad_lane) assert_non_null(ops->wgrad_enable);
    if (k->pipelined_phases) assert_non_null(ops->mark);
    if (k->stage_batches) assert_true(k->prefetch_batches);
}

static void test_cpu_caps(void **state) {
    (void)state;
    for (int level = 1; level <= 3; level++) {
        tf_backend_kind kind = TF_BACKEND_CPU;
        const tf_ops *ops;
        tf_backend_caps k;
        tf_backend *be = create(&kind, level, 0, &ops, &k);
        assert_int_equal(kind, TF_BACKEND_CPU);
        check_table(ops, &k);
        assert_string_equal(k.name, "cpu");
        assert_int_equal(k.device_memory, 0);
        /* the CPU's level 3: weight-first outer product mean, merged triangle GEMMs */
        assert_int_equal(k.opm_weight_first, level >= 3);
        assert_int_equal(k.trimul_merged, level >= 3);
        assert_int_equal(k.opm_bwd_op, 0);
        assert_int_equal(k.opm_outer_op, 0);
        assert_int_equal(k.wgrad_lane, 0);
        assert_int_equal(k.prefetch_batches + k.stage_batches + k.pipelined_phases + k.graphs, 0);
        assert_int_equal(k.max_head_dim, 0);
        /* peak_bytes: the high-water mark of alloc */
        const size_t p0 = ops->peak_bytes(be);
        void *p = NULL;
        assert_int_equal(ops->alloc(be, &p, 1000), 0);
        const size_t p1 = ops->peak_bytes(be);
        assert_true(p1 >= p0 + 1000);
        ops->free(be, p);
        assert_int_equal(ops->peak_bytes(be), p1);
        char desc[256] = "";
        ops->describe(be, desc, sizeof desc);
        assert_non_null(strstr(desc, "threads"));
        ops->destroy(be);
    }
}

static void test_create_by_kind(void **state) {
    (void)state;
    tf_backend_kind kind = TF_BACKEND_AUTO;
    const tf_ops *ops;
    tf_backend_caps k;
    char why[256];
    const int cuda = tf_cuda_backend_available(why, sizeof why);
    tf_backend *be = create(&kind, 3, 0, &ops, &k);
    assert_int_equal(kind, cuda ? TF_BACKEND_CUDA : TF_BACKEND_CPU);
    assert_string_equal(k.name, cuda ? "cuda" : "cpu");
    ops->destroy(be);
    if (!cuda) { /* asked for by name: refused with one line */
        tf_backend_opts bo = {.threads = 2, .device = 0, .kernel_level = 3, .tf32 = 0};
        char err[512] = "";
        kind = TF_BACKEND_CUDA;
        be = (tf_backend *)&kind;
        assert_int_not_equal(tf_backend_create(&kind, &bo, &be, &ops, &k, err, sizeof err), 0);
        assert_null(be);
        assert_null(ops);
        assert_int_equal(kind, TF_BACKEND_CUDA);
        assert_non_null(strstr(err, "--backend cuda: no usable CUDA device"));
        assert_null(strchr(err, '\n'));
    }
}

/* The CUDA backend's preferences: level 3 merges the triangle GEMMs in fp32
 * only; the lane, batch staging, pipelined phases and graphs everywhere. */
static void test_cuda_caps(void **state) {
    (void)state;
    char why[256];
    if (!tf_cuda_backend_available(why, sizeof why)) {
        printf("  no CUDA device (%s): CUDA caps not checked\n", why);
        return;
    }
    for (int level = 1; level <= 3; level++)
        for (int tf32 = 0; tf32 <= 1; tf32++) {
            tf_backend_kind kind = TF_BACKEND_CUDA;
            const tf_ops *ops;
            tf_backend_caps k;
            tf_backend *be = create(&kind, level, tf32, &ops, &k);
            check_table(ops, &k);
            assert_string_equal(k.name, "cuda");
            assert_int_equal(k.device_memory, 1);
            assert_int_equal(k.opm_weight_first, 0);
            assert_int_equal(k.opm_bwd_op, level >= 3);
            assert_int_equal(k.opm_outer_op, level >= 3);
            assert_int_equal(k.trimul_merged, level >= 3 && !tf32);
            assert_int_equal(k.wgrad_lane, level >= 3);
            assert_true(k.wgrad_lane_bytes >= (size_t)32 << 20);
            assert_true(k.prefetch_batches && k.stage_batches && k.pipelined_phases && k.graphs);
            assert_int_equal(k.max_head_dim, 64);
            ops->destroy(be);
        }
}

static void tiny(tf_config *c) {
    tf_config_default(c);
    c->batch = 1;
    c->seq_len = 6;
    c->n_seqs = 2;
    c->n_blocks = 1;
    c->msa_dim = 16; /* heads of 4 */
    c->pair_dim = 8; /* heads of 2 */
    c->backend = TF_BACKEND_CPU;
    c->threads = 2;
}

static tf_status on_cpu(const tf_config *c, const tf_backend_caps *override, size_t *arena,
                        char *err, size_t errlen) {
    tf_backend_kind kind = TF_BACKEND_CPU;
    const tf_ops *ops;
    tf_backend_caps k;
    tf_backend *be = create(&kind, (int)c->impl, 0, &ops, &k);
    tf_trainer *t = NULL;
    tf_status st = tf_trainer_create_on(&t, c, be, ops, override ? override : &k, err, errlen);
    if (st == TF_OK) {
        *arena = tf_trainer_arena_bytes(t);
        tf_trainer_destroy(t);
    }
    return st;
}

/* The trainer takes the model's composition and its limits from the caps. */
static void test_trainer_follows_caps(void **state) {
    (void)state;
    tf_config c;
    tiny(&c);
    char err[512];
    size_t a_cpu = 0, a_ref = 0, a_mine;
    assert_int_equal(on_cpu(&c, NULL, &a_cpu, err, sizeof err), TF_OK);
    tf_backend_caps k;
    memset(&k, 0, sizeof k);
    k.name = "cpu";
    assert_int_equal(on_cpu(&c, &k, &a_ref, err, sizeof err), TF_OK);
    /* the weight-first outer product mean keeps other buffers than the
     * reference composition */
    assert_int_not_equal(a_cpu, a_ref);
    k.opm_weight_first = k.trimul_merged = 1;
    assert_int_equal(on_cpu(&c, &k, &a_mine, err, sizeof err), TF_OK);
    assert_int_equal(a_mine, a_cpu);
    /* below level 3 the preferences do not apply */
    c.impl = TF_IMPL_V2;
    c.fusion = tf_fusion_for_impl(TF_IMPL_V2);
    size_t a2 = 0, a2k = 0;
    assert_int_equal(on_cpu(&c, NULL, &a2, err, sizeof err), TF_OK);
    assert_int_equal(on_cpu(&c, &k, &a2k, err, sizeof err), TF_OK);
    assert_int_equal(a2, a2k);
    /* a head wider than the backend's kernels take: refused with one line */
    k.max_head_dim = 2;
    assert_int_equal(on_cpu(&c, &k, &a_mine, err, sizeof err), TF_ERR_USAGE);
    assert_string_equal(err, "--msa-dim: '16' is not accepted with --backend cpu: head size 4 "
                             "exceeds 2 (expected at most 8)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_caps),
        cmocka_unit_test(test_create_by_kind),
        cmocka_unit_test(test_cuda_caps),
        cmocka_unit_test(test_trainer_follows_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
