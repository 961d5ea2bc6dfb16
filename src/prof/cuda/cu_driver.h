/* The one CUDA driver-API call the profiler needs (the current CUcontext for
 * CUPTI's range profiler), resolved at run time from libcuda.so.1. Linking
 * libcuda directly would make every binary of a CUDA build fail to start on a
 * machine without a driver (CI), where it must instead fall back to the CPU. */
#ifndef TF_PROF_CU_DRIVER_H
#define TF_PROF_CU_DRIVER_H

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA_SUCCESS and *ctx, or an error when the driver cannot be loaded. */
CUresult tf_cu_ctx_get_current(CUcontext *ctx);

#ifdef __cplusplus
}
#endif
#endif
