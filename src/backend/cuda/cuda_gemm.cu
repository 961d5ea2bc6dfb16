/* Row-major strided batched GEMM on cuBLAS (column-major).
 *
 * A row-major [R, C] matrix with leading dimension ld is the column-major
 * [C, R] matrix with the same ld, i.e. its transpose. So row-major
 *   C = op(A) op(B)      is column-major      C^T = op(B)^T op(A)^T,
 * which is one cuBLAS call with the operands swapped (B first), the same
 * transpose flags, and m = N, n = M.
 *
 * The RELU epilogue runs fused in cuBLASLt (CUBLASLT_EPILOGUE_RELU) when
 * batch == 1, else as a separate kernel after cuBLAS. cuBLASLt plans (the
 * descriptors and the heuristic's algorithm) are cached per shape, so the
 * heuristic runs once per shape and never inside a step's hot path again. */
#include <stdio.h>
#include <string.h>

#include "cuda_common.h"

static cublasComputeType_t compute_type(const tf_backend *be)
{
    return be->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic
 * assumes 256-byte aligned operands unless told otherwise, and arena views
 * are only 4-byte aligned in general. */
static uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 4 && (a % al) != 0) al >>= 1;
    return al;
}

static void plan_destroy(tf_cu_lt_plan *pl)
{
    if (!pl->used) return;
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->la));
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->lb));
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutDestroy(pl->lc));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescDestroy(pl->desc));
    pl->used = 0;
}

extern "C" void tf_cu_gemm_destroy_plans(tf_backend *be)
{
    for (int i = 0; i < TF_CU_LT_CACHE; ++i) plan_destroy(&be->lt_cache[i]);
}

/* Builds a cuBLASLt plan for column-major D[m,n] = relu(opA(X)[m,k] opB(Y)[k,n]),
 * X = our B, Y = our A. Returns 0 when cuBLASLt offers no algorithm. */
static int plan_build(tf_backend *be, tf_cu_lt_plan *pl, cublasOperation_t ta,
                      cublasOperation_t tb, int m, int n, int k, const float *X, long ldx,
                      const float *Y, long ldy, float *D, long ldd)
{
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    uint64_t ws = TF_CU_WORKSPACE_BYTES;
    uint32_t alx = align_of(X), aly = align_of(Y), ald = align_of(D);

    memset(pl, 0, sizeof *pl);
    memset(&res, 0, sizeof res);
    TF_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&pl->desc, compute_type(be), CUDA_R_32F));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                     sizeof ta));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                     sizeof tb));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epi, sizeof epi));
    /* stored shapes (column-major rows x cols) */
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl->la, CUDA_R_32F,
                                                 ta == CUBLAS_OP_N ? m : k,
                                                 ta == CUBLAS_OP_N ? k : m, ldx));
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl->lb, CUDA_R_32F,
                                                 tb == CUBLAS_OP_N ? k : n,
                                                 tb == CUBLAS_OP_N ? n : k, ldy));
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl->lc, CUDA_R_32F, m, n, ldd));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alx, sizeof alx));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &aly, sizeof aly));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ald, sizeof ald));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ald, sizeof ald));
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(be->lt, pl->desc, pl->la, pl->lb, pl->lc,
                                                       pl->lc, pref, 1, &res, &nres);
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    pl->used = 1;
    if (st != CUBLAS_STATUS_SUCCESS || nres < 1 || res.state != CUBLAS_STATUS_SUCCESS) {
        plan_destroy(pl);
        return 0;
    }
    pl->algo = res.algo;
    pl->ws_bytes = res.workspaceSize;
    return 1;
}

/* The fused path; returns 0 when cuBLASLt cannot do it (the caller falls back). */
static int gemm_relu_lt(tf_backend *be, cublasOperation_t ta, cublasOperation_t tb, int m,
                        int n, int k, float alpha, const float *X, long ldx, const float *Y,
                        long ldy, float *D, long ldd)
{
    const long key[11] = {(long)ta, (long)tb, m, n, k, ldx, ldy, ldd,
                          (long)align_of(X) * 1000 + align_of(Y), (long)align_of(D),
                          be->tf32};
    const float beta = 0.f;
    tf_cu_lt_plan tmp, *pl = NULL;
    int i;
    for (i = 0; i < TF_CU_LT_CACHE; ++i)
        if (be->lt_cache[i].used && !memcmp(be->lt_cache[i].key, key, sizeof key)) {
            pl = &be->lt_cache[i];
            break;
        }
    if (!pl) {
        for (i = 0; i < TF_CU_LT_CACHE && be->lt_cache[i].used; ++i) {}
        pl = i < TF_CU_LT_CACHE ? &be->lt_cache[i] : &tmp; /* cache full: one-off plan */
        if (!plan_build(be, pl, ta, tb, m, n, k, X, ldx, Y, ldy, D, ldd)) return 0;
        memcpy(pl->key, key, sizeof key);
    }
    TF_CUBLASLT_CHECK(cublasLtMatmul(be->lt, pl->desc, &alpha, X, pl->la, Y, pl->lb, &beta, D,
                                     pl->lc, D, pl->lc, &pl->algo, be->workspace,
                                     TF_CU_WORKSPACE_BYTES, be->stream));
    if (pl == &tmp) plan_destroy(&tmp);
    return 1;
}

extern "C" void tf_cu_gemm(tf_backend *be, const tf_gemm_args *a, const char *name)
{
    (void)name; /* kernel names come from cuBLAS; the model's region says which GEMM */
    if (a->M <= 0 || a->N <= 0 || a->batch <= 0) return;
    /* swapped operands: X = B (m = N rows of op), Y = A (n = M) */
    const cublasOperation_t ta = a->transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = a->transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int relu = a->epilogue == TF_EPI_RELU;
    if (relu && a->batch == 1 && a->beta == 0.f && a->K > 0 &&
        gemm_relu_lt(be, ta, tb, a->N, a->M, a->K, a->alpha, a->B, a->ldb, a->A, a->lda, a->C,
                     a->ldc))
        return;
    TF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        be->blas, ta, tb, a->N, a->M, a->K, &a->alpha, a->B, CUDA_R_32F, (int)a->ldb,
        (long long)a->strideB, a->A, CUDA_R_32F, (int)a->lda, (long long)a->strideA, &a->beta,
        a->C, CUDA_R_32F, (int)a->ldc, (long long)a->strideC, a->batch, compute_type(be),
        CUBLAS_GEMM_DEFAULT));
    if (relu) tf_cu_relu_strided(be, a->C, a->M, a->N, a->ldc, a->strideC, a->batch);
}
