/* Checkpoints: two safetensors files.
 *
 * NAME (the model file) holds the parameters and nothing else, under their
 * PyTorch state_dict names (F32, shapes of tf_param_table), so PyTorch's
 * load_state_dict(strict=True) takes it as it is, and in "__metadata__":
 * "format": "tinyfold-checkpoint", "version": "2", "tinyfold_version",
 * "tinyfold_config" (JSON of the config), "global_step" (optimizer steps
 * taken, warm-up included).
 *
 * The optimizer file beside it (tf_checkpoint_optim_path: NAME with a
 * ".safetensors" ending replaced by, or else followed by,
 * ".optim.safetensors") holds the AdamW moments as
 * "optimizer.exp_avg.<name>" / "optimizer.exp_avg_sq.<name>" (every tensor,
 * pair_norm_outer included) and in its metadata "format":
 * "tinyfold-optimizer", "version": "1", "global_step", "adam_step" (the AdamW
 * step count), fp16's loss scaler ("loss_scale", "loss_scale_clean_steps",
 * "loss_scale_skipped"; 1, 0, 0 for other precisions) and "model_checksum"
 * (FNV-1a 64 of the model file's parameters): a resume checks the two are a
 * pair. The optimizer file is written first, so a failed save leaves the
 * previous model file whole; a save that fails between the two is refused
 * by the next resume (not a pair), and the model file still loads.
 *
 * A version 1 file (model and optimizer in one file) still loads and
 * resumes. A PyTorch state_dict saved with safetensors.torch.save_file
 * (parameters only, no tinyfold metadata) loads with with_optimizer = 0; its
 * config is inferred from the tensor shapes (n_heads_pair cannot be
 * inferred: metadata "n_heads_pair", else the default). Its names may carry
 * nn.DataParallel's "module." or torch.compile's "_orig_mod." prefix, and the
 * upstream TinyOpenFold v2 script's fused projections (qkv_proj,
 * left_right_proj, left_right_gate) are split into ours; any other tensor is
 * refused by name. F64 tensors are converted to F32 on load; other dtypes are
 * refused. */
#ifndef TF_IO_CHECKPOINT_H
#define TF_IO_CHECKPOINT_H

#include <stddef.h>

#include "io/holder.h"
#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest step counter a checkpoint holds (global_step, adam_step): 2^53,
 * exact in a double. A run that would pass it is refused before it starts,
 * so every checkpoint saved can be read back. */
#define TF_CKPT_STEP_MAX 9007199254740992LL

/* Host memory tf_checkpoint_write / tf_checkpoint_read allocate for c's model
 * while they run (the parameter copies they stage, and for a load the file's
 * image, read into memory: a tinyfold checkpoint's parameters and moments),
 * for memory planning. */
size_t tf_checkpoint_save_bytes(const tf_config *c);
size_t tf_checkpoint_load_bytes(const tf_config *c, int with_optimizer);

/* Atomic: temp file, fsync, rename (the previous file survives any failure). */
tf_status tf_checkpoint_write(const tf_io_holder *h, const char *path, long global_step,
                              char *err, size_t errlen);
/* Checks the whole file against the holder's config (model shape fields,
 * every expected tensor's presence, dtype, shape and finiteness, unexpected
 * tensors under the model's prefixes) before setting anything. With
 * with_optimizer the moments and step count are restored too. *global_step
 * (may be NULL) gets the stored step, 0 for a file without one. */
tf_status tf_checkpoint_read(const tf_io_holder *h, const char *path, int with_optimizer,
                             long *global_step, char *err, size_t errlen);
/* The optimizer file's name for model file model_path; -1 when it does not
 * fit in n bytes. */
int tf_checkpoint_optim_path(const char *model_path, char *out, size_t n);
/* TF_OK when path can be resumed: a tinyfold checkpoint with its optimizer
 * state (in the file, version 1, or the optimizer file beside it, of the same
 * global step); else one line saying why and what to do instead. */
tf_status tf_checkpoint_check_resumable(const char *path, char *err, size_t errlen);
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
