/* The triangle multiplication's norms, projections and gates for bf16 / fp16 at C
 * 128 (op_list.h trimul_proj_fwd/_bwd), on mma.sync m16n8k16 (cuda_tile.h).
 * NVIDIA only; elsewhere the model composes the merged GEMM and
 * gate_cmajor_fwd/_bwd (triangle_mult.c, gpu_plan.h tf_gpu_trimul_proj).
 *
 * The forward's prologue is the two LayerNorms (layernorm2_fwd's math): y
 * and the statistics are written for the backward, and y's rows stay in
 * shared memory for the passes.
 *
 * The composition writes proj = E(y W4^T) ([rows, 4C]: L, R, then their
 * gate logits), reads it back to gate and transpose L|R channel-major, and
 * reads it again in the backward. Here proj lives in registers: the forward
 * forms it a pass of 128 columns at a time and writes only the gated L|R
 * (channel-major) and og = E(y Wog^T); the backward forms it again from y
 * (the forward's code: the same bits) to gate the gradient.
 *
 * Block: 128 rows, 8 warps of 16 rows; y's rows stay in shared memory. Pass
 * p < 4 takes W4's rows of the 64 channels cb = 64 (p & 1) of L (p < 2) or R
 * with their 64 gate rows (a 128-row tile by cp.async): a lane's value and
 * gate sums of one (row, channel) sit in the same place of C tiles j and
 * j + 8. Forward: E(value) sigmoid(E(gate)), rounded (gate_cmajor_fwd's
 * expression), goes through shared memory [channel][row] to be written
 * along rows; pass 4 is og's. Backward: the pass's [64 channels x 128 rows]
 * of dlr_t come in through shared memory and tf_gate_bwd_one (gate_cmajor_
 * bwd's) gives the value's and the gate's gradients, written as rows of the
 * merged [rows, 4C] gradient. Shared rows are 136 halves (8 mod 16: the
 * fragment loads hit distinct banks). */
#include "cuda_common.h"
#include "cuda_cp_async.h"
#include "cuda_tile.h"

#define TP_C 128
#define TP_ROWS 128
#define TP_THREADS 256
#define TP_LD (TP_C + 8)
#define TP_TLD (TP_ROWS + 8)
#define TP_SMEM_BYTES (2 * (2 * TP_ROWS * TP_LD + 64 * TP_TLD))

/* y's rows r0.. into Ys (zero past rows) and W's rows of pass p into Ws: one
 * cp.async group (W4 [4C, C], Wog [C, C]) */
__device__ __forceinline__ void tp_stage_w(uint16_t *Ws, const uint16_t *W4, const uint16_t *Wog,
                                           int p, int tid)
{
    for (int e = tid; e < TP_ROWS * 16; e += TP_THREADS) {
        const int i = e >> 4, c = (e & 15) * 8;
        long row;
        if (p == 4) row = i;
        else row = (i < 64 ? 0 : 2 * TP_C) + (p >> 1) * TP_C + (p & 1) * 64 + (i & 63);
        tf_cp_async(reinterpret_cast<float *>(Ws + i * TP_LD + c),
               reinterpret_cast<const float *>((p == 4 ? Wog : W4) + row * TP_C + c), 16, true);
    }
}
__device__ __forceinline__ void tp_stage_y(uint16_t *Ys, const uint16_t *y, long r0, long rows,
                                           int tid)
{
    for (int e = tid; e < TP_ROWS * 16; e += TP_THREADS) {
        const int i = e >> 4, c = (e & 15) * 8;
        const bool ok = r0 + i < rows;
        tf_cp_async(reinterpret_cast<float *>(Ys + i * TP_LD + c),
               reinterpret_cast<const float *>(ok ? y + (r0 + i) * TP_C + c : y), 16, ok);
    }
}

/* The forward's prologue: the warp's 16 rows of y = LN2(x) (layernorm2_fwd's
 * expressions in its order: two-pass statistics over a warp sum, y1 in fp32),
 * rounded to E into Ys (zero past rows) and written out with the four
 * statistics rows. A lane holds 4 adjacent columns; the rows' loads are
 * issued four at a time ahead of their sums. */
template <class E>
__device__ __forceinline__ void tp_prologue(uint16_t *Ys, uint16_t *y, float *stats,
                                            const float *x, const float *g1, const float *b1,
                                            const float *g2, const float *b2, float eps, long r0,
                                            long rows, int w, int lane)
{
    const float4 p1 = *(const float4 *)(g1 + 4 * lane), q1 = *(const float4 *)(b1 + 4 * lane);
    const float4 p2 = *(const float4 *)(g2 + 4 * lane), q2 = *(const float4 *)(b2 + 4 * lane);
    const float G1[4] = {p1.x, p1.y, p1.z, p1.w}, B1[4] = {q1.x, q1.y, q1.z, q1.w};
    const float G2[4] = {p2.x, p2.y, p2.z, p2.w}, B2[4] = {q2.x, q2.y, q2.z, q2.w};
#pragma unroll 1
    for (int i0 = 0; i0 < 16; i0 += 4) {
        float4 xv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const long r = r0 + 16 * w + i0 + i;
            xv[i] = r < rows ? *(const float4 *)(x + r * TP_C + 4 * lane)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int rl = 16 * w + i0 + i;
            const long r = r0 + rl;
            uint2 *ys = (uint2 *)(Ys + rl * TP_LD + 4 * lane);
            if (r >= rows) { /* warp-uniform */
                *ys = make_uint2(0u, 0u);
                continue;
            }
            float v[4] = {xv[i].x, xv[i].y, xv[i].z, xv[i].w};
            float mu[2], rs[2];
#pragma unroll
            for (int n = 0; n < 2; ++n) {
                float sum = 0.f, sq = 0.f;
#pragma unroll
                for (int k = 0; k < 4; ++k) sum += v[k];
                mu[n] = tf_warp_sum(sum) / TP_C;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const float d = v[k] - mu[n];
                    sq += d * d;
                }
                rs[n] = 1.f / sqrtf(tf_warp_sum(sq) / TP_C + eps);
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    v[k] = n ? (v[k] - mu[1]) * rs[1] * G2[k] + B2[k]
                             : (v[k] - mu[0]) * rs[0] * G1[k] + B1[k];
            }
            const uint2 u = make_uint2(tf_tile_pack<E>(v[0], v[1]), tf_tile_pack<E>(v[2], v[3]));
            *ys = u;
            *(uint2 *)(y + r * TP_C + 4 * lane) = u;
            if (lane == 0) {
                stats[r] = mu[0];
                stats[rows + r] = rs[0];
                stats[2 * rows + r] = mu[1];
                stats[3 * rows + r] = rs[1];
            }
        }
    }
}

/* the warp's 16 rows x the pass's 128 columns, K = C */
template <class E>
__device__ __forceinline__ void tp_mma(float (*acc)[4], const uint16_t *Ys, const uint16_t *Ws,
                                       int w)
{
    tf_tile_zero<16>(acc);
#pragma unroll
    for (int k0 = 0; k0 < TP_C; k0 += 16) {
        uint32_t a[4];
        tf_tile_load_a(a, Ys, TP_LD, 16 * w, k0);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            uint32_t b[2];
            tf_tile_load_bt(b, Ws, TP_LD, 8 * j, k0);
            tf_tile_mma<E>(acc[j], a, b);
        }
    }
}

template <class E>
__global__ void __launch_bounds__(TP_THREADS, 2)
trimul_proj_fwd_kernel(uint16_t *lr_t, uint16_t *og, uint16_t *y, float *stats, const float *x,
                       const float *g1, const float *b1, const float *g2, const float *b2,
                       float eps, const uint16_t *W4, const uint16_t *Wog, long rows, long ldt)
{
    TF_SMEM(smf);
    uint16_t *Ys = (uint16_t *)smf, *Ws = Ys + TP_ROWS * TP_LD, *Ts = Ws + TP_ROWS * TP_LD;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const long r0 = (long)blockIdx.x * TP_ROWS;
    tp_stage_w(Ws, W4, Wog, 0, tid); /* pass 0's weights load while the rows are normalised */
    tf_cp_commit();
    tp_prologue<E>(Ys, y, stats, x, g1, b1, g2, b2, eps, r0, rows, w, lane);
#pragma unroll 1
    for (int p = 0; p < 5; ++p) {
        if (p) {
            __syncthreads(); /* the last pass's readers of Ws and Ts are done */
            tp_stage_w(Ws, W4, Wog, p, tid);
            tf_cp_commit();
        }
        tf_cp_wait<0>();
        __syncthreads();
        float acc[16][4];
        tp_mma<E>(acc, Ys, Ws, w);
        if (p == 4) { /* og's logits, rounded */
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const long r = r0 + 16 * w + g + 8 * hh;
                    if (r < rows)
                        *(uint32_t *)(og + r * TP_C + 8 * j + 2 * t) =
                            tf_tile_pack<E>(acc[j][2 * hh], acc[j][2 * hh + 1]);
                }
            break;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int rl = 16 * w + g + 8 * (e >> 1), c = 8 * j + 2 * t + (e & 1);
                const float v = tf_tile_widen<E>(tf_tile_round<E>(acc[j][e])), gt = tf_tile_widen<E>(tf_tile_round<E>(acc[j + 8][e]));
                Ts[c * TP_TLD + rl] = tf_tile_round<E>(v * tf_sigmoidf(gt));
            }
        __syncthreads();
        /* channel (p >> 1) C + (p & 1) 64 + ch, rows r0.. contiguous */
        for (int e = tid; e < 64 * (TP_ROWS / 8); e += TP_THREADS) {
            const int ch = e / (TP_ROWS / 8), seg = (e % (TP_ROWS / 8)) * 8;
            const long r = r0 + seg;
            uint16_t *dst = lr_t + ((long)(p >> 1) * TP_C + (p & 1) * 64 + ch) * ldt + r;
            const uint16_t *src = Ts + ch * TP_TLD + seg;
            if (r + 8 <= rows && tf_cu_aligned(dst, 16)) {
                *(uint4 *)dst = *(const uint4 *)src;
            } else {
                for (int k = 0; k < 8; ++k)
                    if (r + k < rows) dst[k] = src[k];
            }
        }
    }
}

template <class E>
__global__ void __launch_bounds__(TP_THREADS, 2)
trimul_proj_bwd_kernel(uint16_t *dproj, const uint16_t *dlr_t, const uint16_t *y,
                       const uint16_t *W4, long rows, long ldt)
{
    TF_SMEM(smf);
    uint16_t *Ys = (uint16_t *)smf, *Ws = Ys + TP_ROWS * TP_LD, *Ts = Ws + TP_ROWS * TP_LD;
    const int tid = (int)threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const long r0 = (long)blockIdx.x * TP_ROWS;
    tp_stage_y(Ys, y, r0, rows, tid);
#pragma unroll 1
    for (int p = 0; p < 4; ++p) {
        __syncthreads(); /* the last pass's readers of Ws and Ts are done */
        tp_stage_w(Ws, W4, NULL, p, tid);
        tf_cp_commit();
        /* the pass's gradient: channel-major rows into Ts[channel][row] */
        for (int e = tid; e < 64 * (TP_ROWS / 8); e += TP_THREADS) {
            const int ch = e / (TP_ROWS / 8), seg = (e % (TP_ROWS / 8)) * 8;
            const long r = r0 + seg;
            const uint16_t *src = dlr_t + ((long)(p >> 1) * TP_C + (p & 1) * 64 + ch) * ldt + r;
            uint16_t *dst = Ts + ch * TP_TLD + seg;
            if (r + 8 <= rows && tf_cu_aligned(src, 16)) {
                *(uint4 *)dst = *(const uint4 *)src;
            } else {
                for (int k = 0; k < 8; ++k) dst[k] = r + k < rows ? src[k] : (uint16_t)0;
            }
        }
        tf_cp_wait<0>();
        __syncthreads();
        float acc[16][4];
        tp_mma<E>(acc, Ys, Ws, w);
        const int col = (p >> 1) * TP_C + (p & 1) * 64;
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int rl = 16 * w + g + 8 * hh, c = 8 * j + 2 * t;
                const long r = r0 + rl;
                float dv[2], dg[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float v = tf_tile_widen<E>(tf_tile_round<E>(acc[j][2 * hh + e]));
                    const float gt = tf_tile_widen<E>(tf_tile_round<E>(acc[j + 8][2 * hh + e]));
                    tf_gate_bwd_one(&dv[e], &dg[e], tf_tile_widen<E>(Ts[(c + e) * TP_TLD + rl]), v, gt);
                }
                if (r < rows) {
                    uint16_t *d = dproj + r * 4 * TP_C + col + c;
                    *(uint32_t *)d = tf_tile_pack<E>(dv[0], dv[1]);
                    *(uint32_t *)(d + 2 * TP_C) = tf_tile_pack<E>(dg[0], dg[1]);
                }
            }
    }
}

static void tp_check(const char *op, const void *y, const void *W4, const void *W5, const void *o,
                     int C, long rows, long ldt, tf_dtype t)
{
    if (C != TP_C || (t != TF_BF16 && t != TF_F16) || ldt < rows || !tf_cu_aligned(y, 16) ||
        !tf_cu_aligned(W4, 16) || !tf_cu_aligned(W5, 16) || !tf_cu_aligned(o, 4))
        tf_cuda_fail(op, "C, type or alignment outside the kernel's (caps.trimul_proj_op)",
                     __FILE__, __LINE__);
}

extern "C" void tf_cu_t_trimul_proj_fwd(tf_backend *be, void *lr_t, void *og, void *y,
                                        float *stats, const float *x, const float *g1,
                                        const float *b1, const float *g2, const float *b2,
                                        float eps, const void *W4, const void *Wog, long rows,
                                        long ldt, int C, tf_dtype t)
{
    if (rows <= 0) return;
    tp_check("trimul_proj_fwd", y, W4, Wog, og, C, rows, ldt, t);
    if (!tf_cu_aligned(x, 16) || !tf_cu_aligned(g1, 16) || !tf_cu_aligned(b1, 16) ||
        !tf_cu_aligned(g2, 16) || !tf_cu_aligned(b2, 16) || !tf_cu_aligned(y, 8))
        tf_cuda_fail("trimul_proj_fwd", "x, y or the norms' parameters not aligned to 4 elements",
                     __FILE__, __LINE__);
    const dim3 grid((unsigned)((rows + TP_ROWS - 1) / TP_ROWS));
    if (t == TF_BF16)
        TF_LAUNCH_SMEM((trimul_proj_fwd_kernel<tf_cu_bf16>), grid, TP_THREADS, TP_SMEM_BYTES, be,
                       (uint16_t *)lr_t, (uint16_t *)og, (uint16_t *)y, stats, x, g1, b1, g2, b2,
                       eps, (const uint16_t *)W4, (const uint16_t *)Wog, rows, ldt);
    else
        TF_LAUNCH_SMEM((trimul_proj_fwd_kernel<tf_cu_f16>), grid, TP_THREADS, TP_SMEM_BYTES, be,
                       (uint16_t *)lr_t, (uint16_t *)og, (uint16_t *)y, stats, x, g1, b1, g2, b2,
                       eps, (const uint16_t *)W4, (const uint16_t *)Wog, rows, ldt);
}

extern "C" void tf_cu_t_trimul_proj_bwd(tf_backend *be, void *dproj, const void *dlr_t,
                                        const void *y, const void *W4, long rows, long ldt,
                                        int C, tf_dtype t)
{
    if (rows <= 0) return;
    tp_check("trimul_proj_bwd", y, W4, NULL, dproj, C, rows, ldt, t);
    const dim3 grid((unsigned)((rows + TP_ROWS - 1) / TP_ROWS));
    if (t == TF_BF16)
        TF_LAUNCH_SMEM((trimul_proj_bwd_kernel<tf_cu_bf16>), grid, TP_THREADS, TP_SMEM_BYTES, be,
                       (uint16_t *)dproj, (const uint16_t *)dlr_t, (const uint16_t *)y,
                       (const uint16_t *)W4, rows, ldt);
    else
        TF_LAUNCH_SMEM((trimul_proj_bwd_kernel<tf_cu_f16>), grid, TP_THREADS, TP_SMEM_BYTES, be,
                       (uint16_t *)dproj, (const uint16_t *)dlr_t, (const uint16_t *)y,
                       (const uint16_t *)W4, rows, ldt);
}
