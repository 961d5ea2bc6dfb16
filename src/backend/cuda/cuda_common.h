/* Shared by every file of the CUDA backend: the backend context, the checking
 * macros, the launch helper and the internal op entry points (tf_cu_*).
 *
 * Built three ways (tf_gpu_port.h maps the names):
 *  - normally, by nvcc, against the CUDA runtime, cuBLAS and cuBLASLt;
 *  - with -DTF_HIP, by hipcc against the HIP runtime, rocBLAS loaded at run
 *    time (tf_hip_blas.cpp), for AMD GPUs;
 *  - with -DTF_CUDA_HOSTEMU, by g++ against tests/hostemu/emu.h, which runs the
 *    same kernels on the CPU (one coroutine per GPU thread, warps of TF_WARP
 *    lanes) so that the kernels can be checked on a machine without a GPU.
 */
#ifndef TF_CUDA_COMMON_H
#define TF_CUDA_COMMON_H

#include "tf_gpu_port.h"

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/gpu_plan.h"
#include "backend/ops.h"
#include "cuda_half.h"

/* ---- fixed sizes ---------------------------------------------------------- */
#define TF_CU_WORKSPACE_BYTES TF_GPU_WORKSPACE_BYTES /* cuBLAS + cuBLASLt workspace
                                                        (H100/H200 advice), split-K partials */
#define TF_CU_SCRATCH_FLOATS ((size_t)1 << 20) /* fixed area within one op: partial sums
                                                  (LayerNorm, attention dbias) */
#define TF_CU_MMA_COUNTERS TF_GPU_MMA_COUNTERS /* split-K tile counters of the tensor-core GEMM */
#define TF_CU_WGRAD_EVENTS 64  /* the weight-gradient lane's completion events */
#define TF_CU_LT_CACHE 1024 /* cuBLASLt plan slots (open addressing, a power of two) */
#define TF_CU_LT_KEY 21      /* longs in a plan key (cuda_gemm.cu: plan_key) */

/* One cached cuBLASLt plan (descriptors + chosen algorithm) for a GEMM key:
 * shape, leading dimensions, batch and strides, operand alignments, beta == 0
 * or not, epilogue, precision. ok == 0 caches "cuBLASLt has no algorithm"
 * (descriptors destroyed; the caller falls back). */
typedef struct {
    int used, ok;
    long key[TF_CU_LT_KEY];
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t ws_bytes;
} tf_cu_lt_plan;

typedef struct {
    void *p;
    size_t bytes;
} tf_cu_alloc_rec;

struct tf_backend {
    int device;
    int kernel_level; /* 1..3 */
    size_t capture_kernels; /* kernel nodes in the last captured graph */
    tf_gpu_caps caps; /* what the device runs (create) */
    tf_gpu_plan plan; /* the routes' policy (gpu_plan.h): create's option or the default */
    int *mma_count;   /* TF_CU_MMA_COUNTERS arrival counters (the tensor-core GEMMs' split K,
                         the LayerNorm backward's tree), zero between kernels */
    int tf32;
    int sm_count;
    cudaStream_t stream;
    cudaStream_t side;              /* copy queue (ops side_upload) */
    cudaEvent_t ev_main, ev_side;   /* the cross-queue waits */
    cudaEvent_t marks[TF_MARKS];    /* ops->mark: timing points of a step */
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *workspace; /* shared by cuBLAS and cuBLASLt: both run on `stream`, in order */
    float *scratch;  /* TF_CU_SCRATCH_FLOATS floats, allocated at create */
    /* every allocation the backend made, for exact current/peak accounting */
    tf_cu_alloc_rec *allocs;
    size_t n_allocs, cap_allocs;
    size_t cur_bytes, peak_bytes;
    tf_cu_lt_plan lt_cache[TF_CU_LT_CACHE];
    int n_plans;             /* used slots of lt_cache */
    /* the weight-gradient lane (cuda_wgrad.cu, ops wgrad_*; NULL wstream: off).
     * A GEMM on it swaps these with the main queue's: its own queue, cuBLAS
     * handle, workspace, scratch and split-K counters, so that it shares
     * nothing with the main queue's work running beside it. */
    cudaStream_t wstream;
    cublasHandle_t wblas;
    void *wworkspace;
    float *wscratch;
    int *wmma_count;
    cudaEvent_t wfork;                    /* the main queue's point a GEMM waits for */
    cudaEvent_t wdone[TF_CU_WGRAD_EVENTS]; /* after GEMM n, at n - 1 modulo the count */
    long wgrad_n, wgrad_waited;           /* issued, and waited for by the main queue */
    int on_lane;                          /* a GEMM on the lane is being issued */
};

/* ---- checking --------------------------------------------------------------
 * Failures of CUDA/cuBLAS calls are internal faults: one line on stderr naming
 * the call, file and line, then abort(). */
#ifdef __cplusplus
extern "C" {
#endif
void tf_cuda_fail(const char *call, const char *msg, const char *file, int line);
#ifdef __cplusplus
}
#endif

#define TF_CUDA_CHECK(call)                                                          \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) tf_cuda_fail(#call, cudaGetErrorString(e_), __FILE__, \
                                            __LINE__);                               \
    } while (0)

#define TF_CUBLAS_CHECK(call)                                                        \
    do {                                                                             \
        cublasStatus_t s_ = (call);                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                             \
            tf_cuda_fail(#call, cublasGetStatusString(s_), __FILE__, __LINE__);      \
    } while (0)

#define TF_CUBLASLT_CHECK(call)                                                      \
    do {                                                                             \
        cublasStatus_t s_ = (call);                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                             \
            tf_cuda_fail(#call, cublasLtGetStatusString(s_), __FILE__, __LINE__);    \
    } while (0)

/* ---- launching -------------------------------------------------------------
 * TF_LAUNCH(kernel, grid, block, stream, args...) launches and then checks
 * cudaGetLastError, naming the kernel. An empty grid launches nothing (CUDA
 * would reject it as an invalid configuration).
 */
#ifdef __cplusplus
#ifndef TF_CUDA_HOSTEMU
template <typename... KArgs, typename... Args>
static inline cudaError_t tf_launch_raw_(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                         cudaStream_t s, Args... args)
{
    k<<<grid, block, smem, s>>>(args...);
    return cudaGetLastError();
}
#endif

template <typename... KArgs, typename... Args>
static inline void tf_launch_(const char *name, const char *file, int line, void (*k)(KArgs...),
                              dim3 grid, dim3 block, cudaStream_t s, Args... args)
{
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
#ifdef TF_CUDA_HOSTEMU
    emu_launch(name, grid, block, s, [=]() { k(args...); });
    (void)file;
    (void)line;
#else
    cudaError_t e = tf_launch_raw_(k, grid, block, 0, s, args...);
    if (e != cudaSuccess) tf_cuda_fail(name, cudaGetErrorString(e), file, line);
#endif
}
#define TF_LAUNCH(kernel, grid, block, stream, ...) \
    tf_launch_(#kernel, __FILE__, __LINE__, kernel, grid, block, stream, __VA_ARGS__)

/* The block's dynamic shared memory, as floats. Under hostemu blocks run one
 * at a time: one static buffer serves every launch. */
#ifdef TF_CUDA_HOSTEMU
#define TF_SMEM_MAX_FLOATS (227 * 1024 / 4)
inline float *tf_emu_smem()
{
    alignas(16) static float buf[TF_SMEM_MAX_FLOATS];
    return buf;
}
#define TF_SMEM(name) float *const name = tf_emu_smem()
#else
#define TF_SMEM(name)                                  \
    extern __shared__ __align__(16) float tf_smem_[];  \
    float *const name = tf_smem_
#endif

/* TF_LAUNCH with `smem` bytes of dynamic shared memory; opts the kernel in to
 * all the device allows past 48 KB once per device (*optin: bit per device). */
template <typename... KArgs, typename... Args>
static inline void tf_launch_smem_(const char *name, const char *file, int line,
                                   void (*k)(KArgs...), dim3 grid, int threads, size_t smem,
                                   const tf_backend *be, unsigned long long *optin, Args... args)
{
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
#ifdef TF_CUDA_HOSTEMU
    if (smem > sizeof(float) * TF_SMEM_MAX_FLOATS)
        tf_cuda_fail(name, "more shared memory than the emulator's buffer", file, line);
    (void)optin;
    emu_launch(name, grid, dim3((unsigned)threads), be->stream, [=]() { k(args...); });
#else
    const unsigned long long bit = 1ull << (be->device & 63);
    if (smem > 48 * 1024 && !(*optin & bit)) {
        /* the most the device allows beside the kernel's static shared
         * memory, once: a later launch may want more than this one (where
         * the device does not say, as on AMD, this launch's size) */
        int most = 0;
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, reinterpret_cast<const void *>(k));
        const int need = (int)(smem + fa.sharedSizeBytes);
        if (e == cudaSuccess &&
            (cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, be->device) !=
                 cudaSuccess ||
             most < need)) {
            (void)cudaGetLastError();
            most = need;
        }
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(reinterpret_cast<const void *>(k),
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     most - (int)fa.sharedSizeBytes);
        if (e != cudaSuccess) tf_cuda_fail(name, cudaGetErrorString(e), file, line);
        *optin |= bit;
    }
    cudaError_t e = tf_launch_raw_(k, grid, dim3((unsigned)threads), smem, be->stream, args...);
    if (e != cudaSuccess) tf_cuda_fail(name, cudaGetErrorString(e), file, line);
#endif
}
#define TF_LAUNCH_SMEM(kernel, grid, threads, smem, be, ...)                                  \
    do {                                                                                      \
        static unsigned long long optin_ = 0;                                                 \
        tf_launch_smem_(#kernel, __FILE__, __LINE__, kernel, grid, threads, smem, be, &optin_, \
                        __VA_ARGS__);                                                         \
    } while (0)

/* p aligned to `bytes`, a power of two (vector access; NULL counts as aligned) */
__host__ __device__ static inline bool tf_cu_aligned(const void *p, unsigned bytes)
{
    return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0;
}

/* Grid for a grid-stride loop over n items with `threads` per block. The
 * result never depends on the grid size (each item is independent). */
static inline unsigned tf_cu_grid(const tf_backend *be, long n, int threads)
{
    long want = (n + threads - 1) / threads;
    long cap = (long)be->sm_count * 32;
    if (want > cap) want = cap;
    return (unsigned)(want < 1 ? 1 : want);
}

/* ---- device helpers ------------------------------------------------------- */
/* The gating arithmetic (cuda_elementwise.cu's gates, cuda_gate_cmajor.cu,
 * the distance head): one definition, so the fused ops give the same bits. */
__device__ __forceinline__ float tf_sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }
/* y = a sigmoid(g)'s gradients: da = dy*s, dg = dy*a*s*(1-s); da/dg may alias
 * dy/a elementwise */
__device__ __forceinline__ void tf_gate_bwd_one(float *da, float *dg, float dy, float a, float g)
{
    const float s = tf_sigmoidf(g);
    *da = dy * s;
    *dg = dy * a * s * (1.f - s);
}

/* Butterfly sum over the lane's group of TF_GROUP lanes: every lane ends
 * with the same, bitwise identical value (each step adds a pair in both
 * orders, and float addition commutes). */
__device__ __forceinline__ float tf_warp_sum(float v)
{
    for (int m = TF_GROUP / 2; m > 0; m >>= 1) v += tf_shfl_xor(v, m);
    return v;
}
__device__ __forceinline__ float tf_warp_max(float v)
{
    for (int m = TF_GROUP / 2; m > 0; m >>= 1) v = fmaxf(v, tf_shfl_xor(v, m));
    return v;
}
/* Sum over the block (blockDim.x a multiple of TF_GROUP, at most 1024); sh
 * holds 1024 / TF_GROUP floats. Group partials are added in group order, so
 * the result is deterministic and the same in every thread. Contains two
 * __syncthreads. */
__device__ __forceinline__ float tf_block_sum(float v, float *sh)
{
    v = tf_warp_sum(v);
    if (threadIdx.x % TF_GROUP == 0) sh[threadIdx.x / TF_GROUP] = v;
    __syncthreads();
    float t = 0.f;
    const int nw = (int)(blockDim.x / TF_GROUP);
    for (int w = 0; w < nw; ++w) t += sh[w];
    __syncthreads(); /* sh may be reused right after */
    return t;
}
#endif /* __cplusplus */

/* ---- internal entry points (one file per family) ------------------------- */
#ifdef __cplusplus
extern "C" {
#endif
/* allocation bookkeeping (cuda_backend.cu) */
int tf_cu_alloc(tf_backend *be, void **p, size_t bytes);
void tf_cu_free(tf_backend *be, void *p);
/* a queue's workspace, scratch and split-K counters (0 ok, 1 out of memory;
 * the counters still to be zeroed), and a cuBLAS handle bound to the queue
 * and its workspace in the backend's precision */
int tf_cu_queue_alloc(tf_backend *be, void **workspace, float **scratch, int **count);
cublasStatus_t tf_cu_blas_bind(const tf_backend *be, cublasHandle_t h, cudaStream_t s,
                               void *workspace);

/* cuda_wgrad.cu: the weight-gradient lane (ops wgrad_*); enter/leave wrap
 * one GEMM issued on it */
int tf_cu_wgrad_enable(tf_backend *be);
long tf_cu_wgrad_mark(tf_backend *be);
void tf_cu_wgrad_wait(tf_backend *be, long upto);
void tf_cu_wgrad_wait_queue(tf_backend *be, void *queue, long upto);
void tf_cu_wgrad_enter(tf_backend *be);
void tf_cu_wgrad_leave(tf_backend *be);
void tf_cu_wgrad_destroy(tf_backend *be);

/* cuda_gemm.cu (and the op gemm); tf_cu_hold: a one-thread kernel that
 * holds stream s for ns */
void tf_cu_hold(cudaStream_t s, unsigned long long ns);
void tf_cu_gemm_destroy_plans(tf_backend *be);
/* cuda_gemm_mma.cu: a on the tensor-core kernel the route names (engine MMA,
 * WGMMA, WIDE_MMA or WIDE_WGMMA: tf_gpu_route_gemm), R and the DRELU mask in
 * its epilogue (or the wide split's reduce kernel) */
void tf_cu_gemm_tc(tf_backend *be, const tf_gemm_args *a, const tf_gpu_gemm_route *r);
/* a as the router sees it (gpu_plan.h) */
tf_gpu_gemm_shape tf_cu_gemm_shape(const tf_gemm_args *a);
/* cuda_gemm_wgmma.cu: 1 when this build and device run the wgmma kernel
 * (sm_90a code on a compute capability 9.0 GPU), checked by a probe launch */
int tf_cu_wg_probe(tf_backend *be);

/* cuda_layernorm.cu */
void tf_cu_layernorm_fwd(tf_backend *be, float *out, float *mean, float *rstd, const float *x,
                         const float *gamma, const float *beta, long rows, int C, float eps);
void tf_cu_layernorm_bwd(tf_backend *be, float *dx, float *dxh, float *dgamma, float *dbeta,
                         const float *dout, const float *x, const float *mean, const float *rstd,
                         const float *gamma, long rows, int C, int accumulate);
void tf_cu_layernorm2_fwd(tf_backend *be, float *out, float *stats, const float *x,
                          const float *g1, const float *b1, const float *g2, const float *b2,
                          long rows, int C, float eps);
void tf_cu_layernorm2_bwd(tf_backend *be, float *dx, float *dxh, float *dg1, float *db1,
                          float *dg2, float *db2, const float *dout, const float *x,
                          const float *stats, const float *g1, const float *b1, const float *g2,
                          long rows, int C, int accumulate);

/* cuda_softmax.cu */
void tf_cu_softmax_fwd(tf_backend *be, float *y, const float *x, long rows, int cols);
void tf_cu_softmax_bwd(tf_backend *be, float *dx, const float *dy, const float *y, long rows,
                       int cols);

/* cuda_attn_fwd.cu, cuda_attn_bwd.cu */
void tf_cu_attn_fwd(tf_backend *be, const tf_attn_args *a);
void tf_cu_attn_bwd(tf_backend *be, const tf_attn_args *a);

/* cuda_permute.cu */
void tf_cu_permute(tf_backend *be, float *out, const float *in, const tf_permute_args *a);
void tf_cu_add_bcast_mid(tf_backend *be, float *y, const float *x, long outer, long mid,
                         long inner);
void tf_cu_sum_mid(tf_backend *be, float *y, const float *x, long outer, long mid, long inner,
                   int accumulate);

/* cuda_elementwise.cu */
void tf_cu_add(tf_backend *be, float *y, const float *a, const float *b, long n);
void tf_cu_mul(tf_backend *be, float *y, const float *a, const float *b, long n);
void tf_cu_scale(tf_backend *be, float *y, const float *x, float alpha, long n);
void tf_cu_act_fwd(tf_backend *be, tf_act act, float *y, const float *x, long n);
void tf_cu_act_bwd(tf_backend *be, tf_act act, float *dx, const float *dy, const float *y,
                   long n);
void tf_cu_gate_fwd(tf_backend *be, float *y, const float *a, const float *g, long n);
void tf_cu_gate_bwd(tf_backend *be, float *da, float *dg, const float *dy, const float *a,
                    const float *g, long n);
void tf_cu_gate_residual_fwd(tf_backend *be, float *out, const float *res, const float *a,
                             const float *g, long n);
void tf_cu_opm_bwd(tf_backend *be, float *da, const float *dop, const float *a, int B, int S,
                   int N, int co);
void tf_cu_opm_outer(tf_backend *be, float *outer_p, const float *a, int B, int S, int N,
                     int co);
/* relu in place on the `batch` strided [M, N] matrices of a GEMM output */
void tf_cu_relu_strided(tf_backend *be, float *C, int M, int N, long ldc, long strideC,
                        int batch);
/* the same matrices: dst = src (a GEMM's residual input R into C), and
 * C = aux > 0 ? C : 0 (the DRELU epilogue; aux with C's ldc and strideC) */
void tf_cu_copy_strided(tf_backend *be, float *dst, const float *src, int M, int N, long ld,
                        long stride, int batch);
void tf_cu_drelu_strided(tf_backend *be, float *C, const float *aux, int M, int N, long ldc,
                         long strideC, int batch);

/* cuda_gate_cmajor.cu */
void tf_cu_gate_cmajor_fwd(tf_backend *be, float *lr_t, const float *a, const float *g, long ld,
                           long rows, long inner, int C);
void tf_cu_gate_cmajor_bwd(tf_backend *be, float *da, float *dg, const float *dlr_t, const float *a,
                           const float *g, long ld, long rows, long inner, int C);

/* the half types' (TF_BF16, TF_F16) paths of the ops above (cuda_half.h),
 * in the same files; the typed entry points below call them */
void tf_cu_layernorm_fwd_h(tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                           const float *gamma, const float *beta, long rows, int C, float eps,
                           tf_dtype xt, tf_dtype yt);
void tf_cu_layernorm_bwd_h(tf_backend *be, void *dx, void *dxh, float *dgamma, float *dbeta,
                           const void *dout, const void *x, const float *mean, const float *rstd,
                           const float *gamma, long rows, int C, int accumulate, tf_dtype xt,
                           tf_dtype yt);
void tf_cu_layernorm2_fwd_h(tf_backend *be, void *out, float *stats, const void *x,
                            const float *g1, const float *b1, const float *g2, const float *b2,
                            long rows, int C, float eps, tf_dtype xt, tf_dtype yt);
void tf_cu_layernorm2_bwd_h(tf_backend *be, void *dx, void *dxh, float *dg1, float *db1,
                            float *dg2, float *db2, const void *dout, const void *x,
                            const float *stats, const float *g1, const float *b1, const float *g2,
                            long rows, int C, int accumulate, tf_dtype xt, tf_dtype yt);
void tf_cu_softmax_fwd_h(tf_backend *be, void *y, const void *x, long rows, int cols, tf_dtype t);
void tf_cu_softmax_bwd_h(tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                         int cols, tf_dtype t);
void tf_cu_permute_h(tf_backend *be, void *out, const void *in, const tf_permute_args *a);
void tf_cu_add_bcast_mid_h(tf_backend *be, void *y, const void *x, long outer, long mid,
                           long inner, tf_dtype t);
void tf_cu_sum_mid_h(tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                     int accumulate, tf_dtype t);
void tf_cu_add_h(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t);
void tf_cu_mul_h(tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t);
void tf_cu_scale_h(tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t);
void tf_cu_act_fwd_h(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t);
void tf_cu_act_bwd_h(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                     tf_dtype t);
void tf_cu_gate_fwd_h(tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t);
void tf_cu_gate_bwd_h(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                      const void *g, long n, tf_dtype t);
void tf_cu_gate_residual_fwd_h(tf_backend *be, float *out, const float *res, const void *a,
                               const void *g, long n, tf_dtype t);
void tf_cu_gate_cmajor_fwd_h(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                             long rows, long inner, int C, tf_dtype t);
void tf_cu_gate_cmajor_bwd_h(tf_backend *be, void *da, void *dg, const void *dlr_t, const void *a,
                             const void *g, long ld, long rows, long inner, int C, tf_dtype t);
void tf_cu_opm_bwd_h(tf_backend *be, void *da, const void *dop, const void *a, int B, int S, int N,
                     int co, tf_dtype t);
void tf_cu_opm_outer_h(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                       tf_dtype t);
/* cuda_opm_mma.cu (NVIDIA only): co 32, 4-element aligned, level 3 */
void tf_cu_opm_bwd_mma_h(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                         int N, tf_dtype t);
void tf_cu_opm_outer_mma_h(tf_backend *be, void *out, const void *a, int B, int S, int N,
                           tf_dtype t);
/* cuda_transition.cu (NVIDIA only): op_list.h transition_fwd/_bwd, C 64 or 128,
 * bf16 / fp16 (where gpu_plan.h tf_gpu_mlp_fused says) */
void tf_cu_transition_fwd_h(tf_backend *be, float *x_out, float *mean, float *rstd,
                            const float *x, const float *gamma, const float *beta, const void *W1,
                            const void *W2, long rows, int C, float eps, tf_dtype t);
void tf_cu_transition_bwd_h(tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn,
                            void *h, void *dh, const void *dy, const float *x, const float *mean,
                            const float *rstd, const float *gamma, const float *beta,
                            const void *W1, const void *W2, long rows, int C, tf_dtype t);
/* a half GEMM's C: relu, R copied in, the DRELU select (cuda_elementwise.cu) */
void tf_cu_relu_strided_h(tf_backend *be, void *C, int M, int N, long ldc, long strideC, int batch,
                          tf_dtype t);
void tf_cu_copy_strided_h(tf_backend *be, void *dst, const void *src, int M, int N, long ld,
                          long stride, int batch, tf_dtype t);
void tf_cu_drelu_strided_h(tf_backend *be, void *C, const void *aux, int M, int N, long ldc,
                           long strideC, int batch, tf_dtype t);

/* ---- the ops: tf_cu_t_<name> for every entry of op_list.h ----
 * Defined in cuda_typed_ops.cu (fp32 to the fp32 paths above, a half type
 * to their _h paths; convert, check_finite, pair_bias_bwd), and in the files of the
 * ops without such a pair: cuda_gemm.cu (gemm), cuda_embed_loss.cu
 * (embed_*, mse_head_*, adamw) and the NVIDIA-only cuda_opm_fused*.cu
 * (opm_fwd, opm_bwd_dz), cuda_trimul_proj.cu, cuda_trimul_out.cu (bf16 /
 * fp16 where gpu_plan.h tf_gpu_opm_fused, tf_gpu_trimul_proj say; the HIP
 * build's stand-ins in ../hip/tf_hip_nv_only.cu). */
#define TF_OP(ret, op, params) ret tf_cu_t_##op params;
#include "backend/op_list.h"
#ifdef __cplusplus
}
#endif

#endif
