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
 * (test_cpu_ops checks it); it only saves the passes over the intermediate.
 *
 * bf16/fp16 tensors (x and dx of type xt, out and dout of type yt): each row
 * goes through per-thread fp32 row buffers (tf_cpu_row_in/_out/_store), so
 * the row functions below run unchanged on the exact values and each output
 * is rounded once; fp32 rows are used in place. */
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

/* The op's scratch: `extra` floats, then nbuf fp32 rows of C per thread
 * (*cp floats apart) for the half tensors of a row loop (unused by fp32
 * tensors: a few KB, not worth a case of its own). */
static float *row_bufs(tf_backend *be, int nbuf, int C, size_t extra, size_t *cp) {
    *cp = tf_cpu_pad_floats((size_t)C);
    return tf_cpu_scratch(be, (extra + (size_t)be->threads * (size_t)nbuf * *cp) * sizeof(float));
}

void tf_cpu_layernorm_fwd(tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                          const float *gamma, const float *beta, long rows, int C, float eps,
                          tf_dtype xt, tf_dtype yt) {
    tf_cpu_dtype_check(xt, "layernorm_fwd");
    tf_cpu_dtype_check(yt, "layernorm_fwd");
    if (rows <= 0 || C <= 0)
        return;
    size_t cp;
    float *bufs = row_bufs(be, 2, C, 0, &cp);
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *bx = bufs + (size_t)omp_get_thread_num() * 2 * cp, *bo = bx + cp;
        const float *xr = tf_cpu_row_in(bx, x, xt, r * C, C);
        float *orow = tf_cpu_row_out(bo, out, yt, r * C, C, 0);
        ln_fwd_row(orow, mean + r, rstd + r, xr, gamma, beta, C, eps);
        tf_cpu_row_store(out, yt, r * C, orow, C);
    }
}

/* y1 = LN(x; g1, b1) goes through out first (the same floats as a stored y1),
 * then out = LN(y1; g2, b2) row by row from a per-thread copy. */
void tf_cpu_layernorm2_fwd(tf_backend *be, void *out, float *stats, const void *x,
                           const float *g1, const float *b1, const float *g2, const float *b2,
                           long rows, int C, float eps, tf_dtype xt, tf_dtype yt) {
    tf_cpu_dtype_check(xt, "layernorm2_fwd");
    tf_cpu_dtype_check(yt, "layernorm2_fwd");
    if (rows <= 0 || C <= 0)
        return;
    size_t cp;
    float *tmp = row_bufs(be, 3, C, 0, &cp); /* y1, x, out */
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *y1 = tmp + (size_t)omp_get_thread_num() * 3 * cp;
        const float *xr = tf_cpu_row_in(y1 + cp, x, xt, r * C, C);
        float *orow = tf_cpu_row_out(y1 + 2 * cp, out, yt, r * C, C, 0);
        ln_fwd_row(y1, stats + r, stats + rows + r, xr, g1, b1, C, eps);
        ln_fwd_row(orow, stats + 2 * rows + r, stats + 3 * rows + r, y1, g2, b2, C, eps);
        tf_cpu_row_store(out, yt, r * C, orow, C);
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

/* dxh (layernorm_bwd's rounded copy, NULL: none): row r of dx, whose fp32
 * values are dxr (xt is fp32: dxr are the stored values), rounded to yt */
static inline void ln_store_copy(void *dxh, tf_dtype yt, long off, const float *dxr, int C) {
    if (dxh)
        tf_dtype_from_f32(tf_cpu_at(dxh, yt, off), yt, dxr, (size_t)C);
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

void tf_cpu_layernorm_bwd(tf_backend *be, void *dx, void *dxh, float *dgamma, float *dbeta,
                          const void *dout, const void *x, const float *mean, const float *rstd,
                          const float *gamma, long rows, int C, int accumulate, tf_dtype xt,
                          tf_dtype yt) {
    tf_cpu_dtype_check(xt, "layernorm_bwd");
    tf_cpu_dtype_check(yt, "layernorm_bwd");
    if (rows <= 0 || C <= 0)
        return;
    const long nchunk = (rows + LN_CHUNK - 1) / LN_CHUNK;
    size_t cp;
    float *part = row_bufs(be, 3, C, (size_t)nchunk * 2 * tf_cpu_pad_floats((size_t)C), &cp);
    float *rowbuf = part + (size_t)nchunk * 2 * cp; /* dout, x, dx rows of half types */
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nchunk; k++) {
        float *restrict pg = part + (size_t)k * 2 * cp;
        float *restrict pb = pg + cp;
        float *rb = rowbuf + (size_t)omp_get_thread_num() * 3 * cp;
        memset(pg, 0, 2 * cp * sizeof(float));
        const long r1 = (k + 1) * LN_CHUNK < rows ? (k + 1) * LN_CHUNK : rows;
        for (long r = k * LN_CHUNK; r < r1; r++) {
            const float *dr = tf_cpu_row_in(rb, dout, yt, r * C, C),
                        *xr = tf_cpu_row_in(rb + cp, x, xt, r * C, C);
            float *dxr = tf_cpu_row_out(rb + 2 * cp, dx, xt, r * C, C, accumulate);
            const float mu = mean[r], rs = rstd[r];
            ln_bwd_row(dxr, dr, xr, mu, rs, gamma, C, accumulate);
            tf_cpu_row_store(dx, xt, r * C, dxr, C);
            ln_store_copy(dxh, yt, r * C, dxr, C);
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
void tf_cpu_layernorm2_bwd(tf_backend *be, void *dx, void *dxh, float *dg1, float *db1,
                           float *dg2, float *db2, const void *dout, const void *x,
                           const float *stats, const float *g1, const float *b1, const float *g2,
                           long rows, int C, int accumulate, tf_dtype xt, tf_dtype yt) {
    tf_cpu_dtype_check(xt, "layernorm2_bwd");
    tf_cpu_dtype_check(yt, "layernorm2_bwd");
    if (rows <= 0 || C <= 0)
        return;
    const long nchunk = (rows + LN_CHUNK - 1) / LN_CHUNK;
    size_t cp; /* 5 rows a thread: y1, dy1, then dout, x, dx */
    float *part = row_bufs(be, 5, C, (size_t)nchunk * 4 * tf_cpu_pad_floats((size_t)C), &cp);
    const float *m1 = stats, *r1 = stats + rows, *m2 = stats + 2 * rows, *r2 = stats + 3 * rows;
    float *rowtmp = part + (size_t)nchunk * 4 * cp;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nchunk; k++) {
        float *restrict p = part + (size_t)k * 4 * cp; /* dg1 db1 dg2 db2 */
        float *restrict y1 = rowtmp + (size_t)omp_get_thread_num() * 5 * cp, *restrict dy1 = y1 + cp;
        float *rb = rowtmp + (size_t)omp_get_thread_num() * 5 * cp + 2 * cp; /* the half rows */
        memset(p, 0, 4 * cp * sizeof(float));
        const long e = (k + 1) * LN_CHUNK < rows ? (k + 1) * LN_CHUNK : rows;
        for (long r = k * LN_CHUNK; r < e; r++) {
            const float *dr = tf_cpu_row_in(rb, dout, yt, r * C, C),
                        *xr = tf_cpu_row_in(rb + cp, x, xt, r * C, C);
            float *dxr = tf_cpu_row_out(rb + 2 * cp, dx, xt, r * C, C, accumulate);
#pragma omp simd
            for (int c = 0; c < C; c++)
                y1[c] = (xr[c] - m1[r]) * r1[r] * g1[c] + b1[c];
            ln_bwd_row(dy1, dr, y1, m2[r], r2[r], g2, C, 0);
            ln_bwd_row(dxr, dy1, xr, m1[r], r1[r], g1, C, accumulate);
            tf_cpu_row_store(dx, xt, r * C, dxr, C);
            ln_store_copy(dxh, yt, r * C, dxr, C);
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

void tf_cpu_softmax_fwd(tf_backend *be, void *y, const void *x, long rows, int cols, tf_dtype t) {
    tf_cpu_dtype_check(t, "softmax_fwd");
    if (rows <= 0 || cols <= 0)
        return;
    size_t cp;
    float *bufs = row_bufs(be, 1, cols, 0, &cp);
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        /* a half row is widened into the buffer and y computed there in place */
        float *rb = bufs + (size_t)omp_get_thread_num() * cp;
        const float *xr = tf_cpu_row_in(rb, x, t, r * cols, cols);
        float *yr = tf_cpu_row_out(rb, y, t, r * cols, cols, 0); /* may alias xr: each element is read before written */
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
        tf_cpu_row_store(y, t, r * cols, yr, cols);
    }
}

void tf_cpu_softmax_bwd(tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                        int cols, tf_dtype t) {
    tf_cpu_dtype_check(t, "softmax_bwd");
    if (rows <= 0 || cols <= 0)
        return;
    size_t cp;
    float *bufs = row_bufs(be, 2, cols, 0, &cp);
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * cols >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *rb = bufs + (size_t)omp_get_thread_num() * 2 * cp;
        const float *dyr = tf_cpu_row_in(rb, dy, t, r * cols, cols),
                    *yr = tf_cpu_row_in(rb + cp, y, t, r * cols, cols);
        float *dxr = tf_cpu_row_out(rb, dx, t, r * cols, cols, 0); /* may alias dyr */
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < cols; c++)
            s += dyr[c] * yr[c];
#pragma omp simd
        for (int c = 0; c < cols; c++)
            dxr[c] = yr[c] * (dyr[c] - s);
        tf_cpu_row_store(dx, t, r * cols, dxr, cols);
    }
}
