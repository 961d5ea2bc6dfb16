/* A LayerNorm row held by one 32-lane group, VW (2 or 4) consecutive
 * columns a lane, C = 32 VW (the vector-row kernels of cuda_layernorm.cu),
 * and layernorm2's whole forward row at C 128. Shared by the LayerNorm
 * kernels and the fused ops that normalise their input rows themselves
 * (cuda_trimul_in.cu), so that both compute the same bits. */
#ifndef TF_CUDA_LN_VROW_H
#define TF_CUDA_LN_VROW_H

#include "cuda_common.h"

#define LN2_CACHE 4 /* values per lane held in registers: C <= 128 */

/* p's VW (4 or 2) elements widened into v */
template <int VW, class T>
__device__ __forceinline__ void ln_vld(const T *p, float (&v)[LN2_CACHE])
{
    if (VW == 4) {
        const float4 t = tf_cu_ld4(p);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        const float2 t = tf_cu_ld2(p);
        v[0] = t.x, v[1] = t.y, v[2] = 0.f, v[3] = 0.f;
    }
}

/* mean and 1/std of the group's row of TF_GROUP * VW values (two-pass variance) */
template <int VW>
__device__ __forceinline__ void ln_vrow_stats(const float (&v)[LN2_CACHE], float eps, float &mu,
                                              float &rs)
{
    constexpr int C = TF_GROUP * VW;
    float s = 0.f, q = 0.f;
#pragma unroll
    for (int k = 0; k < VW; ++k) s += v[k];
    mu = tf_warp_sum(s) / C;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
        const float d = v[k] - mu;
        q += d * d;
    }
    rs = 1.f / sqrtf(tf_warp_sum(q) / C + eps);
}

/* layernorm2's forward of one row of 128 (ops.h layernorm2_fwd): v holds the
 * lane's 4 columns of x in, of the output out; p1 q1 p2 q2 the lane's
 * columns of g1 b1 g2 b2; st the row's mean1 rstd1 mean2 rstd2 */
__device__ __forceinline__ void ln2_vrow128(float (&v)[LN2_CACHE], const float (&p1)[LN2_CACHE],
                                            const float (&q1)[LN2_CACHE],
                                            const float (&p2)[LN2_CACHE],
                                            const float (&q2)[LN2_CACHE], float eps,
                                            float (&st)[4])
{
    ln_vrow_stats<4>(v, eps, st[0], st[1]);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = (v[k] - st[0]) * st[1] * p1[k] + q1[k]; /* y1 */
    ln_vrow_stats<4>(v, eps, st[2], st[3]);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = (v[k] - st[2]) * st[3] * p2[k] + q2[k];
}

#endif
