/* The triangle multiplication's input stage in one kernel (ops.h
 * trimul_in_fwd): layernorm2 in the GEMM's prologue, the gating and the
 * channel-major transpose in its epilogue, bf16/fp16 on mma.sync m16n8k16
 * (NVIDIA, compute capability 8.0 up; the HIP build stands in with
 * tf_hip_nv_only.cu).
 *
 * Separately these are layernorm2_fwd (x read, y written), one GEMM
 * [rows, 128] x [128, 512] (y read, proj written), gate_cmajor_fwd (proj read,
 * the gated L|R written channel-major) and the output gate's GEMM (y read
 * again, og written): four launches. Here a block normalises its 128 rows
 * into shared memory (and writes y and the statistics, which the backward
 * reads), then runs five passes over them, one 128-row weight tile each:
 * L and its gate for channels 0-63, then 64-127, the same for R, and the
 * output gate. In a pass each of the 8 warps holds 16 rows x 128 columns of
 * fp32 sums; a lane's L and gate sums of one (row, channel) sit in the same
 * fragment position of tiles j and j + 8, so the gating needs no exchange.
 * The gated values go through shared memory (the weight tile's, free after
 * the MMAs) to be written along rows, 256 bytes a channel.
 *
 * Bits: y and the statistics are layernorm2_fwd's (the same row code,
 * cuda_ln_vrow.h); the gated values are gate_cmajor_fwd's of this kernel's
 * proj (the same expression on the rounded values). The GEMM sums are the
 * tensor cores' fp32 sums of exact half products, in an order of their own.
 *
 * Shared memory: the rows and one weight tile, 128 x (128 + 8) half values
 * each (68 KB); the 8-element pad puts a warp's 32-bit fragment loads, rows
 * g at column pairs t, on 32 distinct banks. */
#include "cuda_common.h"
#include "cuda_ln_vrow.h"
#include "cuda_mma.h"

#define TI_C 128          /* channels: the kernel's one width */
#define TI_BM 128         /* rows a block, 16 a warp */
#define TI_WARPS 8
#define TI_LD (TI_C + 8)  /* row stride of the shared tiles, in elements */
#define TI_TLD (TI_BM + 8) /* row stride of the transposed staging */
#define TI_SMEM_BYTES (2 * TI_BM * TI_LD * 2)

/* two elements into one 32-bit register, the first in the low half */
template <class E> __device__ __forceinline__ uint32_t ti_pack(E a, E b)
{
    return (uint32_t)a.u | (uint32_t)b.u << 16;
}

/* weight tile of pass p into Ws: rows i < 64 the value rows, i >= 64 the
 * gate rows of the same channels (passes 0-3), or Wog's rows (pass 4) */
template <class E>
__device__ __forceinline__ const E *ti_wrow(const E *W, const E *Wog, int pass, int i)
{
    if (pass == 4) return Wog + (long)i * TI_C;
    const int s = pass >> 1, cb = (pass & 1) * 64;
    const int n = i < 64 ? s * TI_C + cb + i : 2 * TI_C + s * TI_C + cb + (i - 64);
    return W + (long)n * TI_C;
}

template <class E>
__global__ void __launch_bounds__(TI_WARPS * 32, 2)
    trimul_in_kernel(E *y, float *stats, E *proj, E *og, E *lr_t, const float *x, const float *g1,
                     const float *b1, const float *g2, const float *b2, const E *W, const E *Wog,
                     long rows, float eps, int wvec, int tvec)
{
    TF_SMEM(sm);
    E *As = reinterpret_cast<E *>(sm);
    E *Ws = As + TI_BM * TI_LD;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const long r0 = (long)blockIdx.x * TI_BM;

    /* ---- prologue: layernorm2 of the warp's 16 rows, a row at a time ---- */
    {
        float p1[LN2_CACHE], q1[LN2_CACHE], p2[LN2_CACHE], q2[LN2_CACHE];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int c = 4 * lane + k;
            p1[k] = g1[c], q1[k] = b1[c], p2[k] = g2[c], q2[k] = b2[c];
        }
        for (int i = 0; i < 16; ++i) { /* warp-uniform */
            const int rl = warp * 16 + i;
            const long r = r0 + rl;
            float v[LN2_CACHE] = {0.f, 0.f, 0.f, 0.f};
            if (r < rows) {
                float st[4];
                ln_vld<4>(x + r * TI_C + 4 * lane, v);
                ln2_vrow128(v, p1, q1, p2, q2, eps, st);
                tf_cu_st4(y + r * TI_C + 4 * lane, make_float4(v[0], v[1], v[2], v[3]));
                if (lane == 0) {
                    stats[r] = st[0];
                    stats[rows + r] = st[1];
                    stats[2 * rows + r] = st[2];
                    stats[3 * rows + r] = st[3];
                }
            }
            E e[4];
            e[0] = v[0], e[1] = v[1], e[2] = v[2], e[3] = v[3]; /* y's rounding; rows past: 0 */
            *reinterpret_cast<uint2 *>(As + rl * TI_LD + 4 * lane) =
                make_uint2(ti_pack(e[0], e[1]), ti_pack(e[2], e[3]));
        }
    }

    const E *Aw = As + warp * 16 * TI_LD;
    for (int pass = 0; pass < 5; ++pass) {
        __syncthreads(); /* the rows are in (pass 0); the last pass's staging was read */
        if (wvec) { /* 16-byte copies, 16 a row */
            for (int idx = tid; idx < TI_BM * 16; idx += TI_WARPS * 32) {
                const int i = idx >> 4, c = (idx & 15) * 8;
                *reinterpret_cast<uint4 *>(Ws + i * TI_LD + c) =
                    *reinterpret_cast<const uint4 *>(ti_wrow(W, Wog, pass, i) + c);
            }
        } else {
            for (int idx = tid; idx < TI_BM * TI_C; idx += TI_WARPS * 32) {
                const int i = idx / TI_C, c = idx % TI_C;
                Ws[i * TI_LD + c] = ti_wrow(W, Wog, pass, i)[c];
            }
        }
        __syncthreads();

        float acc[16][4];
        mma_zero<16>(acc);
#pragma unroll
        for (int ks = 0; ks < TI_C / 16; ++ks) {
            const int k0 = ks * 16 + 2 * t;
            uint32_t a[4];
            a[0] = *reinterpret_cast<const uint32_t *>(Aw + g * TI_LD + k0);
            a[1] = *reinterpret_cast<const uint32_t *>(Aw + (g + 8) * TI_LD + k0);
            a[2] = *reinterpret_cast<const uint32_t *>(Aw + g * TI_LD + k0 + 8);
            a[3] = *reinterpret_cast<const uint32_t *>(Aw + (g + 8) * TI_LD + k0 + 8);
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                uint32_t b[2];
                b[0] = *reinterpret_cast<const uint32_t *>(Ws + (8 * j + g) * TI_LD + k0);
                b[1] = *reinterpret_cast<const uint32_t *>(Ws + (8 * j + g) * TI_LD + k0 + 8);
                mma_16816<E>(acc[j], a, b);
            }
        }

        if (pass == 4) { /* the output gate's logits */
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const long r = r0 + warp * 16 + g + 8 * hf;
                    if (r >= rows) continue;
                    E e[2];
                    e[0] = acc[j][2 * hf], e[1] = acc[j][2 * hf + 1];
                    *reinterpret_cast<uint32_t *>(og + r * TI_C + 8 * j + 2 * t) =
                        ti_pack(e[0], e[1]);
                }
            continue;
        }
        const int s = pass >> 1, cb = (pass & 1) * 64;
        __syncthreads(); /* every warp's MMAs have read Ws: it becomes the staging */
        E *Ts = Ws;      /* [64 channels][TI_TLD rows] */
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int rl = warp * 16 + g + 8 * hf, c = 8 * j + 2 * t;
                const long r = r0 + rl;
                E l[2], q[2];
                l[0] = acc[j][2 * hf], l[1] = acc[j][2 * hf + 1];
                q[0] = acc[j + 8][2 * hf], q[1] = acc[j + 8][2 * hf + 1];
                if (r < rows) {
                    E *pr = proj + r * (4 * TI_C) + s * TI_C + cb + c;
                    *reinterpret_cast<uint32_t *>(pr) = ti_pack(l[0], l[1]);
                    *reinterpret_cast<uint32_t *>(pr + 2 * TI_C) = ti_pack(q[0], q[1]);
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) /* gate_cmajor_fwd's expression */
                    Ts[(c + e) * TI_TLD + rl] = (float)l[e] * tf_sigmoidf((float)q[e]);
            }
        __syncthreads();
        for (int idx = tid; idx < 64 * (TI_BM / 8); idx += TI_WARPS * 32) {
            const int ch = idx / (TI_BM / 8), seg = (idx % (TI_BM / 8)) * 8;
            const long rr = r0 + seg;
            E *dst = lr_t + (long)(s * TI_C + cb + ch) * rows + rr;
            const E *src = Ts + ch * TI_TLD + seg;
            if (tvec && rr + 8 <= rows) {
                *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
            } else {
                for (int k = 0; k < 8; ++k)
                    if (rr + k < rows) dst[k] = src[k];
            }
        }
    }
}

template <class E>
static void trimul_in(tf_backend *be, void *y, float *stats, void *proj, void *og, void *lr_t,
                      const float *x, const float *g1, const float *b1, const float *g2,
                      const float *b2, const void *W, const void *Wog, long rows, float eps)
{
    const unsigned grid = (unsigned)((rows + TI_BM - 1) / TI_BM);
    const int wvec = tf_cu_aligned(W, 16) && tf_cu_aligned(Wog, 16);
    const int tvec = rows % 8 == 0 && tf_cu_aligned(lr_t, 16);
    TF_LAUNCH_SMEM((trimul_in_kernel<E>), grid, TI_WARPS * 32, TI_SMEM_BYTES, be,
                   (E *)y, stats, (E *)proj, (E *)og, (E *)lr_t, x, g1, b1, g2, b2,
                   (const E *)W, (const E *)Wog, rows, eps, wvec, tvec);
}

/* ops.h trimul_in_fwd; the model calls it where caps.trimul_in_op says so,
 * with C 128, a half type and its buffers (x 16-byte, y 8-byte aligned) */
extern "C" void tf_cu_trimul_in_fwd(tf_backend *be, void *y, float *stats, void *proj, void *og,
                                    void *lr_t, const float *x, const float *g1, const float *b1,
                                    const float *g2, const float *b2, const void *W,
                                    const void *Wog, long rows, int C, float eps, tf_dtype t)
{
    if (rows <= 0) return;
    if (C != TI_C || (t != TF_BF16 && t != TF_F16) || !tf_cu_aligned(x, 16) ||
        !tf_cu_aligned(y, 8) || !tf_cu_aligned(proj, 4) || !tf_cu_aligned(og, 4) ||
        !tf_cu_aligned(lr_t, 2))
        tf_cuda_fail("tf_cu_trimul_in_fwd", "takes C 128, bf16 or fp16, x 16-byte and y 8-byte "
                     "aligned", __FILE__, __LINE__);
    if (t == TF_BF16)
        trimul_in<tf_cu_bf16>(be, y, stats, proj, og, lr_t, x, g1, b1, g2, b2, W, Wog, rows, eps);
    else
        trimul_in<tf_cu_f16>(be, y, stats, proj, og, lr_t, x, g1, b1, g2, b2, W, Wog, rows, eps);
}
