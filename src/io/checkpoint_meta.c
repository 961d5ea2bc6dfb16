/* What a checkpoint's metadata says (see checkpoint.h): the format and
 * version, the stored config (or the model inferred from a foreign
 * state_dict's shapes) and the step counters, each range-checked and any
 * error naming the file and the field. */
#define _POSIX_C_SOURCE 200809L
#include "io/checkpoint.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio/io_util.h"
#include "config/limits.h"
#include "io/checkpoint_internal.h"
#include "io/config_json.h"
#include "io/safetensors.h"

tf_status tf_ckpt_failf(char *err, size_t errlen, tf_status st, const char *path, const char *fmt,
                        const char *a, const char *b) {
    char msg[512], pa[320], pb[128]; /* a, b may come from the file: keep one printable line */
    snprintf(msg, sizeof msg, fmt, tf_io_printable(pa, sizeof pa, a ? a : ""),
             tf_io_printable(pb, sizeof pb, b ? b : ""));
    if (errlen) snprintf(err, errlen, "%s: %s", path, msg);
    return st;
}

/* A strict non-negative decimal (no sign, no spaces) up to STEP_MAX. */
int tf_ckpt_parse_step(const char *s, long *v) {
    if (!s || s[0] < '0' || s[0] > '9') return 0;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(s, &end, 10);
    if (errno || *end != '\0' || x < 0 || x > STEP_MAX || x > LONG_MAX) return 0;
    *v = (long)x;
    return 1;
}

/* ---- the config a file describes --------------------------------------------- */

static tf_status check_format(const tf_st_file *f, int *ours, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    const char *fmt = tf_st_meta_get(f, "format");
    *ours = fmt && strcmp(fmt, CKPT_FORMAT) == 0;
    if (fmt && strcmp(fmt, "tinyfold-grads") == 0)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "is a gradient file, not a checkpoint", NULL,
                     NULL);
    if (*ours) {
        const char *ver = tf_st_meta_get(f, "version");
        if (!ver || (strcmp(ver, CKPT_VERSION) != 0 && strcmp(ver, CKPT_VERSION_COMBINED) != 0))
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                                 "unsupported checkpoint version '%s' (this build reads versions "
                                 CKPT_VERSION_COMBINED " and " CKPT_VERSION ")",
                                 ver ? ver : "(missing)", NULL);
        if (!tf_st_meta_get(f, "tinyfold_config"))
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "metadata 'tinyfold_config' is missing",
                         NULL, NULL);
    }
    return TF_OK;
}

static int dim_of(const tf_st_tensor *t, int d, int *v) {
    if (!t || d >= t->ndim || t->shape[d] > INT_MAX) return 0;
    *v = (int)t->shape[d];
    return 1;
}

/* A foreign (PyTorch) state_dict: the model shape from the tensor shapes. */
static tf_status infer_config(const tf_st_file *f, tf_config *c, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    tf_config_default(c);
    if (tf_st_meta_get(f, "format") && strcmp(tf_st_meta_get(f, "format"), OPTIM_FORMAT) == 0)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "is the optimizer file of a checkpoint, not a checkpoint: give the "
                             "checkpoint written by --save (the optimizer file is read beside it)",
                             NULL, NULL);
    const char *pre = tf_ckpt_prefix(f);
    const char *unknown = tf_ckpt_first_unknown(f, pre);
    if (unknown)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "unknown tensor '%s': a checkpoint without tinyfold metadata must "
                             "hold a TinyOpenFold state_dict (the names of "
                             "tests/reference/tinyopenfold_ref.py, or the v2 script's fused "
                             "qkv_proj, left_right_proj, left_right_gate; optionally all under "
                             "'module.' or '_orig_mod.')",
                             unknown, NULL);
    char nm[128];
    snprintf(nm, sizeof nm, "%smsa_embedding.weight", pre);
    const tf_st_tensor *e = tf_st_find(f, nm);
    snprintf(nm, sizeof nm, "%spair_embedding.weight", pre);
    const tf_st_tensor *pe = tf_st_find(f, nm);
    if (!e || e->ndim != 2 || !dim_of(e, 0, &c->vocab) || !dim_of(e, 1, &c->msa_dim))
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                     "no tinyfold metadata and no 2-D tensor 'msa_embedding.weight' to infer the "
                     "model from",
                     NULL, NULL);
    if (!pe || pe->ndim != 2 || !dim_of(pe, 0, &c->pair_dim) || !dim_of(pe, 1, &c->pair_input_dim))
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                     "no tinyfold metadata and no 2-D tensor 'pair_embedding.weight' to infer the "
                     "model from",
                     NULL, NULL);
    int nb = 0;
    for (;; nb++) { /* fused or not, every block has its row attention's bias projection */
        snprintf(nm, sizeof nm, "%sevoformer_blocks.%d.msa_row_attention.pair_bias_proj.weight",
                 pre, nb);
        if (!tf_st_find(f, nm) || nb == INT_MAX - 1) break;
    }
    c->n_blocks = nb;
    if (nb > 0) {
        snprintf(nm, sizeof nm, "%sevoformer_blocks.0.outer_product_mean.msa_to_outer.weight", pre);
        const tf_st_tensor *o = tf_st_find(f, nm);
        snprintf(nm, sizeof nm, "%sevoformer_blocks.0.msa_row_attention.pair_bias_proj.weight",
                 pre);
        const tf_st_tensor *pb = tf_st_find(f, nm);
        if (!dim_of(o, 0, &c->outer_dim) || !dim_of(pb, 0, &c->n_heads_msa))
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                         "cannot infer outer_dim / n_heads_msa: block 0 tensors missing or not 2-D",
                         NULL, NULL);
    }
    /* The reference's checkpoints carry its config as string metadata: take
     * n_heads_pair from there (no shape shows it), cross-check the rest. */
    static const char *const keys[] = {"msa_dim",     "pair_dim",  "n_blocks",
                                       "n_heads_msa", "outer_dim", "n_heads_pair"};
    int *vals[] = {&c->msa_dim,     &c->pair_dim,  &c->n_blocks,
                   &c->n_heads_msa, &c->outer_dim, &c->n_heads_pair};
    for (int k = 0; k < 6; k++) {
        const char *s = tf_st_meta_get(f, keys[k]);
        long v;
        if (!s) continue;
        if (!tf_ckpt_parse_step(s, &v) || v > INT_MAX)
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                         "metadata '%s' is '%s', expected an integer", keys[k], s);
        if (k == 5) {
            c->n_heads_pair = (int)v;
        } else if ((k < 3 || nb > 0) && v != *vals[k]) {
            char msg[160];
            snprintf(msg, sizeof msg, "metadata %s=%ld but the tensor shapes say %d", keys[k], v,
                     *vals[k]);
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        }
    }
    /* What the shapes say is held to the ranges a flag is (config/limits.h). */
    static const struct {
        const char *name;
        int lo, hi;
    } lim[] = {{"msa_dim", 1, TF_LIM_DIM_MAX},        {"pair_dim", 1, TF_LIM_DIM_MAX},
               {"n_blocks", 1, TF_LIM_BLOCKS_MAX},    {"n_heads_msa", 1, TF_LIM_HEADS_MAX},
               {"outer_dim", 1, TF_LIM_OUTER_MAX},    {"n_heads_pair", 1, TF_LIM_HEADS_MAX},
               {"vocab", TF_LIM_VOCAB_MIN, TF_LIM_VOCAB_MAX},
               {"pair_input_dim", TF_LIM_PAIR_INPUT, TF_LIM_PAIR_INPUT}};
    const int got[] = {c->msa_dim,   c->pair_dim,     c->n_blocks, c->n_heads_msa,
                       c->outer_dim, c->n_heads_pair, c->vocab,    c->pair_input_dim};
    for (size_t k = 0; k < sizeof lim / sizeof lim[0]; k++)
        if (got[k] < lim[k].lo || got[k] > lim[k].hi) {
            char msg[192];
            snprintf(msg, sizeof msg,
                     "the model inferred from its tensor shapes has %s=%d, expected %d..%d",
                     lim[k].name, got[k], lim[k].lo, lim[k].hi);
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        }
    return TF_OK;
}

/* The stored (or inferred) config and global step; *ours = tinyfold file. */
tf_status tf_ckpt_file_config(const tf_st_file *f, tf_config *c, long *gs, int *ours, char *err,
                              size_t errlen) {
    const char *path = tf_st_label(f);
    tf_status st = check_format(f, ours, err, errlen);
    if (st) return st;
    const char *cj = tf_st_meta_get(f, "tinyfold_config");
    if (cj) {
        char e[256];
        st = tf_io_config_from_json_string(c, cj, e, sizeof e);
        if (st) return tf_ckpt_failf(err, errlen, st, path, "metadata 'tinyfold_config': %s", e, NULL);
    } else {
        st = infer_config(f, c, err, errlen);
        if (st) return st;
    }
    *gs = 0;
    const char *g = tf_st_meta_get(f, "global_step");
    if ((g || *ours) && !tf_ckpt_parse_step(g, gs))
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                     "metadata 'global_step' is '%s', expected " STEP_EXPECTED,
                     g ? g : "(missing)", NULL);
    return TF_OK;
}

tf_status tf_checkpoint_peek_config(const char *path, tf_config *c, long *global_step, char *err,
                                    size_t errlen) {
    tf_st_file *f = NULL;
    tf_status st = tf_st_open(&f, path, err, errlen);
    if (st) return st;
    long gs = 0;
    int ours = 0;
    st = tf_ckpt_file_config(f, c, &gs, &ours, err, errlen);
    if (st == TF_OK && global_step) *global_step = gs;
    tf_st_close(f);
    return st;
}

tf_status tf_checkpoint_peek_config_buffer(const void *buf, size_t len, const char *label,
                                           tf_config *c, long *global_step, char *err,
                                           size_t errlen) {
    tf_st_file *f = NULL;
    tf_status st = tf_st_parse_buffer(&f, buf, len, label, err, errlen);
    if (st) return st;
    long gs = 0;
    int ours = 0;
    st = tf_ckpt_file_config(f, c, &gs, &ours, err, errlen);
    if (st == TF_OK && global_step) *global_step = gs;
    tf_st_close(f);
    return st;
}

tf_status tf_ckpt_loss_scale(const tf_st_file *f, float *scale, long *clean_steps, long *skipped,
                             int *present, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    const char *ls = tf_st_meta_get(f, META_LOSS_SCALE);
    const char *lc = tf_st_meta_get(f, META_LOSS_CLEAN);
    const char *lk = tf_st_meta_get(f, META_LOSS_SKIPPED);
    *present = 0;
    if (!ls && !lc && !lk) return TF_OK; /* a file written before fp16 */
    if (!ls || !lc || !lk)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "metadata '%s' is missing (the loss scale is stored as "
                             META_LOSS_SCALE ", " META_LOSS_CLEAN " and " META_LOSS_SKIPPED ")",
                             !ls ? META_LOSS_SCALE : !lc ? META_LOSS_CLEAN : META_LOSS_SKIPPED,
                             NULL);
    /* a positive finite float, written with %.9g: no sign, no spaces */
    errno = 0;
    char *end = NULL;
    double v = (ls[0] >= '0' && ls[0] <= '9') ? strtod(ls, &end) : -1.0;
    if (errno || !end || *end != '\0' || !(v > 0) || v > FLT_MAX || (float)v <= 0.0f)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "metadata '" META_LOSS_SCALE "' is '%s', expected a positive finite "
                             "number",
                             ls, NULL);
    long c = 0, k = 0;
    if (!tf_ckpt_parse_step(lc, &c))
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "metadata '" META_LOSS_CLEAN "' is '%s', expected " STEP_EXPECTED, lc,
                             NULL);
    if (!tf_ckpt_parse_step(lk, &k))
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "metadata '" META_LOSS_SKIPPED "' is '%s', expected " STEP_EXPECTED,
                             lk, NULL);
    *scale = (float)v;
    *clean_steps = c;
    *skipped = k;
    *present = 1;
    return TF_OK;
}
