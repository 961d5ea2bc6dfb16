/* Attention forward, kernel6: flash attention for the half types on the
 * m16n8k16 tile (cuda_tile.h). One block per (b, o, h) and tile of 64
 * queries, one warp per 16 of them; the keys go by in tiles of 64 through
 * shared memory. A warp holds its queries' A fragments, computes the 16 x 64
 * scores of a key tile in registers (fp32), adds the pair bias, keeps a
 * running maximum and sum per row (online softmax, base 2: without a bias
 * the maximum of the dot products, each exponent one multiply-add with the
 * scale; keys past L masked in the last tile only), rescales its
 * output accumulator and multiplies P (rounded to the type, straight from
 * the score fragments: tf_tile_c2a) by the tile's V; the next tile's K and V
 * (and the bias tile, a pair of keys a shared-memory load) arrive by cp.async
 * meanwhile (two buffers). At the end out = acc /
 * sum, and lse = max + log(sum) (natural log, as ops.h states) for the
 * backward. Only q, k, v, the bias, out and lse touch global memory. */
#include <math.h>

#include "cuda_attn6.h"

template <int DM, bool BIAS, class E>
__global__ void __launch_bounds__(tf6<DM>::NT, 4) attn_fwd_kernel6(tf_attn_args a, int ntq, int vec,
                                                                          int bvec, float c2)
{
    typedef tf6<DM> C;
    constexpr int LD = C::LD, KD = C::KD, ND = C::ND, NJ = C::NJ, BK = C::BK;
    __shared__ __align__(16) uint16_t Qs[C::BQ * LD];
    __shared__ __align__(16) uint16_t Ks[2][BK * LD]; /* key tiles t and t + 1 */
    __shared__ __align__(16) uint16_t Vs[2][BK * LD];
    __shared__ __align__(16) uint16_t Bs[2][BIAS ? C::BQ * BK : 8]; /* their bias tiles (swizzled) */

    const int L = a.L, tid = (int)threadIdx.x;
    int b, o, h, tile;
    tf_attn_decode(a, ntq, &b, &o, &h, &tile);
    const int q0 = tile * C::BQ;
    const E *bb = tf_attn2_bias<E>(a, b, h);
    const E *kb = tf_attn_at<E>(a.k, b, o, h, DM), *vb = tf_attn_at<E>(a.v, b, o, h, DM);
    tf6_load_async<DM, C::BQ, LD, C::NT>(Qs, tf_attn_at<E>(a.q, b, o, h, DM) + (long)q0 * a.q.sl,
                                         a.q.sl, 0, L - q0, vec, tid);
    tf6_load_async<DM, BK, LD, C::NT>(Ks[0], kb, a.k.sl, 0, L, vec, tid);
    tf6_load_async<DM, BK, LD, C::NT>(Vs[0], vb, a.v.sl, 0, L, vec, tid);
    if (BIAS) tf6_bias_tile<C::BQ, BK, BK, true, C::NT>(Bs[0], bb, a.bias_si, a.bias_sj, q0, 0, L, bvec, tid);
    tf_cp_commit();
    tf_cp_wait<0>();
    __syncthreads();

    const int lane = tid & 31, g = lane >> 2, t = lane & 3, w = tid >> 5;
    uint32_t qa[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) tf_tile_load_a(qa[kk], Qs, LD, 16 * w, 16 * kk);
    const int ilo = q0 + 16 * w + g, ihi = ilo + 8;

    float acc[ND][4];
    tf_tile_zero<ND>(acc);
    float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
    #pragma unroll 1
    for (int k0 = 0, buf = 0; k0 < L; k0 += BK, buf ^= 1) {
        /* the next tile's copies run while this one is computed */
        const bool more = k0 + BK < L;
        if (more) {
            tf6_load_async<DM, BK, LD, C::NT>(Ks[buf ^ 1], kb, a.k.sl, k0 + BK, L, vec, tid);
            tf6_load_async<DM, BK, LD, C::NT>(Vs[buf ^ 1], vb, a.v.sl, k0 + BK, L, vec, tid);
            if (BIAS)
                tf6_bias_tile<C::BQ, BK, BK, true, C::NT>(Bs[buf ^ 1], bb, a.bias_si, a.bias_sj, q0, k0 + BK, L,
                                                    bvec, tid);
            tf_cp_commit();
        }
        const uint16_t *Kt = Ks[buf], *Vt = Vs[buf];
        float s[NJ][4];
        tf_tile_zero<NJ>(s);
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int kk = 0; kk < KD; ++kk) {
                uint32_t kf[2];
                tf_tile_load_bt(kf, Kt, LD, 8 * j, 16 * kk);
                tf_tile_mma<E>(s[j], qa[kk], kf);
            }
        /* with a bias the base-2 score, else the dot product (c2 > 0: the
         * largest dot gives the largest score); keys past L only in the last
         * tile */
        float tm[2] = {-INFINITY, -INFINITY};
        if (BIAS)
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float bl, bh;
                    tf6_bias_pair<E, BK, true>(Bs[buf], 16 * w + g + 8 * hf, 8 * j + 2 * t, &bl, &bh);
                    s[j][2 * hf] = tf6_score2(s[j][2 * hf], c2, bl);
                    s[j][2 * hf + 1] = tf6_score2(s[j][2 * hf + 1], c2, bh);
                }
        if (k0 + BK > L)
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (k0 + 8 * j + 2 * t + (e & 1) >= L) s[j][e] = -INFINITY;
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) tm[e >> 1] = fmaxf(tm[e >> 1], s[j][e]);
        float corr[2], base[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            tm[hf] = fmaxf(tm[hf], __shfl_xor_sync(0xffffffffu, tm[hf], 1));
            tm[hf] = fmaxf(tm[hf], __shfl_xor_sync(0xffffffffu, tm[hf], 2));
            const float mn = fmaxf(mx[hf], BIAS ? tm[hf] : tm[hf] * c2);
            /* a row that has seen only -inf keeps 0 for every p */
            base[hf] = mn == -INFINITY ? 0.f : mn;
            corr[hf] = tf6_exp2(mx[hf] - base[hf]);
            mx[hf] = mn;
        }
        float ts[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = tf6_exp2(BIAS ? s[j][e] - base[e >> 1] : fmaf(s[j][e], c2, -base[e >> 1]));
                s[j][e] = p;
                ts[e >> 1] += p;
            }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) sum[hf] = sum[hf] * corr[hf] + ts[hf];
#pragma unroll
        for (int n = 0; n < ND; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[n][e] *= corr[e >> 1];
        tf_tile_mul_c<BK / 16, ND, E>(acc, s, Vt, LD); /* acc += P V */
        if (more) tf_cp_wait<0>();
        __syncthreads(); /* the next tile is in; this one is consumed */
    }
    /* the row sums over the row's 4 lanes (each lane summed its own keys) */
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 1);
        sum[hf] += __shfl_xor_sync(0xffffffffu, sum[hf], 2);
    }
    float *lseb = a.lse + (((long)b * a.no + o) * a.nh + h) * L;
    E *ob = tf_attn_at<E>(a.out, b, o, h, DM);
    const bool v2 = tf6_pair_ok(a.out);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int i = hf ? ihi : ilo;
        if (i >= L) continue;
        const float inv = 1.f / sum[hf];
        if (t == 0) lseb[i] = (mx[hf] + log2f(sum[hf])) * 0.6931471805599453f;
        E *orow = ob + (long)i * a.out.sl;
#pragma unroll
        for (int n = 0; n < ND; ++n)
            tf6_store2<E>(orow + 8 * n + 2 * t, acc[n][2 * hf] * inv, acc[n][2 * hf + 1] * inv, v2);
    }
}

template <class E>
static void attn_fwd6(tf_backend *be, const tf_attn_args *a, int vec)
{
    const int ntq = (a->L + 63) / 64;
    const dim3 grid((unsigned)((long)a->nb * a->no * a->nh * ntq));
    const bool bias = a->bias != nullptr;
    const int bvec = tf6_bias_vec(a);
    const float c2 = tf6_c2(a->scale);
    if (a->d == 16 && bias)
        TF_LAUNCH((attn_fwd_kernel6<16, true, E>), grid, tf6<16>::NT, be->stream, *a, ntq, vec, bvec, c2);
    else if (a->d == 16)
        TF_LAUNCH((attn_fwd_kernel6<16, false, E>), grid, tf6<16>::NT, be->stream, *a, ntq, vec, bvec, c2);
    else if (bias)
        TF_LAUNCH((attn_fwd_kernel6<32, true, E>), grid, tf6<32>::NT, be->stream, *a, ntq, vec, bvec, c2);
    else
        TF_LAUNCH((attn_fwd_kernel6<32, false, E>), grid, tf6<32>::NT, be->stream, *a, ntq, vec, bvec, c2);
}

extern "C" void tf_cu_attn_fwd6(tf_backend *be, const tf_attn_args *a)
{
    if (!tf_attn_check(a)) return;
    const int vec = tf6_view_vec(&a->q) && tf6_view_vec(&a->k) && tf6_view_vec(&a->v);
    TF_CU_DISPATCH_HALF(a->t, E, attn_fwd6<E>(be, a, vec));
}
