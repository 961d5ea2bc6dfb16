/* Checkpoints: safetensors files holding the parameters under their PyTorch
 * state_dict names (F32, shapes of tf_param_table), the AdamW moments as
 * "optimizer.exp_avg.<name>" / "optimizer.exp_avg_sq.<name>" (every tensor,
 * pair_norm_outer included, so the layout is uniform), and in "__metadata__":
 * "format": "tinyfold-checkpoint", "version": "1", "tinyfold_version",
 * "tinyfold_config" (JSON of the config), "global_step" (optimizer steps taken,
 * warm-up included), "adam_step" (the AdamW step count) and the loss
 * scaler's state: "loss_scale", "loss_scale_clean_steps", "loss_scale_skipped"
 * (fp16's dynamic loss scale; 1, 0, 0 for other precisions). The precision is
 * tinyfold_config's "precision". Loading with the optimizer restores the
 * scaler when both the file and the trainer are fp16.
 *
 * A PyTorch state_dict saved with safetensors.torch.save_file (parameters
 * only, no tinyfold metadata) loads with with_optimizer = 0; its config is
 * inferred from the tensor shapes (n_heads_pair cannot be inferred: default).
 * F64 tensors are converted to F32 on load; other dtypes are refused. */
#ifndef TF_IO_CHECKPOINT_H
#define TF_IO_CHECKPOINT_H

#include <stddef.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest step counter a checkpoint holds (global_step, adam_step): 2^53,
 * exact in a double. A run that would pass it is refused before it starts,
 * so every checkpoint saved can be read back. */
#define TF_CKPT_STEP_MAX 9007199254740992LL

/* Host memory tf_checkpoint_save / tf_checkpoint_load allocate for c's model
 * while they run (the parameter copies they stage, and for a load the file's
 * image, read into memory: a tinyfold checkpoint's parameters and moments),
 * for memory planning. */
size_t tf_checkpoint_save_bytes(const tf_config *c);
size_t tf_checkpoint_load_bytes(const tf_config *c, int with_optimizer);

/* Atomic: temp file, fsync, rename (the previous file survives any failure). */
tf_status tf_checkpoint_save(tf_trainer *t, const char *path, long global_step, char *err,
                             size_t errlen);
/* Checks the whole file against the trainer's config (model shape fields,
 * every expected tensor's presence, dtype, shape and finiteness, unexpected
 * tensors under the model's prefixes) before touching the trainer. With
 * with_optimizer the moments and step count are restored too. *global_step
 * (may be NULL) gets the stored step, 0 for a file without one. */
tf_status tf_checkpoint_load(tf_trainer *t, const char *path, int with_optimizer, long *global_step,
                             char *err, size_t errlen);
/* The config stored in the file (tf_config_default + the stored values, or
 * the shape-inferred model for a foreign file), for --resume. */
tf_status tf_checkpoint_peek_config(const char *path, tf_config *c, long *global_step, char *err,
                                    size_t errlen);
/* The same over a file image in memory (label names it in messages). */
tf_status tf_checkpoint_peek_config_buffer(const void *buf, size_t len, const char *label,
                                           tf_config *c, long *global_step, char *err,
                                           size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
