/* Outer product mean backward (ops.h opm_bwd), level 3:
 *   da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p])
 * straight from dop [B,N,N,co,co], the gradient of the permuted outer product.
 * The composition it replaces permutes dop (a full pass over it) and runs two
 * skinny GEMMs (M = S) that each read it again, through cuBLAS' gemv-like
 * kernels (RESULTS.md entry 12); here dop is read twice in 4 KB tiles and
 * nothing is written but da.
 *
 * opm_bwd_kernel2: block (i, b, chunk) of OPM_THREADS threads owns the outputs
 * da[b, s, i, p] for p in [p0, p0 + PC) (PC = min(co, 32)) and s in the
 * chunk's rows; thread t has p = p0 + t % PC and s = s0 + t / PC + G * k for
 * k < OPM_PER (G = OPM_THREADS / PC groups). Per j: the co x PC slice of
 * E = dop[i,j] + dop[j,i]^T and the chunk's rows of a[:, j, :] go to shared
 * memory, then each thread adds sum_q a[s,j,q] E[p,q] for its outputs
 * (E rows padded to a multiple of 4 plus 4 floats: float4 reads without bank
 * conflicts; a's rows are read as float4 broadcasts). Sums run over j, then q
 * in order: deterministic. */
#include "cuda_common.h"

#define OPM_THREADS 256
#define OPM_PER 4 /* s rows per thread */
#define OPM_PC 32 /* p per block */

template <bool V4>
__global__ void __launch_bounds__(OPM_THREADS)
opm_bwd_kernel2(float *da, const float *dop, const float *a, int S, int N, int co, int PC,
                int srows, int ep)
{
    TF_SMEM(sm);
    float *Es = sm;                 /* [PC][ep] */
    float *As = sm + PC * ep;       /* [srows][ep] */
    const int i = blockIdx.x, b = blockIdx.y;
    const int pchunks = (co + PC - 1) / PC;
    const int p0 = (int)(blockIdx.z % pchunks) * PC, s0 = (int)(blockIdx.z / pchunks) * srows;
    const int np = min(PC, co - p0), ns = min(srows, S - s0);
    const int G = OPM_THREADS / PC, t = (int)threadIdx.x;
    const int pl = t % PC, sg = t / PC;
    const bool active = sg < G && pl < np;
    const long cc = (long)co * co, NC = (long)N * co;
    const float *d = dop + (long)b * N * N * cc;
    const float *ab = a + ((long)b * S + s0) * NC;
    float acc[OPM_PER];
#pragma unroll
    for (int k = 0; k < OPM_PER; ++k) acc[k] = 0.f;
    for (int j = 0; j < N; ++j) {
        __syncthreads(); /* the last j's reads are done */
        const float *t1 = d + ((long)i * N + j) * cc, *t2 = d + ((long)j * N + i) * cc;
        for (int e = t; e < np * co; e += OPM_THREADS) {
            const int r = e / co, q = e - r * co; /* t1 row p0 + r read along q */
            Es[r * ep + q] = t1[(long)(p0 + r) * co + q] + t2[(long)q * co + p0 + r];
        }
        for (int e = t; e < ns * co; e += OPM_THREADS) {
            const int s = e / co, q = e - s * co;
            As[s * ep + q] = ab[(long)s * NC + (long)j * co + q];
        }
        __syncthreads();
        if (!active) continue;
        const float *er = Es + pl * ep;
        if (V4) {
            for (int q = 0; q < co; q += 4) {
                const float4 ev = *(const float4 *)(er + q);
#pragma unroll
                for (int k = 0; k < OPM_PER; ++k) {
                    const int s = sg + G * k;
                    if (s < ns) {
                        const float4 av = *(const float4 *)(As + s * ep + q);
                        acc[k] += av.x * ev.x + av.y * ev.y + av.z * ev.z + av.w * ev.w;
                    }
                }
            }
        } else {
            for (int q = 0; q < co; ++q) {
                const float ev = er[q];
#pragma unroll
                for (int k = 0; k < OPM_PER; ++k) {
                    const int s = sg + G * k;
                    if (s < ns) acc[k] += As[s * ep + q] * ev;
                }
            }
        }
    }
    if (!active) return;
    const float inv = 1.0f / (float)S;
#pragma unroll
    for (int k = 0; k < OPM_PER; ++k) {
        const int s = sg + G * k;
        if (s < ns) da[(((long)b * S + s0 + s) * N + i) * co + p0 + pl] = acc[k] * inv;
    }
}

extern "C" void tf_cu_opm_bwd(tf_backend *be, float *da, const float *dop, const float *a, int B,
                              int S, int N, int co)
{
    if (B <= 0 || S <= 0 || N <= 0 || co <= 0) return;
    const int PC = co < OPM_PC ? co : OPM_PC;
    const int srows = OPM_THREADS / PC * OPM_PER;
    const bool v4 = co % 4 == 0;
    const int ep = v4 ? co + 4 : co + 1; /* E and a rows in shared memory */
    const long chunks = (long)((co + PC - 1) / PC) * ((S + srows - 1) / srows);
    const size_t smem = sizeof(float) * (size_t)(PC + srows) * (size_t)ep;
    const dim3 grid((unsigned)N, (unsigned)B, (unsigned)chunks);
    if (smem > (size_t)227 * 1024) /* the H100/H200 opt-in limit: co above ~880 */
        tf_cuda_fail("opm_bwd_kernel2", "outer_dim too large for shared memory", __FILE__,
                     __LINE__);
    if (v4)
        TF_LAUNCH_SMEM(opm_bwd_kernel2<true>, grid, OPM_THREADS, smem, be, da, dop, a, S, N, co, PC,
                       srows, ep);
    else
        TF_LAUNCH_SMEM(opm_bwd_kernel2<false>, grid, OPM_THREADS, smem, be, da, dop, a, S, N, co,
                       PC, srows, ep);
}
