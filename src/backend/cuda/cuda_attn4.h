/* kernel4 (level 3): attention for short sequences, L <= 128, padded head size
 * DM 16 or 32 (cuda_attn4_fwd.cu, cuda_attn4_bwd.cu).
 *
 * One block per (b, o, h) problem holds it on chip: K and V are staged in
 * shared memory once, the queries go through in chunks of BQ rows, and every
 * chunk sees every key, so the softmax is exact (row max and sum over the
 * whole row, no online rescaling). Per chunk:
 *   forward:  S = Q K^T (TM x TN scores per thread, cuda_attn2.h's dots), row
 *             max / sum over the lanes sharing a row, P = exp(S - m) to shared
 *             memory, then O = P V split over KS key groups per output tile
 *             (TR rows x TC channels per thread) and added over those lanes by
 *             a reduce-scatter of shuffles; out = O / l, lse = m + log l.
 *   backward: one pass. S and dP = dO V^T recomputed at the same positions by
 *             the same thread, P = exp(S - lse), dS = P (dP - D) to shared
 *             memory; then half the threads accumulate dV += P^T dO and the
 *             other half dK += dS^T Q (TJ keys x TKC channels per thread, in
 *             registers over all chunks), and all of them dQ = dS K of the
 *             chunk (split over keys as the forward's P V). The next chunk's
 *             Q, dO, out rows and lse are fetched into registers while the
 *             current one computes (two shared buffers), D = dO . out is
 *             computed from them: two barriers per chunk, no dq kernel.
 * dbias (bias != NULL) stays deterministic as in kernel2: the main kernel
 * writes D to `work` and kernel2's dbias kernel (attn_bwd_dbias_kernel2_*,
 * tf_cu_attn_dbias2) recomputes dS per o in order (sum over chunks of o in
 * chunk order). A fused sum would need the dS of every (b, o, h), or per chunk
 * of o nb*nh*L*L floats per chunk: more than `work` (nb*no*nh*L) holds.
 *
 * Shared memory (one block; rows padded to LD = DM + 4 floats, P / dS rows to
 * PL = LC + NX): forward at LC 128: 81.2 KB (DM 32) / 61.2 KB (DM 16), at
 * LC 64: 45.2 / 33.2 KB; backward at LC 128: 90.5 / 66.5 KB, at LC 64: 54.5 /
 * 38.5 KB (tf_attn4_smem_bytes; bench/cuda_kernels.cu prints them). All of
 * it is dynamic shared memory; beyond 48 KB the launcher opts the kernel in
 * once per device (cudaFuncSetAttribute).
 *
 * Shared memory feeds one 32-bit register per lane per clock (32 floats per
 * clock per SM against 128 FMAs), so the loads decide the speed. A 16-byte
 * load takes 4 wavefronts (8-lane phases), or 2 when lanes (n, n^1) or lanes
 * (n, n^2) all read the same address (as reported for Volta..Hopper; not
 * measured here: ncu's shared-memory wavefronts per request tell): every thread
 * layout (tf4_txy, tf4_split) puts lane bit 0 in the index that the "B"
 * operand depends on and lane bit 1 in the one the "A" operand depends on,
 * so both operands of every product load at 2 wavefronts per 16 lanes, and
 * the 8 addresses of each 16 lanes fall in distinct banks: score tiles read
 * rows ty + NY*ii of Q and tx + NX*jj of K with LD = DM + 4; the split
 * products read P[r][4 (ks + KS m) ..] and V[4 (ks + KS m) + u][4 (cg + NCG k) ..]
 * (4 * LD = 16 mod 32 separates two key groups); P rows are PL = LC + NX long,
 * so the score stores of a warp hit 32 banks. Exception: the backward's dQ at
 * LC 128 (KS = 8 leaves no lane bit for a second channel group): its K loads
 * take 4 wavefronts.
 *
 * Numerics: fp32, fmaf dot products over c = 0..DM-1 in order (as kernel2/3),
 * scores fmaf(scale, q.k, bias); every sum has a fixed order (results are
 * bitwise reproducible run to run).
 *
 * Dispatch (tf_gpu_route_attn, gpu_plan.c), by the H200 timings of
 * bench/cuda_kernels.sh attn (the model's head sizes are 16 and 32): level 3
 * runs kernel4 for the backward at L <= 128 except d 16 with 32 < L <= 64
 * (the MSA row attention at the small problem, where kernel2 measured
 * faster), and for the forward at L <= 32 (the MSA column attention) and at
 * d 32 with L <= 64 (the triangle attentions at the small problem);
 * elsewhere the forward keeps kernel2/3, which measured faster there
 * (bench/RESULTS.md).
 * `--gpu-plan attn=k4` forces kernel4 wherever it runs (L <= 128, any d <=
 * 32, padded), attn=k2 or k3 those kernels. */
#ifndef TF_CUDA_ATTN4_H
#define TF_CUDA_ATTN4_H

#include "cuda_attn2.h"

/* key class: the padded sequence length a kernel is compiled for, 0 if none */
static inline int tf_attn4_class(int L)
{
    return L <= 0 ? 0 : L <= 16 ? 16 : L <= 32 ? 32 : L <= 64 ? 64 : L <= 128 ? 128 : 0;
}

/* Every compiled (padded head size, key class) pair, for instantiating. */
#define TF4_EACH_CLASS(X)                                                                    \
    X(16, 16) X(16, 32) X(16, 64) X(16, 128) X(32, 16) X(32, 32) X(32, 64) X(32, 128)

/* Runs M(DM, LC) for the compiled (padded head size, key class) pair. */
#define TF4_BY_CLASS(dm, lc, M)                                                              \
    do {                                                                                     \
        if ((dm) == 16) {                                                                    \
            if ((lc) == 16) M(16, 16);                                                       \
            else if ((lc) == 32) M(16, 32);                                                  \
            else if ((lc) == 64) M(16, 64);                                                  \
            else M(16, 128);                                                                 \
        } else {                                                                             \
            if ((lc) == 16) M(32, 16);                                                       \
            else if ((lc) == 32) M(32, 32);                                                  \
            else if ((lc) == 64) M(32, 64);                                                  \
            else M(32, 128);                                                                 \
        }                                                                                    \
    } while (0)

/* ---- tile shapes (all sizes in floats) ---------------------------------- */
/* Blocks per SM that shared memory allows on the H200 (227 KB per SM, 1 KB
 * reserved per block): a tile shape's MINB must not exceed it */
static constexpr int tf4_smem_blocks(int smem_floats)
{
    return (227 * 1024) / (smem_floats * 4 + 1024);
}

/* forward: BQ query rows per chunk, NT threads; scores TM x TN per thread
 * (NY x NX threads, NX lanes per row); P V as TR rows x TC channels over KS
 * key groups (NRG row groups x NCG channel groups x KS = NT) */
template <int DM, int LC>
struct tf4_fwd {
    static constexpr int BQ = LC >= 64 ? 64 : LC;
    static constexpr int NT = LC == 128 ? 128 : LC == 64 ? 64 : 32;
    static constexpr int TM = LC >= 64 ? 8 : LC == 32 ? 4 : 2;
    static constexpr int TN = LC >= 32 ? 8 : 4;
    static constexpr int NY = BQ / TM, NX = LC / TN;
    static constexpr int TC = (DM == 32 && LC >= 64) ? 8 : 4, NCG = DM / TC;
    static constexpr int TR = LC >= 64 ? 8 : (LC == 32 && DM == 32) ? 8 : 4;
    static constexpr int NRG = BQ / TR, KS = NT / (NRG * NCG);
    static constexpr int LD = DM + 4, PL = LC + NX;
    static constexpr int OK = 0, OV = OK + LC * LD, OQ = OV + LC * LD, OP = OQ + BQ * LD;
    static constexpr int OL = OP + BQ * PL, SMEM = OL + BQ; /* floats */
    static constexpr int QI = BQ * (DM / 4) / NT;           /* Q float4s per thread */
    /* channel chunks of 4 unrolled in the score dots; resident blocks per SM
     * promised to the compiler (registers <= 64K / (NT * MINB), rounded down
     * per SM quarter: 255 at 8 warps, 168 at 12, 128 at 16): chosen without
     * spills (nvcc -Xptxas -v) except where occupancy matters more (l32: the
     * MSA column attention, 2048 tiny problems in one wave at 16 per SM) */
    static constexpr int UNR = LC >= 64 ? DM / 4 : 2;
    static constexpr int MINB =
        LC == 128 ? (DM == 32 ? 2 : 3) : LC == 64 ? 4 : LC == 32 ? (DM == 32 ? 8 : 16) : 8;
    static_assert(NY * NX == NT && NX <= TF_GROUP && NT % TF_GROUP == 0, "fwd score tiles");
    static_assert(MINB <= tf4_smem_blocks(SMEM) && MINB * NT <= 2048, "fwd MINB");
    static_assert(NRG * NCG * KS == NT && NCG >= 4 && TR % KS == 0 && LC % (4 * KS) == 0,
                  "fwd P V tiles");
    static_assert(QI * NT == BQ * (DM / 4) && NT % (DM / 4) == 0, "fwd Q fetch");
};

/* backward: BQ rows per chunk, NT threads; S and dP TM x TN per thread; dV
 * (threads < NT/2) and dK (the others) TJ keys x TKC channels (NJG x NKC per
 * half); dQ TR x TC over KS key groups */
template <int DM, int LC>
struct tf4_bwd {
    static constexpr int BQ = LC == 16 ? 16 : 32;
    static constexpr int NT = LC == 128 ? 128 : 64;
    static constexpr int TM = LC >= 32 ? 4 : 2;
    static constexpr int TN = LC >= 64 ? 8 : LC == 32 ? 4 : 2;
    static constexpr int NY = BQ / TM, NX = LC / TN;
    static constexpr int TKC = (DM == 32 && LC >= 64) ? 8 : 4, NKC = DM / TKC;
    static constexpr int NJG = (NT / 2) / NKC, TJ = LC / NJG;
    static constexpr int TC = (DM == 32 && LC >= 64) ? 8 : 4, NCG = DM / TC;
    static constexpr int TR = LC >= 64 ? 8 : LC == 32 ? 4 : (DM == 32 ? 2 : 4);
    static constexpr int NRG = BQ / TR, KS = NT / (NRG * NCG);
    static constexpr int LD = DM + 4, PL = LC + NX;
    static constexpr int OK = 0, OV = OK + LC * LD, OQ = OV + LC * LD, ODO = OQ + 2 * BQ * LD;
    static constexpr int OP = ODO + 2 * BQ * LD, OS = OP + BQ * PL, OL = OS + BQ * PL;
    static constexpr int OD = OL + 2 * BQ, SMEM = OD + 2 * BQ; /* floats */
    static constexpr int QI = BQ * (DM / 4) / NT; /* float4s per thread of each chunk operand */
    static constexpr int MINB = /* as the forward's (at LC 128 DM 16 3 spilled 128 B) */
        LC == 128 ? 2 : LC == 64 ? 4 : LC == 32 ? (DM == 32 ? 4 : 8) : 8;
    static_assert(NY * NX == NT && NT % 64 == 0, "bwd score tiles");
    static_assert(MINB <= tf4_smem_blocks(SMEM) && MINB * NT <= 2048, "bwd MINB");
    static_assert(NJG * NKC * 2 == NT && NJG * TJ == LC && (TJ == 2 || TJ % 4 == 0) &&
                      TKC % 4 == 0, "bwd dK/dV tiles");
    static_assert(NRG * NCG * KS == NT && NCG >= 4 && TR % KS == 0 && LC % (4 * KS) == 0,
                  "bwd dQ tiles");
    static_assert(QI >= 1 && QI * NT == BQ * (DM / 4) && NT % (DM / 4) == 0, "bwd chunk fetch");
};

#ifdef __cplusplus

/* float4 `q` of row r (rows >= n and channels >= d are zero) of one head */
template <class E>
__device__ __forceinline__ float4 tf4_ld4(const E *base, long sl, int r, int n, int q, int d,
                                          int vec)
{
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    const int c = 4 * q;
    if (r < n && c < d) {
        const E *p = base + (long)r * sl + c;
        if (vec) {
            v = tf_cu_ld4(p);
        } else {
            v.x = tf_cu_f32(p[0]);
            if (c + 1 < d) v.y = tf_cu_f32(p[1]);
            if (c + 2 < d) v.z = tf_cu_f32(p[2]);
            if (c + 3 < d) v.w = tf_cu_f32(p[3]);
        }
    }
    return v;
}

/* four values to channels c..c+3 of a row (c < d), float4 when vec */
__device__ __forceinline__ void tf4_st4(float *row, int c, int d, int vec, float x, float y,
                                        float z, float w)
{
    if (c >= d) return;
    if (vec) {
        *reinterpret_cast<float4 *>(row + c) = make_float4(x, y, z, w);
    } else {
        row[c] = x;
        if (c + 1 < d) row[c + 1] = y;
        if (c + 2 < d) row[c + 2] = z;
        if (c + 3 < d) row[c + 3] = w;
    }
}

__host__ __device__ constexpr int tf4_log2(int n) { return n <= 1 ? 0 : 1 + tf4_log2(n / 2); }

/* Thread t's place in an NX x NY grid (tiles of rows ty + NY*ii, columns
 * tx + NX*jj): lane bit 0 -> tx bit 0, lane bit 1 -> ty bit 0, then tx's
 * other bits (lane bits 2..), then ty's. The NX lanes of a row are lane bits
 * 0, 2, .., log2(NX) of one warp (NX <= 16; tf4_row_max / tf4_row_sum). */
template <int NX>
__device__ __forceinline__ void tf4_txy(int t, int &tx, int &ty)
{
    static_assert(NX >= 2 && NX <= 16 && (NX & (NX - 1)) == 0, "tf4_txy: NX");
    tx = (t & 1) | (((t >> 2) & (NX / 2 - 1)) << 1);
    ty = ((t >> 1) & 1) | ((t >> (tf4_log2(NX) + 1)) << 1);
}
/* max / sum over the NX lanes of a row of tf4_txy (butterfly: every lane of
 * the row ends with the same bits) */
template <int NX>
__device__ __forceinline__ float tf4_row_max(float v)
{
    v = fmaxf(v, tf_shfl_xor(v, 1));
#pragma unroll
    for (int m = 4; m <= NX; m <<= 1) v = fmaxf(v, tf_shfl_xor(v, m));
    return v;
}
template <int NX>
__device__ __forceinline__ float tf4_row_sum(float v)
{
    v += tf_shfl_xor(v, 1);
#pragma unroll
    for (int m = 4; m <= NX; m <<= 1) v += tf_shfl_xor(v, m);
    return v;
}

/* Thread t's (channel group cg, key group ks, row group rg) in a split
 * product: lane bit 0 -> cg, lane bit 1 -> rg, then cg's other bits and the
 * KS key groups (ks from lane bit KPOS: the key groups of a tile are lanes of
 * one warp, for tf4_reduce_scatter), then rg's. cg's bits come before ks's
 * when they fit below lane bit 5 (the 16 lanes then hold 4 channel groups x
 * 2 key groups: distinct banks), else after. */
template <int NCG, int KS, int NRG>
struct tf4_split {
    static constexpr int CB = tf4_log2(NCG), KB = tf4_log2(KS);
    static constexpr bool CG_FIRST = CB + KB <= 4;
    static constexpr int KPOS = CG_FIRST ? CB + 1 : 2;
    static_assert(NCG >= 2 && NRG >= 2 && KPOS + KB <= 5, "tf4_split: key groups in one warp");
    __device__ __forceinline__ static void map(int t, int &cg, int &ks, int &rg)
    {
        cg = t & 1;
        rg = (t >> 1) & 1;
        if (CG_FIRST) {
            cg |= ((t >> 2) & (NCG / 2 - 1)) << 1;
            ks = (t >> KPOS) & (KS - 1);
        } else {
            ks = (t >> KPOS) & (KS - 1);
            cg |= ((t >> (KPOS + KB)) & (NCG / 2 - 1)) << 1;
        }
        rg |= (t >> (CB + KB + 1)) << 1;
    }
};

/* acc[ii*TC + 4k + u] = sum over the keys of group ks of
 *   A[rg + NRG*ii][j] * B[j][4*(cg + NCG*k) + u],
 * keys j = 4*(ks + KS*m) + u' for m < mq, in order of m then u'. Keys past L
 * hold A = 0 and zero rows of B, so stopping at mq (the quads with a key
 * < L) adds nothing that the full loop would. */
template <int LDA, int LDB, int TR, int TC, int NRG, int NCG, int KS>
__device__ __forceinline__ void tf4_splitk(float (&acc)[TR * TC], const float *A, const float *B,
                                           int rg, int cg, int ks, int mq)
{
#pragma unroll
    for (int e = 0; e < TR * TC; ++e) acc[e] = 0.f;
#pragma unroll 2
    for (int m = 0; m < mq; ++m) {
        const int j = 4 * (ks + KS * m);
        float4 a4[TR];
#pragma unroll
        for (int ii = 0; ii < TR; ++ii)
            a4[ii] = *reinterpret_cast<const float4 *>(A + (rg + NRG * ii) * LDA + j);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            float bv[TC];
#pragma unroll
            for (int k = 0; k < TC / 4; ++k) {
                const float4 t =
                    *reinterpret_cast<const float4 *>(B + (j + u) * LDB + 4 * (cg + NCG * k));
                bv[4 * k] = t.x, bv[4 * k + 1] = t.y, bv[4 * k + 2] = t.z, bv[4 * k + 3] = t.w;
            }
#pragma unroll
            for (int ii = 0; ii < TR; ++ii) {
                const float au = tf_f4(a4[ii], u);
#pragma unroll
                for (int cc = 0; cc < TC; ++cc)
                    acc[ii * TC + cc] = fmaf(au, bv[cc], acc[ii * TC + cc]);
            }
        }
    }
}

/* Adds v over the KS lanes l ^ (1 << (KPOS + s)) of a key group (reduce-scatter):
 * after it the lane holds, in v[0 .. NV/KS), the sums of the entries
 * tf4_rs_base<NV, KS>(ks) + [0, NV/KS). Each sum has a fixed tree: the bits
 * do not depend on the lane. All 32 lanes must take part. */
template <int NV, int KS, int KPOS, int S = 0>
__device__ __forceinline__ void tf4_reduce_scatter(float (&v)[NV], int ks)
{
    if constexpr ((1 << S) < KS) {
        constexpr int half = NV >> (S + 1);
        const bool up = (ks >> S) & 1;
#pragma unroll
        for (int k = 0; k < half; ++k) {
            const float lo = v[k], hi = v[k + half];
            const float r = tf_shfl_xor(up ? lo : hi, 1 << (KPOS + S));
            v[k] = (up ? hi : lo) + r;
        }
        tf4_reduce_scatter<NV, KS, KPOS, S + 1>(v, ks);
    }
}
template <int NV, int KS>
__device__ __forceinline__ int tf4_rs_base(int ks)
{
    int base = 0;
#pragma unroll
    for (int s = 0; (1 << s) < KS; ++s) base += ((ks >> s) & 1) * (NV >> (s + 1));
    return base;
}

#endif /* __cplusplus */

#ifdef __cplusplus
extern "C" {
#endif
/* level-3 entry points (cuda_attn4_fwd.cu, cuda_attn4_bwd.cu) */
void tf_cu_attn_fwd4(tf_backend *be, const tf_attn_args *a);
/* kernel5 (cuda_attn5_fwd.cu): the forward on the tensor cores, L <= 128 and
 * d 16 or 32; where it runs: tf_gpu_route_attn (gpu_plan.c) */
void tf_cu_attn_fwd5(tf_backend *be, const tf_attn_args *a);
/* kernel5's backward (cuda_attn5_bwd.cu), same domain */
void tf_cu_attn_bwd5(tf_backend *be, const tf_attn_args *a);
void tf_cu_attn_bwd4(tf_backend *be, const tf_attn_args *a);
/* kernel2's deterministic dbias (cuda_attn2_bwd.cu): dS recomputed per o in
 * order from q, k, v, dout, lse and D in a->work */
void tf_cu_attn_dbias2(tf_backend *be, const tf_attn_args *a, int vec);
/* shared memory bytes of kernel4 for (L, d): forward, backward (0: none) */
size_t tf_attn4_smem_bytes(int L, int d, int backward);
#ifdef __cplusplus
}
#endif

#endif
