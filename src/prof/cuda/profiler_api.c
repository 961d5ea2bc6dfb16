/* An external profiler's collection switch (prof_internal.h,
 * prof_gpu_profiler_collect): ncu --profile-from-start off, nsys
 * --capture-range=cudaProfilerApi. */
#include <cuda_profiler_api.h>

#include "prof/prof_internal.h"

void prof_gpu_profiler_collect(int on) {
    if (on)
        (void)cudaProfilerStart();
    else
        (void)cudaProfilerStop();
}
