/* User data files: shapes and values checked at open, batches picked as
 * (step*B + j) mod count, every malformed case named. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "io/datafile.h"
#include "io/safetensors.h"
#include "test_io_util.h"

enum { NS = 5, S = 3, N = 4, P = 65 };

typedef struct {
    int32_t tok[NS * S * N];
    int64_t tok64[NS * S * N];
    float pair[NS * N * N * P];
    float target[NS * N * N];
} data;

/* Sample s has tokens (s + i) mod 21, pair s*1000 + i, target s + i/100. */
static void fill(data *d) {
    for (int s = 0; s < NS; s++) {
        for (int i = 0; i < S * N; i++)
            d->tok[s * S * N + i] = d->tok64[s * S * N + i] = (s * 7 + i) % 21;
        for (int i = 0; i < N * N * P; i++)
            d->pair[s * N * N * P + i] = (float)(s * 1000 + i);
        for (int i = 0; i < N * N; i++)
            d->target[s * N * N + i] = (float)s + (float)i / 100.0f;
    }
}

/* Writes a data file; tok_dtype I32 or I64; overrides change one shape. */
static void write_data(const char *p, const data *d, tf_st_dtype tok_dtype, int ns_pair,
                       int last_pair, int target_ndim) {
    tf_st_out t[3] = {
        {.name = "msa_tokens",
         .dtype = tok_dtype,
         .ndim = 3,
         .shape = {NS, S, N},
         .data = tok_dtype == TF_ST_I64 ? (const void *)d->tok64 : (const void *)d->tok},
        {.name = "pair_features",
         .dtype = TF_ST_F32,
         .ndim = 4,
         .shape = {ns_pair, N, N, last_pair},
         .data = d->pair},
        {.name = "target_distances",
         .dtype = TF_ST_F32,
         .ndim = target_ndim,
         .shape = {NS, N, N, 1},
         .data = d->target},
    };
    const char *meta[] = {"format", "tinyfold-data"};
    char err[512] = "";
    assert_int_equal(tf_st_write(p, t, 3, meta, 1, err, sizeof err), TF_OK);
}

static void check_batch(const data *d, long step, int B, const tf_batch *b) {
    for (int j = 0; j < B; j++) {
        long s = (step * B + j) % NS;
        assert_memory_equal(b->tokens + j * S * N, d->tok + s * S * N, sizeof(int32_t) * S * N);
        assert_memory_equal(b->pair + (size_t)j * N * N * P, d->pair + s * N * N * P,
                            sizeof(float) * N * N * P);
        assert_memory_equal(b->target + j * N * N, d->target + s * N * N, sizeof(float) * N * N);
    }
}

static void test_valid(void **state) {
    (void)state;
    static data d;
    fill(&d);
    tf_st_dtype dts[2] = {TF_ST_I32, TF_ST_I64};
    for (int k = 0; k < 2; k++)
        for (int tnd = 3; tnd <= 4; tnd++) {
            const char *p = io_path("data.safetensors");
            write_data(p, &d, dts[k], NS, P, tnd);
            tf_datafile *df = NULL;
            char err[512] = "";
            assert_int_equal(tf_datafile_open(p, &df, err, sizeof err), TF_OK);
            assert_int_equal(tf_datafile_count(df), NS);
            assert_int_equal(tf_datafile_S(df), S);
            assert_int_equal(tf_datafile_N(df), N);
            enum { B = 3 };
            static int32_t tok[B * S * N];
            static float pair[B * N * N * P], target[B * N * N];
            tf_batch b = {.B = B, .S = S, .N = N, .tokens = tok, .pair = pair, .target = target};
            /* steps 0..6 cover the wrap-around of 5 samples in batches of 3 */
            for (long step = 0; step < 7; step++) {
                tf_datafile_batch(df, step, &b);
                check_batch(&d, step, B, &b);
            }
            /* a huge step: (step*B + j) mod count without overflow */
            long big = 2305843009213693951L; /* 2^61 - 1 */
            tf_datafile_batch(df, big, &b);
            for (int j = 0; j < B; j++) {
                /* 2^61 - 1 = 1 mod 5 (2^4 = 1 mod 5), so (big*3 + j) mod 5 = (3 + j) mod 5 */
                int s = (3 + j) % NS;
                assert_int_equal(b.tokens[j * S * N], d.tok[s * S * N]);
                assert_true(b.target[j * N * N] == d.target[s * N * N]);
            }
            tf_datafile_close(df);
        }
}

#define OPEN_FAILS(p, ...)                                                                         \
    do {                                                                                           \
        tf_datafile *df_ = (tf_datafile *)1;                                                       \
        char err_[512] = "";                                                                       \
        tf_status st_ = tf_datafile_open(p, &df_, err_, sizeof err_);                              \
        assert_null(df_);                                                                          \
        assert_fails_with(st_, TF_ERR_USAGE, err_, p, __VA_ARGS__);                                \
    } while (0)

static void test_bad_values(void **state) {
    (void)state;
    static data d;
    const char *p = io_path("bad.safetensors");
    fill(&d);
    d.tok[17] = 21;
    write_data(p, &d, TF_ST_I32, NS, P, 4);
    OPEN_FAILS(p, "tensor 'msa_tokens'", "element 17 is 21", "0..20");
    fill(&d);
    d.tok64[59] = -1;
    write_data(p, &d, TF_ST_I64, NS, P, 4);
    OPEN_FAILS(p, "msa_tokens", "element 59 is -1");
    fill(&d);
    d.tok64[3] = (int64_t)1 << 32; /* would wrap to 0 as int32 */
    write_data(p, &d, TF_ST_I64, NS, P, 4);
    OPEN_FAILS(p, "msa_tokens", "element 3 is 4294967296");
    fill(&d);
    d.pair[NS * N * N * P - 1] = NAN;
    write_data(p, &d, TF_ST_I32, NS, P, 4);
    OPEN_FAILS(p, "tensor 'pair_features'", "not finite");
    fill(&d);
    d.target[5] = -INFINITY;
    write_data(p, &d, TF_ST_I32, NS, P, 4);
    OPEN_FAILS(p, "tensor 'target_distances'", "element 5 is not finite");
}

static void test_bad_shapes(void **state) {
    (void)state;
    static data d;
    fill(&d);
    const char *p = io_path("shape.safetensors");
    char err[512] = "";
    /* inconsistent n: pair has 4 samples (data reused, fewer bytes) */
    write_data(p, &d, TF_ST_I32, NS - 1, P, 4);
    OPEN_FAILS(p, "tensor 'pair_features'", "expected [5,4,4,65]");
    /* wrong feature width: 64 per pair (over NS samples: fewer bytes, same buffer) */
    write_data(p, &d, TF_ST_I32, NS, 64, 4);
    OPEN_FAILS(p, "pair_features", "expected [5,4,4,65]");
    /* tokens as F32, pair as F64, missing tensor, wrong rank */
    tf_st_out t[3] = {
        {.name = "msa_tokens", .dtype = TF_ST_F32, .ndim = 3, .shape = {NS, S, N}, .data = d.tok},
        {.name = "pair_features",
         .dtype = TF_ST_F32,
         .ndim = 4,
         .shape = {NS, N, N, P},
         .data = d.pair},
        {.name = "target_distances",
         .dtype = TF_ST_F32,
         .ndim = 4,
         .shape = {NS, N, N, 1},
         .data = d.target},
    };
    assert_int_equal(tf_st_write(p, t, 3, NULL, 0, err, sizeof err), TF_OK);
    OPEN_FAILS(p, "msa_tokens", "I32 or I64");
    t[0].dtype = TF_ST_I32;
    t[2].shape[3] = 2;
    t[2].shape[0] = 2; /* 2*4*4*2 floats: fits in the buffer */
    assert_int_equal(tf_st_write(p, t, 3, NULL, 0, err, sizeof err), TF_OK);
    OPEN_FAILS(p, "target_distances", "expected [5,4,4,1]");
    assert_int_equal(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_OK);
    OPEN_FAILS(p, "tensor 'target_distances'", "missing");
    t[1].ndim = 3;
    assert_int_equal(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_OK);
    OPEN_FAILS(p, "tensor 'pair_features'", "has 3 dimensions, expected 4");
    t[0].shape[1] = 0;
    assert_int_equal(tf_st_write(p, t, 1, NULL, 0, err, sizeof err), TF_OK);
    OPEN_FAILS(p, "msa_tokens", "dimension 1 is 0");
    /* not a safetensors file at all; a missing file */
    io_write_file(p, "hello", 5);
    OPEN_FAILS(p, "truncated");
    tf_datafile *df = NULL;
    const char *q = io_path("missing.safetensors");
    assert_fails_with(tf_datafile_open(q, &df, err, sizeof err), TF_ERR_IO, err, q, "cannot open");
}

/* The reference fixtures hold a batch in the data-file layout (plus other
 * tensors, which a data file may carry and which are ignored). */
static void test_reference_fixture(void **state) {
    (void)state;
    const char *dir = getenv("TF_FIXTURES");
    char p[512];
    snprintf(p, sizeof p, "%s/tiny.safetensors", dir && *dir ? dir : "tests/fixtures");
    if (access(p, R_OK) != 0) {
        print_message("fixture %s not found: skipped\n", p);
        skip();
    }
    tf_datafile *df = NULL;
    char err[512] = "";
    assert_int_equal(tf_datafile_open(p, &df, err, sizeof err), TF_OK);
    /* tiny: B,S,N = 2,3,8 (tests/fixtures/README.md) */
    assert_int_equal(tf_datafile_count(df), 2);
    assert_int_equal(tf_datafile_S(df), 3);
    assert_int_equal(tf_datafile_N(df), 8);
    int32_t tok[2 * 3 * 8];
    float pair[2 * 8 * 8 * 65], target[2 * 8 * 8];
    tf_batch b = {.B = 2, .S = 3, .N = 8, .tokens = tok, .pair = pair, .target = target};
    tf_datafile_batch(df, 0, &b);
    tf_st_file *f = NULL;
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    assert_memory_equal(tok, tf_st_find(f, "msa_tokens")->data, sizeof tok);
    assert_memory_equal(pair, tf_st_find(f, "pair_features")->data, sizeof pair);
    assert_memory_equal(target, tf_st_find(f, "target_distances")->data, sizeof target);
    tf_st_close(f);
    tf_datafile_close(df);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_values, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_shapes, io_dir_setup, io_dir_teardown),
        cmocka_unit_test(test_reference_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
