/* Gated L|R to channel-major and back (op_list.h gate_cmajor_fwd/_bwd): the
 * triangle multiplication's gating fused with the transpose before its
 * channel-major product, one pass each way instead of a gating pass and a
 * permute pass over [rows, 2C] (and the buffer between them).
 *
 * Both stage a 64 x 64 tile of (rows r, channels c) of one half s through
 * shared memory with 65-float rows (conflict-free column reads), as
 * permute_transpose_kernel2 does: the row-major side ([rows, ld], c
 * contiguous) is read or written along c, the channel-major side ([2, B, C,
 * inner], r = b*inner + p, p contiguous) along r; a thread's r is the same
 * for all its elements there, so its (b, p) is one division. 256 threads,
 * 16 elements each; a full tile issues all its row-major loads before using
 * any (the guarded loop of the edge tiles did not keep them in flight and
 * measured slower: bench/RESULTS.md). The gating
 * arithmetic is gate_fwd/_bwd's (tf_sigmoidf, tf_gate_bwd_one in
 * cuda_common.h), so the results are bit for bit those of the gating op
 * followed by the permute. For the half types a full tile moves pairs
 * (pair: inner, ld and C even, the pointers 4-byte aligned): a warp's lanes
 * take 2 adjacent elements each, 128 bytes a warp access instead of 64. */
#include "cuda_common.h"

#define GC_TILE 64
#define GC_ROWS 4 /* blockDim (64, 4) */

/* element (s, b, c = 0, p) of the channel-major [2, B, C, inner] side for row
 * r = b*inner + p; channel c is c * inner further */
__device__ __forceinline__ long gc_cmajor_at(int s, long r, long rows, long inner, int C)
{
    const long b = r / inner;
    return ((long)s * (rows / inner) + b) * C * inner + (r - b * inner);
}

#define GC_KR (GC_TILE / GC_ROWS) /* elements a thread per tile */
#define GC_PX (GC_TILE / 2)            /* pair lanes along a tile side */
#define GC_PK (GC_TILE * GC_ROWS / GC_PX) /* pair rows a thread's 8 steps cover */


/* a full tile's a and g (rows r0 + ty + GC_ROWS k, one column; i0 the first's
 * index): every load issued before any value is used */
template <class T>
__device__ __forceinline__ void gc_load_full(float (&av)[GC_KR], float (&gv)[GC_KR], const T *a,
                                             const T *g, long i0, long ld)
{
#pragma unroll
    for (int k = 0; k < GC_KR; ++k)
        av[k] = a[i0 + k * GC_ROWS * ld], gv[k] = g[i0 + k * GC_ROWS * ld];
}

/* bodies for T = float (the fp32 kernels) and the half types (cuda_half.h):
 * the tile holds fp32 values, rounded once at the store */
/* grid (ceil(C/64), ceil(rows/64), 2) */
template <class T>
__device__ __forceinline__ void gate_cmajor_fwd_body(T *lr_t, const T *a, const T *g, long ld,
                                                     long rows, long inner, int C, int pair)
{
    __shared__ float tile[GC_TILE][GC_TILE + 1]; /* [r][c] */
    const int s = blockIdx.z, tx = threadIdx.x, ty = threadIdx.y;
    /* one grid axis for both tile indices, c fastest (as an x, y grid
     * would run them): rows / 64 tiles pass 65535 at B1 N2048 */
    const int ntc = (C + GC_TILE - 1) / GC_TILE;
    const int c0 = (int)(blockIdx.x % (unsigned)ntc) * GC_TILE;
    const long r0 = (long)(blockIdx.x / (unsigned)ntc) * GC_TILE;
    const bool full = r0 + GC_TILE <= rows && c0 + GC_TILE <= C;
    if constexpr (sizeof(T) == 2) {
        if (pair && full) { /* lane px: elements 2 px, 2 px + 1; py the row (column) */
            const int t = ty * GC_TILE + tx, px = t % GC_PX, py = t / GC_PX;
            float2 av[GC_PK], gv[GC_PK];
#pragma unroll
            for (int k = 0; k < GC_PK; ++k) { /* read along c, every load first */
                const long i = (r0 + py + 8 * k) * ld + (long)s * C + c0 + 2 * px;
                av[k] = tf_cu_ld2(a + i), gv[k] = tf_cu_ld2(g + i);
            }
#pragma unroll
            for (int k = 0; k < GC_PK; ++k) {
                tile[py + 8 * k][2 * px] = av[k].x * tf_sigmoidf(gv[k].x);
                tile[py + 8 * k][2 * px + 1] = av[k].y * tf_sigmoidf(gv[k].y);
            }
            __syncthreads();
            const long r = r0 + 2 * px; /* r and r + 1: one b (inner even) */
            T *o = lr_t + gc_cmajor_at(s, r, rows, inner, C);
#pragma unroll
            for (int k = 0; k < GC_PK; ++k) { /* write along r */
                const int c = py + 8 * k;
                tf_cu_st2(o + (long)(c0 + c) * inner, tile[2 * px][c], tile[2 * px + 1][c]);
            }
            return;
        }
    }
    if (full) {
        float av[GC_KR], gv[GC_KR];
        gc_load_full(av, gv, a, g, (r0 + ty) * ld + (long)s * C + c0 + tx, ld);
#pragma unroll
        for (int k = 0; k < GC_KR; ++k) tile[ty + GC_ROWS * k][tx] = av[k] * tf_sigmoidf(gv[k]);
    } else {
#pragma unroll
        for (int k = 0; k < GC_KR; ++k) { /* read along c */
            const long r = r0 + ty + GC_ROWS * k;
            const int c = c0 + tx;
            if (r < rows && c < C) {
                const long i = r * ld + (long)s * C + c;
                tile[ty + GC_ROWS * k][tx] = a[i] * tf_sigmoidf(g[i]);
            }
        }
    }
    __syncthreads();
    const long r = r0 + tx;
    T *o = lr_t + gc_cmajor_at(s, r, rows, inner, C);
#pragma unroll
    for (int k = 0; k < GC_TILE / GC_ROWS; ++k) { /* write along r */
        const int c = c0 + ty + GC_ROWS * k;
        if (r < rows && c < C) o[(long)c * inner] = tile[tx][ty + GC_ROWS * k];
    }
}

/* one element's gradients into T */
template <class T> __device__ __forceinline__ void gc_bwd_one(T *da, T *dg, float dy, float a, float g)
{
    float r, s;
    tf_gate_bwd_one(&r, &s, dy, a, g);
    *da = r;
    *dg = s;
}

template <class T>
__device__ __forceinline__ void gate_cmajor_bwd_body(T *da, T *dg, const T *dlr_t, const T *a,
                                                     const T *g, long ld, long rows, long inner,
                                                     int C, int pair)
{
    __shared__ float tile[GC_TILE][GC_TILE + 1]; /* [c][r] */
    const int s = blockIdx.z, tx = threadIdx.x, ty = threadIdx.y;
    /* one grid axis for both tile indices, c fastest (as an x, y grid
     * would run them): rows / 64 tiles pass 65535 at B1 N2048 */
    const int ntc = (C + GC_TILE - 1) / GC_TILE;
    const int c0 = (int)(blockIdx.x % (unsigned)ntc) * GC_TILE;
    const long r0 = (long)(blockIdx.x / (unsigned)ntc) * GC_TILE;
    const bool full = r0 + GC_TILE <= rows && c0 + GC_TILE <= C;
    if constexpr (sizeof(T) == 2) {
        if (pair && full) { /* lane px: elements 2 px, 2 px + 1; py the row (column) */
            const int t = ty * GC_TILE + tx, px = t % GC_PX, py = t / GC_PX;
            const long r = r0 + 2 * px; /* r and r + 1: one b (inner even) */
            const T *in = dlr_t + gc_cmajor_at(s, r, rows, inner, C);
            float2 dv[GC_PK], av[GC_PK], gv[GC_PK];
            const long i0 = (r0 + py) * ld + (long)s * C + c0 + 2 * px;
#pragma unroll
            for (int k = 0; k < GC_PK; ++k) { /* every load first: dy along r, a and g along c */
                dv[k] = tf_cu_ld2(in + (long)(c0 + py + 8 * k) * inner);
                av[k] = tf_cu_ld2(a + i0 + 8 * k * ld), gv[k] = tf_cu_ld2(g + i0 + 8 * k * ld);
            }
#pragma unroll
            for (int k = 0; k < GC_PK; ++k)
                tile[py + 8 * k][2 * px] = dv[k].x, tile[py + 8 * k][2 * px + 1] = dv[k].y;
            __syncthreads();
#pragma unroll
            for (int k = 0; k < GC_PK; ++k) {
                float ra[2], rg[2];
                tf_gate_bwd_one(&ra[0], &rg[0], tile[2 * px][py + 8 * k], av[k].x, gv[k].x);
                tf_gate_bwd_one(&ra[1], &rg[1], tile[2 * px + 1][py + 8 * k], av[k].y, gv[k].y);
                tf_cu_st2(da + i0 + 8 * k * ld, ra[0], ra[1]);
                tf_cu_st2(dg + i0 + 8 * k * ld, rg[0], rg[1]);
            }
            return;
        }
    }
    {
        const long r = r0 + tx;
        const T *in = dlr_t + gc_cmajor_at(s, r, rows, inner, C);
#pragma unroll
        for (int k = 0; k < GC_KR; ++k) { /* read along r */
            const int c = c0 + ty + GC_ROWS * k;
            if (full || (r < rows && c < C)) tile[ty + GC_ROWS * k][tx] = in[(long)c * inner];
        }
    }
    if (full) { /* a and g loaded before the barrier */
        float av[GC_KR], gv[GC_KR];
        const long i0 = (r0 + ty) * ld + (long)s * C + c0 + tx;
        gc_load_full(av, gv, a, g, i0, ld);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < GC_KR; ++k) {
            const long i = i0 + k * GC_ROWS * ld;
            gc_bwd_one(&da[i], &dg[i], tile[tx][ty + GC_ROWS * k], av[k], gv[k]);
        }
        return;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < GC_KR; ++k) { /* write along c */
        const long r = r0 + ty + GC_ROWS * k;
        const int c = c0 + tx;
        if (r < rows && c < C) {
            const long i = r * ld + (long)s * C + c;
            gc_bwd_one(&da[i], &dg[i], tile[tx][ty + GC_ROWS * k], a[i], g[i]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(GC_TILE *GC_ROWS)
gate_cmajor_fwd_kernel2(float *lr_t, const float *a, const float *g, long ld, long rows,
                        long inner, int C)
{
    gate_cmajor_fwd_body(lr_t, a, g, ld, rows, inner, C, 0);
}
extern "C" __global__ void __launch_bounds__(GC_TILE *GC_ROWS)
gate_cmajor_bwd_kernel2(float *da, float *dg, const float *dlr_t, const float *a, const float *g,
                        long ld, long rows, long inner, int C)
{
    gate_cmajor_bwd_body(da, dg, dlr_t, a, g, ld, rows, inner, C, 0);
}
template <class T>
__global__ void __launch_bounds__(GC_TILE *GC_ROWS)
gate_cmajor_fwd_kernel2_t(T *lr_t, const T *a, const T *g, long ld, long rows, long inner, int C,
                          int pair)
{
    gate_cmajor_fwd_body(lr_t, a, g, ld, rows, inner, C, pair);
}
template <class T>
__global__ void __launch_bounds__(GC_TILE *GC_ROWS)
gate_cmajor_bwd_kernel2_t(T *da, T *dg, const T *dlr_t, const T *a, const T *g, long ld,
                          long rows, long inner, int C, int pair)
{
    gate_cmajor_bwd_body(da, dg, dlr_t, a, g, ld, rows, inner, C, pair);
}

static dim3 gc_grid(long rows, int C)
{
    return dim3((unsigned)((C + GC_TILE - 1) / GC_TILE) * (unsigned)((rows + GC_TILE - 1) / GC_TILE),
                1, 2);
}

extern "C" void tf_cu_gate_cmajor_fwd(tf_backend *be, float *lr_t, const float *a, const float *g,
                                      long ld, long rows, long inner, int C)
{
    if (rows <= 0 || C <= 0 || inner <= 0) return;
    TF_LAUNCH(gate_cmajor_fwd_kernel2, gc_grid(rows, C), dim3(GC_TILE, GC_ROWS), be->stream, lr_t,
              a, g, ld, rows, inner, C);
}

extern "C" void tf_cu_gate_cmajor_bwd(tf_backend *be, float *da, float *dg, const float *dlr_t,
                                      const float *a, const float *g, long ld, long rows,
                                      long inner, int C)
{
    if (rows <= 0 || C <= 0 || inner <= 0) return;
    TF_LAUNCH(gate_cmajor_bwd_kernel2, gc_grid(rows, C), dim3(GC_TILE, GC_ROWS), be->stream, da,
              dg, dlr_t, a, g, ld, rows, inner, C);
}

/* the half types' full tiles move element pairs: even strides, 4-byte
 * aligned arrays */
static int gc_pair_ok(long ld, long inner, int C, const void *p0, const void *p1, const void *p2,
                      const void *p3, const void *p4)
{
    const void *p[5] = {p0, p1, p2, p3, p4};
    for (int k = 0; k < 5; ++k)
        if (p[k] && !tf_cu_aligned(p[k], 4)) return 0;
    return ld % 2 == 0 && inner % 2 == 0 && C % 2 == 0;
}

extern "C" void tf_cu_gate_cmajor_fwd_h(tf_backend *be, void *lr_t, const void *a, const void *g,
                                        long ld, long rows, long inner, int C, tf_dtype t)
{
    if (rows <= 0 || C <= 0 || inner <= 0) return;
    const int pair = gc_pair_ok(ld, inner, C, lr_t, a, g, NULL, NULL);
    TF_CU_DISPATCH_HALF(t, T,
                        TF_LAUNCH(gate_cmajor_fwd_kernel2_t<T>, gc_grid(rows, C),
                                  dim3(GC_TILE, GC_ROWS), be->stream, (T *)lr_t, (const T *)a,
                                  (const T *)g, ld, rows, inner, C, pair));
}

extern "C" void tf_cu_gate_cmajor_bwd_h(tf_backend *be, void *da, void *dg, const void *dlr_t,
                                        const void *a, const void *g, long ld, long rows,
                                        long inner, int C, tf_dtype t)
{
    if (rows <= 0 || C <= 0 || inner <= 0) return;
    const int pair = gc_pair_ok(ld, inner, C, da, dg, dlr_t, a, g);
    TF_CU_DISPATCH_HALF(t, T,
                        TF_LAUNCH(gate_cmajor_bwd_kernel2_t<T>, gc_grid(rows, C),
                                  dim3(GC_TILE, GC_ROWS), be->stream, (T *)da, (T *)dg,
                                  (const T *)dlr_t, (const T *)a, (const T *)g, ld, rows, inner,
                                  C, pair));
}
