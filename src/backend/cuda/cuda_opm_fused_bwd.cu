/* The outer product mean's backward from dz as two kernels and a reduction
 * for bf16 / fp16 (op_list.h opm_bwd_dz, co = 32, cz 64 or 128, S <=
 * TF_GPU_OPM_FUSED_MAX_S), on mma.sync m16n8k16 (cuda_tile.h). NVIDIA only.
 * The composition they replace (the CPU's op) stores o = E(outer / S)
 * [B, N, N, 32, 32] and dop = E(dz W) of the same size; here both live in
 * shared memory a tile at a time:
 *   dop[b,i,j,p,q] = E(sum_c dz[b,i,j,c] W[c, 32 p + q])
 *   da[b,s,i,p]    = E((1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p]))
 *   dW[c, 32 p + q] += sum_{b,i,j} dz[b,i,j,c] o[b,i,j,p,q]
 *
 * opm_bwd_da_kernel: block (8 rows i0.., 4 p p0.., b), 8 warps; W's columns
 * of the 4 p, Ws1[c][32 p' + q] = W[c, 32 p + q], and their transposes,
 * Ws2[c][32 p' + q] = W[c, 32 q + p], stay in shared memory. For each tile
 * of 8 columns j0..: dz's rows of the 64 pairs (P = 8 j + i) and of their
 * mirrors (j, i) and a's rows of the 8 j arrive by cp.async; stage A forms
 * dop's 64 x 128 tile and its mirror's (warp: 16 pairs x 64 columns of each,
 * K = cz), rounds them and stores them as Ds[8 p' + i][32 j + q]; stage B
 * adds a[s, (j, q)] Ds^T into da's [S x 32] accumulators (warp: one or two
 * 16 x 8 tiles, K = 256, both terms). da = acc / S at the end.
 *
 * opm_bwd_dw_kernel: block (4 p p0.., split k), 8 warps; it takes the 8 x 8
 * pair tiles k, k + splits, ... (b-major) and keeps dW's [cz x 128] columns
 * of its 4 p in registers (warp: cz / 4 x 64). Per tile: a's rows of the 8 i
 * (only the 4 p, transposed: Xs[s][8 p' + i]) and of the 8 j, and dz's 64
 * rows, then stage 1 forms o's [64 x 128] tile (as the forward does, warp:
 * one j), rounds and stores it, and stage 2 adds dz^T o (K = 64 pairs). Each
 * block writes its partial sums to the workspace; opm_dw_reduce_kernel adds
 * them into dW in split order: deterministic, no atomics. */
#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_tile.h"

#define OPB_THREADS 256
#define OPB_TI 8 /* rows i a block (da) / a tile (dW) */
#define OPB_TJ 8 /* columns j a tile */
#define OPB_PG 4 /* p a block */
#define OPB_ALD (OPB_TJ * 32 + 8)
#define OPB_NLD (OPB_PG * 32 + 8)
#define OPB_XLD (OPB_PG * OPB_TI + 8)
#define OPB_DW_SPLITS 32

/* dz's rows of the 64 pairs (i0 + i, j0 + j) into D[8 j + i] (mirror: the
 * rows of (j0 + j, i0 + i)) and a's rows of the 8 j into As, zero past N and
 * S, by cp.async */
template <int CZ>
__device__ __forceinline__ void opb_stage_dz(uint16_t *D, const uint16_t *dzb, int i0, int j0,
                                             int N, bool mirror, int tid)
{
    constexpr int PR = CZ / 8; /* 16-byte pieces a row */
    for (int e = tid; e < OPB_TI * OPB_TJ * PR; e += OPB_THREADS) {
        const int P = e / PR, c = (e % PR) * 8, i = i0 + (P & 7), j = j0 + (P >> 3);
        const bool ok = i < N && j < N;
        const long row = mirror ? (long)j * N + i : (long)i * N + j;
        tf_cp_async(reinterpret_cast<float *>(D + P * (CZ + 8) + c),
               reinterpret_cast<const float *>(ok ? dzb + row * CZ + c : dzb), 16, ok);
    }
}
__device__ __forceinline__ void opb_stage_a(uint16_t *As, const uint16_t *ab, int j0, int S, int sp,
                                            int N, int tid)
{
    for (int e = tid; e < sp * OPB_TJ * 4; e += OPB_THREADS) {
        const int s = e / (OPB_TJ * 4), r = e % (OPB_TJ * 4), j = r >> 2, c = (r & 3) * 8;
        const bool ok = s < S && j0 + j < N;
        tf_cp_async(reinterpret_cast<float *>(As + s * OPB_ALD + 32 * j + c),
               reinterpret_cast<const float *>(ok ? ab + ((long)s * N + j0 + j) * 32 + c : ab), 16,
               ok);
    }
}

/* bytes of the da kernel's shared memory with nbuf buffers of the tiles */
static inline size_t opb_da_smem(int sp, int cz, int nbuf)
{
    return 2u * (2u * (size_t)cz * OPB_NLD +
                 (size_t)nbuf * (2u * 64u * (size_t)(cz + 8) + (size_t)sp * OPB_ALD) +
                 2u * 32u * (size_t)OPB_ALD);
}

template <class E, int CZ>
__global__ void __launch_bounds__(OPB_THREADS, 1)
opm_bwd_da_kernel(uint16_t *da, const uint16_t *dz, const uint16_t *a, const uint16_t *W, int S,
                  int N, float inv_s, int nbuf)
{
    TF_SMEM(smf);
    const int sp = (S + 15) & ~15, mt = sp / 16;
    constexpr int DT = 2 * 64 * (CZ + 8); /* a buffer's dz rows (the pairs', the mirrors') */
    const int TB = DT + sp * OPB_ALD;      /* a buffer: dz rows, then a's rows */
    uint16_t *Ws1 = (uint16_t *)smf, *Ws2 = Ws1 + CZ * OPB_NLD, *Tb = Ws2 + CZ * OPB_NLD;
    uint16_t *Ds1 = Tb + nbuf * TB, *Ds2 = Ds1 + 32 * OPB_ALD;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int i0 = (int)blockIdx.x * OPB_TI, p0 = (int)blockIdx.y * OPB_PG, b = (int)blockIdx.z;
    const uint16_t *ab = a + (long)b * S * N * 32, *dzb = dz + (long)b * N * N * CZ;

    for (int e = tid; e < CZ * 16; e += OPB_THREADS) { /* W's 128 columns of the 4 p */
        const int r = e >> 4, c = (e & 15) * 8;
        tf_cp_async(reinterpret_cast<float *>(Ws1 + r * OPB_NLD + c),
               reinterpret_cast<const float *>(W + (long)r * 1024 + 32 * p0 + c), 16, true);
    }
    for (int e = tid; e < CZ * 128; e += OPB_THREADS) { /* and their transposes */
        const int r = e >> 7, pl = (e >> 5) & 3, q = e & 31;
        Ws2[r * OPB_NLD + 32 * pl + q] = W[(long)r * 1024 + 32 * q + p0 + pl];
    }
    /* tile j0's rows into buffer k (one cp.async group with W's, first) */
    auto stage = [&](int j0, int k) {
        uint16_t *D1 = Tb + k * TB;
        opb_stage_dz<CZ>(D1, dzb, i0, j0, N, false, tid);
        opb_stage_dz<CZ>(D1 + 64 * (CZ + 8), dzb, i0, j0, N, true, tid);
        opb_stage_a(D1 + DT, ab, j0, S, sp, N, tid);
        tf_cp_commit();
    };
    /* da's tiles (s, (p', i)): 4 columns of 8 by mt rows of 16; warp w has
     * tiles w and w + 8 */
    float acc[2][4];
    tf_tile_zero<2>(acc);
    const int ma = w & 3, na = (w >> 2) * 8; /* stage A: pairs 16 ma.., columns 8 na.. */

    if (nbuf == 2) stage(0, 0);
#pragma unroll 1
    for (int j0 = 0, it = 0; j0 < N; j0 += OPB_TJ, ++it) {
        /* with two buffers the next tile's copies run while this one is
         * computed (its buffer was last read before the barrier that ended
         * the last tile); with one, this tile's are issued now */
        const int k = nbuf == 2 ? it & 1 : 0;
        if (nbuf == 1) {
            stage(j0, 0);
            tf_cp_wait<0>();
        } else if (j0 + OPB_TJ < N) {
            stage(j0 + OPB_TJ, k ^ 1);
            tf_cp_wait<1>();
        } else {
            tf_cp_wait<0>();
        }
        __syncthreads();
        const uint16_t *D1 = Tb + k * TB, *D2 = D1 + 64 * (CZ + 8), *As = D1 + DT;
        /* A: dop's tile and its mirror's, 16 pairs x 64 columns a warp */
        float c1[8][4], c2[8][4];
        tf_tile_zero<8>(c1);
        tf_tile_zero<8>(c2);
#pragma unroll 2
        for (int k0 = 0; k0 < CZ; k0 += 16) {
            uint32_t a1[4], a2[4];
            tf_tile_load_a(a1, D1, CZ + 8, 16 * ma, k0);
            tf_tile_load_a(a2, D2, CZ + 8, 16 * ma, k0);
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                uint32_t b1[2], b2[2];
                tf_tile_load_b(b1, Ws1, OPB_NLD, 8 * (na + n), k0);
                tf_tile_load_b(b2, Ws2, OPB_NLD, 8 * (na + n), k0);
                tf_tile_mma<E>(c1[n], a1, b1);
                tf_tile_mma<E>(c2[n], a2, b2);
            }
        }
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            const int col = 8 * (na + n) + 2 * t, pl = col >> 5, q = col & 31;
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int P = 16 * ma + g + 8 * hh, o = (8 * pl + (P & 7)) * OPB_ALD + 32 * (P >> 3) + q;
                *(uint32_t *)(Ds1 + o) = tf_tile_pack<E>(c1[n][2 * hh], c1[n][2 * hh + 1]);
                *(uint32_t *)(Ds2 + o) = tf_tile_pack<E>(c2[n][2 * hh], c2[n][2 * hh + 1]);
            }
        }
        __syncthreads();
        /* B: da += a Ds^T over the tile's 256 (j, q) */
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int tile = w + 8 * u, ms = tile >> 2, ns = tile & 3;
            if (ms >= mt) break;
#pragma unroll 4
            for (int k0 = 0; k0 < OPB_TJ * 32; k0 += 16) {
                uint32_t af[4], b1[2], b2[2];
                tf_tile_load_a(af, As, OPB_ALD, 16 * ms, k0);
                tf_tile_load_bt(b1, Ds1, OPB_ALD, 8 * ns, k0);
                tf_tile_load_bt(b2, Ds2, OPB_ALD, 8 * ns, k0);
                tf_tile_mma<E>(acc[u], af, b1);
                tf_tile_mma<E>(acc[u], af, b2);
            }
        }
        __syncthreads(); /* Ds and this tile's buffer are free */
    }
    uint16_t *dab = da + (long)b * S * N * 32;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int tile = w + 8 * u, ms = tile >> 2, ns = tile & 3;
        if (ms >= mt) break;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int s = 16 * ms + g + 8 * (e >> 1), n = 8 * ns + 2 * t + (e & 1);
            const int pl = n >> 3, i = i0 + (n & 7);
            if (s < S && i < N) {
                dab[((long)s * N + i) * 32 + p0 + pl] = tf_tile_round<E>(acc[u][e] * inv_s);
            }
        }
    }
}

/* the dW kernel's: two buffers of a tile's rows, and o's tile */
static inline size_t opb_dw_smem(int sp, int cz)
{
    return 2u * (2u * ((size_t)sp * OPB_XLD + (size_t)sp * OPB_ALD + 64u * (size_t)(cz + 8)) +
                 64u * (size_t)OPB_NLD);
}

template <class E, int CZ>
__global__ void __launch_bounds__(OPB_THREADS, 2)
opm_bwd_dw_kernel(float *part, const uint16_t *dz, const uint16_t *a, int B, int S, int N,
                  float inv_s)
{
    constexpr int MW = CZ / 64; /* dW's 16-row tiles of c a warp */
    TF_SMEM(smf);
    const int sp = (S + 15) & ~15, nt = (N + 7) / 8;
    const int TB = sp * OPB_XLD + sp * OPB_ALD + 64 * (CZ + 8); /* a buffer: Xs, As, Dz */
    uint16_t *Tb = (uint16_t *)smf, *Os = Tb + 2 * TB;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int p0 = (int)blockIdx.x * OPB_PG, split = (int)blockIdx.y, splits = (int)gridDim.y;
    const int wm = w & 3, wn = w >> 2;
    const long ntiles = (long)B * nt * nt;
    /* tile `tile`'s rows into buffer k: dz and a's j rows by cp.async (one
     * group), a's i rows of the 4 p transposed by plain loads */
    auto stage = [&](long tile, int k) {
        const int b = (int)(tile / ((long)nt * nt)), r = (int)(tile % ((long)nt * nt));
        const int i0 = (r / nt) * OPB_TI, j0 = (r % nt) * OPB_TJ;
        const uint16_t *ab = a + (long)b * S * N * 32;
        uint16_t *Xs = Tb + k * TB, *As = Xs + sp * OPB_XLD, *Dz = As + sp * OPB_ALD;
        opb_stage_dz<CZ>(Dz, dz + (long)b * N * N * CZ, i0, j0, N, false, tid);
        opb_stage_a(As, ab, j0, S, sp, N, tid);
        tf_cp_commit();
        for (int e = tid; e < sp * OPB_PG * OPB_TI; e += OPB_THREADS) {
            const int s = e / (OPB_PG * OPB_TI), i = (e >> 2) & 7, pl = e & 3;
            Xs[s * OPB_XLD + 8 * pl + i] =
                s < S && i0 + i < N ? ab[((long)s * N + i0 + i) * 32 + p0 + pl] : (uint16_t)0;
        }
    };
    float acc[MW][8][4];
#pragma unroll
    for (int m = 0; m < MW; ++m) tf_tile_zero<8>(acc[m]);

    if (split < ntiles) stage(split, 0);
#pragma unroll 1
    for (long tile = split, it = 0; tile < ntiles; tile += splits, ++it) {
        /* the next tile's rows arrive while this one is computed: its buffer
         * was last read before the barrier that ended the last tile */
        const int k = (int)(it & 1);
        if (tile + splits < ntiles) {
            stage(tile + splits, k ^ 1);
            tf_cp_wait<1>();
        } else {
            tf_cp_wait<0>();
        }
        __syncthreads();
        const uint16_t *Xs = Tb + k * TB, *As = Xs + sp * OPB_XLD, *Dz = As + sp * OPB_ALD;
        /* 1. o's tile: rows (p', i) x columns (j = w, q), K = S */
        float c1[2][4][4];
        tf_tile_zero<4>(c1[0]);
        tf_tile_zero<4>(c1[1]);
        for (int s0 = 0; s0 < sp; s0 += 16) {
            uint32_t x0[4], x1[4];
            tf_tile_load_at(x0, Xs, OPB_XLD, 0, s0);
            tf_tile_load_at(x1, Xs, OPB_XLD, 16, s0);
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                uint32_t bf[2];
                tf_tile_load_b(bf, As, OPB_ALD, 32 * w + 8 * n, s0);
                tf_tile_mma<E>(c1[0][n], x0, bf);
                tf_tile_mma<E>(c1[1][n], x1, bf);
            }
        }
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int n = 0; n < 4; ++n) {
                uint16_t *o = Os + (8 * w + g) * OPB_NLD + 32 * (2 * m) + 8 * n + 2 * t;
                *(uint32_t *)o = tf_tile_pack<E>(c1[m][n][0] * inv_s, c1[m][n][1] * inv_s);
                *(uint32_t *)(o + 32) = tf_tile_pack<E>(c1[m][n][2] * inv_s, c1[m][n][3] * inv_s);
            }
        __syncthreads();
        /* 2. dW's columns += dz^T o, K = the 64 pairs */
#pragma unroll
        for (int k0 = 0; k0 < 64; k0 += 16) {
            uint32_t af[MW][4];
#pragma unroll
            for (int m = 0; m < MW; ++m)
                tf_tile_load_at(af[m], Dz, CZ + 8, (CZ / 4) * wm + 16 * m, k0);
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                uint32_t bf[2];
                tf_tile_load_b(bf, Os, OPB_NLD, 64 * wn + 8 * n, k0);
#pragma unroll
                for (int m = 0; m < MW; ++m) tf_tile_mma<E>(acc[m][n], af[m], bf);
            }
        }
        __syncthreads(); /* Os and this tile's buffer are free */
    }
    /* the block's partial dW columns: part[split][c][32 p0 + col] */
    float *pb = part + (long)split * CZ * 1024;
#pragma unroll
    for (int m = 0; m < MW; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int c = (CZ / 4) * wm + 16 * m + g + 8 * hh, col = 64 * wn + 8 * n + 2 * t;
                *(float2 *)(pb + (long)c * 1024 + 32 * p0 + col) =
                    make_float2(acc[m][n][2 * hh], acc[m][n][2 * hh + 1]);
            }
}

/* dW[x] += sum over the splits of part[k][x], in split order */
__global__ void opm_dw_reduce_kernel(float *dW, const float *part, int splits, long n)
{
    for (long x = (long)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += (long)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int k = 0; k < splits; ++k) s += part[(long)k * n + x];
        dW[x] += s;
    }
}

template <class E, int CZ>
static void opb_bwd(tf_backend *be, void *da, float *dW, const void *dz, const void *a,
                    const void *W, int B, int S, int N)
{
    const int sp = (S + 15) & ~15;
    const float inv_s = 1.0f / (float)S;
    const dim3 gda((unsigned)((N + OPB_TI - 1) / OPB_TI), 32u / OPB_PG, (unsigned)B);
    const int nbuf = opb_da_smem(sp, CZ, 2) <= (size_t)227 * 1024 ? 2 : 1;
    TF_LAUNCH_SMEM((opm_bwd_da_kernel<E, CZ>), gda, OPB_THREADS, opb_da_smem(sp, CZ, nbuf), be,
                   (uint16_t *)da, (const uint16_t *)dz, (const uint16_t *)a, (const uint16_t *)W,
                   S, N, inv_s, nbuf);
    const long nt = (N + 7) / 8, tiles = (long)B * nt * nt, n = (long)CZ * 1024;
    long splits = (long)(TF_CU_WORKSPACE_BYTES / sizeof(float)) / n;
    if (splits > OPB_DW_SPLITS) splits = OPB_DW_SPLITS;
    if (splits > tiles) splits = tiles;
    float *part = (float *)be->workspace;
    TF_LAUNCH_SMEM((opm_bwd_dw_kernel<E, CZ>), dim3(32u / OPB_PG, (unsigned)splits), OPB_THREADS,
                   opb_dw_smem(sp, CZ), be, part, (const uint16_t *)dz, (const uint16_t *)a, B, S,
                   N, inv_s);
    TF_LAUNCH(opm_dw_reduce_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), be->stream, dW,
              (const float *)part, (int)splits, n);
}

extern "C" void tf_cu_t_opm_bwd_dz(tf_backend *be, void *da, float *dW, const void *dz,
                                   const void *a, const void *W, int B, int S, int N, int co,
                                   int cz, tf_dtype t)
{
    if (!TF_OPM_FUSED_OP_SHAPE(co, cz) || S < 1 || S > TF_GPU_OPM_FUSED_MAX_S ||
        (t != TF_BF16 && t != TF_F16) || !tf_cu_aligned(a, 16) || !tf_cu_aligned(W, 16) ||
        !tf_cu_aligned(dz, 16))
        tf_cuda_fail("opm_bwd_dz", "shape, type or alignment outside the fused kernels' (caps.opm_fused_op)",
                     __FILE__, __LINE__);
    if (t == TF_BF16 && cz == 128) opb_bwd<tf_cu_bf16, 128>(be, da, dW, dz, a, W, B, S, N);
    else if (t == TF_BF16) opb_bwd<tf_cu_bf16, 64>(be, da, dW, dz, a, W, B, S, N);
    else if (cz == 128) opb_bwd<tf_cu_f16, 128>(be, da, dW, dz, a, W, B, S, N);
    else opb_bwd<tf_cu_f16, 64>(be, da, dW, dz, a, W, B, S, N);
}
