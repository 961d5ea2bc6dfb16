/* Strided batched GEMM on CBLAS (row-major), with the RELU and DRELU
 * epilogues and the residual input R (ops.h: tf_gemm_args).
 *
 * Batches of small matrices (the triangle products, v1 attention scores) run
 * one entry per OpenMP thread: OpenBLAS's OpenMP build runs single-threaded
 * inside a parallel region, and a 64x64x64 product is too small to split
 * across threads profitably. So do batches of large entries with at least as
 * many entries as threads (evenly divided, or many): one threaded cblas call
 * per entry synchronises the threads at every entry, and at the triangle
 * products of N 256 (128 entries of 256x256x256, 2 threads) that ran at
 * 0.8 GFLOP/s against 14 per entry per thread (bench/RESULTS.md). Other
 * large entries get one threaded cblas call each.
 * A separate R (R != C) is copied into C first and the GEMM then runs with
 * beta on C: the simplest correct way here (the copy is one pass over C). */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"

/* Below this many multiply-adds per entry, parallelise over the batch. */
#define GEMM_SMALL_MNK (1L << 21)

/* The epilogue on rows [i0, i1) of entry p's C: RELU (max(c, 0)), or DRELU
 * (c where aux > 0, else 0: the select of act_bwd's ReLU, so that the fused
 * and the separate backward give the same bits) */
static void epi_rows(const tf_gemm_args *a, int p, int i0, int i1) {
    float *C = a->C + (long)p * a->strideC;
    if (a->epilogue == TF_EPI_RELU) {
        for (int i = i0; i < i1; i++) {
            float *c = C + (long)i * a->ldc;
#pragma omp simd
            for (int j = 0; j < a->N; j++)
                c[j] = c[j] > 0.0f ? c[j] : 0.0f;
        }
    } else if (a->epilogue == TF_EPI_DRELU) {
        const float *X = a->aux + (long)p * a->strideC;
        for (int i = i0; i < i1; i++) {
            float *c = C + (long)i * a->ldc;
            const float *x = X + (long)i * a->ldc;
#pragma omp simd
            for (int j = 0; j < a->N; j++)
                c[j] = x[j] > 0.0f ? c[j] : 0.0f;
        }
    }
}

/* C = beta * C for K == 0 (BLAS would reject lda/ldb of 0; beta == 0 must not
 * read C). */
static void scale_rows(float *C, int M, int N, long ldc, float beta) {
    for (int i = 0; i < M; i++) {
        float *c = C + (long)i * ldc;
        for (int j = 0; j < N; j++)
            c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
}

static void gemm_one(const tf_gemm_args *a, int p) {
    const float *A = a->A + (long)p * a->strideA;
    const float *B = a->B + (long)p * a->strideB;
    float *C = a->C + (long)p * a->strideC;
    const float *R = a->R ? a->R + (long)p * a->strideC : C;
    if (a->beta != 0.0f && R != C) /* beta == 0 reads neither */
        for (int i = 0; i < a->M; i++)
            memmove(C + (long)i * a->ldc, R + (long)i * a->ldc, sizeof(float) * (size_t)a->N);
    if (a->K == 0)
        scale_rows(C, a->M, a->N, a->ldc, a->beta);
    else
        cblas_sgemm(CblasRowMajor, a->transA ? CblasTrans : CblasNoTrans,
                    a->transB ? CblasTrans : CblasNoTrans, a->M, a->N, a->K, a->alpha, A,
                    (int)a->lda, B, (int)a->ldb, a->beta, C, (int)a->ldc);
}

void tf_cpu_gemm(tf_backend *be, const tf_gemm_args *a, const char *name) {
    (void)name; /* a label for traces only */
    if (a->M <= 0 || a->N <= 0 || a->batch <= 0)
        return;
    const int epi = a->epilogue == TF_EPI_RELU || a->epilogue == TF_EPI_DRELU;
    const long mnk = (long)a->M * a->N * (a->K > 0 ? a->K : 1);
    /* Entries may run concurrently only if their C blocks are disjoint (a
     * strideC of 0 means "accumulate every entry into one C", in order). */
    const long cspan = (long)(a->M - 1) * a->ldc + a->N;
    const int disjoint = a->strideC >= cspan || -a->strideC >= cspan;
    const int even = a->batch >= be->threads &&
                     (a->batch % be->threads == 0 || a->batch >= 4 * be->threads);
    if (a->batch > 1 && (mnk < GEMM_SMALL_MNK || even) && be->threads > 1 && disjoint) {
#pragma omp parallel for schedule(static) num_threads(be->threads)
        for (int p = 0; p < a->batch; p++) {
            gemm_one(a, p);
            if (epi)
                epi_rows(a, p, 0, a->M);
        }
        return;
    }
    for (int p = 0; p < a->batch; p++) {
        gemm_one(a, p);
        if (!epi)
            continue;
        if ((long)a->M * a->N < TF_CPU_PAR_MIN) {
            epi_rows(a, p, 0, a->M);
            continue;
        }
#pragma omp parallel for schedule(static) num_threads(be->threads)
        for (int i = 0; i < a->M; i++)
            epi_rows(a, p, i, i + 1);
    }
}
