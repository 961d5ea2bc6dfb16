/* The outer product mean's forward as one kernel for bf16 / fp16 (op_list.h
 * opm_fwd, co = 32, cz 64 or 128, S <= TF_GPU_OPM_FUSED_MAX_S), on mma.sync m16n8k16
 * (cuda_tile.h). NVIDIA only; the HIP build and fp32 / tf32 compose
 * opm_outer and a GEMM (outer_product.c, gpu_plan.h tf_gpu_opm_fused).
 *
 *   z_out[b,i,j,c] = z_in[b,i,j,c] + sum_{p,q} o[b,i,j,p,q] W[c, 32 p + q]
 *   o[b,i,j,p,q]   = E((1/S) sum_s a[b,s,i,p] a[b,s,j,q])
 *
 * o is what the composition stores (opm_outer's [B, N, N, 32, 32], rounded
 * to E); here it lives in shared memory a few columns at a time.
 *
 * Block: b, 8 rows i0.. and 16 columns j0.. of the pair (128 pairs, P = 8 j
 * + i), 8 warps. Staged once: Xs[s][8 p + i] = a[b,s,i0+i,p] (the rows of
 * the block's i as A^T operands, p-major so that 16 consecutive columns are
 * two p's of the 8 i) and As[s][32 j + q] = a[b,s,j0+j,q], s zero-padded to
 * a multiple of 16. Then for each chunk of 2 p (64 of o's 1024 columns):
 *   1. o's chunk: warp w computes rows (p, i) x columns (j, q) for j = 2w,
 *      2w + 1 (1 x 8 C tiles, K = S), scales by 1/S, rounds to E and stores
 *      Os[P][32 p' + q] (P = 8 j + i: lanes g are 8 consecutive rows).
 *   2. out += Os W_chunk^T: warp (wm, wn) = (w % 4, w / 4) owns pairs 32 wm..
 *      and channels wn cz / 2.. (2 x cz / 16 C tiles, K = 64), W's chunk
 *      Ws[c][k] = W[c][64 pc + k] by cp.async, the next chunk in flight.
 * Epilogue: z_out = z_in + acc, fp32. Only a, W, z_in and z_out touch global
 * memory. Rows of shared memory are 8 (mod 16) halves longer than their
 * data: the fragment loads and the stores of stage 1 hit distinct banks. */
#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_tile.h"

#define OPF_THREADS 256
#define OPF_TI 8  /* pair rows i a block */
#define OPF_TJ 16 /* pair columns j a block */
#define OPF_XLD (OPF_TI * 32 + 8)
#define OPF_ALD (OPF_TJ * 32 + 8)
#define OPF_OLD (64 + 8)
#define OPF_WLD (64 + 8)

/* halves of shared memory for a padded S of sp and cz channels */
static inline size_t opf_smem_bytes(int sp, int cz)
{
    return 2u * ((size_t)sp * OPF_XLD + (size_t)sp * OPF_ALD + (size_t)OPF_TI * OPF_TJ * OPF_OLD +
                 2u * (size_t)cz * OPF_WLD);
}

/* W's columns 64 pc.. (64 of 1024) of all cz rows into Ws, 16-byte copies */
template <int CZ>
__device__ __forceinline__ void opf_stage_w(uint16_t *Ws, const uint16_t *W, int pc, int tid)
{
    for (int e = tid; e < CZ * 8; e += OPF_THREADS) {
        const int r = e >> 3, c = (e & 7) * 8;
        tf_cp_async(reinterpret_cast<float *>(Ws + r * OPF_WLD + c),
               reinterpret_cast<const float *>(W + (long)r * 1024 + 64 * pc + c), 16, true);
    }
}

template <class E, int CZ>
__global__ void __launch_bounds__(OPF_THREADS, 2)
opm_fwd_fused_kernel(float *z_out, const float *z_in, const uint16_t *a, const uint16_t *W, int S,
                     int N, float inv_s)
{
    constexpr int NT2 = CZ / 16; /* C tiles of a warp's channels in stage 2 */
    TF_SMEM(smf);
    const int sp = (S + 15) & ~15;
    uint16_t *Xs = (uint16_t *)smf, *As = Xs + sp * OPF_XLD, *Os = As + sp * OPF_ALD;
    uint16_t *Ws = Os + OPF_TI * OPF_TJ * OPF_OLD; /* two buffers of CZ x OPF_WLD */
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int j0 = (int)blockIdx.x * OPF_TJ, i0 = (int)blockIdx.y * OPF_TI, b = (int)blockIdx.z;
    const uint16_t *ab = a + (long)b * S * N * 32;

    opf_stage_w<CZ>(Ws, W, 0, tid);
    tf_cp_commit();
    /* As: 16-byte rows pieces, zero past S and N */
    for (int e = tid; e < sp * OPF_TJ * 4; e += OPF_THREADS) {
        const int s = e / (OPF_TJ * 4), r = e % (OPF_TJ * 4), j = r >> 2, c = (r & 3) * 8;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (s < S && j0 + j < N) v = *(const uint4 *)(ab + ((long)s * N + j0 + j) * 32 + c);
        *(uint4 *)(As + s * OPF_ALD + 32 * j + c) = v;
    }
    /* Xs: transposed to p-major, one element a thread a step */
    for (int e = tid; e < sp * OPF_TI * 32; e += OPF_THREADS) {
        const int s = e / (OPF_TI * 32), r = e % (OPF_TI * 32), i = r >> 5, p = r & 31;
        Xs[s * OPF_XLD + 8 * p + i] = s < S && i0 + i < N ? ab[((long)s * N + i0 + i) * 32 + p]
                                                          : (uint16_t)0;
    }

    const int wm = w & 3, wn = w >> 2;
    float acc[2][NT2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) tf_tile_zero<NT2>(acc[m]);

#pragma unroll 1
    for (int pc = 0; pc < 16; ++pc) {
        /* 1. o's chunk: rows (p' = 0, 1 x i), columns (j = 2w, 2w + 1 x q) */
        __syncthreads(); /* Xs, As in (first chunk); stage 2 done with Os */
        float c1[8][4];
        tf_tile_zero<8>(c1);
        for (int s0 = 0; s0 < sp; s0 += 16) {
            uint32_t af[4];
            tf_tile_load_at(af, Xs, OPF_XLD, 16 * pc, s0);
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                uint32_t bf[2];
                tf_tile_load_b(bf, As, OPF_ALD, 64 * w + 8 * n, s0);
                tf_tile_mma<E>(c1[n], af, bf);
            }
        }
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            const int j = 2 * w + (n >> 2), q = 8 * (n & 3) + 2 * t;
            uint16_t *o = Os + (8 * j + g) * OPF_OLD + q;
            *(uint32_t *)o = tf_tile_pack<E>(c1[n][0] * inv_s, c1[n][1] * inv_s);       /* p' 0 */
            *(uint32_t *)(o + 32) = tf_tile_pack<E>(c1[n][2] * inv_s, c1[n][3] * inv_s); /* p' 1 */
        }
        tf_cp_wait<0>(); /* W's chunk pc */
        __syncthreads();
        if (pc + 1 < 16) { /* its other buffer was read by the last chunk's stage 2 */
            opf_stage_w<CZ>(Ws + ((pc + 1) & 1) * CZ * OPF_WLD, W, pc + 1, tid);
            tf_cp_commit();
        }
        /* 2. acc += Os W_chunk^T */
        const uint16_t *Wt = Ws + (pc & 1) * CZ * OPF_WLD;
#pragma unroll
        for (int k0 = 0; k0 < 64; k0 += 16) {
            uint32_t af[2][4];
            tf_tile_load_a(af[0], Os, OPF_OLD, 32 * wm, k0);
            tf_tile_load_a(af[1], Os, OPF_OLD, 32 * wm + 16, k0);
#pragma unroll
            for (int n = 0; n < NT2; ++n) {
                uint32_t bf[2];
                tf_tile_load_bt(bf, Wt, OPF_WLD, wn * (CZ / 2) + 8 * n, k0);
                tf_tile_mma<E>(acc[0][n], af[0], bf);
                tf_tile_mma<E>(acc[1][n], af[1], bf);
            }
        }
    }
    /* z_out = z_in + acc: rows P = 32 wm + 16 m + g (+ 8) */
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int P = 32 * wm + 16 * m + g + 8 * hh, i = i0 + (P & 7), j = j0 + (P >> 3);
            if (i >= N || j >= N) continue;
            const long row = (((long)b * N + i) * N + j) * CZ;
#pragma unroll
            for (int n = 0; n < NT2; ++n) {
                const long o = row + wn * (CZ / 2) + 8 * n + 2 * t;
                const float2 r = *(const float2 *)(z_in + o);
                *(float2 *)(z_out + o) = make_float2(r.x + acc[m][n][2 * hh], r.y + acc[m][n][2 * hh + 1]);
            }
        }
}

template <class E, int CZ>
static void opf_fwd(tf_backend *be, float *z_out, const float *z_in, const void *a, const void *W,
                    int B, int S, int N)
{
    const dim3 grid((unsigned)((N + OPF_TJ - 1) / OPF_TJ), (unsigned)((N + OPF_TI - 1) / OPF_TI),
                    (unsigned)B);
    TF_LAUNCH_SMEM((opm_fwd_fused_kernel<E, CZ>), grid, OPF_THREADS,
                   opf_smem_bytes((S + 15) & ~15, CZ), be, z_out, z_in, (const uint16_t *)a,
                   (const uint16_t *)W, S, N, 1.0f / (float)S);
}

extern "C" void tf_cu_t_opm_fwd(tf_backend *be, float *z_out, const float *z_in, const void *a,
                                const void *W, int B, int S, int N, int co, int cz, tf_dtype t)
{
    if (!TF_OPM_FUSED_OP_SHAPE(co, cz) || S < 1 || S > TF_GPU_OPM_FUSED_MAX_S || (t != TF_BF16 && t != TF_F16) ||
        !tf_cu_aligned(a, 16) || !tf_cu_aligned(W, 16) || !tf_cu_aligned(z_in, 8) ||
        !tf_cu_aligned(z_out, 8))
        tf_cuda_fail("opm_fwd", "shape, type or alignment outside the fused kernel's (caps.opm_fused)",
                     __FILE__, __LINE__);
    if (t == TF_BF16 && cz == 128) opf_fwd<tf_cu_bf16, 128>(be, z_out, z_in, a, W, B, S, N);
    else if (t == TF_BF16) opf_fwd<tf_cu_bf16, 64>(be, z_out, z_in, a, W, B, S, N);
    else if (cz == 128) opf_fwd<tf_cu_f16, 128>(be, z_out, z_in, a, W, B, S, N);
    else opf_fwd<tf_cu_f16, 64>(be, z_out, z_in, a, W, B, S, N);
}
