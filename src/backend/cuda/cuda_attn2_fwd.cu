/* Attention forward, kernel2 (level 3): register-tiled flash attention.
 *
 * One block per (b, o, h, tile of BQ queries); the block's Q tile stays in
 * shared memory while K/V stream through in tiles of BK keys (one tile when
 * L <= BK, as for every model shape). Per key tile:
 *   S = Q K^T as TM x TN micro-tiles per thread (cuda_attn2.h),
 *   online softmax per row (row max over the NX lanes sharing the row, the
 *   running max m and per-thread partial sums l rescaled by exp(m_old - m)),
 *   P to shared memory, then O += P V with each thread owning TM rows x TC
 *   contiguous channels (a float4 of P and TC-wide loads of V per key).
 * At the end l is summed over the row's lanes, out = O / l, lse = m + log(l).
 *
 * Tile classes (cuda_attn2.h, tf_attn2_class), named attn_fwd_kernel<V>_d<DM>_t<BQ>:
 *   t16: BQ = BK = 16, 2x2 per thread,  64 threads (MSA column attention, L = S = 16)
 *   t32: BQ = BK = 32, 2x4 per thread, 128 threads (L <= 32, and DM 64)
 *   t64: BQ = BK = 64 (L > 32: triangle, MSA row): kernel3 8x8 per thread, 64
 *        threads (default for DM 32); kernel2 4x4 per thread, 256 threads
 *        (default for DM 16; tf_gpu_route_attn). */
#include <math.h>

#include "cuda_attn2.h"

template <int DM, int BQ, int BK, int TM, int TN>
__device__ __forceinline__ void attn_fwd2_body(const tf_attn_args &a, const int vec)
{
    constexpr int NY = BQ / TM, NX = BK / TN, NT = NX * NY;
    constexpr int LD = DM + 4, PL = BK + 4, TC = DM / NX;
    static_assert(NY * TM == BQ && NX * TN == BK && TF_GROUP % NX == 0 && NT % TF_GROUP == 0, "tile shape");
    static_assert(TC * NX == DM && (TC == 1 || TC == 2 || TC % 4 == 0), "channels per thread");
    __shared__ __align__(16) float qs[BQ][LD];
    __shared__ __align__(16) float ks[BK][LD];
    __shared__ __align__(16) float vs[BK][LD];
    __shared__ __align__(16) float ps[BQ][PL];

    const int L = a.L, d = a.d, tid = threadIdx.x, tx = tid % NX, ty = tid / NX;
    const int ntile = (L + BQ - 1) / BQ;
    int b, o, h, tile;
    tf_attn_decode(a, ntile, &b, &o, &h, &tile);
    const int i0 = tile * BQ;
    const float *kb = tf_attn_base(a.k, b, o, h, d);
    const float *vb = tf_attn_base(a.v, b, o, h, d);
    const float *bb = tf_attn2_bias(a, b, h);

    tf_attn2_load<DM, BQ, LD, NT>(qs, tf_attn_base(a.q, b, o, h, d), a.q.sl, i0, min(BQ, L - i0),
                                  d, vec);
    float m[TM], l[TM], acc[TM][TC];
#pragma unroll
    for (int ii = 0; ii < TM; ++ii) {
        m[ii] = -INFINITY;
        l[ii] = 0.f;
#pragma unroll
        for (int cc = 0; cc < TC; ++cc) acc[ii][cc] = 0.f;
    }

    for (int j0 = 0; j0 < L; j0 += BK) {
        const int nj = min(BK, L - j0);
        __syncthreads(); /* the previous tile's ks, vs, ps are no longer read */
        tf_attn2_load<DM, BK, LD, NT>(ks, kb, a.k.sl, j0, nj, d, vec);
        tf_attn2_load<DM, BK, LD, NT>(vs, vb, a.v.sl, j0, nj, d, vec);
        __syncthreads();

        float s[TM][TN];
        tf_attn2_dots<DM, TM, TN, NY, NX, LD, DM / 4>(s, qs, ks, ty, tx);
#pragma unroll
        for (int ii = 0; ii < TM; ++ii) {
            const int r = ty + NY * ii, i = i0 + r;
            float mx = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const int j = j0 + tx + NX * jj;
                /* keys past L: p = 0; query rows past L read no bias */
                const float v = j < L ? tf_attn2_score(a, i < L ? bb : nullptr, i, j, s[ii][jj])
                                      : -INFINITY;
                s[ii][jj] = v;
                mx = fmaxf(mx, v);
            }
            /* key j0 < L is in every tile, so mn is finite */
            const float mn = fmaxf(m[ii], tf_group_max<NX>(mx));
            const float corr = expf(m[ii] - mn); /* 0 on the first tile */
            m[ii] = mn;
            float lt = l[ii] * corr;
#pragma unroll
            for (int cc = 0; cc < TC; ++cc) acc[ii][cc] *= corr;
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) {
                const float p = expf(s[ii][jj] - mn);
                lt += p;
                ps[r][tx + NX * jj] = p;
            }
            l[ii] = lt;
        }
        __syncthreads(); /* ps complete */

        /* O += P V; keys nj..nj4-1 have p = 0 and zero rows of V */
        const int nj4 = (nj + 3) & ~3;
#pragma unroll 2
        for (int j = 0; j < nj4; j += 4) {
            float4 p4[TM];
#pragma unroll
            for (int ii = 0; ii < TM; ++ii)
                p4[ii] = *reinterpret_cast<const float4 *>(&ps[ty + NY * ii][j]);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                float vv[TC];
                tf_lds<TC>(vv, &vs[j + u][tx * TC]);
#pragma unroll
                for (int ii = 0; ii < TM; ++ii) {
                    const float pu = tf_f4(p4[ii], u);
#pragma unroll
                    for (int cc = 0; cc < TC; ++cc) acc[ii][cc] = fmaf(pu, vv[cc], acc[ii][cc]);
                }
            }
        }
    }

    float *ob = tf_attn_base(a.out, b, o, h, d);
    float *lseb = a.lse + (((long)b * a.no + o) * a.nh + h) * L;
#pragma unroll
    for (int ii = 0; ii < TM; ++ii) {
        const float lt = tf_group_sum<NX>(l[ii]);
        const int i = i0 + ty + NY * ii;
        if (i < L) {
            const float inv = 1.f / lt;
            float *orow = ob + (long)i * a.out.sl;
#pragma unroll
            for (int cc = 0; cc < TC; ++cc) {
                const int c = tx * TC + cc;
                if (c < d) orow[c] = acc[ii][cc] * inv;
            }
            if (tx == 0) lseb[i] = m[ii] + logf(lt);
        }
    }
}

#define TF_ATTN2_FWD(VER, DM, BQ, BK, TM, TN, MINB)                                         \
    extern "C" __global__ void __launch_bounds__((BQ / TM) * (BK / TN), MINB)               \
        attn_fwd_kernel##VER##_d##DM##_t##BQ(tf_attn_args a, int vec)                      \
    {                                                                                      \
        attn_fwd2_body<DM, BQ, BK, TM, TN>(a, vec);                                        \
    }
TF_ATTN2_FWD(2, 16, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_FWD(2, 32, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_FWD(2, 64, 16, 16, 2, 2, TF_ATTN2_MINB_T16)
TF_ATTN2_FWD(2, 16, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_FWD(2, 32, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_FWD(2, 64, 32, 32, 2, 4, TF_ATTN2_MINB_T32)
TF_ATTN2_FWD(2, 16, 64, 64, 4, 4, TF_ATTN2_MINB_T64)
TF_ATTN2_FWD(2, 32, 64, 64, 4, 4, 3) /* 80 registers suffice: 3 blocks per SM */
/* kernel3: 8 x 8 scores per thread, 64 threads (see cuda_attn2.h) */
TF_ATTN2_FWD(3, 16, 64, 64, 8, 8, TF_ATTN3_MINB_FWD)
TF_ATTN2_FWD(3, 32, 64, 64, 8, 8, TF_ATTN3_MINB_FWD)

extern "C" void tf_cu_attn_fwd2(tf_backend *be, const tf_attn_args *a, int k3)
{
    if (!tf_attn_check(a)) return;
    const int dm = tf_attn2_dm(a->d), cls = tf_attn2_class(a->L, dm);
    const int vec = a->d % 4 == 0 && tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v);
    const long bh = (long)a->nb * a->no * a->nh;
    const dim3 grid((unsigned)(bh * ((a->L + cls - 1) / cls)));
#define FWD2(DM, BQ, NT) TF_LAUNCH(attn_fwd_kernel2_d##DM##_t##BQ, grid, dim3(NT), be->stream, *a, vec)
#define FWD3(DM) TF_LAUNCH(attn_fwd_kernel3_d##DM##_t64, grid, dim3(64), be->stream, *a, vec)
    if (cls == 16) {
        if (dm == 16) FWD2(16, 16, 64);
        else if (dm == 32) FWD2(32, 16, 64);
        else FWD2(64, 16, 64);
    } else if (cls == 32) {
        if (dm == 16) FWD2(16, 32, 128);
        else if (dm == 32) FWD2(32, 32, 128);
        else FWD2(64, 32, 128);
    } else if (!k3) {
        if (dm == 16) FWD2(16, 64, 256);
        else FWD2(32, 64, 256);
    } else {
        if (dm == 16) FWD3(16);
        else FWD3(32);
    }
#undef FWD2
#undef FWD3
}
