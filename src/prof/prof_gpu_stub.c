/* Builds without CUDA (CPU-only, HIP): CUPTI's side of the profiler (src/prof/cuda/) is not
 * compiled, and asking for it is a usage error. */
#ifndef TF_HAVE_CUDA
#include <stdio.h>

#include "prof/prof_internal.h"

int prof_gpu_start(tf_prof *p, char *err, size_t errlen) {
    (void)p;
    if (err && errlen) snprintf(err, errlen, "CUDA profiling: this build has no CUDA support");
    return -1;
}
void prof_gpu_drain(tf_prof *p, int force) { (void)p, (void)force; }
void prof_gpu_stop(tf_prof *p) { (void)p; }
void prof_gpu_free(tf_prof *p) { (void)p; }
void prof_gpu_counters_free(tf_prof *p) { (void)p; }
int prof_gpu_counters_pending(const tf_prof *p) {
    (void)p;
    return 0;
}
void prof_gpu_counters_learn(tf_prof *p, const char *symbol) { (void)p, (void)symbol; }
int prof_gpu_counters_ready(const tf_prof *p) {
    (void)p;
    return 0;
}
void prof_gpu_counters_learning_done(tf_prof *p) { (void)p; }
void prof_gpu_counters_step_begin(tf_prof *p) { (void)p; }
void prof_gpu_counters_step_end(tf_prof *p) { (void)p; }
int prof_gpu_counters_op_begin(tf_prof *p) {
    (void)p;
    return 0;
}
void prof_gpu_counters_op_end(tf_prof *p) { (void)p; }
struct cJSON *prof_gpu_counters_json(const tf_prof *p) {
    (void)p;
    return NULL;
}
void prof_gpu_counters_print(const tf_prof *p, FILE *out) { (void)p, (void)out; }
const char *prof_gpu_warning(const tf_prof *p) {
    (void)p;
    return NULL;
}
#else
typedef int tf_prof_gpu_stub_unused; /* CUDA build: src/prof/cuda/ provides these */
#endif

#ifndef TF_HAVE_CUDA
int prof_gpu_ceilings(prof_ceilings *c) {
    (void)c;
    return -1;
}
#endif

/* CPU-only builds: no GPU queues to record events on (gpu/gpu_events.cu is
 * the CUDA and HIP builds', and hostemu's: TF_HAVE_GPU_EVENTS). */
#ifndef TF_HAVE_GPU_EVENTS
int prof_gpu_events_built(void) { return 0; }
int prof_gpu_events_open(prof_gpu_clock *clk, const struct tf_ops *ops, struct tf_backend *be,
                         char *err, size_t errlen) {
    (void)clk, (void)ops, (void)be;
    if (err && errlen) snprintf(err, errlen, "GPU event timing: this build has no GPU backend");
    return -1;
}
#endif
