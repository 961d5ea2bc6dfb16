/* The CUDA backend: device selection, the stream and library handles, exact
 * memory accounting, memory ops, graph capture, and the op table.
 *
 * Everything runs on one non-default stream. cuBLAS and cuBLASLt share one
 * workspace allocated here (cublasSetWorkspace), so no library allocates
 * during a step and a step can be captured as a CUDA graph.
 *
 * Precision: fp32 uses CUBLAS_DEFAULT_MATH with CUBLAS_COMPUTE_32F, which never
 * uses TF32 tensor cores; --precision tf32 sets CUBLAS_TF32_TENSOR_OP_MATH and
 * CUBLAS_COMPUTE_32F_FAST_TF32 (cuBLASLt: CUBLASLT_COMPUTE_32F_FAST_TF32). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* the GPU backend is built by nvcc (CUDA) or hipcc (HIP), never both */
extern "C" int tf_built_with_cuda(void) { return !TF_GPU_HIP; }
extern "C" int tf_built_with_hip(void) { return TF_GPU_HIP; }

/* Where the NVIDIA-only kernels (mma.sync, wgmma: TF_NV_KERNELS) are not in
 * the build, the routing keeps to the portable kernels and library GEMMs. */
static void tf_cu_portable_only(tf_backend *be)
{
    if (TF_NV_KERNELS) return;
    be->gemm_mma = 0;
    be->gemm_wg = 0;
    be->gemm_dw = 0;
    be->attn_bwd5 = 0;
}

/* TF_LAUNCH's programmatic dependent launch (cuda_common.h): set by
 * tf_cuda_backend_create from TF_CUDA_PDL and the device (sm_90+). One value
 * for the process: every backend of it reads the same environment. */
extern "C" {
int tf_cu_pdl = 0;
}

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
    o.alloc = op_alloc;
    o.free = op_free;
    o.upload = op_upload;
    o.download = op_download;
    o.copy = op_copy;
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
    o.upload_async = op_upload_async;
    o.download_async = op_download_async;
    o.mark = op_mark;
    o.mark_ms = op_mark_ms;
    o.gemm = tf_cu_gemm;
    o.layernorm_fwd = tf_cu_layernorm_fwd;
    o.layernorm_bwd = tf_cu_layernorm_bwd;
    o.layernorm2_fwd = tf_cu_layernorm2_fwd;
    o.layernorm2_bwd = tf_cu_layernorm2_bwd;
    o.softmax_fwd = tf_cu_softmax_fwd;
    o.softmax_bwd = tf_cu_softmax_bwd;
    o.attn_fwd = tf_cu_attn_fwd;
    o.attn_bwd = tf_cu_attn_bwd;
    o.permute = tf_cu_permute;
    o.add_bcast_mid = tf_cu_add_bcast_mid;
    o.sum_mid = tf_cu_sum_mid;
    o.add = tf_cu_add;
    o.mul = tf_cu_mul;
    o.scale = tf_cu_scale;
    o.act_fwd = tf_cu_act_fwd;
    o.act_bwd = tf_cu_act_bwd;
    o.gate_fwd = tf_cu_gate_fwd;
    o.gate_bwd = tf_cu_gate_bwd;
    o.gate_residual_fwd = tf_cu_gate_residual_fwd;
    o.gate_cmajor_fwd = tf_cu_gate_cmajor_fwd;
    o.gate_cmajor_bwd = tf_cu_gate_cmajor_bwd;
    o.opm_bwd = tf_cu_opm_bwd;
    o.opm_outer = tf_cu_opm_outer;
    o.embed_fwd = tf_cu_embed_fwd;
    o.embed_bwd = tf_cu_embed_bwd;
    o.mse_head_fwd = tf_cu_mse_head_fwd;
    o.mse_head_bwd = tf_cu_mse_head_bwd;
    o.adamw = tf_cu_adamw;
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

/* A developer knob from the environment: the index of its value in vals
 * (unset or empty: def), or -1 with one line in err naming what is accepted. */
static int env_knob(const char *name, const char *const *vals, int n, int def, char *err,
                    size_t errlen)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    for (int i = 0; i < n; ++i)
        if (!strcmp(v, vals[i])) return i;
    char list[128] = "";
    for (int i = 0, k = 0; i < n && k < (int)sizeof list; ++i)
        k += snprintf(list + k, sizeof list - (size_t)k, "%s%s", i ? ", " : "", vals[i]);
    snprintf(err, errlen, "%s=%s is not accepted: use one of %s, or leave it unset", name, v,
             list);
    return -1;
}

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
    {
        /* developer A/B knobs, read once here (any other value is refused with
         * one line naming the accepted ones: env_knob):
         *   TF_CUDA_ATTN_KERNEL=2|3|4: level-3 attention. Default: kernel4 (one
         *     block per (b, o, h), cuda_attn4.h) where it measured fastest (the
         *     backward at L <= 128, the forward at short L: tf_attn4_use);
         *     otherwise, for L > 32, kernel3 for d 17..32 and kernel2 for d <= 16
         *     (where kernel3 measured slower; see cuda_attn2.h). 2 or 3: that
         *     kernel at every head size and L > 32 (never kernel4); 4: kernel4
         *     wherever it runs (L <= 128, any d <= 32), the default elsewhere;
         *     5: the forward and the backward on the tensor cores (kernel5,
         *     cuda_attn5_fwd.cu, cuda_attn5_bwd.cu: L <= 128, d 16 or 32)
         *     wherever they run, the default elsewhere. By default kernel5 runs
         *     both at d 32, L > 32 (L > 16 in tf32), and in tf32 at d 16, L >
         *     64, where they measured faster (tf_attn5_use, tf_attn5_bwd_use);
         *     TF_CUDA_ATTN_BWD5=0 keeps the backward there on kernel4 (A/B);
         *   TF_CUDA_GEMM_TUNE=1: level-3 GEMMs time cuBLASLt's candidate
         *     algorithms at each key's first call and keep the fastest, instead
         *     of the heuristic's first (see cuda_gemm.cu; off by default: it
         *     measured <= 1% faster on the H200 and makes the bits depend on
         *     timing);
         *   TF_CUDA_GEMM=mma|lt|auto: level-3 GEMMs on the tensor-core kernel
         *     (cuda_gemm_mma.cu: 3xTF32 in fp32, TF32 in tf32) wherever it runs,
         *     or all on cuBLASLt. Default (auto): in fp32 the shapes where the
         *     kernel measured faster than cuBLAS (tf_cu_gemm_mma), cuBLASLt for
         *     the rest and for every tf32 GEMM;
         *   TF_CUDA_GEMM=wg: fp32 GEMMs on the wgmma 3xTF32 kernel
         *     (cuda_gemm_wgmma.cu) wherever it runs; by default it takes the
         *     fp32 GEMMs routed to the tensor cores when the GPU and build
         *     have sm_90a code (tf_cu_wg_probe) and the shape is one where it
         *     measured faster; =nowg is the default without it, =mma keeps
         *     every fp32 GEMM it can on mma.sync; TF_CUDA_WG_PIPE: the wgmma
         *     kernel's schedule (A/B): 2 (default) two slices' MMAs in flight,
         *     1 one, with the next slice converted meanwhile, 0 one slice at a
         *     time; TF_CUDA_WG_STAGES=2: schedule 1 with 2 pipeline stages
         *     instead of 4;
         *   TF_CUDA_MMA_TILE=64|128: that kernel's tile size for every shape;
         *   TF_CUDA_OPM_BWD=2|3: the outer product mean's backward op on
         *     kernel2 (any outer_dim) or kernel3 (default, outer_dim 32 with
         *     aligned operands; kernel2 elsewhere);
         *   TF_CUDA_LT_INPLACE=0|1: cuBLASLt split K with any reduction
         *     scheme (0, default: the heuristic may pick a separate reduce
         *     kernel, ~90 launches a step), or only algorithms that add their
         *     parts in place in the output (1: no reduce launches, but on the
         *     H200 the v3 backward ran 2-4x slower, RESULTS.md entry 14);
         *   TF_CUDA_DW=auto|wg|mma|lt: GEMMs with few tiles over a long K
         *     (the weight gradients) as split K one wave wide on the tensor
         *     cores, the partials added by a separate kernel: auto (default)
         *     wgmma where the tiles are full, in fp32; wg the same in tf32
         *     too (one TF32 product; measured slower than cuBLAS' there); mma
         *     mma.sync on every shape; lt none (cuBLASLt's split-K kernels,
         *     as before);
         *   TF_CUDA_WG_SHORT=512|256|128|0: fp32 wgmma GEMMs with K at most
         *     that and at least 3 x SMs tiles (the large problem's pair
         *     GEMMs) on two blocks an SM (schedule 0, 2 stages, 128
         *     registers) instead of one; 0 none;
         *   TF_CUDA_LN_RPB=32|16|64|8: rows per block of the one-launch
         *     LayerNorm backwards (each block's parameter partials go
         *     through the fixed-order tree); 32 (default) against 16, H200,
         *     v3 --graph: small fp32 -0.6%, tf32 -0.7%, large fp32 -0.1%
         *     step time (RESULTS.md entry 16);
         *   TF_CUDA_GEMM_R=epi|copy: a level-3 GEMM's residual input R read
         *     in the tensor-core kernels' epilogue (epi, default), or copied
         *     into C before the GEMM (copy: as before session 9, one copy a
         *     residual; 1.1-1.2% slower a step, RESULTS.md entry 16);
         *   TF_CUDA_WG_TF32=0|1: in tf32, 1 sends the GEMMs that the wgmma
         *     kernel takes in fp32 to it with one TF32 product (A/B against
         *     cuBLAS' TF32 kernels, the default);
         *   TF_CUDA_DW_DEPTH=128|256|512|64: the least K of a split in the
         *     wide split (more splits fill the GPU, each pays a prologue and
         *     stores a partial tile);
         *   TF_CUDA_PDL=0|1: our kernels launched plainly (0, default) or
         *     with programmatic dependent launch on sm_90+ (1: the next
         *     kernel's launch and dispatch overlap this one's tail;
         *     cuda_common.h). Measured on the H200, v3 --graph, 3 rounds
         *     (RESULTS.md entry 17): small fp32 4.4% slower, tf32 and the
         *     large problem within 0.4%; the profile's gaps between kernels
         *     did not shrink (they are not the launch), so it stays off;
         *   TF_CUDA_WGRAD_DELAY_US=0|200|2000 (tests): the weight-gradient
         *     lane (cuda_wgrad.cu) holds each of its GEMMs back that long, so
         *     that the main queue runs far ahead: a missing wait then changes
         *     the result instead of hiding in the timing;
         *   TF_CUDA_WGRAD_SMS=all|96|64|32: the SMs the lane's GEMMs are
         *     shaped for (cuBLASLt's SM count target, the width of our wide
         *     split): all (default), or fewer, leaving the rest to the main
         *     queue's kernels beside them */
        static const char *const attn_v[] = {"0", "2", "3", "4", "5"}, *const bin_v[] = {"0", "1"},
                                 *const gemm_v[] = {"auto", "wg", "mma", "nowg", "lt"},
                                 *const tile_v[] = {"auto", "64", "128"},
                                 *const stage_v[] = {"4", "2"},
                                 *const pipe_v[] = {"0", "1", "2"};
        static const int attn_k[] = {0, 2, 3, 4, 5};
        const int ka = env_knob("TF_CUDA_ATTN_KERNEL", attn_v, 5, 0, err, errlen);
        const int kt = env_knob("TF_CUDA_GEMM_TUNE", bin_v, 2, 0, err, errlen);
        const int kb = env_knob("TF_CUDA_ATTN_BWD5", bin_v, 2, 1, err, errlen);
        const int kg = env_knob("TF_CUDA_GEMM", gemm_v, 5, 0, err, errlen);
        const int kp = env_knob("TF_CUDA_WG_PIPE", pipe_v, 3, 2, err, errlen);
        const int km = env_knob("TF_CUDA_MMA_TILE", tile_v, 3, 0, err, errlen);
        const int ks = env_knob("TF_CUDA_WG_STAGES", stage_v, 2, 0, err, errlen);
        const int ki = env_knob("TF_CUDA_LT_INPLACE", bin_v, 2, 0, err, errlen);
        static const char *const opm_v[] = {"3", "2"}, *const dw_v[] = {"auto", "mma", "lt", "wg"};
        const int ko = env_knob("TF_CUDA_OPM_BWD", opm_v, 2, 0, err, errlen);
        const int kd = env_knob("TF_CUDA_DW", dw_v, 4, 0, err, errlen);
        static const char *const short_v[] = {"512", "0", "128", "256"};
        const int kw = env_knob("TF_CUDA_WG_SHORT", short_v, 4, 0, err, errlen);
        static const char *const rpb_v[] = {"32", "16", "64", "8"}, *const repi_v[] = {"epi", "copy"};
        const int ke = env_knob("TF_CUDA_GEMM_R", repi_v, 2, 0, err, errlen);
        const int kx = env_knob("TF_CUDA_WG_TF32", bin_v, 2, 0, err, errlen);
        static const char *const depth_v[] = {"128", "256", "512", "64"};
        const int kq = env_knob("TF_CUDA_DW_DEPTH", depth_v, 4, 0, err, errlen);
        const int kr = env_knob("TF_CUDA_LN_RPB", rpb_v, 4, 0, err, errlen);
        static const char *const pdl_v[] = {"0", "1"};
        const int kl = env_knob("TF_CUDA_PDL", pdl_v, 2, 0, err, errlen);
        static const char *const delay_v[] = {"0", "200", "2000"};
        const int kj = env_knob("TF_CUDA_WGRAD_DELAY_US", delay_v, 3, 0, err, errlen);
        static const char *const wsms_v[] = {"all", "96", "64", "32"};
        const int kn = env_knob("TF_CUDA_WGRAD_SMS", wsms_v, 4, 0, err, errlen);
        if (ka < 0 || kt < 0 || kb < 0 || kg < 0 || kp < 0 || km < 0 || ks < 0 || ki < 0 ||
            ko < 0 || kd < 0 || kw < 0 || kr < 0 || ke < 0 || kx < 0 || kq < 0 || kl < 0 ||
            kj < 0 || kn < 0)
            goto fail;
        static const int wsms_k[] = {0, 96, 64, 32};
        be->wgrad_sms = wsms_k[kn];
        be->wgrad_delay_ns = kj == 1 ? 200000ull : kj == 2 ? 2000000ull : 0ull;
        tf_cu_pdl = kl; /* kept below on sm_90+ only */
        static const int rpb_k[] = {32, 16, 64, 8};
        be->ln_rpb = rpb_k[kr];
        be->r_epi = !ke;
        be->wg_tf32 = kx;
        static const int depth_k[] = {128, 256, 512, 64};
        be->dw_depth = depth_k[kq];
        static const int short_k[] = {512, 0, 128, 256};
        be->wg_short = short_k[kw];
        static const int dw_k[] = {1, 2, 0, 3};
        be->gemm_dw = kg == 4 ? 0 : dw_k[kd]; /* TF_CUDA_GEMM=lt: none */
        be->opm_kernel = ko ? 2 : 3;
        be->lt_inplace = ki;
        be->attn_kernel = attn_k[ka];
        be->gemm_tune = kt;
        be->attn_bwd5 = kb;
        be->tf32 = o ? (o->tf32 != 0) : 0;
        /* TF_CUDA_GEMM: 0 auto, 1 wg, 2 mma, 3 nowg, 4 lt */
        be->gemm_mma = kg == 2 ? 2 : kg == 4 ? 0 : !be->tf32 || kx;
        /* wgmma unless mma.sync or cuBLAS is asked for; the probe below. In tf32
         * it runs only the weight gradients' wide split (be->gemm_dw) */
        be->gemm_wg = kg >= 2 ? 0 : kg == 1 ? 2 : 1;
        be->wg_pipe = kp;
        be->wg_stages = ks ? 2 : 4;
        be->mma_tile = km == 1 ? 64 : km == 2 ? 128 : 0;
    }
    tf_cu_portable_only(be);
    TRY_CUDA(cudaSetDevice(dev));
    TRY_CUDA(cudaDeviceGetAttribute(&be->sm_count, cudaDevAttrMultiProcessorCount, dev));
    if (be->sm_count < 1) be->sm_count = 1;
#ifndef TF_CUDA_HOSTEMU
    {
        int major = 0;
        TRY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        tf_cu_pdl = tf_cu_pdl && major >= 9;
    }
#else
    tf_cu_pdl = 0; /* the emulator runs kernels one after another */
#endif
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
    if (be->gemm_wg && be->kernel_level >= 3 && !tf_cu_wg_probe(be)) {
        if (be->gemm_wg == 2)
            fprintf(stderr, "tinyfold: TF_CUDA_GEMM=wg: no wgmma code for this GPU (it needs an "
                            "sm_90a build on a compute capability 9.0 device); the mma.sync "
                            "kernel runs instead\n");
        be->gemm_wg = 0;
    }
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
    /* where the GEMMs run (tf_cu_gemm_mma's routing; TF_CUDA_GEMM changes it) */
    const char *where = be->kernel_level < 3 ? "cuBLAS"
                        : be->tf32           ? (be->gemm_mma ? "TF32 on the mma.sync kernel"
                                                             : "cuBLASLt")
                        : be->gemm_wg == 2   ? "3xTF32 on wgmma wherever it runs"
                        : be->gemm_wg        ? "3xTF32 on wgmma or mma.sync where faster, "
                                               "else cuBLASLt"
                        : be->gemm_mma == 2  ? "3xTF32 on mma.sync wherever it runs"
                        : be->gemm_mma       ? "3xTF32 on mma.sync where faster, else cuBLASLt"
                                             : "cuBLASLt";
    snprintf(out, n,
             "device %d: %s (sm_%d%d), %d SMs, %.1f GiB; CUDA runtime %d.%d, driver %d.%d; "
             "cuBLAS %d.%d.%d, cuBLASLt %zu; %s GEMMs (%s); kernel level %d",
             be->device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), rt / 1000,
             (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, blas / 10000, (blas / 100) % 100,
             blas % 100, cublasLtGetVersion(), be->tf32 ? "tf32" : "fp32", where,
             be->kernel_level);
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
