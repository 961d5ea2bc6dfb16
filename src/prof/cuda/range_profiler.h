/* CUPTI range profiler (auto range, kernel replay) behind a C interface.
 * Compiled as C++ only because CUDA 13's cupti_profiler_host.h includes
 * <string>. Create once, then any number of windows: start, run the work,
 * stop (which decodes and hands over that window's ranges). */
#ifndef TF_PROF_CUDA_RANGE_PROFILER_H
#define TF_PROF_CUDA_RANGE_PROFILER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_rp tf_rp;

/* Sets the range profiler up on cu_ctx (a CUcontext) for the metrics; a
 * metric the chip does not know is skipped (tf_rp_metric_ok says which).
 * 0 ok, else one line in err. */
int tf_rp_create(tf_rp **out, void *cu_ctx, const char *const *metrics, int nmetrics,
                 size_t max_ranges, char *err, size_t errlen);
int tf_rp_metric_ok(const tf_rp *r, int m);
/* Why metric m is skipped (or NULL). */
const char *tf_rp_metric_why(const tf_rp *r, int m);
int tf_rp_start(tf_rp *r, char *err, size_t errlen);
/* Stops, decodes and evaluates: fn(arg, range name, values[nmetrics]) per
 * range of this window (NaN for skipped metrics). *dropped = ranges of this
 * window that did not fit the counter data image (max_ranges in all). */
int tf_rp_stop(tf_rp *r, void (*fn)(void *arg, const char *range, const double *values),
               void *arg, size_t *dropped, char *err, size_t errlen);
void tf_rp_destroy(tf_rp *r);

#ifdef __cplusplus
}
#endif
#endif
