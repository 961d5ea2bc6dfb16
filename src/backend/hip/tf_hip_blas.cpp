/* The cuBLAS subset of tf_blas_api.h on rocBLAS, for the HIP build. rocBLAS
 * is loaded at run time (dlopen of librocblas.so.N), through our own
 * declarations of the five functions called, so that the build needs no
 * rocBLAS headers or library (Debian's ROCm packages have neither).
 *
 * GEMMs: cublasGemmStridedBatchedEx becomes rocblas_gemm_strided_batched_ex,
 * fp32 inputs and outputs, fp32 accumulation (rocblas_datatype_f32_r as the
 * compute type). TF32 has no rocBLAS counterpart here: the math mode is
 * accepted and the GEMMs stay fp32.
 * cuBLASLt: descriptors are kept, and the heuristic offers no algorithm, so
 * the backend takes its strided-batched library path (and the separate RELU
 * / DRELU kernels) for every GEMM: cuda_gemm.cu's documented fallback. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/tf_gpu_port.h"

namespace {
/* rocBLAS' ABI, as documented in rocblas-types.h / rocblas-functions.h */
typedef struct rb_handle_ *rb_handle;
typedef int rb_status; /* rocblas_status: 0 success */
enum { RB_OP_N = 111, RB_OP_T = 112 };
enum { RB_F32_R = 151 };
enum { RB_ALGO_STANDARD = 0 };
typedef rb_status (*rb_create_fn)(rb_handle *);
typedef rb_status (*rb_destroy_fn)(rb_handle);
typedef rb_status (*rb_set_stream_fn)(rb_handle, hipStream_t);
typedef rb_status (*rb_set_workspace_fn)(rb_handle, void *, size_t);
typedef rb_status (*rb_gemm_sb_ex_fn)(rb_handle, int ta, int tb, int m, int n, int k,
                                      const void *alpha, const void *a, int at, int lda,
                                      int64_t sa, const void *b, int bt, int ldb, int64_t sb,
                                      const void *beta, const void *c, int ct, int ldc,
                                      int64_t sc, void *d, int dt, int ldd, int64_t sd,
                                      int batch, int compute, int algo, int32_t solution,
                                      uint32_t flags);
typedef const char *(*rb_status_str_fn)(rb_status);

struct rocblas_api {
    int tried, ok;
    char why[256];
    rb_create_fn create;
    rb_destroy_fn destroy;
    rb_set_stream_fn set_stream;
    rb_set_workspace_fn set_workspace;
    rb_gemm_sb_ex_fn gemm;
    rb_status_str_fn status_str;
} g_rb;

/* the sonames of ROCm 5 .. 7, then the unversioned development link */
const char *const k_rocblas_names[] = {"librocblas.so.5", "librocblas.so.4", "librocblas.so.3",
                                       "librocblas.so.0", "librocblas.so"};

int rb_load()
{
    if (g_rb.tried) return g_rb.ok;
    g_rb.tried = 1;
    void *h = NULL;
    for (const char *n : k_rocblas_names)
        if ((h = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
        snprintf(g_rb.why, sizeof g_rb.why,
                 "rocBLAS not found (librocblas.so: install ROCm's rocblas package)");
        return 0;
    }
    g_rb.create = (rb_create_fn)dlsym(h, "rocblas_create_handle");
    g_rb.destroy = (rb_destroy_fn)dlsym(h, "rocblas_destroy_handle");
    g_rb.set_stream = (rb_set_stream_fn)dlsym(h, "rocblas_set_stream");
    g_rb.set_workspace = (rb_set_workspace_fn)dlsym(h, "rocblas_set_workspace");
    g_rb.gemm = (rb_gemm_sb_ex_fn)dlsym(h, "rocblas_gemm_strided_batched_ex");
    g_rb.status_str = (rb_status_str_fn)dlsym(h, "rocblas_status_to_string");
    if (!g_rb.create || !g_rb.destroy || !g_rb.set_stream || !g_rb.gemm) {
        snprintf(g_rb.why, sizeof g_rb.why, "rocBLAS lacks rocblas_gemm_strided_batched_ex");
        return 0;
    }
    g_rb.ok = 1;
    return 1;
}

cublasStatus_t from_rb(rb_status s)
{
    return s == 0 ? CUBLAS_STATUS_SUCCESS : s == 2 ? CUBLAS_STATUS_NOT_SUPPORTED
                                                   : CUBLAS_STATUS_INVALID_VALUE;
}
} // namespace

extern "C" const char *tf_hip_blas_why(void) { return rb_load() ? "" : g_rb.why; }

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return g_rb.why[0] ? g_rb.why : "rocBLAS not initialized";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported by rocBLAS";
    default: return "rocBLAS call failed (invalid value)";
    }
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = NULL;
    if (!rb_load()) return CUBLAS_STATUS_NOT_INITIALIZED;
    rb_handle r = NULL;
    const cublasStatus_t s = from_rb(g_rb.create(&r));
    *h = (cublasHandle_t)r;
    return s;
}
cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    return rb_load() ? from_rb(g_rb.destroy((rb_handle)h)) : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, hipStream_t s)
{
    return rb_load() ? from_rb(g_rb.set_stream((rb_handle)h, s)) : CUBLAS_STATUS_NOT_INITIALIZED;
}
/* the caller's workspace, so that nothing allocates during a captured step */
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!rb_load()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return g_rb.set_workspace ? from_rb(g_rb.set_workspace((rb_handle)h, ws, bytes))
                              : CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGetVersion(cublasHandle_t, int *v)
{
    *v = 0; /* rocBLAS reports its version as a string; describe names the library */
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sA, const void *B, cudaDataType bt, int ldb,
                                          long long sB, const void *beta, void *C, cudaDataType ct,
                                          int ldc, long long sC, int batch, cublasComputeType_t,
                                          cublasGemmAlgo_t)
{
    if (!rb_load()) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* fp32 only (caps.act_types): rocBLAS' half types are not wired */
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    const int oa = ta == CUBLAS_OP_T ? RB_OP_T : RB_OP_N, ob = tb == CUBLAS_OP_T ? RB_OP_T : RB_OP_N;
    return from_rb(g_rb.gemm((rb_handle)h, oa, ob, m, n, k, alpha, A, RB_F32_R, lda, sA, B,
                             RB_F32_R, ldb, sB, beta, C, RB_F32_R, ldc, sC, C, RB_F32_R, ldc, sC,
                             batch, RB_F32_R, RB_ALGO_STANDARD, 0, 0));
}

/* ---- cuBLASLt: descriptors only, no algorithm (see the top) ---- */
struct emu_lt {
    int unused;
};
struct emu_lt_desc {
    int unused;
};
struct emu_lt_layout {
    int unused;
};
struct emu_lt_pref {
    int unused;
};
template <class T>
static cublasStatus_t lt_new(T **p)
{
    *p = (T *)calloc(1, sizeof(T));
    return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
const char *cublasLtGetStatusString(cublasStatus_t s) { return cublasGetStatusString(s); }
size_t cublasLtGetVersion(void) { return 0; }
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { return lt_new(h); }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t, cudaDataType_t)
{
    return lt_new(d);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                              const void *, size_t)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType, uint64_t,
                                          uint64_t, int64_t)
{
    return lt_new(l);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t,
                                                cublasLtMatrixLayoutAttribute_t, const void *,
                                                size_t)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { return lt_new(p); }
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t,
                                                    const void *, size_t)
{
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int,
                                              cublasLtMatmulHeuristicResult_t *, int *nres)
{
    *nres = 0;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                              cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                              const void *, const void *, cublasLtMatrixLayout_t, void *,
                              cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                              hipStream_t)
{
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
