/* The roofline's ceilings on CUDA, measured on the current device when the
 * first step begins (CUPTI activity runs, but outside every step nothing is
 * collected; the step's clock starts after): the
 * best of a few device-to-device copies of 512 MiB (bytes read + written)
 * and of a few 8192^3 fp32 cublasSgemm calls (the default math mode, no
 * TF32; then the same with TF32 tensor cores, the ceiling of --precision
 * tf32; and as cublasGemmEx on bf16 operands with fp32 sums and result, the
 * ceiling of bf16 and fp16), timed with events on a stream of their own.
 * About a second. */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "prof/prof_internal.h"

#define COPY_BYTES ((size_t)512 << 20)
#define GEMM_N 8192
#define REPS 5

static double best_ms(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, int what, void *x, void *y,
                      cublasHandle_t h) {
    float best = -1;
    const float one = 1.0f, zero = 0.0f;
    for (int r = -1; r < REPS; r++) {
        cudaEventRecord(a, s);
        if (what == 0) {
            cudaMemcpyAsync(y, x, COPY_BYTES, cudaMemcpyDeviceToDevice, s);
        } else if (what == 2) { /* bf16 x bf16 -> fp32, fp32 sums */
            if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, x,
                             CUDA_R_16BF, GEMM_N, x, CUDA_R_16BF, GEMM_N, &zero, y, CUDA_R_32F,
                             GEMM_N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
                CUBLAS_STATUS_SUCCESS)
                return -1;
        } else if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one,
                               (const float *)x, GEMM_N, (const float *)x, GEMM_N, &zero,
                               (float *)y, GEMM_N) != CUBLAS_STATUS_SUCCESS) {
            return -1;
        }
        cudaEventRecord(b, s);
        if (cudaEventSynchronize(b) != cudaSuccess) return -1;
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 0 && ms > 0 && (best < 0 || ms < best)) best = ms;
    }
    return best;
}

int prof_gpu_ceilings(prof_ceilings *c) {
    memset(c, 0, sizeof *c);
    void *x = NULL, *y = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t a = NULL, b = NULL;
    cublasHandle_t h = NULL;
    int rc = -1;
    /* the GEMM's operands (8192^2 floats = 256 MiB) fit in the copy buffers */
    if (cudaMalloc(&x, COPY_BYTES) != cudaSuccess || cudaMalloc(&y, COPY_BYTES) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess ||
        cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)
        goto done;
    cudaMemsetAsync(x, 0, COPY_BYTES, s); /* zeros: finite operands for the GEMM */
    double copy_ms = best_ms(s, a, b, 0, x, y, h);
    double gemm_ms = best_ms(s, a, b, 1, x, y, h);
    if (copy_ms <= 0 || gemm_ms <= 0) goto done;
    {
        const double half_ms = best_ms(s, a, b, 2, x, y, h);
        if (half_ms > 0) c->gemm_half_flops = 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / (half_ms * 1e-3);
    }
    /* the same GEMM on TF32 tensor cores: the ceiling of --precision tf32 */
    if (cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS) {
        double tf32_ms = best_ms(s, a, b, 1, x, y, h);
        if (tf32_ms > 0) c->gemm_tf32_flops = 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / (tf32_ms * 1e-3);
    }
    c->copy_bytes = 2.0 * (double)COPY_BYTES / (copy_ms * 1e-3);
    c->gemm_flops = 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / (gemm_ms * 1e-3);
    snprintf(c->gemm_what, sizeof c->gemm_what, "cublasSgemm fp32 %dx%dx%d, best of %d", GEMM_N,
             GEMM_N, GEMM_N, REPS);
    snprintf(c->copy_what, sizeof c->copy_what,
             "device-to-device copy of %zu MiB (read + write), best of %d", COPY_BYTES >> 20, REPS);
    rc = 0;
done:
    if (h) cublasDestroy(h);
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (s) cudaStreamDestroy(s);
    cudaFree(x);
    cudaFree(y);
    cudaGetLastError(); /* a failure here must not poison the run's first check */
    return rc;
}
