/* cp.async, global to shared memory, and where there is no PTX (hostemu, HIP)
 * the same copy done at once: the waits then have nothing to wait for. */
#ifndef TF_CUDA_CP_ASYNC_H
#define TF_CUDA_CP_ASYNC_H

#include <string.h>

#include "cuda_common.h"

#if !TF_HAVE_NV_PTX
__device__ __forceinline__ void tf_cp_async(void *dst, const void *src, int bytes, bool ok)
{
    if (ok) memcpy(dst, src, (size_t)bytes);
    else memset(dst, 0, (size_t)bytes);
}
__device__ __forceinline__ void tf_cp_commit() {}
template <int N> __device__ __forceinline__ void tf_cp_wait() {}
#else
/* `bytes` (4, 8 or 16, the addresses aligned to it) from src to dst;
 * zero-filled when !ok (src not read) */
__device__ __forceinline__ void tf_cp_async(void *dst, const void *src, int bytes, bool ok)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    const int n = ok ? bytes : 0;
    if (bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(n));
    else if (bytes == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(src), "r"(n));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(n));
}
/* the copies issued since the last commit form a group */
__device__ __forceinline__ void tf_cp_commit() { asm volatile("cp.async.commit_group;"); }
/* this thread's groups complete but the newest N */
template <int N> __device__ __forceinline__ void tf_cp_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
#endif

#endif
