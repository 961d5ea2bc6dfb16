/* LayerNorm and row softmax over the last axis, rows in parallel.
 *
 * LayerNorm backward reduces dgamma/dbeta over rows deterministically and
 * independently of the thread count: rows are cut into fixed chunks of
 * LN_CHUNK, each chunk's partial sums are written to scratch, and the partials
 * are then added in chunk order.
 *
 * layernorm2 (two LayerNorms in a row) runs each row through both with the
 * same per-row arithmetic and the same chunked sums as the two ops one after
 * the other, so its results are bit-identical to that composition
 * (test_cpu_ops checks it); it only saves the passes over the intermediate. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

#define LN_CHUNK 64

/* One row: o = LN(x), returns the statistics (two-pass variance: no
 * cancellation when |mean| >> std). o may not alias x. */
static inline void ln_fwd_row(float *restrict o, float *mu_out, float *rs_out, const float *x,
                              const float *gamma, const float *beta, int C, float eps) {
    const float invC = 1.0f / (float)C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++)
        s += x[c];
    const float mu = s * invC;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) {
        float d = x[c] - mu;
        v += d * d;
    }
    const float rs = 1.0f / sqrtf(v * invC + eps);
#pragma omp simd
    for (int c = 0; c < C; c++)
        o[c] = (x[c] - mu) * rs * gamma[c] + beta[c];
    *mu_out = mu;
    *rs_out = rs;
}

void tf_cpu_layernorm_fwd(tf_backend *be, float *out, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, long rows, int C, float eps) {
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++)
        ln_fwd_row(out + r * C, mean + r, rstd + r, x + r * C, gamma, beta, C, eps);
}

/* y1 = LN(x; g1, b1) goes through out first (the same floats as a stored y1),
 * then out = LN(y1; g2, b2) row by row from a per-thread copy. */
void tf_cpu_layernorm2_fwd(tf_backend *be, float *out, float *stats, const float *x,
                           const float *g1, const float *b1, const float *g2, const float *b2,
                           long rows, int C, float eps) {
    if (rows <= 0 || C <= 0)
        return;
    const size_t cp = tf_cpu_pad_floats((size_t)C);
    float *tmp = tf_cpu_scratch(be, (size_t)be->threads * cp * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *y1 = tmp + (size_t)omp_get_thread_num() * cp;
        ln_fwd_row(y1, stats + r, stats + rows + r, x + r * C, g1, b1, C, eps);
        ln_fwd_row(out + r * C, stats + 2 * rows + r, stats + 3 * rows + r, y1, g2, b2, C, eps);
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

/* The chunks' partial rows (nq vectors of C, cp apart, per chunk) added in
 * chunk order into chunk 0, then vector q into out[q] (+=). */
static void ln_add_chunks(float *part, long nchunk, size_t cp, int nq, float *const *out, int C) {
    const size_t w = (size_t)nq * cp;
    for (long k = 1; k < nchunk; k++) {
        const float *pk = part + (size_t)k * w;
#pragma omp simd
        for (size_t c = 0; c < w; c++)
            part[c] += pk[c];
    }
    for (int q = 0; q < nq; q++)
        for (int c = 0; c < C; c++)
            out[q][c] += part[(size_t)q * cp + c];
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
    ln_add_chunks(part, nchunk, cp, 2, (float *const[]){dgamma, dbeta}, C);
}

/* Per chunk of rows: recompute y1, then LN2's backward (into a per-thread
 * row dy1) and LN1's, with the four parameter partials summed in the order
 * of the two separate ops' chunks. */
void tf_cpu_layernorm2_bwd(tf_backend *be, float *dx, float *dg1, float *db1, float *dg2,
                           float *db2, const float *dout, const float *x, const float *stats,
                           const float *g1, const float *b1, const float *g2, long rows, int C,
                           int accumulate) {
    if (rows <= 0 || C <= 0)
        return;
    const long nchunk = (rows + LN_CHUNK - 1) / LN_CHUNK;
    const size_t cp = tf_cpu_pad_floats((size_t)C);
    const float *m1 = stats, *r1 = stats + rows, *m2 = stats + 2 * rows, *r2 = stats + 3 * rows;
    float *part = tf_cpu_scratch(
        be, ((size_t)nchunk * 4 * cp + (size_t)be->threads * 2 * cp) * sizeof(float));
    float *rowtmp = part + (size_t)nchunk * 4 * cp;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nchunk; k++) {
        float *restrict p = part + (size_t)k * 4 * cp; /* dg1 db1 dg2 db2 */
        float *restrict y1 = rowtmp + (size_t)omp_get_thread_num() * 2 * cp, *restrict dy1 = y1 + cp;
        memset(p, 0, 4 * cp * sizeof(float));
        const long e = (k + 1) * LN_CHUNK < rows ? (k + 1) * LN_CHUNK : rows;
        for (long r = k * LN_CHUNK; r < e; r++) {
            const float *dr = dout + r * C, *xr = x + r * C;
#pragma omp simd
            for (int c = 0; c < C; c++)
                y1[c] = (xr[c] - m1[r]) * r1[r] * g1[c] + b1[c];
            ln_bwd_row(dy1, dr, y1, m2[r], r2[r], g2, C, 0);
            ln_bwd_row(dx + r * C, dy1, xr, m1[r], r1[r], g1, C, accumulate);
#pragma omp simd
            for (int c = 0; c < C; c++) {
                p[2 * cp + c] += dr[c] * ((y1[c] - m2[r]) * r2[r]);
                p[3 * cp + c] += dr[c];
                p[c] += dy1[c] * ((xr[c] - m1[r]) * r1[r]);
                p[cp + c] += dy1[c];
            }
        }
    }
    ln_add_chunks(part, nchunk, cp, 4, (float *const[]){dg1, db1, dg2, db2}, C);
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
