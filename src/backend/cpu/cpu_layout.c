/* Data movement: generic permute (numpy.transpose semantics), broadcast add
 * and sum over a middle axis.
 *
 * permute first simplifies the problem: size-1 axes are dropped and output
 * axes that are also adjacent and contiguous in the input are merged (so
 * [B,N,N,C] -> [B,N',N,C] becomes a copy of C-float rows). Then either the
 * innermost output axis is contiguous in the input (row copies), or it is
 * strided, and the copy is done in 32x32 tiles between the output's innermost
 * axis and the axis that is contiguous in the input (a blocked transpose). */
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

#define PERM_TILE 32

typedef struct {
    int R;
    long od[6]; /* output dims */
    long is[6]; /* input stride of each output axis */
    long os[6]; /* output stride of each output axis */
} perm_plan;

static void perm_simplify(perm_plan *pl, const tf_permute_args *a) {
    long istr[6];
    long s = 1;
    for (int k = a->rank - 1; k >= 0; k--) {
        istr[k] = s;
        s *= a->dims[k];
    }
    int R = 0;
    for (int ax = 0; ax < a->rank; ax++) {
        long d = a->dims[a->perm[ax]], st = istr[a->perm[ax]];
        if (d == 1)
            continue;
        if (R > 0 && pl->is[R - 1] == st * d) { /* contiguous with the previous axis */
            pl->od[R - 1] *= d;
            pl->is[R - 1] = st;
            continue;
        }
        pl->od[R] = d;
        pl->is[R] = st;
        R++;
    }
    if (R == 0) { /* a single element */
        pl->od[0] = 1;
        pl->is[0] = 1;
        R = 1;
    }
    pl->R = R;
    long o = 1;
    for (int ax = R - 1; ax >= 0; ax--) {
        pl->os[ax] = o;
        o *= pl->od[ax];
    }
}

/* Input and output offsets of outer index `idx` over the axes 0..R-1 except
 * skip1/skip2 (pass -1 to skip nothing), in row-major order of those axes. */
static void perm_offsets(const perm_plan *pl, long idx, int skip1, int skip2, long *io, long *oo) {
    long ii = 0, oi = 0;
    for (int ax = pl->R - 1; ax >= 0; ax--) {
        if (ax == skip1 || ax == skip2)
            continue;
        long c = idx % pl->od[ax];
        idx /= pl->od[ax];
        ii += c * pl->is[ax];
        oi += c * pl->os[ax];
    }
    *io = ii;
    *oo = oi;
}

/* The permute of a plan over elements of type T: rows copied (or added,
 * when acc) when the innermost output axis is contiguous in the input, else
 * the tiled transpose. Instantiated for fp32 and, moves only (acc 0), for
 * 16-bit elements. */
#define PERM_IMPL(NAME, T)                                                                         \
    static void NAME(tf_backend *be, T *out, const T *in, const perm_plan *pl, int acc) {          \
        const int R = pl->R;                                                                       \
        long total = 1;                                                                            \
        for (int ax = 0; ax < R; ax++)                                                             \
            total *= pl->od[ax];                                                                   \
        if (pl->is[R - 1] == 1) { /* rows contiguous on both sides */                              \
            const long n = pl->od[R - 1], rows = total / n;                                        \
            _Pragma("omp parallel for schedule(static) num_threads(be->threads) if (total >= TF_CPU_PAR_MIN)") \
            for (long r = 0; r < rows; r++) {                                                      \
                long io, oo;                                                                       \
                perm_offsets(pl, r, R - 1, -1, &io, &oo);                                          \
                const T *restrict src = in + io;                                                   \
                T *restrict dst = out + oo;                                                        \
                if (acc) {                                                                         \
                    _Pragma("omp simd")                                                            \
                    for (long x = 0; x < n; x++)                                                   \
                        dst[x] += src[x];                                                          \
                } else {                                                                           \
                    memcpy(dst, src, (size_t)n * sizeof(T));                                       \
                }                                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        /* Tiled transpose between output axis q (smallest input stride) and R-1. */               \
        int q = 0;                                                                                 \
        for (int ax = 1; ax < R - 1; ax++)                                                         \
            if (pl->is[ax] < pl->is[q])                                                            \
                q = ax;                                                                            \
        const long nq = pl->od[q], nr = pl->od[R - 1];                                             \
        const long sq = pl->is[q], sr = pl->is[R - 1], oq = pl->os[q];                             \
        const long tq = (nq + PERM_TILE - 1) / PERM_TILE, tr = (nr + PERM_TILE - 1) / PERM_TILE;   \
        const long outer = total / (nq * nr), tasks = outer * tq * tr;                             \
        _Pragma("omp parallel for schedule(static) num_threads(be->threads) if (total >= TF_CPU_PAR_MIN)") \
        for (long t = 0; t < tasks; t++) {                                                         \
            const long br = t % tr, bq = (t / tr) % tq, ob = t / (tr * tq);                        \
            long io, oo;                                                                           \
            perm_offsets(pl, ob, q, R - 1, &io, &oo);                                              \
            const long x0 = bq * PERM_TILE, x1 = x0 + PERM_TILE < nq ? x0 + PERM_TILE : nq;        \
            const long y0 = br * PERM_TILE, y1 = y0 + PERM_TILE < nr ? y0 + PERM_TILE : nr;        \
            for (long x = x0; x < x1; x++) {                                                       \
                const T *restrict src = in + io + x * sq;                                          \
                T *restrict dst = out + oo + x * oq;                                               \
                if (acc) {                                                                         \
                    for (long y = y0; y < y1; y++)                                                 \
                        dst[y] += src[y * sr];                                                     \
                } else {                                                                           \
                    for (long y = y0; y < y1; y++)                                                 \
                        dst[y] = src[y * sr];                                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

PERM_IMPL(perm_f32, float)
PERM_IMPL(perm_16, uint16_t)

/* bf16/fp16: a permute moves bits, so the 16-bit elements move as they are;
 * accumulating, the permuted input goes to scratch first and is then added
 * by the typed add (out = round(out + in), as the fp32 op on exact values). */
void tf_cpu_permute(tf_backend *be, void *out, const void *in, const tf_permute_args *a) {
    perm_plan pl;
    perm_simplify(&pl, a);
    if (a->t == TF_F32) {
        perm_f32(be, out, in, &pl, a->accumulate);
        return;
    }
    tf_cpu_dtype_check(a->t, "permute");
    if (!a->accumulate) {
        perm_16(be, out, in, &pl, 0);
        return;
    }
    long total = 1;
    for (int k = 0; k < a->rank; k++)
        total *= a->dims[k];
    uint16_t *tmp = tf_cpu_scratch_push(be, (size_t)total * sizeof(uint16_t));
    perm_16(be, tmp, in, &pl, 0);
    tf_cpu_add(be, out, out, tmp, total, a->t);
    tf_cpu_scratch_pop(be);
}

/* bf16/fp16 rows go through fp32 blocks of BLK elements on the stack (the
 * same additions on the exact values, rounded once at the store) */
#define BLK 256

void tf_cpu_add_bcast_mid(tf_backend *be, void *y, const void *x, long outer, long mid,
                          long inner, tf_dtype t) {
    tf_cpu_dtype_check(t, "add_bcast_mid");
    const long rows = outer * mid;
    if (t == TF_F32) {
        float *yf = y;
        const float *xf = x;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * inner >= TF_CPU_PAR_MIN)
        for (long r = 0; r < rows; r++) {
            float *restrict yr = yf + r * inner;
            const float *restrict xr = xf + (r / mid) * inner;
#pragma omp simd
            for (long i = 0; i < inner; i++)
                yr[i] += xr[i];
        }
        return;
    }
    const long nblk = (inner + BLK - 1) / BLK, tasks = rows * nblk;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (rows * inner >= TF_CPU_PAR_MIN)
    for (long k = 0; k < tasks; k++) {
        const long r = k / nblk, i0 = (k % nblk) * BLK;
        const long n = inner - i0 < BLK ? inner - i0 : BLK;
        float yr[BLK], xr[BLK];
        tf_cpu_row_out(yr, y, t, r * inner + i0, n, 1);
        tf_cpu_row_in(xr, x, t, (r / mid) * inner + i0, n);
        for (long i = 0; i < n; i++)
            yr[i] += xr[i];
        tf_cpu_row_store(y, t, r * inner + i0, yr, n);
    }
}

/* Tasks are (o, block of BLK inner elements); each sums over m in order, in
 * fp32, so the result does not depend on the thread count. */
void tf_cpu_sum_mid(tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                    int accumulate, tf_dtype t) {
    tf_cpu_dtype_check(t, "sum_mid");
    const long nblk = (inner + BLK - 1) / BLK, tasks = outer * nblk;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(be->threads) if (outer * mid * inner >= TF_CPU_PAR_MIN)
    for (long k = 0; k < tasks; k++) {
        const long o = k / nblk, i0 = (k % nblk) * BLK;
        const long n = inner - i0 < BLK ? inner - i0 : BLK;
        float s[BLK], xb[BLK], yb[BLK]; /* xb, yb: half rows */
        memset(s, 0, sizeof s);
        for (long m = 0; m < mid; m++) {
            const float *restrict xr = tf_cpu_row_in(xb, x, t, (o * mid + m) * inner + i0, n);
#pragma omp simd
            for (long i = 0; i < n; i++)
                s[i] += xr[i];
        }
        float *restrict yr = tf_cpu_row_out(yb, y, t, o * inner + i0, n, accumulate);
        if (accumulate) {
#pragma omp simd
            for (long i = 0; i < n; i++)
                yr[i] += s[i];
        } else {
            memcpy(yr, s, (size_t)n * sizeof(float));
        }
        tf_cpu_row_store(y, t, o * inner + i0, yr, n);
    }
}
