/* Flash-style attention backward (FlashAttention-2 structure), no atomics.
 *
 * With S = scale*q.k + bias, P = exp(S - lse), D_i = sum_c dout_ic out_ic:
 *   dV_j = sum_i P_ij dout_i            dS_ij = P_ij (dout_i . v_j - D_i)
 *   dK_j = scale sum_i dS_ij q_i        dQ_i  = scale sum_j dS_ij k_j
 *   dbias(b,h,i,j) = sum_o dS_ij
 * Four kernels, each owning its outputs so every sum has one fixed order:
 *   attn_bwd_dot_kernel1    D into `work` (one thread per row)
 *   attn_bwd_dkdv_kernel1   block per (b,o,h, key tile), thread per key; loops
 *                           over query tiles staged in shared memory
 *   attn_bwd_dq_kernel1     block per (b,o,h, query tile), thread per query;
 *                           loops over key tiles
 *   attn_bwd_dbias_kernel1  block per (b,h, 32x32 (i,j) tile); loops over o in
 *                           order, recomputing dS from q,k,v,dout tiles
 * P and dS are recomputed, never stored beyond one tile. Kernel levels 1-2;
 * level 3 runs kernel2/kernel3 (cuda_attn2_bwd.cu). */
#include <math.h>

#include "cuda_attn4.h"
#include "cuda_attn6.h"

/* ---- D = rowsum(dout * out) ---- */
template <class T> __device__ __forceinline__ void attn_bwd_dot_body(const tf_attn_args &a)
{
    const long rows = (long)a.nb * a.no * a.nh * a.L;
    const long stride = (long)gridDim.x * blockDim.x;
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < rows; t += stride) {
        long r = t;
        const int i = (int)(r % a.L);
        r /= a.L;
        const int h = (int)(r % a.nh);
        r /= a.nh;
        const int o = (int)(r % a.no);
        const int b = (int)(r / a.no);
        const T *dop = tf_attn_at<T>(a.dout, b, o, h, a.d) + (long)i * a.dout.sl;
        const T *op = tf_attn_at<T>(a.out, b, o, h, a.d) + (long)i * a.out.sl;
        float s = 0.f;
        for (int c = 0; c < a.d; ++c) s += dop[c] * op[c];
        a.work[t] = s;
    }
}
extern "C" __global__ void attn_bwd_dot_kernel1(tf_attn_args a) { attn_bwd_dot_body<float>(a); }
extern "C" __global__ void attn_bwd_dot_kernel1_bf16(tf_attn_args a)
{
    attn_bwd_dot_body<tf_cu_bf16>(a);
}
extern "C" __global__ void attn_bwd_dot_kernel1_f16(tf_attn_args a)
{
    attn_bwd_dot_body<tf_cu_f16>(a);
}

/* ---- dK, dV ---- */
#define AB_BK 64 /* keys per block = threads */
#define AB_BQ 32 /* queries per staged tile */

template <int DM, class T>
__device__ __forceinline__ void attn_bwd_dkdv_body(const tf_attn_args a)
{
    __shared__ float qs[AB_BQ][DM], dos[AB_BQ][DM], ls[AB_BQ], Ds[AB_BQ];
    __shared__ float bs[AB_BQ][AB_BK + 1];
    const int L = a.L, d = a.d, tid = threadIdx.x;
    int b, o, h, tile;
    tf_attn_decode(a, (L + AB_BK - 1) / AB_BK, &b, &o, &h, &tile);
    const T *qb = tf_attn_at<T>(a.q, b, o, h, d);
    const T *dob = tf_attn_at<T>(a.dout, b, o, h, d);
    const T *bb = a.bias ? (const T *)a.bias + (long)b * a.bias_sb + (long)h * a.bias_sh : NULL;
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const int j0 = tile * AB_BK;
    const int j = j0 + tid;
    const bool valid = j < L;

    float kv[DM], vv[DM], dk[DM], dv[DM];
    {
        const T *kp = tf_attn_at<T>(a.k, b, o, h, d) + (long)j * a.k.sl;
        const T *vp = tf_attn_at<T>(a.v, b, o, h, d) + (long)j * a.v.sl;
#pragma unroll
        for (int c = 0; c < DM; ++c) {
            kv[c] = (valid && c < d) ? kp[c] : 0.f;
            vv[c] = (valid && c < d) ? vp[c] : 0.f;
            dk[c] = 0.f;
            dv[c] = 0.f;
        }
    }
    for (int i0 = 0; i0 < L; i0 += AB_BQ) {
        const int ni = min(AB_BQ, L - i0);
        __syncthreads();
        for (int e = tid; e < AB_BQ * DM; e += AB_BK) {
            const int r = e / DM, c = e % DM;
            const bool ok = r < ni && c < d;
            qs[r][c] = ok ? qb[(long)(i0 + r) * a.q.sl + c] : 0.f;
            dos[r][c] = ok ? dob[(long)(i0 + r) * a.dout.sl + c] : 0.f;
        }
        for (int r = tid; r < AB_BQ; r += AB_BK) {
            ls[r] = r < ni ? a.lse[rowbase + i0 + r] : 0.f;
            Ds[r] = r < ni ? a.work[rowbase + i0 + r] : 0.f;
        }
        for (int e = tid; e < AB_BQ * AB_BK; e += AB_BK) {
            const int r = e / AB_BK, cc = e % AB_BK;
            bs[r][cc] = (bb && r < ni && j0 + cc < L)
                            ? bb[(long)(i0 + r) * a.bias_si + (long)(j0 + cc) * a.bias_sj]
                            : 0.f;
        }
        __syncthreads();
        if (valid) {
            for (int r = 0; r < ni; ++r) {
                float dot = 0.f, dp = 0.f;
#pragma unroll
                for (int c = 0; c < DM; ++c) dot += qs[r][c] * kv[c];
#pragma unroll
                for (int c = 0; c < DM; ++c) dp += dos[r][c] * vv[c];
                const float p = expf(a.scale * dot + bs[r][tid] - ls[r]);
                const float ds = p * (dp - Ds[r]);
#pragma unroll
                for (int c = 0; c < DM; ++c) {
                    dv[c] += p * dos[r][c];
                    dk[c] += ds * qs[r][c];
                }
            }
        }
    }
    if (valid) {
        T *dkp = tf_attn_at<T>(a.dk, b, o, h, d) + (long)j * a.dk.sl;
        T *dvp = tf_attn_at<T>(a.dv, b, o, h, d) + (long)j * a.dv.sl;
#pragma unroll
        for (int c = 0; c < DM; ++c)
            if (c < d) {
                dkp[c] = a.scale * dk[c];
                dvp[c] = dv[c];
            }
    }
}
TF_ATTN_KERNELS_T(attn_bwd_dkdv_kernel1, attn_bwd_dkdv_body, AB_BK)

/* ---- dQ ---- */
#define AQ_BQ 64 /* queries per block = threads */
#define AQ_BC 32 /* keys per staged tile */

template <int DM, class T>
__device__ __forceinline__ void attn_bwd_dq_body(const tf_attn_args a)
{
    __shared__ float ks[AQ_BC][DM], vs[AQ_BC][DM];
    __shared__ float bs[AQ_BQ][AQ_BC + 1];
    const int L = a.L, d = a.d, tid = threadIdx.x;
    int b, o, h, tile;
    tf_attn_decode(a, (L + AQ_BQ - 1) / AQ_BQ, &b, &o, &h, &tile);
    const T *kb = tf_attn_at<T>(a.k, b, o, h, d);
    const T *vb = tf_attn_at<T>(a.v, b, o, h, d);
    const T *bb = a.bias ? (const T *)a.bias + (long)b * a.bias_sb + (long)h * a.bias_sh : NULL;
    const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
    const int i0 = tile * AQ_BQ;
    const int i = i0 + tid;
    const bool valid = i < L;

    float qv[DM], dov[DM], dq[DM];
    {
        const T *qp = tf_attn_at<T>(a.q, b, o, h, d) + (long)i * a.q.sl;
        const T *dop = tf_attn_at<T>(a.dout, b, o, h, d) + (long)i * a.dout.sl;
#pragma unroll
        for (int c = 0; c < DM; ++c) {
            qv[c] = (valid && c < d) ? qp[c] : 0.f;
            dov[c] = (valid && c < d) ? dop[c] : 0.f;
            dq[c] = 0.f;
        }
    }
    const float lse_i = valid ? a.lse[rowbase + i] : 0.f;
    const float D_i = valid ? a.work[rowbase + i] : 0.f;

    for (int j0 = 0; j0 < L; j0 += AQ_BC) {
        const int nj = min(AQ_BC, L - j0);
        __syncthreads();
        for (int e = tid; e < AQ_BC * DM; e += AQ_BQ) {
            const int r = e / DM, c = e % DM;
            const bool ok = r < nj && c < d;
            ks[r][c] = ok ? kb[(long)(j0 + r) * a.k.sl + c] : 0.f;
            vs[r][c] = ok ? vb[(long)(j0 + r) * a.v.sl + c] : 0.f;
        }
        for (int e = tid; e < AQ_BQ * AQ_BC; e += AQ_BQ) {
            const int r = e / AQ_BC, cc = e % AQ_BC;
            bs[r][cc] = (bb && i0 + r < L && cc < nj)
                            ? bb[(long)(i0 + r) * a.bias_si + (long)(j0 + cc) * a.bias_sj]
                            : 0.f;
        }
        __syncthreads();
        if (valid) {
            for (int jj = 0; jj < nj; ++jj) {
                float dot = 0.f, dp = 0.f;
#pragma unroll
                for (int c = 0; c < DM; ++c) dot += qv[c] * ks[jj][c];
#pragma unroll
                for (int c = 0; c < DM; ++c) dp += dov[c] * vs[jj][c];
                const float p = expf(a.scale * dot + bs[tid][jj] - lse_i);
                const float ds = p * (dp - D_i);
#pragma unroll
                for (int c = 0; c < DM; ++c) dq[c] += ds * ks[jj][c];
            }
        }
    }
    if (valid) {
        T *dqp = tf_attn_at<T>(a.dq, b, o, h, d) + (long)i * a.dq.sl;
#pragma unroll
        for (int c = 0; c < DM; ++c)
            if (c < d) dqp[c] = a.scale * dq[c];
    }
}
TF_ATTN_KERNELS_T(attn_bwd_dq_kernel1, attn_bwd_dq_body, AQ_BQ)

/* ---- dbias ---- */
#define DB_T 32    /* i and j tile */
#define DB_TY 8    /* threads (32 x 8): each thread 4 rows i of one column j */

template <int DM, class T>
__device__ __forceinline__ void attn_bwd_dbias_body(const tf_attn_args a)
{
    /* rows padded to DM+1 floats: lanes read different rows of ks/vs */
    __shared__ float qs[DB_T][DM + 1], dos[DB_T][DM + 1], ks[DB_T][DM + 1], vs[DB_T][DM + 1];
    __shared__ float ls[DB_T], Ds[DB_T], bs[DB_T][DB_T + 1];
    const int L = a.L, d = a.d;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * DB_T + tx;
    const int nt = (L + DB_T - 1) / DB_T;
    long idx = blockIdx.x;
    const int jt = (int)(idx % nt);
    idx /= nt;
    const int it = (int)(idx % nt);
    idx /= nt;
    const int h = (int)(idx % a.nh);
    const int b = (int)(idx / a.nh);
    const int i0 = it * DB_T, j0 = jt * DB_T;
    const int ni = min(DB_T, L - i0), nj = min(DB_T, L - j0);
    const T *bb = a.bias ? (const T *)a.bias + (long)b * a.bias_sb + (long)h * a.bias_sh : NULL;

    for (int e = tid; e < DB_T * DB_T; e += DB_T * DB_TY) {
        const int r = e / DB_T, cc = e % DB_T;
        bs[r][cc] = (bb && r < ni && cc < nj)
                        ? bb[(long)(i0 + r) * a.bias_si + (long)(j0 + cc) * a.bias_sj]
                        : 0.f;
    }
    float acc[DB_T / DB_TY];
#pragma unroll
    for (int k = 0; k < DB_T / DB_TY; ++k) acc[k] = 0.f;

    for (int o = 0; o < a.no; ++o) { /* in order: the sum over o is deterministic */
        const T *qb = tf_attn_at<T>(a.q, b, o, h, d);
        const T *dob = tf_attn_at<T>(a.dout, b, o, h, d);
        const T *kb = tf_attn_at<T>(a.k, b, o, h, d);
        const T *vb = tf_attn_at<T>(a.v, b, o, h, d);
        const long rowbase = (((long)b * a.no + o) * a.nh + h) * L;
        __syncthreads();
        for (int e = tid; e < DB_T * DM; e += DB_T * DB_TY) {
            const int r = e / DM, c = e % DM;
            const bool oki = r < ni && c < d, okj = r < nj && c < d;
            qs[r][c] = oki ? qb[(long)(i0 + r) * a.q.sl + c] : 0.f;
            dos[r][c] = oki ? dob[(long)(i0 + r) * a.dout.sl + c] : 0.f;
            ks[r][c] = okj ? kb[(long)(j0 + r) * a.k.sl + c] : 0.f;
            vs[r][c] = okj ? vb[(long)(j0 + r) * a.v.sl + c] : 0.f;
        }
        if (tid < DB_T) {
            ls[tid] = tid < ni ? a.lse[rowbase + i0 + tid] : 0.f;
            Ds[tid] = tid < ni ? a.work[rowbase + i0 + tid] : 0.f;
        }
        __syncthreads();
        if (tx < nj) {
#pragma unroll
            for (int k = 0; k < DB_T / DB_TY; ++k) {
                const int r = ty + DB_TY * k;
                if (r < ni) {
                    float dot = 0.f, dp = 0.f;
#pragma unroll
                    for (int c = 0; c < DM; ++c) dot += qs[r][c] * ks[tx][c];
#pragma unroll
                    for (int c = 0; c < DM; ++c) dp += dos[r][c] * vs[tx][c];
                    const float p = expf(a.scale * dot + bs[r][tx] - ls[r]);
                    acc[k] += p * (dp - Ds[r]);
                }
            }
        }
    }
    if (tx < nj) {
#pragma unroll
        for (int k = 0; k < DB_T / DB_TY; ++k) {
            const int r = ty + DB_TY * k;
            if (r < ni)
                ((T *)a.dbias)[(long)b * a.bias_sb + (long)h * a.bias_sh + (long)(i0 + r) * a.bias_si +
                        (long)(j0 + tx) * a.bias_sj] = acc[k];
        }
    }
}
TF_ATTN_KERNELS_T(attn_bwd_dbias_kernel1, attn_bwd_dbias_body, DB_T *DB_TY)

extern "C" void tf_cu_attn_bwd(tf_backend *be, const tf_attn_args *a)
{
    const tf_gpu_attn_shape s = {a->L, a->d, 1, a->t != TF_F32};
    switch (tf_gpu_route_attn(&be->plan, &be->caps, &s, be->tf32)) { /* gpu_plan.h */
    case TF_GPU_ATTN_KERNEL6: tf_cu_attn_bwd6(be, a); return;
    case TF_GPU_ATTN_KERNEL5: tf_cu_attn_bwd5(be, a); return;
    case TF_GPU_ATTN_KERNEL4: tf_cu_attn_bwd4(be, a); return;
    case TF_GPU_ATTN_KERNEL2: tf_cu_attn_bwd2(be, a, 0); return;
    case TF_GPU_ATTN_KERNEL3: tf_cu_attn_bwd2(be, a, 1); return;
    case TF_GPU_ATTN_KERNEL1: break;
    }
    if (!tf_attn_check(a)) return;
    const int dm = tf_attn_dm(a->d);
    const long rows = (long)a->nb * a->no * a->nh * a->L;
    const long bh = (long)a->nb * a->no * a->nh;
    const dim3 dgrid(tf_cu_grid(be, rows, 256));
    if (a->t == TF_BF16)
        TF_LAUNCH(attn_bwd_dot_kernel1_bf16, dgrid, dim3(256), be->stream, *a);
    else if (a->t == TF_F16)
        TF_LAUNCH(attn_bwd_dot_kernel1_f16, dgrid, dim3(256), be->stream, *a);
    else
        TF_LAUNCH(attn_bwd_dot_kernel1, dgrid, dim3(256), be->stream, *a);
    TF_ATTN_LAUNCH_T(attn_bwd_dkdv_kernel1, a->t, dm, dim3((unsigned)(bh * ((a->L + AB_BK - 1) / AB_BK))),
                   dim3(AB_BK), be->stream, *a);
    TF_ATTN_LAUNCH_T(attn_bwd_dq_kernel1, a->t, dm, dim3((unsigned)(bh * ((a->L + AQ_BQ - 1) / AQ_BQ))),
                   dim3(AQ_BQ), be->stream, *a);
    if (a->dbias) {
        const long nt = (a->L + DB_T - 1) / DB_T;
        TF_ATTN_LAUNCH_T(attn_bwd_dbias_kernel1, a->t, dm,
                       dim3((unsigned)((long)a->nb * a->nh * nt * nt)), dim3(DB_T, DB_TY),
                       be->stream, *a);
    }
}
