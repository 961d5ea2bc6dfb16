/* Level-3 GEMM on the tensor cores: mma.sync m16n8k8 with TF32 operands and
 * fp32 accumulation, row-major, strided batch, the same contract as
 * tf_gemm_args (ops.h).
 *
 * fp32 precision runs "3xTF32": each operand x is split into big =
 * tf32(x) and small = tf32(x - big), and a*b is taken as
 *   a_small*b_big + a_big*b_small + a_big*b_big
 * (the small terms first, into the same fp32 accumulator). What is dropped,
 * a_small*b_small and the rounding of each small part, is below 2^-21 |a b|
 * per product, the order of fp32's own rounding (2^-24). The tensor cores'
 * fp32 accumulation is less exact than FFMA's, so the result is further from
 * a float64-accurate sum than cuBLAS' fp32 kernels are: the tests' bounds
 * allow for it (tests/unit/test_cuda_ops_gemm.c; figures in bench/RESULTS.md).
 * tf32 precision (--precision tf32) runs one MMA per product.
 *
 * Speed (bench/cuda_kernels.sh gemm, 3xTF32 against cuBLAS' fp32 SIMT
 * kernels; figures in bench/RESULTS.md): level or faster on GEMMs with many
 * 128 x 128 tiles (the large problem's pair projections, dX, the outer
 * product), slower on small tiles and split K (weight gradients), and in
 * tf32 several times slower than cuBLAS' TF32 kernels. So by default (tf_gpu_route_gemm) it takes only the first
 * kind, in fp32, where the wgmma kernel does not run. mma.sync caps it: 3xTF32 triples the tensor work, and the
 * TF32 rate of mma.sync on Hopper is well below that of wgmma.
 *
 * Tiles: a block computes a BM x BN tile of C (128 x 128 with 8 warps of
 * 64 x 32, or 64 x 64 with 4 warps of 32 x 32) over K in steps of BK = 32,
 * with a 3-stage cp.async pipeline (global -> shared without registers).
 * Each operand tile is stored in shared memory in its global layout (the
 * contiguous dimension contiguous), padded so that the fragment loads hit
 * distinct banks: +8 floats per row when K is contiguous (8-byte loads, see
 * "k order" in the kernel), +4 when M (or N) is. VEC = 4 copies 16-byte
 * vectors and needs 16-byte aligned operands and contiguous extents
 * divisible by 4 (tested per call); VEC = 1 copies single floats and takes
 * anything.
 *
 * Split K (few tiles, long K, e.g. weight gradients, K = rows of the batch):
 * grid.z = batch x splits, each split writes its raw accumulators to a
 * partial buffer (the backend's cuBLAS workspace, unused while this kernel
 * runs on the same stream); the last split of a tile to arrive (a counter per
 * tile, reset by that split for the next launch and graph replay) adds the
 * partials in split order and writes C. The order is fixed, so the result
 * does not depend on which split finished last: the GEMM is deterministic, in
 * one launch, without the separate reduce kernel cuBLAS adds. That last
 * split reads every partial alone, so this only suits a few splits; the
 * weight gradients' wide split (wide_split, below) stores each split's
 * products and adds them in a separate kernel that every SM reads with. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_gemm_mma.h"

template <int BM, int BN, int WM, int WN, bool TA, bool TB, int VEC, bool X3>
__global__ void __launch_bounds__(mma_cfg<BM, BN, WM, WN, TA, TB>::NT)
    gemm_mma_kernel(mma_args p)
{
    typedef mma_cfg<BM, BN, WM, WN, TA, TB> CF;
    TF_SMEM(sm);
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = (warp % (BM / WM)) * WM, wn = (warp / (BM / WM)) * WN;
    const int bz = (int)blockIdx.z, bi = bz / p.splits, sp = bz % p.splits;
    /* the tiles on x, N fastest (y allows only 65535 rows of M tiles) */
    const int ntn = (p.N + BN - 1) / BN;
    const int m0 = (int)(blockIdx.x / ntn) * BM, n0 = (int)(blockIdx.x % ntn) * BN;
    const float *A = p.A + (long)bi * p.sA, *B = p.B + (long)bi * p.sB;
    const int kb = sp * p.kchunk, ke = min(p.K, kb + p.kchunk);
    const int nk = ke > kb ? (ke - kb + MMA_BK - 1) / MMA_BK : 0;

    float acc[CF::MI][CF::NI][4];
#pragma unroll
    for (int i = 0; i < CF::MI; ++i)
#pragma unroll
        for (int j = 0; j < CF::NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < MMA_STAGES - 1; ++s) {
        if (s < nk)
            mma_load<CF, BM, BN, TA, TB, VEC>(sm + s * CF::STAGE, p, A, B, m0, n0,
                                              kb + s * MMA_BK, ke);
        tf_cp_commit();
    }
    for (int kt = 0; kt < nk; ++kt) {
        tf_cp_wait<MMA_STAGES - 2>(); /* slice kt has landed (this thread's copies) */
        __syncthreads();            /* ... and everyone's; slice kt-1 is no longer read */
        const int pf = kt + MMA_STAGES - 1;
        if (pf < nk)
            mma_load<CF, BM, BN, TA, TB, VEC>(sm + (pf % MMA_STAGES) * CF::STAGE, p, A, B, m0,
                                              n0, kb + pf * MMA_BK, ke);
        tf_cp_commit();
        const float *As = sm + (kt % MMA_STAGES) * CF::STAGE, *Bs = As + CF::A_TILE;
#pragma unroll
        for (int kk = 0; kk < MMA_BK; kk += 8) {
            uint32_t ab[CF::MI][4], as[CF::MI][4], bb[CF::NI][2], bs[CF::NI][2];
            /* k order: the MMA's k index t (0..3) is the slice's k = kk + 2t and
             * t + 4 is kk + 2t + 1, the same for A and B (any k order gives the
             * same sum), so where k is contiguous a thread's two values are one
             * 8-byte load; with the strides above no two lanes of a half warp
             * (LDS.64) or warp (LDS.32) share a bank */
#pragma unroll
            for (int i = 0; i < CF::MI; ++i) {
                const int r = wm + i * 16 + g;
#pragma unroll
                for (int h = 0; h < 2; ++h) { /* rows r, r + 8: a0 a2, a1 a3 */
                    float v0, v1;
                    if (TA) {
                        v0 = As[(kk + 2 * t) * CF::SA + r + 8 * h];
                        v1 = As[(kk + 2 * t + 1) * CF::SA + r + 8 * h];
                    } else {
                        const float2 v = *(const float2 *)(As + (r + 8 * h) * CF::SA + kk + 2 * t);
                        v0 = v.x, v1 = v.y;
                    }
                    mma_split<X3>(v0, ab[i][h], as[i][h]);
                    mma_split<X3>(v1, ab[i][h + 2], as[i][h + 2]);
                }
            }
#pragma unroll
            for (int j = 0; j < CF::NI; ++j) {
                const int n = wn + j * 8 + g;
                float v0, v1;
                if (TB) {
                    const float2 v = *(const float2 *)(Bs + n * CF::SB + kk + 2 * t);
                    v0 = v.x, v1 = v.y;
                } else {
                    v0 = Bs[(kk + 2 * t) * CF::SB + n];
                    v1 = Bs[(kk + 2 * t + 1) * CF::SB + n];
                }
                mma_split<X3>(v0, bb[j][0], bs[j][0]);
                mma_split<X3>(v1, bb[j][1], bs[j][1]);
            }
            /* pass by pass over all fragments: MMAs into one accumulator are
             * MI*NI instructions apart, not back to back */
            if (X3) {
#pragma unroll
                for (int i = 0; i < CF::MI; ++i)
#pragma unroll
                    for (int j = 0; j < CF::NI; ++j) mma_16888(acc[i][j], as[i], bb[j]);
#pragma unroll
                for (int i = 0; i < CF::MI; ++i)
#pragma unroll
                    for (int j = 0; j < CF::NI; ++j) mma_16888(acc[i][j], ab[i], bs[j]);
            }
#pragma unroll
            for (int i = 0; i < CF::MI; ++i)
#pragma unroll
                for (int j = 0; j < CF::NI; ++j) mma_16888(acc[i][j], ab[i], bb[j]);
        }
    }

    static_assert(CF::SMEM >= BM * MMA_LDT(BN), "the staged tile fits the pipeline's memory");
    if (p.splits > 1 && !p.sep) /* the last split adds (gemm=mma, gpu_plan.h) */
        mma_finish<CF::MI, CF::NI, CF::NT>(p, acc, m0, n0, wm, wn, bi, sp);
    else
        mma_stage_finish<CF::MI, CF::NI, CF::NT, BM, BN>(p, acc, sm, m0, n0, wm, wn, bi, sp);
}

/* ---- dispatch -------------------------------------------------------------- */
/* tile shapes: big (128 x 128, 8 warps of 64 x 32) when there are enough of
 * them to fill the GPU twice, else small (64 x 64, 4 warps of 32 x 32) */
#define MMA_BIG 128, 128, 64, 32
#define MMA_SMALL 64, 64, 32, 32

template <int BM, int BN, int WM, int WN, bool TA, bool TB, int VEC, bool X3>
static void mma_launch(tf_backend *be, const mma_args &p, int batch)
{
    typedef mma_cfg<BM, BN, WM, WN, TA, TB> CF;
    const dim3 grid((unsigned)((p.N + BN - 1) / BN) * (unsigned)((p.M + BM - 1) / BM), 1,
                    (unsigned)(batch * p.splits));
    TF_LAUNCH_SMEM((gemm_mma_kernel<BM, BN, WM, WN, TA, TB, VEC, X3>), grid, CF::NT,
                   sizeof(float) * CF::SMEM, be, p);
}

template <int BM, int BN, int WM, int WN>
static void mma_pick(tf_backend *be, const mma_args &p, int batch, int ta, int tb, int vec,
                     int x3)
{
#define MMA_GO(TA, TB)                                                                   \
    do {                                                                                 \
        if (vec == 4)                                                                    \
            x3 ? mma_launch<BM, BN, WM, WN, TA, TB, 4, true>(be, p, batch)               \
               : mma_launch<BM, BN, WM, WN, TA, TB, 4, false>(be, p, batch);             \
        else                                                                             \
            x3 ? mma_launch<BM, BN, WM, WN, TA, TB, 1, true>(be, p, batch)               \
               : mma_launch<BM, BN, WM, WN, TA, TB, 1, false>(be, p, batch);             \
    } while (0)
    if (!ta && !tb) MMA_GO(false, false);
    else if (!ta && tb) MMA_GO(false, true);
    else if (ta && !tb) MMA_GO(true, false);
    else MMA_GO(true, true);
#undef MMA_GO
}

/* ---- split K added by a separate kernel --------------------------------------
 * Each split stored its raw products as a dense [batch][M][N] slice of
 * p.part (mma_store_tile, p.sep); C = alpha * (their sum) + beta * (R or C),
 * ReLU, the DRELU mask. A
 * block takes 32 * VW consecutive elements; its warp w adds splits w, w + 8,
 * ... in order, then the 8 warp sums are added in warp order: the order is
 * fixed, so the result does not depend on timing (graph replays and eager
 * runs give the same bits). Every SM reads: the last-arriving split adding
 * all partials alone (mma_finish without sep) was latency-bound in one
 * block on the weight gradients. */
#define SK_WARPS 8
template <int VW>
__global__ void __launch_bounds__(SK_WARPS * 32) splitk_reduce_kernel(mma_args p, long total)
{
    __shared__ float red[SK_WARPS][32 * VW];
    const int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5;
    const long e0 = ((long)blockIdx.x * 32 + lane) * VW;
    float v[VW];
#pragma unroll
    for (int q = 0; q < VW; ++q) v[q] = 0.f;
    if (e0 < total) {
#pragma unroll 4
        for (int s = w; s < p.splits; s += SK_WARPS) {
            const float *src = p.part + (long)s * total + e0;
            if (VW == 4) {
                const float4 x = __ldcg(reinterpret_cast<const float4 *>(src));
                v[0] += x.x, v[1] += x.y, v[2] += x.z, v[VW - 1] += x.w;
            } else {
                v[0] += __ldcg(src);
            }
        }
    }
#pragma unroll
    for (int q = 0; q < VW; ++q) red[w][lane * VW + q] = v[q];
    __syncthreads();
    const int q = (int)threadIdx.x;
    const long e = (long)blockIdx.x * 32 * VW + q;
    if (q >= 32 * VW || e >= total) return;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < SK_WARPS; ++k) sum += red[k][q];
    const long mn = (long)p.M * p.N, rem = e % mn;
    const long at = (e / mn) * p.sC + (rem / p.N) * p.ldc + rem % p.N;
    float o = p.alpha * sum;
    if (p.beta != 0.f) o += p.beta * (p.R ? p.R : p.C)[at];
    if (p.relu) o = fmaxf(o, 0.f);
    if (p.aux) o = p.aux[at] > 0.f ? o : 0.f;
    p.C[at] = o;
}

extern "C" void tf_cu_splitk_reduce(tf_backend *be, const mma_args *p, int batch)
{
    const long total = (long)batch * p->M * p->N;
    if (total % 4 == 0) /* every slice 16-byte aligned (part is) */
        TF_LAUNCH(splitk_reduce_kernel<4>, dim3((unsigned)((total + 127) / 128)),
                  dim3(SK_WARPS * 32), be->stream, *p, total);
    else
        TF_LAUNCH(splitk_reduce_kernel<1>, dim3((unsigned)((total + 31) / 32)),
                  dim3(SK_WARPS * 32), be->stream, *p, total);
}

static int aligned16(const void *ptr, long stride, int batch)
{
    uintptr_t a = (uintptr_t)ptr;
    if (batch > 1) a |= (uintptr_t)stride * sizeof(float);
    return (a & 15) == 0;
}

/* the kernels' arguments for a; returns the copy width (4: 16-byte copies,
 * 1: single floats), 0 when the tensor-core kernels do not take a: K == 0,
 * negative strides and very narrow outputs (M or N < 16, e.g. the attention
 * pair-bias projections: cuBLAS' kernels fit them) */
static int mma_setup(const tf_gemm_args *a, mma_args *p)
{
    if (a->K <= 0 || a->M < 16 || a->N < 16) return 0;
    if (a->batch > 1 && (a->strideA < 0 || a->strideB < 0 || a->strideC < 0)) return 0;
    if ((long)a->batch > 65535) return 0;
    memset(p, 0, sizeof *p);
    p->M = a->M, p->N = a->N, p->K = a->K;
    /* fp32 operands (the half types' weight gradients read a's own) */
    p->A = (const float *)a->A, p->lda = a->lda, p->sA = a->strideA;
    p->B = (const float *)a->B, p->ldb = a->ldb, p->sB = a->strideB;
    p->C = (float *)a->C, p->ldc = a->ldc, p->sC = a->strideC;
    p->alpha = a->alpha, p->beta = a->beta, p->relu = a->epilogue == TF_EPI_RELU;
    p->R = (const float *)a->R;
    p->aux = a->epilogue == TF_EPI_DRELU ? (const float *)a->aux : NULL;
    /* R and the mask share C's layout: pairs (quads) need each base 8 (16)
     * bytes aligned */
    const uintptr_t bases = (uintptr_t)a->C | (uintptr_t)p->R | (uintptr_t)p->aux;
    p->vec2 = a->ldc % 2 == 0 && (bases & 7) == 0 && (a->batch == 1 || a->strideC % 2 == 0);
    p->vec4 = a->ldc % 4 == 0 && (bases & 15) == 0 && (a->batch == 1 || a->strideC % 4 == 0);
    /* 16-byte copies: aligned matrices and rows, contiguous extents in 4s */
    const int acont = a->transA ? a->M : a->K, bcont = a->transB ? a->K : a->N;
    return aligned16(a->A, a->strideA, a->batch) && aligned16(a->B, a->strideB, a->batch) &&
                   a->lda % 4 == 0 && a->ldb % 4 == 0 && acont % 4 == 0 && bcont % 4 == 0
               ? 4
               : 1;
}

/* a on the tensor-core kernel r names (tf_gpu_route_gemm took the shape; the
 * copy width is this call's: its operands' alignment). The wide split (the
 * weight gradients: few tiles over a long K, split one wave wide) stores each
 * split's products in the workspace and adds them in tf_cu_splitk_reduce; the
 * other split K adds them in the last block of a tile to arrive (a counter
 * per tile). */
extern "C" void tf_cu_gemm_tc(tf_backend *be, const tf_gemm_args *a, const tf_gpu_gemm_route *r)
{
    mma_args p;
    const int vec = mma_setup(a, &p);
    if (!vec) { /* the route checked the same conditions */
        fprintf(stderr, "tinyfold: internal error: GEMM routed to %s that it does not take\n",
                tf_gpu_engine_name(r->engine));
        abort();
    }
    p.splits = r->splits;
    p.kchunk = r->kchunk;
    const int wide = r->engine == TF_GPU_ENG_WIDE_MMA || r->engine == TF_GPU_ENG_WIDE_WGMMA;
    if (r->splits > 1) {
        p.part = (float *)be->workspace;
        if (wide) p.sep = 1;
        else p.count = be->mma_count;
    }
    if (r->half) /* the half types' weight gradients (route_wide_half) */
        tf_cu_gemm_dw_half(be, a, &p);
    else if (r->engine == TF_GPU_ENG_WGMMA || r->engine == TF_GPU_ENG_WIDE_WGMMA)
        tf_cu_gemm_wg(be, &p, a->batch, a->transA, a->transB, vec, r->wg_short);
    else if (r->tile == 128)
        mma_pick<MMA_BIG>(be, p, a->batch, a->transA, a->transB, vec, r->x3);
    else
        mma_pick<MMA_SMALL>(be, p, a->batch, a->transA, a->transB, vec, r->x3);
    if (wide) tf_cu_splitk_reduce(be, &p, a->batch);
}
