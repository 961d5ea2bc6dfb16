/* The half types' weight gradients on Hopper's warpgroup MMA: dW = A^T B
 * with A stored [K, M] and B stored [K, N] (K = the rows: dW = dy^T x),
 * bf16 or fp16 operands, fp32 sums and result, split K one wave wide (the
 * route's wide split, gpu_plan.c route_wide_half) and the splits' partials
 * added by the fixed-order splitk_reduce_kernel (cuda_gemm_mma.cu), which
 * also applies alpha, beta and the epilogue: the same bits every run.
 *
 * Block: a 128 x 128 tile of dW, two warpgroups (256 threads), each 64 rows
 * x 128 columns of m64n128k16 accumulators (64 floats a thread). K in
 * slices of DW_BK = 64 rows, copied by cp.async as they are stored: both
 * operands are M- (N-) major, 8 adjacent columns of one row are 16 bytes of
 * one core-matrix row (cuda_wgtile.h tf_wg_off_mn), so nothing is converted
 * or transposed by the threads; wgmma's own transposes of A and B read them.
 * DW_ST stages in flight (3 slices ahead): the kernel is bound by the reads
 * of its operands (a slice is 2 x 16 KB against 4 x 2 MFLOP of MMAs a
 * warpgroup), so the MMAs of a slice are waited for before the next.
 * Without 16-byte alignment (M, N, the leading dimensions or the bases) the
 * copies go element by element, synchronously. */
#include "cuda_gemm_mma.h"
#include "cuda_wgtile.h"

#define DW_BM 128
#define DW_BN 128
#define DW_BK 64
#define DW_ST 4
#define DW_NT 256
#define DW_TILE (DW_BK * DW_BM) /* halves of one operand's slice (BM == BN) */
#define DW_SMEM_BYTES (DW_ST * 2 * DW_TILE * 2)

typedef struct {
    const uint16_t *A, *B; /* [K, M], [K, N] */
    long lda, sA, ldb, sB;
} dw_ops;

/* 8 columns [c, c + 8) of a stored row into a core-matrix row: 16 bytes by
 * cp.async when V16 (then c + 8 <= n or c >= n), else element by element
 * (zeros past n or past K: !row_ok) */
template <bool V16>
__device__ __forceinline__ void dw_cp8(uint16_t *dst, const uint16_t *row, int c, int n,
                                       bool row_ok)
{
    if (V16) {
        const bool ok = row_ok && c < n;
        tf_cp_async((float *)dst, ok ? (const float *)(row + c) : (const float *)row, 16, ok);
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) dst[j] = row_ok && c + j < n ? row[c + j] : (uint16_t)0;
    }
}

/* slice k0 .. k0 + DW_BK (rows past ke zero) of the A and B tiles into a
 * stage: each an N-major tile of 128 columns */
template <bool V16>
__device__ __forceinline__ void dw_load(uint16_t *st, const dw_ops &o, const uint16_t *A,
                                        const uint16_t *B, int M, int N, int m0, int n0, int k0,
                                        int ke)
{
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int u = 0; u < DW_BK * DW_BM / 8 / DW_NT; ++u) {
        const int e = tid + DW_NT * u, q = e % (DW_BM / 8), k = e / (DW_BM / 8);
        const int gk = k0 + k;
        const bool ok = gk < ke;
        const long r = ok ? gk : 0;
        dw_cp8<V16>(st + tf_wg_off_mn(8 * q, k, DW_BM), A + r * o.lda, m0 + 8 * q, M, ok);
        dw_cp8<V16>(st + DW_TILE + tf_wg_off_mn(8 * q, k, DW_BN), B + r * o.ldb, n0 + 8 * q, N,
                    ok);
    }
}

template <class E, bool V16>
__global__ void __launch_bounds__(DW_NT, 1) gemm_dw_kernel(mma_args p, dw_ops o)
{
#if TF_WG_CODE
    TF_SMEM(smf);
    uint16_t *sm = (uint16_t *)smf;
    const int tid = (int)threadIdx.x, warp = tid >> 5, wg = warp >> 2;
    const int bz = (int)blockIdx.z, bi = bz / p.splits, sp = bz % p.splits;
    const int ntn = (p.N + DW_BN - 1) / DW_BN; /* tiles on x, N fastest */
    const int m0 = (int)(blockIdx.x / ntn) * DW_BM, n0 = (int)(blockIdx.x % ntn) * DW_BN;
    const uint16_t *A = o.A + (long)bi * o.sA, *B = o.B + (long)bi * o.sB;
    const int kb = sp * p.kchunk, ke = min(p.K, kb + p.kchunk);
    const int nk = ke > kb ? (ke - kb + DW_BK - 1) / DW_BK : 0;
#define DW_STAGE(kt) (sm + ((kt) % DW_ST) * 2 * DW_TILE)
#define DW_LOAD(kt) dw_load<V16>(DW_STAGE(kt), o, A, B, p.M, p.N, m0, n0, kb + (kt) * DW_BK, ke)

    float d[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) d[j][e] = 0.f;

    /* one commit group a slice (empty past the end): slice kt has landed when
     * at most DW_ST - 2 newer groups are pending */
#pragma unroll
    for (int s = 0; s < DW_ST - 1; ++s) {
        if (s < nk) DW_LOAD(s);
        tf_cp_commit();
    }
    for (int kt = 0; kt < nk; ++kt) {
        tf_cp_wait<DW_ST - 2>(); /* this thread's copies of slice kt */
        wg_proxy_fence();      /* ... and its element stores, visible to wgmma */
        __syncthreads();       /* everyone's; slice kt - 1's stage is free */
        if (kt + DW_ST - 1 < nk) DW_LOAD(kt + DW_ST - 1);
        tf_cp_commit();
        const uint16_t *as = DW_STAGE(kt), *bs = as + DW_TILE;
        tf_wg_reg_fence<16>(d);
        wg_fence();
#pragma unroll
        for (int k0 = 0; k0 < DW_BK; k0 += 16)
            tf_wg_mma_ss<E, 128, true, true>(
                d, tf_wg_desc(as + k0 * DW_BM + tf_wg_off_mn(64 * wg, 0, DW_BM), DW_BM * 16, 128),
                tf_wg_desc(bs + k0 * DW_BN, DW_BN * 16, 128));
        wg_commit();
        wg_wait0();
        tf_wg_reg_fence<16>(d);
    }
#undef DW_LOAD
#undef DW_STAGE
    static_assert(DW_SMEM_BYTES >= (int)sizeof(float) * DW_BM * MMA_LDT(DW_BN),
                  "the staged tile fits the pipeline's memory");
    /* this split's raw products to its slice of the workspace (p.sep) */
    mma_stage_finish<1, 16, DW_NT, DW_BM, DW_BN>(p, (float(*)[16][4])d, smf, m0, n0,
                                                 64 * wg + 16 * (warp & 3), 0, bi, sp);
#else
    (void)p, (void)o; /* no sm_90a code here: the probe reports 0, no GEMM is sent */
#endif
}

template <class E, bool V16>
static void dw_launch(tf_backend *be, const mma_args &p, const dw_ops &o, int batch)
{
    const dim3 grid((unsigned)((p.N + DW_BN - 1) / DW_BN) * (unsigned)((p.M + DW_BM - 1) / DW_BM),
                    1, (unsigned)(batch * p.splits));
    TF_LAUNCH_SMEM((gemm_dw_kernel<E, V16>), grid, DW_NT, (size_t)DW_SMEM_BYTES, be, p, o);
}

static bool dw_aligned(const void *ptr, long ld, long stride, int batch, int cols)
{
    uintptr_t a = (uintptr_t)ptr;
    if (batch > 1) a |= (uintptr_t)stride * 2u;
    return (a & 15) == 0 && ld % 8 == 0 && cols % 8 == 0;
}

/* the wide split's products of a (transA, !transB, half operands, fp32 C;
 * p: its splits, kchunk, part with sep, as tf_cu_gemm_tc sets them) into
 * p->part */
extern "C" void tf_cu_gemm_dw_half(tf_backend *be, const tf_gemm_args *a, const mma_args *p)
{
    dw_ops o;
    o.A = (const uint16_t *)a->A, o.lda = a->lda, o.sA = a->strideA;
    o.B = (const uint16_t *)a->B, o.ldb = a->ldb, o.sB = a->strideB;
    const bool v16 = dw_aligned(a->A, a->lda, a->strideA, a->batch, a->M) &&
                     dw_aligned(a->B, a->ldb, a->strideB, a->batch, a->N);
    if (a->ab_type == TF_BF16) {
        if (v16) dw_launch<tf_cu_bf16, true>(be, *p, o, a->batch);
        else dw_launch<tf_cu_bf16, false>(be, *p, o, a->batch);
    } else {
        if (v16) dw_launch<tf_cu_f16, true>(be, *p, o, a->batch);
        else dw_launch<tf_cu_f16, false>(be, *p, o, a->batch);
    }
}
