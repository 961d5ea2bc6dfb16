/* Checkpoint save / load / peek (see checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/config_json.h"
#include "io/io_util.h"
#include "io/safetensors.h"

#define CKPT_FORMAT "tinyfold-checkpoint"
#define CKPT_VERSION "1"
#define OPT_M "optimizer.exp_avg."
#define OPT_V "optimizer.exp_avg_sq."
#define NAME_MAX_LEN (sizeof(((tf_param_info *)0)->name) + 32)

static tf_status failf(char *err, size_t errlen, tf_status st, const char *path, const char *fmt,
                       const char *a, const char *b) {
    char msg[512], pa[320], pb[128]; /* a, b may come from the file: keep one printable line */
    snprintf(msg, sizeof msg, fmt, tf_io_printable(pa, sizeof pa, a ? a : ""),
             tf_io_printable(pb, sizeof pb, b ? b : ""));
    if (errlen) snprintf(err, errlen, "%s: %s", path, msg);
    return st;
}

/* Step counters stored in a file are at most 2^53: exact in a double (the run
 * JSON), and far from overflowing a long while a run adds its steps. */
#define STEP_MAX 9007199254740992LL
#define STEP_EXPECTED "a non-negative integer up to 9007199254740992"

/* A strict non-negative decimal (no sign, no spaces) up to STEP_MAX. */
static int parse_step(const char *s, long *v) {
    if (!s || s[0] < '0' || s[0] > '9') return 0;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(s, &end, 10);
    if (errno || *end != '\0' || x < 0 || x > STEP_MAX || x > LONG_MAX) return 0;
    *v = (long)x;
    return 1;
}

/* ---- save -------------------------------------------------------------------- */

size_t tf_checkpoint_save_bytes(const tf_config *c) {
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    return 3 * nf * sizeof(float) + nt * (sizeof(tf_param_info) + 3 * sizeof(tf_st_out)) +
           2 * nt * NAME_MAX_LEN;
}

size_t tf_checkpoint_load_bytes(const tf_config *c, int with_optimizer) {
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    return (with_optimizer ? 3 : 1) * nf * sizeof(float) + nt * sizeof(tf_param_info) +
           NAME_MAX_LEN;
}

tf_status tf_checkpoint_save(tf_trainer *t, const char *path, long global_step, char *err,
                             size_t errlen) {
    const tf_config *c = tf_trainer_config(t);
    if (global_step < 0)
        return failf(err, errlen, TF_ERR_INTERNAL, path, "negative global step", NULL, NULL);
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    float *buf = malloc(3 * nf * sizeof *buf);
    tf_st_out *out = calloc(3 * nt, sizeof *out);
    char *names = malloc(2 * nt * NAME_MAX_LEN);
    char *cfg = tf_io_config_to_json_string(c);
    tf_status st = TF_OK;
    if (!tab || !buf || !out || !names || !cfg) {
        st = failf(err, errlen, TF_ERR_NOMEM, path, "out of memory", NULL, NULL);
        goto done;
    }
    tf_param_table(c, tab);
    float *p = buf, *m = buf + nf, *v = buf + 2 * nf;
    long adam_step = 0;
    tf_trainer_get_params(t, p);
    tf_trainer_get_adam(t, m, v, &adam_step);
    for (size_t i = 0; i < nt; i++) {
        const float *src[3] = {p, m, v};
        for (int k = 0; k < 3; k++) {
            tf_st_out *o = &out[k * nt + i];
            if (k == 0) {
                o->name = tab[i].name;
            } else {
                char *nm = names + ((size_t)(k - 1) * nt + i) * NAME_MAX_LEN;
                snprintf(nm, NAME_MAX_LEN, "%s%s", k == 1 ? OPT_M : OPT_V, tab[i].name);
                o->name = nm;
            }
            o->dtype = TF_ST_F32;
            o->ndim = tab[i].ndim;
            for (int d = 0; d < tab[i].ndim; d++)
                o->shape[d] = tab[i].shape[d];
            o->data = src[k] + tab[i].offset;
        }
    }
    char gs[32], as[32];
    snprintf(gs, sizeof gs, "%ld", global_step);
    snprintf(as, sizeof as, "%ld", adam_step);
    const char *meta[] = {"format",           CKPT_FORMAT, "version",         CKPT_VERSION,
                          "tinyfold_version", TF_VERSION,  "tinyfold_config", cfg,
                          "global_step",      gs,          "adam_step",       as};
    st = tf_st_write(path, out, 3 * nt, meta, sizeof meta / sizeof meta[0] / 2, err, errlen);
done:
    free(cfg);
    free(names);
    free(out);
    free(buf);
    free(tab);
    return st;
}

/* ---- the config a file describes --------------------------------------------- */

static tf_status check_format(const tf_st_file *f, int *ours, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    const char *fmt = tf_st_meta_get(f, "format");
    *ours = fmt && strcmp(fmt, CKPT_FORMAT) == 0;
    if (fmt && strcmp(fmt, "tinyfold-grads") == 0)
        return failf(err, errlen, TF_ERR_USAGE, path, "is a gradient file, not a checkpoint", NULL,
                     NULL);
    if (*ours) {
        const char *ver = tf_st_meta_get(f, "version");
        if (!ver || strcmp(ver, CKPT_VERSION) != 0)
            return failf(
                err, errlen, TF_ERR_USAGE, path,
                "unsupported checkpoint version '%s' (this build reads version " CKPT_VERSION ")",
                ver ? ver : "(missing)", NULL);
        if (!tf_st_meta_get(f, "tinyfold_config"))
            return failf(err, errlen, TF_ERR_USAGE, path, "metadata 'tinyfold_config' is missing",
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
    const tf_st_tensor *e = tf_st_find(f, "msa_embedding.weight");
    const tf_st_tensor *pe = tf_st_find(f, "pair_embedding.weight");
    if (!e || e->ndim != 2 || !dim_of(e, 0, &c->vocab) || !dim_of(e, 1, &c->msa_dim))
        return failf(err, errlen, TF_ERR_USAGE, path,
                     "no tinyfold metadata and no 2-D tensor 'msa_embedding.weight' to infer the "
                     "model from",
                     NULL, NULL);
    if (!pe || pe->ndim != 2 || !dim_of(pe, 0, &c->pair_dim) || !dim_of(pe, 1, &c->pair_input_dim))
        return failf(err, errlen, TF_ERR_USAGE, path,
                     "no tinyfold metadata and no 2-D tensor 'pair_embedding.weight' to infer the "
                     "model from",
                     NULL, NULL);
    char nm[128];
    int nb = 0;
    for (;; nb++) {
        snprintf(nm, sizeof nm, "evoformer_blocks.%d.msa_row_attention.q_proj.weight", nb);
        if (!tf_st_find(f, nm) || nb == INT_MAX - 1) break;
    }
    c->n_blocks = nb;
    if (nb > 0) {
        const tf_st_tensor *o =
            tf_st_find(f, "evoformer_blocks.0.outer_product_mean.msa_to_outer.weight");
        const tf_st_tensor *pb =
            tf_st_find(f, "evoformer_blocks.0.msa_row_attention.pair_bias_proj.weight");
        if (!dim_of(o, 0, &c->outer_dim) || !dim_of(pb, 0, &c->n_heads_msa))
            return failf(err, errlen, TF_ERR_USAGE, path,
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
        if (!parse_step(s, &v) || v > INT_MAX)
            return failf(err, errlen, TF_ERR_USAGE, path,
                         "metadata '%s' is '%s', expected an integer", keys[k], s);
        if (k == 5) {
            c->n_heads_pair = (int)v;
        } else if ((k < 3 || nb > 0) && v != *vals[k]) {
            char msg[160];
            snprintf(msg, sizeof msg, "metadata %s=%ld but the tensor shapes say %d", keys[k], v,
                     *vals[k]);
            return failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        }
    }
    return TF_OK;
}

/* The stored (or inferred) config and global step; *ours = tinyfold file. */
static tf_status file_config(const tf_st_file *f, tf_config *c, long *gs, int *ours, char *err,
                             size_t errlen) {
    const char *path = tf_st_label(f);
    tf_status st = check_format(f, ours, err, errlen);
    if (st) return st;
    const char *cj = tf_st_meta_get(f, "tinyfold_config");
    if (cj) {
        char e[256];
        st = tf_io_config_from_json_string(c, cj, e, sizeof e);
        if (st) return failf(err, errlen, st, path, "metadata 'tinyfold_config': %s", e, NULL);
    } else {
        st = infer_config(f, c, err, errlen);
        if (st) return st;
    }
    *gs = 0;
    const char *g = tf_st_meta_get(f, "global_step");
    if ((g || *ours) && !parse_step(g, gs))
        return failf(err, errlen, TF_ERR_USAGE, path,
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
    st = file_config(f, c, &gs, &ours, err, errlen);
    if (st == TF_OK && global_step) *global_step = gs;
    tf_st_close(f);
    return st;
}

/* ---- load -------------------------------------------------------------------- */

static void shape_str(char *s, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(s, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(s + k, n - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(s + k, n - k, "]");
}

/* Validates tensor `name` against info and converts it into dst. */
static tf_status take(const tf_st_file *f, const char *name, const tf_param_info *info, int nonneg,
                      float *dst, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    int64_t want[2] = {info->shape[0], info->shape[1]};
    char ws[64], hs[64];
    shape_str(ws, sizeof ws, info->ndim, want);
    const tf_st_tensor *t = tf_st_find(f, name);
    if (!t) {
        char msg[256];
        snprintf(msg, sizeof msg, "missing tensor '%s' (expected F32 %s)", name, ws);
        return failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    if (t->dtype != TF_ST_F32 && t->dtype != TF_ST_F64) {
        char msg[256];
        snprintf(msg, sizeof msg, "tensor '%s': dtype %s, expected F32 (F64 is converted)", name,
                 tf_st_dtype_name(t->dtype));
        return failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    int same = t->ndim == info->ndim;
    for (int d = 0; same && d < info->ndim; d++)
        same = t->shape[d] == want[d];
    if (!same) {
        char msg[320];
        shape_str(hs, sizeof hs, t->ndim, t->shape);
        snprintf(msg, sizeof msg, "tensor '%s': shape %s, expected %s for this config", name, hs,
                 ws);
        return failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    const unsigned char *src = t->data;
    for (size_t i = 0; i < info->count; i++) {
        float x;
        if (t->dtype == TF_ST_F32) {
            memcpy(&x, src + 4 * i, 4);
        } else {
            double d;
            memcpy(&d, src + 8 * i, 8);
            x = (float)d; /* round to nearest; beyond FLT_MAX becomes inf, refused below */
        }
        if (!isfinite(x) || (nonneg && x < 0.0f)) {
            char msg[256];
            snprintf(msg, sizeof msg, "tensor '%s': element %zu is %s", name, i,
                     isfinite(x) ? "negative" : "not finite (as F32)");
            return failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        }
        dst[info->offset + i] = x;
    }
    return TF_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Tensors under the model's own prefixes must all be expected ones. */
static tf_status check_unexpected(const tf_st_file *f, const tf_param_info *tab, size_t nt,
                                  int with_optimizer, const tf_config *c, char *err,
                                  size_t errlen) {
    static const char *const model_prefix[] = {"msa_embedding.", "pair_embedding.",
                                               "evoformer_blocks.", "structure_module."};
    const char **sorted = malloc(nt * sizeof *sorted);
    if (!sorted)
        return failf(err, errlen, TF_ERR_NOMEM, tf_st_label(f), "out of memory", NULL, NULL);
    for (size_t i = 0; i < nt; i++)
        sorted[i] = tab[i].name;
    qsort(sorted, nt, sizeof *sorted, cmp_str);
    tf_status st = TF_OK;
    for (size_t i = 0; i < tf_st_count(f) && st == TF_OK; i++) {
        const char *nm = tf_st_at(f, i)->name, *key = NULL;
        if (with_optimizer && strncmp(nm, OPT_M, strlen(OPT_M)) == 0)
            key = nm + strlen(OPT_M);
        else if (with_optimizer && strncmp(nm, OPT_V, strlen(OPT_V)) == 0)
            key = nm + strlen(OPT_V);
        for (size_t k = 0; !key && k < 4; k++)
            if (strncmp(nm, model_prefix[k], strlen(model_prefix[k])) == 0) key = nm;
        if (key && !bsearch(&key, sorted, nt, sizeof *sorted, cmp_str)) {
            char nb[128], msg[320];
            snprintf(msg, sizeof msg,
                     "unexpected tensor '%s': not part of a model with n_blocks=%d (wrong config?)",
                     tf_io_printable(nb, sizeof nb, nm), c->n_blocks);
            st = failf(err, errlen, TF_ERR_USAGE, tf_st_label(f), "%s", msg, NULL);
        }
    }
    free(sorted);
    return st;
}

tf_status tf_checkpoint_load(tf_trainer *t, const char *path, int with_optimizer, long *global_step,
                             char *err, size_t errlen) {
    const tf_config *tc = tf_trainer_config(t);
    tf_st_file *f = NULL;
    tf_status st = tf_st_open(&f, path, err, errlen);
    if (st) return st;
    size_t nt = tf_param_count_tensors(tc), nf = tf_param_count_floats(tc);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    float *buf = malloc((with_optimizer ? 3 : 1) * nf * sizeof *buf);
    char *name = malloc(NAME_MAX_LEN);
    tf_config fc;
    long gs = 0, adam_step = 0;
    int ours = 0;
    if (!tab || !buf || !name) {
        st = failf(err, errlen, TF_ERR_NOMEM, path, "out of memory", NULL, NULL);
        goto done;
    }
    tf_param_table(tc, tab);
    if ((st = file_config(f, &fc, &gs, &ours, err, errlen))) goto done;
    const char *field;
    long va, vb;
    if (!tf_st_meta_get(f, "tinyfold_config")) {
        /* inferred from shapes: what the shapes cannot tell is not compared */
        if (!tf_st_meta_get(f, "n_heads_pair")) fc.n_heads_pair = tc->n_heads_pair;
        if (fc.n_blocks == 0) {
            fc.outer_dim = tc->outer_dim;
            fc.n_heads_msa = tc->n_heads_msa;
        }
    }
    if (tf_io_config_model_diff(&fc, tc, &field, &va, &vb)) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "wrong config: the checkpoint has %s=%ld but the trainer has %s=%ld", field, va,
                 field, vb);
        st = failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        goto done;
    }
    if (with_optimizer) {
        const char *as = tf_st_meta_get(f, "adam_step");
        if (!as) {
            st = failf(err, errlen, TF_ERR_USAGE, path,
                       "has no optimizer state (metadata 'adam_step' missing): load it without the "
                       "optimizer",
                       NULL, NULL);
            goto done;
        }
        if (!parse_step(as, &adam_step)) {
            st = failf(err, errlen, TF_ERR_USAGE, path,
                       "metadata 'adam_step' is '%s', expected " STEP_EXPECTED, as, NULL);
            goto done;
        }
    }
    if ((st = check_unexpected(f, tab, nt, with_optimizer, tc, err, errlen))) goto done;
    for (size_t i = 0; i < nt && st == TF_OK; i++) {
        st = take(f, tab[i].name, &tab[i], 0, buf, err, errlen);
        if (st == TF_OK && with_optimizer) {
            snprintf(name, NAME_MAX_LEN, OPT_M "%s", tab[i].name);
            st = take(f, name, &tab[i], 0, buf + nf, err, errlen);
        }
        if (st == TF_OK && with_optimizer) {
            snprintf(name, NAME_MAX_LEN, OPT_V "%s", tab[i].name);
            st = take(f, name, &tab[i], 1, buf + 2 * nf, err, errlen);
        }
    }
    if (st) goto done;
    /* everything checked: now the trainer changes */
    tf_trainer_set_params(t, buf);
    if (with_optimizer) tf_trainer_set_adam(t, buf + nf, buf + 2 * nf, adam_step);
    if (global_step) *global_step = gs;
done:
    free(name);
    free(buf);
    free(tab);
    tf_st_close(f);
    return st;
}
