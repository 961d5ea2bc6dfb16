/* tf_config_default, tf_fusion_for_impl and tf_config_validate: the defaults
 * of docs/model.md (section 1), every field's bounds on both sides, the rules between fields,
 * and the one-line messages that name the flag, the value and the range. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config/limits.h"
#include "tinyfold.h"

/* Validates c; expects status want; on failure the message must contain
 * each of the (up to 3) given substrings and be one line. */
static void expect(const tf_config *c, tf_status want, const char *s1, const char *s2,
                   const char *s3)
{
    char err[512];
    memset(err, 'x', sizeof err);
    tf_status got = tf_config_validate(c, err, sizeof err);
    if (got != want)
        fail_msg("status %d, expected %d (message: %.200s)", (int)got, (int)want,
                 got != TF_OK ? err : "");
    if (want == TF_OK) {
        assert_string_equal(err, "");
        return;
    }
    assert_null(strchr(err, '\n'));
    const char *subs[3] = {s1, s2, s3};
    for (int i = 0; i < 3; i++)
        if (subs[i] && !strstr(err, subs[i]))
            fail_msg("message '%s' lacks '%s'", err, subs[i]);
}

static void test_defaults_are_the_spec(void **state)
{
    (void)state;
    tf_config c;
    memset(&c, 0x5a, sizeof c); /* every field must be written */
    tf_config_default(&c);
    assert_int_equal(c.msa_dim, 64);
    assert_int_equal(c.pair_dim, 128);
    assert_int_equal(c.n_blocks, 4);
    assert_int_equal(c.n_heads_msa, 4);
    assert_int_equal(c.n_heads_pair, 4);
    assert_int_equal(c.outer_dim, 32);
    assert_int_equal(c.vocab, 21);
    assert_int_equal(c.pair_input_dim, 65);
    assert_int_equal(c.batch, 4);
    assert_int_equal(c.seq_len, 64);
    assert_int_equal(c.n_seqs, 16);
    assert_int_equal(c.num_steps, 30);
    assert_int_equal(c.warmup_steps, 5);
    assert_true(c.learning_rate == 3e-4f);
    assert_int_equal(c.seed, 42);
    assert_int_equal(c.impl, TF_IMPL_V3);
    assert_int_equal(c.backend, TF_BACKEND_AUTO);
    assert_int_equal(c.device, 0);
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.precision, TF_PREC_FP32);
    assert_int_equal(c.graph, 0);
    tf_fusion f = tf_fusion_for_impl(c.impl);
    assert_memory_equal(&c.fusion, &f, sizeof f);
    expect(&c, TF_OK, NULL, NULL, NULL);
}

static void test_fusion_for_impl(void **state)
{
    (void)state;
    tf_fusion v1 = tf_fusion_for_impl(TF_IMPL_V1), v2 = tf_fusion_for_impl(TF_IMPL_V2),
              v3 = tf_fusion_for_impl(TF_IMPL_V3);
    assert_true(!v1.qkv_msa && !v1.qkv_triangle && !v1.flash && !v1.triangle);
    assert_true(v2.qkv_msa && v2.qkv_triangle && v2.flash && v2.triangle);
    assert_true(v3.qkv_msa && v3.qkv_triangle && v3.flash && v3.triangle);
}

/* Every integer field: the bounds are accepted, one past them is refused. */
static void test_integer_bounds(void **state)
{
    (void)state;
    static const struct {
        size_t off;
        const char *name;
        long lo, hi;
    } f[] = {
        {offsetof(tf_config, batch), "--batch-size", 1, TF_LIM_BATCH_MAX},
        {offsetof(tf_config, seq_len), "--seq-len", 1, TF_LIM_SEQ_LEN_MAX},
        {offsetof(tf_config, n_seqs), "--num-seqs", 1, TF_LIM_N_SEQS_MAX},
        {offsetof(tf_config, n_blocks), "--num-blocks", 1, TF_LIM_BLOCKS_MAX},
        {offsetof(tf_config, num_steps), "--num-steps", 1, TF_LIM_STEPS_MAX},
        {offsetof(tf_config, warmup_steps), "--warmup-steps", 0, TF_LIM_WARMUP_MAX},
        {offsetof(tf_config, msa_dim), "--msa-dim", 4, 4096},
        {offsetof(tf_config, pair_dim), "--pair-dim", 4, 4096},
        {offsetof(tf_config, outer_dim), "outer_dim", 1, TF_LIM_OUTER_MAX},
        {offsetof(tf_config, vocab), "vocab", 21, TF_LIM_VOCAB_MAX},
        {offsetof(tf_config, pair_input_dim), "pair_input_dim", 65, 65},
        {offsetof(tf_config, device), "--device", 0, TF_LIM_DEVICE_MAX},
        {offsetof(tf_config, threads), "--threads", 0, TF_LIM_THREADS_MAX},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        tf_config c;
        tf_config_default(&c);
        int *field = (int *)((char *)&c + f[i].off);
        char v[32];
        print_message("%s in [%ld, %ld]\n", f[i].name, f[i].lo, f[i].hi);
        *field = (int)f[i].lo;
        expect(&c, TF_OK, NULL, NULL, NULL);
        *field = (int)f[i].hi;
        expect(&c, TF_OK, NULL, NULL, NULL);
        /* msa/pair dims are bounded below by the head count (divisibility). */
        long below = f[i].off == offsetof(tf_config, msa_dim) ||
                             f[i].off == offsetof(tf_config, pair_dim)
                         ? 0
                         : f[i].lo - 1;
        long values[] = {below, f[i].hi + 1, -1, -2147483647 - 1, 2147483647};
        for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
            if (values[k] >= f[i].lo && values[k] <= f[i].hi)
                continue;
            *field = (int)values[k];
            snprintf(v, sizeof v, "'%ld'", values[k]);
            expect(&c, TF_ERR_USAGE, f[i].name, v, "expected");
        }
    }
}

static void test_exact_message(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.seq_len = 0;
    char err[256];
    assert_int_equal(tf_config_validate(&c, err, sizeof err), TF_ERR_USAGE);
    assert_string_equal(err, "--seq-len: '0' is not accepted: expected an integer in [1, 4096]");
}

static void test_heads(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.n_heads_msa = 0;
    expect(&c, TF_ERR_USAGE, "n_heads_msa", "'0'", "[1, 64]");
    c.n_heads_msa = 65;
    expect(&c, TF_ERR_USAGE, "n_heads_msa", "'65'", NULL);
    tf_config_default(&c);
    c.n_heads_pair = -3;
    expect(&c, TF_ERR_USAGE, "n_heads_pair", "'-3'", NULL);
    /* The dims must split into the heads. */
    tf_config_default(&c);
    c.msa_dim = 66;
    expect(&c, TF_ERR_USAGE, "--msa-dim", "'66'", "multiple");
    c.n_heads_msa = 3; /* 66 = 3 * 22 */
    expect(&c, TF_OK, NULL, NULL, NULL);
    c.msa_dim = 64; /* 64 % 3 != 0 */
    expect(&c, TF_ERR_USAGE, "--msa-dim", "'64'", "(3)");
    tf_config_default(&c);
    c.pair_dim = 130;
    expect(&c, TF_ERR_USAGE, "--pair-dim", "'130'", "multiple");
    c.pair_dim = 2;
    expect(&c, TF_ERR_USAGE, "--pair-dim", "'2'", NULL);
}

static void test_learning_rate(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    const float bad[] = {0.0f, -0.0f, -3e-4f, NAN, INFINITY, -INFINITY, 1.0001f, 1e30f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.learning_rate = bad[i];
        expect(&c, TF_ERR_USAGE, "--learning-rate", "(0, 1]", NULL);
    }
    const float good[] = {1.0f, 1e-8f, 1e-38f, 3e-4f};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        c.learning_rate = good[i];
        expect(&c, TF_OK, NULL, NULL, NULL);
    }
}

static void test_enums_and_switches(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.impl = (tf_impl)0;
    expect(&c, TF_ERR_USAGE, "--impl", "v1, v2 or v3", NULL);
    c.impl = (tf_impl)4;
    expect(&c, TF_ERR_USAGE, "--impl", "'4'", NULL);
    tf_config_default(&c);
    c.backend = (tf_backend_kind)4;
    expect(&c, TF_ERR_USAGE, "--backend", "cpu, cuda, hip or auto", NULL);
    c.backend = (tf_backend_kind)-1;
    expect(&c, TF_ERR_USAGE, "--backend", NULL, NULL);
    tf_config_default(&c);
    c.precision = (tf_precision)TF_PREC_COUNT;
    expect(&c, TF_ERR_USAGE, "--precision", "fp32, tf32, bf16 or fp16", NULL);
    tf_config_default(&c);
    c.graph = 2;
    expect(&c, TF_ERR_USAGE, "--graph", "'2'", NULL);
    int *fus[4] = {&c.fusion.qkv_msa, &c.fusion.qkv_triangle, &c.fusion.flash, &c.fusion.triangle};
    const char *names[4] = {"qkv_msa", "qkv_triangle", "flash", "triangle"};
    for (int i = 0; i < 4; i++) {
        tf_config_default(&c);
        *fus[i] = -1;
        expect(&c, TF_ERR_USAGE, names[i], "'-1'", "0 or 1");
        *fus[i] = 0; /* any combination of switches is valid at any level */
        c.impl = TF_IMPL_V1;
        expect(&c, TF_OK, NULL, NULL, NULL);
    }
}

/* CUDA-only features: refused on an explicit CPU, left to the CLI on auto. */
static void test_cuda_only_features(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.backend = TF_BACKEND_CPU;
    c.precision = TF_PREC_TF32;
    expect(&c, TF_ERR_USAGE, "--precision", "tf32", "cpu");
    c.precision = TF_PREC_FP32;
    c.graph = 1;
    expect(&c, TF_ERR_USAGE, "--graph", "cpu", NULL);
    c.backend = TF_BACKEND_CUDA;
    c.precision = TF_PREC_TF32;
    expect(&c, TF_OK, NULL, NULL, NULL);
    c.backend = TF_BACKEND_AUTO;
    expect(&c, TF_OK, NULL, NULL, NULL);
}

/* GEMM row counts are ints: B*N*N and B*S*N must stay <= 2^31 - 1. */
static void test_row_counts(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.seq_len = 4096;
    c.batch = 127; /* 127 * 2^24 = 2130706432 */
    expect(&c, TF_OK, NULL, NULL, NULL);
    c.batch = 128; /* 2^31 */
    expect(&c, TF_ERR_USAGE, "--seq-len", "'4096'", "2147483648");
    c.batch = 256;
    c.n_seqs = 4096;
    expect(&c, TF_ERR_USAGE, "--seq-len", NULL, NULL);
    c.seq_len = 2048; /* pair rows 2^30, MSA rows 256 * 4096 * 2048 = 2^31 */
    expect(&c, TF_ERR_USAGE, "--num-seqs", "'4096'", "2147483648");
    c.n_seqs = 4095;
    expect(&c, TF_OK, NULL, NULL, NULL);
}

static void test_message_buffers(void **state)
{
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.batch = 0;
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(tf_config_validate(&c, small, sizeof small), TF_ERR_USAGE);
    assert_int_equal(strlen(small), sizeof small - 1); /* truncated, terminated */
    assert_int_equal(tf_config_validate(&c, NULL, 0), TF_ERR_USAGE);
    assert_int_equal(tf_config_validate(NULL, small, sizeof small), TF_ERR_USAGE);
    tf_config_default(&c);
    assert_int_equal(tf_config_validate(&c, NULL, 0), TF_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_the_spec), cmocka_unit_test(test_fusion_for_impl),
        cmocka_unit_test(test_integer_bounds),        cmocka_unit_test(test_exact_message),
        cmocka_unit_test(test_heads),                 cmocka_unit_test(test_learning_rate),
        cmocka_unit_test(test_enums_and_switches),    cmocka_unit_test(test_cuda_only_features),
        cmocka_unit_test(test_row_counts),            cmocka_unit_test(test_message_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
