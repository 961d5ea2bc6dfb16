/* The trainer beyond tinyfold.h: on a backend created by the caller (for
 * tests that wrap a backend's op table), on the ranks of a data parallel
 * run, and what it keeps for explaining a non-finite loss. */
#ifndef TF_TRAIN_TRAINER_H
#define TF_TRAIN_TRAINER_H

#include "backend/backend.h"
#include "dist/dist.h"
#include "tinyfold.h"

/* Like tf_trainer_create, on be (c->backend names its kind): the trainer
 * owns the backend from here on, also on failure (ops->destroy). c is not
 * validated again. */
tf_status tf_trainer_create_on(tf_trainer **out, const tf_config *c, tf_backend *be,
                               const tf_ops *ops, const tf_backend_caps *caps, char *err,
                               size_t errlen);

/* Data parallel: a trainer created with this rank's share of the batch
 * (global / size) draws its slice of each step's global batch, reduces its
 * gradients every step in the buckets of d->bucket_bytes (issued from inside
 * the backward; with --graph and NCCL, captured into the backward's graph,
 * which replays them as the eager backward issues them) and reports the
 * global batch in tf_trainer_config (so checkpoints and the JSON hold the
 * global batch). 0, or 1 when the buckets' host memory is missing. */
int tf_trainer_set_dist(tf_trainer *t, tf_dist *d);

/* After a step returned TF_ERR_NONFINITE: 1 if it stopped after its
 * forward, so that the trainer's weights and batch are those the forward
 * read (not under data parallelism, nor when the phases were issued back to
 * back: then the step ran to its end). */
int tf_trainer_nonfinite_held(const tf_trainer *t);
/* The batch on the device (this rank's, of the last step) into host (its
 * buffers sized for the trainer's batch). */
void tf_trainer_get_batch(tf_trainer *t, tf_batch *host);

#endif
