/* The gradient buckets of data parallel runs (src/dist/bucket.c), from what
 * each backward stage writes (hi[s]: the highest gradient float stage s
 * writes, plus one). For every plan:
 *  - the buckets cover [0, n) exactly, each once, from the top down;
 *  - a bucket issued after stage s holds no float a later stage writes
 *    (it would be all-reduced before it is final);
 *  - a bucket is cut once at least the asked size is final (or at the last
 *    stage), so 0 KiB means one all-reduce after the backward.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dist/dist.h"

static void check_plan(const tf_dist *d, const size_t *hi, int nstages, size_t n) {
    assert_true(d->nbk >= 1);
    size_t top = n;
    for (int i = 0; i < d->nbk; i++) {
        const tf_dist_bucket *b = &d->bk[i];
        assert_true(b->n > 0);
        assert_int_equal(b->lo + b->n, top); /* from the top down, no gap */
        top = b->lo;
        assert_true(b->stage >= 0 && b->stage < nstages);
        if (i) assert_true(b->stage >= d->bk[i - 1].stage);
        for (int t = b->stage + 1; t < nstages; t++) assert_true(hi[t] <= b->lo);
    }
    assert_int_equal(top, 0);
    assert_int_equal(d->bk[d->nbk - 1].stage, nstages - 1);
}

/* A model-like record: stage 0 zeroes everything, then stages write
 * descending ranges, with one stage that also writes near the top (the
 * LayerNorms a block's pair modules keep after its weights). */
static void test_buckets_follow_the_writes(void **state) {
    (void)state;
    enum { S = 12 };
    const size_t n = 12000;
    size_t hi[S];
    hi[0] = n;
    for (int s = 1; s < S; s++) hi[s] = n - (size_t)s * 1000;
    hi[4] = n - 100; /* writes up there until stage 4 */
    const double sizes[] = {0, 4, 1000 * 4, 3000 * 4, 1e9};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        tf_dist d = {.size = 2, .bucket_bytes = sizes[k]};
        assert_int_equal(tf_dist_plan_buckets(&d, hi, S, n), 0);
        check_plan(&d, hi, S, n);
        if (sizes[k] == 0 || sizes[k] >= n * sizeof(float)) {
            assert_int_equal(d.nbk, 1); /* one all-reduce after the backward */
        } else {
            assert_true(d.nbk > 1);
            /* below the top 100 floats nothing is final before stage 4 */
            for (int i = 0; i < d.nbk; i++)
                if (d.bk[i].stage < 4) assert_true(d.bk[i].lo >= n - 100);
            assert_true(d.bk[d.nbk - 1].stage >= 4);
            for (int i = 0; i + 1 < d.nbk; i++)
                assert_true(d.bk[i].n * sizeof(float) >= sizes[k]);
        }
        printf("  bucket %.0f bytes: %d buckets\n", sizes[k], d.nbk);
        tf_dist_plan_buckets(&d, NULL, 0, 0);
        assert_null(d.bk);
    }
}

/* More floats than one MPI call counts: pieces of at most 2^30. */
static void test_buckets_split_large(void **state) {
    (void)state;
    const size_t n = ((size_t)1 << 31) + 5;
    size_t hi[1] = {n};
    tf_dist d = {.size = 2};
    assert_int_equal(tf_dist_plan_buckets(&d, hi, 1, n), 0);
    check_plan(&d, hi, 1, n);
    assert_int_equal(d.nbk, 3);
    for (int i = 0; i < d.nbk; i++) assert_true(d.bk[i].n <= (size_t)1 << 30);
    tf_dist_plan_buckets(&d, NULL, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_follow_the_writes),
        cmocka_unit_test(test_buckets_split_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
