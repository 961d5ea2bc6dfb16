/* The ops on bf16 / fp16 activations (ops.h): LayerNorm, layernorm2,
 * softmax, the attention, permute, broadcast add, sum over the middle axis,
 * the channel-major gate and the outer product mean. Every input is widened
 * exactly (cuda_typed.h), the math is fp32 and each output is rounded once
 * at its store; sums accumulate in fp32 in a fixed order (no atomics). These
 * are the simplest kernels of each op (one block per row, one thread per
 * output): the fp32 paths keep their own tuned kernels. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"
#include "cuda_typed.h"

#define H_THREADS 256
#define HLN_THREADS 128 /* LayerNorm: one block per row (layernorm2: one thread per channel) */

/* the block's max (tf_block_sum's pattern) */
__device__ __forceinline__ float h_block_max(float v, float *sh)
{
    for (int m = TF_GROUP / 2; m > 0; m >>= 1) v = fmaxf(v, tf_shfl_xor(v, m));
    if (threadIdx.x % TF_GROUP == 0) sh[threadIdx.x / TF_GROUP] = v;
    __syncthreads();
    float t = -INFINITY;
    const int nw = (int)(blockDim.x / TF_GROUP);
    for (int w = 0; w < nw; ++w) t = fmaxf(t, sh[w]);
    __syncthreads();
    return t;
}

/* ---- LayerNorm ------------------------------------------------------------- */
extern "C" __global__ void __launch_bounds__(HLN_THREADS)
layernorm_fwd_typed_kernel1(void *out, float *mean, float *rstd, const void *x, const float *gamma,
                            const float *beta, long rows, int C, float eps, tf_dtype xt,
                            tf_dtype yt)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return; /* uniform per block */
    const long o = r * C;
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += tf_cu_ld(x, o + c, xt);
    const float mu = tf_block_sum(s, sh) / C;
    float v = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float d = tf_cu_ld(x, o + c, xt) - mu;
        v += d * d;
    }
    const float rs = 1.f / sqrtf(tf_block_sum(v, sh) / C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        tf_cu_st(out, o + c, yt, (tf_cu_ld(x, o + c, xt) - mu) * rs * gamma[c] + beta[c]);
    if (threadIdx.x == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g*xhat)), g = dout*gamma (+= when accumulate) */
extern "C" __global__ void __launch_bounds__(HLN_THREADS)
layernorm_bwd_dx_typed_kernel1(void *dx, const void *dout, const void *x, const float *mean,
                               const float *rstd, const float *gamma, long rows, int C,
                               int accumulate, tf_dtype xt, tf_dtype yt)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return;
    const float mu = mean[r], rs = rstd[r];
    const long o = r * C;
    float sg = 0.f, sgx = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = tf_cu_ld(dout, o + c, yt) * gamma[c];
        sg += g;
        sgx += g * ((tf_cu_ld(x, o + c, xt) - mu) * rs);
    }
    const float mg = tf_block_sum(sg, sh) / C;
    const float mgx = tf_block_sum(sgx, sh) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float xh = (tf_cu_ld(x, o + c, xt) - mu) * rs;
        const float v = rs * (tf_cu_ld(dout, o + c, yt) * gamma[c] - mg - xh * mgx);
        tf_cu_st(dx, o + c, xt, accumulate ? tf_cu_ld(dx, o + c, xt) + v : v);
    }
}

/* dgamma, dbeta: partial column sums per chunk of rows (thread x: a channel,
 * y: a row lane), part[k][0..C) dgamma and part[nchunks + k][0..C) dbeta,
 * added in chunk order by layernorm_dparams_typed_reduce_kernel1 */
#define HDP_TX 32
#define HDP_TY 8
extern "C" __global__ void __launch_bounds__(HDP_TX *HDP_TY)
layernorm_dparams_typed_kernel1(float *part, const void *dout, const void *x, const float *mean,
                                const float *rstd, long rows, int C, int c0, int cs, long rpc,
                                int nchunks, tf_dtype xt, tf_dtype yt)
{
    __shared__ float sg[HDP_TY][HDP_TX], sb[HDP_TY][HDP_TX];
    const int cl = blockIdx.x * HDP_TX + threadIdx.x;
    const int c = c0 + cl;
    const long chunk = blockIdx.y, r0 = chunk * rpc;
    const long r1 = r0 + rpc < rows ? r0 + rpc : rows;
    float ag = 0.f, ab = 0.f;
    if (cl < cs)
        for (long r = r0 + threadIdx.y; r < r1; r += HDP_TY) {
            const float d = tf_cu_ld(dout, r * C + c, yt);
            ag += d * ((tf_cu_ld(x, r * C + c, xt) - mean[r]) * rstd[r]);
            ab += d;
        }
    sg[threadIdx.y][threadIdx.x] = ag;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && cl < cs) {
        float tg = 0.f, tb = 0.f;
        for (int k = 0; k < HDP_TY; ++k) tg += sg[k][threadIdx.x], tb += sb[k][threadIdx.x];
        part[chunk * cs + cl] = tg;
        part[((long)nchunks + chunk) * cs + cl] = tb;
    }
}

/* out[q][c0 + c] += sum_k part[(q*nchunks + k)*cs + c] for the nq sums */
extern "C" __global__ void layernorm_dparams_typed_reduce_kernel1(float *o0, float *o1, float *o2,
                                                                  float *o3, const float *part,
                                                                  int c0, int cs, int nchunks)
{
    const int cl = blockIdx.x * blockDim.x + threadIdx.x;
    if (cl >= cs) return;
    float *outs[4] = {o0, o1, o2, o3};
    for (int q = 0; q < 4; ++q) {
        if (!outs[q]) continue;
        float t = 0.f;
        for (int k = 0; k < nchunks; ++k) t += part[((long)q * nchunks + k) * cs + cl];
        outs[q][c0 + cl] += t;
    }
}

#define HDP_ROWS_PER_CHUNK 64
#define HDP_MAX_CHUNKS 1024

/* chunks of rows whose partial sums of nq rows of C floats fit the scratch area */
static long dp_chunks(long rows, int per_chunk_floats, long *rpc)
{
    long n = (rows + HDP_ROWS_PER_CHUNK - 1) / HDP_ROWS_PER_CHUNK;
    const long cap = (long)(TF_CU_SCRATCH_FLOATS / (size_t)per_chunk_floats);
    if (n > HDP_MAX_CHUNKS) n = HDP_MAX_CHUNKS;
    if (n > cap) n = cap;
    *rpc = (rows + n - 1) / n;
    return (rows + *rpc - 1) / *rpc;
}

extern "C" void tf_cu_h_layernorm_fwd(tf_backend *be, void *out, float *mean, float *rstd,
                                      const void *x, const float *g, const float *b, long rows,
                                      int C, float eps, tf_dtype xt, tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    TF_LAUNCH(layernorm_fwd_typed_kernel1, dim3((unsigned)rows), dim3(HLN_THREADS), be->stream,
              out, mean, rstd, x, g, b, rows, C, eps, xt, yt);
}

extern "C" void tf_cu_h_layernorm_bwd(tf_backend *be, void *dx, float *dg, float *db,
                                      const void *dout, const void *x, const float *mean,
                                      const float *rstd, const float *g, long rows, int C,
                                      int acc, tf_dtype xt, tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    if (dg || db) { /* before dx is written: dx may alias dout */
        long rpc;
        const long nchunks = dp_chunks(rows, 2 * 512, &rpc);
        long cs = (long)(TF_CU_SCRATCH_FLOATS / (2 * (size_t)nchunks));
        if (cs > C) cs = C;
        for (int c0 = 0; c0 < C; c0 += (int)cs) {
            const int w = (int)(C - c0 < cs ? C - c0 : cs);
            TF_LAUNCH(layernorm_dparams_typed_kernel1,
                      dim3((unsigned)((w + HDP_TX - 1) / HDP_TX), (unsigned)nchunks),
                      dim3(HDP_TX, HDP_TY), be->stream, be->scratch, dout, x, mean, rstd, rows,
                      C, c0, w, rpc, (int)nchunks, xt, yt);
            TF_LAUNCH(layernorm_dparams_typed_reduce_kernel1, dim3((unsigned)((w + 127) / 128)),
                      dim3(128), be->stream, dg, db, (float *)NULL, (float *)NULL,
                      (const float *)be->scratch, c0, w, (int)nchunks);
        }
    }
    if (dx)
        TF_LAUNCH(layernorm_bwd_dx_typed_kernel1, dim3((unsigned)rows), dim3(HLN_THREADS),
                  be->stream, dx, dout, x, mean, rstd, g, rows, C, acc, xt, yt);
}

/* ---- layernorm2: one block per row, one thread per channel (C <= 128) ---- */
extern "C" __global__ void __launch_bounds__(HLN_THREADS)
layernorm2_fwd_typed_kernel1(void *out, float *stats, const void *x, const float *g1,
                             const float *b1, const float *g2, const float *b2, long rows, int C,
                             float eps, tf_dtype xt, tf_dtype yt)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return;
    const int c = threadIdx.x;
    const bool in = c < C;
    const float xv = in ? tf_cu_ld(x, r * C + c, xt) : 0.f;
    const float mu1 = tf_block_sum(xv, sh) / C;
    const float d1 = in ? xv - mu1 : 0.f;
    const float rs1 = 1.f / sqrtf(tf_block_sum(d1 * d1, sh) / C + eps);
    const float y1 = in ? (xv - mu1) * rs1 * g1[c] + b1[c] : 0.f;
    const float mu2 = tf_block_sum(y1, sh) / C;
    const float d2 = in ? y1 - mu2 : 0.f;
    const float rs2 = 1.f / sqrtf(tf_block_sum(d2 * d2, sh) / C + eps);
    if (in) tf_cu_st(out, r * C + c, yt, (y1 - mu2) * rs2 * g2[c] + b2[c]);
    if (c == 0) {
        stats[r] = mu1, stats[rows + r] = rs1;
        stats[2 * rows + r] = mu2, stats[3 * rows + r] = rs2;
    }
}

/* dx through both norms; each block also sums its chunk of rows' parameter
 * gradient terms per channel: part[(q*nchunks + chunk)*C + c], q = dg1, db1,
 * dg2, db2 */
extern "C" __global__ void __launch_bounds__(HLN_THREADS)
layernorm2_bwd_typed_kernel1(void *dx, float *part, const void *dout, const void *x,
                             const float *stats, const float *g1, const float *b1,
                             const float *g2, long rows, int C, int accumulate, long rpc,
                             int nchunks, tf_dtype xt, tf_dtype yt)
{
    __shared__ float sh[32];
    const int c = threadIdx.x;
    const bool in = c < C;
    const long chunk = blockIdx.x, r0 = chunk * rpc;
    const long r1 = r0 + rpc < rows ? r0 + rpc : rows;
    float a_g1 = 0.f, a_b1 = 0.f, a_g2 = 0.f, a_b2 = 0.f;
    for (long r = r0; r < r1; ++r) {
        const float mu1 = stats[r], rs1 = stats[rows + r];
        const float mu2 = stats[2 * rows + r], rs2 = stats[3 * rows + r];
        const float xv = in ? tf_cu_ld(x, r * C + c, xt) : 0.f;
        const float dy = in ? tf_cu_ld(dout, r * C + c, yt) : 0.f;
        const float xh1 = in ? (xv - mu1) * rs1 : 0.f;
        const float y1 = in ? xh1 * g1[c] + b1[c] : 0.f;
        const float xh2 = in ? (y1 - mu2) * rs2 : 0.f;
        const float gg2 = in ? dy * g2[c] : 0.f;
        const float m2 = tf_block_sum(gg2, sh) / C, m2x = tf_block_sum(gg2 * xh2, sh) / C;
        const float dy1 = in ? rs2 * (gg2 - m2 - xh2 * m2x) : 0.f;
        const float gg1 = in ? dy1 * g1[c] : 0.f;
        const float m1 = tf_block_sum(gg1, sh) / C, m1x = tf_block_sum(gg1 * xh1, sh) / C;
        if (in) {
            const float v = rs1 * (gg1 - m1 - xh1 * m1x);
            tf_cu_st(dx, r * C + c, xt, accumulate ? tf_cu_ld(dx, r * C + c, xt) + v : v);
        }
        a_g1 += dy1 * xh1, a_b1 += dy1, a_g2 += dy * xh2, a_b2 += dy;
    }
    if (in) {
        part[(0L * nchunks + chunk) * C + c] = a_g1;
        part[(1L * nchunks + chunk) * C + c] = a_b1;
        part[(2L * nchunks + chunk) * C + c] = a_g2;
        part[(3L * nchunks + chunk) * C + c] = a_b2;
    }
}

static void ln2_width(int C)
{
    if (C > TF_LN2_MAX_C || C > HLN_THREADS) {
        fprintf(stderr, "tinyfold: internal error: layernorm2 with C = %d (at most %d)\n", C,
                TF_LN2_MAX_C);
        abort();
    }
}

extern "C" void tf_cu_h_layernorm2_fwd(tf_backend *be, void *out, float *stats, const void *x,
                                       const float *g1, const float *b1, const float *g2,
                                       const float *b2, long rows, int C, float eps, tf_dtype xt,
                                       tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    ln2_width(C);
    TF_LAUNCH(layernorm2_fwd_typed_kernel1, dim3((unsigned)rows), dim3(HLN_THREADS), be->stream,
              out, stats, x, g1, b1, g2, b2, rows, C, eps, xt, yt);
}

extern "C" void tf_cu_h_layernorm2_bwd(tf_backend *be, void *dx, float *dg1, float *db1,
                                       float *dg2, float *db2, const void *dout, const void *x,
                                       const float *stats, const float *g1, const float *b1,
                                       const float *g2, long rows, int C, int acc, tf_dtype xt,
                                       tf_dtype yt)
{
    if (rows <= 0 || C <= 0) return;
    ln2_width(C);
    long rpc;
    const long nchunks = dp_chunks(rows, 4 * TF_LN2_MAX_C, &rpc);
    TF_LAUNCH(layernorm2_bwd_typed_kernel1, dim3((unsigned)nchunks), dim3(HLN_THREADS),
              be->stream, dx, be->scratch, dout, x, stats, g1, b1, g2, rows, C, acc, rpc,
              (int)nchunks, xt, yt);
    TF_LAUNCH(layernorm_dparams_typed_reduce_kernel1, dim3((unsigned)((C + 127) / 128)),
              dim3(128), be->stream, dg1, db1, dg2, db2, (const float *)be->scratch, 0, C,
              (int)nchunks);
}

/* ---- softmax: one block per row ---- */
extern "C" __global__ void __launch_bounds__(HLN_THREADS)
softmax_fwd_typed_kernel1(void *y, const void *x, long rows, int cols, tf_dtype t)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return;
    const long o = r * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, tf_cu_ld(x, o + c, t));
    m = h_block_max(m, sh);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(tf_cu_ld(x, o + c, t) - m);
    const float inv = 1.f / tf_block_sum(s, sh);
    __syncthreads(); /* every thread read x before y (y may alias x) */
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = expf(tf_cu_ld(x, o + c, t) - m) * inv;
        tf_cu_st(y, o + c, t, v);
    }
}

extern "C" __global__ void __launch_bounds__(HLN_THREADS)
softmax_bwd_typed_kernel1(void *dx, const void *dy, const void *y, long rows, int cols,
                          tf_dtype t)
{
    __shared__ float sh[32];
    const long r = blockIdx.x;
    if (r >= rows) return;
    const long o = r * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        s += tf_cu_ld(dy, o + c, t) * tf_cu_ld(y, o + c, t);
    const float dot = tf_block_sum(s, sh);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float yv = tf_cu_ld(y, o + c, t);
        tf_cu_st(dx, o + c, t, yv * (tf_cu_ld(dy, o + c, t) - dot));
    }
}

extern "C" void tf_cu_h_softmax_fwd(tf_backend *be, void *y, const void *x, long rows, int cols,
                                    tf_dtype t)
{
    if (rows > 0 && cols > 0)
        TF_LAUNCH(softmax_fwd_typed_kernel1, dim3((unsigned)rows), dim3(HLN_THREADS), be->stream,
                  y, x, rows, cols, t);
}

extern "C" void tf_cu_h_softmax_bwd(tf_backend *be, void *dx, const void *dy, const void *y,
                                    long rows, int cols, tf_dtype t)
{
    if (rows > 0 && cols > 0)
        TF_LAUNCH(softmax_bwd_typed_kernel1, dim3((unsigned)rows), dim3(HLN_THREADS), be->stream,
                  dx, dy, y, rows, cols, t);
}

/* ---- attention: one thread per query (forward, dq) or key (dk, dv) ----
 * Scores are recomputed from q, k and the bias in fp32; the softmax is the
 * forward's lse. HA_DMAX bounds the head size (caps.max_head_dim). */
#define HA_DMAX 64

struct ha_idx {
    int b, o, h, i;
};
__device__ __forceinline__ ha_idx ha_split(long t, const tf_attn_args &a)
{
    ha_idx x;
    x.i = (int)(t % a.L);
    t /= a.L;
    x.h = (int)(t % a.nh);
    t /= a.nh;
    x.o = (int)(t % a.no);
    x.b = (int)(t / a.no);
    return x;
}
__device__ __forceinline__ long ha_at(const tf_attn_view &v, const ha_idx &x, int l, int d)
{
    return (long)x.b * v.sb + (long)x.o * v.so + (long)l * v.sl + (long)x.h * d;
}
/* S[i,j] = scale q_i . k_j + bias */
__device__ __forceinline__ float ha_score(const tf_attn_args &a, const ha_idx &x, const float *qi,
                                          int j)
{
    const long kb = ha_at(a.k, x, j, a.d);
    float s = 0.f;
    for (int c = 0; c < a.d; ++c) s += qi[c] * tf_cu_ld(a.k.p, kb + c, a.t);
    s *= a.scale;
    if (a.bias)
        s += tf_cu_ld(a.bias, (long)x.b * a.bias_sb + (long)x.h * a.bias_sh +
                                  (long)x.i * a.bias_si + (long)j * a.bias_sj, a.t);
    return s;
}

extern "C" __global__ void attn_fwd_typed_kernel1(tf_attn_args a, long n)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const ha_idx x = ha_split(t, a);
    float qi[HA_DMAX], acc[HA_DMAX];
    const long qb = ha_at(a.q, x, x.i, a.d);
    for (int c = 0; c < a.d; ++c) qi[c] = tf_cu_ld(a.q.p, qb + c, a.t), acc[c] = 0.f;
    float m = -INFINITY;
    for (int j = 0; j < a.L; ++j) m = fmaxf(m, ha_score(a, x, qi, j));
    float l = 0.f;
    for (int j = 0; j < a.L; ++j) {
        const float p = expf(ha_score(a, x, qi, j) - m);
        l += p;
        const long vb = ha_at(a.v, x, j, a.d);
        for (int c = 0; c < a.d; ++c) acc[c] += p * tf_cu_ld(a.v.p, vb + c, a.t);
    }
    const float inv = 1.f / l;
    const long ob = ha_at(a.out, x, x.i, a.d);
    for (int c = 0; c < a.d; ++c) tf_cu_st(a.out.p, ob + c, a.t, acc[c] * inv);
    a.lse[t] = m + logf(l);
}

/* work[t] = dout_i . out_i (the softmax backward's row term) */
extern "C" __global__ void attn_bwd_dot_typed_kernel1(tf_attn_args a, long n)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const ha_idx x = ha_split(t, a);
    const long db = ha_at(a.dout, x, x.i, a.d), ob = ha_at(a.out, x, x.i, a.d);
    float s = 0.f;
    for (int c = 0; c < a.d; ++c) s += tf_cu_ld(a.dout.p, db + c, a.t) * tf_cu_ld(a.out.p, ob + c, a.t);
    a.work[t] = s;
}

/* dS[i,j] = P (dout_i . v_j - work_i), P = exp(S - lse_i) */
__device__ __forceinline__ float ha_ds(const tf_attn_args &a, const ha_idx &x, long t,
                                       const float *qi, const float *doi, int j)
{
    const float p = expf(ha_score(a, x, qi, j) - a.lse[t]);
    const long vb = ha_at(a.v, x, j, a.d);
    float dp = 0.f;
    for (int c = 0; c < a.d; ++c) dp += doi[c] * tf_cu_ld(a.v.p, vb + c, a.t);
    return p * (dp - a.work[t]);
}

extern "C" __global__ void attn_bwd_dq_typed_kernel1(tf_attn_args a, long n)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const ha_idx x = ha_split(t, a);
    float qi[HA_DMAX], doi[HA_DMAX], dq[HA_DMAX];
    const long qb = ha_at(a.q, x, x.i, a.d), db = ha_at(a.dout, x, x.i, a.d);
    for (int c = 0; c < a.d; ++c)
        qi[c] = tf_cu_ld(a.q.p, qb + c, a.t), doi[c] = tf_cu_ld(a.dout.p, db + c, a.t), dq[c] = 0.f;
    for (int j = 0; j < a.L; ++j) {
        const float ds = ha_ds(a, x, t, qi, doi, j);
        const long kb = ha_at(a.k, x, j, a.d);
        for (int c = 0; c < a.d; ++c) dq[c] += ds * tf_cu_ld(a.k.p, kb + c, a.t);
    }
    const long ob = ha_at(a.dq, x, x.i, a.d);
    for (int c = 0; c < a.d; ++c) tf_cu_st(a.dq.p, ob + c, a.t, dq[c] * a.scale);
}

/* thread t = key j of (b, o, h): dv_j = sum_i P[i,j] dout_i, dk_j = scale sum_i dS[i,j] q_i */
extern "C" __global__ void attn_bwd_dkdv_typed_kernel1(tf_attn_args a, long n)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const ha_idx xj = ha_split(t, a);
    const int j = xj.i;
    float dk[HA_DMAX], dv[HA_DMAX], qi[HA_DMAX], doi[HA_DMAX];
    for (int c = 0; c < a.d; ++c) dk[c] = 0.f, dv[c] = 0.f;
    for (int i = 0; i < a.L; ++i) {
        ha_idx x = xj;
        x.i = i;
        const long ti = t - j + i;
        const long qb = ha_at(a.q, x, i, a.d), db = ha_at(a.dout, x, i, a.d);
        for (int c = 0; c < a.d; ++c)
            qi[c] = tf_cu_ld(a.q.p, qb + c, a.t), doi[c] = tf_cu_ld(a.dout.p, db + c, a.t);
        const float p = expf(ha_score(a, x, qi, j) - a.lse[ti]);
        const long vb = ha_at(a.v, x, j, a.d);
        float dp = 0.f;
        for (int c = 0; c < a.d; ++c) dp += doi[c] * tf_cu_ld(a.v.p, vb + c, a.t);
        const float ds = p * (dp - a.work[ti]);
        for (int c = 0; c < a.d; ++c) dv[c] += p * doi[c], dk[c] += ds * qi[c];
    }
    const long kb = ha_at(a.dk, xj, j, a.d), vb = ha_at(a.dv, xj, j, a.d);
    for (int c = 0; c < a.d; ++c) {
        tf_cu_st(a.dk.p, kb + c, a.t, dk[c] * a.scale);
        tf_cu_st(a.dv.p, vb + c, a.t, dv[c]);
    }
}

/* thread = (b, h, i, j): dbias = sum_o dS[i,j], o in order */
extern "C" __global__ void attn_bwd_dbias_typed_kernel1(tf_attn_args a, long n)
{
    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int j = (int)(t % a.L), i = (int)(t / a.L % a.L), h = (int)(t / a.L / a.L % a.nh);
    const int b = (int)(t / a.L / a.L / a.nh);
    float qi[HA_DMAX], doi[HA_DMAX];
    float s = 0.f;
    for (int o = 0; o < a.no; ++o) {
        ha_idx x;
        x.b = b, x.o = o, x.h = h, x.i = i;
        const long ti = (((long)b * a.no + o) * a.nh + h) * a.L + i;
        const long qb = ha_at(a.q, x, i, a.d), db = ha_at(a.dout, x, i, a.d);
        for (int c = 0; c < a.d; ++c)
            qi[c] = tf_cu_ld(a.q.p, qb + c, a.t), doi[c] = tf_cu_ld(a.dout.p, db + c, a.t);
        s += ha_ds(a, x, ti, qi, doi, j);
    }
    tf_cu_st(a.dbias, (long)b * a.bias_sb + (long)h * a.bias_sh + (long)i * a.bias_si +
                          (long)j * a.bias_sj, a.t, s);
}

static void ha_check(const tf_attn_args *a)
{
    if (a->d > HA_DMAX) {
        fprintf(stderr, "tinyfold: internal error: half attention with head size %d (at most %d)\n",
                a->d, HA_DMAX);
        abort();
    }
}

#define HGRID(n) dim3((unsigned)(((n) + H_THREADS - 1) / H_THREADS))

extern "C" void tf_cu_h_attn_fwd(tf_backend *be, const tf_attn_args *a)
{
    const long n = (long)a->nb * a->no * a->nh * a->L;
    if (n <= 0) return;
    ha_check(a);
    TF_LAUNCH(attn_fwd_typed_kernel1, HGRID(n), dim3(H_THREADS), be->stream, *a, n);
}

extern "C" void tf_cu_h_attn_bwd(tf_backend *be, const tf_attn_args *a)
{
    const long n = (long)a->nb * a->no * a->nh * a->L;
    if (n <= 0) return;
    ha_check(a);
    TF_LAUNCH(attn_bwd_dot_typed_kernel1, HGRID(n), dim3(H_THREADS), be->stream, *a, n);
    TF_LAUNCH(attn_bwd_dq_typed_kernel1, HGRID(n), dim3(H_THREADS), be->stream, *a, n);
    TF_LAUNCH(attn_bwd_dkdv_typed_kernel1, HGRID(n), dim3(H_THREADS), be->stream, *a, n);
    if (a->dbias && a->bias) {
        const long nbias = (long)a->nb * a->nh * a->L * a->L;
        TF_LAUNCH(attn_bwd_dbias_typed_kernel1, HGRID(nbias), dim3(H_THREADS), be->stream, *a,
                  nbias);
    }
}

/* ---- permute: one thread per output element ---- */
struct hp_plan {
    int rank;
    long odims[6];   /* out's dims */
    long istride[6]; /* in's stride along out's axis a */
};

extern "C" __global__ void permute_typed_kernel1(void *out, const void *in, hp_plan p, long n,
                                                 int accumulate, tf_dtype t)
{
    const long step = (long)gridDim.x * blockDim.x;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        long rem = e, src = 0;
        for (int a = p.rank - 1; a >= 0; --a) {
            src += rem % p.odims[a] * p.istride[a];
            rem /= p.odims[a];
        }
        const float v = tf_cu_ld(in, src, t);
        tf_cu_st(out, e, t, accumulate ? tf_cu_ld(out, e, t) + v : v);
    }
}

extern "C" void tf_cu_h_permute(tf_backend *be, void *out, const void *in, const tf_permute_args *a)
{
    hp_plan p;
    long st[6], n = 1;
    p.rank = a->rank;
    for (int k = a->rank - 1; k >= 0; --k) st[k] = n, n *= a->dims[k];
    for (int k = 0; k < a->rank; ++k) p.odims[k] = a->dims[a->perm[k]], p.istride[k] = st[a->perm[k]];
    if (n > 0)
        TF_LAUNCH(permute_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)), dim3(H_THREADS),
                  be->stream, out, in, p, n, a->accumulate, a->t);
}

/* ---- y[o, m, i] += x[o, i]; y[o, i] (= or +=) sum_m x[o, m, i] ---- */
extern "C" __global__ void add_bcast_mid_typed_kernel1(void *y, const void *x, long outer,
                                                       long mid, long inner, tf_dtype t)
{
    const long n = outer * mid * inner, step = (long)gridDim.x * blockDim.x;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long i = e % inner, o = e / (mid * inner);
        tf_cu_st(y, e, t, tf_cu_ld(y, e, t) + tf_cu_ld(x, o * inner + i, t));
    }
}

extern "C" __global__ void sum_mid_typed_kernel1(void *y, const void *x, long outer, long mid,
                                                 long inner, int accumulate, tf_dtype t)
{
    const long n = outer * inner, step = (long)gridDim.x * blockDim.x;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long i = e % inner, o = e / inner;
        float s = 0.f;
        for (long m = 0; m < mid; ++m) s += tf_cu_ld(x, (o * mid + m) * inner + i, t);
        tf_cu_st(y, e, t, accumulate ? tf_cu_ld(y, e, t) + s : s);
    }
}

extern "C" void tf_cu_h_add_bcast_mid(tf_backend *be, void *y, const void *x, long outer,
                                      long mid, long inner, tf_dtype t)
{
    const long n = outer * mid * inner;
    if (n > 0)
        TF_LAUNCH(add_bcast_mid_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)),
                  dim3(H_THREADS), be->stream, y, x, outer, mid, inner, t);
}

extern "C" void tf_cu_h_sum_mid(tf_backend *be, void *y, const void *x, long outer, long mid,
                                long inner, int acc, tf_dtype t)
{
    const long n = outer * inner;
    if (n > 0)
        TF_LAUNCH(sum_mid_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)), dim3(H_THREADS),
                  be->stream, y, x, outer, mid, inner, acc, t);
}

/* ---- gate to channel-major and back: thread e = ((s*B + b)*C + c)*inner + p ---- */
extern "C" __global__ void gate_cmajor_fwd_typed_kernel1(void *lr_t, const void *a, const void *g,
                                                         long ld, long rows, long inner, int C,
                                                         tf_dtype t)
{
    const long n = 2 * rows * C, step = (long)gridDim.x * blockDim.x;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long p = e % inner, c = e / inner % C, sb = e / inner / C;
        const long B = rows / inner, b = sb % B, s = sb / B;
        const long src = (b * inner + p) * ld + s * C + c;
        tf_cu_st(lr_t, e, t, tf_cu_ld(a, src, t) * tf_sigmoidf(tf_cu_ld(g, src, t)));
    }
}

extern "C" __global__ void gate_cmajor_bwd_typed_kernel1(void *da, void *dg, const void *dlr_t,
                                                         const void *a, const void *g, long ld,
                                                         long rows, long inner, int C,
                                                         tf_dtype t)
{
    const long n = 2 * rows * C, step = (long)gridDim.x * blockDim.x;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long p = e % inner, c = e / inner % C, sb = e / inner / C;
        const long B = rows / inner, b = sb % B, s = sb / B;
        const long src = (b * inner + p) * ld + s * C + c;
        float r, q;
        tf_gate_bwd_one(&r, &q, tf_cu_ld(dlr_t, e, t), tf_cu_ld(a, src, t), tf_cu_ld(g, src, t));
        tf_cu_st(da, src, t, r);
        tf_cu_st(dg, src, t, q);
    }
}

extern "C" void tf_cu_h_gate_cmajor_fwd(tf_backend *be, void *lr_t, const void *a, const void *g,
                                        long ld, long rows, long inner, int C, tf_dtype t)
{
    const long n = 2 * rows * C;
    if (n > 0 && inner > 0)
        TF_LAUNCH(gate_cmajor_fwd_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)),
                  dim3(H_THREADS), be->stream, lr_t, a, g, ld, rows, inner, C, t);
}

extern "C" void tf_cu_h_gate_cmajor_bwd(tf_backend *be, void *da, void *dg, const void *dlr_t,
                                        const void *a, const void *g, long ld, long rows,
                                        long inner, int C, tf_dtype t)
{
    const long n = 2 * rows * C;
    if (n > 0 && inner > 0)
        TF_LAUNCH(gate_cmajor_bwd_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)),
                  dim3(H_THREADS), be->stream, da, dg, dlr_t, a, g, ld, rows, inner, C, t);
}

/* ---- outer product mean: one thread per output element ---- */
/* outer_p[b,i,j,p,q] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q] */
extern "C" __global__ void opm_outer_typed_kernel1(void *outer_p, const void *a, int B, int S,
                                                   int N, int co, tf_dtype t)
{
    const long n = (long)B * N * N * co * co, step = (long)gridDim.x * blockDim.x;
    const float inv = 1.0f / (float)S;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long q = e % co, p = e / co % co, j = e / co / co % N, i = e / co / co / N % N;
        const long b = e / co / co / N / N;
        float acc = 0.f;
        for (int s = 0; s < S; ++s) {
            const long base = ((long)b * S + s) * N;
            acc += tf_cu_ld(a, (base + i) * co + p, t) * tf_cu_ld(a, (base + j) * co + q, t);
        }
        tf_cu_st(outer_p, e, t, acc * inv);
    }
}

/* da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p]) */
extern "C" __global__ void opm_bwd_typed_kernel1(void *da, const void *dop, const void *a, int B,
                                                 int S, int N, int co, tf_dtype t)
{
    const long n = (long)B * S * N * co, step = (long)gridDim.x * blockDim.x;
    const float inv = 1.0f / (float)S;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        const long p = e % co, i = e / co % N, bs = e / co / N, b = bs / S;
        float acc = 0.f;
        for (long j = 0; j < N; ++j)
            for (long q = 0; q < co; ++q) {
                const float d = tf_cu_ld(dop, (((b * N + i) * N + j) * co + p) * co + q, t) +
                                tf_cu_ld(dop, (((b * N + j) * N + i) * co + q) * co + p, t);
                acc += tf_cu_ld(a, (bs * N + j) * co + q, t) * d;
            }
        tf_cu_st(da, e, t, acc * inv);
    }
}

extern "C" void tf_cu_h_opm_outer(tf_backend *be, void *outer_p, const void *a, int B, int S,
                                  int N, int co, tf_dtype t)
{
    const long n = (long)B * N * N * co * co;
    if (n > 0)
        TF_LAUNCH(opm_outer_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)), dim3(H_THREADS),
                  be->stream, outer_p, a, B, S, N, co, t);
}

extern "C" void tf_cu_h_opm_bwd(tf_backend *be, void *da, const void *dop, const void *a, int B,
                                int S, int N, int co, tf_dtype t)
{
    const long n = (long)B * S * N * co;
    if (n > 0)
        TF_LAUNCH(opm_bwd_typed_kernel1, dim3(tf_cu_grid(be, n, H_THREADS)), dim3(H_THREADS),
                  be->stream, da, dop, a, B, S, N, co, t);
}
