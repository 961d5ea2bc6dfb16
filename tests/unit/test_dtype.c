/* Element types (src/backend/tf_dtype.h): sizes and names, and the bf16/fp16
 * conversions against references built here in double from the formats'
 * definitions, not from the code under test.
 *
 * Narrow -> fp32 is checked exhaustively: all 65536 patterns of each type
 * against (-1)^s 2^(e-bias) (1 + m 2^-p) (subnormal fp16: m 2^-24) computed
 * in double, compared exactly; and back to the narrow type, which must give
 * the same bits (NaNs: NaN again, quiet, sign and payload kept).
 *
 * fp32 -> narrow is checked against "the nearest value, ties to the even
 * pattern": a table of every finite non-negative value of the type in double
 * (ascending in the bit pattern), extended by one entry, the first value past
 * the largest (2^16 for fp16, 2^128 for bf16), which stands for inf: IEEE
 * rounds as if the exponent were unbounded, so what rounds to that value
 * overflows to inf. A binary search finds the neighbours of |x| and the
 * distances to them are exact in double (25 significant bits at most), so
 * the reference is exact. Inputs: every midpoint between neighbours (exact
 * in fp32: 12 resp. 9 significant bits) and the fp32 values one ulp either
 * side of it, the edge cases by name, and a few million random floats
 * (random bit patterns, and random exponents over each type's range).
 *
 * The checks can fail: the same checker is run on two wrong conversions
 * written here, truncation (dropping the low bits) and ties away from zero,
 * and must find mismatches in both (the midpoints are what exposes the
 * second; truncation fails on every value above a midpoint). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/tf_dtype.h"
#include "testutil.h"

typedef uint16_t (*to_narrow_fn)(float);

/* one narrow format, described by its fields */
typedef struct {
    const char *name;
    int ebits, mbits, bias;
    uint16_t inf;  /* the +inf pattern: also the count of finite non-negative patterns */
    uint16_t qbit; /* the quiet bit of a NaN */
    double *val;   /* val[0..inf]: finite values, val[inf] the first value past the largest */
} format;

static double field_value(const format *f, uint32_t bits) {
    const uint32_t m = bits & ((1u << f->mbits) - 1), e = (bits >> f->mbits) & ((1u << f->ebits) - 1);
    double v = e ? ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias)
                 : ldexp((double)m, 1 - f->bias - f->mbits);
    return (bits >> (f->ebits + f->mbits)) & 1 ? -v : v;
}

static void format_init(format *f) {
    f->val = tf_test_dalloc((size_t)f->inf + 1);
    for (uint32_t h = 0; h <= f->inf; h++) /* val[inf]: the exponent one past the largest */
        f->val[h] = field_value(f, h);
}

static format g_f16 = {"fp16", 5, 10, 15, 0x7c00, 0x0200, NULL};
static format g_bf16 = {"bf16", 8, 7, 127, 0x7f80, 0x0040, NULL};

static int group_setup(void **state) {
    (void)state;
    format_init(&g_f16);
    format_init(&g_bf16);
    /* the table is what the reference stands on: ascending, and the named values */
    for (uint32_t h = 0; h < g_f16.inf; h++)
        if (!(g_f16.val[h] < g_f16.val[h + 1])) return 1;
    for (uint32_t h = 0; h < g_bf16.inf; h++)
        if (!(g_bf16.val[h] < g_bf16.val[h + 1])) return 1;
    return !(g_f16.val[0x7bff] == 65504.0 && g_f16.val[0x7c00] == 65536.0 &&
             g_f16.val[1] == ldexp(1, -24) && g_f16.val[0x400] == ldexp(1, -14) &&
             g_bf16.val[0x3f80] == 1.0 && g_bf16.val[0x7f80] == ldexp(1, 128));
}

static int group_teardown(void **state) {
    (void)state;
    free(g_f16.val);
    free(g_bf16.val);
    return 0;
}

/* The reference: the nearest pattern to x, ties to the even one; inf past the
 * largest value's halfway point; NaN handled by the caller. */
static uint16_t ref_nearest(const format *f, float x) {
    const uint16_t sign = (uint16_t)(signbit(x) ? 1u << (f->ebits + f->mbits) : 0u);
    const double a = fabs((double)x);
    if (a >= f->val[f->inf]) return sign | f->inf;
    uint32_t lo = 0, hi = f->inf; /* val[lo] <= a < val[hi] */
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (f->val[mid] <= a) lo = mid;
        else hi = mid;
    }
    const double dlo = a - f->val[lo], dhi = f->val[hi] - a; /* exact */
    const uint32_t h = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1u ? hi : lo);
    return (uint16_t)(sign | h);
}

/* 1 if conv(x) is what the reference says (NaN: a quiet NaN of x's sign with
 * x's leading payload bits) */
static int conv_ok(const format *f, to_narrow_fn conv, float x) {
    const uint16_t got = conv(x);
    if (isnan(x)) {
        const uint32_t xb = tf_f32_bits(x);
        const int drop = 23 - f->mbits;
        const uint16_t want = (uint16_t)((xb >> 31 ? 1u << (f->ebits + f->mbits) : 0u) | f->inf |
                                         f->qbit | ((xb >> drop) & ((1u << f->mbits) - 1)));
        return got == want;
    }
    return got == ref_nearest(f, x);
}

/* Counts mismatches of conv over the test inputs of format f; prints the
 * first few when `loud`. */
static long check_conversion(const format *f, to_narrow_fn conv, int loud, uint64_t seed) {
    long bad = 0, n = 0;
#define TRY(xv)                                                                                \
    do {                                                                                       \
        const float x_ = (xv);                                                                 \
        n++;                                                                                   \
        if (!conv_ok(f, conv, x_)) {                                                           \
            if (loud && bad < 5)                                                               \
                fprintf(stderr, "%s: %.9g (0x%08x) -> 0x%04x, want 0x%04x\n", f->name,         \
                        (double)x_, (unsigned)tf_f32_bits(x_), (unsigned)conv(x_),             \
                        (unsigned)ref_nearest(f, x_));                                         \
            bad++;                                                                             \
        }                                                                                      \
    } while (0)
    /* every midpoint between neighbours (and the one past the largest, the
     * overflow threshold), one fp32 ulp either side, both signs */
    for (uint32_t h = 0; h < f->inf; h++) {
        const float mid = (float)((f->val[h] + f->val[h + 1]) / 2);
        if ((double)mid != (f->val[h] + f->val[h + 1]) / 2) { /* must be exact */
            if (loud) fprintf(stderr, "%s: midpoint of 0x%04x not an fp32\n", f->name, h);
            return -1;
        }
        const float around[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            TRY(around[k]);
            TRY(-around[k]);
        }
        TRY((float)f->val[h]); /* the values themselves */
    }
    /* named edge cases */
    const float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
                           FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, nextafterf(FLT_MIN, 0.0f),
                           65504.0f, 65505.0f, 65519.0f, nextafterf(65520.0f, 0.0f), 65520.0f,
                           -65520.0f, 65536.0f, 1e10f, 0x1p-14f, nextafterf(0x1p-14f, 0.0f),
                           0x1p-14f - 0x1p-25f, 0x1p-24f, 0x1p-25f, nextafterf(0x1p-25f, 1.0f),
                           nextafterf(0x1p-25f, 0.0f), 0x1.8p-24f, 0x1.8p-25f, 0x1p-26f,
                           1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
                           0x1.fffffep127f, 0x1.ff8p127f, 0x1.fe8p127f, 0x1p-133f, 0x1p-134f,
                           0x1.8p-133f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) TRY(edges[i]);
    /* NaNs with payloads, signalling and quiet */
    static const uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0xff800001u,
                                    0x7f802000u, 0xffffe000u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) TRY(tf_f32_from_bits(nans[i]));
    /* random: any bit pattern, then exponents over the type's range and a little past it */
    tf_test_rng r;
    tf_test_rng_init(&r, seed);
    for (long i = 0; i < 2000000; i++) TRY(tf_f32_from_bits((uint32_t)tf_test_rng_next(&r)));
    const int emin = 127 - f->bias - f->mbits - 3, emax = 127 + f->bias + 3; /* biased fp32 */
    const int elo = emin < 1 ? 1 : emin, ehi = emax > 254 ? 254 : emax;
    for (long i = 0; i < 2000000; i++) {
        const uint64_t z = tf_test_rng_next(&r);
        const uint32_t e = (uint32_t)(elo + (int)((z >> 32) % (uint64_t)(ehi - elo + 1)));
        TRY(tf_f32_from_bits((uint32_t)(z & 0x807fffffu) | e << 23));
    }
#undef TRY
    if (loud && getenv("TF_TEST_VERBOSE"))
        fprintf(stderr, "%s: %ld inputs, %ld mismatches\n", f->name, n, bad);
    return bad;
}

/* ---- wrong conversions: the checker must reject them ---- */

/* fp16 wrong in the normal range only (elsewhere the real conversion) */
static uint16_t f16_wrong(float x, uint32_t add) {
    const uint32_t b = tf_f32_bits(x), ax = b & 0x7fffffffu;
    if (ax < 0x38800000u || ax >= 0x477ff000u) return tf_f32_to_f16(x);
    return (uint16_t)(((b >> 16) & 0x8000u) | ((ax - 0x38000000u + add) >> 13));
}
static uint16_t f16_truncate(float x) { return f16_wrong(x, 0); }
static uint16_t f16_ties_away(float x) { return f16_wrong(x, 0x1000u); }

static uint16_t bf16_truncate(float x) {
    return isnan(x) ? tf_f32_to_bf16(x) : (uint16_t)(tf_f32_bits(x) >> 16);
}

static uint16_t bf16_ties_away(float x) {
    const uint32_t b = tf_f32_bits(x);
    return isnan(x) ? tf_f32_to_bf16(x) : (uint16_t)((b + 0x8000u) >> 16);
}

/* ------------------------------------------------------------------ tests */

static void test_sizes_names(void **state) {
    (void)state;
    assert_int_equal(TF_F32, 0); /* zero-initialised arguments mean fp32 */
    assert_int_equal(tf_dtype_size(TF_F32), 4);
    assert_int_equal(tf_dtype_size(TF_BF16), 2);
    assert_int_equal(tf_dtype_size(TF_F16), 2);
    assert_int_equal(tf_dtype_size((tf_dtype)7), 0);
    assert_string_equal(tf_dtype_name(TF_F32), "fp32");
    assert_string_equal(tf_dtype_name(TF_BF16), "bf16");
    assert_string_equal(tf_dtype_name(TF_F16), "fp16");
    assert_string_equal(tf_dtype_name((tf_dtype)7), "?");
    assert_true(tf_dtype_valid(TF_F32) && tf_dtype_valid(TF_BF16) && tf_dtype_valid(TF_F16));
    assert_false(tf_dtype_valid((tf_dtype)TF_DTYPE_COUNT));
}

/* all 65536 patterns: to fp32 exactly the field value, and back to the same bits */
static void exhaustive_to_f32(const format *f, float (*to32)(uint16_t), uint16_t (*to16)(float)) {
    long bad = 0;
    const uint32_t expmask = (uint32_t)f->inf, mmask = (1u << f->mbits) - 1;
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = to32((uint16_t)h);
        const uint32_t xb = tf_f32_bits(x);
        const int sign = (h >> (f->ebits + f->mbits)) & 1;
        int ok;
        if ((h & expmask) == expmask && (h & mmask)) { /* NaN: quiet, same sign and payload */
            ok = isnan(x) && (xb & 0x00400000u) && (int)(xb >> 31) == sign &&
                 ((xb >> (23 - f->mbits)) & mmask) == ((h | f->qbit) & mmask) &&
                 to16(x) == (uint16_t)(h | f->qbit);
        } else if ((h & 0x7fffu) == expmask) { /* inf */
            ok = isinf(x) && (int)(xb >> 31) == sign && to16(x) == h;
        } else {
            ok = (double)x == field_value(f, h) && (signbit(x) != 0) == sign && to16(x) == h;
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s 0x%04x -> %.9g (0x%08x) -> 0x%04x\n", f->name, h, (double)x,
                    (unsigned)xb, (unsigned)to16(x));
    }
    assert_int_equal(bad, 0);
}

static void test_f16_exhaustive(void **state) {
    (void)state;
    exhaustive_to_f32(&g_f16, tf_f16_to_f32, tf_f32_to_f16);
}

static void test_bf16_exhaustive(void **state) {
    (void)state;
    exhaustive_to_f32(&g_bf16, tf_bf16_to_f32, tf_f32_to_bf16);
}

static void test_f16_from_f32(void **state) {
    (void)state;
    /* spot values the header's comment promises, then the full checker */
    assert_int_equal(tf_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tf_f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7bff);
    assert_int_equal(tf_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(tf_f32_to_f16(-65520.0f), 0xfc00);
    assert_int_equal(tf_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(tf_f32_to_f16(0x1p-25f), 0x0000);              /* tie to even: 0 */
    assert_int_equal(tf_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 1); /* the smallest subnormal */
    assert_int_equal(tf_f32_to_f16(0x1.8p-24f), 2);                 /* 1.5 ulp: tie to 2 */
    assert_int_equal(tf_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);   /* up to the smallest normal */
    assert_int_equal(tf_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);       /* tie down to even */
    assert_int_equal(tf_f32_to_f16(1.0f + 0x3p-11f), 0x3c02);       /* tie up to even */
    assert_int_equal(check_conversion(&g_f16, tf_f32_to_f16, 1, 1), 0);
}

static void test_bf16_from_f32(void **state) {
    (void)state;
    assert_int_equal(tf_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie down to even */
    assert_int_equal(tf_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);   /* tie up to even */
    assert_int_equal(tf_f32_to_bf16(FLT_MAX), 0x7f80);          /* past the largest bf16: inf */
    assert_int_equal(tf_f32_to_bf16(0x1.fep127f), 0x7f7f);      /* the largest bf16 */
    assert_int_equal(tf_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(tf_f32_to_bf16(tf_f32_from_bits(0x7f800001u)), 0x7fc0); /* quietened */
    assert_int_equal(check_conversion(&g_bf16, tf_f32_to_bf16, 1, 2), 0);
}

/* the checker finds the wrong conversions (so a passing check means something) */
static void test_checker_rejects(void **state) {
    (void)state;
    assert_true(check_conversion(&g_f16, f16_truncate, 0, 3) > 0);
    assert_true(check_conversion(&g_f16, f16_ties_away, 0, 3) > 0);
    assert_true(check_conversion(&g_bf16, bf16_truncate, 0, 4) > 0);
    assert_true(check_conversion(&g_bf16, bf16_ties_away, 0, 4) > 0);
}

/* the array helpers give the scalar conversions' bits (fp32: a copy) */
static void test_arrays(void **state) {
    (void)state;
    const size_t n = 65536;
    /* room for n floats in the narrow buffers too: the helpers take any type,
     * and the compiler sees the fp32 branch's copy of 4n bytes */
    uint16_t *h = malloc(n * sizeof(float)), *h2 = malloc(n * sizeof(float));
    float *f = tf_test_falloc(n), *g = tf_test_falloc(n);
    assert_non_null(h);
    assert_non_null(h2);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    static const tf_dtype types[2] = {TF_BF16, TF_F16};
    for (int t = 0; t < 2; t++) {
        float (*to32)(uint16_t) = types[t] == TF_BF16 ? tf_bf16_to_f32 : tf_f16_to_f32;
        uint16_t (*to16)(float) = types[t] == TF_BF16 ? tf_f32_to_bf16 : tf_f32_to_f16;
        tf_dtype_to_f32(f, h, types[t], n);
        for (size_t i = 0; i < n; i++) assert_int_equal(tf_f32_bits(f[i]), tf_f32_bits(to32(h[i])));
        tf_test_fill_normal(g, n, 0.0f, 1000.0f, 5 + (uint64_t)t);
        tf_dtype_from_f32(h2, types[t], g, n);
        for (size_t i = 0; i < n; i++) assert_int_equal(h2[i], to16(g[i]));
    }
    /* rounding, array against scalar, over fp32 bit patterns 97 apart (every
     * class: zeros, subnormals, ties, overflow, inf, NaN payloads) and the
     * lengths around the vector width (the F16C loop and its tail) */
    for (uint64_t u0 = 0; u0 < (1ull << 32); u0 += 97 * (uint64_t)n) {
        size_t m = 0;
        for (; m < n && u0 + 97 * m < (1ull << 32); m++) g[m] = tf_f32_from_bits((uint32_t)(u0 + 97 * m));
        for (int t = 0; t < 2; t++) {
            uint16_t (*to16)(float) = types[t] == TF_BF16 ? tf_f32_to_bf16 : tf_f32_to_f16;
            tf_dtype_from_f32(h2, types[t], g, m);
            for (size_t i = 0; i < m; i++)
                if (h2[i] != to16(g[i])) fail_msg("%s: 0x%08x -> 0x%04x, scalar 0x%04x",
                                                  tf_dtype_name(types[t]), tf_f32_bits(g[i]),
                                                  h2[i], to16(g[i]));
        }
    }
    for (size_t m = 0; m < 20; m++) {
        tf_test_fill_normal(g, m, 0.0f, 3.0f, 11 + m);
        memset(h2, 0xab, 40 * sizeof *h2);
        tf_dtype_from_f32(h2, TF_F16, g, m);
        for (size_t i = 0; i < m; i++) assert_int_equal(h2[i], tf_f32_to_f16(g[i]));
        assert_int_equal(h2[m], 0xabab); /* nothing written past n */
        tf_dtype_to_f32(f, h2, TF_F16, m);
        for (size_t i = 0; i < m; i++) assert_true(f[i] == tf_f16_to_f32(h2[i]));
    }
    tf_test_fill_normal(g, n, 0.0f, 1.0f, 7);
    tf_dtype_to_f32(f, g, TF_F32, n);
    assert_true(tf_test_bits_equal(f, g, n));
    tf_dtype_from_f32(f, TF_F32, g, n);
    assert_true(tf_test_bits_equal(f, g, n));
    tf_dtype_to_f32(f, NULL, TF_BF16, 0); /* n == 0 reads nothing */
    free(h), free(h2), free(f), free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_names),     cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive), cmocka_unit_test(test_f16_from_f32),
        cmocka_unit_test(test_bf16_from_f32),   cmocka_unit_test(test_checker_rejects),
        cmocka_unit_test(test_arrays),
    };
    return cmocka_run_group_tests_name("dtype", tests, group_setup, group_teardown);
}
