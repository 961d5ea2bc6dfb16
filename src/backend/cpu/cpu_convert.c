/* Element types on the CPU: the convert and check_finite ops, and the
 * widening and rounding that the bf16/fp16 paths of the other ops run their
 * fp32 arithmetic between (ops.h: a half input is widened exactly, the fp32
 * result rounded once at the store). All conversions are tf_dtype.h's. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* elements per task of the conversion loops */
#define CONV_BLK 4096

void tf_cpu_dtype_check(tf_dtype t, const char *op) {
    if (tf_dtype_valid(t))
        return;
    fprintf(stderr, "tinyfold: internal error: cpu %s with element type %d (known: fp32 0, bf16 1, "
            "fp16 2)\n", op, (int)t);
    abort();
}

void tf_cpu_widen(tf_backend *be, float *dst, const void *src, tf_dtype t, long n) {
    const long nblk = (n + CONV_BLK - 1) / CONV_BLK;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long i0 = k * CONV_BLK, m = n - i0 < CONV_BLK ? n - i0 : CONV_BLK;
        tf_dtype_to_f32(dst + i0, tf_cpu_cat(src, t, i0), t, (size_t)m);
    }
}

void tf_cpu_narrow(tf_backend *be, void *dst, tf_dtype t, const float *src, long n) {
    const long nblk = (n + CONV_BLK - 1) / CONV_BLK;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long i0 = k * CONV_BLK, m = n - i0 < CONV_BLK ? n - i0 : CONV_BLK;
        tf_dtype_from_f32(tf_cpu_at(dst, t, i0), t, src + i0, (size_t)m);
    }
}

void tf_cpu_widen_rows(tf_backend *be, float *dst, const void *src, tf_dtype t, long ld,
                       long rows, long cols) {
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++)
        tf_dtype_to_f32(dst + r * cols, tf_cpu_cat(src, t, r * ld), t, (size_t)cols);
}

void tf_cpu_narrow_rows(tf_backend *be, void *dst, tf_dtype t, long ld, const float *src,
                        long rows, long cols) {
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++)
        tf_dtype_from_f32(tf_cpu_at(dst, t, r * ld), t, src + r * cols, (size_t)cols);
}

void tf_cpu_convert(tf_backend *be, void *dst, tf_dtype dt, const void *src, tf_dtype st, long n) {
    tf_cpu_dtype_check(dt, "convert");
    tf_cpu_dtype_check(st, "convert");
    if (n <= 0)
        return;
    if (dt == st) {
        memcpy(dst, src, (size_t)n * tf_dtype_size(dt));
        return;
    }
    if (st == TF_F32) {
        tf_cpu_narrow(be, dst, dt, src, n);
        return;
    }
    if (dt == TF_F32) {
        tf_cpu_widen(be, dst, src, st, n);
        return;
    }
    /* bf16 <-> fp16: widened exactly, so rounded once from the value itself */
    const long nblk = (n + CONV_BLK - 1) / CONV_BLK;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long i0 = k * CONV_BLK, m = n - i0 < CONV_BLK ? n - i0 : CONV_BLK;
        float f[CONV_BLK];
        tf_dtype_to_f32(f, tf_cpu_cat(src, st, i0), st, (size_t)m);
        tf_dtype_from_f32(tf_cpu_at(dst, dt, i0), dt, f, (size_t)m);
    }
}

void tf_cpu_check_finite(tf_backend *be, float *flag, const float *x, long n) {
    int bad = 0;
    /* inf and NaN are the patterns with every exponent bit set */
#pragma omp parallel for simd reduction(| : bad) num_threads(be->threads)                         \
    if (parallel : n >= TF_CPU_PAR_MIN)
    for (long i = 0; i < n; i++)
        bad |= (tf_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
    if (bad)
        flag[0] = 1.0f;
}
