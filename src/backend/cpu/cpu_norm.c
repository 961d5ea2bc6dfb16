/* LayerNorm and row softmax over the last axis, rows in parallel.
 *
 * LayerNorm backward reduces dgamma/dbeta over rows deterministically and
 * independently of the thread count: rows are cut into fixed chunks of
 * LN_CHUNK, each chunk's partial sums are written to scratch, and the partials
 * are then added in chunk order. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

#define LN_CHUNK 64

void tf_cpu_layernorm_fwd(tf_backend *be, float *out, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, long rows, int C, float eps) {
    const float invC = 1.0f / (float)C;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *restrict o = out + r * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++)
            s += xr[c];
        const float mu = s * invC;
        float v = 0.0f; /* two-pass variance: no cancellation when |mean| >> std */
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) {
            float d = xr[c] - mu;
            v += d * d;
        }
        const float rs = 1.0f / sqrtf(v * invC + eps);
#pragma omp simd
        for (int c = 0; c < C; c++)
            o[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

/* One row of the input gradient:
 *   xhat = (x - mu) * rs, g = dout * gamma,
 *   dx = rs * (g - mean(g) - xhat * mean(g * xhat)). */
static inline void ln_bwd_row(float *dx, const float *dout, const float *x, float mu, float rs,
                              const float *gamma, int C, int accumulate) {
    float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
    for (int c = 0; c < C; c++) {
        float g = dout[c] * gamma[c];
        s1 += g;
        s2 += g * ((x[c] - mu) * rs);
    }
    const float m1 = s1 / (float)C, m2 = s2 / (float)C;
    if (accumulate) {
#pragma omp simd
        for (int c = 0; c < C; c++)
            dx[c] += rs * (dout[c] * gamma[c] - m1 - (x[c] - mu) * rs * m2);
    } else {
#pragma omp simd
        for (int c = 0; c < C; c++)
            dx[c] = rs * (dout[c] * gamma[c] - m1 - (x[c] - mu) * rs * m2);
    }
}

void tf_cpu_layernorm_bwd(tf_backend *be, float *dx, float *dgamma, float *dbeta, const float *dout,
                          const float *x, const float *mean, const float *rstd, const float *gamma,
                          long rows, int C, int accumulate) {
    if (rows <= 0 || C <= 0)
        return;
    const long nchunk = (rows + LN_CHUNK - 1) / LN_CHUNK;
    const size_t cp = tf_cpu_pad_floats((size_t)C);
    float *part = tf_cpu_scratch(be, (size_t)nchunk * 2 * cp * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nchunk; k++) {
        float *restrict pg = part + (size_t)k * 2 * cp;
        float *restrict pb = pg + cp;
        memset(pg, 0, 2 * cp * sizeof(float));
        const long r1 = (k + 1) * LN_CHUNK < rows ? (k + 1) * LN_CHUNK : rows;
        for (long r = k * LN_CHUNK; r < r1; r++) {
            const float *dr = dout + r * C, *xr = x + r * C;
            const float mu = mean[r], rs = rstd[r];
            ln_bwd_row(dx + r * C, dr, xr, mu, rs, gamma, C, accumulate);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                pg[c] += dr[c] * ((xr[c] - mu) * rs);
                pb[c] += dr[c];
            }
        }
    }
    /* Fixed-order reduction of the chunk partials into chunk 0, then +=. */
    for (long k = 1; k < nchunk; k++) {
        const float *pg = part + (size_t)k * 2 * cp;
#pragma omp simd
        for (size_t c = 0; c < 2 * cp; c++)
            part[c] += pg[c];
    }
    for (int c = 0; c < C; c++) {
        dgamma[c] += part[c];
        dbeta[c] += part[cp + c];
    }
}

void tf_cpu_softmax_fwd(tf_backend *be, float *y, const float *x, long rows, int cols) {
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols; /* may alias xr: each element is read before written */
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int c = 0; c < cols; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < cols; c++) {
            float e = tf_cpu_expf(xr[c] - mx);
            yr[c] = e;
            s += e;
        }
        const float inv = 1.0f / s;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            yr[c] *= inv;
    }
}

void tf_cpu_softmax_bwd(tf_backend *be, float *dx, const float *dy, const float *y, long rows,
                        int cols) {
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *dyr = dy + r * cols, *yr = y + r * cols;
        float *dxr = dx + r * cols; /* may alias dyr */
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < cols; c++)
            s += dyr[c] * yr[c];
#pragma omp simd
        for (int c = 0; c < cols; c++)
            dxr[c] = yr[c] * (dyr[c] - s);
    }
}
