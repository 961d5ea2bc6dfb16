/* Shared by checkpoint.c (save, load) and checkpoint_meta.c (what a file's
 * metadata says: format, config, step counters). */
#ifndef TF_IO_CHECKPOINT_INTERNAL_H
#define TF_IO_CHECKPOINT_INTERNAL_H

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tinyfold.h"

#define CKPT_FORMAT "tinyfold-checkpoint"
/* 2: the model's tensors only, the optimizer in a file of its own
 * (OPTIM_FORMAT); 1: both in one file (still read) */
#define CKPT_VERSION "2"
#define CKPT_VERSION_COMBINED "1"
#define OPTIM_FORMAT "tinyfold-optimizer"
#define OPTIM_VERSION "1"
/* the optimizer file's FNV-1a 64 of the model file's parameters, in hex */
#define META_MODEL_CHECKSUM "model_checksum"
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

/* The wrapper prefix of a foreign state_dict's names ("", "module.",
 * "_orig_mod.", ...): the one under which "msa_embedding.weight" exists. */
const char *tf_ckpt_prefix(const tf_st_file *f);
/* The tensor holding parameter `name` (prefix + name, or the upstream v2
 * script's fused tensor holding it as rows part*R..(part+1)*R of parts*R);
 * NULL when neither exists; *parts = 0 (and the fused tensor) when both do. */
const tf_st_tensor *tf_ckpt_find_param(const tf_st_file *f, const char *prefix, const char *name,
                                       int *part, int *parts);
/* The first tensor (in name order) that is not prefix + a TinyOpenFold
 * state_dict name (ours or fused), NULL when every one is. */
const char *tf_ckpt_first_unknown(const tf_st_file *f, const char *prefix);

/* The FNV-1a 64 of n floats' bytes, as 16 hex digits. */
void tf_ckpt_checksum(const float *p, size_t n, char out[17]);
/* The optimizer state of model file f (global step global_step): f itself
 * for a version 1 file, else its optimizer file, opened into *g and checked
 * (format, version, the same global step, a checksum present). Refused for
 * a foreign state_dict (!ours) and a missing file, saying what to do. */
tf_status tf_ckpt_open_optimizer(const tf_st_file *f, int ours, long global_step,
                                 tf_st_file **g, char *err, size_t errlen);

/* The loss scaler's state in f's metadata, range-checked: *present = 0 (and
 * nothing else set) for a file without it (all three keys or none). */
tf_status tf_ckpt_loss_scale(const tf_st_file *f, float *scale, long *clean_steps, long *skipped,
                             int *present, char *err, size_t errlen);

#endif
