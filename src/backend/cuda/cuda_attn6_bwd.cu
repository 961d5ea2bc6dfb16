/* Attention backward, kernel6 (cuda_attn6.h): the half types on the m16n8k16
 * tile, any L. With S = scale q.k + bias, P = exp(S - lse), D_i = dout_i .
 * out_i, dP = dout v^T and dS = P (dP - D):
 *   dQ = scale dS k    dK = scale dS^T q    dV = P^T dout    dbias = sum_o dS
 * Every sum has one owner and a fixed order (no atomics), so results repeat
 * bit for bit; P and dS are recomputed by each kernel that needs them and
 * never reach global memory:
 *   - the dQ kernel, one block per (b, o, h) and 64 queries (a warp per 16),
 *     keys in tiles of 64; it computes D of its rows first (into `work`);
 *   - the dK/dV kernel, one block per (b, o, h) and 64 keys (a warp per 16),
 *     queries in tiles of 64: the transposed scores S^T and dP^T (A = the
 *     warp's K and V rows, held as fragments) give P^T and dS^T, which are at
 *     once the A fragments of dV += P^T dout and dK += dS^T q;
 *   - with a bias, the bias-gradient kernel: one block per (b, h) and 16
 *     queries x 32 keys, its 4 warps taking o = w, w + 4, ... each through
 *     shared memory of its own, the 4 partial sums added in warp order.
 * Every kernel stages its bias tiles in shared memory with its operands
 * (cuda_attn6.h tf6_bias_tile), as the forward does: no strided global load
 * an element. */
#include <math.h>

#include "cuda_attn6.h"

/* S = q k^T and dP = dout v^T of a warp's 16 queries (A fragments qa, ga)
 * against the NJ x 8 keys of Ks and Vs */
template <int NJ, int KD, class E>
__device__ __forceinline__ void tf6_s_dp(float (*s)[4], float (*dp)[4], const uint32_t (*qa)[4],
                                         const uint32_t (*ga)[4], const uint16_t *Ks,
                                         const uint16_t *Vs, int LD)
{
    tf_tile_zero<NJ>(s);
    tf_tile_zero<NJ>(dp);
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            uint32_t kf[2], vf[2];
            tf_tile_load_bt(kf, Ks, LD, 8 * j, 16 * kk);
            tf_tile_mma<E>(s[j], qa[kk], kf);
            tf_tile_load_bt(vf, Vs, LD, 8 * j, 16 * kk);
            tf_tile_mma<E>(dp[j], ga[kk], vf);
        }
}

/* P = exp2(score - lse) and dS = P (dP - D) of a warp's rows (rlo, rhi of
 * the staged bias tile Bt, tf6_boff's layout; valid where ok) against keys
 * k0 + 8 j + 2 t + u (bias columns cb + ...; zero from L on): s becomes P,
 * dp becomes dS */
template <int NJ, bool BIAS, class E, int LDB, bool SWZ>
__device__ __forceinline__ void tf6_p_ds(float (*s)[4], float (*dp)[4], const uint16_t *Bt, int rlo,
                                         int rhi, int cb, int k0, int L, const bool *ok, float c2,
                                         const float *lse2, const float *dd)
{
    const int t = (threadIdx.x & 31) & 3;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float bl = 0.f, bh = 0.f;
            if (BIAS) tf6_bias_pair<E, LDB, SWZ>(Bt, hf ? rhi : rlo, cb + 8 * j + 2 * t, &bl, &bh);
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int e = 2 * hf + u, jk = k0 + 8 * j + 2 * t + u;
                float p = 0.f;
                if (jk < L && ok[hf]) p = tf6_exp2(tf6_arg2<BIAS>(s[j][e], c2, u ? bh : bl, lse2[hf]));
                s[j][e] = p;
                dp[j][e] = p * (dp[j][e] - dd[hf]);
            }
        }
}

/* dQ, and D of the block's queries */
template <int DM, bool BIAS, class E>
__global__ void __launch_bounds__(tf6<DM>::NT, BIAS ? 3 : 4) attn_bwd_dq_kernel6(tf_attn_args a, int ntq, int vec,
                                                                             int bvec, float c2)
{
    typedef tf6<DM> C;
    constexpr int LD = C::LD, KD = C::KD, ND = C::ND, NJ = C::NJ, BK = C::BK, BQ = C::BQ;
    __shared__ __align__(16) uint16_t Qs[BQ * LD];
    __shared__ __align__(16) uint16_t Gs[BQ * LD];    /* dout */
    __shared__ __align__(16) uint16_t Ks[2][BK * LD]; /* key tiles t and t + 1 */
    __shared__ __align__(16) uint16_t Vs[2][BK * LD];
    __shared__ __align__(16) uint16_t Bs[2][BIAS ? BQ * BK : 8]; /* their bias tiles (swizzled) */
    __shared__ float Ls[BQ], Ds[BQ];

    const int L = a.L, tid = (int)threadIdx.x;
    int b, o, h, tile;
    tf_attn_decode(a, ntq, &b, &o, &h, &tile);
    const int q0 = tile * BQ;
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    const E *kb = tf_attn_at<E>(a.k, b, o, h, DM), *vb = tf_attn_at<E>(a.v, b, o, h, DM);
    const E *gb = tf_attn_at<E>(a.dout, b, o, h, DM) + (long)q0 * a.dout.sl;
    const E *yb = tf_attn_at<E>(a.out, b, o, h, DM) + (long)q0 * a.out.sl;
    tf6_load_async<DM, BQ, LD, C::NT>(Qs, tf_attn_at<E>(a.q, b, o, h, DM) + (long)q0 * a.q.sl,
                                      a.q.sl, 0, L - q0, vec, tid);
    tf6_load_async<DM, BQ, LD, C::NT>(Gs, gb, a.dout.sl, 0, L - q0, vec, tid);
    tf6_load_async<DM, BK, LD, C::NT>(Ks[0], kb, a.k.sl, 0, L, vec, tid);
    tf6_load_async<DM, BK, LD, C::NT>(Vs[0], vb, a.v.sl, 0, L, vec, tid);
    tf6_load_async<DM, BQ, LD, C::NT>(Ks[1], yb, a.out.sl, 0, L - q0, vec, tid); /* out, until key tile 1 */
    if (BIAS) tf6_bias_tile<BQ, BK, BK, true, C::NT>(Bs[0], bb, a.bias_si, a.bias_sj, q0, 0, L, bvec, tid);
    tf_cp_commit();
    const float ls = tid < BQ && q0 + tid < L ? a.lse[rowbase + q0 + tid] * TF6_LOG2E : 0.f;
    tf_cp_wait<0>();
    __syncthreads();
    if (tid < BQ) {
        const int i = q0 + tid;
        float dd = 0.f;
        if (i < L) {
            dd = tf6_dot_rows<DM, E>(Gs + tid * LD, Ks[1] + tid * LD);
            a.work[rowbase + i] = dd;
        }
        Ds[tid] = dd;
        Ls[tid] = ls;
    }
    __syncthreads(); /* D is in; key tile 1 may land on out's rows */

    const int lane = tid & 31, g = lane >> 2, t = lane & 3, w = tid >> 5;
    uint32_t qa[KD][4], ga[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
        tf_tile_load_a(qa[kk], Qs, LD, 16 * w, 16 * kk);
        tf_tile_load_a(ga[kk], Gs, LD, 16 * w, 16 * kk);
    }
    const int rlo = 16 * w + g, rhi = rlo + 8, ilo = q0 + rlo, ihi = q0 + rhi;
    const float lse2[2] = {Ls[rlo], Ls[rhi]}, dd[2] = {Ds[rlo], Ds[rhi]};
    const bool ok[2] = {ilo < L, ihi < L};

    float dq[ND][4];
    tf_tile_zero<ND>(dq);
    #pragma unroll 1
    for (int k0 = 0, buf = 0; k0 < L; k0 += BK, buf ^= 1) {
        const bool more = k0 + BK < L; /* the next tile's copies run meanwhile */
        if (more) {
            tf6_load_async<DM, BK, LD, C::NT>(Ks[buf ^ 1], kb, a.k.sl, k0 + BK, L, vec, tid);
            tf6_load_async<DM, BK, LD, C::NT>(Vs[buf ^ 1], vb, a.v.sl, k0 + BK, L, vec, tid);
            if (BIAS)
                tf6_bias_tile<BQ, BK, BK, true, C::NT>(Bs[buf ^ 1], bb, a.bias_si, a.bias_sj, q0, k0 + BK, L,
                                                 bvec, tid);
            tf_cp_commit();
        }
        const uint16_t *Kt = Ks[buf];
        float s[NJ][4], dp[NJ][4];
        tf6_s_dp<NJ, KD, E>(s, dp, qa, ga, Kt, Vs[buf], LD);
        tf6_p_ds<NJ, BIAS, E, BK, true>(s, dp, Bs[buf], rlo, rhi, 0, k0, L, ok, c2, lse2, dd);
        tf_tile_mul_c<BK / 16, ND, E>(dq, dp, Kt, LD); /* dq += dS K */
        if (more) tf_cp_wait<0>();
        __syncthreads(); /* the next tile is in; this one is consumed */
    }
    E *dqb = tf_attn_at<E>(a.dq, b, o, h, DM);
    const bool v2 = tf6_pair_ok(a.dq);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        if (!ok[hf]) continue;
        E *row = dqb + (long)(hf ? ihi : ilo) * a.dq.sl;
#pragma unroll
        for (int n = 0; n < ND; ++n)
            tf6_store2<E>(row + 8 * n + 2 * t, a.scale * dq[n][2 * hf], a.scale * dq[n][2 * hf + 1], v2);
    }
}

/* dK and dV of the block's keys (D from the dQ kernel's `work`) */
template <int DM, bool BIAS, class E>
__global__ void __launch_bounds__(tf6<DM>::NT, BIAS ? 3 : 4) attn_bwd_dkv_kernel6(tf_attn_args a, int ntk, int vec,
                                                                              int bvec, float c2)
{
    typedef tf6<DM> C;
    constexpr int LD = C::LD, KD = C::KD, ND = C::ND, BK = C::BK, BQ = C::BQ;
    __shared__ __align__(16) uint16_t Ks[BK * LD];
    __shared__ __align__(16) uint16_t Vs[BK * LD];
    __shared__ __align__(16) uint16_t Qs[2][BQ * LD]; /* query tiles t and t + 1 */
    __shared__ __align__(16) uint16_t Gs[2][BQ * LD];
    __shared__ __align__(16) uint16_t Bs[2][BIAS ? BQ * BK : 8]; /* their bias: queries x our keys (swizzled) */
    __shared__ float Ls[2][BQ], Ds[2][BQ];

    const int L = a.L, tid = (int)threadIdx.x;
    int b, o, h, tile;
    tf_attn_decode(a, ntk, &b, &o, &h, &tile);
    const int k0 = tile * BK;
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    const E *qb = tf_attn_at<E>(a.q, b, o, h, DM), *gb = tf_attn_at<E>(a.dout, b, o, h, DM);
    /* the query tile q0's copies (and its lse, D) into buffer buf */
    auto issue = [&](int q0, int buf) {
        tf6_load_async<DM, BQ, LD, C::NT>(Qs[buf], qb, a.q.sl, q0, L, vec, tid);
        tf6_load_async<DM, BQ, LD, C::NT>(Gs[buf], gb, a.dout.sl, q0, L, vec, tid);
        if (BIAS) tf6_bias_tile<BQ, BK, BK, true, C::NT>(Bs[buf], bb, a.bias_si, a.bias_sj, q0, k0, L, bvec, tid);
        tf_cp_commit();
        if (tid < BQ) {
            const int i = q0 + tid;
            Ls[buf][tid] = i < L ? a.lse[rowbase + i] * TF6_LOG2E : 0.f;
            Ds[buf][tid] = i < L ? a.work[rowbase + i] : 0.f;
        }
    };
    tf6_load_async<DM, BK, LD, C::NT>(Ks, tf_attn_at<E>(a.k, b, o, h, DM), a.k.sl, k0, L, vec, tid);
    tf6_load_async<DM, BK, LD, C::NT>(Vs, tf_attn_at<E>(a.v, b, o, h, DM), a.v.sl, k0, L, vec, tid);
    issue(0, 0);
    tf_cp_wait<0>();
    __syncthreads();

    const int lane = tid & 31, g = lane >> 2, t = lane & 3, w = tid >> 5;
    uint32_t ka[KD][4], va[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
        tf_tile_load_a(ka[kk], Ks, LD, 16 * w, 16 * kk);
        tf_tile_load_a(va[kk], Vs, LD, 16 * w, 16 * kk);
    }
    const int jlo = k0 + 16 * w + g, jhi = jlo + 8;
    float dv[ND][4], dk[ND][4];
    tf_tile_zero<ND>(dv);
    tf_tile_zero<ND>(dk);
    #pragma unroll 1
    for (int q0 = 0, buf = 0; q0 < L; q0 += BQ, buf ^= 1) {
        const bool more = q0 + BQ < L; /* the next tile's copies run meanwhile */
        if (more) issue(q0 + BQ, buf ^ 1);
        const uint16_t *Qt = Qs[buf], *Gt = Gs[buf];
        const float *Lt = Ls[buf], *Dt = Ds[buf];
#pragma unroll
        for (int c = 0; c < BQ / 16; ++c) {
            float st[2][4], dpt[2][4]; /* (key g, g + 8) x (query 2t, 2t + 1) of 8 queries each */
            tf_tile_zero<2>(st);
            tf_tile_zero<2>(dpt);
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int kk = 0; kk < KD; ++kk) {
                    uint32_t qf[2], gf[2];
                    tf_tile_load_bt(qf, Qt, LD, 16 * c + 8 * u, 16 * kk);
                    tf_tile_mma<E>(st[u], ka[kk], qf);
                    tf_tile_load_bt(gf, Gt, LD, 16 * c + 8 * u, 16 * kk);
                    tf_tile_mma<E>(dpt[u], va[kk], gf);
                }
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = 16 * c + 8 * u + 2 * t + (e & 1), i = q0 + r;
                    const int j = e < 2 ? jlo : jhi;
                    float p = 0.f;
                    if (i < L && j < L) {
                        const float bv = BIAS ? tf_tile_widen<E>(Bs[buf][tf6_boff<BK, true>(r, j - k0)]) : 0.f;
                        p = tf6_exp2(tf6_arg2<BIAS>(st[u][e], c2, bv, Lt[r]));
                    }
                    st[u][e] = p;
                    dpt[u][e] = p * (dpt[u][e] - Dt[r]);
                }
            uint32_t pa[4], da[4];
            tf_tile_c2a<E>(pa, st[0], st[1]);
            tf_tile_c2a<E>(da, dpt[0], dpt[1]);
#pragma unroll
            for (int n = 0; n < ND; ++n) {
                uint32_t gf[2], qf[2];
                tf_tile_load_b(gf, Gt, LD, 8 * n, 16 * c);
                tf_tile_mma<E>(dv[n], pa, gf);
                tf_tile_load_b(qf, Qt, LD, 8 * n, 16 * c);
                tf_tile_mma<E>(dk[n], da, qf);
            }
        }
        if (more) tf_cp_wait<0>();
        __syncthreads(); /* the next tile is in; this one is consumed */
    }
    E *dvb = tf_attn_at<E>(a.dv, b, o, h, DM), *dkb = tf_attn_at<E>(a.dk, b, o, h, DM);
    const bool v2 = tf6_pair_ok(a.dv) && tf6_pair_ok(a.dk);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int j = hf ? jhi : jlo;
        if (j >= L) continue;
        E *vrow = dvb + (long)j * a.dv.sl, *krow = dkb + (long)j * a.dk.sl;
#pragma unroll
        for (int n = 0; n < ND; ++n) {
            const int c = 8 * n + 2 * t;
            tf6_store2<E>(vrow + c, dv[n][2 * hf], dv[n][2 * hf + 1], v2);
            tf6_store2<E>(krow + c, a.scale * dk[n][2 * hf], a.scale * dk[n][2 * hf + 1], v2);
        }
    }
}

/* L <= 128: the whole backward of one (b, o, h) in one block of 8 warps,
 * five products and no recomputation. Warp w first takes queries 16w..: S
 * and dP of its rows against every key give P and dS, rounded to the type
 * and kept in shared memory by query rows, and dQ += dS K; then keys 16w..:
 * P^T and dS^T read back transposed (tf_tile_load_at) give dV += P^T dout
 * and dK += dS^T q. */
template <int DM>
struct tf6_one {
    static constexpr int LC = 128, NW = 8, NT = NW * 32;
    static constexpr int LD = DM + 8, LP = LC + 8; /* operand rows, P and dS rows */
    static constexpr int SMEM = (4 * LC * LD + 2 * LC * LP) * 2 + 2 * LC * 4; /* bytes */
};

template <int DM, bool BIAS, class E>
__global__ void __launch_bounds__(tf6_one<DM>::NT, 2) attn_bwd_kernel6(tf_attn_args a, int vec, int bvec, float c2)
{
    typedef tf6_one<DM> C;
    constexpr int LC = C::LC, LD = C::LD, LP = C::LP, KD = DM / 16, ND = DM / 8;
    TF_SMEM(smf);
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smf), *Ks = Qs + LC * LD, *Vs = Ks + LC * LD;
    uint16_t *Gs = Vs + LC * LD, *Ps = Gs + LC * LD, *Ss = Ps + LC * LP;
    float *Ls = reinterpret_cast<float *>(Ss + LC * LP), *Ds = Ls + LC;

    const int L = a.L, tid = (int)threadIdx.x;
    int b, o, h;
    tf_attn_decode(a, &b, &o, &h);
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    const E *gb = tf_attn_at<E>(a.dout, b, o, h, DM), *yb = tf_attn_at<E>(a.out, b, o, h, DM);
    tf6_load_async<DM, LC, LD, C::NT>(Qs, tf_attn_at<E>(a.q, b, o, h, DM), a.q.sl, 0, L, vec, tid);
    tf6_load_async<DM, LC, LD, C::NT>(Ks, tf_attn_at<E>(a.k, b, o, h, DM), a.k.sl, 0, L, vec, tid);
    tf6_load_async<DM, LC, LD, C::NT>(Vs, tf_attn_at<E>(a.v, b, o, h, DM), a.v.sl, 0, L, vec, tid);
    tf6_load_async<DM, LC, LD, C::NT>(Gs, gb, a.dout.sl, 0, L, vec, tid);
    tf6_load_async<DM, LC, LD, C::NT>(Ps, yb, a.out.sl, 0, L, vec, tid); /* out, until P */
    /* the bias, until dS: each lane reads its (row, key) pairs before it
     * writes dS there */
    if (BIAS) tf6_bias_tile<LC, LC, LP, false, C::NT>(Ss, bb, a.bias_si, a.bias_sj, 0, 0, L, bvec, tid);
    tf_cp_commit();
    const float ls = tid < L ? a.lse[rowbase + tid] * TF6_LOG2E : 0.f;
    tf_cp_wait<0>();
    __syncthreads();
    if (tid < LC) { /* D and lse of query tid (D also into `work`, for the dbias kernel) */
        float dd = 0.f;
        if (tid < L) {
            dd = tf6_dot_rows<DM, E>(Gs + tid * LD, Ps + tid * LD);
            a.work[rowbase + tid] = dd;
        }
        Ds[tid] = dd;
        Ls[tid] = ls;
    }
    __syncthreads(); /* D is in; out's rows are free for P */

    const int lane = tid & 31, g = lane >> 2, t = lane & 3, w = tid >> 5;
    {
        uint32_t qa[KD][4], ga[KD][4];
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            tf_tile_load_a(qa[kk], Qs, LD, 16 * w, 16 * kk);
            tf_tile_load_a(ga[kk], Gs, LD, 16 * w, 16 * kk);
        }
        const int ilo = 16 * w + g, ihi = ilo + 8;
        const float lse2[2] = {Ls[ilo], Ls[ihi]}, dd[2] = {Ds[ilo], Ds[ihi]};
        const bool ok[2] = {ilo < L, ihi < L};
        float dq[ND][4];
        tf_tile_zero<ND>(dq);
#pragma unroll
        for (int kh = 0; kh < LC; kh += 64) {
            if (kh >= L) break;
            float s[8][4], dp[8][4];
            tf6_s_dp<8, KD, E>(s, dp, qa, ga, Ks + kh * LD, Vs + kh * LD, LD);
            tf6_p_ds<8, BIAS, E, LP, false>(s, dp, Ss, ilo, ihi, kh, kh, L, ok, c2, lse2, dd);
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = hf ? ihi : ilo, c = kh + 8 * j + 2 * t;
                    *reinterpret_cast<uint32_t *>(Ps + r * LP + c) = tf_tile_pack<E>(s[j][2 * hf], s[j][2 * hf + 1]);
                    *reinterpret_cast<uint32_t *>(Ss + r * LP + c) = tf_tile_pack<E>(dp[j][2 * hf], dp[j][2 * hf + 1]);
                }
            tf_tile_mul_c<4, ND, E>(dq, dp, Ks + kh * LD, LD); /* dq += dS K */
        }
        E *dqb = tf_attn_at<E>(a.dq, b, o, h, DM);
        const bool v2 = tf6_pair_ok(a.dq);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            if (!ok[hf]) continue;
            E *row = dqb + (long)(hf ? ihi : ilo) * a.dq.sl;
#pragma unroll
            for (int n = 0; n < ND; ++n)
                tf6_store2<E>(row + 8 * n + 2 * t, a.scale * dq[n][2 * hf], a.scale * dq[n][2 * hf + 1], v2);
        }
    }
    __syncthreads(); /* every row of P and dS is in */
    if (16 * w >= L) return;
    float dv[ND][4], dk[ND][4];
    tf_tile_zero<ND>(dv);
    tf_tile_zero<ND>(dk);
    const int nq = (L + 15) / 16; /* rows past L hold P = dS = 0 and zero operands */
#pragma unroll 2
    for (int c = 0; c < nq; ++c) {
        uint32_t pa[4], da[4];
        tf_tile_load_at(pa, Ps, LP, 16 * w, 16 * c);
        tf_tile_load_at(da, Ss, LP, 16 * w, 16 * c);
#pragma unroll
        for (int n = 0; n < ND; ++n) {
            uint32_t gf[2], qf[2];
            tf_tile_load_b(gf, Gs, LD, 8 * n, 16 * c);
            tf_tile_mma<E>(dv[n], pa, gf);
            tf_tile_load_b(qf, Qs, LD, 8 * n, 16 * c);
            tf_tile_mma<E>(dk[n], da, qf);
        }
    }
    const int jlo = 16 * w + g, jhi = jlo + 8;
    E *dvb = tf_attn_at<E>(a.dv, b, o, h, DM), *dkb = tf_attn_at<E>(a.dk, b, o, h, DM);
    const bool v2 = tf6_pair_ok(a.dv) && tf6_pair_ok(a.dk);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int j = hf ? jhi : jlo;
        if (j >= L) continue;
        E *vrow = dvb + (long)j * a.dv.sl, *krow = dkb + (long)j * a.dk.sl;
#pragma unroll
        for (int n = 0; n < ND; ++n) {
            const int c = 8 * n + 2 * t;
            tf6_store2<E>(vrow + c, dv[n][2 * hf], dv[n][2 * hf + 1], v2);
            tf6_store2<E>(krow + c, a.scale * dk[n][2 * hf], a.scale * dk[n][2 * hf + 1], v2);
        }
    }
}

/* dbias(b, h, i, j) = sum_o dS: 16 queries x 32 keys a block. Each warp
 * copies its next o's rows by cp.async while it computes this one's (NB
 * buffers a warp: two at head size 16, one at 32, within 48 KB), and holds
 * the next rows' lse and D in registers. */
template <int DM>
struct tf6_db {
    static constexpr int QT = 16, KT = 32, NW = 4, NT = NW * 32, NB = DM == 16 ? 2 : 1;
    static constexpr int LD = tf6<DM>::LD;
    static constexpr int WS = (2 * QT + 2 * KT) * LD; /* a buffer's elements */
};

template <int DM, class E>
__global__ void __launch_bounds__(tf6_db<DM>::NT, 4) attn_bwd_dbias_kernel6(tf_attn_args a, int nti, int ntj,
                                                                        int vec, int bvec, float c2)
{
    typedef tf6_db<DM> C;
    constexpr int LD = C::LD, KD = DM / 16, QT = C::QT, KT = C::KT, NJ = KT / 8, NW = C::NW, NB = C::NB;
    __shared__ __align__(16) uint16_t sm[NW * NB * C::WS];
    __shared__ float red[NW - 1][QT * KT];
    __shared__ __align__(16) uint16_t Bs[QT * (KT + 8)]; /* the tile's bias, the same for every o */

    const int L = a.L, tid = (int)threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    long idx = blockIdx.x;
    const int tj = (int)(idx % ntj);
    idx /= ntj;
    const int ti = (int)(idx % nti);
    idx /= nti;
    const int h = (int)(idx % a.nh), b = (int)(idx / a.nh);
    const int i0 = ti * QT, j0 = tj * KT;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    const int ilo = i0 + g, ihi = ilo + 8;
    const bool ok[2] = {ilo < L, ihi < L};
    tf6_bias_tile<QT, KT, KT + 8, false, C::NT>(Bs, bb, a.bias_si, a.bias_sj, i0, j0, L, bvec, tid);
    tf_cp_commit();
    tf_cp_wait<0>();
    __syncthreads();

    /* o's rows into the warp's buffer bf (one commit group), its rows' lse
     * (base 2) and D into ls, ds */
    auto issue = [&](int o, int bf, float *ls, float *ds) {
        uint16_t *Q = sm + (w * NB + bf) * C::WS, *G = Q + QT * LD, *K = G + QT * LD, *V = K + KT * LD;
        tf6_load_async<DM, QT, LD, 32>(Q, tf_attn_at<E>(a.q, b, o, h, DM), a.q.sl, i0, L, vec, lane);
        tf6_load_async<DM, QT, LD, 32>(G, tf_attn_at<E>(a.dout, b, o, h, DM), a.dout.sl, i0, L, vec, lane);
        tf6_load_async<DM, KT, LD, 32>(K, tf_attn_at<E>(a.k, b, o, h, DM), a.k.sl, j0, L, vec, lane);
        tf6_load_async<DM, KT, LD, 32>(V, tf_attn_at<E>(a.v, b, o, h, DM), a.v.sl, j0, L, vec, lane);
        tf_cp_commit();
        const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            ls[hf] = ok[hf] ? a.lse[rowbase + (hf ? ihi : ilo)] * TF6_LOG2E : 0.f;
            ds[hf] = ok[hf] ? a.work[rowbase + (hf ? ihi : ilo)] : 0.f;
        }
    };

    float db[NJ][4];
    tf_tile_zero<NJ>(db);
    float lse2[2] = {0.f, 0.f}, dd[2] = {0.f, 0.f}, lsn[2], dsn[2];
    if (NB == 2 && w < a.no) issue(w, 0, lse2, dd);
    for (int o = w, it = 0; o < a.no; o += NW, ++it) {
        const int bf = NB == 2 ? it & 1 : 0;
        const bool next = NB == 2 && o + NW < a.no;
        __syncwarp(); /* the buffer written next was consumed */
        if (NB == 1) issue(o, 0, lse2, dd);
        if (next) issue(o + NW, bf ^ 1, lsn, dsn);
        if (next)
            tf_cp_wait<1>();
        else
            tf_cp_wait<0>();
        __syncwarp();
        const uint16_t *Qs = sm + (w * NB + bf) * C::WS, *Gs = Qs + QT * LD, *Ks = Gs + QT * LD;
        const uint16_t *Vs = Ks + KT * LD;
        uint32_t qa[KD][4], ga[KD][4];
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            tf_tile_load_a(qa[kk], Qs, LD, 0, 16 * kk);
            tf_tile_load_a(ga[kk], Gs, LD, 0, 16 * kk);
        }
        float s[NJ][4], dp[NJ][4];
        tf6_s_dp<NJ, KD, E>(s, dp, qa, ga, Ks, Vs, LD);
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float bl, bh;
                tf6_bias_pair<E, KT + 8, false>(Bs, g + 8 * hf, 8 * j + 2 * t, &bl, &bh);
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    const int e = 2 * hf + u, jk = j0 + 8 * j + 2 * t + u;
                    if (jk < L && ok[hf]) {
                        const float p = tf6_exp2(tf6_arg2<true>(s[j][e], c2, u ? bh : bl, lse2[hf]));
                        db[j][e] += p * (dp[j][e] - dd[hf]);
                    }
                }
            }
        if (next) {
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) lse2[hf] = lsn[hf], dd[hf] = dsn[hf];
        }
    }
    /* the warps' partial sums, added in warp order */
    if (w > 0)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                red[w - 1][(g + 8 * (e >> 1)) * KT + 8 * j + 2 * t + (e & 1)] = db[j][e];
    __syncthreads();
    if (w > 0) return;
    E *dbb = (E *)a.dbias + (long)b * a.bias_sb + (long)h * a.bias_sh;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = g + 8 * (e >> 1), c = 8 * j + 2 * t + (e & 1);
            const int i = i0 + r, jk = j0 + c;
            float v = db[j][e];
#pragma unroll
            for (int u = 0; u < NW - 1; ++u) v += red[u][r * KT + c];
            if (i < L && jk < L) dbb[(long)i * a.bias_si + (long)jk * a.bias_sj] = v;
        }
}

template <int DM, class E>
static void attn_bwd6_d(tf_backend *be, const tf_attn_args *a, int vec)
{
    const int bvec = tf6_bias_vec(a);
    const float c2 = tf6_c2(a->scale);
    const long bo = (long)a->nb * a->no * a->nh;
    if (a->L <= tf6_one<DM>::LC) { /* one block a head; it copies out's rows too */
        typedef tf6_one<DM> C1;
        const int v1 = vec && tf6_view_vec(&a->out);
        if (a->bias)
            TF_LAUNCH_SMEM((attn_bwd_kernel6<DM, true, E>), dim3((unsigned)bo), C1::NT, C1::SMEM, be,
                           *a, v1, bvec, c2);
        else
            TF_LAUNCH_SMEM((attn_bwd_kernel6<DM, false, E>), dim3((unsigned)bo), C1::NT, C1::SMEM, be,
                           *a, v1, 0, c2);
    } else {
        const int nt = (a->L + 63) / 64, vq = vec && tf6_view_vec(&a->out); /* dq copies out's rows */
        const dim3 grid((unsigned)(bo * nt));
        if (a->bias) {
            TF_LAUNCH((attn_bwd_dq_kernel6<DM, true, E>), grid, tf6<DM>::NT, be->stream, *a, nt, vq, bvec, c2);
            TF_LAUNCH((attn_bwd_dkv_kernel6<DM, true, E>), grid, tf6<DM>::NT, be->stream, *a, nt, vec, bvec, c2);
        } else {
            TF_LAUNCH((attn_bwd_dq_kernel6<DM, false, E>), grid, tf6<DM>::NT, be->stream, *a, nt, vq, 0, c2);
            TF_LAUNCH((attn_bwd_dkv_kernel6<DM, false, E>), grid, tf6<DM>::NT, be->stream, *a, nt, vec, 0, c2);
        }
    }
    if (a->dbias) {
        typedef tf6_db<DM> D;
        const int nti = (a->L + D::QT - 1) / D::QT, ntj = (a->L + D::KT - 1) / D::KT;
        const long nblk = (long)a->nb * a->nh * nti * ntj;
        TF_LAUNCH((attn_bwd_dbias_kernel6<DM, E>), dim3((unsigned)nblk), D::NT, be->stream, *a, nti,
                  ntj, vec, bvec, c2);
    }
}

template <class E>
static void attn_bwd6(tf_backend *be, const tf_attn_args *a, int vec)
{
    if (a->d == 16)
        attn_bwd6_d<16, E>(be, a, vec);
    else
        attn_bwd6_d<32, E>(be, a, vec);
}

extern "C" void tf_cu_attn_bwd6(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    const int vec = tf6_view_vec(&a->q) && tf6_view_vec(&a->k) && tf6_view_vec(&a->v) &&
                    tf6_view_vec(&a->dout);
    TF_CU_DISPATCH_HALF(a->t, E, attn_bwd6<E>(be, a, vec));
}
