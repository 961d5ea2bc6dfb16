/* Creating and destroying backends. Each backend fills a tf_ops table
 * (ops.h) and owns an opaque context; registry.h lists them. */
#ifndef TF_BACKEND_H
#define TF_BACKEND_H

#include "gpu_plan.h"
#include "ops.h"
#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int threads;       /* CPU: OpenMP threads (0 = all cores) */
    int device;        /* CUDA: device ordinal */
    int kernel_level;  /* 1..3: which kernel versions to use (v1 plain .. v3 custom) */
    int tf32;          /* CUDA: allow TF32 tensor cores in GEMMs */
    /* GPU: --gpu-plan's fields over the device's default plan; AUTO (zero)
     * keeps the default's */
    tf_gpu_plan gpu_plan;
} tf_backend_opts;

/* The options for a config's backend, --gpu-plan parsed into its plan: the
 * one place the spec is read. 0, else 1 with one line in err. */
int tf_backend_opts_from_config(tf_backend_opts *o, const tf_config *c, char *err, size_t errlen);

/* The one way to create a backend: a kind of the registry (registry.h), or
 * TF_BACKEND_AUTO (the build's GPU backend where a device is usable, else
 * the CPU). On success
 * (0) *kind is the kind created and be, ops and caps are filled; destroy it
 * with ops->destroy. Else non-zero with one line in err. */
int tf_backend_create(tf_backend_kind *kind, const tf_backend_opts *o, tf_backend **be,
                      const tf_ops **ops, tf_backend_caps *caps, char *err, size_t errlen);

/* Each backend's entry points, which its registry row holds (tests call
 * them by name; the trainer uses tf_backend_create). Each create returns 0
 * on success, else non-zero with one line in err. */
int tf_cpu_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o,
                          char *err, size_t errlen);
void tf_cpu_backend_destroy(tf_backend *be);
/* Bytes currently/peak allocated through ops->alloc. */
size_t tf_cpu_backend_peak_bytes(const tf_backend *be);
/* Human-readable BLAS and thread info for `validate`. */
void tf_cpu_backend_describe(const tf_backend *be, char *out, size_t n);
/* Why OpenBLAS runs the kernels it names (openblas_get_corename), when that is
 * not simply this CPU: "" or e.g. " set by OPENBLAS_CORETYPE=Haswell". */
const char *tf_cpu_blas_kernels_note(void);

/* The GPU backend (CUDA or HIP), defined by src/gpu_module/gpu_calls.c in GPU
 * builds (it forwards to the GPU module, gpu_module/gpu_module.h), else by a stub that
 * always reports "not built with CUDA". */
/* 1 if a usable device exists; loads the GPU module (its libraries) first */
int tf_cuda_backend_available(char *why, size_t n);
/* --backend auto: asks the GPU driver first and loads the GPU module only
 * where it finds a device, then as tf_cuda_backend_available */
int tf_gpu_auto_available(char *why, size_t n);
/* Why no device is usable, in a few words for a header line ("no usable GPU
 * (driver too old for CUDA 13)"); tf_cuda_backend_available's `why` has the
 * runtime's own words, for `tinyfold validate`. */
void tf_cuda_unavailable_brief(char *out, size_t n);
int tf_cuda_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o,
                           char *err, size_t errlen);
void tf_cuda_backend_destroy(tf_backend *be);
size_t tf_cuda_backend_peak_bytes(const tf_backend *be); /* cudaMalloc'd + library workspaces */
void tf_cuda_backend_describe(const tf_backend *be, char *out, size_t n);
/* Graph capture of a callback on the backend's stream (whole-step capture). */
int tf_cuda_graph_capture(tf_backend *be, void (*fn)(void *), void *arg, void **graph_exec);
int tf_cuda_graph_launch(tf_backend *be, void *graph_exec);
/* Kernel nodes in the graph the last tf_cuda_graph_capture built. */
size_t tf_cuda_graph_captured_kernels(const tf_backend *be);
void tf_cuda_graph_destroy(void *graph_exec);
/* Is this build's GPU backend compiled with CUDA (nvcc), or with HIP (hipcc,
 * AMD GPUs: the same entry points above, tf_cuda_*, serve it)? */
int tf_built_with_cuda(void);
int tf_built_with_hip(void);

#ifdef __cplusplus
}
#endif
#endif
