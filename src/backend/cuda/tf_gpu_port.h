/* One GPU backend source, three toolchains: nvcc (CUDA), hipcc (HIP, AMD
 * GPUs) and g++ with hostemu (the kernels on the CPU, tests/hostemu/emu.h).
 * The backend is written in CUDA's names; this header maps them where they
 * differ and gives the few device helpers whose spelling differs (shuffles,
 * the warp barrier, cached loads), so no kernel is copied per vendor.
 *
 * Warps. TF_WARP is the hardware warp of the code being compiled, a
 * compile-time constant: 32 on NVIDIA and RDNA (gfx10xx, gfx11xx), 64 on CDNA
 * (gfx90a, gfx940..942, gfx950); hostemu takes it from -DTF_WARP (32 or 64).
 * Host code does not know it: one HIP binary holds code for wave64 and wave32
 * targets at once, and a launch's geometry is decided on the host. So the
 * kernels cooperate in lane groups of TF_GROUP = 32 lanes (a row of a
 * LayerNorm, a group of a reduction), which every target's warp holds a whole
 * number of; a shuffle names the width of its group (tf_shfl_*, at most
 * TF_WARP), and nothing reads a mask or a lane index as if the warp had 32
 * lanes. What needs the hardware warp (a whole-warp shuffle) uses TF_WARP.
 *
 * NVIDIA-only code (PTX: wgmma, mma.sync, cp.async, griddepcontrol,
 * %globaltimer) is compiled where TF_HAVE_NV_PTX is 1; elsewhere its files
 * build to entry points that say they do not run, and the portable routing
 * never calls them (the caps of such a build route to the portable plan). */
#ifndef TF_GPU_PORT_H
#define TF_GPU_PORT_H

#if defined(TF_CUDA_HOSTEMU)
/* ---- hostemu ------------------------------------------------------------ */
#include "emu.h" /* tests/hostemu */
#ifndef TF_WARP
#define TF_WARP 32
#endif
#define TF_HAVE_NV_PTX 0
#define TF_GPU_HIP 0

#elif defined(TF_HIP)
/* ---- HIP (ROCm 5.2 .. 7) ---------------------------------------------- */
#include <hip/hip_runtime.h>
#define TF_GPU_HIP 1
#define TF_HAVE_NV_PTX 0
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
#define TF_WARP __AMDGCN_WAVEFRONT_SIZE
#elif defined(__HIP_DEVICE_COMPILE__)
#define TF_WARP 64
#else
#define TF_WARP 64 /* host pass: not to be used for launch geometry (above) */
#endif

/* runtime: types and calls */
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define cudaDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define cudaDevAttrWarpSize hipDeviceAttributeWarpSize
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost(p, n) hipHostMalloc((p), (n), 0)
#define cudaFreeHost hipHostFree
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
/* streams and events */
#define cudaStream_t hipStream_t
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamCreateWithPriority hipStreamCreateWithPriority
#define cudaDeviceGetStreamPriorityRange hipDeviceGetStreamPriorityRange
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
/* graphs (hipGraph: stream capture, instantiate, replay) */
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphNode_t hipGraphNode_t
#define cudaGraphNodeType hipGraphNodeType
#define cudaGraphNodeTypeKernel hipGraphNodeTypeKernel
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaGraphGetNodes hipGraphGetNodes
#define cudaGraphNodeGetType hipGraphNodeGetType
/* CUDA's (exec, graph, flags); HIP 5.x has only (exec, graph, node, log, size) */
#define cudaGraphInstantiate(e, g, flags) hipGraphInstantiate((e), (g), NULL, NULL, 0)
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy

/* cuBLAS / cuBLASLt: our declarations; tf_hip_blas.cpp implements them on
 * rocBLAS (dlopen'd), cuBLASLt's heuristic offering nothing, so every GEMM
 * takes the backend's strided-batched library path */
#include "tf_blas_api.h"

/* loads through L2 only: a plain load (the backend's uses are coherent) */
template <class T>
__device__ __forceinline__ T __ldcg(const T *p)
{
    return *p;
}

#else
/* ---- CUDA ------------------------------------------------------------- */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define TF_GPU_HIP 0
#define TF_HAVE_NV_PTX 1
#define TF_WARP 32
#endif

#define TF_GROUP 32 /* lanes of the kernels' cooperating groups (above) */

/* The NVIDIA-only kernels (mma.sync, wgmma) run: CUDA, and hostemu at 32 lanes
 * (its mma.sync emulation exchanges a 32-lane warp's fragments) */
#if TF_HAVE_NV_PTX || (defined(TF_CUDA_HOSTEMU) && TF_WARP == 32)
#define TF_NV_KERNELS 1
#else
#define TF_NV_KERNELS 0
#endif

#ifdef __cplusplus
/* ---- shuffles within an aligned group of w lanes (w a power of two <= TF_WARP;
 * every lane of the group takes part) ---------------------------------------- */
#if defined(TF_CUDA_HOSTEMU)
template <class T>
static inline T tf_shfl_xor(T v, int m, int w = TF_GROUP)
{
    return emu_shfl_group(v, (emu_lane() & ~(w - 1)) | ((emu_lane() ^ m) & (w - 1)), w);
}
template <class T>
static inline T tf_shfl(T v, int src, int w = TF_GROUP)
{
    return emu_shfl_group(v, (emu_lane() & ~(w - 1)) | (src & (w - 1)), w);
}
/* the group's lanes meet (shared memory written before is visible after) */
static inline void tf_syncwarp() { emu_group_sync(TF_GROUP); }
#elif TF_GPU_HIP
template <class T>
__device__ __forceinline__ T tf_shfl_xor(T v, int m, int w = TF_GROUP)
{
    return __shfl_xor(v, m, w);
}
template <class T>
__device__ __forceinline__ T tf_shfl(T v, int src, int w = TF_GROUP)
{
    return __shfl(v, src, w);
}
/* a wavefront runs in lockstep: the fences order its lanes' shared memory */
__device__ __forceinline__ void tf_syncwarp()
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#else
template <class T>
__device__ __forceinline__ T tf_shfl_xor(T v, int m, int w = TF_GROUP)
{
    return __shfl_xor_sync(0xffffffffu, v, m, w);
}
template <class T>
__device__ __forceinline__ T tf_shfl(T v, int src, int w = TF_GROUP)
{
    return __shfl_sync(0xffffffffu, v, src, w);
}
__device__ __forceinline__ void tf_syncwarp() { __syncwarp(); }
#endif
#endif /* __cplusplus */

#endif
