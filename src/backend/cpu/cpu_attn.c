/* Streaming (flash-style) multi-head attention on strided views.
 *
 * One task is one (b, o, h) slice: its K and V (and for backward Q and dO)
 * are gathered into a per-thread buffer, K and V also transposed so that a
 * row of scores is an AXPY over contiguous memory. Then query rows are
 * processed one at a time with one row of L scores in the per-thread buffer:
 * the L x L score matrix never exists. This file holds the task scheduling
 * and these generic slices (any head size d); head sizes 8/16/32/64 take the
 * register-blocked slices of cpu_attn_simd.c instead (4 query rows at a time).
 *
 * Backward recomputes P from the forward's log-sum-exp:
 *   P_ij = exp(S_ij - lse_i), dP_ij = dO_i . v_j, D_i = dO_i . O_i,
 *   dS_ij = P_ij (dP_ij - D_i), dq_i = scale sum_j dS_ij k_j,
 *   dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij dO_i, dbias_ij = sum_o dS_ij.
 * dk/dv accumulate over query rows in the per-thread buffer and are written
 * once per slice. With a bias gradient, tasks are (b, h) and o runs in order
 * inside (the sum over o is then deterministic and thread-count independent);
 * without one, tasks are (b, o, h). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

/* s[j] = bias(i, j) (or 0) + sum_c qs[c] * Kt[c][j]  for j < L */
static inline void score_row(float *restrict s, const float *restrict qs, const float *restrict Kt,
                             const float *brow, long bsj, int L, int Lp, int d) {
    if (brow) {
        for (int j = 0; j < L; j++)
            s[j] = brow[(long)j * bsj];
    } else {
        memset(s, 0, (size_t)L * sizeof(float));
    }
    for (int c = 0; c < d; c++) {
        const float qc = qs[c];
        const float *restrict kr = Kt + (long)c * Lp;
#pragma omp simd
        for (int j = 0; j < L; j++)
            s[j] += qc * kr[j];
    }
}

/* ---------------------------------------------------------------- forward */

static size_t fwd_floats(int L, int d) {
    const size_t Lp = tf_cpu_pad_floats((size_t)L);
    return tf_cpu_pad_floats(d * Lp + (size_t)L * d) + Lp + 2 * tf_cpu_pad_floats((size_t)d);
}

static void attn_fwd_slice(const tf_attn_args *a, int b, int o, int h, float *buf) {
    const int d = a->d;
    const int L = a->L, Lp = (int)tf_cpu_pad_floats((size_t)L);
    float *restrict Kt = buf;                                                    /* [d][Lp] */
    float *restrict V = buf + (long)d * Lp;                                      /* [L][d] */
    float *restrict s = buf + tf_cpu_pad_floats((size_t)d * Lp + (size_t)L * d); /* [Lp] */
    float *restrict qs = s + Lp;                                                 /* [d] */
    float *restrict acc = qs + tf_cpu_pad_floats((size_t)d);                     /* [d] */
    for (int j = 0; j < L; j++) {
        const float *kr = tf_cpu_attn_row(&a->k, b, o, j, h, d),
                    *vr = tf_cpu_attn_row(&a->v, b, o, j, h, d);
        for (int c = 0; c < d; c++) {
            Kt[(long)c * Lp + j] = kr[c];
            V[(long)j * d + c] = vr[c];
        }
    }
    const long lse0 = (((long)b * a->no + o) * a->nh + h) * L;
    for (int i = 0; i < L; i++) {
        const float *qr = tf_cpu_attn_row(&a->q, b, o, i, h, d);
        for (int c = 0; c < d; c++)
            qs[c] = a->scale * qr[c];
        const float *brow =
            a->bias ? (const float *)a->bias + (long)b * a->bias_sb + (long)h * a->bias_sh + (long)i * a->bias_si
                    : NULL;
        score_row(s, qs, Kt, brow, a->bias_sj, L, Lp, d);
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < L; j++)
            mx = s[j] > mx ? s[j] : mx;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < L; j++) {
            const float e = tf_cpu_expf(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        for (int c = 0; c < d; c++)
            acc[c] = 0.0f;
        for (int j = 0; j < L; j++) {
            const float pj = s[j];
            const float *restrict vr = V + (long)j * d;
#pragma omp simd
            for (int c = 0; c < d; c++)
                acc[c] += pj * vr[c];
        }
        const float inv = 1.0f / sum;
        float *orow = tf_cpu_attn_row(&a->out, b, o, i, h, d);
        for (int c = 0; c < d; c++)
            orow[c] = acc[c] * inv;
        a->lse[lse0 + i] = mx + logf(sum);
    }
}

void tf_cpu_attn_fwd(tf_backend *be, const tf_attn_args *a) {
    if (a->nb <= 0 || a->no <= 0 || a->nh <= 0 || a->L <= 0 || a->d <= 0)
        return;
    const int simd = tf_cpu_attn_simd_ok(a->d);
    const size_t per =
        tf_cpu_pad_floats(simd ? tf_cpu_attn_simd_floats(a->L, a->d) : fwd_floats(a->L, a->d));
    float *scr = tf_cpu_scratch(be, per * (size_t)be->threads * sizeof(float));
    const long tasks = (long)a->nb * a->no * a->nh;
    const long work = tasks * a->L * a->L * a->d;
#pragma omp parallel num_threads(be->threads) if (work >= TF_CPU_PAR_MIN)
    {
        float *buf = scr + per * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (long t = 0; t < tasks; t++) {
            const int h = (int)(t % a->nh), o = (int)((t / a->nh) % a->no);
            const int b = (int)(t / ((long)a->nh * a->no));
            if (simd)
                tf_cpu_attn_fwd_slice_simd(a, b, o, h, buf);
            else
                attn_fwd_slice(a, b, o, h, buf);
        }
    }
}

/* --------------------------------------------------------------- backward */

static size_t bwd_floats(int L, int d) {
    const size_t Lp = tf_cpu_pad_floats((size_t)L), Ld = tf_cpu_pad_floats((size_t)L * d);
    return 5 * Ld + 2 * d * Lp + 2 * Lp + tf_cpu_pad_floats((size_t)d);
}

static void attn_bwd_slice(const tf_attn_args *a, int b, int o, int h, float *buf, int first_o) {
    const int d = a->d;
    const int L = a->L, Lp = (int)tf_cpu_pad_floats((size_t)L);
    const long Ld = (long)tf_cpu_pad_floats((size_t)L * d);
    float *restrict Qs = buf;               /* [L][d], q * scale */
    float *restrict K = Qs + Ld;            /* [L][d] */
    float *restrict dO = K + Ld;            /* [L][d] */
    float *restrict dK = dO + Ld;           /* [L][d] */
    float *restrict dV = dK + Ld;           /* [L][d] */
    float *restrict Kt = dV + Ld;           /* [d][Lp] */
    float *restrict Vt = Kt + (long)d * Lp; /* [d][Lp] */
    float *restrict p = Vt + (long)d * Lp;  /* [Lp]: scores, then P */
    float *restrict ds = p + Lp;            /* [Lp]: dP, then dS */
    float *restrict acc = ds + Lp;          /* [d] */
    const float scale = a->scale;
    const long row0 = (((long)b * a->no + o) * a->nh + h) * L; /* into lse and work */

    for (int j = 0; j < L; j++) {
        const float *qr = tf_cpu_attn_row(&a->q, b, o, j, h, d),
                    *kr = tf_cpu_attn_row(&a->k, b, o, j, h, d);
        const float *vr = tf_cpu_attn_row(&a->v, b, o, j, h, d),
                    *gr = tf_cpu_attn_row(&a->dout, b, o, j, h, d);
        const float *orow = tf_cpu_attn_row(&a->out, b, o, j, h, d);
        float D = 0.0f;
        for (int c = 0; c < d; c++) {
            Qs[(long)j * d + c] = scale * qr[c];
            K[(long)j * d + c] = kr[c];
            Kt[(long)c * Lp + j] = kr[c];
            Vt[(long)c * Lp + j] = vr[c];
            dO[(long)j * d + c] = gr[c];
            D += gr[c] * orow[c];
        }
        a->work[row0 + j] = D;
    }
    memset(dK, 0, 2 * Ld * sizeof(float)); /* dK and dV */

    for (int i = 0; i < L; i++) {
        const float *qi = Qs + (long)i * d, *gi = dO + (long)i * d;
        const float *brow =
            a->bias ? (const float *)a->bias + (long)b * a->bias_sb + (long)h * a->bias_sh + (long)i * a->bias_si
                    : NULL;
        score_row(p, qi, Kt, brow, a->bias_sj, L, Lp, d);
        score_row(ds, gi, Vt, NULL, 0, L, Lp, d); /* dP_ij = dO_i . v_j */
        const float lse = a->lse[row0 + i], D = a->work[row0 + i];
#pragma omp simd
        for (int j = 0; j < L; j++) {
            const float pj = tf_cpu_expf(p[j] - lse);
            p[j] = pj;
            ds[j] = pj * (ds[j] - D);
        }
        for (int c = 0; c < d; c++)
            acc[c] = 0.0f;
        for (int j = 0; j < L; j++) {
            const float sj = ds[j], pj = p[j];
            const float *restrict kr = K + (long)j * d;
            float *restrict dkr = dK + (long)j * d;
            float *restrict dvr = dV + (long)j * d;
#pragma omp simd
            for (int c = 0; c < d; c++) {
                acc[c] += sj * kr[c];
                dkr[c] += sj * qi[c];
                dvr[c] += pj * gi[c];
            }
        }
        float *dqr = tf_cpu_attn_row(&a->dq, b, o, i, h, d);
        for (int c = 0; c < d; c++)
            dqr[c] = scale * acc[c];
        if (a->dbias) tf_cpu_attn_dbias_row(a, b, h, i, ds, first_o);
    }
    for (int j = 0; j < L; j++) {
        float *dkr = tf_cpu_attn_row(&a->dk, b, o, j, h, d),
              *dvr = tf_cpu_attn_row(&a->dv, b, o, j, h, d);
        memcpy(dkr, dK + (long)j * d, (size_t)d * sizeof(float)); /* scale is in Qs */
        memcpy(dvr, dV + (long)j * d, (size_t)d * sizeof(float));
    }
}

void tf_cpu_attn_bwd(tf_backend *be, const tf_attn_args *a) {
    if (a->nb <= 0 || a->no <= 0 || a->nh <= 0 || a->L <= 0 || a->d <= 0)
        return;
    const int simd = tf_cpu_attn_simd_ok(a->d);
    const size_t per =
        tf_cpu_pad_floats(simd ? tf_cpu_attn_simd_floats(a->L, a->d) : bwd_floats(a->L, a->d));
    float *scr = tf_cpu_scratch(be, per * (size_t)be->threads * sizeof(float));
    const int by_bh = a->dbias != NULL;
    const long tasks = (long)a->nb * a->nh * (by_bh ? 1 : a->no);
    const long work = (long)a->nb * a->no * a->nh * a->L * a->L * a->d;
#pragma omp parallel num_threads(be->threads) if (work >= TF_CPU_PAR_MIN)
    {
        float *buf = scr + per * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (long t = 0; t < tasks; t++) {
            if (by_bh) {
                const int h = (int)(t % a->nh), b = (int)(t / a->nh);
                for (int o = 0; o < a->no; o++)
                    if (simd)
                        tf_cpu_attn_bwd_slice_simd(a, b, o, h, buf, o == 0);
                    else
                        attn_bwd_slice(a, b, o, h, buf, o == 0);
            } else {
                const int h = (int)(t % a->nh), o = (int)((t / a->nh) % a->no);
                const int b = (int)(t / ((long)a->nh * a->no));
                if (simd)
                    tf_cpu_attn_bwd_slice_simd(a, b, o, h, buf, 0);
                else
                    attn_bwd_slice(a, b, o, h, buf, 0);
            }
        }
    }
}
