/* The CUDA backend's capabilities and the op-table entries that adapt its
 * named entry points (backend.h) to the op table's signatures. */
#ifndef TF_CUDA_CAPS_H
#define TF_CUDA_CAPS_H

#include "backend/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

void tf_cu_caps(const tf_backend *be, tf_backend_caps *out);
void tf_cu_graph_destroy(tf_backend *be, void *graph);
/* the device memory wgrad_enable allocates: a second set of the per-queue
 * workspaces (tf_cu_queue_alloc) */
size_t tf_cu_wgrad_lane_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
