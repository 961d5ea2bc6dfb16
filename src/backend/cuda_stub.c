/* The CUDA entry points of backend.h for builds without a CUDA compiler
 * (CMake drops this file when it finds one). Every call says, harmlessly,
 * that this build has no CUDA backend. */
#include <stdio.h>

#include "backend/backend.h"

#define TF_NO_CUDA "this build has no CUDA backend (no CUDA compiler found at build time)"

int tf_cuda_backend_available(char *why, size_t n)
{
    if (why && n) snprintf(why, n, "%s", TF_NO_CUDA);
    return 0;
}

int tf_gpu_auto_available(char *why, size_t n) { return tf_cuda_backend_available(why, n); }

void tf_cuda_unavailable_brief(char *out, size_t n)
{
    if (out && n) snprintf(out, n, "this build has no CUDA backend");
}

int tf_cuda_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o,
                           char *err, size_t errlen)
{
    (void)o;
    if (be) *be = NULL;
    if (ops) *ops = NULL;
    if (err && errlen) snprintf(err, errlen, "%s", TF_NO_CUDA);
    return 1;
}

void tf_cuda_backend_destroy(tf_backend *be) { (void)be; }

size_t tf_cuda_backend_peak_bytes(const tf_backend *be)
{
    (void)be;
    return 0;
}

void tf_cuda_backend_describe(const tf_backend *be, char *out, size_t n)
{
    (void)be;
    if (out && n) snprintf(out, n, "%s", TF_NO_CUDA);
}

int tf_cuda_graph_capture(tf_backend *be, void (*fn)(void *), void *arg, void **graph_exec)
{
    (void)be;
    (void)fn;
    (void)arg;
    if (graph_exec) *graph_exec = NULL;
    return 1;
}

size_t tf_cuda_graph_captured_kernels(const tf_backend *be)
{
    (void)be;
    return 0;
}

int tf_cuda_graph_launch(tf_backend *be, void *graph_exec)
{
    (void)be;
    (void)graph_exec;
    return 1;
}

void tf_cuda_graph_destroy(void *graph_exec) { (void)graph_exec; }

int tf_built_with_cuda(void) { return 0; }
int tf_built_with_hip(void) { return 0; }
