/* Row-major strided batched GEMM: the route (gpu_plan.h tf_gpu_route_gemm)
 * and its launch, and the library engines (cuBLAS / cuBLASLt, column-major).
 *
 * A row-major [R, C] matrix with leading dimension ld is the column-major
 * [C, R] matrix with the same ld, i.e. its transpose. So row-major
 *   C = op(A) op(B)      is column-major      C^T = op(B)^T op(A)^T,
 * which is one cuBLAS call with the operands swapped (B first), the same
 * transpose flags, and m = N, n = M.
 *
 * Engines (tf_gpu_engine):
 *  - CUBLAS: cublasGemmStridedBatchedEx (CUBLAS_GEMM_DEFAULT); C is its input,
 *    so the residual R is copied into C first; RELU and DRELU as separate
 *    kernels after it.
 *  - LT: cuBLASLt (strided batch through the layouts' BATCH_COUNT /
 *    STRIDED_BATCH_OFFSET, R passed as C and C as D, RELU as its epilogue, or
 *    as the separate kernel when cuBLASLt has no RELU algorithm for the
 *    shape). At levels 1-2 it is only a lone RELU product (the fused
 *    epilogue). Where the heuristic has no algorithm: CUBLAS. This fallback
 *    is the one choice made at run time: it depends on the library.
 *  - MMA, WGMMA, WIDE_MMA, WIDE_WGMMA: the tensor-core kernels
 *    (cuda_gemm_mma.cu, cuda_gemm_wgmma.cu), R and the DRELU mask in their
 *    epilogue.
 *
 * cuBLASLt plans (descriptors + the heuristic's first algorithm) are cached
 * per key (shape, leading dimensions, batch and strides, operand alignments,
 * beta == 0 or not, epilogue, precision) in an open-addressing table; the
 * heuristic's answer depends on nothing else, so a graph captured before its
 * eager twin runs the same algorithm and both give the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

/* the call in cuBLAS' column-major terms: D[m,n] = alpha opA(X) opB(Y) + beta D */
typedef struct {
    cublasOperation_t ta, tb;
    int m, n, k, batch;
    const void *X, *Y;
    void *D;
    const void *Cin; /* the C that beta scales, laid out as D (NULL: D itself) */
    long ldx, ldy, ldd, sx, sy, sd;
    float alpha, beta;
    tf_dtype xy_t, d_t; /* X and Y; D and Cin */
} cm_gemm;

/* fp32 sums whatever the types; tf32 products only for fp32 operands (a half
 * operand is exact in any tensor-core input format) */
static cublasComputeType_t compute_type(const tf_backend *be, tf_dtype ab)
{
    return be->tf32 && ab == TF_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

static cudaDataType blas_type(tf_dtype t)
{
    return t == TF_BF16 ? CUDA_R_16BF : t == TF_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Largest power of two (<= 256) dividing the address of every matrix of the
 * batch: cuBLASLt's heuristic assumes 256-byte aligned operands unless told
 * otherwise, and arena views are only 4-byte aligned in general. */
static uint32_t align_of(const void *p, long stride, int batch, tf_dtype t)
{
    uintptr_t a = (uintptr_t)p;
    if (batch > 1) a |= (uintptr_t)stride * tf_dtype_size(t);
    const uint32_t least = (uint32_t)tf_dtype_size(t);
    uint32_t al = 256;
    while (al > least && (a % al) != 0) al >>= 1;
    return al;
}

static void plan_destroy(tf_cu_lt_plan *pl)
{
    if (pl->la) TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->la));
    if (pl->lb) TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->lb));
    if (pl->lc) TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->lc));
    if (pl->desc) TF_CUBLASLT_CHECK(cublasLtMatmulDescDestroy(pl->desc));
    memset(pl, 0, sizeof *pl);
}

extern "C" void tf_cu_gemm_destroy_plans(tf_backend *be)
{
    for (int i = 0; i < TF_CU_LT_CACHE; ++i) plan_destroy(&be->lt_cache[i]);
    be->n_plans = 0;
}

static const void *c_in(const cm_gemm *g) { return g->Cin ? g->Cin : g->D; }

static void plan_key(const tf_backend *be, const cm_gemm *g, int relu, long key[TF_CU_LT_KEY])
{
    const int b = g->batch > 1; /* strides only matter in a batch */
    const long k[TF_CU_LT_KEY] = {(long)g->ta, (long)g->tb, g->m, g->n, g->k, g->ldx, g->ldy,
                                  g->ldd, b ? g->sx : 0, b ? g->sy : 0, b ? g->sd : 0, g->batch,
                                  (long)align_of(g->X, g->sx, g->batch, g->xy_t),
                                  (long)align_of(g->Y, g->sy, g->batch, g->xy_t),
                                  (long)align_of(g->D, g->sd, g->batch, g->d_t), g->beta != 0.f,
                                  relu, be->tf32,
                                  (long)align_of(c_in(g), g->sd, g->batch, g->d_t),
                                  (long)g->xy_t, (long)g->d_t};
    memcpy(key, k, sizeof k);
}

/* the slot holding key, else the empty slot where it goes */
static tf_cu_lt_plan *plan_slot(tf_backend *be, const long *key)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the key's words */
    for (int i = 0; i < TF_CU_LT_KEY; ++i) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    for (size_t i = (size_t)(h ^ (h >> 32)) & (TF_CU_LT_CACHE - 1);;
         i = (i + 1) & (TF_CU_LT_CACHE - 1)) {
        tf_cu_lt_plan *pl = &be->lt_cache[i];
        if (!pl->used || !memcmp(pl->key, key, sizeof pl->key)) return pl;
    }
}

static void make_layout(cublasLtMatrixLayout_t *l, tf_dtype t, int rows, int cols, long ld,
                        int batch, long stride)
{
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(l, blas_type(t), (uint64_t)rows, (uint64_t)cols,
                                                 (int64_t)ld));
    if (batch > 1) {
        const int32_t n = batch;
        const int64_t s = stride;
        TF_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &n, sizeof n));
        TF_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s));
    }
}

/* Creates pl's descriptors and asks the heuristic for up to `want` algorithms;
 * returns how many are usable (res[0..n)). With none, the descriptors are
 * destroyed again. */
static int plan_build(tf_backend *be, tf_cu_lt_plan *pl, const cm_gemm *g, int relu, int want,
                      cublasLtMatmulHeuristicResult_t *res)
{
    const cublasLtEpilogue_t epi = relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
    const uint64_t ws = TF_CU_WORKSPACE_BYTES;
    const uint32_t alx = align_of(g->X, g->sx, g->batch, g->xy_t),
                   aly = align_of(g->Y, g->sy, g->batch, g->xy_t),
                   ald = align_of(g->D, g->sd, g->batch, g->d_t),
                   alc = align_of(c_in(g), g->sd, g->batch, g->d_t);
    cublasLtMatmulPreference_t pref;
    int nres = 0, n = 0;

    memset(pl, 0, sizeof *pl);
    memset(res, 0, sizeof *res * (size_t)want);
    TF_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&pl->desc, compute_type(be, g->xy_t), CUDA_R_32F));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &g->ta, sizeof g->ta));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &g->tb, sizeof g->tb));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epi, sizeof epi));
    /* stored shapes (column-major rows x cols) */
    make_layout(&pl->la, g->xy_t, g->ta == CUBLAS_OP_N ? g->m : g->k,
                g->ta == CUBLAS_OP_N ? g->k : g->m, g->ldx, g->batch, g->sx);
    make_layout(&pl->lb, g->xy_t, g->tb == CUBLAS_OP_N ? g->k : g->n,
                g->tb == CUBLAS_OP_N ? g->n : g->k, g->ldy, g->batch, g->sy);
    make_layout(&pl->lc, g->d_t, g->m, g->n, g->ldd, g->batch, g->sd);
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alx, sizeof alx));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &aly, sizeof aly));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alc, sizeof alc));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ald, sizeof ald));
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        be->lt, pl->desc, pl->la, pl->lb, pl->lc, pl->lc, pref, want, res, &nres);
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st == CUBLAS_STATUS_SUCCESS)
        for (int i = 0; i < nres && i < want; ++i)
            if (res[i].state == CUBLAS_STATUS_SUCCESS &&
                res[i].workspaceSize <= TF_CU_WORKSPACE_BYTES)
                res[n++] = res[i];
    if (!n) plan_destroy(pl);
    return n;
}

static cublasStatus_t lt_run(tf_backend *be, const tf_cu_lt_plan *pl, const cm_gemm *g,
                             const cublasLtMatmulAlgo_t *algo)
{
    return cublasLtMatmul(be->lt, pl->desc, &g->alpha, g->X, pl->la, g->Y, pl->lb, &g->beta,
                          c_in(g), pl->lc, g->D, pl->lc, algo, be->workspace,
                          TF_CU_WORKSPACE_BYTES, be->stream);
}

/* Holds the stream for ns nanoseconds (the weight-gradient lane's test delay,
 * cuda_wgrad.cu) */
extern "C" __global__ void hold_kernel(unsigned long long ns)
{
#if TF_HAVE_NV_PTX
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
#else
    (void)ns; /* hostemu runs kernels in order; HIP: no hold (tuning is cuBLASLt's) */
#endif
}

extern "C" void tf_cu_hold(cudaStream_t s, unsigned long long ns)
{
    TF_LAUNCH(hold_kernel, dim3(1), dim3(1), s, ns);
}

/* One GEMM through cuBLASLt; returns 0 when cuBLASLt has no algorithm for it
 * (the caller falls back). */
static int gemm_lt(tf_backend *be, const cm_gemm *g, int relu)
{
    cublasLtMatmulHeuristicResult_t res[1];
    long key[TF_CU_LT_KEY];
    tf_cu_lt_plan tmp, *pl;
    plan_key(be, g, relu, key);
    pl = plan_slot(be, key);
    if (!pl->used) {
        if (be->n_plans >= TF_CU_LT_CACHE / 4 * 3) pl = &tmp; /* table full: one-off plan */
        const int n = plan_build(be, pl, g, relu, 1, res);
        memcpy(pl->key, key, sizeof key);
        pl->used = 1;
        pl->ok = n > 0;
        if (pl->ok) pl->algo = res[0].algo, pl->ws_bytes = res[0].workspaceSize;
        if (pl != &tmp) be->n_plans++;
    }
    if (!pl->ok) return 0;
    TF_CUBLASLT_CHECK(lt_run(be, pl, g, &pl->algo));
    if (pl == &tmp) plan_destroy(&tmp);
    return 1;
}

static void gemm_route(tf_backend *be, tf_gemm_args a);

extern "C" tf_gpu_gemm_shape tf_cu_gemm_shape(const tf_gemm_args *a)
{
    tf_gpu_gemm_shape s;
    s.M = a->M, s.N = a->N, s.K = a->K, s.batch = a->batch;
    s.neg_stride = a->batch > 1 && (a->strideA < 0 || a->strideB < 0 || a->strideC < 0);
    s.relu = a->epilogue == TF_EPI_RELU;
    s.beta_zero = a->beta == 0.f;
    s.half = a->ab_type != TF_F32 || a->c_type != TF_F32;
    s.ta = a->transA, s.tb = a->transB;
    s.c_half = a->c_type != TF_F32;
    return s;
}

extern "C" void tf_cu_t_gemm(tf_backend *be, const tf_gemm_args *a, const char *name)
{
    (void)name; /* kernel names come from cuBLAS; the model's region says which GEMM */
    /* the pairs cuBLAS and cuBLASLt take with fp32 sums: fp32 x fp32 -> fp32,
     * half x half (one type) -> fp32 or the same half */
    if (!tf_dtype_valid(a->ab_type) || !tf_dtype_valid(a->c_type) ||
        (a->c_type != TF_F32 && a->c_type != a->ab_type)) {
        fprintf(stderr, "tinyfold: internal error: GEMM with %s operands and a %s result: the "
                "CUDA backend's GEMMs take fp32 x fp32 -> fp32 and half x half -> fp32 or the "
                "same half\n", tf_dtype_name(a->ab_type), tf_dtype_name(a->c_type));
        abort();
    }
    if (a->M <= 0 || a->N <= 0 || a->batch <= 0) return;
    if (a->epilogue == TF_EPI_DRELU && !a->aux) {
        fprintf(stderr, "tinyfold: internal error: GEMM with the DRELU epilogue and no aux\n");
        abort();
    }
    tf_gemm_args b = *a;
    if (!(a->R && a->R != a->C && a->beta != 0.f)) b.R = NULL;
    if (a->wgrad && be->wstream) { /* on the weight-gradient lane (cuda_wgrad.cu) */
        tf_cu_wgrad_enter(be);
        gemm_route(be, b);
        tf_cu_wgrad_leave(be);
        return;
    }
    gemm_route(be, b);
}

/* R copied into C (a device-to-device copy when the matrices are contiguous,
 * else a strided copy kernel), for the engine whose C is its input */
static void r_into_c(tf_backend *be, tf_gemm_args *a)
{
    const int contiguous = a->ldc == a->N && (a->batch == 1 || a->strideC == (long)a->M * a->N);
    if (contiguous)
        TF_CUDA_CHECK(cudaMemcpyAsync(a->C, a->R, tf_dtype_size(a->c_type) * (size_t)a->M * a->N *
                                                      (size_t)a->batch,
                                      cudaMemcpyDeviceToDevice, be->stream));
    else if (a->c_type == TF_F32)
        tf_cu_copy_strided(be, (float *)a->C, (const float *)a->R, a->M, a->N, a->ldc,
                           a->strideC, a->batch);
    else
        tf_cu_copy_strided_h(be, a->C, a->R, a->M, a->N, a->ldc, a->strideC, a->batch,
                             a->c_type);
    a->R = NULL;
}

/* the library engines' epilogues after the product (the tensor-core kernels
 * apply them in theirs) */
static void epilogue_after(tf_backend *be, const tf_gemm_args *a, int relu)
{
    if (a->c_type != TF_F32) { /* on the rounded C: both selects commute with rounding */
        if (relu) tf_cu_relu_strided_h(be, a->C, a->M, a->N, a->ldc, a->strideC, a->batch,
                                       a->c_type);
        if (a->epilogue == TF_EPI_DRELU)
            tf_cu_drelu_strided_h(be, a->C, a->aux, a->M, a->N, a->ldc, a->strideC, a->batch,
                                  a->c_type);
        return;
    }
    float *C = (float *)a->C;
    if (relu) tf_cu_relu_strided(be, C, a->M, a->N, a->ldc, a->strideC, a->batch);
    if (a->epilogue == TF_EPI_DRELU)
        tf_cu_drelu_strided(be, C, (const float *)a->aux, a->M, a->N, a->ldc, a->strideC,
                            a->batch);
}

static void gemm_route(tf_backend *be, tf_gemm_args a)
{
    const tf_gpu_gemm_shape s = tf_cu_gemm_shape(&a);
    const tf_gpu_gemm_route r = tf_gpu_route_gemm(&be->plan, &be->caps, &s, be->tf32);
    /* swapped operands: X = B (m = N rows of op), Y = A (n = M) */
    const cm_gemm g = {a.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                       a.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                       a.N, a.M, a.K, a.batch, a.B, a.A, a.C, a.R, a.ldb, a.lda, a.ldc,
                       a.strideB, a.strideA, a.strideC, a.alpha, a.beta, a.ab_type, a.c_type};
    const int relu = s.relu;
    switch (r.engine) {
    case TF_GPU_ENG_MMA:
    case TF_GPU_ENG_WGMMA:
    case TF_GPU_ENG_WIDE_MMA:
    case TF_GPU_ENG_WIDE_WGMMA:
        tf_cu_gemm_tc(be, &a, &r);
        return;
    case TF_GPU_ENG_LT:
        /* the fused RELU epilogue, else (level 3) the plain product and the
         * epilogues after it; no algorithm: cuBLAS below */
        if (relu && gemm_lt(be, &g, 1)) return;
        if (be->plan.level >= 3 && gemm_lt(be, &g, 0)) {
            epilogue_after(be, &a, relu);
            return;
        }
        break;
    case TF_GPU_ENG_CUBLAS:
    default:
        break;
    }
    if (a.R) r_into_c(be, &a);
    TF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        be->blas, g.ta, g.tb, g.m, g.n, g.k, &a.alpha, a.B, blas_type(a.ab_type), (int)a.ldb,
        (long long)a.strideB, a.A, blas_type(a.ab_type), (int)a.lda, (long long)a.strideA,
        &a.beta, a.C, blas_type(a.c_type), (int)a.ldc, (long long)a.strideC, a.batch,
        compute_type(be, a.ab_type), CUBLAS_GEMM_DEFAULT));
    epilogue_after(be, &a, relu);
}
