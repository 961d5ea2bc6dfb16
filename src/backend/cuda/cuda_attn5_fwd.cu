/* Attention forward, kernel5 (level 3, L <= 128, head size 16 or 32): the
 * scores and P V on the tensor cores (cuda_mma.h), 3xTF32 in fp32 precision
 * and one TF32 MMA per product in tf32. One block per (b, o, h) as kernel4,
 * one warp per 16 query rows (LC / 16 warps, LC the padded L), Q, K and V of
 * the head in shared memory; each warp holds its rows' whole score tile in
 * registers (16 x LC), so the softmax is exact in one pass, as kernel4's.
 *
 * No shuffles between the two products: the MMA's k index may map to the
 * keys in any order as long as A and B agree. With logical k t -> key 2t and
 * t + 4 -> key 2t + 1 inside each group of 8, a lane's score fragment (keys
 * 2t, 2t+1 of rows g, g+8) is already its A fragment of P for P V; the same
 * order over the head dimension makes the Q and K fragment loads 8 bytes.
 * Row strides: Q and K rows DM + 8 floats, V rows DM + 4, so that a warp's
 * fragment loads hit distinct banks.
 *
 * The default forward at d 32, L > 32 (L > 16 in tf32), and at d 16, L > 64
 * in tf32, where it measured faster than kernel2/3/4 on the H200
 * (tf_gpu_route_attn); everywhere it fits under `--gpu-plan attn=k5`. Its backward is
 * cuda_attn5_bwd.cu where it runs (else kernel4 / kernel2), fed by this
 * kernel's out and lse (lse = max + log(sum), as kernel4's). */
#include <math.h>

#include "cuda_attn4.h"
#include "cuda_mma.h"

template <int DM, int LC>
struct tf5_fwd {
    static constexpr int NW = LC / 16 > 0 ? LC / 16 : 1; /* warps */
    static constexpr int NT = NW * 32;
    static constexpr int RQ = NW * 16;                   /* rows of Q held (>= LC) */
    static constexpr int SK = DM + 8, SV = DM + 4;       /* row strides */
    static constexpr int SMEM = RQ * SK + LC * SK + LC * SV;
    static constexpr int NJ = LC / 8, NK = DM / 8;       /* key and head-dim groups of 8 */
    static_assert(DM % 8 == 0 && LC % 8 == 0, "kernel5 tiles");
};

/* E: the element type of q, k, v, bias and out (float or cuda_half.h's).
 * One MMA a product (tf32, the half types) fits 3 blocks an SM at LC 128 in
 * 80 registers, with a few spills to L1: unbounded, the compiler takes more
 * registers and leaves 2 blocks an SM, too few to hide the loads' latency
 * (bench/RESULTS.md). 3xTF32 keeps its registers. */
template <int DM, int LC, bool X3, class E>
__global__ void __launch_bounds__(tf5_fwd<DM, LC>::NT, X3 ? 1 : 3)
    attn_fwd_kernel5(tf_attn_args a, int vec, int vout)
{
    typedef tf5_fwd<DM, LC> C;
    constexpr int NJ = C::NJ, NK = C::NK, SK = C::SK, SV = C::SV;
    TF_SMEM(sm);
    float(*Qs)[SK] = reinterpret_cast<float(*)[SK]>(sm);
    float(*Ks)[SK] = reinterpret_cast<float(*)[SK]>(sm + C::RQ * SK);
    float(*Vs)[SV] = reinterpret_cast<float(*)[SV]>(sm + C::RQ * SK + LC * SK);

    const int L = a.L, d = a.d;
    int b, o, h;
    tf_attn_decode(a, &b, &o, &h);
    const E *bb = tf_attn2_bias<E>(a, b, h);
    E *ob = tf_attn_at<E>(a.out, b, o, h, d);
    float *lseb = a.lse + (((long)b * a.no + o) * a.nh + h) * L;
    tf_attn2_load<DM, C::RQ, SK, C::NT>(Qs, tf_attn_at<E>(a.q, b, o, h, d), a.q.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, SK, C::NT>(Ks, tf_attn_at<E>(a.k, b, o, h, d), a.k.sl, 0, L, d, vec);
    tf_attn2_load<DM, LC, SV, C::NT>(Vs, tf_attn_at<E>(a.v, b, o, h, d), a.v.sl, 0, L, d, vec);
    __syncthreads();

    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int r0 = ((int)threadIdx.x >> 5) * 16;
    /* ---- S = Q K^T: the warp's 16 rows against every key ---- */
    uint32_t qb[NK][4], qs[NK][4];
#pragma unroll
    for (int kk = 0; kk < NK; ++kk)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) { /* rows g, g + 8: a0 a2, a1 a3 */
            const float2 v = *reinterpret_cast<const float2 *>(&Qs[r0 + g + 8 * hf][8 * kk + 2 * t]);
            mma_split<X3>(v.x, qb[kk][hf], qs[kk][hf]);
            mma_split<X3>(v.y, qb[kk][hf + 2], qs[kk][hf + 2]);
        }
    float s[NJ][4];
    mma_zero<NJ>(s);
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
        uint32_t kb[NJ][2], ks[NJ][2];
#pragma unroll
        for (int j = 0; j < NJ; ++j) { /* b0 (dim 2t, key g), b1 (dim 2t + 1, key g) */
            const float2 v = *reinterpret_cast<const float2 *>(&Ks[8 * j + g][8 * kk + 2 * t]);
            mma_split<X3>(v.x, kb[j][0], ks[j][0]);
            mma_split<X3>(v.y, kb[j][1], ks[j][1]);
        }
        mma_row<NJ, X3>(s, qb[kk], qs[kk], kb, ks);
    }

    /* ---- exact softmax of rows g (e = 0, 1) and g + 8 (e = 2, 3) ---- */
    const int ilo = r0 + g, ihi = r0 + g + 8;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = e < 2 ? ilo : ihi, jk = 8 * j + 2 * t + (e & 1);
            /* keys past L: p = 0; query rows past L read no bias */
            const float v = jk < L ? tf_attn2_score(a, i < L ? bb : nullptr, i, jk, s[j][e])
                                   : -INFINITY;
            s[j][e] = v;
            mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) /* a row's 4 lanes: t = 0..3 */
        mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1)),
        mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float p = expf(s[j][e] - mx[e >> 1]);
            s[j][e] = p;
            sum[e >> 1] += p;
        }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
        sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 1),
            sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 2);
    if (t == 0) {
        if (ilo < L) lseb[ilo] = mx[0] + logf(sum[0]);
        if (ihi < L) lseb[ihi] = mx[1] + logf(sum[1]);
    }

    /* ---- O = P V: P's score fragments are its A fragments ---- */
    float acc[NK][4];
    mma_zero<NK>(acc);
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        uint32_t pb[4], ps[4];
        mma_split<X3>(s[j][0], pb[0], ps[0]); /* (g, key 2t) */
        mma_split<X3>(s[j][2], pb[1], ps[1]); /* (g + 8, key 2t) */
        mma_split<X3>(s[j][1], pb[2], ps[2]); /* (g, key 2t + 1) */
        mma_split<X3>(s[j][3], pb[3], ps[3]); /* (g + 8, key 2t + 1) */
        uint32_t vb[NK][2], vs[NK][2];
#pragma unroll
        for (int n = 0; n < NK; ++n) { /* b0 (key 2t, dim g), b1 (key 2t + 1, dim g) */
            mma_split<X3>(Vs[8 * j + 2 * t][8 * n + g], vb[n][0], vs[n][0]);
            mma_split<X3>(Vs[8 * j + 2 * t + 1][8 * n + g], vb[n][1], vs[n][1]);
        }
        mma_row<NK, X3>(acc, pb, ps, vb, vs);
    }
    const float inv[2] = {1.f / sum[0], 1.f / sum[1]};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int i = hf ? ihi : ilo;
        if (i >= L) continue;
        E *orow = ob + (long)i * a.out.sl;
#pragma unroll
        for (int n = 0; n < NK; ++n) { /* c (row, dims 2t, 2t + 1 of group n) */
            const int c = 8 * n + 2 * t;
            const float x0 = acc[n][2 * hf] * inv[hf], x1 = acc[n][2 * hf + 1] * inv[hf];
            if (vout) {
                tf_cu_st2(orow + c, x0, x1);
            } else {
                orow[c] = x0;
                orow[c + 1] = x1;
            }
        }
    }
}

/* fp32: 3xTF32, or TF32 in tf32 precision; a half type: TF32 (exact products
 * of bf16/fp16 values) */
template <class E>
static void attn_fwd5(tf_backend *be, const tf_attn_args *a, int vec, int vout)
{
    const unsigned grid = (unsigned)((long)a->nb * a->no * a->nh);
    const bool one = be->tf32 || sizeof(E) < sizeof(float);
#define FWD5(DM, LC)                                                                         \
    do {                                                                                     \
        typedef tf5_fwd<DM, LC> C5;                                                          \
        if (one)                                                                             \
            TF_LAUNCH_SMEM((attn_fwd_kernel5<DM, LC, false, E>), grid, C5::NT,               \
                           sizeof(float) * C5::SMEM, be, *a, vec, vout);                     \
        else                                                                                 \
            TF_LAUNCH_SMEM((attn_fwd_kernel5<DM, LC, true, E>), grid, C5::NT,                \
                           sizeof(float) * C5::SMEM, be, *a, vec, vout);                     \
    } while (0)
    TF4_BY_CLASS(a->d, tf_attn4_class(a->L), FWD5); /* d is 16 or 32 (tf_gpu_route_attn) */
#undef FWD5
}

extern "C" void tf_cu_attn_fwd5(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    const int vec = tf_attn2_view_vec(&a->q) && tf_attn2_view_vec(&a->k) &&
                    tf_attn2_view_vec(&a->v);
    /* pair stores: rows and the head's base 8-byte aligned (d is even) */
    const int vout = tf_attn2_view_vec2(&a->out);
    TF_CU_DISPATCH(a->t, E, attn_fwd5<E>(be, a, vec, vout)); /* half types: attn=k5 */
}
