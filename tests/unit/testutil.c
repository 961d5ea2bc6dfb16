/* Shared unit-test helpers (see testutil.h). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tf_test_rng_init(tf_test_rng *r, uint64_t seed) { r->s = seed; }

uint64_t tf_test_rng_next(tf_test_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double tf_test_rng_uniform(tf_test_rng *r) {
    return (double)(tf_test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

double tf_test_rng_normal(tf_test_rng *r) {
    /* Box-Muller; 1 - u keeps the log argument in (0, 1]. */
    const double u1 = 1.0 - tf_test_rng_uniform(r), u2 = tf_test_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int tf_test_rng_int(tf_test_rng *r, int n) {
    return n > 0 ? (int)(tf_test_rng_next(r) % (uint64_t)n) : 0;
}

void tf_test_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
    tf_test_rng r;
    tf_test_rng_init(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * tf_test_rng_uniform(&r));
}

void tf_test_fill_normal(float *x, size_t n, float mean, float std, uint64_t seed) {
    tf_test_rng r;
    tf_test_rng_init(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(mean + std * tf_test_rng_normal(&r));
}

void tf_test_fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

float *tf_test_falloc(size_t n) { return xmalloc(n * sizeof(float)); }
double *tf_test_dalloc(size_t n) { return xmalloc(n * sizeof(double)); }

double tf_test_max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

double tf_test_max_abs_d(const double *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

double tf_test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) /* also catches NaN */
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

double tf_test_max_abs_err(const float *got, const double *ref, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        if (!(d <= m))
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

double tf_test_norm_err(const float *got, const double *ref, size_t n, double floor) {
    const double den = fmax(tf_test_max_abs_d(ref, n), floor);
    return tf_test_max_abs_err(got, ref, n) / den;
}

size_t tf_test_check_close(const char *what, const float *got, const double *ref, size_t n,
                           double atol, double rtol) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        if (d <= atol + rtol * fabs(ref[i]))
            continue;
        if (bad < 5)
            fprintf(stderr, "%s[%zu]: got %.9g want %.9g (|diff| %.3g > %.3g)\n", what, i,
                    (double)got[i], ref[i], d, atol + rtol * fabs(ref[i]));
        bad++;
    }
    if (bad > 5)
        fprintf(stderr, "%s: %zu of %zu elements differ\n", what, bad, n);
    return bad;
}

int tf_test_bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

int tf_test_all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

int tf_test_cpu_backend_ex(tf_backend **be, const tf_ops **ops, int threads, int level) {
    tf_backend_opts o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.kernel_level = level;
    char err[256] = "";
    if (tf_cpu_backend_create(be, ops, &o, err, sizeof err) != 0) {
        fprintf(stderr, "test: cpu backend: %s\n", err);
        return 1;
    }
    return 0;
}

int tf_test_cpu_backend(tf_backend **be, const tf_ops **ops) {
    return tf_test_cpu_backend_ex(be, ops, 2, 2);
}
