/* Attention backward, kernel2 (level 3): register-tiled, FlashAttention-2
 * order, no atomics. With S = scale q.k + bias, P = exp(S - lse),
 * D_i = dout_i . out_i, dS = P (dout.v - D):
 *   dV_j = sum_i P_ij dout_i   dK_j = scale sum_i dS_ij q_i   dQ_i = scale sum_j dS_ij k_j
 *   dbias(b,h,i,j) = sum_o dS_ij
 *
 * attn_bwd_kernel2_d<DM>_t<T>: one block per (b, o, h, tile of BK keys), its
 *   K and V tiles in shared memory; loops over query tiles of BQ rows:
 *   loads Q, dO, lse and computes D (written to `work` by the key-tile-0
 *   block; every block computes the same bits), then
 *     scores: S and dP as TM x TN micro-tiles, P and dS to shared memory;
 *     keys:   dV += P^T dO, dK += dS^T Q, each thread owning TJ keys x TCK
 *             channels in registers for the whole loop (no atomics);
 *     dQ:     when the block holds every key (L <= BK: all model shapes at
 *             N = 64), dQ = dS K of the query tile is complete: written here.
 * attn_bwd_dq_kernel2_d<DM>_t<T>: only when L > BK: one block per (b, o, h,
 *   query tile), loops over key tiles recomputing dS, accumulates dQ.
 * attn_bwd_dbias_kernel2_d<DM>: one block per (32x32 (i,j) tile, b, h, chunk
 *   of o), recomputes dS per o in order, o + 1's tiles fetched (cp.async)
 *   while o's are used (d <= 32); with several chunks the partial sums go to
 *   the backend's scratch and attn_bwd_dbias_reduce_kernel2 adds them in
 *   chunk order. The chunking depends on the shape only.
 * Tile classes as in the forward (tf_attn2_class): t16 BQ=BK=16, 64 threads;
 * t32 BQ=BK=32, 128 threads; t64 BQ=32, BK=64: kernel3 (default for DM 32)
 * 64 threads with 4x8 scores, 8x4 dK/dV and 4x4 dQ per thread; kernel2
 * (default for DM 16) 256 threads with 2x4, 2x4 and 1x4 (tf_gpu_route_attn). */
#include <math.h>

#include "cuda_attn2.h"
#include "cuda_attn4.h" /* tf_cu_attn_dbias2 */
#include "cuda_cp_async.h"

/* Partial dot products for D_i = dout_i . out_i of rows i0 + [0, BQ): part[r][k]
 * = sum over channels 4k..4k+3 (< d) in order; the caller adds the DM/4
 * partials of a row in order. Row-parallel over the block, like the tile loads. */
template <int DM, int BQ, int NT>
__device__ __forceinline__ void tf_attn2_dparts(float (*part)[DM / 4], const float *dob, long dsl,
                                                const float *ob, long osl, int i0, int ni, int d,
                                                int vec)
{
    constexpr int C4 = DM / 4;
    for (int e = threadIdx.x; e < BQ * C4; e += NT) {
        const int r = e / C4, k = e % C4, c = 4 * k;
        float p = 0.f;
        if (r < ni && c < d) {
            const float *x = dob + (long)(i0 + r) * dsl + c, *y = ob + (long)(i0 + r) * osl + c;
            if (vec) {
                const float4 u = *reinterpret_cast<const float4 *>(x);
                const float4 w = *reinterpret_cast<const float4 *>(y);
                p = fmaf(u.x, w.x, p);
                p = fmaf(u.y, w.y, p);
                p = fmaf(u.z, w.z, p);
                p = fmaf(u.w, w.w, p);
            } else {
                for (int u = 0; u < 4 && c + u < d; ++u) p = fmaf(x[u], y[u], p);
            }
        }
        part[r][k] = p;
    }
}

/* The score phase: P and dS of queries i0 + [0, BQ) x keys j0 + [0, BK) into
 * ps (when WITH_P) and dss; exactly 0 outside the L x L range. */
template <int DM, int BQ, int BK, int TM, int TN, bool WITH_P>
__device__ __forceinline__ void attn_bwd2_scores(const tf_attn_args &a, const float *bb,
                                                 const float (*qs)[DM + 4],
                                                 const float (*dos)[DM + 4],
                                                 const float (*ks)[DM + 4],
                                                 const float (*vs)[DM + 4], const float *ls,
                                                 const float *dd, float (*ps)[BK + 4],
                                                 float (*dss)[BK + 4], int i0, int j0)
{
    constexpr int NY = BQ / TM, NX = BK / TN, LD = DM + 4;
    const int tid = threadIdx.x, tx = tid % NX, ty = tid / NX, L = a.L;
    float s[TM][TN], dp[TM][TN];
    tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(s, qs, ks, ty, tx);
    tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(dp, dos, vs, ty, tx);
#pragma unroll
    for (int ii = 0; ii < TM; ++ii) {
        const int r = ty + NY * ii, i = i0 + r;
        const float lse_i = ls[r], D_i = dd[r];
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int c = tx + NX * jj, j = j0 + c;
            float p = 0.f;
            if (i < L && j < L) {
                p = expf(tf_attn2_score(a, bb, i, j, s[ii][jj]) - lse_i);
            }
            if constexpr (WITH_P) ps[r][c] = p;
            dss[r][c] = p * (dp[ii][jj] - D_i);
        }
    }
}

/* dq[t][cc] += sum_j dS[qi + NQ*t][j] K[j][cq*TQC + cc] over the tile's keys
 * (j in order; keys nj..nj4-1 have dS = 0 and zero rows of K) */
template <int LD, int PL, int TQM, int TQC, int NQ>
__device__ __forceinline__ void attn_bwd2_dq_acc(float (&dq)[TQM][TQC], const float (*dss)[PL],
                                                 const float (*ks)[LD], int nj, int qi, int cq)
{
    const int nj4 = (nj + 3) & ~3;
#pragma unroll 2
    for (int j = 0; j < nj4; j += 4) {
        float4 s4[TQM];
#pragma unroll
        for (int t = 0; t < TQM; ++t) s4[t] = *reinterpret_cast<const float4 *>(&dss[qi + NQ * t][j]);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            float kv[TQC];
            tf_lds<TQC>(kv, &ks[j + u][cq * TQC]);
#pragma unroll
            for (int t = 0; t < TQM; ++t) {
                const float su = tf_f4(s4[t], u);
#pragma unroll
                for (int cc = 0; cc < TQC; ++cc) dq[t][cc] = fmaf(su, kv[cc], dq[t][cc]);
            }
        }
    }
}

/* writes scale * dq for rows i0 + qi + NQ*t < i0 + ni */
template <int TQM, int TQC, int NQ>
__device__ __forceinline__ void attn_bwd2_dq_store(const tf_attn_args &a, float *dqb,
                                                   const float (&dq)[TQM][TQC], int i0, int ni,
                                                   int qi, int cq)
{
#pragma unroll
    for (int t = 0; t < TQM; ++t) {
        const int r = qi + NQ * t;
        if (r < ni) {
            float *row = dqb + (long)(i0 + r) * a.dq.sl;
#pragma unroll
            for (int cc = 0; cc < TQC; ++cc) {
                const int c = cq * TQC + cc;
                if (c < a.d) row[c] = a.scale * dq[t][cc];
            }
        }
    }
}

/* Per-thread work split of the key phase (TJ keys x TCK channels) and of the
 * dQ phase (TQM rows x TQC channels), from the tile shape. */
template <int DM, int BQ, int BK, int NT>
struct tf_attn2_split {
    static constexpr int KE = BK * DM / NT, TCK = KE >= 4 ? 4 : KE, TJ = KE / TCK;
    static constexpr int NC = DM / TCK, NJ = NT / NC;
    static constexpr int QE = BQ * DM / NT, TQC = QE >= 4 ? 4 : QE, TQM = QE / TQC;
    static constexpr int NCQ = DM / TQC, NQ = NT / NCQ;
    static_assert(KE * NT == BK * DM && NJ * TJ == BK && NC * NJ == NT, "key split");
    static_assert(QE * NT == BQ * DM && NQ * TQM == BQ && NCQ * NQ == NT, "dq split");
    static_assert(TJ == 1 || TJ == 2 || TJ % 4 == 0, "keys per thread");
};

/* ---- dK, dV (and dQ when the block holds every key), D ---- */
template <int DM, int BQ, int BK, int TM, int TN>
__device__ __forceinline__ void attn_bwd2_body(const tf_attn_args &a, const int vec,
                                               const int fuse_dq)
{
    constexpr int NY = BQ / TM, NX = BK / TN, NT = NX * NY, LD = DM + 4, PL = BK + 4;
    typedef tf_attn2_split<DM, BQ, BK, NT> S;
    constexpr int TJ = S::TJ, TCK = S::TCK, NC = S::NC;
    constexpr int TQM = S::TQM, TQC = S::TQC, NCQ = S::NCQ, NQ = S::NQ;
    static_assert(NY * TM == BQ && NX * TN == BK && TF_GROUP % NX == 0 && NT % TF_GROUP == 0, "tile shape");
    __shared__ __align__(16) float qs[BQ][LD];
    __shared__ __align__(16) float dos[BQ][LD];
    __shared__ __align__(16) float ks[BK][LD];
    __shared__ __align__(16) float vs[BK][LD];
    __shared__ __align__(16) float ps[BQ][PL];
    __shared__ __align__(16) float dss[BQ][PL];
    __shared__ float ls[BQ], dd[BQ], dpart[BQ][DM / 4];

    const int L = a.L, d = a.d, tid = threadIdx.x;
    const int nkt = (L + BK - 1) / BK;
    int b, o, h, kt;
    tf_attn_decode(a, nkt, &b, &o, &h, &kt);
    const int j0 = kt * BK, nj = min(BK, L - j0);
    const float *qb = tf_attn_base(a.q, b, o, h, d);
    const float *dob = tf_attn_base(a.dout, b, o, h, d);
    const float *ob = tf_attn_base(a.out, b, o, h, d);
    const float *bb = tf_attn2_bias(a, b, h);
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;

    tf_attn2_load<DM, BK, LD, NT>(ks, tf_attn_base(a.k, b, o, h, d), a.k.sl, j0, nj, d, vec);
    tf_attn2_load<DM, BK, LD, NT>(vs, tf_attn_base(a.v, b, o, h, d), a.v.sl, j0, nj, d, vec);

    const int kc = tid % NC, kj = tid / NC; /* key phase: keys kj*TJ.., channels kc*TCK.. */
    const int cq = tid % NCQ, qi = tid / NCQ; /* dQ phase: rows qi + NQ*t, channels cq*TQC.. */
    float dk[TJ][TCK], dv[TJ][TCK];
#pragma unroll
    for (int t = 0; t < TJ; ++t)
#pragma unroll
        for (int u = 0; u < TCK; ++u) dk[t][u] = 0.f, dv[t][u] = 0.f;

    for (int i0 = 0; i0 < L; i0 += BQ) {
        const int ni = min(BQ, L - i0);
        __syncthreads(); /* the previous query tile is no longer read */
        tf_attn2_load<DM, BQ, LD, NT>(qs, qb, a.q.sl, i0, ni, d, vec);
        tf_attn2_load<DM, BQ, LD, NT>(dos, dob, a.dout.sl, i0, ni, d, vec);
        tf_attn2_dparts<DM, BQ, NT>(dpart, dob, a.dout.sl, ob, a.out.sl, i0, ni, d, vec);
        if (tid < BQ) ls[tid] = tid < ni ? a.lse[rowbase + i0 + tid] : 0.f;
        __syncthreads();
        if (tid < BQ) { /* D: the row's partials in order (every block: the same bits) */
            float D = 0.f;
#pragma unroll
            for (int k = 0; k < DM / 4; ++k) D += dpart[tid][k];
            dd[tid] = D;
            if (kt == 0 && tid < ni) a.work[rowbase + i0 + tid] = D;
        }
        __syncthreads();
        attn_bwd2_scores<DM, BQ, BK, TM, TN, true>(a, bb, qs, dos, ks, vs, ls, dd, ps, dss, i0,
                                                   j0);
        __syncthreads();

#pragma unroll 2
        for (int r = 0; r < ni; ++r) { /* rows in order: fixed summation order */
            float pv[TJ], sv[TJ], gv[TCK], qv[TCK];
            tf_lds<TJ>(pv, &ps[r][kj * TJ]);
            tf_lds<TJ>(sv, &dss[r][kj * TJ]);
            tf_lds<TCK>(gv, &dos[r][kc * TCK]);
            tf_lds<TCK>(qv, &qs[r][kc * TCK]);
#pragma unroll
            for (int t = 0; t < TJ; ++t)
#pragma unroll
                for (int u = 0; u < TCK; ++u) {
                    dv[t][u] = fmaf(pv[t], gv[u], dv[t][u]);
                    dk[t][u] = fmaf(sv[t], qv[u], dk[t][u]);
                }
        }
        if (fuse_dq) { /* uniform: this block holds every key */
            float dq[TQM][TQC];
#pragma unroll
            for (int t = 0; t < TQM; ++t)
#pragma unroll
                for (int cc = 0; cc < TQC; ++cc) dq[t][cc] = 0.f;
            attn_bwd2_dq_acc<LD, PL, TQM, TQC, NQ>(dq, dss, ks, nj, qi, cq);
            attn_bwd2_dq_store<TQM, TQC, NQ>(a, tf_attn_base(a.dq, b, o, h, d), dq, i0, ni, qi,
                                             cq);
        }
    }

    float *dkb = tf_attn_base(a.dk, b, o, h, d);
    float *dvb = tf_attn_base(a.dv, b, o, h, d);
#pragma unroll
    for (int t = 0; t < TJ; ++t) {
        const int jl = kj * TJ + t;
        if (jl < nj) {
            float *dkr = dkb + (long)(j0 + jl) * a.dk.sl;
            float *dvr = dvb + (long)(j0 + jl) * a.dv.sl;
#pragma unroll
            for (int u = 0; u < TCK; ++u) {
                const int c = kc * TCK + u;
                if (c < d) {
                    dkr[c] = a.scale * dk[t][u];
                    dvr[c] = dv[t][u];
                }
            }
        }
    }
}

/* ---- dQ when L > BK: block per (b, o, h, query tile), loops over key tiles ---- */
template <int DM, int BQ, int BK, int TM, int TN>
__device__ __forceinline__ void attn_bwd2_dq_body(const tf_attn_args &a, const int vec)
{
    constexpr int NY = BQ / TM, NX = BK / TN, NT = NX * NY, LD = DM + 4, PL = BK + 4;
    typedef tf_attn2_split<DM, BQ, BK, NT> S;
    constexpr int TQM = S::TQM, TQC = S::TQC, NCQ = S::NCQ, NQ = S::NQ;
    __shared__ __align__(16) float qs[BQ][LD];
    __shared__ __align__(16) float dos[BQ][LD];
    __shared__ __align__(16) float ks[BK][LD];
    __shared__ __align__(16) float vs[BK][LD];
    __shared__ __align__(16) float dss[BQ][PL];
    __shared__ float ls[BQ], dd[BQ];

    const int L = a.L, d = a.d, tid = threadIdx.x;
    const int nqt = (L + BQ - 1) / BQ;
    int b, o, h, qt;
    tf_attn_decode(a, nqt, &b, &o, &h, &qt);
    const int i0 = qt * BQ, ni = min(BQ, L - i0);
    const float *kb = tf_attn_base(a.k, b, o, h, d);
    const float *vb = tf_attn_base(a.v, b, o, h, d);
    const float *bb = tf_attn2_bias(a, b, h);
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;

    tf_attn2_load<DM, BQ, LD, NT>(qs, tf_attn_base(a.q, b, o, h, d), a.q.sl, i0, ni, d, vec);
    tf_attn2_load<DM, BQ, LD, NT>(dos, tf_attn_base(a.dout, b, o, h, d), a.dout.sl, i0, ni, d,
                                  vec);
    if (tid < BQ) { /* D from the main kernel, which ran first */
        ls[tid] = tid < ni ? a.lse[rowbase + i0 + tid] : 0.f;
        dd[tid] = tid < ni ? a.work[rowbase + i0 + tid] : 0.f;
    }
    const int cq = tid % NCQ, qi = tid / NCQ;
    float dq[TQM][TQC];
#pragma unroll
    for (int t = 0; t < TQM; ++t)
#pragma unroll
        for (int cc = 0; cc < TQC; ++cc) dq[t][cc] = 0.f;

    for (int j0 = 0; j0 < L; j0 += BK) {
        const int nj = min(BK, L - j0);
        __syncthreads(); /* the previous key tile is no longer read */
        tf_attn2_load<DM, BK, LD, NT>(ks, kb, a.k.sl, j0, nj, d, vec);
        tf_attn2_load<DM, BK, LD, NT>(vs, vb, a.v.sl, j0, nj, d, vec);
        __syncthreads();
        attn_bwd2_scores<DM, BQ, BK, TM, TN, false>(a, bb, qs, dos, ks, vs, ls, dd, nullptr, dss,
                                                    i0, j0);
        __syncthreads();
        attn_bwd2_dq_acc<LD, PL, TQM, TQC, NQ>(dq, dss, ks, nj, qi, cq);
    }
    attn_bwd2_dq_store<TQM, TQC, NQ>(a, tf_attn_base(a.dq, b, o, h, d), dq, i0, ni, qi, cq);
}

/* ---- dbias ---- */
#define DB2_T 32  /* i and j tile */
#define DB2_NT 128 /* 16 x 8 threads, 2 x 4 scores each */
#define DB2_MINB 4 /* blocks an SM: <= 128 registers (d 16 and 32 without spills;
                      * 6 blocks, 80 registers, measured no faster) */

/* One o's tiles (Q and dO rows i0.., K and V rows j0.., lse and D) into one
 * stage's shared buffers: cp.async when the views are float4-aligned fp32
 * (zero-filled past the edges, as tf_attn2_load), else loads widened from E
 * (4 at once when vec). lse and D are fp32 for every E. */
/* E * as float * where E is float (the cp.async branch; not reached otherwise) */
template <class E> __device__ __forceinline__ const float *tf_f32p(const E *p)
{
    return (const float *)(const void *)p;
}
template <int DM, int LD, class E>
__device__ __forceinline__ void attn_bwd2_dbias_fetch(const tf_attn_args &a, int vec, int b, int o,
                                                      int h, int i0, int ni, int j0, int nj,
                                                      float (*qs)[LD], float (*dos)[LD],
                                                      float (*ks)[LD], float (*vs)[LD], float *ls,
                                                      float *dd)
{
    const int L = a.L, d = a.d, tid = threadIdx.x;
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const E *q = tf_attn_at<E>(a.q, b, o, h, d), *dout = tf_attn_at<E>(a.dout, b, o, h, d);
    const E *k = tf_attn_at<E>(a.k, b, o, h, d), *v = tf_attn_at<E>(a.v, b, o, h, d);
    if (vec && sizeof(E) == sizeof(float)) {
        constexpr int C4 = DM / 4;
        for (int e = tid; e < DB2_T * C4; e += DB2_NT) {
            const int r = e / C4, c = (e % C4) * 4;
            const bool oki = r < ni && c < d, okj = r < nj && c < d;
            const long ri = (long)(i0 + (oki ? r : 0)), rj = (long)(j0 + (okj ? r : 0));
            tf_cp_async(&qs[r][c], tf_f32p(q + ri * a.q.sl + c), 16, oki);
            tf_cp_async(&dos[r][c], tf_f32p(dout + ri * a.dout.sl + c), 16, oki);
            tf_cp_async(&ks[r][c], tf_f32p(k + rj * a.k.sl + c), 16, okj);
            tf_cp_async(&vs[r][c], tf_f32p(v + rj * a.v.sl + c), 16, okj);
        }
        if (tid < DB2_T) {
            const int r = tid < ni ? tid : 0;
            tf_cp_async(&ls[tid], a.lse + rowbase + i0 + r, 4, tid < ni);
            tf_cp_async(&dd[tid], a.work + rowbase + i0 + r, 4, tid < ni);
        }
    } else {
        tf_attn2_load<DM, DB2_T, LD, DB2_NT>(qs, q, a.q.sl, i0, ni, d, vec);
        tf_attn2_load<DM, DB2_T, LD, DB2_NT>(dos, dout, a.dout.sl, i0, ni, d, vec);
        tf_attn2_load<DM, DB2_T, LD, DB2_NT>(ks, k, a.k.sl, j0, nj, d, vec);
        tf_attn2_load<DM, DB2_T, LD, DB2_NT>(vs, v, a.v.sl, j0, nj, d, vec);
        if (tid < DB2_T) {
            ls[tid] = tid < ni ? a.lse[rowbase + i0 + tid] : 0.f;
            dd[tid] = tid < ni ? a.work[rowbase + i0 + tid] : 0.f;
        }
    }
}

/* The o loop is a two-stage pipeline where the buffers fit the 48 KB of
 * static shared memory (DM <= 32): o + 1's tiles are fetched (cp.async)
 * while o's scores are computed. Each step has only ~256 FMAs a thread
 * between two barriers, too few to hide the loads' latency: unpipelined,
 * the loads are the kernel's time. The arithmetic and its order are those
 * of the unpipelined loop: the same bits. */
template <int DM, class E>
__device__ __forceinline__ void attn_bwd2_dbias_body(const tf_attn_args &a, const int vec,
                                                     const int nchunk, float *part)
{
    constexpr int TM = 2, TN = 4, NY = DB2_T / TM, NX = DB2_T / TN, LD = DM + 4;
    constexpr int NS = DM <= 32 ? 2 : 1; /* pipeline stages */
    static_assert(NY * NX == DB2_NT, "dbias tile");
    __shared__ __align__(16) float qs[NS][DB2_T][LD];
    __shared__ __align__(16) float dos[NS][DB2_T][LD];
    __shared__ __align__(16) float ks[NS][DB2_T][LD];
    __shared__ __align__(16) float vs[NS][DB2_T][LD];
    __shared__ __align__(16) float ls[NS][DB2_T], dd[NS][DB2_T];

    const int L = a.L, tid = threadIdx.x, tx = tid % NX, ty = tid / NX;
    const int nt = (L + DB2_T - 1) / DB2_T;
    long idx = blockIdx.x;
    const int jt = (int)(idx % nt);
    idx /= nt;
    const int it = (int)(idx % nt);
    idx /= nt;
    const int h = (int)(idx % a.nh);
    idx /= a.nh;
    const int b = (int)(idx % a.nb);
    const int chunk = (int)(idx / a.nb);
    const int opc = (a.no + nchunk - 1) / nchunk;
    const int o0 = chunk * opc, o1 = min(a.no, o0 + opc);
    const int i0 = it * DB2_T, j0 = jt * DB2_T;
    const int ni = min(DB2_T, L - i0), nj = min(DB2_T, L - j0);
    const E *bb = tf_attn2_bias<E>(a, b, h);

    float bv[TM][TN], acc[TM][TN];
#pragma unroll
    for (int ii = 0; ii < TM; ++ii)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int i = i0 + ty + NY * ii, j = j0 + tx + NX * jj;
            bv[ii][jj] = (i < L && j < L) ? tf_attn2_bias_at(a, bb, i, j) : 0.f;
            acc[ii][jj] = 0.f;
        }

#define DBIAS_FETCH(o, s)                                                                   \
    attn_bwd2_dbias_fetch<DM, LD, E>(a, vec, b, o, h, i0, ni, j0, nj, qs[s], dos[s], ks[s], vs[s], \
                                  ls[s], dd[s])
    if (NS == 2 && o0 < o1) DBIAS_FETCH(o0, 0);
    tf_cp_commit();
    for (int o = o0; o < o1; ++o) { /* in order: the sum over o is deterministic */
        const int s = NS == 2 ? (o - o0) & 1 : 0;
        /* the buffer written here was last read before the previous step's
         * closing barrier */
        if (NS == 1) DBIAS_FETCH(o, 0);
        else if (o + 1 < o1) DBIAS_FETCH(o + 1, s ^ 1);
        tf_cp_commit();
        if (NS == 2) tf_cp_wait<1>(); /* o's group is complete, o + 1's may not be */
        else tf_cp_wait<0>();
        __syncthreads();
        float sc[TM][TN], dp[TM][TN];
        tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(sc, qs[s], ks[s], ty, tx);
        tf_attn2_dots<DM, TM, TN, NY, NX, LD, 2>(dp, dos[s], vs[s], ty, tx);
#pragma unroll
        for (int ii = 0; ii < TM; ++ii) {
            const int r = ty + NY * ii;
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const float p = expf(fmaf(a.scale, sc[ii][jj], bv[ii][jj]) - ls[s][r]);
                acc[ii][jj] += p * (dp[ii][jj] - dd[s][r]); /* as the main kernel's dS */
            }
        }
        __syncthreads(); /* this buffer is refilled two steps on */
    }
#undef DBIAS_FETCH

    const long total = (long)a.nb * a.nh * L * L;
#pragma unroll
    for (int ii = 0; ii < TM; ++ii)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int i = i0 + ty + NY * ii, j = j0 + tx + NX * jj;
            if (i < L && j < L) {
                if (part)
                    part[chunk * total + (((long)b * a.nh + h) * L + i) * L + j] = acc[ii][jj];
                else
                    ((E *)a.dbias)[(long)b * a.bias_sb + (long)h * a.bias_sh + (long)i * a.bias_si +
                                   (long)j * a.bias_sj] = acc[ii][jj];
            }
        }
}

/* dbias(b,h,i,j) = sum over chunks k in order of part[k][b,h,i,j] */
template <class E>
__device__ __forceinline__ void attn_bwd2_dbias_reduce(const tf_attn_args &a, const float *part,
                                                       int nchunk)
{
    const long L = a.L, total = (long)a.nb * a.nh * L * L;
    const long stride = (long)gridDim.x * blockDim.x;
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        float s = 0.f;
        for (int k = 0; k < nchunk; ++k) s += part[k * total + t];
        const long j = t % L, i = (t / L) % L, bh = t / (L * L);
        const long h = bh % a.nh, b = bh / a.nh;
        ((E *)a.dbias)[b * a.bias_sb + h * a.bias_sh + i * a.bias_si + j * a.bias_sj] = s;
    }
}
#define TF_ATTN2_DBIAS_REDUCE(SFX, E)                                                        \
    extern "C" __global__ void attn_bwd_dbias_reduce_kernel2##SFX(tf_attn_args a,            \
                                                                  const float *part, int nchunk) \
    {                                                                                        \
        attn_bwd2_dbias_reduce<E>(a, part, nchunk);                                          \
    }
TF_ATTN2_DBIAS_REDUCE(, float)
TF_ATTN2_DBIAS_REDUCE(_bf16, tf_cu_bf16)
TF_ATTN2_DBIAS_REDUCE(_f16, tf_cu_f16)

#define TF_ATTN2_BWD(VER, DM, BQ, BK, TM, TN, MINB)                                          \
    extern "C" __global__ void __launch_bounds__((BQ / TM) * (BK / TN), MINB)               \
        attn_bwd_kernel##VER##_d##DM##_t##BK(tf_attn_args a, int vec, int fuse_dq)         \
    {                                                                                      \
        attn_bwd2_body<DM, BQ, BK, TM, TN>(a, vec, fuse_dq);                               \
    }
/* the separate dQ pass exists where L can exceed BK: t64, and t32 for DM 64 */
#define TF_ATTN2_BWDQ(VER, DM, BQ, BK, TM, TN, MINB)                                         \
    extern "C" __global__ void __launch_bounds__((BQ / TM) * (BK / TN), MINB)               \
        attn_bwd_dq_kernel##VER##_d##DM##_t##BK(tf_attn_args a, int vec)                   \
    {                                                                                      \
        attn_bwd2_dq_body<DM, BQ, BK, TM, TN>(a, vec);                                     \
    }
TF_ATTN2_BWD(2, 16, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_BWD(2, 32, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_BWD(2, 64, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_BWD(2, 16, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_BWD(2, 32, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_BWD(2, 64, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_BWD(2, 16, 32, 64, 2, 4, TF_ATTN2_MINB_T64)
TF_ATTN2_BWD(2, 32, 32, 64, 2, 4, TF_ATTN2_MINB_T64)
TF_ATTN2_BWDQ(2, 64, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_BWDQ(2, 16, 32, 64, 2, 4, TF_ATTN2_MINB_T64)
TF_ATTN2_BWDQ(2, 32, 32, 64, 2, 4, TF_ATTN2_MINB_T64)
/* kernel3: 4 x 8 scores, 8 keys x 4 channels of dK/dV per thread, 64 threads */
TF_ATTN2_BWD(3, 16, 32, 64, 4, 8, TF_ATTN3_MINB_BWD)
TF_ATTN2_BWD(3, 32, 32, 64, 4, 8, TF_ATTN3_MINB_BWD)
TF_ATTN2_BWDQ(3, 16, 32, 64, 4, 8, TF_ATTN3_MINB_BWD)
TF_ATTN2_BWDQ(3, 32, 32, 64, 4, 8, TF_ATTN3_MINB_BWD)

#define TF_ATTN2_DBIAS(DM, SFX, E)                                                           \
    extern "C" __global__ void __launch_bounds__(DB2_NT, DB2_MINB)                           \
        attn_bwd_dbias_kernel2_d##DM##SFX(tf_attn_args a, int vec, int nchunk, float *part)  \
    {                                                                                        \
        attn_bwd2_dbias_body<DM, E>(a, vec, nchunk, part);                                   \
    }
#define TF_ATTN2_DBIAS_T(SFX, E)                                                             \
    TF_ATTN2_DBIAS(16, SFX, E)                                                               \
    TF_ATTN2_DBIAS(32, SFX, E)                                                               \
    TF_ATTN2_DBIAS(64, SFX, E)
TF_ATTN2_DBIAS_T(, float)
TF_ATTN2_DBIAS_T(_bf16, tf_cu_bf16)
TF_ATTN2_DBIAS_T(_f16, tf_cu_f16)

/* Chunks of o for dbias: enough blocks to fill the GPU (~512), within the
 * backend's scratch area; a function of the shape only. */
static int dbias_chunks(const tf_attn_args *a)
{
    const long nt = (a->L + DB2_T - 1) / DB2_T;
    const long tiles = (long)a->nb * a->nh * nt * nt;
    const long total = (long)a->nb * a->nh * a->L * a->L;
    long n = (512 + tiles - 1) / tiles;
    const long cap = (long)(TF_CU_SCRATCH_FLOATS / (size_t)total);
    if (n > cap) n = cap;
    if (n > a->no) n = a->no;
    if (n < 1) n = 1;
    const long opc = (a->no + n - 1) / n; /* every chunk non-empty */
    return (int)((a->no + opc - 1) / opc);
}

extern "C" void tf_cu_attn_bwd2(tf_backend *be, const tf_attn_args *a, int k3)
{
    if (!tf_attn_check(a)) return;
    const int dm = tf_attn2_dm(a->d), cls = tf_attn2_class(a->L, dm);
    const int vec = a->d % 4 == 0 && tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v) && tf_attn2_view_vec(&a->out) &&
                    tf_attn2_view_vec(&a->dout);
    const long bh = (long)a->nb * a->no * a->nh;
    const int BK = cls, BQ = cls == 64 ? 32 : cls, NT = cls == 16 ? 64 : cls == 32 ? 128 : 256;
    const long nkt = (a->L + BK - 1) / BK, nqt = (a->L + BQ - 1) / BQ;
    const int fuse = nkt == 1;
    const dim3 gk((unsigned)(bh * nkt)), gq((unsigned)(bh * nqt)), blk(NT);
#define BWD2(DM, T) TF_LAUNCH(attn_bwd_kernel2_d##DM##_t##T, gk, blk, be->stream, *a, vec, fuse)
#define BWDQ(DM, T) TF_LAUNCH(attn_bwd_dq_kernel2_d##DM##_t##T, gq, blk, be->stream, *a, vec)
#define BWD3(DM)                                                                              \
    do {                                                                                      \
        TF_LAUNCH(attn_bwd_kernel3_d##DM##_t64, gk, dim3(64), be->stream, *a, vec, fuse);     \
        if (!fuse) TF_LAUNCH(attn_bwd_dq_kernel3_d##DM##_t64, gq, dim3(64), be->stream, *a, vec); \
    } while (0)
    /* fuse is 1 for t16, and for t32 unless DM is 64 (then L <= BK) */
    if (cls == 16) {
        if (dm == 16) BWD2(16, 16);
        else if (dm == 32) BWD2(32, 16);
        else BWD2(64, 16);
    } else if (cls == 32) {
        if (dm == 16) BWD2(16, 32);
        else if (dm == 32) BWD2(32, 32);
        else {
            BWD2(64, 32);
            if (!fuse) BWDQ(64, 32);
        }
    } else if (k3) {
        if (dm == 16) BWD3(16);
        else BWD3(32);
    } else if (dm == 16) {
        BWD2(16, 64);
        if (!fuse) BWDQ(16, 64);
    } else {
        BWD2(32, 64);
        if (!fuse) BWDQ(32, 64);
    }
#undef BWD2
#undef BWDQ
#undef BWD3
    if (a->dbias) tf_cu_attn_dbias2(be, a, vec);
}

/* dbias from D in a->work (also kernel4's, cuda_attn4_bwd.cu) */
extern "C" void tf_cu_attn_dbias2(tf_backend *be, const tf_attn_args *a, int vec)
{
    const int dm = tf_attn2_dm(a->d);
    const int nchunk = dbias_chunks(a);
    float *part = nchunk > 1 ? be->scratch : NULL;
    const long nt = (a->L + DB2_T - 1) / DB2_T;
    const dim3 gb((unsigned)((long)nchunk * a->nb * a->nh * nt * nt)), bb(DB2_NT);
#define DBIAS2(SFX)                                                                          \
    do {                                                                                     \
        if (dm == 16)                                                                        \
            TF_LAUNCH(attn_bwd_dbias_kernel2_d16##SFX, gb, bb, be->stream, *a, vec, nchunk, part); \
        else if (dm == 32)                                                                   \
            TF_LAUNCH(attn_bwd_dbias_kernel2_d32##SFX, gb, bb, be->stream, *a, vec, nchunk, part); \
        else                                                                                 \
            TF_LAUNCH(attn_bwd_dbias_kernel2_d64##SFX, gb, bb, be->stream, *a, vec, nchunk, part); \
        if (part)                                                                            \
            TF_LAUNCH(attn_bwd_dbias_reduce_kernel2##SFX, dim3(tf_cu_grid(be, total, 256)),    \
                      dim3(256), be->stream, *a, (const float *)part, nchunk);               \
    } while (0)
    const long total = (long)a->nb * a->nh * a->L * a->L;
    if (a->t == TF_BF16) DBIAS2(_bf16);
    else if (a->t == TF_F16) DBIAS2(_f16);
    else DBIAS2();
#undef DBIAS2
}
