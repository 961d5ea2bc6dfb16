/* hostemu: run the CUDA backend's kernels on the CPU, to check them where
 * there is no GPU (this development machine, CPU-only CI).
 *
 * The backend's .cu files are compiled by g++ as C++ with -DTF_CUDA_HOSTEMU;
 * cuda_common.h then includes this header instead of the CUDA ones. A kernel
 * launch runs the grid block after block; inside a block every CUDA thread is
 * a coroutine (ucontext) with its own stack, switched at __syncthreads and at
 * warp shuffles, which are real barriers here: a divergent barrier or a
 * shuffle with missing lanes deadlocks and is reported, as a bug. __shared__
 * is `static` (blocks run one at a time, so one copy serves every block).
 * The CUDA runtime, cuBLAS and cuBLASLt calls the backend makes are small
 * host implementations (naive column-major GEMM, TF32 input rounding when
 * asked), and stream capture records launches for replay, so graph capture
 * can be tested too. The cuBLASLt heuristic offers three "algorithms" (see
 * cublasLtMatmulAlgoGetHeuristic in emu.cpp); the second sums K in two
 * halves (split-K), so a plan that switched algorithms between two calls shows
 * up as differing bits. HOSTEMU_LT_NONE=all (no algorithm ever) or =relu_batch
 * (none for a RELU epilogue on a batch) reach the backend's fallbacks.
 * cublasLtMatmul reads C and writes D, which may differ (as in cuBLASLt).
 * HOSTEMU_SMS=n reports n SMs instead of 4 (a GPU's routing: split K counts);
 * HOSTEMU_BLOCK_ORDER=reverse|shuffle runs a grid's blocks in another order
 * (work finished by whichever block arrives last must not depend on it).
 *
 * It checks the logic (indexing, tiling, barriers, reductions); it says
 * nothing about speed, and float results may differ from the GPU's in the
 * last bits (no FMA contraction guarantee, host expf).
 * Not built by CMake; see hostemu/run_tests.sh. */
#ifndef TF_CUDA_HOSTEMU_EMU_H
#define TF_CUDA_HOSTEMU_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

/* The warp width the kernels are built for: 32 (NVIDIA, RDNA) or 64 (CDNA),
 * -DTF_WARP=64 to emulate an AMD Instinct wavefront. */
#ifndef TF_WARP
#define TF_WARP 32
#endif
#if TF_WARP != 32 && TF_WARP != 64
#error "TF_WARP must be 32 or 64"
#endif
#if TF_WARP == 64
#define EMU_FULL_MASK 0xffffffffffffffffull
#else
#define EMU_FULL_MASK 0xffffffffull
#endif

/* ---- language ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
/* aligned like CUDA's, so that UBSan (run_tests.sh --asan) reports a vector
 * access through a misaligned pointer, as the GPU would fault on it */
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

void __syncthreads();
/* CUDA's warp calls, CUDA's semantics on a warp of TF_WARP lanes: the mask
 * must name every (active) lane of the warp, so a 32-lane mask on a 64-lane
 * warp is reported */
void __syncwarp(unsigned long long mask = EMU_FULL_MASK);
/* the value exchange behind the shuffles: lane `src` of this thread's warp */
uint64_t emu_shfl(unsigned long long mask, uint64_t bits, int src_lane);
int emu_lane(); /* 0 .. TF_WARP - 1 */
/* tf_gpu_port.h's group shuffles: every lane of this lane's aligned group of
 * w lanes (the 32-lane group when w <= 32, else the warp) takes part, and the
 * value of lane src (a lane of the same group, else reported) is returned;
 * emu_group_sync(w) is the group's barrier */
uint64_t emu_shfl_bits_group(uint64_t bits, int src_lane, int w);
void emu_group_sync(int w);
/* every lane of the (whole) 32-lane warp gives n <= EMU_XN words and gets all 32 x n,
 * lane-major: what n shuffles per value would fetch, in two barriers */
#define EMU_XN 8
void emu_warp_exchange(const uint32_t *mine, int n, uint32_t *all);

template <class T>
static inline T emu_shfl_t(unsigned long long mask, T v, int src)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = emu_shfl(mask, b, src);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
template <class T>
static inline T emu_shfl_group(T v, int src, int w)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = emu_shfl_bits_group(b, src, w);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
template <class T>
static inline T __shfl_xor_sync(unsigned long long mask, T v, int lane_mask, int width = 32)
{
    const int lane = emu_lane();
    const int src = (lane & ~(width - 1)) | ((lane ^ lane_mask) & (width - 1));
    return emu_shfl_t(mask, v, src);
}
template <class T>
static inline T __shfl_sync(unsigned long long mask, T v, int src_lane, int width = 32)
{
    const int lane = emu_lane();
    return emu_shfl_t(mask, v, (lane & ~(width - 1)) | (src_lane & (width - 1)));
}
template <class T>
static inline T __shfl_down_sync(unsigned long long mask, T v, unsigned delta, int width = 32)
{
    const int lane = emu_lane();
    const int base = lane & ~(width - 1);
    const int src = (lane - base) + (int)delta < width ? lane + (int)delta : lane;
    return emu_shfl_t(mask, v, src);
}

/* blocks run one at a time, to completion: memory is always coherent */
static inline void __threadfence() {}
static inline int atomicAdd(int *p, int v)
{
    const int old = *p;
    *p = old + v;
    return old;
}
template <class T>
static inline T __ldcg(const T *p)
{
    return *p;
}

static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }

/* ---- runtime ---- */
typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureUnjoined = 904
};
typedef struct emu_stream *cudaStream_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3
};
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph_node *cudaGraphNode_t;
enum cudaGraphNodeType {
    cudaGraphNodeTypeKernel = 0,
    cudaGraphNodeTypeMemcpy = 1,
    cudaGraphNodeTypeMemset = 2
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
#define cudaStreamNonBlocking 0x01
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int multiProcessorCount;
    int major, minor;
};

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind k,
                            cudaStream_t s);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind k, cudaStream_t s);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode m);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType *t);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
/* events time the host's execution of the stream's work (not capturable) */
cudaError_t cudaEventCreate(cudaEvent_t *e);
#define cudaEventDisableTiming 0x02
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
/* work runs when submitted (or replayed), in order: waits have nothing to do,
 * except during a capture: a stream that waits for an event recorded in one
 * joins it, and ending the capture fails (cudaErrorStreamCaptureUnjoined) when
 * a joined stream's last work was not waited for by another stream of it (as
 * CUDA's). Only events without timing may be recorded while capturing. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);

/* Runs (or, while capturing, records) `body` for every thread of the grid. */
void emu_launch(const char *name, dim3 grid, dim3 block, cudaStream_t s,
                std::function<void()> body);
/* Host-side hooks for tests: device count reported, and a device memory cap
 * (bytes; 0 = none) to exercise the out-of-memory path. */
void emu_set_device_count(int n);
void emu_set_mem_limit(size_t bytes);

/* ---- cuBLAS, cuBLASLt: the declarations the HIP build shares ---- */
#include "backend/cuda/tf_blas_api.h"

#endif
