/* Permute, kernel2 (level 3), for the merged permutes of cuda_permute.h.
 *
 * Preserved inner run (the innermost input axis stays innermost, a run of V
 * contiguous floats moves as a whole), moved in float4 units when V % 4 == 0
 * and both pointers are 16-byte aligned:
 *   permute_rows_kernel2_{f4,f1}: out [P, S, R, V] <- in [P, R, S, V], a block
 *     per 4 output rows (p, s): R*V contiguous floats written per row, R runs
 *     of V floats read, 4 loads in flight per thread. The outer product mean's [B,N,co,N,co] -> [B,N,N,co,co] (co = 32:
 *     8 float4s per run, every 32-byte sector fully used) and the attention
 *     head permutes of v1 have this form.
 *   permute_gather_kernel2_f4: any other permute with an inner run, walking
 *     the output in float4s and gathering from the input.
 * Transpose around the input-contiguous axis (the triangle multiplication's
 * [B,N,N,C] <-> [B,C,N,N] and its fused [B,N,N,2,C] <-> [2,B,C,N,N]):
 * permute_transpose_kernel2 stages 64x64 tiles in
 * shared memory with 65-float rows (conflict-free column reads), 256 threads
 * moving 16 floats each, so every thread has 16 loads in flight.
 * Pure data movement (or one add when accumulating): bit-exact. */
#include <limits.h>

#include "cuda_permute.h"

#define PR_THREADS 256
#define PR_ROWS 4 /* output rows per block */
#define T2_TILE 64
#define T2_ROWS 4 /* blockDim (64, 4): 16 rows of the tile per thread */

__device__ __forceinline__ float tf_vadd(float a, float b) { return a + b; }
__device__ __forceinline__ float4 tf_vadd(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* ---- out [P, S, R, W] <- in [P, R, S, W] (W in units of T) ----
 * Block b writes the PR_ROWS output rows b*PR_ROWS.. (row = p*S + s, each
 * R*W contiguous units); every thread loads its unit of all rows before
 * storing, so PR_ROWS loads are in flight per thread. */
template <class T>
__device__ __forceinline__ void perm_rows_body(T *__restrict__ out, const T *__restrict__ in,
                                               int S, int R, int W, long nrows, int accumulate)
{
    const int n = R * W;
    const long row0 = (long)blockIdx.x * PR_ROWS;
    const T *src[PR_ROWS]; /* in[p][0][s][0] of each row */
#pragma unroll
    for (int k = 0; k < PR_ROWS; ++k) {
        const long row = row0 + k < nrows ? row0 + k : nrows - 1;
        const long p = row / S, s = row - p * S;
        src[k] = in + (p * R * S + s) * W;
    }
    const long rs = (long)S * W; /* input stride of r */
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int r = t / W, w = t - r * W;
        T v[PR_ROWS];
#pragma unroll
        for (int k = 0; k < PR_ROWS; ++k) v[k] = src[k][r * rs + w];
#pragma unroll
        for (int k = 0; k < PR_ROWS; ++k) {
            if (row0 + k < nrows) {
                T *o = out + (row0 + k) * n + t;
                *o = accumulate ? tf_vadd(*o, v[k]) : v[k];
            }
        }
    }
}
extern "C" __global__ void __launch_bounds__(PR_THREADS)
permute_rows_kernel2_f4(float4 *out, const float4 *in, int S, int R, int W, long nrows,
                        int accumulate)
{
    perm_rows_body(out, in, S, R, W, nrows, accumulate);
}
extern "C" __global__ void __launch_bounds__(PR_THREADS)
permute_rows_kernel2_f1(float *out, const float *in, int S, int R, int W, long nrows,
                        int accumulate)
{
    perm_rows_body(out, in, S, R, W, nrows, accumulate);
}

/* ---- generic gather in float4 units (p in units: last axis istride 1) ---- */
extern "C" __global__ void permute_gather_kernel2_f4(float4 *out, const float4 *in, tf_cu_perm p,
                                                     long total, int accumulate)
{
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        long rem = i, off = 0;
#pragma unroll
        for (int a = 5; a >= 0; --a) { /* constant indices: p stays in parameter space */
            if (a < p.rank) {
                const long c = rem % p.odims[a];
                rem /= p.odims[a];
                off += c * p.istride[a];
            }
        }
        out[i] = accumulate ? tf_vadd(out[i], in[off]) : in[off];
    }
}

/* ---- transpose around the input-contiguous axis s ----
 * out [P1, P2, S, R] (contiguous) <- in[p1*sp1 + p2*sp2 + s + roff(r)], where
 * r = h*C + c (R = H*C) reads roff = h*sh + c*sc: the plain batched transpose
 * [P, R, S] -> [P, S, R] (H 1) and the triangle multiplication's fused
 * [B,N,N,2,C] <-> [2,B,C,N,N]. grid (ceil(S/64), ceil(R/64), P1*P2) */
typedef struct {
    int S, R, C, P2;
    long sp1, sp2, sh, sc;
} tp_args;

extern "C" __global__ void __launch_bounds__(T2_TILE *T2_ROWS)
permute_transpose_kernel2(float *out, const float *in, tp_args t, int accumulate)
{
    __shared__ float tile[T2_TILE][T2_TILE + 1];
    const int p1 = blockIdx.z / t.P2, p2 = blockIdx.z - p1 * t.P2;
    const int s0 = blockIdx.x * T2_TILE, r0 = blockIdx.y * T2_TILE;
    const int tx = threadIdx.x, ty = threadIdx.y, S = t.S, R = t.R;
    const float *ip = in + p1 * t.sp1 + p2 * t.sp2;
    float *op = out + (long)blockIdx.z * R * S;
    /* r = h * C + c, stepped by T2_ROWS (C >= T2_ROWS: at most one carry per
     * step; one division per thread, not per element) */
    int h = (r0 + ty) / t.C, c = r0 + ty - h * t.C;
#pragma unroll
    for (int k = 0; k < T2_TILE / T2_ROWS; ++k) {
        const int r = r0 + ty + T2_ROWS * k, s = s0 + tx;
        if (r < R && s < S) tile[ty + T2_ROWS * k][tx] = ip[h * t.sh + c * t.sc + s];
        c += T2_ROWS;
        if (c >= t.C) c -= t.C, ++h;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < T2_TILE / T2_ROWS; ++k) {
        const int s = s0 + ty + T2_ROWS * k, r = r0 + tx;
        if (r < R && s < S) {
            float *q = op + (long)s * R + r;
            const float v = tile[tx][ty + T2_ROWS * k];
            *q = accumulate ? *q + v : v;
        }
    }
}

extern "C" int tf_cu_permute2(tf_backend *be, float *out, const float *in, const tf_cu_perm *p,
                              long total, int accumulate)
{
    const int n = p->rank;
    if (n < 2) return 0;
    if (p->istride[n - 1] == 1) { /* a preserved inner run of V floats */
        const long V = p->odims[n - 1];
        const int v4 = V % 4 == 0 && tf_cu_aligned(out, 16) && tf_cu_aligned(in, 16);
        const long W = v4 ? V / 4 : V;
        if (n == 3 || n == 4) { /* out [P, S, R, V] <- in [P, R, S, V]? */
            const int k = n - 3;
            const long S = p->odims[k], R = p->odims[k + 1], P = n == 4 ? p->odims[0] : 1;
            if (p->istride[k] == V && p->istride[k + 1] == S * V &&
                (n == 3 || p->istride[0] == R * S * V) && R * W >= 64 && R * W <= INT_MAX &&
                S <= INT_MAX && P * S <= INT_MAX) {
                const long nrow = R * W, nrows = P * S;
                const int threads = nrow >= PR_THREADS ? PR_THREADS : (int)((nrow + 31) / 32 * 32);
                const dim3 grid((unsigned)((nrows + PR_ROWS - 1) / PR_ROWS)), block(threads);
                if (v4)
                    TF_LAUNCH(permute_rows_kernel2_f4, grid, block, be->stream, (float4 *)out,
                              (const float4 *)in, (int)S, (int)R, (int)W, nrows, accumulate);
                else
                    TF_LAUNCH(permute_rows_kernel2_f1, grid, block, be->stream, out, in, (int)S,
                              (int)R, (int)W, nrows, accumulate);
                return 1;
            }
        }
        if (!v4) return 0;
        tf_cu_perm q = *p; /* the same permute in float4 units */
        q.odims[n - 1] = W;
        for (int a = 0; a < n - 1; ++a) q.istride[a] /= 4; /* multiples of V */
        const long units = total / 4;
        TF_LAUNCH(permute_gather_kernel2_f4, dim3(tf_cu_grid(be, units, PR_THREADS)),
                  dim3(PR_THREADS), be->stream, (float4 *)out, (const float4 *)in, q, units,
                  accumulate);
        return 1;
    }
    /* transpose: output axes (P1, P2, S, H, C) with S read contiguously, at
     * most two axes before S and two after it */
    int a = 0;
    while (a < n - 1 && p->istride[a] != 1) ++a;
    const int after = n - 1 - a;
    if (a > 2 || after < 1 || after > 2) return 0;
    tp_args t;
    const long S = p->odims[a], H = after == 2 ? p->odims[a + 1] : 1, C = p->odims[n - 1];
    const long P1 = a == 2 ? p->odims[0] : 1, P2 = a >= 1 ? p->odims[a - 1] : 1;
    t.sp1 = a == 2 ? p->istride[0] : 0;
    t.sp2 = a >= 1 ? p->istride[a - 1] : 0;
    t.sh = after == 2 ? p->istride[a + 1] : 0;
    t.sc = p->istride[n - 1];
    /* beyond the plain batched transpose, only where 64 x 64 tiles are mostly
     * full (a thin side leaves most of each block idle: kernel1 then) */
    const int plain = after == 1 && t.sc == S && (a == 0 || (a == 1 && t.sp2 == S * C));
    if (!plain && (S < 16 || H * C < 16)) return 0;
    if (after == 2 && C < T2_ROWS) return 0; /* the kernel's carry needs C >= T2_ROWS */
    if (S > INT_MAX || H * C > INT_MAX || P1 * P2 > 65535 ||
        (H * C + T2_TILE - 1) / T2_TILE > 65535)
        return 0;
    t.S = (int)S, t.R = (int)(H * C), t.C = (int)C, t.P2 = (int)P2;
    const dim3 grid((unsigned)((S + T2_TILE - 1) / T2_TILE),
                    (unsigned)((H * C + T2_TILE - 1) / T2_TILE), (unsigned)(P1 * P2));
    TF_LAUNCH(permute_transpose_kernel2, grid, dim3(T2_TILE, T2_ROWS), be->stream, out, in, t,
              accumulate);
    return 1;
}
