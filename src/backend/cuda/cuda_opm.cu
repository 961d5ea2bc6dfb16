/* Outer product mean backward (op_list.h opm_bwd), level 3:
 *   da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p])
 * straight from dop [B,N,N,co,co], the gradient of the permuted outer product.
 * The composition it replaces permutes dop (a full pass over it) and runs two
 * skinny GEMMs (M = S) that each read it again, through cuBLAS' gemv-like
 * kernels; here dop is read twice in 4 KB tiles and
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

/* kernel2's body, any element type (cuda_half.h): the shared tiles hold fp32
 * values */
template <bool V4, class T>
__device__ __forceinline__ void opm_bwd_body2(T *da, const T *dop, const T *a, int S, int N,
                                              int co, int PC, int srows, int ep)
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
    const T *d = dop + (long)b * N * N * cc;
    const T *ab = a + ((long)b * S + s0) * NC;
    float acc[OPM_PER];
#pragma unroll
    for (int k = 0; k < OPM_PER; ++k) acc[k] = 0.f;
    for (int j = 0; j < N; ++j) {
        __syncthreads(); /* the last j's reads are done */
        const T *t1 = d + ((long)i * N + j) * cc, *t2 = d + ((long)j * N + i) * cc;
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

template <bool V4, class T>
__global__ void __launch_bounds__(OPM_THREADS)
opm_bwd_kernel2(T *da, const T *dop, const T *a, int S, int N, int co, int PC, int srows, int ep)
{
    opm_bwd_body2<V4>(da, dop, a, S, N, co, PC, srows, ep);
}

/* opm_bwd_kernel3, co == 32 with 16-byte aligned operands (the model's
 * outer_dim): block (i, b, chunk of 4 SPT rows s), 8 warps; warp w takes
 * j = w, w + 8, ..., staging in its own shared memory E1 = dop[i,j] ([p][q]),
 * E2 = dop[j,i] ([q][p]) and a[chunk, j, :], and lane (st, pt) adds, for its
 * SPT rows s = st + 4k and 4 columns p = 4 pt .. 4 pt + 3,
 *   sum_q a[s,q] E1[p][q]  and  sum_q a[s,q] E2[q][p],
 * reading every operand as a float4 (per 4 q: SPT + 8 loads for 32 SPT
 * FMAs; kernel2 runs two barriers and one float4 FMA group per j). Rows of pitch O3_LD: float4-aligned, and each 8-lane phase of a
 * load (4 st x 2 pt) touches distinct banks. The warps' sums are added in
 * warp order at the end: deterministic. */
#define O3_LD 36
#define O3_WARPS 8
template <int SPT, class T>
__global__ void __launch_bounds__(O3_WARPS * TF_GROUP)
opm_bwd_kernel3(T *__restrict__ da, const T *__restrict__ dop, const T *__restrict__ a, int S,
                int N)
{
    constexpr int RS = 4 * SPT; /* rows s per block */
    TF_SMEM(sm);
    const int warp = (int)threadIdx.x / TF_GROUP, lane = (int)threadIdx.x % TF_GROUP;
    const int i = blockIdx.x, b = blockIdx.y, s0 = (int)blockIdx.z * RS;
    const int ns = min(RS, S - s0), st = lane & 3, pt = lane >> 2;
    float *E1 = sm + warp * (64 + RS) * O3_LD, *E2 = E1 + 32 * O3_LD, *As = E2 + 32 * O3_LD;
    const long NC = (long)N * 32;
    const T *d = dop + (long)b * N * N * 1024;
    const T *ab = a + ((long)b * S + s0) * NC;
    float acc[SPT][4];
#pragma unroll
    for (int k = 0; k < SPT; ++k)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[k][e] = 0.f;
    for (int j = warp; j < N; j += O3_WARPS) {
        const T *t1 = d + ((long)i * N + j) * 1024, *t2 = d + ((long)j * N + i) * 1024;
#pragma unroll
        for (int m = 0; m < 8; ++m) { /* 256 float4 a tile: row e / 8, float4 e % 8 */
            const int e = lane + TF_GROUP * m, o = (e >> 3) * O3_LD + (e & 7) * 4;
            *(float4 *)(E1 + o) = tf_cu_ld4(t1 + 4 * e);
            *(float4 *)(E2 + o) = tf_cu_ld4(t2 + 4 * e);
        }
#pragma unroll
        for (int m = 0; m < SPT; ++m) {
            const int e = lane + TF_GROUP * m, r = e >> 3, c = (e & 7) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < ns) v = tf_cu_ld4(ab + (long)r * NC + (long)j * 32 + c);
            *(float4 *)(As + r * O3_LD + c) = v;
        }
        tf_syncwarp();
#pragma unroll 2
        for (int q = 0; q < 32; q += 4) {
            float4 av[SPT], e1[4], e2[4];
#pragma unroll
            for (int k = 0; k < SPT; ++k) av[k] = *(const float4 *)(As + (st + 4 * k) * O3_LD + q);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                e1[e] = *(const float4 *)(E1 + (4 * pt + e) * O3_LD + q);
                e2[e] = *(const float4 *)(E2 + (q + e) * O3_LD + 4 * pt);
            }
#pragma unroll
            for (int k = 0; k < SPT; ++k) {
                const float4 x = av[k];
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[k][e] += x.x * e1[e].x + x.y * e1[e].y + x.z * e1[e].z + x.w * e1[e].w;
                const float xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    acc[k][0] += xs[e] * e2[e].x;
                    acc[k][1] += xs[e] * e2[e].y;
                    acc[k][2] += xs[e] * e2[e].z;
                    acc[k][3] += xs[e] * e2[e].w;
                }
            }
        }
        tf_syncwarp();
    }
    __syncthreads(); /* every warp is done with its tiles: the area takes the sums */
    float *red = sm; /* [warp][RS][32] */
#pragma unroll
    for (int k = 0; k < SPT; ++k)
        *(float4 *)(red + (warp * RS + st + 4 * k) * 32 + 4 * pt) =
            make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
    __syncthreads();
    const float inv = 1.0f / (float)S;
    for (int e = (int)threadIdx.x; e < ns * 32; e += O3_WARPS * TF_GROUP) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < O3_WARPS; ++w) sum += red[w * RS * 32 + e];
        const int sl = e >> 5, p = e & 31;
        da[(((long)b * S + s0 + sl) * N + i) * 32 + p] = sum * inv;
    }
}

/* kernel2's geometry (every element type) */
typedef struct {
    int PC, srows, ep;
    bool v4;
    size_t smem;
    dim3 grid;
} opm2_geom;
static opm2_geom opm2_plan(int B, int S, int N, int co)
{
    opm2_geom g;
    g.PC = co < OPM_PC ? co : OPM_PC;
    g.srows = OPM_THREADS / g.PC * OPM_PER;
    g.v4 = co % 4 == 0;
    g.ep = g.v4 ? co + 4 : co + 1; /* E and a rows in shared memory */
    const long chunks = (long)((co + g.PC - 1) / g.PC) * ((S + g.srows - 1) / g.srows);
    g.smem = sizeof(float) * (size_t)(g.PC + g.srows) * (size_t)g.ep;
    g.grid = dim3((unsigned)N, (unsigned)B, (unsigned)chunks);
    if (g.smem > (size_t)227 * 1024) /* the H100/H200 opt-in limit: co above ~880 */
        tf_cuda_fail("opm_bwd_kernel2", "outer_dim too large for shared memory", __FILE__,
                     __LINE__);
    return g;
}
template <class T>
static void opm_bwd2(tf_backend *be, T *da, const T *dop, const T *a, int B, int S, int N, int co)
{
    const opm2_geom g = opm2_plan(B, S, N, co);
    if (g.v4)
        TF_LAUNCH_SMEM((opm_bwd_kernel2<true, T>), g.grid, OPM_THREADS, g.smem, be, da, dop, a, S,
                       N, co, g.PC, g.srows, g.ep);
    else
        TF_LAUNCH_SMEM((opm_bwd_kernel2<false, T>), g.grid, OPM_THREADS, g.smem, be, da, dop, a,
                       S, N, co, g.PC, g.srows, g.ep);
}

/* kernel3's conditions: co == 32, operands aligned for 4-element loads */
template <class T> static bool opm_k3_fits(const void *x, const void *y, const void *z, int B, int co)
{
    const unsigned al = 4 * (unsigned)sizeof(T);
    return co == 32 && tf_cu_aligned(x, al) && tf_cu_aligned(y, al) && tf_cu_aligned(z, al) &&
           B <= 65535;
}
template <class T>
static void opm_bwd(tf_backend *be, T *da, const T *dop, const T *a, int B, int S, int N, int co)
{
    if (B <= 0 || S <= 0 || N <= 0 || co <= 0) return;
    if (opm_k3_fits<T>(da, dop, a, B, co)) {
        const int spt = S <= 16 ? 4 : 8, rs = 4 * spt;
        const size_t smem = sizeof(float) * O3_WARPS * (size_t)(64 + rs) * O3_LD;
        const dim3 grid((unsigned)N, (unsigned)B, (unsigned)((S + rs - 1) / rs));
        if (spt == 4)
            TF_LAUNCH_SMEM((opm_bwd_kernel3<4, T>), grid, O3_WARPS * TF_GROUP, smem, be, da, dop,
                           a, S, N);
        else
            TF_LAUNCH_SMEM((opm_bwd_kernel3<8, T>), grid, O3_WARPS * TF_GROUP, smem, be, da, dop,
                           a, S, N);
        return;
    }
    opm_bwd2(be, da, dop, a, B, S, N, co);
}
extern "C" void tf_cu_opm_bwd(tf_backend *be, float *da, const float *dop, const float *a, int B,
                              int S, int N, int co)
{
    opm_bwd(be, da, dop, a, B, S, N, co);
}

/* ---- the permuted product (op_list.h opm_outer) ----
 * opm_outer_kernel3, co == 32 with 16-byte aligned operands: block (j0 / 8, i,
 * b) of 256 threads writes outer_p[b, i, j0..j0+7, :, :]; thread (jg, pg, qg)
 * keeps the 4 x 4 tile p = 4 pg.., q = 4 qg.. of j = j0 + 2 jg and j0 + 2 jg
 * + 1 in registers while s runs over chunks of 32 staged in shared memory
 * (a[b, s, i, :] and a[b, s, j0..j0+7, :]), in index order: per s one float4
 * of a[s, i, p..] and two of a[s, j, q..] for 32 FMAs. The products are FFMA
 * work (a first version with one float4 of outputs per j issued 9 shared
 * loads per 32 FMAs and was several times slower: bench/RESULTS.md). Blocks in flight write neighbouring 32 KB stretches
 * (j the fastest grid axis). Where the GEMM wrote [B, N, co, N, co] and a
 * permute read and wrote it again, outer_p is written once.
 * opm_outer_kernel1: any co or alignment, an output per thread. */
#define OO_JT 8
#define OO_SC 32

template <class T>
__global__ void __launch_bounds__(256)
opm_outer_kernel3(T *__restrict__ out, const T *__restrict__ a, int S, int N)
{
    __shared__ __align__(16) float ai[OO_SC][32];
    __shared__ __align__(16) float aj[OO_JT][OO_SC][32];
    const int i = blockIdx.y, b = blockIdx.z, t = (int)threadIdx.x;
    const int qg = t & 7, pg = (t >> 3) & 7, jg = t >> 6; /* a warp: 8 qg x 4 pg */
    const long NC = (long)N * 32;
    const T *ab = a + (long)b * S * NC;
    const float inv = 1.0f / (float)S;
    const int j0 = (int)blockIdx.x * OO_JT, nj = min(OO_JT, N - j0);
    float acc[2][4][4];
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
            for (int f = 0; f < 4; ++f) acc[u][e][f] = 0.f;
    for (int s0 = 0; s0 < S; s0 += OO_SC) {
        const int ns = min(OO_SC, S - s0);
        __syncthreads(); /* the last chunk's reads are done */
        {
            const int r = t >> 3, c = (t & 7) * 4; /* 256 float4: ai's 32 rows */
            const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
            *(float4 *)&ai[r][c] =
                r < ns ? tf_cu_ld4(ab + (long)(s0 + r) * NC + (long)i * 32 + c) : z;
#pragma unroll
            for (int m = 0; m < OO_JT; ++m)
                *(float4 *)&aj[m][r][c] =
                    r < ns && m < nj
                        ? tf_cu_ld4(ab + (long)(s0 + r) * NC + (long)(j0 + m) * 32 + c)
                        : z;
        }
        __syncthreads();
        for (int s = 0; s < ns; ++s) {
            const float4 x = *(const float4 *)&ai[s][4 * pg];
            const float xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const float4 y = *(const float4 *)&aj[2 * jg + u][s][4 * qg];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    acc[u][e][0] += xs[e] * y.x;
                    acc[u][e][1] += xs[e] * y.y;
                    acc[u][e][2] += xs[e] * y.z;
                    acc[u][e][3] += xs[e] * y.w;
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int jj = 2 * jg + u;
        if (jj >= nj) continue;
        T *o = out + ((((long)b * N + i) * N + j0 + jj) * 32 + 4 * pg) * 32 + 4 * qg;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            tf_cu_st4(o + e * 32, make_float4(acc[u][e][0] * inv, acc[u][e][1] * inv,
                                              acc[u][e][2] * inv, acc[u][e][3] * inv));
    }
}

template <class T>
__device__ __forceinline__ void opm_outer_body1(T *out, const T *a, int B, int S, int N, int co)
{
    const long cc = (long)co * co, total = (long)B * N * N * cc, NC = (long)N * co;
    const float inv = 1.0f / (float)S;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long)gridDim.x * blockDim.x) {
        const long pq = e % cc, bij = e / cc;
        const int p = (int)(pq / co), q = (int)(pq % co);
        const long j = bij % N, i = (bij / N) % N, b = bij / ((long)N * N);
        const T *ab = a + b * S * NC;
        float acc = 0.f;
        for (int s = 0; s < S; ++s) acc += ab[s * NC + i * co + p] * ab[s * NC + j * co + q];
        out[e] = acc * inv;
    }
}
template <class T> __global__ void opm_outer_kernel1(T *out, const T *a, int B, int S, int N, int co)
{
    opm_outer_body1(out, a, B, S, N, co);
}

template <class T>
static void opm_outer(tf_backend *be, T *outer_p, const T *a, int B, int S, int N, int co)
{
    if (B <= 0 || S <= 0 || N <= 0 || co <= 0) return;
    if (opm_k3_fits<T>(outer_p, a, a, B, co)) {
        const dim3 grid((unsigned)((N + OO_JT - 1) / OO_JT), (unsigned)N, (unsigned)B);
        TF_LAUNCH(opm_outer_kernel3<T>, grid, dim3(256), be->stream, outer_p, a, S, N);
        return;
    }
    const long total = (long)B * N * N * co * co;
    TF_LAUNCH(opm_outer_kernel1<T>, dim3(tf_cu_grid(be, total, 256)), dim3(256), be->stream,
              outer_p, a, B, S, N, co);
}
extern "C" void tf_cu_opm_outer(tf_backend *be, float *outer_p, const float *a, int B, int S,
                                int N, int co)
{
    opm_outer(be, outer_p, a, B, S, N, co);
}

/* half types: on mma.sync where the plan says so (cuda_opm_mma.cu), else the
 * same kernels as fp32 with loads widened to fp32 and every sum in fp32 as
 * fp32's; each output rounded once */
extern "C" void tf_cu_opm_bwd_h(tf_backend *be, void *da, const void *dop, const void *a, int B,
                                int S, int N, int co, tf_dtype t)
{
    if (B <= 0 || S <= 0 || N <= 0 || co <= 0) return;
    if (tf_gpu_opm_on_mma(&be->plan, &be->caps, co, 1) &&
        opm_k3_fits<tf_cu_bf16>(da, dop, a, B, co)) { /* 2-byte elements either way */
        tf_cu_opm_bwd_mma_h(be, da, dop, a, B, S, N, t);
        return;
    }
    TF_CU_DISPATCH_HALF(t, T, opm_bwd(be, (T *)da, (const T *)dop, (const T *)a, B, S, N, co));
}

extern "C" void tf_cu_opm_outer_h(tf_backend *be, void *outer_p, const void *a, int B, int S,
                                  int N, int co, tf_dtype t)
{
    if (B <= 0 || S <= 0 || N <= 0 || co <= 0) return;
    if (tf_gpu_opm_on_mma(&be->plan, &be->caps, co, 1) &&
        opm_k3_fits<tf_cu_bf16>(outer_p, a, a, B, co)) {
        tf_cu_opm_outer_mma_h(be, outer_p, a, B, S, N, t);
        return;
    }
    TF_CU_DISPATCH_HALF(t, T, opm_outer(be, (T *)outer_p, (const T *)a, B, S, N, co));
}
