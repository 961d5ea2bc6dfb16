/* Flash-style attention forward: the L x L scores never reach global memory.
 *
 * One block per (b, o, h, tile of AF_BR queries), one thread per query. K and
 * V are streamed through shared memory in tiles of AF_BC keys, with the bias
 * tile beside them; each thread keeps its query, its output accumulator and
 * the running max / sum of the online softmax in registers, rescaling once per
 * key tile. Writes out and lse = m + log(l). Kernel levels 1-2; level 3 runs
 * kernel2/kernel3 (cuda_attn2_fwd.cu). */
#include <math.h>

#include "cuda_attn4.h"
#include "cuda_attn6.h"

#define AF_BR 64 /* queries per block = threads */
#define AF_BC 32 /* keys per tile */

template <int DM, class T>
__device__ __forceinline__ void attn_fwd_body(const tf_attn_args a)
{
    __shared__ float ks[AF_BC][DM], vs[AF_BC][DM];
    __shared__ float bs[AF_BR][AF_BC + 1];
    const int L = a.L, d = a.d, tid = threadIdx.x;
    const int ntile = (L + AF_BR - 1) / AF_BR;
    int b, o, h, tile;
    tf_attn_decode(a, ntile, &b, &o, &h, &tile);

    const T *qb = tf_attn_at<T>(a.q, b, o, h, d);
    const T *kb = tf_attn_at<T>(a.k, b, o, h, d);
    const T *vb = tf_attn_at<T>(a.v, b, o, h, d);
    const T *bb = a.bias ? (const T *)a.bias + (long)b * a.bias_sb + (long)h * a.bias_sh : NULL;
    const int i0 = tile * AF_BR;
    const int i = i0 + tid;
    const bool valid = i < L;

    float qv[DM], acc[DM];
#pragma unroll
    for (int c = 0; c < DM; ++c) {
        qv[c] = (valid && c < d) ? qb[(long)i * a.q.sl + c] : 0.f;
        acc[c] = 0.f;
    }
    float m = -INFINITY, l = 0.f;

    for (int j0 = 0; j0 < L; j0 += AF_BC) {
        const int nj = min(AF_BC, L - j0);
        __syncthreads(); /* the previous tile is no longer read */
        for (int e = tid; e < AF_BC * DM; e += AF_BR) {
            const int r = e / DM, c = e % DM;
            const bool ok = r < nj && c < d;
            ks[r][c] = ok ? kb[(long)(j0 + r) * a.k.sl + c] : 0.f;
            vs[r][c] = ok ? vb[(long)(j0 + r) * a.v.sl + c] : 0.f;
        }
        for (int e = tid; e < AF_BR * AF_BC; e += AF_BR) {
            const int r = e / AF_BC, cc = e % AF_BC;
            bs[r][cc] = (bb && i0 + r < L && cc < nj)
                            ? bb[(long)(i0 + r) * a.bias_si + (long)(j0 + cc) * a.bias_sj]
                            : 0.f;
        }
        __syncthreads();
        if (valid) {
            float s[AF_BC];
            float mt = m;
#pragma unroll
            for (int jj = 0; jj < AF_BC; ++jj) {
                float dot = 0.f;
#pragma unroll
                for (int c = 0; c < DM; ++c) dot += qv[c] * ks[jj][c];
                s[jj] = jj < nj ? a.scale * dot + bs[tid][jj] : -INFINITY;
                mt = fmaxf(mt, s[jj]);
            }
            const float corr = expf(m - mt); /* 0 on the first tile (m = -inf) */
            l *= corr;
#pragma unroll
            for (int c = 0; c < DM; ++c) acc[c] *= corr;
#pragma unroll
            for (int jj = 0; jj < AF_BC; ++jj) {
                const float p = expf(s[jj] - mt); /* 0 past the last key */
                l += p;
#pragma unroll
                for (int c = 0; c < DM; ++c) acc[c] += p * vs[jj][c];
            }
            m = mt;
        }
    }
    if (valid) {
        T *ob = tf_attn_at<T>(a.out, b, o, h, d) + (long)i * a.out.sl;
        const float inv = 1.f / l;
#pragma unroll
        for (int c = 0; c < DM; ++c)
            if (c < d) ob[c] = acc[c] * inv;
        a.lse[(((long)b * a.no + o) * a.nh + h) * L + i] = m + logf(l);
    }
}

TF_ATTN_KERNELS_T(attn_fwd_kernel1, attn_fwd_body, AF_BR)

extern "C" void tf_cu_attn_fwd(tf_backend *be, const tf_attn_args *a)
{
    const tf_gpu_attn_shape s = {a->L, a->d, 0, a->t != TF_F32};
    switch (tf_gpu_route_attn(&be->plan, &be->caps, &s, be->tf32)) { /* gpu_plan.h */
    case TF_GPU_ATTN_KERNEL6: tf_cu_attn_fwd6(be, a); return;
    case TF_GPU_ATTN_KERNEL5: tf_cu_attn_fwd5(be, a); return;
    case TF_GPU_ATTN_KERNEL4: tf_cu_attn_fwd4(be, a); return;
    case TF_GPU_ATTN_KERNEL2: tf_cu_attn_fwd2(be, a, 0); return;
    case TF_GPU_ATTN_KERNEL3: tf_cu_attn_fwd2(be, a, 1); return;
    case TF_GPU_ATTN_KERNEL1: break;
    }
    if (!tf_attn_check(a)) return;
    const long ntile = (a->L + AF_BR - 1) / AF_BR;
    const long nblk = (long)a->nb * a->no * a->nh * ntile;
    TF_ATTN_LAUNCH_T(attn_fwd_kernel1, a->t, tf_attn_dm(a->d), dim3((unsigned)nblk), dim3(AF_BR),
                   be->stream, *a);
}
