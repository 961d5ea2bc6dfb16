/* The GPU entry points of a GPU build's executable (backend.h, the
 * profiler's prof_gpu_*, dist.h's tf_dist_nccl_*): each forwards to the
 * module's (gpu_module.h). Those that start something load the module; the
 * others act as a build without a GPU would while it is not loaded (nothing
 * of it can have started then). */
#include "gpu_module/gpu_module.h"

#include <stdio.h>

#ifdef TF_HAVE_CUDA
#define TF_GPU_WORD "CUDA"
#else
#define TF_GPU_WORD "HIP"
#endif

/* ---- backend.h -------------------------------------------------------------- */
int tf_built_with_cuda(void)
{
#ifdef TF_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}
int tf_built_with_hip(void) { return !tf_built_with_cuda(); }

int tf_cuda_backend_available(char *why, size_t n)
{
    const tf_gpu_api *g = tf_gpu_load(why, n);
    return g ? g->available(why, n) : 0;
}

int tf_gpu_auto_available(char *why, size_t n)
{
    return tf_gpu_probe(why, n, NULL, 0) && tf_cuda_backend_available(why, n);
}

void tf_cuda_unavailable_brief(char *out, size_t n)
{
    if (!out || !n) return;
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g)
        g->unavailable_brief(out, n);
    else if (tf_gpu_probe(NULL, 0, out, n))
        snprintf(out, n, "no usable GPU (the " TF_GPU_WORD " backend does not load)");
}

int tf_cuda_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o,
                           char *err, size_t errlen)
{
    *be = NULL;
    *ops = NULL;
    const tf_gpu_api *g = tf_gpu_load(err, errlen);
    return g ? g->create(be, ops, o, err, errlen) : 1;
}

void tf_cuda_backend_destroy(tf_backend *be)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g && be) g->destroy(be);
}

size_t tf_cuda_backend_peak_bytes(const tf_backend *be)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g && be ? g->peak_bytes(be) : 0;
}

void tf_cuda_backend_describe(const tf_backend *be, char *out, size_t n)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g && be)
        g->describe(be, out, n);
    else if (out && n)
        snprintf(out, n, "no " TF_GPU_WORD " backend");
}

int tf_cuda_graph_capture(tf_backend *be, void (*fn)(void *), void *arg, void **graph_exec)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) return g->graph_capture(be, fn, arg, graph_exec);
    if (graph_exec) *graph_exec = NULL;
    return 1;
}

int tf_cuda_graph_launch(tf_backend *be, void *graph_exec)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->graph_launch(be, graph_exec) : 1;
}

size_t tf_cuda_graph_captured_kernels(const tf_backend *be)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->graph_captured_kernels(be) : 0;
}

void tf_cuda_graph_destroy(void *graph_exec)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) g->graph_destroy(graph_exec);
}

/* ---- the profiler's event clock (gpu_timer.h) -------------------------------- */
int prof_gpu_events_built(void) { return 1; }

int prof_gpu_events_open(prof_gpu_clock *clk, const tf_ops *ops, tf_backend *be, char *err,
                         size_t errlen)
{
    const tf_gpu_api *g = tf_gpu_load(err, errlen);
    return g ? g->events_open(clk, ops, be, err, errlen) : -1;
}

/* ---- CUPTI (prof_internal.h): the CUDA module's; HIP builds have the stubs
 * of prof_gpu_stub.c ------------------------------------------------------------ */
#ifdef TF_HAVE_CUDA
int prof_gpu_start(tf_prof *p, char *err, size_t errlen)
{
    /* before the first CUDA call of the run: CUPTI sees all of them */
    const tf_gpu_api *g = tf_gpu_load(err, errlen);
    return g ? g->prof_start(p, err, errlen) : -1;
}

#define TF_FORWARD_VOID(name, field, T)                                                        \
    void name(T p)                                                                             \
    {                                                                                          \
        const tf_gpu_api *g = tf_gpu_loaded();                                                 \
        if (g) g->field(p);                                                                    \
    }
#define TF_FORWARD_INT(name, field)                                                            \
    int name(const tf_prof *p)                                                                 \
    {                                                                                          \
        const tf_gpu_api *g = tf_gpu_loaded();                                                 \
        return g ? g->field(p) : 0;                                                            \
    }
TF_FORWARD_VOID(prof_gpu_stop, prof_stop, tf_prof *)
TF_FORWARD_VOID(prof_gpu_free, prof_free, tf_prof *)
TF_FORWARD_VOID(prof_gpu_counters_free, counters_free, tf_prof *)
TF_FORWARD_VOID(prof_gpu_counters_learning_done, counters_learning_done, tf_prof *)
TF_FORWARD_VOID(prof_gpu_counters_step_begin, counters_step_begin, tf_prof *)
TF_FORWARD_VOID(prof_gpu_counters_step_end, counters_step_end, tf_prof *)
TF_FORWARD_VOID(prof_gpu_counters_op_end, counters_op_end, tf_prof *)
TF_FORWARD_INT(prof_gpu_counters_pending, counters_pending)
TF_FORWARD_INT(prof_gpu_counters_ready, counters_ready)

void prof_gpu_profiler_collect(int on)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) g->profiler_collect(on);
}

void prof_gpu_drain(tf_prof *p, int force)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) g->prof_drain(p, force);
}

void prof_gpu_counters_learn(tf_prof *p, const char *symbol)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) g->counters_learn(p, symbol);
}

int prof_gpu_counters_op_begin(tf_prof *p)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->counters_op_begin(p) : 0;
}

struct cJSON *prof_gpu_counters_json(const tf_prof *p)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->counters_json(p) : NULL;
}

void prof_gpu_counters_print(const tf_prof *p, FILE *out)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    if (g) g->counters_print(p, out);
}

const char *prof_gpu_warning(const tf_prof *p)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->prof_warning(p) : NULL;
}

int prof_gpu_ceilings(prof_ceilings *c)
{
    const tf_gpu_api *g = tf_gpu_loaded();
    return g ? g->ceilings(c) : -1;
}
#endif

/* ---- NCCL (dist.h) ------------------------------------------------------------ */
#ifdef TF_HAVE_NCCL
int tf_dist_nccl_init(tf_dist *d, int device, char *err, size_t n)
{
    const tf_gpu_api *g = tf_gpu_load(err, n);
    return g ? g->nccl_init(d, device, err, n) : 1;
}

/* the others run only once tf_dist_nccl_init has set d->nccl: the module is loaded */
void tf_dist_nccl_destroy(tf_dist *d) { tf_gpu_loaded()->nccl_destroy(d); }
void tf_dist_nccl_issue(tf_dist *d, float *g, void *queue)
{
    tf_gpu_loaded()->nccl_issue(d, g, queue);
}
void tf_dist_nccl_finish(tf_dist *d, void *queue)
{
    tf_gpu_loaded()->nccl_finish(d, queue);
}
void *tf_dist_nccl_queue(tf_dist *d) { return tf_gpu_loaded()->nccl_queue(d); }
void tf_dist_nccl_replayed(tf_dist *d) { tf_gpu_loaded()->nccl_replayed(d); }
void tf_dist_nccl_wait(tf_dist *d) { tf_gpu_loaded()->nccl_wait(d); }
double tf_dist_nccl_take_ms(tf_dist *d, double *bytes, double *exposed)
{
    return tf_gpu_loaded()->nccl_take_ms(d, bytes, exposed);
}
#endif
