/* Elementwise families, gating, embedding, the distance head + MSE loss and
 * AdamW. All elementwise ops may run in place (outputs may alias inputs):
 * no restrict, and every loop body reads its inputs before writing.
 *
 * bf16/fp16 (ops.h): the fp32 loops run on fp32 tensors in place; a half op
 * runs blocks of EW_BLK elements in parallel, widens the block's inputs into
 * per-thread fp32 arrays, evaluates the same per-element expression on them
 * and rounds the outputs once at the store. A block's inputs are all read
 * before its outputs are written, so those ops run in place too. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* `if (parallel: ...)`, not a plain `if`: OpenMP 5 applies a plain one to the
 * simd part too, and small n would then not be vectorised. */
#define PAR_FOR                                                                                    \
    _Pragma("omp parallel for simd num_threads(be->threads) if (parallel : n >= TF_CPU_PAR_MIN)")

/* the half path's blocks: i0 steps over [0, n), m = the block's length */
#define EW_BLK 1024
#define HALF_BLOCKS(n)                                                                             \
    _Pragma("omp parallel for schedule(static) num_threads(be->threads) if (n >= TF_CPU_PAR_MIN)") \
    for (long i0 = 0; i0 < (n); i0 += EW_BLK)
#define BLK_LEN(n, i0) ((n) - (i0) < EW_BLK ? (n) - (i0) : EW_BLK)

static inline void ld_blk(float *f, const void *p, tf_dtype t, long i0, long m) {
    tf_dtype_to_f32(f, tf_cpu_cat(p, t, i0), t, (size_t)m);
}
static inline void st_blk(void *p, tf_dtype t, long i0, const float *f, long m) {
    tf_dtype_from_f32(tf_cpu_at(p, t, i0), t, f, (size_t)m);
}

/* the per-element arithmetic both paths share */
static inline float relu1(float x) { return x > 0.0f ? x : 0.0f; }
static inline float dsigmoid1(float dy, float y) { return dy * y * (1.0f - y); }
/* relu'(x) from the output: 1 where y > 0 (the subgradient at 0 is 0, as PyTorch) */
static inline float drelu1(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

void tf_cpu_add(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t) {
    if (t == TF_F32) {
        float *yf = y;
        const float *af = a, *bf = b;
        PAR_FOR
        for (long i = 0; i < n; i++)
            yf[i] = af[i] + bf[i];
        return;
    }
    tf_cpu_dtype_check(t, "add");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fa[EW_BLK], fb[EW_BLK];
        ld_blk(fa, a, t, i0, m);
        ld_blk(fb, b, t, i0, m);
        for (long i = 0; i < m; i++)
            fa[i] = fa[i] + fb[i];
        st_blk(y, t, i0, fa, m);
    }
}

void tf_cpu_mul(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t) {
    if (t == TF_F32) {
        float *yf = y;
        const float *af = a, *bf = b;
        PAR_FOR
        for (long i = 0; i < n; i++)
            yf[i] = af[i] * bf[i];
        return;
    }
    tf_cpu_dtype_check(t, "mul");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fa[EW_BLK], fb[EW_BLK];
        ld_blk(fa, a, t, i0, m);
        ld_blk(fb, b, t, i0, m);
        for (long i = 0; i < m; i++)
            fa[i] = fa[i] * fb[i];
        st_blk(y, t, i0, fa, m);
    }
}

void tf_cpu_scale(tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t) {
    if (t == TF_F32) {
        float *yf = y;
        const float *xf = x;
        PAR_FOR
        for (long i = 0; i < n; i++)
            yf[i] = alpha * xf[i];
        return;
    }
    tf_cpu_dtype_check(t, "scale");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fx[EW_BLK];
        ld_blk(fx, x, t, i0, m);
        for (long i = 0; i < m; i++)
            fx[i] = alpha * fx[i];
        st_blk(y, t, i0, fx, m);
    }
}

void tf_cpu_act_fwd(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t) {
    const int sig = act == TF_ACT_SIGMOID;
    if (t == TF_F32) {
        float *yf = y;
        const float *xf = x;
        if (sig) {
            PAR_FOR
            for (long i = 0; i < n; i++)
                yf[i] = tf_cpu_sigmoidf(xf[i]);
        } else {
            PAR_FOR
            for (long i = 0; i < n; i++)
                yf[i] = relu1(xf[i]);
        }
        return;
    }
    tf_cpu_dtype_check(t, "act_fwd");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fx[EW_BLK];
        ld_blk(fx, x, t, i0, m);
        if (sig)
            for (long i = 0; i < m; i++)
                fx[i] = tf_cpu_sigmoidf(fx[i]);
        else
            for (long i = 0; i < m; i++)
                fx[i] = relu1(fx[i]);
        st_blk(y, t, i0, fx, m);
    }
}

void tf_cpu_act_bwd(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                    tf_dtype t) {
    const int sig = act == TF_ACT_SIGMOID;
    if (t == TF_F32) {
        float *dxf = dx;
        const float *dyf = dy, *yf = y;
        if (sig) {
            PAR_FOR
            for (long i = 0; i < n; i++)
                dxf[i] = dsigmoid1(dyf[i], yf[i]);
        } else {
            PAR_FOR
            for (long i = 0; i < n; i++)
                dxf[i] = drelu1(dyf[i], yf[i]);
        }
        return;
    }
    tf_cpu_dtype_check(t, "act_bwd");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fd[EW_BLK], fy[EW_BLK];
        ld_blk(fd, dy, t, i0, m);
        ld_blk(fy, y, t, i0, m);
        if (sig)
            for (long i = 0; i < m; i++)
                fd[i] = dsigmoid1(fd[i], fy[i]);
        else
            for (long i = 0; i < m; i++)
                fd[i] = drelu1(fd[i], fy[i]);
        st_blk(dx, t, i0, fd, m);
    }
}

void tf_cpu_gate_fwd(tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t) {
    if (t == TF_F32) {
        float *yf = y;
        const float *af = a, *gf = g;
        PAR_FOR
        for (long i = 0; i < n; i++)
            yf[i] = af[i] * tf_cpu_sigmoidf(gf[i]);
        return;
    }
    tf_cpu_dtype_check(t, "gate_fwd");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fa[EW_BLK], fg[EW_BLK];
        ld_blk(fa, a, t, i0, m);
        ld_blk(fg, g, t, i0, m);
        for (long i = 0; i < m; i++)
            fa[i] = fa[i] * tf_cpu_sigmoidf(fg[i]);
        st_blk(y, t, i0, fa, m);
    }
}

/* y = a sigmoid(g)'s gradients: da = dy*s, dg = dy*a*s*(1-s) (gate_bwd and
 * gate_cmajor_bwd: one definition, the same bits) */
static inline void gate_bwd_one(float *da, float *dg, float d, float a, float g) {
    const float s = tf_cpu_sigmoidf(g);
    *da = d * s;
    *dg = d * a * s * (1.0f - s);
}

void tf_cpu_gate_bwd(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                     const void *g, long n, tf_dtype t) {
    if (t == TF_F32) {
        float *daf = da, *dgf = dg;
        const float *dyf = dy, *af = a, *gf = g;
        PAR_FOR
        for (long i = 0; i < n; i++)
            gate_bwd_one(&daf[i], &dgf[i], dyf[i], af[i], gf[i]);
        return;
    }
    tf_cpu_dtype_check(t, "gate_bwd");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fd[EW_BLK], fa[EW_BLK], fg[EW_BLK];
        ld_blk(fd, dy, t, i0, m);
        ld_blk(fa, a, t, i0, m);
        ld_blk(fg, g, t, i0, m);
        for (long i = 0; i < m; i++) {
            const float d = fd[i], ai = fa[i], gi = fg[i];
            gate_bwd_one(&fa[i], &fg[i], d, ai, gi); /* fa: da, fg: dg */
        }
        st_blk(da, t, i0, fa, m);
        st_blk(dg, t, i0, fg, m);
    }
}

/* gated L|R to channel-major, in blocks of GC_BLK rows (the threads' unit):
 * the gating runs along each row (as gate_fwd/_bwd do) into a per-thread
 * [GC_BLK, 2C] fp32 tile, which is then transposed into (or out of) the 2C
 * channel-major rows; off[] holds each row's place, b*C*inner + p, within
 * its (s, c) row. Half rows of a, g, da, dg go through per-thread fp32 row
 * buffers (tf_cpu_row_in/_out), the tile's elements are rounded into (or
 * widened from) a half lr_t / dlr_t one by one. */
#define GC_BLK 64
static void gc_offsets(long *off, long r0, long r1, long inner, int C) {
    for (long r = r0; r < r1; r++) {
        const long b = r / inner;
        off[r - r0] = b * C * inner + (r - b * inner);
    }
}

/* per thread: the tile and, for a half type, 4 row buffers */
static size_t gc_per_thread(long w, tf_dtype t) {
    return tf_cpu_pad_floats((size_t)GC_BLK * (size_t)w) +
           (t == TF_F32 ? 0 : 4 * tf_cpu_pad_floats((size_t)w));
}

void tf_cpu_gate_cmajor_fwd(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                            long rows, long inner, int C, tf_dtype t) {
    tf_cpu_dtype_check(t, "gate_cmajor_fwd");
    const long nb = rows / inner, nblk = (rows + GC_BLK - 1) / GC_BLK, w = 2 * (long)C;
    const size_t per = gc_per_thread(w, t), wp = tf_cpu_pad_floats((size_t)w);
    float *scr = tf_cpu_scratch(be, (size_t)be->threads * per * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long r0 = k * GC_BLK, r1 = r0 + GC_BLK < rows ? r0 + GC_BLK : rows;
        float *tile = scr + (size_t)omp_get_thread_num() * per;
        float *rb = tile + tf_cpu_pad_floats((size_t)GC_BLK * (size_t)w); /* half rows */
        long off[GC_BLK];
        gc_offsets(off, r0, r1, inner, C);
        for (long r = r0; r < r1; r++) {
            const float *ar = tf_cpu_row_in(rb, a, t, r * ld, w),
                        *gr = tf_cpu_row_in(rb + wp, g, t, r * ld, w);
            float *tr = tile + (r - r0) * w;
            for (long sc = 0; sc < w; sc++) tr[sc] = ar[sc] * tf_cpu_sigmoidf(gr[sc]);
        }
        for (long sc = 0; sc < w; sc++) {
            const long o0 = (sc / C * nb * C + sc % C) * inner;
            if (t == TF_F32) {
                float *o = (float *)lr_t + o0;
                for (long r = r0; r < r1; r++) o[off[r - r0]] = tile[(r - r0) * w + sc];
            } else {
                uint16_t *o = (uint16_t *)lr_t + o0;
                for (long r = r0; r < r1; r++)
                    o[off[r - r0]] = tf_cpu_f32_to_half(tile[(r - r0) * w + sc], t);
            }
        }
    }
}

void tf_cpu_gate_cmajor_bwd(tf_backend *be, void *da, void *dg, const void *dlr_t,
                            const void *a, const void *g, long ld, long rows, long inner, int C,
                            tf_dtype t) {
    tf_cpu_dtype_check(t, "gate_cmajor_bwd");
    const long nb = rows / inner, nblk = (rows + GC_BLK - 1) / GC_BLK, w = 2 * (long)C;
    const size_t per = gc_per_thread(w, t), wp = tf_cpu_pad_floats((size_t)w);
    float *scr = tf_cpu_scratch(be, (size_t)be->threads * per * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long r0 = k * GC_BLK, r1 = r0 + GC_BLK < rows ? r0 + GC_BLK : rows;
        float *tile = scr + (size_t)omp_get_thread_num() * per;
        float *rb = tile + tf_cpu_pad_floats((size_t)GC_BLK * (size_t)w); /* half rows */
        long off[GC_BLK];
        gc_offsets(off, r0, r1, inner, C);
        for (long sc = 0; sc < w; sc++) {
            const long o0 = (sc / C * nb * C + sc % C) * inner;
            if (t == TF_F32) {
                const float *dy = (const float *)dlr_t + o0;
                for (long r = r0; r < r1; r++) tile[(r - r0) * w + sc] = dy[off[r - r0]];
            } else {
                const uint16_t *dy = (const uint16_t *)dlr_t + o0;
                for (long r = r0; r < r1; r++)
                    tile[(r - r0) * w + sc] = tf_cpu_half_to_f32(dy[off[r - r0]], t);
            }
        }
        for (long r = r0; r < r1; r++) {
            const float *ar = tf_cpu_row_in(rb, a, t, r * ld, w),
                        *gr = tf_cpu_row_in(rb + wp, g, t, r * ld, w), *tr = tile + (r - r0) * w;
            float *dar = tf_cpu_row_out(rb + 2 * wp, da, t, r * ld, w, 0),
                  *dgr = tf_cpu_row_out(rb + 3 * wp, dg, t, r * ld, w, 0);
            for (long sc = 0; sc < w; sc++) gate_bwd_one(&dar[sc], &dgr[sc], tr[sc], ar[sc], gr[sc]);
            tf_cpu_row_store(da, t, r * ld, dar, w);
            tf_cpu_row_store(dg, t, r * ld, dgr, w);
        }
    }
}

void tf_cpu_gate_residual_fwd(tf_backend *be, float *out, const float *res, const void *a,
                              const void *g, long n, tf_dtype t) {
    if (t == TF_F32) {
        const float *af = a, *gf = g;
        PAR_FOR
        for (long i = 0; i < n; i++)
            out[i] = res[i] + af[i] * tf_cpu_sigmoidf(gf[i]);
        return;
    }
    tf_cpu_dtype_check(t, "gate_residual_fwd");
    HALF_BLOCKS(n) {
        const long m = BLK_LEN(n, i0);
        float fa[EW_BLK], fg[EW_BLK];
        ld_blk(fa, a, t, i0, m);
        ld_blk(fg, g, t, i0, m);
        for (long i = 0; i < m; i++)
            out[i0 + i] = res[i0 + i] + fa[i] * tf_cpu_sigmoidf(fg[i]);
    }
}

/* ---- the pair bias (head-major) and its backward into the pair stream ---- */

#define PB_COLS 256

/* aborts with a message for a type outside tf_dtype or a head count past
 * TF_PAIR_BIAS_MAX_H (the op table has no error path) */
static void pb_check(tf_dtype t, int H, const char *op) {
    tf_cpu_dtype_check(t, op);
    if (H < 1 || H > TF_PAIR_BIAS_MAX_H) {
        fprintf(stderr, "tinyfold: internal error: cpu %s with %d heads (1..%d)\n", op, H,
                TF_PAIR_BIAS_MAX_H);
        abort();
    }
}

void tf_cpu_pair_bias_fwd(tf_backend *be, void *bias, const float *z, const float *W, long rows,
                          int C, int H, tf_dtype t) {
    pb_check(t, H, "pair_bias_fwd");
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *zr = z + r * C;
        float acc[TF_PAIR_BIAS_MAX_H];
        for (int h = 0; h < H; h++) acc[h] = 0.f;
        for (int c = 0; c < C; c++) /* the heads' sums side by side, each in c order */
            for (int h = 0; h < H; h++) acc[h] = fmaf(zr[c], W[(long)h * C + c], acc[h]);
        for (int h = 0; h < H; h++)
            tf_dtype_from_f32(tf_cpu_at(bias, t, (long)h * rows + r), t, &acc[h], 1);
    }
}

void tf_cpu_pair_bias_bwd(tf_backend *be, float *dz, void *dzh, float *db32, const void *dbias,
                          const float *W, long rows, int C, int H, tf_dtype t) {
    pb_check(t, H, "pair_bias_bwd");
    if (db32)
        tf_cpu_widen(be, db32, dbias, t, (long)H * rows);
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float d[TF_PAIR_BIAS_MAX_H];
        for (int h = 0; h < H; h++)
            tf_dtype_to_f32(&d[h], tf_cpu_cat(dbias, t, (long)h * rows + r), t, 1);
        float *z = dz + r * C;
        for (int c0 = 0; c0 < C; c0 += PB_COLS) { /* the sums over h, a block of columns at once */
            const int m = C - c0 < PB_COLS ? C - c0 : PB_COLS;
            float acc[PB_COLS];
            for (int c = 0; c < m; c++) acc[c] = 0.f;
            for (int h = 0; h < H; h++) {
                const float *w = W + (long)h * C + c0;
                for (int c = 0; c < m; c++) acc[c] = fmaf(d[h], w[c], acc[c]);
            }
            for (int c = 0; c < m; c++) z[c0 + c] += acc[c];
        }
        if (dzh)
            tf_dtype_from_f32(tf_cpu_at(dzh, t, r * C), t, z, (size_t)C);
    }
}

/* ---- embedding ---- */

void tf_cpu_embed_fwd(tf_backend *be, float *out, const float *table, const int32_t *tok, long n,
                      int C, int vocab) {
    /* The data layer checks tokens; a bad one still never reads outside the
     * table (its row is zeros, and embed_bwd skips it). */
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n * C >= TF_CPU_PAR_MIN)
    for (long t = 0; t < n; t++) {
        const int v = tok[t];
        if (v < 0 || v >= vocab)
            memset(out + t * C, 0, (size_t)C * sizeof(float));
        else
            memcpy(out + t * C, table + (long)v * C, (size_t)C * sizeof(float));
    }
}

/* Each thread owns a slice of columns and walks the tokens in order, so every
 * dtable element is summed in token order whatever the thread count. */
void tf_cpu_embed_bwd(tf_backend *be, float *dtable, const float *dout, const int32_t *tok, long n,
                      int C, int vocab) {
    const int CB = 16; /* one cache line of columns per task */
    const int nb = (C + CB - 1) / CB;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n * C >= TF_CPU_PAR_MIN)
    for (int bI = 0; bI < nb; bI++) {
        const int c0 = bI * CB, c1 = c0 + CB < C ? c0 + CB : C;
        for (long t = 0; t < n; t++) {
            const int v = tok[t];
            if (v < 0 || v >= vocab)
                continue;
            float *d = dtable + (long)v * C;
            const float *s = dout + t * C;
            for (int c = c0; c < c1; c++)
                d[c] += s[c];
        }
    }
}

/* ---- distance head + MSE ---- */

#define MSE_CHUNK 4096

void tf_cpu_mse_head_fwd(tf_backend *be, float *pred, float *loss, const float *logit,
                         const float *target, long n, float dmax) {
    const long nchunk = (n + MSE_CHUNK - 1) / MSE_CHUNK;
    double *part = tf_cpu_scratch(be, (size_t)(nchunk > 0 ? nchunk : 1) * sizeof(double));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (n >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nchunk; k++) {
        const long i1 = (k + 1) * MSE_CHUNK < n ? (k + 1) * MSE_CHUNK : n;
        double s = 0.0;
        for (long i = k * MSE_CHUNK; i < i1; i++) {
            const float p = dmax * tf_cpu_sigmoidf(logit[i]);
            const double e = (double)p - (double)target[i];
            pred[i] = p;
            s += e * e;
        }
        part[k] = s;
    }
    double s = 0.0;
    for (long k = 0; k < nchunk; k++)
        s += part[k];
    loss[0] = n > 0 ? (float)(s / (double)n) : 0.0f;
}

void tf_cpu_mse_head_bwd(tf_backend *be, float *dlogit, const float *pred, const float *target,
                         long n, float dmax, const float *loss_scale) {
    /* the seed folded into 2/n: a scale of 1 leaves the bits as they were */
    const float k2 = 2.0f / (float)n * (loss_scale ? *loss_scale : 1.0f), inv = 1.0f / dmax;
    PAR_FOR
    for (long i = 0; i < n; i++)
        dlogit[i] = k2 * (pred[i] - target[i]) * pred[i] * (1.0f - pred[i] * inv);
}

/* ---- AdamW, PyTorch's formula, hyper: ops.h TF_HYPER_* ---- */

void tf_cpu_adamw(tf_backend *be, float *p, void *ph, const float *g, float *m, float *v, long n,
                  const float *hyper, tf_dtype t) {
    if (hyper[TF_HYPER_NONFINITE] != 0.0f) return; /* a skipped step */
    if (ph) tf_cpu_dtype_check(t, "adamw");
    const float lr = hyper[0], b1 = hyper[1], b2 = hyper[2], eps = hyper[3], wd = hyper[4];
    const float bc1 = hyper[5], bc2 = hyper[6], gmul = hyper[TF_HYPER_GRAD_MUL];
    const float decay = 1.0f - lr * wd, step = lr / bc1, sbc2 = sqrtf(bc2);
    const float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
    PAR_FOR
    for (long i = 0; i < n; i++) {
        const float gi = g[i] * gmul;
        const float mi = b1 * m[i] + omb1 * gi;
        const float vi = b2 * v[i] + omb2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
    }
    if (ph && t != TF_F32) tf_cpu_narrow(be, ph, t, p, n);
}
