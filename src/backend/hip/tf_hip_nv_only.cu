/* The HIP build's entry points of the NVIDIA-only files (cuda_gemm_mma.cu,
 * cuda_gemm_wgmma.cu, cuda_attn5_*.cu, cuda_attn6_*.cu, cuda_opm_mma.cu, cuda_opm_fused*.cu,
 * cuda_trimul_proj.cu, cuda_trimul_out.cu, cuda_transition.cu: mma.sync, wgmma and cp.async PTX), which CMake leaves
 * out of it. Each says it does not run; the routing (the
 * caps of a HIP build have no mma.sync, cp.async or wgmma: gpu_plan.h) never
 * reaches the ones that would fail. */
#include "backend/cuda/cuda_attn4.h"
#include "backend/cuda/cuda_attn6.h"
#include "backend/cuda/cuda_common.h"

extern "C" int tf_cu_wg_probe(tf_backend *be)
{
    (void)be;
    return 0;
}
extern "C" void tf_cu_gemm_tc(tf_backend *be, const tf_gemm_args *a, const tf_gpu_gemm_route *r)
{
    (void)be, (void)a, (void)r;
    tf_cuda_fail("tf_cu_gemm_tc", "the tensor-core GEMM kernels (mma.sync, wgmma) are not in "
                 "the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_attn_fwd5(tf_backend *be, const tf_attn_args *a)
{
    (void)be, (void)a;
    tf_cuda_fail("tf_cu_attn_fwd5", "attention kernel5 (mma.sync) is not in the HIP build",
                 __FILE__, __LINE__);
}
extern "C" void tf_cu_attn_bwd5(tf_backend *be, const tf_attn_args *a)
{
    (void)be, (void)a;
    tf_cuda_fail("tf_cu_attn_bwd5", "attention kernel5 (mma.sync) is not in the HIP build",
                 __FILE__, __LINE__);
}
extern "C" void tf_cu_attn_fwd6(tf_backend *be, const tf_attn_args *a)
{
    (void)be, (void)a;
    tf_cuda_fail("tf_cu_attn_fwd6", "attention kernel6 (mma.sync) is not in the HIP build",
                 __FILE__, __LINE__);
}
extern "C" void tf_cu_attn_bwd6(tf_backend *be, const tf_attn_args *a)
{
    (void)be, (void)a;
    tf_cuda_fail("tf_cu_attn_bwd6", "attention kernel6 (mma.sync) is not in the HIP build",
                 __FILE__, __LINE__);
}
extern "C" void tf_cu_opm_bwd_mma_h(tf_backend *be, void *da, const void *dop, const void *a,
                                    int B, int S, int N, tf_dtype t)
{
    (void)be, (void)da, (void)dop, (void)a, (void)B, (void)S, (void)N, (void)t;
    tf_cuda_fail("tf_cu_opm_bwd_mma_h", "the outer product mean's mma.sync kernels are not in "
                 "the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_opm_outer_mma_h(tf_backend *be, void *out, const void *a, int B, int S,
                                      int N, tf_dtype t)
{
    (void)be, (void)out, (void)a, (void)B, (void)S, (void)N, (void)t;
    tf_cuda_fail("tf_cu_opm_outer_mma_h", "the outer product mean's mma.sync kernels are not in "
                 "the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_opm_fwd(tf_backend *be, float *z_out, const float *z_in, const void *a,
                                const void *W, int B, int S, int N, int co, int cz, tf_dtype t)
{
    (void)be, (void)z_out, (void)z_in, (void)a, (void)W, (void)B, (void)S, (void)N, (void)co;
    (void)cz, (void)t;
    tf_cuda_fail("tf_cu_t_opm_fwd", "the outer product mean's fused kernel is not in the HIP "
                 "build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_opm_bwd_dz(tf_backend *be, void *da, float *dW, const void *dz,
                                   const void *a, const void *W, int B, int S, int N, int co,
                                   int cz, tf_dtype t)
{
    (void)be, (void)da, (void)dW, (void)dz, (void)a, (void)W, (void)B, (void)S, (void)N, (void)co;
    (void)cz, (void)t;
    tf_cuda_fail("tf_cu_t_opm_bwd_dz", "the outer product mean's fused kernels are not in the HIP "
                 "build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_trimul_proj_fwd(tf_backend *be, void *lr_t, void *og, void *y,
                                        float *stats, const float *x, const float *g1,
                                        const float *b1, const float *g2, const float *b2,
                                        float eps, const void *W4, const void *Wog, long rows,
                                        long ldt, int C, tf_dtype t)
{
    (void)be, (void)lr_t, (void)og, (void)y, (void)stats, (void)x, (void)g1, (void)b1, (void)g2;
    (void)b2, (void)eps, (void)W4, (void)Wog, (void)rows, (void)ldt, (void)C, (void)t;
    tf_cuda_fail("tf_cu_t_trimul_proj_fwd", "the triangle multiplication's mma.sync kernels are "
                 "not in the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_trimul_proj_bwd(tf_backend *be, void *dproj, const void *dlr_t,
                                        const void *y, const void *W4, long rows, long ldt,
                                        int C, tf_dtype t)
{
    (void)be, (void)dproj, (void)dlr_t, (void)y, (void)W4, (void)rows, (void)ldt, (void)C;
    (void)t;
    tf_cuda_fail("tf_cu_t_trimul_proj_bwd", "the triangle multiplication's mma.sync kernels are "
                 "not in the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_trimul_out_fwd(tf_backend *be, float *z_out, const float *z_in,
                                       const void *u_t, const void *Wo, const void *og, long rows,
                                       long ldt, int C, tf_dtype t)
{
    (void)be, (void)z_out, (void)z_in, (void)u_t, (void)Wo, (void)og, (void)rows, (void)ldt;
    (void)C, (void)t;
    tf_cuda_fail("tf_cu_t_trimul_out_fwd", "the triangle multiplication's mma.sync kernels are "
                 "not in the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_t_trimul_out_bwd(tf_backend *be, void *dout, void *dog, void *du,
                                       const float *dz, const void *u_t, const void *Wo,
                                       const void *og, long rows, long ldt, int C, tf_dtype t)
{
    (void)be, (void)dout, (void)dog, (void)du, (void)dz, (void)u_t, (void)Wo, (void)og;
    (void)rows, (void)ldt, (void)C, (void)t;
    tf_cuda_fail("tf_cu_t_trimul_out_bwd", "the triangle multiplication's mma.sync kernels are "
                 "not in the HIP build", __FILE__, __LINE__);
}
extern "C" void tf_cu_transition_fwd_h(tf_backend *be, float *x_out, float *mean, float *rstd,
                                       const float *x, const float *gamma, const float *beta,
                                       const void *W1, const void *W2, long rows, int C,
                                       float eps, tf_dtype t)
{
    (void)be, (void)x_out, (void)mean, (void)rstd, (void)x, (void)gamma, (void)beta, (void)W1;
    (void)W2, (void)rows, (void)C, (void)eps, (void)t;
    tf_cuda_fail("tf_cu_transition_fwd_h", "the transition's mma.sync kernels are not in the HIP "
                 "build", __FILE__, __LINE__);
}
extern "C" void tf_cu_transition_bwd_h(tf_backend *be, float *dx, float *dgamma, float *dbeta,
                                       void *xn, void *h, void *dh, const void *dy,
                                       const float *x, const float *mean, const float *rstd,
                                       const float *gamma, const float *beta, const void *W1,
                                       const void *W2, long rows, int C, tf_dtype t)
{
    (void)be, (void)dx, (void)dgamma, (void)dbeta, (void)xn, (void)h, (void)dh, (void)dy;
    (void)x, (void)mean, (void)rstd, (void)gamma, (void)beta, (void)W1, (void)W2, (void)rows;
    (void)C, (void)t;
    tf_cuda_fail("tf_cu_transition_bwd_h", "the transition's mma.sync kernels are not in the HIP "
                 "build", __FILE__, __LINE__);
}
