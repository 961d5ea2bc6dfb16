/* Shared helpers for the unit tests: a seeded RNG and random fills, error
 * measures against double-precision references, and a CPU backend.
 * Nothing here depends on cmocka; tests assert on the returned values. */
#ifndef TF_TESTUTIL_H
#define TF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Unit roundoff of fp32 (2^-24): the relative error of one rounding. */
#define TF_TEST_U 5.9604644775390625e-8
/* exit status of a test that cannot run here (no CUDA device): ctest reports it skipped
 * (SKIP_RETURN_CODE, CMakeLists.txt) */
#define TF_TEST_SKIP 77

/* splitmix64: small, seedable, identical on every platform. */
typedef struct {
    uint64_t s;
} tf_test_rng;

void tf_test_rng_init(tf_test_rng *r, uint64_t seed);
uint64_t tf_test_rng_next(tf_test_rng *r);
double tf_test_rng_uniform(tf_test_rng *r); /* [0, 1) */
double tf_test_rng_normal(tf_test_rng *r);  /* N(0, 1) */
int tf_test_rng_int(tf_test_rng *r, int n); /* [0, n) */

/* Fill with uniform [lo, hi) / normal(mean, std) values from `seed`. */
void tf_test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);
void tf_test_fill_normal(float *x, size_t n, float mean, float std, uint64_t seed);
void tf_test_fill_const(float *x, size_t n, float v);

/* malloc that aborts on failure (tests only); free with free(). */
float *tf_test_falloc(size_t n);
double *tf_test_dalloc(size_t n);

/* max |x| */
double tf_test_max_abs(const float *x, size_t n);
double tf_test_max_abs_d(const double *x, size_t n);
/* max |a - b| */
double tf_test_max_abs_diff(const float *a, const float *b, size_t n);
/* max |got - ref| */
double tf_test_max_abs_err(const float *got, const double *ref, size_t n);
/* Normalised error: max |got - ref| / max(max |ref|, floor). NaN/Inf in got
 * give +Inf (so a `<= tol` check fails). */
double tf_test_norm_err(const float *got, const double *ref, size_t n, double floor);
/* Element-wise check |got - ref| <= atol + rtol * |ref|; prints the first few
 * failures (prefixed by `what`) to stderr and returns how many failed. */
size_t tf_test_check_close(const char *what, const float *got, const double *ref, size_t n,
                           double atol, double rtol);
/* 1 if the n floats are bit-identical. */
int tf_test_bits_equal(const float *a, const float *b, size_t n);
/* 1 if all n floats are finite. */
int tf_test_all_finite(const float *x, size_t n);

/* A CPU backend with 2 threads (kernel level 2). Returns 0 on success; on
 * failure prints the error and returns non-zero. Destroy with
 * tf_cpu_backend_destroy(). */
int tf_test_cpu_backend(tf_backend **be, const tf_ops **ops);
/* Same with a given thread count and kernel level. */
int tf_test_cpu_backend_ex(tf_backend **be, const tf_ops **ops, int threads, int level);

#endif
