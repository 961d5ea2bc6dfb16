/* The triangle multiplication's output stage for bf16 / fp16 at C 128 (op_list.h
 * trimul_out_fwd/_bwd), on mma.sync m16n8k16 (cuda_tile.h). NVIDIA only;
 * elsewhere the model composes the GEMM, gate_residual_fwd, the stream
 * gradient's conversion, gate_bwd and du's GEMM (triangle_mult.c, gpu_plan.h
 * tf_gpu_trimul_proj: the same plan choice as the projections' kernels).
 *
 * The composition writes out = E(u Wo^T) for the backward, reads it back to
 * gate it into the residual stream, converts dz to E and reads it, out and
 * og to form dout and dog, then reads dout again for du. Here out lives in
 * registers: the forward forms it and adds E(out) sigmoid(og) to the stream
 * at once; the backward forms it again (the forward's code: the same bits),
 * rounds dz to E as the conversion would, and keeps dout in registers as the
 * A operand of du = dout Wo, written channel-major like u.
 *
 * Block: 128 rows, 8 warps of 16 rows; u's [128 channels x 128 rows] tile
 * and Wo in shared memory (rows of 136 halves: 8 mod 16, the fragment loads
 * hit distinct banks). A warp reads only its own 16 columns of the u tile,
 * so the backward writes du's tile over them without waiting for the others
 * before the block writes it out along rows. */
#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_tile.h"

#define TO_C 128
#define TO_ROWS 128
#define TO_THREADS 256
#define TO_LD (TO_ROWS + 8) /* Us [channel][row] */
#define TO_WLD (TO_C + 8)   /* Ws [out channel][in channel] */
#define TO_SMEM_BYTES (2 * (TO_C * TO_LD + TO_C * TO_WLD))

/* u_t's columns r0.. into Us (zero past rows) and Wo into Ws: one cp.async
 * group where u_t's rows are 16-byte aligned, plain loads where not */
__device__ __forceinline__ void to_stage(uint16_t *Us, uint16_t *Ws, const uint16_t *u_t,
                                         const uint16_t *Wo, long r0, long rows, long ldt, int tid)
{
    const bool vec = (ldt & 7) == 0 && (rows & 7) == 0 && tf_cu_aligned(u_t, 16);
    for (int e = tid; e < TO_C * (TO_ROWS / 8); e += TO_THREADS) {
        const int k = e / (TO_ROWS / 8), seg = (e % (TO_ROWS / 8)) * 8;
        const long r = r0 + seg;
        const uint16_t *src = u_t + (long)k * ldt + r;
        uint16_t *dst = Us + k * TO_LD + seg;
        if (vec) {
            const bool ok = r < rows; /* rows % 8 == 0: a segment is all in or all out */
            tf_cp_async(reinterpret_cast<float *>(dst),
                   reinterpret_cast<const float *>(ok ? src : u_t), 16, ok);
        } else {
            for (int q = 0; q < 8; ++q) dst[q] = r + q < rows ? src[q] : (uint16_t)0;
        }
    }
    for (int e = tid; e < TO_C * (TO_C / 8); e += TO_THREADS) {
        const int c = e / (TO_C / 8), k = (e % (TO_C / 8)) * 8;
        tf_cp_async(reinterpret_cast<float *>(Ws + c * TO_WLD + k),
               reinterpret_cast<const float *>(Wo + (long)c * TO_C + k), 16, true);
    }
    tf_cp_commit();
    tf_cp_wait<0>();
    __syncthreads();
}

/* out for the warp's 16 rows x 128 channels: A = Us^T, B = Ws^T, K = C */
template <class E>
__device__ __forceinline__ void to_out(float (*acc)[4], const uint16_t *Us, const uint16_t *Ws,
                                       int w)
{
    tf_tile_zero<16>(acc);
#pragma unroll
    for (int k0 = 0; k0 < TO_C; k0 += 16) {
        uint32_t a[4];
        tf_tile_load_at(a, Us, TO_LD, 16 * w, k0);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            uint32_t b[2];
            tf_tile_load_bt(b, Ws, TO_WLD, 8 * j, k0);
            tf_tile_mma<E>(acc[j], a, b);
        }
    }
}

template <class E>
__global__ void __launch_bounds__(TO_THREADS, 2)
trimul_out_fwd_kernel(float *z_out, const float *z_in, const uint16_t *u_t, const uint16_t *Wo,
                      const uint16_t *og, long rows, long ldt)
{
    TF_SMEM(smf);
    uint16_t *Us = (uint16_t *)smf, *Ws = Us + TO_C * TO_LD;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const long r0 = (long)blockIdx.x * TO_ROWS;
    to_stage(Us, Ws, u_t, Wo, r0, rows, ldt, tid);
    float acc[16][4];
    to_out<E>(acc, Us, Ws, w);
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const long r = r0 + 16 * w + g + 8 * hh;
            if (r >= rows) continue;
            const long i = r * TO_C + 8 * j + 2 * t;
            const float2 res = *(const float2 *)(z_in + i);
            const uint32_t gl = *(const uint32_t *)(og + i);
            float2 o;
            o.x = res.x + tf_tile_widen<E>(tf_tile_round<E>(acc[j][2 * hh])) *
                              tf_sigmoidf(tf_tile_widen<E>((uint16_t)(gl & 0xffffu)));
            o.y = res.y + tf_tile_widen<E>(tf_tile_round<E>(acc[j][2 * hh + 1])) *
                              tf_sigmoidf(tf_tile_widen<E>((uint16_t)(gl >> 16)));
            *(float2 *)(z_out + i) = o;
        }
}

template <class E>
__global__ void __launch_bounds__(TO_THREADS, 2)
trimul_out_bwd_kernel(uint16_t *dout, uint16_t *dog, uint16_t *du, const float *dz,
                      const uint16_t *u_t, const uint16_t *Wo, const uint16_t *og, long rows,
                      long ldt)
{
    TF_SMEM(smf);
    uint16_t *Us = (uint16_t *)smf, *Ws = Us + TO_C * TO_LD;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const long r0 = (long)blockIdx.x * TO_ROWS;
    to_stage(Us, Ws, u_t, Wo, r0, rows, ldt, tid);
    float acc[16][4];
    to_out<E>(acc, Us, Ws, w);
    /* the gate's gradients; acc becomes dout (rounded), zero past rows */
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const long r = r0 + 16 * w + g + 8 * hh;
            if (r >= rows) {
                acc[j][2 * hh] = acc[j][2 * hh + 1] = 0.f;
                continue;
            }
            const long i = r * TO_C + 8 * j + 2 * t;
            const float2 dy = *(const float2 *)(dz + i);
            const uint32_t gl = *(const uint32_t *)(og + i);
            float da[2], dg[2];
            tf_gate_bwd_one(&da[0], &dg[0], tf_tile_widen<E>(tf_tile_round<E>(dy.x)),
                            tf_tile_widen<E>(tf_tile_round<E>(acc[j][2 * hh])),
                            tf_tile_widen<E>((uint16_t)(gl & 0xffffu)));
            tf_gate_bwd_one(&da[1], &dg[1], tf_tile_widen<E>(tf_tile_round<E>(dy.y)),
                            tf_tile_widen<E>(tf_tile_round<E>(acc[j][2 * hh + 1])),
                            tf_tile_widen<E>((uint16_t)(gl >> 16)));
            const uint32_t pa = tf_tile_pack<E>(da[0], da[1]);
            *(uint32_t *)(dout + i) = pa;
            *(uint32_t *)(dog + i) = tf_tile_pack<E>(dg[0], dg[1]);
            acc[j][2 * hh] = tf_tile_widen<E>((uint16_t)(pa & 0xffffu));
            acc[j][2 * hh + 1] = tf_tile_widen<E>((uint16_t)(pa >> 16));
        }
    if (!du) return; /* dout and dog wanted again, du not */
    /* du [channel k][row] = sum_c dout[row, c] Wo[c, k]: A = dout from the
     * registers, B = Ws; in halves of 64 channels, over the warp's own
     * columns of Us */
    __syncwarp();
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
        float d[8][4];
        tf_tile_zero<8>(d);
#pragma unroll
        for (int c0 = 0; c0 < TO_C; c0 += 16) {
            uint32_t a[4];
            tf_tile_c2a<E>(a, acc[c0 / 8], acc[c0 / 8 + 1]);
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
                uint32_t b[2];
                tf_tile_load_b(b, Ws, TO_WLD, 64 * kh + 8 * jj, c0);
                tf_tile_mma<E>(d[jj], a, b);
            }
        }
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int rl = 16 * w + g + 8 * (e >> 1), k = 64 * kh + 8 * jj + 2 * t + (e & 1);
                Us[k * TO_LD + rl] = tf_tile_round<E>(d[jj][e]);
            }
    }
    __syncthreads();
    const bool vec = (ldt & 7) == 0 && (rows & 7) == 0 && tf_cu_aligned(du, 16);
    for (int e = tid; e < TO_C * (TO_ROWS / 8); e += TO_THREADS) {
        const int k = e / (TO_ROWS / 8), seg = (e % (TO_ROWS / 8)) * 8;
        const long r = r0 + seg;
        uint16_t *dst = du + (long)k * ldt + r;
        const uint16_t *src = Us + k * TO_LD + seg;
        if (vec) {
            if (r < rows) *(uint4 *)dst = *(const uint4 *)src;
        } else {
            for (int q = 0; q < 8; ++q)
                if (r + q < rows) dst[q] = src[q];
        }
    }
}

/* f32 the fp32 stream(s) read or written as pairs, h the half pairs */
static void to_check(const char *op, const void *Wo, const void *og, const void *f1,
                     const void *f2, const void *h1, const void *h2, int C, long rows, long ldt,
                     tf_dtype t)
{
    if (C != TO_C || (t != TF_BF16 && t != TF_F16) || ldt < rows || !tf_cu_aligned(Wo, 16) ||
        !tf_cu_aligned(og, 4) || !tf_cu_aligned(f1, 8) || !tf_cu_aligned(f2, 8) ||
        !tf_cu_aligned(h1, 4) || !tf_cu_aligned(h2, 4))
        tf_cuda_fail(op, "C, type or alignment outside the kernel's (caps.trimul_proj_op)",
                     __FILE__, __LINE__);
}

extern "C" void tf_cu_t_trimul_out_fwd(tf_backend *be, float *z_out, const float *z_in,
                                       const void *u_t, const void *Wo, const void *og, long rows,
                                       long ldt, int C, tf_dtype t)
{
    if (rows <= 0) return;
    to_check("trimul_out_fwd", Wo, og, z_out, z_in, og, og, C, rows, ldt, t);
    const dim3 grid((unsigned)((rows + TO_ROWS - 1) / TO_ROWS));
    if (t == TF_BF16)
        TF_LAUNCH_SMEM((trimul_out_fwd_kernel<tf_cu_bf16>), grid, TO_THREADS, TO_SMEM_BYTES, be,
                       z_out, z_in, (const uint16_t *)u_t, (const uint16_t *)Wo,
                       (const uint16_t *)og, rows, ldt);
    else
        TF_LAUNCH_SMEM((trimul_out_fwd_kernel<tf_cu_f16>), grid, TO_THREADS, TO_SMEM_BYTES, be,
                       z_out, z_in, (const uint16_t *)u_t, (const uint16_t *)Wo,
                       (const uint16_t *)og, rows, ldt);
}

extern "C" void tf_cu_t_trimul_out_bwd(tf_backend *be, void *dout, void *dog, void *du,
                                       const float *dz, const void *u_t, const void *Wo,
                                       const void *og, long rows, long ldt, int C, tf_dtype t)
{
    if (rows <= 0) return;
    to_check("trimul_out_bwd", Wo, og, dz, dz, dout, dog, C, rows, ldt, t);
    const dim3 grid((unsigned)((rows + TO_ROWS - 1) / TO_ROWS));
    if (t == TF_BF16)
        TF_LAUNCH_SMEM((trimul_out_bwd_kernel<tf_cu_bf16>), grid, TO_THREADS, TO_SMEM_BYTES, be,
                       (uint16_t *)dout, (uint16_t *)dog, (uint16_t *)du, dz,
                       (const uint16_t *)u_t, (const uint16_t *)Wo, (const uint16_t *)og, rows,
                       ldt);
    else
        TF_LAUNCH_SMEM((trimul_out_bwd_kernel<tf_cu_f16>), grid, TO_THREADS, TO_SMEM_BYTES, be,
                       (uint16_t *)dout, (uint16_t *)dog, (uint16_t *)du, dz,
                       (const uint16_t *)u_t, (const uint16_t *)Wo, (const uint16_t *)og, rows,
                       ldt);
}
