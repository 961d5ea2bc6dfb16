/* The GPU module's side of its boundary (gpu_module.h): the one
 * exported function, the entry points it returns, and the executable's
 * functions the GPU code calls, each forwarded to the executable's through
 * the table it passed in. Everything else of the module is hidden. */
#include "gpu_module/gpu_module.h"

static const tf_gpu_host *host;

int64_t prof_now_ns(void) { return host->prof_now_ns(); }
int prof_reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
    return host->prof_reserve(arr, cap, need, elem);
}
int prof_intern_init(prof_intern *t) { return host->prof_intern_init(t); }
void prof_intern_free(prof_intern *t) { host->prof_intern_free(t); }
uint32_t prof_intern_id(prof_intern *t, const char *s) { return host->prof_intern_id(t, s); }
void prof_record_launch(tf_prof *p, const prof_launch *l) { host->prof_record_launch(p, l); }
void tf_dist_abort(tf_dist *d, int code) { host->dist_abort(d, code); }
int tf_dist_bcast(tf_dist *d, void *buf, size_t n) { return host->dist_bcast(d, buf, n); }

static const tf_gpu_api api = {
    .abi = TF_GPU_MODULE_ABI,
    .size = sizeof(tf_gpu_api),
    .available = tf_cuda_backend_available,
    .unavailable_brief = tf_cuda_unavailable_brief,
    .create = tf_cuda_backend_create,
    .destroy = tf_cuda_backend_destroy,
    .peak_bytes = tf_cuda_backend_peak_bytes,
    .describe = tf_cuda_backend_describe,
    .graph_capture = tf_cuda_graph_capture,
    .graph_launch = tf_cuda_graph_launch,
    .graph_captured_kernels = tf_cuda_graph_captured_kernels,
    .graph_destroy = tf_cuda_graph_destroy,
    .events_open = prof_gpu_events_open,
#ifndef TF_HAVE_HIP
    .profiler_collect = prof_gpu_profiler_collect,
    .prof_start = prof_gpu_start,
    .prof_drain = prof_gpu_drain,
    .prof_stop = prof_gpu_stop,
    .prof_free = prof_gpu_free,
    .counters_free = prof_gpu_counters_free,
    .counters_pending = prof_gpu_counters_pending,
    .counters_learn = prof_gpu_counters_learn,
    .counters_ready = prof_gpu_counters_ready,
    .counters_learning_done = prof_gpu_counters_learning_done,
    .counters_step_begin = prof_gpu_counters_step_begin,
    .counters_step_end = prof_gpu_counters_step_end,
    .counters_op_begin = prof_gpu_counters_op_begin,
    .counters_op_end = prof_gpu_counters_op_end,
    .counters_json = prof_gpu_counters_json,
    .counters_print = prof_gpu_counters_print,
    .prof_warning = prof_gpu_warning,
    .ceilings = prof_gpu_ceilings,
#endif
#ifdef TF_HAVE_NCCL
    .nccl_init = tf_dist_nccl_init,
    .nccl_destroy = tf_dist_nccl_destroy,
    .nccl_issue = tf_dist_nccl_issue,
    .nccl_finish = tf_dist_nccl_finish,
    .nccl_queue = tf_dist_nccl_queue,
    .nccl_replayed = tf_dist_nccl_replayed,
    .nccl_wait = tf_dist_nccl_wait,
    .nccl_take_ms = tf_dist_nccl_take_ms,
#endif
};

__attribute__((visibility("default"))) const tf_gpu_api *tf_gpu_module_open(const tf_gpu_host *h)
{
    host = h;
    return &api;
}
