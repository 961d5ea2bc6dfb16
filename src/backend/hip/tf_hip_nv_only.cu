/* The HIP build's entry points of the NVIDIA-only files (cuda_gemm_mma.cu,
 * cuda_gemm_wgmma.cu, cuda_attn5_*.cu: mma.sync, wgmma and cp.async PTX),
 * which CMake leaves out of it. Each says it does not run; the routing
 * (tf_cu_portable_only, tf_attn5_fits) never reaches the ones that would fail. */
#include "backend/cuda/cuda_attn4.h"
#include "backend/cuda/cuda_common.h"

extern "C" int tf_cu_wg_probe(tf_backend *be)
{
    (void)be;
    return 0;
}
extern "C" int tf_cu_gemm_mma(tf_backend *be, const tf_gemm_args *a)
{
    (void)be, (void)a;
    return 0;
}
extern "C" int tf_cu_gemm_wide(tf_backend *be, const tf_gemm_args *a, int run)
{
    (void)be, (void)a, (void)run;
    return 0;
}
extern "C" int tf_attn5_fits(const tf_attn_args *a)
{
    (void)a;
    return 0;
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
