/* Memory settings from the dry-run plan (memplan.c): which --recompute and
 * --chunk-size fit. */
#ifndef TF_TRAIN_MEMPLAN_H
#define TF_TRAIN_MEMPLAN_H

#include <stddef.h>

#include "tinyfold.h"

/* The cheapest setting, in step time, whose planned bytes are at most limit:
 * none, then blocks, then modules (the same extra forward as blocks, less
 * memory, more arena traffic), then modules with --chunk-size K for the
 * powers of two K below N down to N / 64, the largest first, then blocks
 * with them (a chunk size already in c
 * stays: the three modes with it). c->recompute and c->chunk_size are set to
 * it and its bytes stored; TF_ERR_NOMEM when none fits (c then holds the
 * setting of least memory and bytes its plan). Other failures: err. */
tf_status tf_memplan_choose(tf_config *c, double limit, size_t *bytes, char *err, size_t errlen);

/* "--recompute modules --chunk-size 64" (or without the chunk when it is off) */
const char *tf_memplan_setting(char *buf, size_t n, const tf_config *c);

/* Advice for a refusal: "fits with --recompute blocks: 5.10 GB", or what the
 * least memory is and what else to reduce. limit < 0 (not known): the plan
 * of each setting that keeps less than c's. */
void tf_memplan_suggest(const tf_config *c, double limit, char *out, size_t n);

/* "5.10 GB", or "12.3 MB" below 1 GB (powers of 1000) */
const char *tf_memplan_fmt(char *buf, size_t n, double bytes);

#endif
