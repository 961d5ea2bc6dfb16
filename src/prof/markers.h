/* Portability shim for external-tool range markers.
 *
 * CUDA builds (TF_HAVE_CUDA): NVTX3 ranges in a "tinyfold" domain, so Nsight
 * Systems shows the region names. HIP builds (TF_HAVE_HIP): ROCTx ranges
 * (roctxRangePushA/Pop, the library loaded at run time when present), which
 * rocprof-sys --selected-regions and rocprofv3's marker trace key on.
 * Otherwise the markers compile to nothing.
 *
 * Selected regions (--profile-regions a,b): an external profiler collects
 * only inside the named regions. Outside them collection is paused: on AMD
 * roctxProfilerPause/Resume (rocprofv3 --selected-regions), on NVIDIA
 * cudaProfilerStop/Start (ncu --profile-from-start off, nsys
 * --capture-range=cudaProfilerApi). Nested selected regions resume once. */
#ifndef TF_PROF_MARKERS_H
#define TF_PROF_MARKERS_H

#include <stddef.h>

/* Names (comma-separated, each a region name) whose ranges an external
 * profiler collects; NULL or "" clears it. 0 ok, else one line in err naming
 * what is wrong (an empty name, too many names, or a build without a GPU
 * profiler API). Collection is resumed when a selected region starts and
 * paused when it ends. */
int tf_marker_select(const char *csv, char *err, size_t errlen);

#if defined(TF_HAVE_CUDA) || defined(TF_HAVE_HIP)
void tf_marker_push(const char *name);
void tf_marker_pop(void);
#else
static inline void tf_marker_push(const char *name) { (void)name; }
static inline void tf_marker_pop(void) {}
#endif

#endif
