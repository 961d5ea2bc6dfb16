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
 * without one, tasks are (b, o, h).
 *
 * bf16/fp16 (a->t): the views are gathered into packed fp32 scratch, the
 * fp32 attention runs on those, and its outputs are rounded once as they
 * are scattered back into the caller's views (lse and work stay fp32). */
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

static void attn_fwd_f32(tf_backend *be, const tf_attn_args *a) {
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

static void attn_bwd_f32(tf_backend *be, const tf_attn_args *a) {
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

/* ------------------------------------------------------------ bf16 / fp16 */

/* a packed fp32 [nb, no, L, nh*d] view over p */
static tf_attn_view packed_view(float *p, const tf_attn_args *a) {
    const long C = (long)a->nh * a->d;
    const tf_attn_view v = {p, (long)a->no * a->L * C, (long)a->L * C, C};
    return v;
}

/* a view of type a->t to packed fp32 (to_f32) or back, rounded (!to_f32) */
static void view_convert(tf_backend *be, const tf_attn_args *a, const tf_attn_view *v, float *f,
                         int to_f32) {
    const long C = (long)a->nh * a->d, rows = (long)a->nb * a->no * a->L;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * C >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const long l = r % a->L, o = (r / a->L) % a->no, b = r / ((long)a->L * a->no);
        const long off = b * v->sb + o * v->so + l * v->sl;
        if (to_f32)
            tf_dtype_to_f32(f + r * C, tf_cpu_at(v->p, a->t, off), a->t, (size_t)C);
        else
            tf_dtype_from_f32(tf_cpu_at(v->p, a->t, off), a->t, f + r * C, (size_t)C);
    }
}

/* bias (or dbias) at the bias strides to packed fp32 [nb, nh, L, L] or back */
static void bias_convert(tf_backend *be, const tf_attn_args *a, void *bias, float *f, int to_f32) {
    const long L = a->L, rows = (long)a->nb * a->nh * L;
    uint16_t *hb = bias;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (rows * L >= TF_CPU_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const long i = r % L, h = (r / L) % a->nh, b = r / (L * a->nh);
        uint16_t *src = hb + b * a->bias_sb + h * a->bias_sh + i * a->bias_si;
        float *fr = f + r * L;
        if (to_f32)
            for (long j = 0; j < L; j++) fr[j] = tf_cpu_half_to_f32(src[j * a->bias_sj], a->t);
        else
            for (long j = 0; j < L; j++) src[j * a->bias_sj] = tf_cpu_f32_to_half(fr[j], a->t);
    }
}

/* f: a's fp32 twin over packed scratch (nv views first, then bias and dbias
 * when a has them); its inputs widened */
static void half_args(tf_backend *be, tf_attn_args *f, const tf_attn_args *a, int bwd) {
    const long nv = (long)a->nb * a->no * a->L * a->nh * a->d, nbias = (long)a->nb * a->nh * a->L * a->L;
    const size_t pv = tf_cpu_pad_floats((size_t)nv), pb = tf_cpu_pad_floats((size_t)nbias);
    const int nviews = bwd ? 8 : 4;
    const int hb = a->bias != NULL, hdb = bwd && a->dbias != NULL;
    float *s = tf_cpu_scratch_push(be, (nviews * pv + (size_t)(hb + hdb) * pb) * sizeof(float));
    *f = *a;
    f->t = TF_F32;
    tf_attn_view *in[5] = {&f->q, &f->k, &f->v, &f->out, &f->dout};
    const tf_attn_view *src[5] = {&a->q, &a->k, &a->v, &a->out, &a->dout};
    /* inputs: q, k, v (and out, dout backward); outputs: out (dq, dk, dv backward) */
    for (int k = 0; k < (bwd ? 5 : 4); k++) {
        *in[k] = packed_view(s + (size_t)k * pv, a);
        if (k < 3 || bwd)
            view_convert(be, a, src[k], s + (size_t)k * pv, 1);
    }
    if (bwd) {
        f->dq = packed_view(s + 5 * pv, a);
        f->dk = packed_view(s + 6 * pv, a);
        f->dv = packed_view(s + 7 * pv, a);
    }
    float *bias = s + nviews * pv;
    if (hb) {
        bias_convert(be, a, (void *)a->bias, bias, 1);
        f->bias = bias;
    }
    f->dbias = hdb ? bias + (size_t)hb * pb : NULL;
    f->bias_sb = (long)a->nh * a->L * a->L, f->bias_sh = (long)a->L * a->L;
    f->bias_si = a->L, f->bias_sj = 1;
}

void tf_cpu_attn_fwd(tf_backend *be, const tf_attn_args *a) {
    tf_cpu_dtype_check(a->t, "attn_fwd");
    if (a->nb <= 0 || a->no <= 0 || a->nh <= 0 || a->L <= 0 || a->d <= 0)
        return;
    if (a->t == TF_F32) {
        attn_fwd_f32(be, a);
        return;
    }
    tf_attn_args f;
    half_args(be, &f, a, 0);
    attn_fwd_f32(be, &f);
    view_convert(be, a, &a->out, f.out.p, 0);
    tf_cpu_scratch_pop(be);
}

void tf_cpu_attn_bwd(tf_backend *be, const tf_attn_args *a) {
    tf_cpu_dtype_check(a->t, "attn_bwd");
    if (a->nb <= 0 || a->no <= 0 || a->nh <= 0 || a->L <= 0 || a->d <= 0)
        return;
    if (a->t == TF_F32) {
        attn_bwd_f32(be, a);
        return;
    }
    tf_attn_args f;
    half_args(be, &f, a, 1);
    attn_bwd_f32(be, &f);
    view_convert(be, a, &a->dq, f.dq.p, 0);
    view_convert(be, a, &a->dk, f.dk.p, 0);
    view_convert(be, a, &a->dv, f.dv.p, 0);
    if (a->dbias)
        bias_convert(be, a, a->dbias, f.dbias, 0);
    tf_cpu_scratch_pop(be);
}
