/* safetensors reader and writer: round trips, exact bytes, every class of
 * malformed file, and atomic saves that leave the previous file intact. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/safetensors.h"
#include "test_io_util.h"

/* ---- the writer's exact bytes, checked against a hand-written image ---------- */

static void test_write_exact_bytes(void **state) {
    (void)state;
    const float a[2] = {1.5f, -2.0f};
    const int32_t b[3] = {7, -1, 20};
    tf_st_out t[2] = {
        {.name = "a", .dtype = TF_ST_F32, .ndim = 1, .shape = {2}, .data = a},
        {.name = "b\"q", .dtype = TF_ST_I32, .ndim = 2, .shape = {1, 3}, .data = b},
    };
    const char *meta[] = {"k", "v"};
    char err[512] = "";
    const char *p = io_path("exact.safetensors");
    assert_int_equal(tf_st_write(p, t, 2, meta, 1, err, sizeof err), TF_OK);
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\\\"q\":{\"dtype\":\"I32\",\"shape\":[1,3],\"data_offsets\":[8,20]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    size_t len = 0;
    unsigned char *got = io_read_file(p, &len);
    assert_non_null(got);
    assert_int_equal(len, 8 + padded + 20);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | got[i];
    assert_int_equal(hl, padded);
    assert_memory_equal(got + 8, json, jl);
    for (size_t i = jl; i < padded; i++)
        assert_int_equal(got[8 + i], ' ');
    assert_memory_equal(got + 8 + padded, a, 8);
    assert_memory_equal(got + 8 + padded + 8, b, 12);
    free(got);
    assert_int_equal(io_dir_count(".tmp."), 0);
}

/* ---- round trip through the reader ------------------------------------------- */

static void test_round_trip(void **state) {
    (void)state;
    float f32[6];
    int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
    double f64 = 3.25;
    uint16_t bf16[3] = {0x3f80, 0xbf80, 0x0000};
    for (int i = 0; i < 6; i++)
        f32[i] = (float)i * 0.5f - 1.0f;
    tf_st_out t[] = {
        {.name = "zeta.f32", .dtype = TF_ST_F32, .ndim = 2, .shape = {2, 3}, .data = f32},
        {.name = "alpha.i64", .dtype = TF_ST_I64, .ndim = 1, .shape = {4}, .data = i64},
        {.name = "scalar", .dtype = TF_ST_F64, .ndim = 0, .data = &f64},
        {.name = "empty", .dtype = TF_ST_U8, .ndim = 2, .shape = {0, 5}, .data = NULL},
        {.name = "mid.bf16", .dtype = TF_ST_BF16, .ndim = 1, .shape = {3}, .data = bf16},
    };
    const char *meta[] = {"format", "test", "note", "h\u00e9llo \"quoted\""};
    char err[512] = "";
    const char *p = io_path("rt.safetensors");
    assert_int_equal(tf_st_write(p, t, 5, meta, 2, err, sizeof err), TF_OK);

    tf_st_file *f = NULL;
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    assert_int_equal(tf_st_count(f), 5);
    /* sorted by name */
    const char *order[] = {"alpha.i64", "empty", "mid.bf16", "scalar", "zeta.f32"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(tf_st_at(f, i)->name, order[i]);
    for (size_t i = 0; i < 5; i++) {
        const tf_st_tensor *r = tf_st_find(f, t[i].name);
        assert_non_null(r);
        assert_int_equal(r->dtype, t[i].dtype);
        assert_int_equal(r->ndim, t[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < r->ndim; d++) {
            assert_int_equal(r->shape[d], t[i].shape[d]);
            numel *= (uint64_t)t[i].shape[d];
        }
        assert_int_equal(r->numel, numel);
        assert_int_equal(r->nbytes, numel * tf_st_dtype_size(t[i].dtype));
        if (r->nbytes) assert_memory_equal(r->data, t[i].data, r->nbytes);
    }
    assert_null(tf_st_find(f, "missing"));
    assert_null(tf_st_find(f, "__metadata__"));
    assert_int_equal(tf_st_meta_count(f), 2);
    assert_string_equal(tf_st_meta_get(f, "format"), "test");
    assert_string_equal(tf_st_meta_get(f, "note"), "h\u00e9llo \"quoted\"");
    assert_null(tf_st_meta_get(f, "absent"));
    /* the data section starts 8-byte aligned (header padded with spaces) */
    const tf_st_tensor *a = tf_st_find(f, "zeta.f32");
    assert_int_equal(a->begin, 0);
    tf_st_close(f);

    /* rewriting over an existing file replaces it */
    tf_st_out one = {.name = "x", .dtype = TF_ST_F32, .ndim = 1, .shape = {1}, .data = f32};
    assert_int_equal(tf_st_write(p, &one, 1, NULL, 0, err, sizeof err), TF_OK);
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    assert_int_equal(tf_st_count(f), 1);
    assert_int_equal(tf_st_meta_count(f), 0);
    tf_st_close(f);
    assert_int_equal(io_dir_count(".tmp."), 0);
}

/* A file written by the reference's Python writer (tests/reference/safetensors_io.py)
 * for {"w": float32 [[1,2],[3,4]], "t": int64 [5]} with metadata {"format": "pt"}. */
static void test_python_layout(void **state) {
    (void)state;
    const float w[4] = {1, 2, 3, 4};
    const int64_t tv = 5;
    unsigned char data[24];
    memcpy(data, w, 16);
    memcpy(data + 16, &tv, 8);
    const char *json =
        "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],"
        "\"data_offsets\":[0,16]},\"t\":{\"dtype\":\"I64\",\"shape\":[1],"
        "\"data_offsets\":[16,24]}}      ";
    size_t len;
    unsigned char *img = io_image(json, data, sizeof data, &len);
    tf_st_file *f = NULL;
    char err[512] = "";
    assert_int_equal(tf_st_parse_buffer(&f, img, len, "py", err, sizeof err), TF_OK);
    const tf_st_tensor *t = tf_st_find(f, "t");
    int64_t got;
    memcpy(&got, t->data, 8);
    assert_int_equal(got, 5);
    assert_memory_equal(tf_st_find(f, "w")->data, w, 16);
    tf_st_close(f);
    free(img);
}

/* ---- malformed files ------------------------------------------------------------ */

#define T1 "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static tf_status parse_json_img(const char *json, size_t dlen, char *err, size_t errlen) {
    size_t len;
    unsigned char *img = io_image(json, NULL, dlen, &len);
    tf_st_file *f = NULL;
    tf_status st = tf_st_parse_buffer(&f, img, len, "bad.safetensors", err, errlen);
    if (st == TF_OK)
        tf_st_close(f);
    else
        assert_null(f);
    free(img);
    return st;
}

#define BAD(json, dlen, ...)                                                                       \
    do {                                                                                           \
        char err_[512] = "";                                                                       \
        tf_status st_ = parse_json_img(json, dlen, err_, sizeof err_);                             \
        assert_fails_with(st_, TF_ERR_USAGE, err_, __VA_ARGS__);                                   \
    } while (0)

static void test_sanity_of_bad_cases(void **state) {
    (void)state;
    char err[512] = "";
    /* the base the malformed cases are variations of parses */
    assert_int_equal(parse_json_img("{" T1 "}", 8, err, sizeof err), TF_OK);
    assert_int_equal(parse_json_img("{}", 0, err, sizeof err), TF_OK);
    /* an escaped backslash followed by "u0000" is plain text, not a NUL */
    size_t len;
    unsigned char *img = io_image(
        "{\"a\\\\u0000\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", NULL, 0, &len);
    tf_st_file *f = NULL;
    assert_int_equal(tf_st_parse_buffer(&f, img, len, "esc", err, sizeof err), TF_OK);
    assert_string_equal(tf_st_at(f, 0)->name, "a\\u0000");
    tf_st_close(f);
    free(img);
}

static void test_truncated(void **state) {
    (void)state;
    unsigned char b[7] = {0};
    tf_st_file *f = NULL;
    char err[512] = "";
    for (size_t n = 0; n < 8; n++) {
        tf_status st = tf_st_parse_buffer(&f, b, n, "short.safetensors", err, sizeof err);
        assert_fails_with(st, TF_ERR_USAGE, err, "short.safetensors", "truncated");
    }
    BAD("{" T1 "}", 7, "bad.safetensors", "tensor 't'", "out of range", "truncated");
    /* every proper prefix of a valid file fails cleanly */
    size_t len;
    unsigned char *img = io_image("{\"__metadata__\":{\"a\":\"b\"}," T1 "}", NULL, 8, &len);
    for (size_t n = 0; n < len; n++) {
        tf_status st = tf_st_parse_buffer(&f, img, n, "prefix", err, sizeof err);
        assert_int_equal(st, TF_ERR_USAGE);
        assert_null(f);
    }
    assert_int_equal(tf_st_parse_buffer(&f, img, len, "prefix", err, sizeof err), TF_OK);
    tf_st_close(f);
    free(img);
}

static void test_header_length(void **state) {
    (void)state;
    unsigned char b[16] = {0};
    char err[512] = "";
    tf_st_file *f = NULL;
    uint64_t big = (uint64_t)100 * 1000 * 1000 + 1;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(big >> (8 * i));
    assert_fails_with(tf_st_parse_buffer(&f, b, sizeof b, "h.st", err, sizeof err), TF_ERR_USAGE,
                      err, "h.st", "header length 100000001 exceeds");
    memset(b, 0xff, 8);
    assert_fails_with(tf_st_parse_buffer(&f, b, sizeof b, "h.st", err, sizeof err), TF_ERR_USAGE,
                      err, "header length", "exceeds");
    memset(b, 0, 8);
    b[0] = 9; /* 9 > 16 - 8 */
    assert_fails_with(tf_st_parse_buffer(&f, b, sizeof b, "h.st", err, sizeof err), TF_ERR_USAGE,
                      err, "header length 9 exceeds the 8 bytes");
}

static void test_bad_json(void **state) {
    (void)state;
    BAD("{\"t\":{\"dtype\":\"F32\",}", 0, "bad JSON");
    BAD("", 0, "bad JSON");
    BAD("[1,2]", 0, "not an object");
    BAD("\"str\"", 0, "not an object");
    BAD("{" T1 "}x", 8, "bad JSON", "after the JSON");
    BAD("{" T1 "}{}", 8, "bad JSON");
    BAD("{\"t\xff\":{}}", 0, "UTF-8");
    BAD("{\"t\xc0\x80\":{}}", 0, "UTF-8");     /* overlong NUL */
    BAD("{\"t\xed\xa0\x80\":{}}", 0, "UTF-8"); /* surrogate */
    BAD("{\"a\\u0000b\":{}}", 0, "\\u0000");
    BAD("{\"a\x01\":{}}", 0, "control byte");
    /* deep nesting is refused by cJSON (limit 1000), not a stack overflow */
    char deep[2100];
    size_t k = 0;
    deep[k++] = '{';
    memcpy(deep + k, "\"m\":", 4);
    k += 4;
    for (int i = 0; i < 1010; i++)
        deep[k++] = '[';
    for (int i = 0; i < 1010; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = '\0';
    BAD(deep, 0, "bad JSON");
}

static void test_bad_entries(void **state) {
    (void)state;
    BAD("{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 't'",
        "unknown dtype F33");
    BAD("{\"t\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 't'",
        "unknown dtype");
    BAD("{\"t\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype f32");
    BAD("{\"t\":[1]}", 0, "tensor 't'", "not a JSON object");
    BAD("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "missing field 'dtype'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "missing field 'shape'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing field 'data_offsets'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
        "unknown field 'x'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "field 'dtype' appears twice");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
        "shape is not an array");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
        "shape[0] is not a non-negative integer");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,8]}}", 8, "shape[1]");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
        "more than 8 dimensions");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
        "overflows");
    BAD("{\"t\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,8]}}", 8,
        "not a non-negative integer"); /* above 2^53: not exact as JSON double */
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[536870912,536870912],\"data_offsets\":[0,8]}}", 8,
        "shape mismatch");
}

static void test_shape_and_offsets(void **state) {
    (void)state;
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, "tensor 't'",
        "shape mismatch", "24 bytes", "hold 20 bytes");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "out of range");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before begin");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
        "data_offsets is not a pair");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8,
        "data_offsets is not a pair");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8,
        "data_offsets is not a pair");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[18446744073709551608,0]}}", 8,
        "data_offsets is not a pair");
    /* overlapping, gaps and trailing bytes */
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        12, "overlap", "tensor 'b'", "'a'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        8, "overlap");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
        8, "overlap");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
        12, "tensor 'b'", "belong to no tensor");
    BAD("{" T1 "}", 12, "4 trailing bytes");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        8, "tensor 'a'", "appears twice");
}

static void test_bad_metadata(void **state) {
    (void)state;
    BAD("{\"__metadata__\":[1]," T1 "}", 8, "\"__metadata__\" is not a JSON object");
    BAD("{\"__metadata__\":{\"k\":1}," T1 "}", 8, "key 'k' is not a string");
    BAD("{\"__metadata__\":{\"k\":null}," T1 "}", 8, "key 'k' is not a string");
    BAD("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}," T1 "}", 8, "key 'k' appears twice");
    BAD("{\"__metadata__\":{},\"__metadata__\":{}," T1 "}", 8, "appears twice");
}

static void test_open_errors(void **state) {
    (void)state;
    tf_st_file *f = (tf_st_file *)&f;
    char err[512] = "";
    const char *p = io_path("nope.safetensors");
    assert_fails_with(tf_st_open(&f, p, err, sizeof err), TF_ERR_IO, err, p, "cannot open");
    assert_null(f);
    assert_fails_with(tf_st_open(&f, g_dir, err, sizeof err), TF_ERR_IO, err, "not a regular file");
    const char *e = io_path("empty.safetensors");
    io_write_file(e, "", 0);
    assert_fails_with(tf_st_open(&f, e, err, sizeof err), TF_ERR_USAGE, err, e, "truncated");
    /* a file whose data section was cut short */
    size_t len;
    unsigned char *img = io_image("{" T1 "}", NULL, 8, &len);
    const char *c = io_path("cut.safetensors");
    io_write_file(c, img, len - 1);
    assert_fails_with(tf_st_open(&f, c, err, sizeof err), TF_ERR_USAGE, err, c, "tensor 't'",
                      "out of range");
    free(img);
}

/* An opened file truncated by another program: its tensors still read (the
 * bytes were copied at open; a mapping would fault with SIGBUS here). */
static void test_truncated_after_open(void **state) {
    (void)state;
    size_t len;
    unsigned char *img = io_image("{" T1 "}", NULL, 8, &len);
    const char *p = io_path("shrinks.safetensors");
    io_write_file(p, img, len);
    free(img);
    tf_st_file *f = NULL;
    char err[512] = "";
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    assert_int_equal(truncate(p, 0), 0);
    const tf_st_tensor *t = tf_st_find(f, "t");
    assert_non_null(t);
    volatile unsigned sum = 0; /* volatile: the reads must happen */
    for (uint64_t i = 0; i < t->nbytes; i++) sum += ((const unsigned char *)t->data)[i];
    tf_st_close(f);
    /* and the next open says what happened to it */
    assert_fails_with(tf_st_open(&f, p, err, sizeof err), TF_ERR_USAGE, err, p, "truncated");
}

/* A FIFO is refused at once (opening it does not wait for a writer). */
static void test_open_fifo(void **state) {
    (void)state;
    const char *p = io_path("fifo.safetensors");
    assert_int_equal(mkfifo(p, 0600), 0);
    tf_st_file *f = NULL;
    char err[512] = "";
    alarm(10); /* a reader that waits for a writer fails here, not at ctest's limit */
    assert_fails_with(tf_st_open(&f, p, err, sizeof err), TF_ERR_IO, err, p, "a FIFO");
    alarm(0);
    assert_null(f);
}

/* ---- failed saves leave the previous file intact ----------------------------- */

static void write_v(const char *p, float v, tf_status want, char *err, size_t errlen) {
    float x[3] = {v, v, v};
    tf_st_out t = {.name = "x", .dtype = TF_ST_F32, .ndim = 1, .shape = {3}, .data = x};
    assert_int_equal(tf_st_write(p, &t, 1, NULL, 0, err, errlen), want);
}

static void assert_holds(const char *p, float v) {
    tf_st_file *f = NULL;
    char err[512] = "";
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    float got[3];
    memcpy(got, tf_st_find(f, "x")->data, sizeof got);
    for (int i = 0; i < 3; i++)
        assert_true(got[i] == v);
    tf_st_close(f);
}

static void test_failed_save_keeps_old(void **state) {
    (void)state;
    char err[512] = "";
    const char *p = io_path("keep.safetensors");
    write_v(p, 1.0f, TF_OK, err, sizeof err);
    size_t len0;
    unsigned char *before = io_read_file(p, &len0);

    for (int stage = 1; stage <= 2; stage++) {
        tf_st_test_inject_write_failure(stage);
        write_v(p, 2.0f, TF_ERR_IO, err, sizeof err);
        assert_fails_with(TF_ERR_IO, TF_ERR_IO, err, p, "unchanged");
        size_t len1;
        unsigned char *after = io_read_file(p, &len1);
        assert_int_equal(len0, len1);
        assert_memory_equal(before, after, len0);
        free(after);
        assert_int_equal(io_dir_count(".tmp."), 0);
        assert_holds(p, 1.0f);
    }
    /* the hook is one-shot */
    write_v(p, 3.0f, TF_OK, err, sizeof err);
    assert_holds(p, 3.0f);
    free(before);

    /* a directory that does not exist */
    const char *q = io_path("no/such/dir/x.safetensors");
    write_v(q, 1.0f, TF_ERR_IO, err, sizeof err);
    assert_fails_with(TF_ERR_IO, TF_ERR_IO, err, q, "No such file");
    /* the target is a directory: rename fails after the temp file was written */
    const char *d = io_path("adir");
    assert_int_equal(mkdir(d, 0755), 0);
    write_v(d, 1.0f, TF_ERR_IO, err, sizeof err);
    assert_fails_with(TF_ERR_IO, TF_ERR_IO, err, "rename");
    assert_int_equal(io_dir_count(".tmp."), 0);
    rmdir(d);
}

static void test_writer_rejects_bad_args(void **state) {
    (void)state;
    char err[512] = "";
    float x = 0;
    tf_st_out t[2] = {{.name = "a", .dtype = TF_ST_F32, .ndim = 1, .shape = {1}, .data = &x},
                      {.name = "a", .dtype = TF_ST_F32, .ndim = 1, .shape = {1}, .data = &x}};
    const char *p = io_path("args.safetensors");
    assert_fails_with(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_ERR_INTERNAL, err,
                      "repeated");
    t[1].name = "__metadata__";
    assert_fails_with(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_ERR_INTERNAL, err,
                      "reserved");
    t[1].name = "b";
    t[1].shape[0] = -1;
    assert_fails_with(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_ERR_INTERNAL, err,
                      "negative");
    t[1].shape[0] = 1;
    t[1].data = NULL;
    assert_fails_with(tf_st_write(p, t, 2, NULL, 0, err, sizeof err), TF_ERR_INTERNAL, err,
                      "NULL data");
    assert_int_equal(io_dir_count("args"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_exact_bytes, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, io_dir_setup, io_dir_teardown),
        cmocka_unit_test(test_python_layout),
        cmocka_unit_test(test_sanity_of_bad_cases),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_shape_and_offsets),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test_setup_teardown(test_open_errors, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_after_open, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_fifo, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_failed_save_keeps_old, io_dir_setup, io_dir_teardown),
        cmocka_unit_test_setup_teardown(test_writer_rejects_bad_args, io_dir_setup,
                                        io_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
