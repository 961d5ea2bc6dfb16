/* Elementwise families, gating, embedding, the distance head + MSE loss and
 * AdamW. All elementwise ops may run in place (outputs may alias inputs):
 * no restrict, and every loop body reads its inputs before writing. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

/* `if (parallel: ...)`, not a plain `if`: OpenMP 5 applies a plain one to the
 * simd part too, and small n would then not be vectorised. */
#define PAR_FOR                                                                                    \
    _Pragma("omp parallel for simd num_threads(be->threads) if (parallel : n >= TF_CPU_PAR_MIN)")

void tf_cpu_add(tf_backend *be, float *y, const float *a, const float *b, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void tf_cpu_mul(tf_backend *be, float *y, const float *a, const float *b, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void tf_cpu_scale(tf_backend *be, float *y, const float *x, float alpha, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        y[i] = alpha * x[i];
}

void tf_cpu_act_fwd(tf_backend *be, tf_act act, float *y, const float *x, long n) {
    if (act == TF_ACT_SIGMOID) {
        PAR_FOR
        for (long i = 0; i < n; i++)
            y[i] = tf_cpu_sigmoidf(x[i]);
    } else {
        PAR_FOR
        for (long i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

void tf_cpu_act_bwd(tf_backend *be, tf_act act, float *dx, const float *dy, const float *y,
                    long n) {
    if (act == TF_ACT_SIGMOID) {
        PAR_FOR
        for (long i = 0; i < n; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
    } else {
        /* relu'(x) from the output: 1 where y > 0 (the subgradient at 0 is 0, as PyTorch) */
        PAR_FOR
        for (long i = 0; i < n; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

void tf_cpu_gate_fwd(tf_backend *be, float *y, const float *a, const float *g, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        y[i] = a[i] * tf_cpu_sigmoidf(g[i]);
}

/* y = a sigmoid(g)'s gradients: da = dy*s, dg = dy*a*s*(1-s) (gate_bwd and
 * gate_cmajor_bwd: one definition, the same bits) */
static inline void gate_bwd_one(float *da, float *dg, float d, float a, float g) {
    const float s = tf_cpu_sigmoidf(g);
    *da = d * s;
    *dg = d * a * s * (1.0f - s);
}

void tf_cpu_gate_bwd(tf_backend *be, float *da, float *dg, const float *dy, const float *a,
                     const float *g, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        gate_bwd_one(&da[i], &dg[i], dy[i], a[i], g[i]);
}

/* gated L|R to channel-major, in blocks of GC_BLK rows (the threads' unit):
 * the gating runs along each row (as gate_fwd/_bwd do) into a per-thread
 * [GC_BLK, 2C] tile, which is then transposed into (or out of) the 2C
 * channel-major rows; off[] holds each row's place, b*C*inner + p, within
 * its (s, c) row */
#define GC_BLK 64
static void gc_offsets(long *off, long r0, long r1, long inner, int C) {
    for (long r = r0; r < r1; r++) {
        const long b = r / inner;
        off[r - r0] = b * C * inner + (r - b * inner);
    }
}

void tf_cpu_gate_cmajor_fwd(tf_backend *be, float *lr_t, const float *a, const float *g, long ld,
                            long rows, long inner, int C) {
    const long nb = rows / inner, nblk = (rows + GC_BLK - 1) / GC_BLK, w = 2 * (long)C;
    float *tiles = tf_cpu_scratch(be, (size_t)be->threads * GC_BLK * (size_t)w * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long r0 = k * GC_BLK, r1 = r0 + GC_BLK < rows ? r0 + GC_BLK : rows;
        float *t = tiles + (size_t)omp_get_thread_num() * GC_BLK * (size_t)w;
        long off[GC_BLK];
        gc_offsets(off, r0, r1, inner, C);
        for (long r = r0; r < r1; r++) {
            const float *ar = a + r * ld, *gr = g + r * ld;
            float *tr = t + (r - r0) * w;
            for (long sc = 0; sc < w; sc++) tr[sc] = ar[sc] * tf_cpu_sigmoidf(gr[sc]);
        }
        for (long sc = 0; sc < w; sc++) {
            float *o = lr_t + (sc / C * nb * C + sc % C) * inner;
            for (long r = r0; r < r1; r++) o[off[r - r0]] = t[(r - r0) * w + sc];
        }
    }
}

void tf_cpu_gate_cmajor_bwd(tf_backend *be, float *da, float *dg, const float *dlr_t,
                            const float *a, const float *g, long ld, long rows, long inner, int C) {
    const long nb = rows / inner, nblk = (rows + GC_BLK - 1) / GC_BLK, w = 2 * (long)C;
    float *tiles = tf_cpu_scratch(be, (size_t)be->threads * GC_BLK * (size_t)w * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long k = 0; k < nblk; k++) {
        const long r0 = k * GC_BLK, r1 = r0 + GC_BLK < rows ? r0 + GC_BLK : rows;
        float *t = tiles + (size_t)omp_get_thread_num() * GC_BLK * (size_t)w;
        long off[GC_BLK];
        gc_offsets(off, r0, r1, inner, C);
        for (long sc = 0; sc < w; sc++) {
            const float *dy = dlr_t + (sc / C * nb * C + sc % C) * inner;
            for (long r = r0; r < r1; r++) t[(r - r0) * w + sc] = dy[off[r - r0]];
        }
        for (long r = r0; r < r1; r++) {
            const float *ar = a + r * ld, *gr = g + r * ld, *tr = t + (r - r0) * w;
            float *dar = da + r * ld, *dgr = dg + r * ld;
            for (long sc = 0; sc < w; sc++) gate_bwd_one(&dar[sc], &dgr[sc], tr[sc], ar[sc], gr[sc]);
        }
    }
}

void tf_cpu_gate_residual_fwd(tf_backend *be, float *out, const float *res, const float *a,
                              const float *g, long n) {
    PAR_FOR
    for (long i = 0; i < n; i++)
        out[i] = res[i] + a[i] * tf_cpu_sigmoidf(g[i]);
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

void tf_cpu_adamw(tf_backend *be, float *p, const float *g, float *m, float *v, long n,
                  const float *hyper) {
    if (hyper[TF_HYPER_NONFINITE] != 0.0f) return; /* a skipped step */
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
}
