/* bench's sgemm reference: the fastest call, not a median, and the better
 * shape of the measurements around a row. A machine whose other core is
 * taken for most of the calls (the 2-core development VM, shared) must
 * still give the quiet machine's rate; a row faster than its reference is
 * flagged, not shown as a plain share above 100%. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "prof/sgemm_ref.h"

static void test_fastest_call(void **state) {
    (void)state;
    /* 1 GFLOP a call: 2.5 ms quiet, 5 ms while a neighbour holds a core */
    const double ms[5] = {5.0, 5.0, 2.5, 5.0, 5.0};
    assert_true(tf_sgemm_best_rate(ms, 5, 1e9) == 400.0);
    const double none[2] = {0.0, 0.0};
    assert_true(tf_sgemm_best_rate(none, 2, 1e9) == 0.0);
}

static void test_row_reference(void **state) {
    (void)state;
    /* the better shape, from before or after the row */
    const tf_sgemm_ref before = {.big = 84.0, .skinny = 61.0}, after = {.big = 180.0, .skinny = 130.0};
    assert_true(tf_sgemm_ref_for_row(&before, &after) == 180.0);
    assert_true(tf_sgemm_ref_for_row(&after, &before) == 180.0);
    const tf_sgemm_ref skinny_wins = {.big = 90.0, .skinny = 150.0};
    assert_true(tf_sgemm_ref_for_row(&before, &skinny_wins) == 150.0);
}

static void test_pct_cell(void **state) {
    (void)state;
    char c[24];
    /* within the reference: a plain percentage */
    assert_int_equal(tf_sgemm_pct_cell(c, sizeof c, 52.0, 100.0), 0);
    assert_string_equal(c, "52%");
    assert_int_equal(tf_sgemm_pct_cell(c, sizeof c, 100.0, 100.0), 0);
    assert_string_equal(c, "100%");
    /* above it: the reference measured low, flagged */
    assert_int_equal(tf_sgemm_pct_cell(c, sizeof c, 46.8, 31.8), 1);
    assert_string_equal(c, "147%!");
    /* no reference (GPU rows): empty */
    assert_int_equal(tf_sgemm_pct_cell(c, sizeof c, 46.8, 0.0), 0);
    assert_string_equal(c, "");
}

static void test_measure(void **state) {
    (void)state;
    tf_sgemm_ref r = {0, 0};
    tf_sgemm_ref_measure(&r, 1.0);
    assert_true(r.big > 0.0 && r.skinny > 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fastest_call),
        cmocka_unit_test(test_row_reference),
        cmocka_unit_test(test_pct_cell),
        cmocka_unit_test(test_measure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
