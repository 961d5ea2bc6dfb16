/* Register-blocked attention slices for head sizes d = 8, 16, 32, 64.
 *
 * Same math and the same per-(b, o, h) structure as the generic slices in
 * cpu_attn.c, but query rows go four at a time through three small kernels
 * written with GCC vector extensions (8 floats per vector: AVX2/AVX-512VL
 * registers with -march=native, pairs of SSE registers otherwise):
 *   rows4_x_t:    S[4][Lp]  = A[4][d] . Bt[d][Lp]        (scores, dP)
 *   rows4_x_n:    T[4][d]   = W[4][:L] . B[L][d]         (P V, dS K)
 *   rank4_update: D[L][d]  += W[4][:L]^T . X[4][d]       (dK, dV)
 * Each keeps its accumulators in registers, so a vector load feeds several
 * FMAs; the row-at-a-time loops of the generic path reload and store the
 * score row for every channel. Only a block of 4 score rows exists at a time.
 *
 * Vectors are never passed by value (that would change the ABI without AVX
 * and trip -Wpsabi); loads and stores go through memcpy, which compiles to
 * unaligned vector moves. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast") /* FMAs: gcc's ISO C mode turns contraction off */
#endif

#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef float v8 __attribute__((vector_size(32)));
#define LD(v, p) memcpy(&(v), (p), sizeof(v8))
#define ST(p, v) memcpy((p), &(v), sizeof(v8))
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Per-slice layout in the per-thread buffer (floats, each part 64-byte aligned). */
typedef struct {
    int L, Lp, L4;
    size_t qs, dO, k, kt, vt, v, dk, dv, p, ds, t, end;
} simd_layout;

static simd_layout layout(int L, int d) {
    simd_layout y;
    y.L = L;
    y.Lp = (L + 15) / 16 * 16; /* score rows: whole 16-float chunks */
    y.L4 = (L + 3) / 4 * 4;    /* query rows: whole blocks of 4 */
    size_t o = 0;
#define PART(name, n) (y.name = o, o += tf_cpu_pad_floats((size_t)(n)))
    PART(qs, (size_t)y.L4 * d);
    PART(dO, (size_t)y.L4 * d);
    PART(k, (size_t)L * d);
    PART(kt, (size_t)d * y.Lp);
    PART(vt, (size_t)d * y.Lp);
    PART(v, (size_t)L * d);
    PART(dk, (size_t)L * d);
    PART(dv, (size_t)L * d);
    PART(p, 4 * (size_t)y.Lp);
    PART(ds, 4 * (size_t)y.Lp);
    PART(t, 4 * (size_t)d);
#undef PART
    y.end = o;
    return y;
}

size_t tf_cpu_attn_simd_floats(int L, int d) {
    return layout(L, d).end;
}

int tf_cpu_attn_simd_ok(int d) {
    return d == 8 || d == 16 || d == 32 || d == 64;
}

/* S[r][j] = sum_c A[r][c] Bt[c][j], r < 4, j < Lp. */
static ALWAYS_INLINE void rows4_x_t(float *restrict S, const float *restrict A,
                                    const float *restrict Bt, int Lp, const int d) {
    for (int j0 = 0; j0 < Lp; j0 += 16) {
        v8 acc[4][2];
        memset(acc, 0, sizeof acc);
        for (int c = 0; c < d; c++) {
            v8 b0, b1;
            LD(b0, Bt + (long)c * Lp + j0);
            LD(b1, Bt + (long)c * Lp + j0 + 8);
            for (int r = 0; r < 4; r++) {
                const float x = A[r * d + c];
                acc[r][0] += x * b0;
                acc[r][1] += x * b1;
            }
        }
        for (int r = 0; r < 4; r++) {
            ST(S + (long)r * Lp + j0, acc[r][0]);
            ST(S + (long)r * Lp + j0 + 8, acc[r][1]);
        }
    }
}

/* T[r][:] = sum_{j < L} W[r][j] B[j][:], r < 4. */
static ALWAYS_INLINE void rows4_x_n(float *restrict T, const float *restrict W, int Lp,
                                    const float *restrict B, int L, const int d) {
    const int nd = d / 8;
    v8 acc[4][8];
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < L; j++) {
        v8 bv[8];
        for (int n = 0; n < nd; n++)
            LD(bv[n], B + (long)j * d + 8 * n);
        for (int r = 0; r < 4; r++) {
            const float w = W[(long)r * Lp + j];
            for (int n = 0; n < nd; n++)
                acc[r][n] += w * bv[n];
        }
    }
    for (int r = 0; r < 4; r++)
        for (int n = 0; n < nd; n++)
            ST(T + r * d + 8 * n, acc[r][n]);
}

/* D[j][:] += sum_r W[r][j] X[r][:], j < L. */
static ALWAYS_INLINE void rank4_update(float *restrict D, const float *restrict W, int Lp,
                                       const float *restrict X, int L, const int d) {
    const int nd = d / 8;
    v8 x[4][8];
    for (int r = 0; r < 4; r++)
        for (int n = 0; n < nd; n++)
            LD(x[r][n], X + r * d + 8 * n);
    for (int j = 0; j < L; j++) {
        v8 acc[8];
        for (int n = 0; n < nd; n++)
            LD(acc[n], D + (long)j * d + 8 * n);
        for (int r = 0; r < 4; r++) {
            const float w = W[(long)r * Lp + j];
            for (int n = 0; n < nd; n++)
                acc[n] += w * x[r][n];
        }
        for (int n = 0; n < nd; n++)
            ST(D + (long)j * d + 8 * n, acc[n]);
    }
}

/* dst[c][j] = view(b, o, j, h, c) for j < L, zero for L <= j < Lp. */
static ALWAYS_INLINE void transpose_in(float *restrict dst, const tf_attn_view *v, int b, int o,
                                       int h, int L, int Lp, const int d) {
    const float *base = tf_cpu_attn_row(v, b, o, 0, h, d);
    const long sl = v->sl;
    for (int c = 0; c < d; c++) {
        float *restrict row = dst + (long)c * Lp;
        for (int j = 0; j < L; j++)
            row[j] = base[j * sl + c];
        for (int j = L; j < Lp; j++)
            row[j] = 0.0f;
    }
}

/* Scales query rows into Qs (rows >= L zero) and transposes K (columns >= L
 * zero). The transpose walks K column by column so that the stores are
 * contiguous; the strided loads hit L1 after the first column. */
static ALWAYS_INLINE void gather_qk(const tf_attn_args *a, const simd_layout *y, float *buf, int b,
                                    int o, int h, const int d) {
    float *restrict qs = buf + y->qs, *restrict kt = buf + y->kt;
    const int L = y->L, Lp = y->Lp;
    const float scale = a->scale;
    for (int i = 0; i < L; i++) {
        const float *qr = tf_cpu_attn_row(&a->q, b, o, i, h, d);
        for (int c = 0; c < d; c++)
            qs[(long)i * d + c] = scale * qr[c];
    }
    memset(qs + (long)L * d, 0, (size_t)(y->L4 - L) * d * sizeof(float));
    transpose_in(kt, &a->k, b, o, h, L, Lp, d);
}

static ALWAYS_INLINE void add_bias_row(float *s, const tf_attn_args *a, int b, int h, int i,
                                       int L) {
    if (!a->bias)
        return;
    const float *br = (const float *)a->bias + (long)b * a->bias_sb + (long)h * a->bias_sh + (long)i * a->bias_si;
    for (int j = 0; j < L; j++)
        s[j] += br[(long)j * a->bias_sj];
}

static ALWAYS_INLINE void fwd_slice(const tf_attn_args *a, int b, int o, int h, float *buf,
                                    const int d) {
    const simd_layout y = layout(a->L, d);
    const int L = y.L, Lp = y.Lp;
    float *restrict v = buf + y.v, *restrict S = buf + y.p, *restrict T = buf + y.t;
    const float *qs = buf + y.qs, *kt = buf + y.kt;
    gather_qk(a, &y, buf, b, o, h, d);
    for (int j = 0; j < L; j++)
        memcpy(v + (long)j * d, tf_cpu_attn_row(&a->v, b, o, j, h, d), (size_t)d * sizeof(float));
    const long row0 = (((long)b * a->no + o) * a->nh + h) * L;
    for (int i0 = 0; i0 < L; i0 += 4) {
        rows4_x_t(S, qs + (long)i0 * d, kt, Lp, d);
        float inv[4] = {0, 0, 0, 0};
        for (int r = 0; r < 4 && i0 + r < L; r++) {
            float *s = S + (long)r * Lp;
            add_bias_row(s, a, b, h, i0 + r, L);
            float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < L; j++)
                mx = s[j] > mx ? s[j] : mx;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < L; j++) {
                const float e = tf_cpu_expf(s[j] - mx);
                s[j] = e;
                sum += e;
            }
            inv[r] = 1.0f / sum;
            a->lse[row0 + i0 + r] = mx + logf(sum);
        }
        rows4_x_n(T, S, Lp, v, L, d); /* rows past L hold finite junk; not written */
        for (int r = 0; r < 4 && i0 + r < L; r++) {
            float *orow = tf_cpu_attn_row(&a->out, b, o, i0 + r, h, d);
            for (int c = 0; c < d; c++)
                orow[c] = T[r * d + c] * inv[r];
        }
    }
}

static ALWAYS_INLINE void bwd_slice(const tf_attn_args *a, int b, int o, int h, float *buf,
                                    int first_o, const int d) {
    const simd_layout y = layout(a->L, d);
    const int L = y.L, Lp = y.Lp;
    float *restrict dO = buf + y.dO, *restrict K = buf + y.k, *restrict vt = buf + y.vt;
    float *restrict dK = buf + y.dk, *restrict dV = buf + y.dv, *restrict P = buf + y.p;
    float *restrict dS = buf + y.ds, *restrict T = buf + y.t;
    const float *qs = buf + y.qs, *kt = buf + y.kt;
    const long row0 = (((long)b * a->no + o) * a->nh + h) * L;
    gather_qk(a, &y, buf, b, o, h, d);
    transpose_in(vt, &a->v, b, o, h, L, Lp, d);
    for (int j = 0; j < L; j++) {
        const float *kr = tf_cpu_attn_row(&a->k, b, o, j, h, d);
        const float *gr = tf_cpu_attn_row(&a->dout, b, o, j, h, d),
                    *orow = tf_cpu_attn_row(&a->out, b, o, j, h, d);
        float D = 0.0f;
        for (int c = 0; c < d; c++) {
            K[(long)j * d + c] = kr[c];
            dO[(long)j * d + c] = gr[c];
            D += gr[c] * orow[c];
        }
        a->work[row0 + j] = D;
    }
    memset(dO + (long)L * d, 0, (size_t)(y.L4 - L) * d * sizeof(float));
    memset(dK, 0, (size_t)L * d * sizeof(float));
    memset(dV, 0, (size_t)L * d * sizeof(float));

    for (int i0 = 0; i0 < L; i0 += 4) {
        rows4_x_t(P, qs + (long)i0 * d, kt, Lp, d);
        rows4_x_t(dS, dO + (long)i0 * d, vt, Lp, d); /* dP */
        for (int r = 0; r < 4; r++) {
            float *p = P + (long)r * Lp, *ds = dS + (long)r * Lp;
            const int i = i0 + r;
            if (i >= L) { /* padding rows: no contribution */
                memset(p, 0, (size_t)Lp * sizeof(float));
                memset(ds, 0, (size_t)Lp * sizeof(float));
                continue;
            }
            add_bias_row(p, a, b, h, i, L);
            const float lse = a->lse[row0 + i], D = a->work[row0 + i];
#pragma omp simd
            for (int j = 0; j < L; j++) {
                const float pj = tf_cpu_expf(p[j] - lse);
                p[j] = pj;
                ds[j] = pj * (ds[j] - D);
            }
            if (a->dbias) tf_cpu_attn_dbias_row(a, b, h, i, ds, first_o);
        }
        rows4_x_n(T, dS, Lp, K, L, d);
        for (int r = 0; r < 4 && i0 + r < L; r++) {
            float *dqr = tf_cpu_attn_row(&a->dq, b, o, i0 + r, h, d);
            for (int c = 0; c < d; c++)
                dqr[c] = a->scale * T[r * d + c];
        }
        rank4_update(dK, dS, Lp, qs + (long)i0 * d, L, d); /* scale is in qs */
        rank4_update(dV, P, Lp, dO + (long)i0 * d, L, d);
    }
    for (int j = 0; j < L; j++) {
        memcpy(tf_cpu_attn_row(&a->dk, b, o, j, h, d), dK + (long)j * d, (size_t)d * sizeof(float));
        memcpy(tf_cpu_attn_row(&a->dv, b, o, j, h, d), dV + (long)j * d, (size_t)d * sizeof(float));
    }
}

void tf_cpu_attn_fwd_slice_simd(const tf_attn_args *a, int b, int o, int h, float *buf) {
    switch (a->d) {
    case 8: fwd_slice(a, b, o, h, buf, 8); break;
    case 16: fwd_slice(a, b, o, h, buf, 16); break;
    case 32: fwd_slice(a, b, o, h, buf, 32); break;
    case 64: fwd_slice(a, b, o, h, buf, 64); break;
    default: break; /* callers check tf_cpu_attn_simd_ok */
    }
}

void tf_cpu_attn_bwd_slice_simd(const tf_attn_args *a, int b, int o, int h, float *buf,
                                int first_o) {
    switch (a->d) {
    case 8: bwd_slice(a, b, o, h, buf, first_o, 8); break;
    case 16: bwd_slice(a, b, o, h, buf, first_o, 16); break;
    case 32: bwd_slice(a, b, o, h, buf, first_o, 32); break;
    case 64: bwd_slice(a, b, o, h, buf, first_o, 64); break;
    default: break;
    }
}
