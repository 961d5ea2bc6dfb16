/* A trainer's files (trainer_io.c): its checkpoints (io/checkpoint.h) and
 * its gradient file (io/gradfile.h), the trainer as the holder of what they
 * write and read. */
#ifndef TF_TRAIN_TRAINER_IO_H
#define TF_TRAIN_TRAINER_IO_H

#include <stddef.h>

#include "tinyfold.h"

/* tf_checkpoint_write of t's state. */
tf_status tf_checkpoint_save(tf_trainer *t, const char *path, long global_step, char *err,
                             size_t errlen);
/* tf_checkpoint_read into t: nothing of t changes unless the whole file
 * checks out against t's config. */
tf_status tf_checkpoint_load(tf_trainer *t, const char *path, int with_optimizer, long *global_step,
                             char *err, size_t errlen);
/* tf_gradfile_write of t's gradients (as left by tf_trainer_grad). */
tf_status tf_gradfile_save(const char *path, tf_trainer *t, float loss, const float *pred,
                           long npred, char *err, size_t errlen);

#endif
