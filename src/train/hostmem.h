/* The host's memory (hostmem.c): how much is available, and a batch's
 * buffers in it. */
#ifndef TF_TRAIN_HOSTMEM_H
#define TF_TRAIN_HOSTMEM_H

#include <stddef.h>

#include "tinyfold.h"

/* MemAvailable of /proc/meminfo in bytes, 0 when unknown. */
size_t tf_hostmem_available(void);
/* What tf_hostmem_batch_alloc allocates for c. */
size_t tf_hostmem_batch_bytes(const tf_config *c);
/* A host batch for c's problem (1 ok, 0 out of memory; free either way). */
int tf_hostmem_batch_alloc(tf_batch *b, const tf_config *c);
void tf_hostmem_batch_free(tf_batch *b);

#endif
