/* The CUDA backend: device selection, its capabilities and plan (gpu_plan.h),
 * the streams and library handles, exact memory accounting, memory ops, graph
 * capture, and the op table.
 *
 * Three non-default streams: the main queue (highest priority), the copy
 * queue (side_upload, the next batch's inputs) and the weight-gradient lane
 * (cuda_wgrad.cu, created by wgrad_enable, lowest priority). cuBLAS and
 * cuBLASLt share one workspace per queue allocated here (cublasSetWorkspace),
 * so no library allocates during a step and a step can be captured as a CUDA
 * graph.
 *
 * Precision: fp32 uses CUBLAS_DEFAULT_MATH with CUBLAS_COMPUTE_32F, which never
 * uses TF32 tensor cores; --precision tf32 sets CUBLAS_TF32_TENSOR_OP_MATH and
 * CUBLAS_COMPUTE_32F_FAST_TF32 (cuBLASLt: CUBLASLT_COMPUTE_32F_FAST_TF32). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_caps.h"
#include "cuda_common.h"

extern "C" void tf_cuda_fail(const char *call, const char *msg, const char *file, int line)
{
    fprintf(stderr, "tinyfold: internal CUDA error: %s failed: %s (%s:%d)\n", call, msg, file,
            line);
    abort();
}

/* ---- availability ---------------------------------------------------------- */
#if TF_GPU_HIP
#include <unistd.h>
extern "C" const char *tf_hip_blas_why(void); /* tf_hip_blas.cpp: "" when rocBLAS loads */

/* HIP: the ROCm kernel driver's device node, then a device, then rocBLAS */
extern "C" int tf_cuda_backend_available(char *why, size_t n)
{
    int count = 0;
    if (access("/dev/kfd", R_OK | W_OK) != 0) {
        if (why && n)
            snprintf(why, n, "no ROCm runtime: /dev/kfd is missing or not accessible (the "
                             "amdgpu kernel driver is not loaded, or this user is not in the "
                             "render group)");
        return 0;
    }
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count <= 0) {
        if (why && n)
            snprintf(why, n, "no AMD GPU: hipGetDeviceCount %s (%s)",
                     e != hipSuccess ? "failed" : "found 0 devices", hipGetErrorString(e));
        (void)hipGetLastError();
        return 0;
    }
    const char *blas = tf_hip_blas_why();
    if (blas[0]) {
        if (why && n) snprintf(why, n, "%d AMD GPU(s), but %s", count, blas);
        return 0;
    }
    if (why && n) snprintf(why, n, "%d AMD GPU(s)", count);
    return 1;
}
#else
extern "C" int tf_cuda_backend_available(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        if (why && n)
            snprintf(why, n, "no usable CUDA device: cudaGetDeviceCount failed: %s (%s, code %d)",
                     cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    if (count <= 0) {
        if (why && n) snprintf(why, n, "no usable CUDA device: cudaGetDeviceCount found 0 devices");
        return 0;
    }
    if (why && n) snprintf(why, n, "%d CUDA device(s)", count);
    return 1;
}
#endif

extern "C" void tf_cuda_unavailable_brief(char *out, size_t n)
{
    if (!out || !n)
        return;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
#ifdef CUDART_VERSION /* the CUDA runtime (not HIP, not the emulator) */
    if (e == cudaErrorInsufficientDriver)
        snprintf(out, n, "no usable GPU (driver too old for CUDA %d)", CUDART_VERSION / 1000);
    else
#endif
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count <= 0))
        snprintf(out, n, "no GPU found");
    else if (e != cudaSuccess)
        snprintf(out, n, "no usable GPU (%s)", cudaGetErrorName(e));
    else
        snprintf(out, n, "%d GPU(s) usable", count);
}

/* Linked directly, without the module's loader (hostemu, the kernel
 * benchmark): auto is this check. */
extern "C" int tf_gpu_auto_available(char *why, size_t n)
{
    return tf_cuda_backend_available(why, n);
}

/* the GPU backend is built by nvcc (CUDA) or hipcc (HIP), never both */
extern "C" int tf_built_with_cuda(void) { return !TF_GPU_HIP; }
extern "C" int tf_built_with_hip(void) { return TF_GPU_HIP; }

/* ---- allocation bookkeeping ------------------------------------------------ */
static void track_add(tf_backend *be, void *p, size_t bytes)
{
    if (be->n_allocs == be->cap_allocs) {
        size_t cap = be->cap_allocs ? 2 * be->cap_allocs : 64;
        tf_cu_alloc_rec *r = (tf_cu_alloc_rec *)realloc(be->allocs, cap * sizeof *r);
        if (!r) {
            fprintf(stderr, "tinyfold: internal error: out of host memory (%s:%d)\n", __FILE__,
                    __LINE__);
            abort();
        }
        be->allocs = r;
        be->cap_allocs = cap;
    }
    be->allocs[be->n_allocs].p = p;
    be->allocs[be->n_allocs].bytes = bytes;
    be->n_allocs++;
    be->cur_bytes += bytes;
    if (be->cur_bytes > be->peak_bytes) be->peak_bytes = be->cur_bytes;
}

/* 0 ok; 1 when the device is out of memory (the caller reports it); any other
 * failure is an internal fault. */
extern "C" int tf_cu_alloc(tf_backend *be, void **p, size_t bytes)
{
    *p = NULL;
    if (bytes == 0) return 0;
    void *q = NULL;
    cudaError_t e = cudaMalloc(&q, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return 1;
    }
    TF_CUDA_CHECK(e);
    track_add(be, q, bytes);
    *p = q;
    return 0;
}

/* The per-queue resources (the main queue's at create, the weight-gradient
 * lane's in cuda_wgrad.cu; swap_lane there swaps the same set). */
extern "C" int tf_cu_queue_alloc(tf_backend *be, void **workspace, float **scratch, int **count)
{
    return tf_cu_alloc(be, workspace, TF_CU_WORKSPACE_BYTES) ||
           tf_cu_alloc(be, (void **)scratch, TF_CU_SCRATCH_FLOATS * sizeof(float)) ||
           tf_cu_alloc(be, (void **)count, TF_CU_MMA_COUNTERS * sizeof(int));
}

extern "C" cublasStatus_t tf_cu_blas_bind(const tf_backend *be, cublasHandle_t h,
                                          cudaStream_t s, void *workspace)
{
    /* cublasSetStream resets the workspace to cuBLAS' own pool: set it first */
    cublasStatus_t st = cublasSetStream(h, s);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetWorkspace(h, workspace, TF_CU_WORKSPACE_BYTES);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasSetMathMode(h, be->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    return st;
}

extern "C" void tf_cu_free(tf_backend *be, void *p)
{
    if (!p) return;
    for (size_t i = 0; i < be->n_allocs; ++i) {
        if (be->allocs[i].p == p) {
            be->cur_bytes -= be->allocs[i].bytes;
            be->allocs[i] = be->allocs[--be->n_allocs];
            TF_CUDA_CHECK(cudaFree(p));
            return;
        }
    }
    fprintf(stderr, "tinyfold: internal error: CUDA free of %p, which this backend did not "
                    "allocate (%s:%d)\n", p, __FILE__, __LINE__);
    abort();
}

/* ---- memory ops ------------------------------------------------------------ */
static int op_alloc(tf_backend *be, void **p, size_t bytes) { return tf_cu_alloc(be, p, bytes); }
static void op_free(tf_backend *be, void *p) { tf_cu_free(be, p); }

static int op_host_alloc(tf_backend *be, void **p, size_t bytes)
{
    (void)be;
    *p = NULL;
    if (cudaMallocHost(p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        *p = NULL;
        return 1;
    }
    return 0;
}
static void op_host_free(tf_backend *be, void *p)
{
    (void)be;
    if (p) TF_CUDA_CHECK(cudaFreeHost(p));
}

/* upload/download are synchronous for the host buffer: when they return, the
 * host side may be reused or read. */
static void op_upload(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream));
    TF_CUDA_CHECK(cudaStreamSynchronize(be->stream));
}
static void op_download(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, be->stream));
    TF_CUDA_CHECK(cudaStreamSynchronize(be->stream));
}
static void op_copy(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, be->stream));
}
static void op_copy_rows(tf_backend *be, void *dst, long dst_ld, const void *src, long src_ld,
                         long cols, long rows, tf_dtype t)
{
    if (!rows || !cols) return;
    const size_t f = tf_dtype_size(t);
    TF_CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)dst_ld * f, src, (size_t)src_ld * f,
                                    (size_t)cols * f, (size_t)rows, cudaMemcpyDeviceToDevice,
                                    be->stream));
}
static void op_zero(tf_backend *be, void *p, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, be->stream));
}
static void op_sync(tf_backend *be)
{
    TF_CUDA_CHECK(cudaStreamSynchronize(be->stream));
    TF_CUDA_CHECK(cudaStreamSynchronize(be->side));
    if (be->wstream) TF_CUDA_CHECK(cudaStreamSynchronize(be->wstream));
}
static void op_side_upload(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->side));
}
static void op_main_wait_side(tf_backend *be)
{
    TF_CUDA_CHECK(cudaEventRecord(be->ev_side, be->side));
    TF_CUDA_CHECK(cudaStreamWaitEvent(be->stream, be->ev_side, 0));
}
static void op_side_wait_main(tf_backend *be)
{
    TF_CUDA_CHECK(cudaEventRecord(be->ev_main, be->stream));
    TF_CUDA_CHECK(cudaStreamWaitEvent(be->side, be->ev_main, 0));
}

static void op_upload_async(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream));
}
static void op_download_async(tf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, be->stream));
}
static void op_mark(tf_backend *be, int k)
{
    TF_CUDA_CHECK(cudaEventRecord(be->marks[k], be->stream));
}
/* a lane GEMM swaps the two while it is issued (cuda_wgrad.cu): between ops
 * wstream is the lane's */
static void *op_queue(tf_backend *be, int lane)
{
    return lane ? (void *)be->wstream : (void *)be->stream;
}
static double op_mark_ms(tf_backend *be, int a, int b)
{
    float ms = 0;
    TF_CUDA_CHECK(cudaEventElapsedTime(&ms, be->marks[a], be->marks[b]));
    return ms;
}

/* ---- the op table ---------------------------------------------------------- */
static tf_ops make_ops(void)
{
    tf_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.destroy = tf_cuda_backend_destroy;
    o.peak_bytes = tf_cuda_backend_peak_bytes;
    o.describe = tf_cuda_backend_describe;
    o.caps = tf_cu_caps;
    o.graph_capture = tf_cuda_graph_capture;
    o.graph_launch = tf_cuda_graph_launch;
    o.graph_destroy = tf_cu_graph_destroy;
    o.graph_captured_kernels = tf_cuda_graph_captured_kernels;
    o.alloc = op_alloc;
    o.free = op_free;
    o.upload = op_upload;
    o.download = op_download;
    o.copy = op_copy;
    o.copy_rows = op_copy_rows;
    o.zero = op_zero;
    o.sync = op_sync;
    o.host_alloc = op_host_alloc;
    o.host_free = op_host_free;
    o.side_upload = op_side_upload;
    o.main_wait_side = op_main_wait_side;
    o.side_wait_main = op_side_wait_main;
    o.wgrad_enable = tf_cu_wgrad_enable;
    o.wgrad_mark = tf_cu_wgrad_mark;
    o.wgrad_wait = tf_cu_wgrad_wait;
    o.wgrad_wait_queue = tf_cu_wgrad_wait_queue;
    o.queue = op_queue;
    o.upload_async = op_upload_async;
    o.download_async = op_download_async;
    o.mark = op_mark;
    o.mark_ms = op_mark_ms;
    /* the ops: tf_cu_t_<name> for each (op_list.h) */
#define TF_OP(ret, op, params) o.op = tf_cu_t_##op;
#include "backend/op_list.h"
    return o;
}
static const tf_ops g_cuda_ops = make_ops();

/* ---- create / destroy ------------------------------------------------------ */
/* In create, failures are reported through err (the device may be busy, out of
 * memory, or the driver too old) instead of aborting. */
#define TRY_CUDA(call)                                                                   \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            snprintf(err, errlen, "CUDA backend: %s failed: %s (%s:%d)", #call,          \
                     cudaGetErrorString(e_), __FILE__, __LINE__);                        \
            (void)cudaGetLastError();                                                    \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)
#define TRY_BLAS(call)                                                                   \
    do {                                                                                 \
        cublasStatus_t s_ = (call);                                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
            snprintf(err, errlen, "CUDA backend: %s failed: %s (%s:%d)", #call,          \
                     cublasGetStatusString(s_), __FILE__, __LINE__);                     \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)

extern "C" int tf_cuda_backend_create(tf_backend **out, const tf_ops **ops,
                                      const tf_backend_opts *o, char *err, size_t errlen)
{
    char why[256];
    int count = 0;
    int dev = o ? o->device : 0;
    tf_backend *be = NULL;
    *out = NULL;
    if (ops) *ops = NULL;
    if (!tf_cuda_backend_available(why, sizeof why)) {
        snprintf(err, errlen, "%s", why);
        return 1;
    }
    TRY_CUDA(cudaGetDeviceCount(&count));
    if (dev < 0 || dev >= count) {
        snprintf(err, errlen, "CUDA device %d does not exist (this machine has %d: 0..%d)", dev,
                 count, count - 1);
        return 1;
    }
    be = (tf_backend *)calloc(1, sizeof *be);
    if (!be) {
        snprintf(err, errlen, "CUDA backend: out of host memory");
        return 1;
    }
    be->device = dev;
    be->kernel_level = (o && o->kernel_level >= 1 && o->kernel_level <= 3) ? o->kernel_level : 3;
    be->tf32 = o ? (o->tf32 != 0) : 0;
    TRY_CUDA(cudaSetDevice(dev));
    TRY_CUDA(cudaDeviceGetAttribute(&be->caps.sm_count, cudaDevAttrMultiProcessorCount, dev));
    if (be->caps.sm_count < 1) be->caps.sm_count = 1;
    be->sm_count = be->caps.sm_count;
    be->caps.vendor = TF_GPU_HIP ? TF_GPU_VENDOR_AMD : TF_GPU_VENDOR_NVIDIA;
#ifdef TF_CUDA_HOSTEMU
    /* the emulator runs every kernel, wgmma's primitives included (probe below) */
    be->caps.cc_major = 9, be->caps.cc_minor = 0, be->caps.warp_size = 32;
#else
    TRY_CUDA(cudaDeviceGetAttribute(&be->caps.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    TRY_CUDA(cudaDeviceGetAttribute(&be->caps.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    TRY_CUDA(cudaDeviceGetAttribute(&be->caps.warp_size, cudaDevAttrWarpSize, dev));
#endif
    /* the NVIDIA-only kernels (mma.sync, cp.async, wgmma: TF_NV_KERNELS) are
     * not in a HIP build: its default plan is then the portable one */
    be->caps.has_mma_sync = be->caps.has_cp_async = TF_NV_KERNELS && be->caps.cc_major >= 8;
    {
        /* the main queue at the highest priority: the weight-gradient lane's
         * blocks (cuda_wgrad.cu) fill what it leaves idle */
        int least = 0, greatest = 0;
        TRY_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        TRY_CUDA(cudaStreamCreateWithPriority(&be->stream, cudaStreamNonBlocking, greatest));
    }
    TRY_CUDA(cudaStreamCreateWithFlags(&be->side, cudaStreamNonBlocking));
    TRY_CUDA(cudaEventCreateWithFlags(&be->ev_main, cudaEventDisableTiming));
    TRY_CUDA(cudaEventCreateWithFlags(&be->ev_side, cudaEventDisableTiming));
    for (int k = 0; k < TF_MARKS; k++) TRY_CUDA(cudaEventCreate(&be->marks[k]));
    TRY_BLAS(cublasCreate(&be->blas));
    TRY_BLAS(cublasLtCreate(&be->lt));
    if (tf_cu_queue_alloc(be, &be->workspace, &be->scratch, &be->mma_count)) {
        snprintf(err, errlen, "not enough device memory for the CUDA backend's %zu MiB of "
                              "workspaces", (TF_CU_WORKSPACE_BYTES >> 20) +
                                                (TF_CU_SCRATCH_FLOATS * sizeof(float) >> 20));
        goto fail;
    }
    TRY_CUDA(cudaMemsetAsync(be->mma_count, 0, TF_CU_MMA_COUNTERS * sizeof(int), be->stream));
    be->caps.has_wgmma = be->caps.has_mma_sync && be->kernel_level >= 3 && tf_cu_wg_probe(be);
    be->plan = tf_gpu_plan_default(&be->caps, be->tf32, be->kernel_level);
    if (o) be->plan = tf_gpu_plan_apply(be->plan, &o->gpu_plan);
    if (be->plan.gemm == TF_GPU_GEMM_WGMMA && !be->caps.has_wgmma)
        fprintf(stderr, "tinyfold: --gpu-plan gemm=wgmma: no wgmma code for this GPU (it needs "
                        "an sm_90a build on a compute capability 9.0 device); the mma.sync "
                        "kernel runs instead\n");
    TRY_BLAS(tf_cu_blas_bind(be, be->blas, be->stream, be->workspace));
    *out = be;
    if (ops) *ops = &g_cuda_ops;
    return 0;
fail:
    tf_cuda_backend_destroy(be);
    return 1;
}
#undef TRY_CUDA
#undef TRY_BLAS

extern "C" void tf_cuda_backend_destroy(tf_backend *be)
{
    if (!be) return;
    if (be->stream) (void)cudaStreamSynchronize(be->stream);
    tf_cu_wgrad_destroy(be);
    tf_cu_gemm_destroy_plans(be);
    /* whatever the trainer left allocated goes too, workspaces included */
    while (be->n_allocs) tf_cu_free(be, be->allocs[be->n_allocs - 1].p);
    free(be->allocs);
    if (be->lt) (void)cublasLtDestroy(be->lt);
    if (be->blas) (void)cublasDestroy(be->blas);
    if (be->side) (void)cudaStreamSynchronize(be->side);
    if (be->ev_main) (void)cudaEventDestroy(be->ev_main);
    if (be->ev_side) (void)cudaEventDestroy(be->ev_side);
    for (int k = 0; k < TF_MARKS; k++)
        if (be->marks[k]) (void)cudaEventDestroy(be->marks[k]);
    if (be->side) (void)cudaStreamDestroy(be->side);
    if (be->stream) (void)cudaStreamDestroy(be->stream);
    free(be);
}

extern "C" size_t tf_cuda_backend_peak_bytes(const tf_backend *be)
{
    return be ? be->peak_bytes : 0;
}

extern "C" void tf_cuda_backend_describe(const tf_backend *be, char *out, size_t n)
{
    if (!out || !n) return;
    if (!be) {
        snprintf(out, n, "CUDA backend not created");
        return;
    }
#if TF_GPU_HIP
    {
        /* HIP: runtime, device, architecture and its wavefront (warp) width */
        hipDeviceProp_t hp;
        int hrt = 0;
        memset(&hp, 0, sizeof hp);
        TF_CUDA_CHECK(hipGetDeviceProperties(&hp, be->device));
        TF_CUDA_CHECK(hipRuntimeGetVersion(&hrt));
        snprintf(out, n,
                 "device %d: %s (%s), warp width %d, %d CUs, %.1f GiB; HIP runtime %d.%d.%d; "
                 "rocBLAS GEMMs (fp32 accumulation); portable kernels; kernel level %d",
                 be->device, hp.name, hp.gcnArchName, hp.warpSize, hp.multiProcessorCount,
                 (double)hp.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), hrt / 10000000,
                 hrt / 100000 % 100, hrt % 100000, be->kernel_level);
        return;
    }
#endif
    cudaDeviceProp prop;
    int rt = 0, drv = 0, blas = 0;
    memset(&prop, 0, sizeof prop);
    TF_CUDA_CHECK(cudaGetDeviceProperties(&prop, be->device));
    TF_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    TF_CUDA_CHECK(cudaDriverGetVersion(&drv));
    TF_CUBLAS_CHECK(cublasGetVersion(be->blas, &blas));
    char plan[128];
    tf_gpu_plan_format(&be->plan, plan, sizeof plan);
    const char *where = be->kernel_level < 3 ? "cuBLAS" : be->caps.has_wgmma ? "wgmma code present"
                                                                          : "no wgmma code";
    snprintf(out, n,
             "device %d: %s (sm_%d%d), %d SMs, %.1f GiB; CUDA runtime %d.%d, driver %d.%d; "
             "cuBLAS %d.%d.%d, cuBLASLt %zu; %s GEMMs (%s); kernel level %d; plan %s",
             be->device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), rt / 1000,
             (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, blas / 10000, (blas / 100) % 100,
             blas % 100, cublasLtGetVersion(), be->tf32 ? "tf32" : "fp32", where,
             be->kernel_level, plan);
}

/* ---- graph capture --------------------------------------------------------- */
/* Captures fn(arg) on the backend stream (thread-local mode: only this thread's
 * unsafe calls, e.g. a cudaMalloc inside the step, break the capture) and
 * instantiates it. 0 ok; non-zero with one line on stderr otherwise. */
extern "C" int tf_cuda_graph_capture(tf_backend *be, void (*fn)(void *), void *arg,
                                     void **graph_exec)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    *graph_exec = NULL;
    TF_CUDA_CHECK(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal));
    fn(arg);
    cudaError_t e = cudaStreamEndCapture(be->stream, &g);
    if (e != cudaSuccess) {
        fprintf(stderr, "tinyfold: CUDA graph capture failed: cudaStreamEndCapture: %s\n",
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        if (g) (void)cudaGraphDestroy(g);
        return 1;
    }
    /* CUDA's own count of the kernels the capture holds: the profiler's
     * launches per step are checked against it */
    size_t nn = 0;
    be->capture_kernels = 0;
    if (cudaGraphGetNodes(g, NULL, &nn) == cudaSuccess && nn) {
        cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(nn * sizeof *nodes);
        if (nodes && cudaGraphGetNodes(g, nodes, &nn) == cudaSuccess)
            for (size_t i = 0; i < nn; i++) {
                cudaGraphNodeType ty;
                if (cudaGraphNodeGetType(nodes[i], &ty) == cudaSuccess && ty == cudaGraphNodeTypeKernel)
                    be->capture_kernels++;
            }
        free(nodes);
    }
    e = cudaGraphInstantiate(&ge, g, 0);
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        fprintf(stderr, "tinyfold: CUDA graph capture failed: cudaGraphInstantiate: %s\n",
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        return 1;
    }
    *graph_exec = (void *)ge;
    return 0;
}

extern "C" size_t tf_cuda_graph_captured_kernels(const tf_backend *be)
{
    return be->capture_kernels;
}

extern "C" int tf_cuda_graph_launch(tf_backend *be, void *graph_exec)
{
    TF_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph_exec, be->stream));
    return 0;
}

extern "C" void tf_cuda_graph_destroy(void *graph_exec)
{
    if (graph_exec) TF_CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph_exec));
}
