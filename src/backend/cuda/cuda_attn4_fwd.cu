/* Attention forward, kernel4 (level 3, L <= 128): one block per (b, o, h), K
 * and V in shared memory once, exact softmax per chunk of BQ query rows (see
 * cuda_attn4.h for the design and the dispatch).
 *
 * Kernels attn_fwd_kernel4_d<DM>_l<LC> (tile shapes: tf4_fwd in cuda_attn4.h):
 *   l128: 128 threads, BQ 64 (two chunks), 8x8 scores, P V 8 x TC over 4 key groups
 *   l64:   64 threads, BQ 64 (one chunk), 8x8 scores, P V 8 x TC over 2 key groups
 *   l32:   32 threads, BQ 32, 4x8 scores, P V 8x4 (DM 32) / 4x4 (DM 16)
 *   l16:   32 threads, BQ 16, 2x4 scores, P V 4x4 (over 2 key groups at DM 16) */
#include <math.h>

#include "cuda_attn4.h"

template <int DM, int LC>
__device__ __forceinline__ void attn_fwd4_body(const tf_attn_args &a, const int vec,
                                               const int vout)
{
    typedef tf4_fwd<DM, LC> C;
    constexpr int NT = C::NT, BQ = C::BQ, LD = C::LD, PL = C::PL, NX = C::NX, NY = C::NY;
    constexpr int TM = C::TM, TN = C::TN, TR = C::TR, TC = C::TC, NRG = C::NRG, NCG = C::NCG;
    constexpr int KS = C::KS, QI = C::QI, Q4 = DM / 4;
    TF_SMEM(sm);
    float(*Ks)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OK);
    float(*Vs)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OV);
    float(*Qs)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OQ);
    float(*Ps)[PL] = reinterpret_cast<float(*)[PL]>(sm + C::OP);
    float *Ls = sm + C::OL;

    const int L = a.L, d = a.d, tid = threadIdx.x;
    int b, o, h;
    tf_attn_decode(a, &b, &o, &h);
    const float *qb = tf_attn_base(a.q, b, o, h, d);
    const float *bb = tf_attn2_bias(a, b, h);
    float *ob = tf_attn_base(a.out, b, o, h, d);
    float *lseb = a.lse + (((long)b * a.no + o) * a.nh + h) * L;

    tf_attn2_load<DM, LC, LD, NT>(Ks, tf_attn_base(a.k, b, o, h, d), a.k.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, LD, NT>(Vs, tf_attn_base(a.v, b, o, h, d), a.v.sl, 0, L, d, vec);
    float4 qn[QI]; /* a Q chunk: float4 e = tid + NT*k is row e / Q4, quad e % Q4 */
#pragma unroll
    for (int k = 0; k < QI; ++k) {
        const int e = tid + NT * k;
        qn[k] = tf4_ld4(qb, a.q.sl, e / Q4, L, e % Q4, d, vec);
    }
#pragma unroll
    for (int k = 0; k < QI; ++k) {
        const int e = tid + NT * k;
        *reinterpret_cast<float4 *>(&Qs[e / Q4][4 * (e % Q4)]) = qn[k];
    }
    __syncthreads();

    typedef tf4_split<NCG, KS, NRG> SP;
    int tx, ty, cg, ks, rg;
    tf4_txy<NX>(tid, tx, ty);   /* scores */
    SP::map(tid, cg, ks, rg); /* P V */
    const int mq = ((L + 3) / 4 - ks + KS - 1) / KS; /* key quads of group ks with a key < L */
    for (int i0 = 0; i0 < L; i0 += BQ) {
        /* ---- S = Q K^T, exact softmax over the whole row ---- */
        float s[TM][TN];
        tf_attn2_dots<DM, TM, TN, NY, NX, LD, C::UNR>(s, Qs, Ks, ty, tx);
#pragma unroll
        for (int ii = 0; ii < TM; ++ii) {
            const int r = ty + NY * ii, i = i0 + r;
            float mx = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const int j = tx + NX * jj;
                /* keys past L: p = 0; query rows past L read no bias */
                const float v = j < L ? tf_attn2_score(a, i < L ? bb : nullptr, i, j, s[ii][jj])
                                      : -INFINITY;
                s[ii][jj] = v;
                mx = fmaxf(mx, v);
            }
            mx = tf4_row_max<NX>(mx); /* key 0 < L: finite */
            float lt = 0.f;
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const float p = expf(s[ii][jj] - mx);
                lt += p;
                Ps[r][tx + NX * jj] = p;
            }
            lt = tf4_row_sum<NX>(lt);
            if (tx == 0) {
                Ls[r] = lt;
                if (i < L) lseb[i] = mx + logf(lt);
            }
        }
        __syncthreads(); /* P and the row sums complete; Q no longer read */

        const int n0 = i0 + BQ; /* the next chunk: fetched now, stored after P V */
        const bool more = n0 < L;
        if (more) {
#pragma unroll
            for (int k = 0; k < QI; ++k) {
                const int e = tid + NT * k;
                qn[k] = tf4_ld4(qb, a.q.sl, n0 + e / Q4, L, e % Q4, d, vec);
            }
        }

        /* ---- O = P V over KS key groups, added over the group's lanes ---- */
        float acc[TR * TC];
        tf4_splitk<PL, LD, TR, TC, NRG, NCG, KS>(acc, &Ps[0][0], &Vs[0][0], rg, cg, ks, mq);
        tf4_reduce_scatter<TR * TC, KS, SP::KPOS>(acc, ks);
        const int q0 = tf4_rs_base<TR * TC, KS>(ks) / TC; /* first of this lane's rows */
#pragma unroll
        for (int q = 0; q < TR / KS; ++q) {
            const int r = rg + NRG * (q0 + q), i = i0 + r;
            if (i < L) {
                const float inv = 1.f / Ls[r];
                float *orow = ob + (long)i * a.out.sl;
#pragma unroll
                for (int k = 0; k < TC / 4; ++k) {
                    const float *x = &acc[q * TC + 4 * k];
                    tf4_st4(orow, 4 * (cg + NCG * k), d, vout, x[0] * inv, x[1] * inv,
                            x[2] * inv, x[3] * inv);
                }
            }
        }
        if (more) {
#pragma unroll
            for (int k = 0; k < QI; ++k) {
                const int e = tid + NT * k;
                *reinterpret_cast<float4 *>(&Qs[e / Q4][4 * (e % Q4)]) = qn[k];
            }
        }
        __syncthreads(); /* P and the row sums are read; the next Q is in place */
    }
}

#define TF_ATTN4_FWD(DM, LC)                                                                 \
    extern "C" __global__ void __launch_bounds__((tf4_fwd<DM, LC>::NT), (tf4_fwd<DM, LC>::MINB))\
        attn_fwd_kernel4_d##DM##_l##LC(tf_attn_args a, int vec, int vout)                   \
    {                                                                                      \
        attn_fwd4_body<DM, LC>(a, vec, vout);                                              \
    }
TF4_EACH_CLASS(TF_ATTN4_FWD)

extern "C" void tf_cu_attn_fwd4(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    const int dm = tf_attn2_dm(a->d), lc = tf_attn4_class(a->L);
    const int vec = a->d % 4 == 0 && tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v);
    const int vout = a->d % 4 == 0 && tf_attn2_view_vec(&a->out);
    const unsigned grid = (unsigned)((long)a->nb * a->no * a->nh);
#define FWD4(DM, LC)                                                                         \
    do {                                                                                     \
        typedef tf4_fwd<DM, LC> C4;                                                          \
        TF_LAUNCH_SMEM(attn_fwd_kernel4_d##DM##_l##LC, grid, C4::NT, sizeof(float) * C4::SMEM, be, \
                   *a, vec, vout);                                                           \
    } while (0)
    TF4_BY_CLASS(dm, lc, FWD4);
#undef FWD4
}
