/* Row-major strided batched GEMM on cuBLAS / cuBLASLt (column-major).
 *
 * A row-major [R, C] matrix with leading dimension ld is the column-major
 * [C, R] matrix with the same ld, i.e. its transpose. So row-major
 *   C = op(A) op(B)      is column-major      C^T = op(B)^T op(A)^T,
 * which is one cuBLAS call with the operands swapped (B first), the same
 * transpose flags, and m = N, n = M.
 *
 * Levels 1-2 (the baselines): cublasGemmStridedBatchedEx (CUBLAS_GEMM_DEFAULT);
 * the RELU epilogue runs fused in cuBLASLt (heuristic's first algorithm) when
 * batch == 1, else as a separate kernel after cuBLAS.
 *
 * Level 3: the tensor-core kernel of cuda_gemm_mma.cu takes every GEMM it
 * suits (be->gemm_mma: fp32 by default, as 3xTF32); the rest, and every GEMM
 * when it is off, go below. Every GEMM with K > 0 runs in cuBLASLt (strided batch through the
 * layouts' BATCH_COUNT / STRIDED_BATCH_OFFSET, C passed as C and D, RELU as
 * its epilogue, or as the separate kernel when cuBLASLt has no RELU algorithm
 * for the shape). Plans (descriptors + algorithm) are cached per key (shape,
 * leading dimensions, batch and strides, operand alignments, beta == 0 or not,
 * epilogue, precision) in an open-addressing table. The first call of a key
 * asks the heuristic for up to TF_CU_LT_ALGOS candidates and, unless the
 * stream is capturing a graph, times them on the call's own operands and keeps
 * the fastest (plan_tune); while capturing, or without TF_CUDA_GEMM_TUNE=1, the
 * heuristic's first is kept. A key is never re-tuned: a graph captured
 * before its eager twin runs the same algorithm, so both give the same bits.
 * No candidate: cublasGemmStridedBatchedEx, as at levels 1-2. K == 0 (C =
 * beta C, which cuBLAS does) always takes the cuBLAS path.
 *
 * The residual input R (ops.h) is cuBLASLt's C (D the output) and is read in
 * the tensor-core kernels' epilogue; cuBLAS (C its input) gets R copied into
 * C first. The DRELU epilogue runs in the tensor-core kernels' epilogue, as a
 * mask kernel after the cuBLAS paths.
 *
 * Tuning costs one synchronisation per key (warm-up steps) and, when beta != 0
 * (C is an input), a saved copy of C: in the backend's scratch area when it
 * fits, else a temporary device buffer (tf_cu_alloc, so the reported peak
 * includes it) freed right after. Without the memory, the key is not timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

#define TUNE_RUNS TF_CU_TUNE_RUNS
#define TUNE_EV (TUNE_RUNS + 1) /* events per candidate */
#define TUNE_WAIT_NS 40000ull   /* per candidate: the GPU waits while the runs are queued */

/* the call in cuBLAS' column-major terms: D[m,n] = alpha opA(X) opB(Y) + beta D */
typedef struct {
    cublasOperation_t ta, tb;
    int m, n, k, batch;
    const float *X, *Y;
    float *D;
    const float *Cin; /* the C that beta scales, laid out as D (NULL: D itself) */
    long ldx, ldy, ldd, sx, sy, sd;
    float alpha, beta;
} cm_gemm;

static cublasComputeType_t compute_type(const tf_backend *be)
{
    return be->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* Largest power of two (<= 256) dividing the address of every matrix of the
 * batch: cuBLASLt's heuristic assumes 256-byte aligned operands unless told
 * otherwise, and arena views are only 4-byte aligned in general. */
static uint32_t align_of(const void *p, long stride, int batch)
{
    uintptr_t a = (uintptr_t)p;
    if (batch > 1) a |= (uintptr_t)stride * sizeof(float);
    uint32_t al = 256;
    while (al > 4 && (a % al) != 0) al >>= 1;
    return al;
}

/* floats from D to the end of the last matrix of the batch */
static size_t d_extent(const cm_gemm *g)
{
    return (size_t)((long)(g->batch - 1) * g->sd + (long)(g->n - 1) * g->ldd + g->m);
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
    if (be->tune_ev_ready)
        for (int i = 0; i < TUNE_EV * TF_CU_LT_ALGOS; ++i) (void)cudaEventDestroy(be->tune_ev[i]);
    be->tune_ev_ready = 0;
}

static const float *c_in(const cm_gemm *g) { return g->Cin ? g->Cin : g->D; }

static void plan_key(const tf_backend *be, const cm_gemm *g, int relu, long key[TF_CU_LT_KEY])
{
    const int b = g->batch > 1; /* strides only matter in a batch */
    const long k[TF_CU_LT_KEY] = {(long)g->ta, (long)g->tb, g->m, g->n, g->k, g->ldx, g->ldy,
                                  g->ldd, b ? g->sx : 0, b ? g->sy : 0, b ? g->sd : 0, g->batch,
                                  (long)align_of(g->X, g->sx, g->batch),
                                  (long)align_of(g->Y, g->sy, g->batch),
                                  (long)align_of(g->D, g->sd, g->batch), g->beta != 0.f, relu,
                                  be->tf32, (long)align_of(c_in(g), g->sd, g->batch),
                                  be->on_lane ? be->wgrad_sms : 0};
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

static void make_layout(cublasLtMatrixLayout_t *l, int rows, int cols, long ld, int batch,
                        long stride)
{
    TF_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols,
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
    const uint32_t alx = align_of(g->X, g->sx, g->batch), aly = align_of(g->Y, g->sy, g->batch),
                   ald = align_of(g->D, g->sd, g->batch), alc = align_of(c_in(g), g->sd, g->batch);
    cublasLtMatmulPreference_t pref;
    int nres = 0, n = 0;

    memset(pl, 0, sizeof *pl);
    memset(res, 0, sizeof *res * (size_t)want);
    TF_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&pl->desc, compute_type(be), CUDA_R_32F));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &g->ta, sizeof g->ta));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &g->tb, sizeof g->tb));
    TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epi, sizeof epi));
    if (be->on_lane && be->wgrad_sms) { /* leave the rest of the GPU to the main queue */
        const int32_t sms = be->wgrad_sms;
        TF_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
            pl->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    /* stored shapes (column-major rows x cols) */
    make_layout(&pl->la, g->ta == CUBLAS_OP_N ? g->m : g->k, g->ta == CUBLAS_OP_N ? g->k : g->m,
                g->ldx, g->batch, g->sx);
    make_layout(&pl->lb, g->tb == CUBLAS_OP_N ? g->k : g->n, g->tb == CUBLAS_OP_N ? g->n : g->k,
                g->ldy, g->batch, g->sy);
    make_layout(&pl->lc, g->m, g->n, g->ldd, g->batch, g->sd);
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    if (be->lt_inplace) { /* no separate split-K reduce kernel (a launch each) */
        const uint32_t rs = CUBLASLT_REDUCTION_SCHEME_INPLACE;
        TF_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &rs, sizeof rs));
    }
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

/* Holds the stream for ns nanoseconds, so that the timed runs queued behind
 * it start back to back (small GEMMs are shorter than a launch). */
extern "C" __global__ void gemm_tune_wait_kernel(unsigned long long ns)
{
    TF_PDL_ENTRY();
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
    TF_LAUNCH(gemm_tune_wait_kernel, dim3(1), dim3(1), s, ns);
}

/* Times the n candidates on the call's own operands (one untimed and
 * TUNE_RUNS timed runs each, the minimum counts) and returns the index of the
 * fastest; a later candidate must be 2% faster to replace an earlier one
 * (noise keeps the heuristic's order); -1 when none would run. When beta != 0,
 * D is an input: it is saved before and restored after, so the call's result
 * is unchanged. Returns 0 without timing when the copy does not fit in memory. */
static int plan_tune(tf_backend *be, tf_cu_lt_plan *pl, const cm_gemm *g,
                     const cublasLtMatmulHeuristicResult_t *res, int n)
{
    const size_t bytes = d_extent(g) * sizeof(float);
    void *save = NULL;
    int own = 0, best = -1, ran[TF_CU_LT_ALGOS];
    float best_ms = 0.f;
    if (g->beta != 0.f && !g->Cin) { /* D is C: an input */
        if (bytes <= TF_CU_SCRATCH_FLOATS * sizeof(float)) {
            save = be->scratch;
        } else {
            if (tf_cu_alloc(be, &save, bytes)) return 0; /* out of memory: untimed */
            own = 1;
        }
        TF_CUDA_CHECK(cudaMemcpyAsync(save, g->D, bytes, cudaMemcpyDeviceToDevice, be->stream));
    }
    if (!be->tune_ev_ready) {
        for (int i = 0; i < TUNE_EV * TF_CU_LT_ALGOS; ++i)
            TF_CUDA_CHECK(cudaEventCreate(&be->tune_ev[i]));
        be->tune_ev_ready = 1;
    }
    TF_LAUNCH(gemm_tune_wait_kernel, dim3(1), dim3(1), be->stream, TUNE_WAIT_NS * (unsigned)n);
    for (int i = 0; i < n; ++i) {
        cudaEvent_t *ev = &be->tune_ev[TUNE_EV * i];
        ran[i] = lt_run(be, pl, g, &res[i].algo) == CUBLAS_STATUS_SUCCESS;
        for (int r = 0; ran[i] && r < TUNE_RUNS; ++r) {
            TF_CUDA_CHECK(cudaEventRecord(ev[r], be->stream));
            TF_CUBLASLT_CHECK(lt_run(be, pl, g, &res[i].algo));
        }
        if (ran[i]) TF_CUDA_CHECK(cudaEventRecord(ev[TUNE_RUNS], be->stream));
    }
    if (save) TF_CUDA_CHECK(cudaMemcpyAsync(g->D, save, bytes, cudaMemcpyDeviceToDevice, be->stream));
    TF_CUDA_CHECK(cudaStreamSynchronize(be->stream));
    if (own) tf_cu_free(be, save);
    for (int i = 0; i < n; ++i) {
        if (!ran[i]) continue;
        float t = 0.f, m = 0.f;
        for (int r = 0; r < TUNE_RUNS; ++r) {
            TF_CUDA_CHECK(cudaEventElapsedTime(&t, be->tune_ev[TUNE_EV * i + r],
                                               be->tune_ev[TUNE_EV * i + r + 1]));
            if (r == 0 || t < m) m = t;
        }
        if (best < 0 || m < 0.98f * best_ms) best = i, best_ms = m;
    }
    pl->tuned = best >= 0;
    return best;
}

/* One GEMM through cuBLASLt; returns 0 when cuBLASLt has no algorithm for it
 * (the caller falls back). */
static int gemm_lt(tf_backend *be, const cm_gemm *g, int relu)
{
    cublasLtMatmulHeuristicResult_t res[TF_CU_LT_ALGOS];
    long key[TF_CU_LT_KEY];
    tf_cu_lt_plan tmp, *pl;
    plan_key(be, g, relu, key);
    pl = plan_slot(be, key);
    if (!pl->used) {
        const int tune = be->kernel_level >= 3 && be->gemm_tune;
        if (be->n_plans >= TF_CU_LT_CACHE / 4 * 3) pl = &tmp; /* table full: one-off plan */
        const int n = plan_build(be, pl, g, relu, tune ? TF_CU_LT_ALGOS : 1, res);
        int pick = 0;
        if (n > 1 && tune && pl != &tmp) {
            cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
            TF_CUDA_CHECK(cudaStreamIsCapturing(be->stream, &cs));
            if (cs == cudaStreamCaptureStatusNone) pick = plan_tune(be, pl, g, res, n);
        }
        if (pick < 0) plan_destroy(pl); /* no candidate ran */
        memcpy(pl->key, key, sizeof key);
        pl->used = 1;
        pl->ok = n > 0 && pick >= 0;
        if (pl->ok) pl->algo = res[pick].algo, pl->ws_bytes = res[pick].workspaceSize;
        if (pl != &tmp) be->n_plans++;
    }
    if (!pl->ok) return 0;
    TF_CUBLASLT_CHECK(lt_run(be, pl, g, &pl->algo));
    if (pl == &tmp) plan_destroy(&tmp);
    return 1;
}

/* The paths below; DRELU's mask runs in the tensor-core kernels' epilogue,
 * after the cuBLAS paths as drelu_strided_kernel1. */
static void gemm_plain(tf_backend *be, tf_gemm_args a);

extern "C" void tf_cu_gemm(tf_backend *be, const tf_gemm_args *a, const char *name)
{
    (void)name; /* kernel names come from cuBLAS; the model's region says which GEMM */
    if (a->M <= 0 || a->N <= 0 || a->batch <= 0) return;
    if (a->epilogue == TF_EPI_DRELU && !a->aux) {
        fprintf(stderr, "tinyfold: internal error: GEMM with the DRELU epilogue and no aux\n");
        abort();
    }
    tf_gemm_args b = *a;
    if (!(a->R && a->R != a->C && a->beta != 0.f)) b.R = NULL;
    if (a->wgrad && be->wstream) { /* on the weight-gradient lane (cuda_wgrad.cu) */
        tf_cu_wgrad_enter(be);
        gemm_plain(be, b);
        tf_cu_wgrad_leave(be);
        return;
    }
    gemm_plain(be, b);
}

/* R copied into C (a device-to-device copy when the matrices are contiguous,
 * else a strided copy kernel), for the paths whose C is their input */
static void r_into_c(tf_backend *be, tf_gemm_args *a)
{
    const int contiguous = a->ldc == a->N && (a->batch == 1 || a->strideC == (long)a->M * a->N);
    if (contiguous)
        TF_CUDA_CHECK(cudaMemcpyAsync(a->C, a->R, sizeof(float) * (size_t)a->M * a->N *
                                                      (size_t)a->batch,
                                      cudaMemcpyDeviceToDevice, be->stream));
    else
        tf_cu_copy_strided(be, a->C, a->R, a->M, a->N, a->ldc, a->strideC, a->batch);
    a->R = NULL;
}

/* The residual input R (tf_gemm_args.R): the tensor-core kernels read it in
 * their epilogue and cuBLASLt as its C, D the output (no copy: RESULTS.md
 * entries 14 and 16); cuBLAS takes C as its input, so R is copied into C
 * first there. DRELU (a.epilogue) is consumed by the tensor-core paths, else
 * applied by drelu_after. */
static void drelu_after(tf_backend *be, const tf_gemm_args *a)
{
    if (a->epilogue == TF_EPI_DRELU)
        tf_cu_drelu_strided(be, a->C, a->aux, a->M, a->N, a->ldc, a->strideC, a->batch);
}

static void gemm_plain(tf_backend *be, tf_gemm_args a)
{
    const int strides_ok = a.batch == 1 || (a.strideA >= 0 && a.strideB >= 0 && a.strideC >= 0);
    if (a.R && (be->kernel_level < 3 || a.K <= 0 || !strides_ok || (be->gemm_mma && !be->r_epi)))
        r_into_c(be, &a);
    /* swapped operands: X = B (m = N rows of op), Y = A (n = M) */
    const cm_gemm g = {a.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                       a.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                       a.N, a.M, a.K, a.batch, a.B, a.A, a.C, a.R, a.ldb, a.lda, a.ldc,
                       a.strideB, a.strideA, a.strideC, a.alpha, a.beta};
    const int relu = a.epilogue == TF_EPI_RELU;
    if (be->kernel_level >= 3) {
        /* the weight gradients' wide split, then the tensor-core kernels:
         * R and the mask in their epilogue */
        if (be->gemm_dw && tf_cu_gemm_wide(be, &a, 1)) return;
        if (be->gemm_mma && tf_cu_gemm_mma(be, &a)) return;
        if (a.K > 0 && strides_ok) {
            if (relu && gemm_lt(be, &g, 1)) return;
            if (gemm_lt(be, &g, 0)) {
                if (relu) tf_cu_relu_strided(be, a.C, a.M, a.N, a.ldc, a.strideC, a.batch);
                drelu_after(be, &a);
                return;
            }
        }
    } else if (relu && a.batch == 1 && a.beta == 0.f && a.K > 0 && gemm_lt(be, &g, 1)) {
        return;
    }
    if (a.R) r_into_c(be, &a); /* no cuBLASLt algorithm: cuBLAS reads C */
    TF_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        be->blas, g.ta, g.tb, g.m, g.n, g.k, &a.alpha, a.B, CUDA_R_32F, (int)a.ldb,
        (long long)a.strideB, a.A, CUDA_R_32F, (int)a.lda, (long long)a.strideA, &a.beta, a.C,
        CUDA_R_32F, (int)a.ldc, (long long)a.strideC, a.batch, compute_type(be),
        CUBLAS_GEMM_DEFAULT));
    if (relu) tf_cu_relu_strided(be, a.C, a.M, a.N, a.ldc, a.strideC, a.batch);
    drelu_after(be, &a);
}
