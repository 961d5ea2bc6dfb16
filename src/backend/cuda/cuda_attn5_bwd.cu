/* Attention backward, kernel5 (level 3, L <= 128, head size 16 or 32): every
 * product on the tensor cores (cuda_mma.h), 3xTF32 in fp32 precision and one
 * TF32 MMA per product in tf32. With S = scale q.k + bias, P = exp(S - lse),
 * D_i = dout_i . out_i, dS = P (dP - D), dP = dout v^T:
 *   dV = P^T dout   dK = scale dS^T q   dQ = scale dS k
 * One block per (b, o, h) as kernel4/5, Q, K, V and dout of the head in shared
 * memory, one warp per 16 keys (LC / 16 warps, LC the padded L).
 *
 * Phase 1, per warp: the transposed scores S^T (its 16 keys x 8 queries) and
 * dP^T, one MMA tile each from the warp's K and V rows (A fragments held in
 * registers), give P^T and dS^T, which are at once the A fragments of
 * dV += P^T dout and dK += dS^T q (the forward's k order: logical k t -> query
 * 2t, t + 4 -> 2t + 1 within each group of 8), so dV and dK build up in
 * registers over all queries and are written once, by the one warp that owns
 * those keys: no sums across warps. dP needs no row reduction either (lse and
 * D are given), so nothing but dS leaves the registers.
 * Phase 2: dQ sums over keys, which the warps split; dS goes to shared memory
 * (rows = queries) and after a barrier every warp computes dQ of 16 query rows
 * (half the head dimension each at LC 128) from it and K. At LC 128 the
 * queries go through in two chunks of 64 (dS of one chunk in shared memory,
 * two barriers per chunk), so that the block needs 108 KB (d 32) / 76 KB
 * (d 16), two blocks per SM; at LC <= 64 one chunk of LC.
 *
 * D = dout . out is computed as kernel4's (quads of fmaf, then a butterfly over
 * the row's lanes: the same bits) and written to `work` when dbias is wanted;
 * dbias is then kernel2's deterministic recomputation (tf_cu_attn_dbias2), as
 * after kernel4. Every sum has a fixed order (the MMAs', then the even and odd
 * key groups of dQ added last): results repeat bit for bit.
 *
 * Fragment loads (lane g = lane / 4, t = lane % 4) are conflict-free by the
 * row strides: Q, dout and V rows DM + 4 floats (score B fragments read row
 * 8c + g at dims t, t + 4; dV/dK B fragments rows 2t, 2t + 1 at dim g), K rows
 * DM + 8 (dQ B fragments: rows t, t + 4 at dim g), dS rows LC + 4. Only the
 * warp's K A fragments (once per chunk) take two wavefronts.
 *
 * Runs wherever kernel5's forward runs (tf_gpu_route_attn). */
#include <math.h>

#include "cuda_attn4.h"
#include "cuda_mma.h"

template <int DM, int LC>
struct tf5_bwd {
    static constexpr int NW = LC / 16, NT = NW * 32; /* warps: 16 keys each */
    static constexpr int QC = LC < 64 ? LC : 64;     /* query rows per chunk */
    static constexpr int NCH = LC / QC;
    static constexpr int RT = QC / 16, WPT = NW / RT; /* dQ: row tiles, warps per tile */
    static constexpr int NK = DM / 8, NJ = LC / 8;    /* head-dim and key groups of 8 */
    static constexpr int NB = NK / WPT;               /* dQ head-dim groups per warp */
    /* query groups of 8 per phase-1 step (independent S^T / dP^T chains); 1 at
     * d 32, LC >= 64, where 2 spilled at the register cap MINB sets */
    static constexpr int QG = DM == 32 && LC >= 64 ? 1 : 2;
    static constexpr int SQ = DM + 4, SK = DM + 8, PR = LC + 4; /* row strides */
    static constexpr int OQ = 0, OG = OQ + LC * SQ, OV = OG + LC * SQ, OK = OV + LC * SQ;
    static constexpr int OS = OK + LC * SK, OL = OS + QC * PR, OD = OL + LC;
    static constexpr int SMEM = OD + LC; /* floats */
    /* resident blocks per SM promised to the compiler (registers <= 64K / (NT
     * MINB)): what shared memory allows at LC 128, else 4 */
    static constexpr int MINB = LC == 128 ? 2 : 4;
    static_assert(LC % 16 == 0 && DM % 8 == 0 && NB * WPT == NK && RT * WPT == NW && QC % (8 * QG) == 0,
                  "kernel5 backward tiles");
    static_assert(MINB <= tf4_smem_blocks(SMEM), "kernel5 backward MINB");
    static_assert((LC * DM / 4) % NT == 0, "D: uniform trips for the butterflies");
};

/* E: the element type of q, k, v, bias, out, dout, dq, dk, dv (float or
 * cuda_half.h's) */
template <int DM, int LC, bool X3, class E>
__global__ void __launch_bounds__(tf5_bwd<DM, LC>::NT, tf5_bwd<DM, LC>::MINB)
    attn_bwd_kernel5(tf_attn_args a, int vec, int vout)
{
    typedef tf5_bwd<DM, LC> C;
    constexpr int NT = C::NT, NK = C::NK, NJ = C::NJ, NB = C::NB, QC = C::QC, QG = C::QG;
    constexpr int SQ = C::SQ, SK = C::SK, PR = C::PR;
    TF_SMEM(sm);
    float(*Qs)[SQ] = reinterpret_cast<float(*)[SQ]>(sm + C::OQ);
    float(*Gs)[SQ] = reinterpret_cast<float(*)[SQ]>(sm + C::OG); /* dout */
    float(*Vs)[SQ] = reinterpret_cast<float(*)[SQ]>(sm + C::OV);
    float(*Ks)[SK] = reinterpret_cast<float(*)[SK]>(sm + C::OK);
    float(*Ss)[PR] = reinterpret_cast<float(*)[PR]>(sm + C::OS); /* dS of the chunk's rows */
    float *Ls = sm + C::OL, *Ds = sm + C::OD;

    const int L = a.L, d = a.d, tid = (int)threadIdx.x;
    int b, o, h;
    tf_attn_decode(a, &b, &o, &h);
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    float *work = a.dbias && a.work ? a.work + rowbase : nullptr;
    tf_attn2_load<DM, LC, SQ, NT>(Qs, tf_attn_at<E>(a.q, b, o, h, d), a.q.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, SQ, NT>(Vs, tf_attn_at<E>(a.v, b, o, h, d), a.v.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, SK, NT>(Ks, tf_attn_at<E>(a.k, b, o, h, d), a.k.sl, 0, L, d, vec);
    {
        /* dout to shared memory and D, as kernel4's tf4_chunk (rows >= L: 0) */
        constexpr int Q4 = DM / 4;
        const E *gb = tf_attn_at<E>(a.dout, b, o, h, d);
        const E *yb = tf_attn_at<E>(a.out, b, o, h, d);
        for (int e = tid; e < LC * Q4; e += NT) {
            const int r = e / Q4, c4 = e % Q4;
            const float4 gv = tf4_ld4(gb, a.dout.sl, r, L, c4, d, vec);
            const float4 yv = tf4_ld4(yb, a.out.sl, r, L, c4, d, vec);
            *reinterpret_cast<float4 *>(&Gs[r][4 * c4]) = gv;
            float p = 0.f;
            p = fmaf(gv.x, yv.x, p);
            p = fmaf(gv.y, yv.y, p);
            p = fmaf(gv.z, yv.z, p);
            p = fmaf(gv.w, yv.w, p);
            p = tf_group_sum<Q4>(p);
            if (c4 == 0) {
                Ds[r] = p;
                if (work && r < L) work[r] = p;
            }
        }
        const float *lseb = a.lse + rowbase;
        for (int r = tid; r < LC; r += NT) Ls[r] = r < L ? lseb[r] : 0.f;
    }
    __syncthreads();

    const int lane = tid & 31, g = lane >> 2, t = lane & 3, w = tid >> 5;
    const int j0 = 16 * w; /* the warp's keys */
    float dv[NK][4], dk[NK][4];
    mma_zero<NK>(dv);
    mma_zero<NK>(dk);
    for (int ch = 0; ch < C::NCH; ++ch) {
        const int q0 = ch * QC;
        {
            /* ---- phase 1: the warp's keys against the chunk's queries ---- */
            uint32_t kb[NK][4], ks[NK][4], vb[NK][4], vs[NK][4];
#pragma unroll
            for (int kk = 0; kk < NK; ++kk)
#pragma unroll
                for (int f = 0; f < 4; ++f) { /* a0..a3: (g, t) (g+8, t) (g, t+4) (g+8, t+4) */
                    const int r = j0 + g + 8 * (f & 1), c = 8 * kk + t + 4 * (f >> 1);
                    mma_split<X3>(Ks[r][c], kb[kk][f], ks[kk][f]);
                    mma_split<X3>(Vs[r][c], vb[kk][f], vs[kk][f]);
                }
#pragma unroll 1
            for (int c0 = q0 / 8; c0 < (q0 + QC) / 8; c0 += QG) { /* QG groups of 8 queries */
                float st[QG][4], dpt[QG][4]; /* S^T, dP^T: (key g, g + 8) x (query 2t, 2t + 1) */
                mma_zero<QG>(st);
                mma_zero<QG>(dpt);
#pragma unroll
                for (int kk = 0; kk < NK; ++kk) {
                    uint32_t qb[QG][2], qs[QG][2], gb[QG][2], gs[QG][2];
#pragma unroll
                    for (int u = 0; u < QG; ++u) /* b0 (dim t, query g), b1 (dim t + 4, query g) */
#pragma unroll
                        for (int f = 0; f < 2; ++f) {
                            const int r = 8 * (c0 + u) + g, c = 8 * kk + t + 4 * f;
                            mma_split<X3>(Qs[r][c], qb[u][f], qs[u][f]);
                            mma_split<X3>(Gs[r][c], gb[u][f], gs[u][f]);
                        }
                    mma_row<QG, X3>(st, kb[kk], ks[kk], qb, qs);
                    mma_row<QG, X3>(dpt, vb[kk], vs[kk], gb, gs);
                }
#pragma unroll
                for (int u = 0; u < QG; ++u) {
                    const int i0 = 8 * (c0 + u) + 2 * t; /* queries i0, i0 + 1 */
                    float p[4], ds[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int j = j0 + g + 8 * (e >> 1), i = i0 + (e & 1);
                        /* queries or keys past L: P = 0 (their rows are 0) */
                        float pe = 0.f;
                        if (i < L && j < L)
                            pe = expf(tf_attn2_score(a, bb, i, j, st[u][e]) - Ls[i]);
                        p[e] = pe;
                        ds[e] = pe * (dpt[u][e] - Ds[i]);
                        Ss[i - q0][j] = ds[e];
                    }
                    /* P^T and dS^T as A fragments: (key g, query 2t) (g + 8, 2t)
                     * (g, 2t + 1) (g + 8, 2t + 1) */
                    uint32_t pb[4], ps[4], db[4], dsm[4];
#pragma unroll
                    for (int f = 0; f < 4; ++f) {
                        const int e = (f >> 1) | ((f & 1) << 1);
                        mma_split<X3>(p[e], pb[f], ps[f]);
                        mma_split<X3>(ds[e], db[f], dsm[f]);
                    }
                    uint32_t yb[NK][2], ys[NK][2], xb[NK][2], xs[NK][2];
#pragma unroll
                    for (int n = 0; n < NK; ++n) /* b0 (query 2t, dim g), b1 (query 2t + 1, dim g) */
#pragma unroll
                        for (int f = 0; f < 2; ++f) {
                            mma_split<X3>(Gs[i0 + f][8 * n + g], yb[n][f], ys[n][f]);
                            mma_split<X3>(Qs[i0 + f][8 * n + g], xb[n][f], xs[n][f]);
                        }
                    mma_row<NK, X3>(dv, pb, ps, yb, ys);
                    mma_row<NK, X3>(dk, db, dsm, xb, xs);
                }
            }
        }
        __syncthreads(); /* dS of the chunk complete */

        /* ---- phase 2: dQ of 16 rows (NB head-dim groups from n0) over all keys ---- */
        {
            const int r0 = 16 * (w % C::RT), n0 = (w / C::RT) * NB;
            float acc[2][NB][4]; /* even and odd key groups: two chains */
            mma_zero<NB>(acc[0]);
            mma_zero<NB>(acc[1]);
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                uint32_t ab[4], as[4], bk[NB][2], bs[NB][2];
#pragma unroll
                for (int f = 0; f < 4; ++f) /* (row g, key t) (g + 8, t) (g, t + 4) (g + 8, t + 4) */
                    mma_split<X3>(Ss[r0 + g + 8 * (f & 1)][8 * j + t + 4 * (f >> 1)], ab[f], as[f]);
#pragma unroll
                for (int n = 0; n < NB; ++n) /* b0 (key t, dim g), b1 (key t + 4, dim g) */
#pragma unroll
                    for (int f = 0; f < 2; ++f)
                        mma_split<X3>(Ks[8 * j + t + 4 * f][8 * (n0 + n) + g], bk[n][f], bs[n][f]);
                mma_row<NB, X3>(acc[j & 1], ab, as, bk, bs);
            }
            E *dqb = tf_attn_at<E>(a.dq, b, o, h, d);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int i = q0 + r0 + g + 8 * hf;
                if (i >= L) continue;
                E *row = dqb + (long)i * a.dq.sl;
#pragma unroll
                for (int n = 0; n < NB; ++n) {
                    const int c = 8 * (n0 + n) + 2 * t;
                    const float x0 = a.scale * (acc[0][n][2 * hf] + acc[1][n][2 * hf]);
                    const float x1 = a.scale * (acc[0][n][2 * hf + 1] + acc[1][n][2 * hf + 1]);
                    if (vout) {
                        tf_cu_st2(row + c, x0, x1);
                    } else {
                        row[c] = x0;
                        row[c + 1] = x1;
                    }
                }
            }
        }
        if (ch + 1 < C::NCH) __syncthreads(); /* dS read before the next chunk's */
    }

    /* ---- dV and dK of the warp's keys ---- */
    E *dvb = tf_attn_at<E>(a.dv, b, o, h, d), *dkb = tf_attn_at<E>(a.dk, b, o, h, d);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int j = j0 + g + 8 * hf;
        if (j >= L) continue;
        E *vrow = dvb + (long)j * a.dv.sl, *krow = dkb + (long)j * a.dk.sl;
#pragma unroll
        for (int n = 0; n < NK; ++n) {
            const int c = 8 * n + 2 * t;
            const float v0 = dv[n][2 * hf], v1 = dv[n][2 * hf + 1];
            const float k0 = a.scale * dk[n][2 * hf], k1 = a.scale * dk[n][2 * hf + 1];
            if (vout) {
                tf_cu_st2(vrow + c, v0, v1);
                tf_cu_st2(krow + c, k0, k1);
            } else {
                vrow[c] = v0, vrow[c + 1] = v1;
                krow[c] = k0, krow[c + 1] = k1;
            }
        }
    }
}

/* fp32: 3xTF32, or TF32 in tf32 precision; a half type: TF32 */
template <class E>
static void attn_bwd5(tf_backend *be, const tf_attn_args *a, int vec, int vout)
{
    const unsigned grid = (unsigned)((long)a->nb * a->no * a->nh);
    const bool one = be->tf32 || sizeof(E) < sizeof(float);
#define BWD5(DM, LC)                                                                         \
    do {                                                                                     \
        typedef tf5_bwd<DM, LC> C5;                                                          \
        if (one)                                                                             \
            TF_LAUNCH_SMEM((attn_bwd_kernel5<DM, LC, false, E>), grid, C5::NT,               \
                           sizeof(float) * C5::SMEM, be, *a, vec, vout);                     \
        else                                                                                 \
            TF_LAUNCH_SMEM((attn_bwd_kernel5<DM, LC, true, E>), grid, C5::NT,                \
                           sizeof(float) * C5::SMEM, be, *a, vec, vout);                     \
    } while (0)
    TF4_BY_CLASS(a->d, tf_attn4_class(a->L), BWD5); /* d is 16 or 32 (tf_gpu_route_attn) */
#undef BWD5
}

extern "C" void tf_cu_attn_bwd5(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    /* d is 16 or 32 (tf_gpu_route_attn): float4 loads when every input view is aligned */
    const int vec = tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v) && tf_attn2_view_vec(&a->out) &&
                    tf_attn2_view_vec(&a->dout);
    /* float2 stores: rows and the head's base 8-byte aligned in dq, dk and dv */
    const int vout = tf_attn2_view_vec2(&a->dq) && tf_attn2_view_vec2(&a->dk) &&
                     tf_attn2_view_vec2(&a->dv);
    TF_CU_DISPATCH(a->t, E, attn_bwd5<E>(be, a, vec, vout)); /* half types: attn=k5 */
    if (a->dbias) tf_cu_attn_dbias2(be, a, vec); /* D is in a->work */
}
