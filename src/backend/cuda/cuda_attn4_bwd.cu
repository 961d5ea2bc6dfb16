/* Attention backward, kernel4 (level 3, L <= 128): one pass per (b, o, h), no
 * separate dQ kernel (see cuda_attn4.h for the design and the dispatch). With
 * S = scale q.k + bias, P = exp(S - lse), D_i = dout_i . out_i, dS = P (dout.v - D):
 *   dV_j = sum_i P_ij dout_i   dK_j = scale sum_i dS_ij q_i   dQ_i = scale sum_j dS_ij k_j
 *
 * Kernels attn_bwd_kernel4_d<DM>_l<LC> (tile shapes: tf4_bwd in cuda_attn4.h):
 *   l128: 128 threads, chunks of 32 rows, 4x8 S and dP, 8 x TKC dK/dV, dQ 8 x TC over 8 key groups
 *   l64:   64 threads, chunks of 32 rows, 4x8 S and dP, 8 x TKC dK/dV, dQ 8 x TC over 4 key groups
 *   l32:   64 threads, one chunk of 32 rows, 4x4 S and dP
 *   l16:   64 threads, one chunk of 16 rows, 2x2 S and dP
 * Every block writes D of its rows to `work` when dbias is wanted; dbias is then
 * kernel2's deterministic recomputation (tf_cu_attn_dbias2). */
#include <math.h>

#include "cuda_attn4.h"

/* The chunk of rows [i0, i0 + BQ) of Q, dout and out (float4s e = tid + NT*k:
 * row e / Q4, quad e % Q4) and lse, fetched into registers. */
template <int DM, int BQ, int QI, int NT, int LD>
struct tf4_chunk {
    float4 q[QI], g[QI], y[QI];
    float lse;

    __device__ __forceinline__ void fetch(const tf_attn_args &a, const float *qb, const float *gb,
                                          const float *yb, const float *lseb, int i0, int vec)
    {
        constexpr int Q4 = DM / 4;
        const int tid = threadIdx.x, L = a.L, d = a.d;
#pragma unroll
        for (int k = 0; k < QI; ++k) {
            const int e = tid + NT * k, r = i0 + e / Q4, c4 = e % Q4;
            q[k] = tf4_ld4(qb, a.q.sl, r, L, c4, d, vec);
            g[k] = tf4_ld4(gb, a.dout.sl, r, L, c4, d, vec);
            y[k] = tf4_ld4(yb, a.out.sl, r, L, c4, d, vec);
        }
        lse = (tid < BQ && i0 + tid < L) ? lseb[i0 + tid] : 0.f; /* row tid's */
    }

    /* Q and dout to shared memory; D_r = dout_r . out_r (quads in order, each
     * a 4-term fmaf chain, then a butterfly over the row's Q4 lanes) with lse
     * to Ls/Ds, and D to work (when not NULL) for the dbias kernel */
    __device__ __forceinline__ void put(float *Qs, float *Gs, float *Ls, float *Ds, float *work,
                                        int i0, int L) const
    {
        constexpr int Q4 = DM / 4;
        const int tid = threadIdx.x;
#pragma unroll
        for (int k = 0; k < QI; ++k) {
            const int e = tid + NT * k, r = e / Q4, c = 4 * (e % Q4);
            *reinterpret_cast<float4 *>(Qs + r * LD + c) = q[k];
            *reinterpret_cast<float4 *>(Gs + r * LD + c) = g[k];
            float p = 0.f;
            p = fmaf(g[k].x, y[k].x, p);
            p = fmaf(g[k].y, y[k].y, p);
            p = fmaf(g[k].z, y[k].z, p);
            p = fmaf(g[k].w, y[k].w, p);
            p = tf_group_sum<Q4>(p); /* quads in butterfly order, same bits in every lane */
            if (e % Q4 == 0) {
                Ds[r] = p;
                if (work && i0 + r < L) work[i0 + r] = p;
            }
        }
        if (tid < BQ) Ls[tid] = lse;
    }
};

template <int DM, int LC>
__device__ __forceinline__ void attn_bwd4_body(const tf_attn_args &a, const int vec,
                                               const int vout)
{
    typedef tf4_bwd<DM, LC> C;
    constexpr int NT = C::NT, BQ = C::BQ, LD = C::LD, PL = C::PL, NX = C::NX, NY = C::NY;
    constexpr int TM = C::TM, TN = C::TN, TR = C::TR, TC = C::TC, NRG = C::NRG, NCG = C::NCG;
    constexpr int KS = C::KS, TJ = C::TJ, TKC = C::TKC, NKC = C::NKC, QI = C::QI;
    static_assert(BQ <= NT && BQ % 4 == 0, "lse lanes");
    TF_SMEM(sm);
    float(*Ks)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OK);
    float(*Vs)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OV);
    float(*Ps)[PL] = reinterpret_cast<float(*)[PL]>(sm + C::OP);
    float(*Ss)[PL] = reinterpret_cast<float(*)[PL]>(sm + C::OS);

    const int L = a.L, d = a.d, tid = threadIdx.x;
    int b, o, h;
    tf_attn_decode(a, &b, &o, &h);
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const float *qb = tf_attn_base(a.q, b, o, h, d);
    const float *gb = tf_attn_base(a.dout, b, o, h, d);
    const float *yb = tf_attn_base(a.out, b, o, h, d);
    const float *bb = tf_attn2_bias(a, b, h);
    float *work = a.dbias && a.work ? a.work + rowbase : nullptr;
    float *dqb = tf_attn_base(a.dq, b, o, h, d);

    tf_attn2_load<DM, LC, LD, NT>(Ks, tf_attn_base(a.k, b, o, h, d), a.k.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, LD, NT>(Vs, tf_attn_base(a.v, b, o, h, d), a.v.sl, 0, L, d, vec);
    tf4_chunk<DM, BQ, QI, NT, LD> nx;
    nx.fetch(a, qb, gb, yb, a.lse + rowbase, 0, vec);
    nx.put(sm + C::OQ, sm + C::ODO, sm + C::OL, sm + C::OD, work, 0, L);
    __syncthreads();

    typedef tf4_split<NCG, KS, NRG> SP;
    const bool role_v = tid < NT / 2; /* dV, else dK */
    int tx, ty, kc, kj, cg, ks, rg;
    tf4_txy<NX>(tid, tx, ty);            /* S, dP */
    tf4_txy<NKC>(tid % (NT / 2), kc, kj); /* dK/dV: TJ keys from kj * TJ, TKC channels from kc * TKC */
    SP::map(tid, cg, ks, rg);           /* dQ */
    const int mq = ((L + 3) / 4 - ks + KS - 1) / KS;
    float kv[TJ][TKC];
#pragma unroll
    for (int t = 0; t < TJ; ++t)
#pragma unroll
        for (int u = 0; u < TKC; ++u) kv[t][u] = 0.f;

    const int nch = (L + BQ - 1) / BQ;
    for (int ch = 0; ch < nch; ++ch) {
        const int buf = ch & 1, i0 = ch * BQ, ni = min(BQ, L - i0);
        float(*Qc)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::OQ + buf * BQ * LD);
        float(*Gc)[LD] = reinterpret_cast<float(*)[LD]>(sm + C::ODO + buf * BQ * LD);
        const float *Lc = sm + C::OL + buf * BQ, *Dc = sm + C::OD + buf * BQ;

        /* ---- S and dP at the same positions; P and dS to shared memory ---- */
        {
            float s[TM][TN], dp[TM][TN];
            tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(s, Qc, Ks, ty, tx);
            tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(dp, Gc, Vs, ty, tx);
#pragma unroll
            for (int ii = 0; ii < TM; ++ii) {
                const int r = ty + NY * ii, i = i0 + r;
                const float lse_i = Lc[r], D_i = Dc[r];
#pragma unroll
                for (int jj = 0; jj < TN; ++jj) {
                    const int j = tx + NX * jj;
                    float p = 0.f;
                    if (i < L && j < L) {
                        p = expf(tf_attn2_score(a, bb, i, j, s[ii][jj]) - lse_i);
                    }
                    Ps[r][j] = p;
                    Ss[r][j] = p * (dp[ii][jj] - D_i);
                }
            }
        }
        __syncthreads(); /* P and dS complete */

        const bool more = ch + 1 < nch; /* the next chunk: fetched now, stored after dK/dV */
        if (more) nx.fetch(a, qb, gb, yb, a.lse + rowbase, i0 + BQ, vec);

        /* ---- dV += P^T dO (first half), dK += dS^T Q (second half): rows in order ---- */
        {
            const float(*X)[PL] = role_v ? Ps : Ss;
            const float(*Y)[LD] = role_v ? Gc : Qc;
#pragma unroll 2
            for (int r = 0; r < ni; ++r) {
                float xv[TJ], yv[TKC];
                tf_lds<TJ>(xv, &X[r][kj * TJ]);
                tf_lds<TKC>(yv, &Y[r][kc * TKC]);
#pragma unroll
                for (int t = 0; t < TJ; ++t)
#pragma unroll
                    for (int u = 0; u < TKC; ++u) kv[t][u] = fmaf(xv[t], yv[u], kv[t][u]);
            }
        }
        if (more) {
            const int nb = buf ^ 1;
            nx.put(sm + C::OQ + nb * BQ * LD, sm + C::ODO + nb * BQ * LD, sm + C::OL + nb * BQ,
                   sm + C::OD + nb * BQ, work, i0 + BQ, L);
        }

        /* ---- dQ = scale dS K over KS key groups, added over the group's lanes ---- */
        {
            float acc[TR * TC];
            tf4_splitk<PL, LD, TR, TC, NRG, NCG, KS>(acc, &Ss[0][0], &Ks[0][0], rg, cg, ks, mq);
            tf4_reduce_scatter<TR * TC, KS, SP::KPOS>(acc, ks);
            const int q0 = tf4_rs_base<TR * TC, KS>(ks) / TC;
#pragma unroll
            for (int q = 0; q < TR / KS; ++q) {
                const int r = rg + NRG * (q0 + q);
                if (r < ni) {
                    float *row = dqb + (long)(i0 + r) * a.dq.sl;
#pragma unroll
                    for (int k = 0; k < TC / 4; ++k) {
                        const float *x = &acc[q * TC + 4 * k];
                        tf4_st4(row, 4 * (cg + NCG * k), d, vout, a.scale * x[0], a.scale * x[1],
                                a.scale * x[2], a.scale * x[3]);
                    }
                }
            }
        }
        __syncthreads(); /* P, dS and this chunk's buffers are read; the next chunk is in place */
    }

    /* ---- dV (first half) / dK (second half) ---- */
    float *kvb = role_v ? tf_attn_base(a.dv, b, o, h, d) : tf_attn_base(a.dk, b, o, h, d);
    const long ksl = role_v ? a.dv.sl : a.dk.sl;
    const float f = role_v ? 1.f : a.scale;
#pragma unroll
    for (int t = 0; t < TJ; ++t) {
        const int j = kj * TJ + t;
        if (j < L) {
            float *row = kvb + (long)j * ksl;
#pragma unroll
            for (int k = 0; k < TKC / 4; ++k) {
                const float *x = &kv[t][4 * k];
                tf4_st4(row, kc * TKC + 4 * k, d, vout, f * x[0], f * x[1], f * x[2], f * x[3]);
            }
        }
    }
}

#define TF_ATTN4_BWD(DM, LC)                                                                 \
    extern "C" __global__ void __launch_bounds__((tf4_bwd<DM, LC>::NT), (tf4_bwd<DM, LC>::MINB))\
        attn_bwd_kernel4_d##DM##_l##LC(tf_attn_args a, int vec, int vout)                   \
    {                                                                                      \
        attn_bwd4_body<DM, LC>(a, vec, vout);                                              \
    }
TF4_EACH_CLASS(TF_ATTN4_BWD)

extern "C" size_t tf_attn4_smem_bytes(int L, int d, int backward)
{
    const int dm = tf_attn2_dm(d), lc = tf_attn4_class(L);
    if (!lc || (dm != 16 && dm != 32)) return 0;
#define SM4(DM, LC) \
    (sizeof(float) * (backward ? tf4_bwd<DM, LC>::SMEM : tf4_fwd<DM, LC>::SMEM))
    if (dm == 16)
        return lc == 16 ? SM4(16, 16) : lc == 32 ? SM4(16, 32) : lc == 64 ? SM4(16, 64) : SM4(16, 128);
    return lc == 16 ? SM4(32, 16) : lc == 32 ? SM4(32, 32) : lc == 64 ? SM4(32, 64) : SM4(32, 128);
#undef SM4
}

extern "C" void tf_cu_attn_bwd4(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    const int dm = tf_attn2_dm(a->d), lc = tf_attn4_class(a->L);
    const int vec = a->d % 4 == 0 && tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v) && tf_attn2_view_vec(&a->out) &&
                    tf_attn2_view_vec(&a->dout);
    const int vout = a->d % 4 == 0 && tf_attn2_view_vec(&a->dq) && tf_attn2_view_vec(&a->dk) &&
                     tf_attn2_view_vec(&a->dv);
    const unsigned grid = (unsigned)((long)a->nb * a->no * a->nh);
#define BWD4(DM, LC)                                                                         \
    do {                                                                                     \
        typedef tf4_bwd<DM, LC> C4;                                                          \
        TF_LAUNCH_SMEM(attn_bwd_kernel4_d##DM##_l##LC, grid, C4::NT, sizeof(float) * C4::SMEM, be, \
                   *a, vec, vout);                                                           \
    } while (0)
    TF4_BY_CLASS(dm, lc, BWD4);
#undef BWD4
    if (a->dbias) tf_cu_attn_dbias2(be, a, vec); /* D is in a->work */
}
