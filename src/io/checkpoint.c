/* Checkpoint save / load / peek (see checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio/io_util.h"
#include "io/checkpoint_internal.h"
#include "io/config_json.h"
#include "io/safetensors.h"

/* ---- save -------------------------------------------------------------------- */

size_t tf_checkpoint_save_bytes(const tf_config *c) {
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    return 3 * nf * sizeof(float) + nt * (sizeof(tf_param_info) + 3 * sizeof(tf_st_out)) +
           2 * nt * NAME_MAX_LEN;
}

size_t tf_checkpoint_load_bytes(const tf_config *c, int with_optimizer) {
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    /* the copies taken, and the file's image (parameters and two moments) */
    return (with_optimizer ? 3 : 1) * nf * sizeof(float) + 3 * nf * sizeof(float) +
           nt * sizeof(tf_param_info) + NAME_MAX_LEN;
}

tf_status tf_checkpoint_write(const tf_io_holder *h, const char *path, long global_step,
                              char *err, size_t errlen) {
    const tf_config *c = h->c;
    if (global_step < 0)
        return tf_ckpt_failf(err, errlen, TF_ERR_INTERNAL, path, "negative global step", NULL, NULL);
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    float *buf = malloc(3 * nf * sizeof *buf);
    tf_st_out *out = calloc(3 * nt, sizeof *out);
    char *names = malloc(2 * nt * NAME_MAX_LEN);
    char *cfg = tf_io_config_to_json_string(c);
    tf_status st = TF_OK;
    if (!tab || !buf || !out || !names || !cfg) {
        st = tf_ckpt_failf(err, errlen, TF_ERR_NOMEM, path, "out of memory", NULL, NULL);
        goto done;
    }
    tf_param_table(c, tab);
    float *p = buf, *m = buf + nf, *v = buf + 2 * nf;
    long adam_step = 0;
    h->get_params(h->ctx, p);
    h->get_adam(h->ctx, m, v, &adam_step);
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
    char gs[32], as[32], ls[32], lc[32], lk[32], sum[17];
    char op[4096 + 64];
    if (tf_checkpoint_optim_path(path, op, sizeof op) != 0) {
        st = tf_ckpt_failf(err, errlen, TF_ERR_IO, path, "the name of its optimizer file is too long",
                           NULL, NULL);
        goto done;
    }
    float scale = 1.0f;
    long clean = 0, skipped = 0;
    h->get_loss_scale(h->ctx, &scale, &clean, &skipped);
    snprintf(gs, sizeof gs, "%ld", global_step);
    snprintf(as, sizeof as, "%ld", adam_step);
    snprintf(ls, sizeof ls, "%.9g", (double)scale); /* 9 digits: reads back bit for bit */
    snprintf(lc, sizeof lc, "%ld", clean);
    snprintf(lk, sizeof lk, "%ld", skipped);
    tf_ckpt_checksum(p, nf, sum);
    const char *ometa[] = {"format",          OPTIM_FORMAT, "version",          OPTIM_VERSION,
                           "tinyfold_version", TF_VERSION,  "global_step",      gs,
                           "adam_step",       as,           META_LOSS_SCALE,    ls,
                           META_LOSS_CLEAN,   lc,           META_LOSS_SKIPPED,  lk,
                           META_MODEL_CHECKSUM, sum};
    const char *meta[] = {"format",           CKPT_FORMAT, "version",         CKPT_VERSION,
                          "tinyfold_version", TF_VERSION,  "tinyfold_config", cfg,
                          "global_step",      gs};
    /* the optimizer first: when it cannot be written, the model file stays as it was */
    st = tf_st_write(op, out + nt, 2 * nt, ometa, sizeof ometa / sizeof ometa[0] / 2, err, errlen);
    if (st == TF_OK)
        st = tf_st_write(path, out, nt, meta, sizeof meta / sizeof meta[0] / 2, err, errlen);
done:
    free(cfg);
    free(names);
    free(out);
    free(buf);
    free(tab);
    return st;
}

/* ---- load -------------------------------------------------------------------- */

static void shape_str(char *s, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(s, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(s + k, n - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(s + k, n - k, "]");
}

/* Validates tensor `name` (under prefix, or inside a fused tensor) against
 * info and converts it into dst; marks the tensor used in used[] (may be NULL). */
static tf_status take(const tf_st_file *f, const char *prefix, const char *name,
                      const tf_param_info *info, int nonneg, float *dst, unsigned char *used,
                      char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    int64_t want[2] = {info->shape[0], info->shape[1]};
    char ws[64], hs[64];
    shape_str(ws, sizeof ws, info->ndim, want);
    int part = 0, parts = 1;
    const tf_st_tensor *t = tf_ckpt_find_param(f, prefix, name, &part, &parts);
    if (!t) {
        char msg[256];
        snprintf(msg, sizeof msg, "missing tensor '%s%s' (expected F32 %s)", prefix, name, ws);
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    if (!parts) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "tensor '%s%s' and the fused '%s' both hold parameter '%s': keep one of them",
                 prefix, name, t->name, name);
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    if (used) used[t - tf_st_at(f, 0)] = 1;
    if (t->dtype != TF_ST_F32 && t->dtype != TF_ST_F64) {
        char msg[256];
        snprintf(msg, sizeof msg, "tensor '%s': dtype %s, expected F32 (F64 is converted)", t->name,
                 tf_st_dtype_name(t->dtype));
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    want[0] *= parts; /* a fused tensor stacks its parts along the rows */
    int same = t->ndim == info->ndim;
    for (int d = 0; same && d < info->ndim; d++)
        same = t->shape[d] == want[d];
    if (!same) {
        char msg[320];
        shape_str(hs, sizeof hs, t->ndim, t->shape);
        shape_str(ws, sizeof ws, info->ndim, want);
        snprintf(msg, sizeof msg, "tensor '%s': shape %s, expected %s for this config", t->name, hs,
                 ws);
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
    }
    size_t esize = t->dtype == TF_ST_F32 ? 4 : 8;
    const unsigned char *src = (const unsigned char *)t->data + (size_t)part * info->count * esize;
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
            snprintf(msg, sizeof msg, "tensor '%s': element %zu is %s", t->name,
                     (size_t)part * info->count + i,
                     isfinite(x) ? "negative" : "not finite (as F32)");
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
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
        return tf_ckpt_failf(err, errlen, TF_ERR_NOMEM, tf_st_label(f), "out of memory", NULL, NULL);
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
            st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, tf_st_label(f), "%s", msg, NULL);
        }
    }
    free(sorted);
    return st;
}

tf_status tf_checkpoint_read(const tf_io_holder *h, const char *path, int with_optimizer,
                             long *global_step, char *err, size_t errlen) {
    const tf_config *tc = h->c;
    tf_st_file *f = NULL, *g = NULL; /* the model file, the optimizer's (f for version 1) */
    tf_status st = tf_st_open(&f, path, err, errlen);
    if (st) return st;
    size_t nt = tf_param_count_tensors(tc), nf = tf_param_count_floats(tc);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    float *buf = malloc((with_optimizer ? 3 : 1) * nf * sizeof *buf);
    char *name = malloc(NAME_MAX_LEN);
    unsigned char *used = calloc(tf_st_count(f) + 1, 1);
    tf_config fc;
    long gs = 0, adam_step = 0;
    int ours = 0;
    if (!tab || !buf || !name || !used) {
        st = tf_ckpt_failf(err, errlen, TF_ERR_NOMEM, path, "out of memory", NULL, NULL);
        goto done;
    }
    tf_param_table(tc, tab);
    if ((st = tf_ckpt_file_config(f, &fc, &gs, &ours, err, errlen))) goto done;
    const char *field;
    long va, vb;
    if (!tf_st_meta_get(f, "tinyfold_config")) {
        /* inferred from shapes: what the shapes cannot tell is not compared */
        if (!tf_st_meta_get(f, "n_heads_pair")) fc.n_heads_pair = tc->n_heads_pair;
    }
    if (tf_io_config_model_diff(&fc, tc, &field, &va, &vb)) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "wrong config: the checkpoint has %s=%ld but the trainer has %s=%ld", field, va,
                 field, vb);
        st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
        goto done;
    }
    float scale = 1.0f;
    long clean = 0, skipped = 0;
    int has_scale = 0;
    if (with_optimizer) {
        if ((st = tf_ckpt_open_optimizer(f, ours, gs, &g, err, errlen))) goto done;
        const char *as = tf_st_meta_get(g, "adam_step");
        if (!tf_ckpt_parse_step(as, &adam_step)) {
            st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, tf_st_label(g),
                               "metadata 'adam_step' is '%s', expected " STEP_EXPECTED,
                               as ? as : "(missing)", NULL);
            goto done;
        }
        /* an update per global step at most: bounding global_step (the
         * caller's run) bounds adam_step too */
        if (adam_step > gs) {
            char gsb[32];
            snprintf(gsb, sizeof gsb, "%ld", gs);
            st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, tf_st_label(g),
                               "metadata 'adam_step' is '%s', expected at most global_step (%s)",
                               as, gsb);
            goto done;
        }
        if ((st = tf_ckpt_loss_scale(g, &scale, &clean, &skipped, &has_scale, err, errlen)))
            goto done;
    }
    const char *pre = ours ? "" : tf_ckpt_prefix(f);
    if (ours && (st = check_unexpected(f, tab, nt, with_optimizer && g == f, tc, err, errlen)))
        goto done;
    if (g && g != f && (st = check_unexpected(g, tab, nt, 1, tc, err, errlen))) goto done;
    for (size_t i = 0; i < nt && st == TF_OK; i++) {
        st = take(f, pre, tab[i].name, &tab[i], 0, buf, used, err, errlen);
        if (st == TF_OK && with_optimizer) {
            snprintf(name, NAME_MAX_LEN, OPT_M "%s", tab[i].name);
            st = take(g, "", name, &tab[i], 0, buf + nf, NULL, err, errlen);
        }
        if (st == TF_OK && with_optimizer) {
            snprintf(name, NAME_MAX_LEN, OPT_V "%s", tab[i].name);
            st = take(g, "", name, &tab[i], 1, buf + 2 * nf, NULL, err, errlen);
        }
    }
    if (st) goto done;
    /* a foreign state_dict: every tensor must have been one of the model's */
    for (size_t i = 0; !ours && i < tf_st_count(f); i++)
        if (!used[i]) {
            char nb[128], msg[320];
            snprintf(msg, sizeof msg,
                     "unexpected tensor '%s': not part of a model with n_blocks=%d",
                     tf_io_printable(nb, sizeof nb, tf_st_at(f, i)->name), tc->n_blocks);
            st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path, "%s", msg, NULL);
            goto done;
        }
    if (g && g != f) {
        char sum[17];
        tf_ckpt_checksum(buf, nf, sum);
        if (strcmp(sum, tf_st_meta_get(g, META_MODEL_CHECKSUM)) != 0) {
            st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, tf_st_label(g),
                               "is not the optimizer state of '%s' (its model checksum differs): "
                               "the two files are not a pair",
                               path, NULL);
            goto done;
        }
    }
    /* everything checked: now the holder changes */
    h->set_params(h->ctx, buf);
    if (with_optimizer) h->set_adam(h->ctx, buf + nf, buf + 2 * nf, adam_step);
    /* fp16's loss scale continues where it was; a run of another precision
     * than the file's starts its own scaler (another type, another range) */
    if (has_scale && fc.precision == TF_PREC_FP16 && tc->precision == TF_PREC_FP16)
        h->set_loss_scale(h->ctx, scale, clean, skipped);
    if (global_step) *global_step = gs;
done:
    free(used);
    free(name);
    free(buf);
    free(tab);
    if (g && g != f) tf_st_close(g);
    tf_st_close(f);
    return st;
}
