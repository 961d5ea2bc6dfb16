/* The outer product mean's two kernels for the half types on tensor cores
 * (op_list.h opm_bwd and opm_outer, co == 32, level 3): both are small matrix
 * products per (b, i), run as mma.sync m16n8k8 with TF32 operands and fp32
 * accumulation (cuda_mma.h). A bf16 or fp16 value is exact in TF32 (8 and 11
 * significant bits, TF32 has 11), so every product is exact and the sums are
 * fp32 sums in the MMAs' order: the FFMA kernels' result (cuda_opm.cu, kernel3)
 * up to the order and the tensor cores' truncation. The fp32 path keeps the
 * FFMA kernels (an fp32 operand is not exact in TF32).
 *
 * opm_bwd_mma_kernel: da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q]
 * + dop[b,j,i,q,p]). Block (i, b, chunk of 16 MT rows s), 8 warps; warp w
 * takes j = w, w + 8, ..., stages E1 = dop[i,j] ([p][q]), E2 = dop[j,i]
 * ([q][p]) and a[chunk, j, :] ([s][q]) widened in its own shared memory, and
 * adds A E1^T + A E2 into its [16 MT x 32] accumulators (MT x 4 fragments of
 * 16 x 8; K = 32 in four steps). The warps' sums are added in warp order:
 * deterministic. E2's pitch (40) puts the column reads of its fragments on
 * distinct banks; the row reads use pitch 36.
 *
 * opm_outer_mma_kernel: out[b,i,j,p,q] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q].
 * Block (j0 / 8, i, b), 8 warps, warp w computes the 32 x 32 tile of j = j0 +
 * w as [p][s] x [s][q] over chunks of 32 s staged in shared memory, then
 * writes it through shared memory as rows of 32 (4 elements a lane). */
#include "cuda_common.h"
#include "cuda_mma.h"

#define OM_WARPS 8
#define OM_LDR 36 /* row pitch: E1, a */
#define OM_LDC 40 /* column-read pitch: E2, the outer product's staging */

/* 32 x 32 elements from global (row pitch 32) to shared rows of pitch ld,
 * widened to fp32: 8 loads of 4 elements a lane */
template <class T>
__device__ __forceinline__ void om_tile(float *dst, int ld, const T *src, int lane)
{
#pragma unroll
    for (int m = 0; m < 8; ++m) {
        const int e = lane + TF_GROUP * m;
        *(float4 *)(dst + (e >> 3) * ld + (e & 7) * 4) = tf_cu_ld4(src + 4 * e);
    }
}

template <int MT, class T>
__global__ void __launch_bounds__(OM_WARPS *TF_GROUP)
opm_bwd_mma_kernel(T *__restrict__ da, const T *__restrict__ dop, const T *__restrict__ a, int S,
                   int N)
{
    constexpr int RS = 16 * MT; /* rows s per block */
    TF_SMEM(sm);
    const int warp = (int)threadIdx.x / TF_GROUP, lane = (int)threadIdx.x % TF_GROUP;
    const int g = lane >> 2, t = lane & 3;
    const int i = blockIdx.x, b = blockIdx.y, s0 = (int)blockIdx.z * RS;
    const int ns = min(RS, S - s0);
    float *E1 = sm + warp * (32 * OM_LDR + 32 * OM_LDC + RS * OM_LDR);
    float *E2 = E1 + 32 * OM_LDR, *As = E2 + 32 * OM_LDC;
    const long NC = (long)N * 32;
    const T *d = dop + (long)b * N * N * 1024;
    const T *ab = a + ((long)b * S + s0) * NC;
    float acc[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
    for (int j = warp; j < N; j += OM_WARPS) {
        om_tile(E1, OM_LDR, d + ((long)i * N + j) * 1024, lane);
        om_tile(E2, OM_LDC, d + ((long)j * N + i) * 1024, lane);
#pragma unroll
        for (int m = 0; m < RS / 4; ++m) { /* RS rows of 8 float4 */
            const int e = lane + TF_GROUP * m, r = e >> 3, c = (e & 7) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < ns) v = tf_cu_ld4(ab + (long)r * NC + (long)j * 32 + c);
            *(float4 *)(As + r * OM_LDR + c) = v;
        }
        tf_syncwarp();
#pragma unroll
        for (int q0 = 0; q0 < 32; q0 += 8) {
            uint32_t af[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const float *r0 = As + (16 * mt + g) * OM_LDR + q0 + t, *r8 = r0 + 8 * OM_LDR;
                af[mt][0] = mma_bits(r0[0]), af[mt][1] = mma_bits(r8[0]);
                af[mt][2] = mma_bits(r0[4]), af[mt][3] = mma_bits(r8[4]);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int p = 8 * nt + g;
                /* B[q][p] = E1[p][q] and = E2[q][p] */
                const uint32_t b1[2] = {mma_bits(E1[p * OM_LDR + q0 + t]),
                                        mma_bits(E1[p * OM_LDR + q0 + t + 4])};
                const uint32_t b2[2] = {mma_bits(E2[(q0 + t) * OM_LDC + p]),
                                        mma_bits(E2[(q0 + t + 4) * OM_LDC + p])};
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16888(acc[mt][nt], af[mt], b1);
                    mma_16888(acc[mt][nt], af[mt], b2);
                }
            }
        }
        tf_syncwarp();
    }
    __syncthreads(); /* every warp is done with its tiles: the area takes the sums */
    float *red = sm; /* [warp][RS][32] */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            float *o = red + (warp * RS + 16 * mt + g) * 32 + 8 * nt + 2 * t;
            o[0] = acc[mt][nt][0], o[1] = acc[mt][nt][1];
            o[8 * 32] = acc[mt][nt][2], o[8 * 32 + 1] = acc[mt][nt][3];
        }
    __syncthreads();
    const float inv = 1.0f / (float)S;
    for (int e = (int)threadIdx.x; e < ns * 32; e += OM_WARPS * TF_GROUP) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < OM_WARPS; ++w) sum += red[w * RS * 32 + e];
        const int sl = e >> 5, p = e & 31;
        da[(((long)b * S + s0 + sl) * N + i) * 32 + p] = sum * inv;
    }
}

#define OM_SC 32 /* s per staged chunk of the outer product */

template <class T>
__global__ void __launch_bounds__(OM_WARPS *TF_GROUP)
opm_outer_mma_kernel(T *__restrict__ out, const T *__restrict__ a, int S, int N)
{
    __shared__ __align__(16) float ai[OM_SC * OM_LDC];           /* [s][p] */
    __shared__ __align__(16) float aj[OM_WARPS][OM_SC * OM_LDC]; /* [s][q], then [p][q] */
    const int warp = (int)threadIdx.x / TF_GROUP, lane = (int)threadIdx.x % TF_GROUP;
    const int g = lane >> 2, t = lane & 3;
    const int i = blockIdx.y, b = blockIdx.z, j = (int)blockIdx.x * OM_WARPS + warp;
    const bool has_j = j < N; /* warp-uniform */
    const long NC = (long)N * 32;
    const T *ab = a + (long)b * S * NC;
    float *my = aj[warp];
    float acc[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
    for (int s0 = 0; s0 < S; s0 += OM_SC) {
        const int ns = min(OM_SC, S - s0);
        __syncthreads(); /* the last chunk's reads are done */
        { /* ai: 256 float4, one a thread */
            const int r = (int)threadIdx.x >> 3, c = ((int)threadIdx.x & 7) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < ns) v = tf_cu_ld4(ab + (long)(s0 + r) * NC + (long)i * 32 + c);
            *(float4 *)(ai + r * OM_LDC + c) = v;
        }
#pragma unroll
        for (int m = 0; m < 8; ++m) {
            const int e = lane + TF_GROUP * m, r = e >> 3, c = (e & 7) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (has_j && r < ns) v = tf_cu_ld4(ab + (long)(s0 + r) * NC + (long)j * 32 + c);
            *(float4 *)(my + r * OM_LDC + c) = v;
        }
        __syncthreads();
#pragma unroll
        for (int k0 = 0; k0 < OM_SC; k0 += 8) {
            if (k0 >= ns) break; /* block-uniform: the rest are zeros */
            uint32_t af[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) { /* A[p][s] = ai[s][p] */
                const float *c0 = ai + (k0 + t) * OM_LDC + 16 * mt + g, *c4 = c0 + 4 * OM_LDC;
                af[mt][0] = mma_bits(c0[0]), af[mt][1] = mma_bits(c0[8]);
                af[mt][2] = mma_bits(c4[0]), af[mt][3] = mma_bits(c4[8]);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const uint32_t bf[2] = {mma_bits(my[(k0 + t) * OM_LDC + 8 * nt + g]),
                                        mma_bits(my[(k0 + t + 4) * OM_LDC + 8 * nt + g])};
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) mma_16888(acc[mt][nt], af[mt], bf);
            }
        }
    }
    __syncthreads(); /* every warp's reads of ai are done; my area takes its tile */
    if (!has_j) return;
    const float inv = 1.0f / (float)S;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            float *o = my + (16 * mt + g) * OM_LDC + 8 * nt + 2 * t;
            o[0] = acc[mt][nt][0] * inv, o[1] = acc[mt][nt][1] * inv;
            o[8 * OM_LDC] = acc[mt][nt][2] * inv, o[8 * OM_LDC + 1] = acc[mt][nt][3] * inv;
        }
    tf_syncwarp();
    T *o = out + (((long)b * N + i) * N + j) * 1024;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
        const int e = lane + TF_GROUP * m;
        tf_cu_st4(o + 4 * e, *(const float4 *)(my + (e >> 3) * OM_LDC + (e & 7) * 4));
    }
}

/* The launches; the caller checked co == 32, 4-element alignment and B */
template <class T>
static void opm_bwd_mma(tf_backend *be, T *da, const T *dop, const T *a, int B, int S, int N)
{
    const int mt = S <= 16 ? 1 : 2, rs = 16 * mt;
    const size_t smem =
        sizeof(float) * OM_WARPS * (size_t)(32 * OM_LDR + 32 * OM_LDC + rs * OM_LDR);
    const dim3 grid((unsigned)N, (unsigned)B, (unsigned)((S + rs - 1) / rs));
    if (mt == 1)
        TF_LAUNCH_SMEM((opm_bwd_mma_kernel<1, T>), grid, OM_WARPS * TF_GROUP, smem, be, da, dop,
                       a, S, N);
    else
        TF_LAUNCH_SMEM((opm_bwd_mma_kernel<2, T>), grid, OM_WARPS * TF_GROUP, smem, be, da, dop,
                       a, S, N);
}

template <class T>
static void opm_outer_mma(tf_backend *be, T *out, const T *a, int B, int S, int N)
{
    const dim3 grid((unsigned)((N + OM_WARPS - 1) / OM_WARPS), (unsigned)N, (unsigned)B);
    TF_LAUNCH((opm_outer_mma_kernel<T>), grid, dim3(OM_WARPS * TF_GROUP), be->stream, out, a, S,
              N);
}

extern "C" void tf_cu_opm_bwd_mma_h(tf_backend *be, void *da, const void *dop, const void *a,
                                    int B, int S, int N, tf_dtype t)
{
    TF_CU_DISPATCH_HALF(t, T, opm_bwd_mma(be, (T *)da, (const T *)dop, (const T *)a, B, S, N));
}

extern "C" void tf_cu_opm_outer_mma_h(tf_backend *be, void *out, const void *a, int B, int S,
                                      int N, tf_dtype t)
{
    TF_CU_DISPATCH_HALF(t, T, opm_outer_mma(be, (T *)out, (const T *)a, B, S, N));
}
