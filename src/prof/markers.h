/* Portability shim for external-tool range markers.
 *
 * CUDA builds (TF_HAVE_CUDA): NVTX3 ranges in a "tinyfold" domain, so Nsight
 * Systems shows the region names. HIP builds (TF_HAVE_HIP): ROCTx ranges
 * (roctxRangePushA/Pop), which rocprof-sys --selected-regions keys on.
 * Otherwise the markers compile to nothing. */
#ifndef TF_PROF_MARKERS_H
#define TF_PROF_MARKERS_H

#if defined(TF_HAVE_CUDA) || defined(TF_HAVE_HIP)
void tf_marker_push(const char *name);
void tf_marker_pop(void);
#else
static inline void tf_marker_push(const char *name) { (void)name; }
static inline void tf_marker_pop(void) {}
#endif

#endif
