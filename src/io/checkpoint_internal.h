/* Shared by checkpoint.c (save, load) and checkpoint_meta.c (what a file's
 * metadata says: format, config, step counters). */
#ifndef TF_IO_CHECKPOINT_INTERNAL_H
#define TF_IO_CHECKPOINT_INTERNAL_H

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tinyfold.h"

#define CKPT_FORMAT "tinyfold-checkpoint"
#define CKPT_VERSION "1"
#define OPT_M "optimizer.exp_avg."
#define OPT_V "optimizer.exp_avg_sq."
/* fp16's loss scaler (tf_trainer_get_loss_scale): the scale, the clean steps
 * since it last changed, the steps skipped so far */
#define META_LOSS_SCALE "loss_scale"
#define META_LOSS_CLEAN "loss_scale_clean_steps"
#define META_LOSS_SKIPPED "loss_scale_skipped"
#define NAME_MAX_LEN (sizeof(((tf_param_info *)0)->name) + 32)

/* Step counters stored in a file are at most 2^53: exact in a double (the run
 * JSON), and far from overflowing a long while a run adds its steps. */
#define STEP_MAX TF_CKPT_STEP_MAX
#define STEP_EXPECTED "a non-negative integer up to 9007199254740992"

/* "<path>: <fmt with a, b made printable>" into err; returns st. */
tf_status tf_ckpt_failf(char *err, size_t errlen, tf_status st, const char *path, const char *fmt,
                        const char *a, const char *b);
/* A strict non-negative decimal (no sign, no spaces) up to STEP_MAX. */
int tf_ckpt_parse_step(const char *s, long *v);
/* The stored (or shape-inferred) config and global step; *ours = a tinyfold
 * checkpoint (not a foreign state_dict). */
tf_status tf_ckpt_file_config(const tf_st_file *f, tf_config *c, long *gs, int *ours, char *err,
                              size_t errlen);

/* The loss scaler's state in f's metadata, range-checked: *present = 0 (and
 * nothing else set) for a file without it (all three keys or none). */
tf_status tf_ckpt_loss_scale(const tf_st_file *f, float *scale, long *clean_steps, long *skipped,
                             int *present, char *err, size_t errlen);

#endif
