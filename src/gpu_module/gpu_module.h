/* The GPU backend as a module the executable loads at run time.
 *
 * A GPU build puts everything that links a GPU library (the CUDA backend,
 * CUPTI's side of the profiler, the NCCL reduction; HIP: the HIP backend)
 * into one shared object next to the executable, libtinyfold_cuda.so
 * (libtinyfold_hip.so), and the executable loads it only when a GPU is asked
 * for (--backend cuda, hip, `validate`) or found (--backend auto): a CPU run
 * of a GPU build maps none of the GPU libraries.
 *
 * The boundary is two tables. The module exports one function,
 * tf_gpu_module_open (tf_gpu_module.c): it takes the
 * executable's functions that the GPU code calls back (tf_gpu_host) and
 * returns its entry points (tf_gpu_api). The executable's functions of the
 * same names (backend.h, prof_internal.h, dist.h; gpu_calls.c) forward to
 * those. This folder stands above the backend, the profiler and dist, whose
 * GPU parts it joins into the module: none of them includes it. The module is linked with --no-undefined and its own
 * symbols hidden, so it needs nothing of the executable but tf_gpu_host. */
#ifndef TF_GPU_MODULE_GPU_MODULE_H
#define TF_GPU_MODULE_GPU_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "dist/dist.h"
#include "prof/prof_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever either table changes: a module of another build is refused. */
#define TF_GPU_MODULE_ABI 4
#define TF_GPU_MODULE_ENTRY "tf_gpu_module_open"

/* What the GPU code calls in the executable. */
typedef struct {
    int64_t (*prof_now_ns)(void);
    int (*prof_reserve)(void **arr, size_t *cap, size_t need, size_t elem);
    int (*prof_intern_init)(prof_intern *t);
    void (*prof_intern_free)(prof_intern *t);
    uint32_t (*prof_intern_id)(prof_intern *t, const char *s);
    void (*prof_record_launch)(tf_prof *p, const prof_launch *l);
    void (*dist_abort)(tf_dist *d, int code);
    int (*dist_bcast)(tf_dist *d, void *buf, size_t n);
} tf_gpu_host;

/* The module's entry points, each the function of backend.h,
 * prof_internal.h or dist.h it is named after. */
typedef struct {
    int abi;     /* TF_GPU_MODULE_ABI */
    size_t size; /* sizeof(tf_gpu_api) */
    /* backend.h */
    int (*available)(char *why, size_t n);
    void (*unavailable_brief)(char *out, size_t n);
    int (*create)(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o, char *err,
                  size_t errlen);
    void (*destroy)(tf_backend *be);
    size_t (*peak_bytes)(const tf_backend *be);
    void (*describe)(const tf_backend *be, char *out, size_t n);
    int (*graph_capture)(tf_backend *be, void (*fn)(void *), void *arg, void **graph_exec);
    int (*graph_launch)(tf_backend *be, void *graph_exec);
    size_t (*graph_captured_kernels)(const tf_backend *be);
    void (*graph_destroy)(void *graph_exec);
    /* the profiler's event clock (gpu_timer.h) */
    int (*events_open)(prof_gpu_clock *clk, const tf_ops *ops, tf_backend *be, char *err,
                       size_t errlen);
    /* an external profiler's collection on (1) or off (0) (markers.h; NULL: HIP) */
    void (*profiler_collect)(int on);
    /* CUPTI (prof_internal.h's prof_gpu_*; NULL: HIP) */
    int (*prof_start)(tf_prof *p, char *err, size_t errlen);
    void (*prof_drain)(tf_prof *p, int force);
    void (*prof_stop)(tf_prof *p);
    void (*prof_free)(tf_prof *p);
    void (*counters_free)(tf_prof *p);
    int (*counters_pending)(const tf_prof *p);
    void (*counters_learn)(tf_prof *p, const char *symbol);
    int (*counters_ready)(const tf_prof *p);
    void (*counters_learning_done)(tf_prof *p);
    void (*counters_step_begin)(tf_prof *p);
    void (*counters_step_end)(tf_prof *p);
    int (*counters_op_begin)(tf_prof *p);
    void (*counters_op_end)(tf_prof *p);
    struct cJSON *(*counters_json)(const tf_prof *p);
    void (*counters_print)(const tf_prof *p, FILE *out);
    const char *(*prof_warning)(const tf_prof *p);
    int (*ceilings)(prof_ceilings *c);
    /* NCCL (dist.h's tf_dist_nccl_*; NULL in a build without NCCL) */
    int (*nccl_init)(tf_dist *d, int device, char *err, size_t n);
    void (*nccl_destroy)(tf_dist *d);
    void (*nccl_issue)(tf_dist *d, float *g, void *queue);
    void (*nccl_finish)(tf_dist *d, void *queue);
    void *(*nccl_queue)(tf_dist *d);
    void (*nccl_replayed)(tf_dist *d);
    void (*nccl_wait)(tf_dist *d);
    double (*nccl_take_ms)(tf_dist *d, double *bytes, double *exposed);
} tf_gpu_api;

typedef const tf_gpu_api *(*tf_gpu_module_open_fn)(const tf_gpu_host *host);

/* ---- the executable's side (gpu_load.c) ---- */
/* The module, loaded on the first call (from the executable's directory):
 * its entry points, or NULL with one line in err naming what is missing. */
const tf_gpu_api *tf_gpu_load(char *err, size_t n);
/* The entry points if the module is loaded, else NULL (nothing is loaded). */
const tf_gpu_api *tf_gpu_loaded(void);
/* Is there a device, asked of the GPU driver alone (CUDA: libcuda.so.1;
 * HIP: the ROCm driver's /dev/kfd), no GPU library loaded? 1, or 0 with why
 * (the driver's words) and brief (a few words for a header line). */
int tf_gpu_probe(char *why, size_t n, char *brief, size_t bn);

#ifdef __cplusplus
}
#endif
#endif
