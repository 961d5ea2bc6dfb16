/* Strided batched GEMM on CBLAS (row-major), with the RELU and DRELU
 * epilogues and the residual input R (ops.h: tf_gemm_args).
 *
 * Batches of small matrices (the triangle products, v1 attention scores) run
 * one entry per OpenMP thread: OpenBLAS's OpenMP build runs single-threaded
 * inside a parallel region, and a 64x64x64 product is too small to split
 * across threads profitably. So do batches of large entries with at least as
 * many entries as threads (evenly divided, or many): one threaded cblas call
 * per entry synchronises the threads at every entry, and between entries of
 * a few MFLOP each the threads then spend most of the time waiting for one
 * another (bench/RESULTS.md). Other large entries get one threaded cblas
 * call each.
 * A separate R (R != C) is copied into C first and the GEMM then runs with
 * beta on C: the simplest correct way here (the copy is one pass over C).
 *
 * Element types: fp32 operands take the path above and nothing else. bf16
 * operands go to oneDNN's bf16 matmul where the CPU has AVX512-BF16 and it
 * takes the GEMM (cpu_gemm_dnnl.c; faster than the widening below: its
 * figures are in bench/RESULTS.md). Otherwise bf16
 * and fp16 are converted to fp32 (exact) into packed scratch, the fp32 path
 * runs on that, and a half C is rounded once from the fp32 result after the
 * epilogue (ops.h). The op table's ops never allocate: the scratch is the
 * backend's own growable host buffer (tf_cpu_scratch), which like every
 * other use of it is not counted in peak_bytes. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* Below this many multiply-adds per entry, parallelise over the batch. */
#define GEMM_SMALL_MNK (1L << 21)

/* The epilogue on rows [i0, i1) of entry p's C: RELU (max(c, 0)), or DRELU
 * (c where aux > 0, else 0: the select of act_bwd's ReLU, so that the fused
 * and the separate backward give the same bits) */
static void epi_rows(const tf_gemm_args *a, int p, int i0, int i1) {
    float *C = (float *)a->C + (long)p * a->strideC;
    if (a->epilogue == TF_EPI_RELU) {
        for (int i = i0; i < i1; i++) {
            float *c = C + (long)i * a->ldc;
#pragma omp simd
            for (int j = 0; j < a->N; j++)
                c[j] = c[j] > 0.0f ? c[j] : 0.0f;
        }
    } else if (a->epilogue == TF_EPI_DRELU) {
        const float *X = (const float *)a->aux + (long)p * a->strideC;
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
    const float *A = (const float *)a->A + (long)p * a->strideA;
    const float *B = (const float *)a->B + (long)p * a->strideB;
    float *C = (float *)a->C + (long)p * a->strideC;
    const float *R = a->R ? (const float *)a->R + (long)p * a->strideC : C;
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

/* the fp32 GEMM (every operand fp32) */
static void gemm_f32(tf_backend *be, const tf_gemm_args *a) {
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

/* batch entries of rows x cols (leading dimension ld, entries stride apart,
 * elements of type t) to packed fp32 [nb, rows, cols], and back */
static void pack_f32(tf_backend *be, float *dst, const void *src, tf_dtype t, long ld, long stride,
                     int nb, long rows, long cols) {
    const size_t es = tf_dtype_size(t);
    const long n = (long)nb * rows;
#pragma omp parallel for if (n * cols >= TF_CPU_PAR_MIN) schedule(static) num_threads(be->threads)
    for (long r = 0; r < n; r++) {
        const long p = r / rows, i = r % rows;
        tf_dtype_to_f32(dst + r * cols, (const char *)src + (p * stride + i * ld) * (long)es, t,
                        (size_t)cols);
    }
}

static void store_from_f32(tf_backend *be, void *dst, tf_dtype t, long ld, long stride, int nb,
                           long rows, long cols, const float *src) {
    const size_t es = tf_dtype_size(t);
    const long n = (long)nb * rows;
#pragma omp parallel for if (n * cols >= TF_CPU_PAR_MIN) schedule(static) num_threads(be->threads)
    for (long r = 0; r < n; r++) {
        const long p = r / rows, i = r % rows;
        tf_dtype_from_f32((char *)dst + (p * stride + i * ld) * (long)es, t, src + r * cols,
                          (size_t)cols);
    }
}

/* a GEMM with a bf16/fp16 operand or result: fp32 copies in scratch, the fp32
 * GEMM on them, then C rounded to c_type (ops.h) */
static void gemm_mixed(tf_backend *be, const tf_gemm_args *a) {
    const long cspan = (long)(a->M - 1) * a->ldc + a->N;
    if (a->c_type != TF_F32 && a->batch > 1 && a->strideC < cspan && -a->strideC < cspan) {
        /* entries that share C (strideC 0: accumulated in order) store and
         * read c_type in turn: one entry at a time */
        const size_t eab = tf_dtype_size(a->ab_type), ec = tf_dtype_size(a->c_type);
        for (int p = 0; p < a->batch; p++) {
            tf_gemm_args e = *a;
            e.batch = 1;
            e.A = (const char *)a->A + (long)p * a->strideA * (long)eab;
            e.B = (const char *)a->B + (long)p * a->strideB * (long)eab;
            e.C = (char *)a->C + (long)p * a->strideC * (long)ec;
            if (a->R) e.R = (const char *)a->R + (long)p * a->strideC * (long)ec;
            if (a->aux) e.aux = (const char *)a->aux + (long)p * a->strideC * (long)ec;
            gemm_mixed(be, &e);
        }
        return;
    }
    const long M = a->M, N = a->N, K = a->K;
    const long rA = a->transA ? K : M, cA = a->transA ? M : K;
    const long rB = a->transB ? N : K, cB = a->transB ? K : N;
    /* a batch stride of 0 (one shared operand) is converted once */
    const int nbA = a->batch > 1 && a->strideA != 0 ? a->batch : 1;
    const int nbB = a->batch > 1 && a->strideB != 0 ? a->batch : 1;
    const int drelu = a->epilogue == TF_EPI_DRELU;
    const int half_ab = a->ab_type != TF_F32, half_c = a->c_type != TF_F32;
    const size_t nA = half_ab ? tf_cpu_pad_floats((size_t)nbA * rA * cA) : 0;
    const size_t nB = half_ab ? tf_cpu_pad_floats((size_t)nbB * rB * cB) : 0;
    const size_t nC = half_c ? tf_cpu_pad_floats((size_t)a->batch * M * N) : 0;
    const size_t nX = half_c && drelu ? nC : 0;
    float *Af = tf_cpu_scratch(be, sizeof(float) * (nA + nB + nC + nX));
    float *Bf = Af + nA, *Cf = Bf + nB, *Xf = Cf + nC;
    tf_gemm_args f = *a; /* the same GEMM on fp32 operands */
    f.ab_type = TF_F32;
    f.c_type = TF_F32;
    if (half_ab) {
        pack_f32(be, Af, a->A, a->ab_type, a->lda, a->strideA, nbA, rA, cA);
        pack_f32(be, Bf, a->B, a->ab_type, a->ldb, a->strideB, nbB, rB, cB);
        f.A = Af, f.lda = cA, f.strideA = nbA > 1 ? rA * cA : 0;
        f.B = Bf, f.ldb = cB, f.strideB = nbB > 1 ? rB * cB : 0;
    }
    if (half_c) {
        if (a->beta != 0.0f) /* beta == 0 reads neither R nor C */
            pack_f32(be, Cf, a->R ? a->R : a->C, a->c_type, a->ldc, a->strideC, a->batch, M, N);
        if (drelu)
            pack_f32(be, Xf, a->aux, a->c_type, a->ldc, a->strideC, a->batch, M, N);
        f.C = Cf, f.ldc = N, f.strideC = M * N;
        f.R = NULL;
        f.aux = drelu ? Xf : NULL;
    }
    gemm_f32(be, &f);
    if (half_c)
        store_from_f32(be, a->C, a->c_type, a->ldc, a->strideC, a->batch, M, N, Cf);
}

void tf_cpu_gemm(tf_backend *be, const tf_gemm_args *a, const char *name) {
    (void)name; /* a label for traces only */
    if (a->ab_type == TF_F32 && a->c_type == TF_F32) {
        gemm_f32(be, a);
        return;
    }
    if (!tf_dtype_valid(a->ab_type) || !tf_dtype_valid(a->c_type)) {
        fprintf(stderr, "tinyfold: internal error: GEMM with element types %d, %d (known: fp32 0, "
                "bf16 1, fp16 2)\n", (int)a->ab_type, (int)a->c_type);
        abort();
    }
    if (a->M <= 0 || a->N <= 0 || a->batch <= 0)
        return;
    if (a->ab_type == TF_BF16 && be->bf16_dnnl && tf_cpu_gemm_dnnl(be, a))
        return;
    gemm_mixed(be, a);
}

void tf_cpu_gemm_packed(tf_backend *be, int tA, int tB, int M, int N, int K, const void *A,
                        const void *B, void *C, float beta, const void *R, tf_dtype t, tf_dtype ct,
                        const char *name) {
    tf_gemm_args g = {0};
    g.transA = tA, g.transB = tB;
    g.M = M, g.N = N, g.K = K;
    g.alpha = 1.0f, g.beta = beta;
    g.A = A, g.lda = tA ? M : K;
    g.B = B, g.ldb = tB ? K : N;
    g.C = C, g.ldc = N;
    g.batch = 1;
    g.R = R;
    g.ab_type = t, g.c_type = ct;
    tf_cpu_gemm(be, &g, name);
}
