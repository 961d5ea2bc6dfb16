/* User data files (see datafile.h). */
#include "io/datafile.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio/io_util.h"
#include "io/safetensors.h"

struct tf_datafile {
    tf_st_file *f;
    unsigned char *image; /* the whole file, read at open (owned; NULL when borrowed) */
    const tf_st_tensor *tok, *pair, *target;
    int n, S, N;
};

static tf_status bad(char *err, size_t errlen, const char *path, const char *tensor,
                     const char *msg) {
    if (errlen) snprintf(err, errlen, "%s: tensor '%s': %s", path, tensor, msg);
    return TF_ERR_USAGE;
}

static const tf_st_tensor *need(const tf_st_file *f, const char *name, int ndim_a, int ndim_b,
                                char *err, size_t errlen) {
    const tf_st_tensor *t = tf_st_find(f, name);
    char msg[128];
    if (!t) {
        bad(err, errlen, tf_st_label(f), name, "missing");
        return NULL;
    }
    if (t->ndim != ndim_a && t->ndim != ndim_b) {
        snprintf(msg, sizeof msg, "has %d dimensions, expected %d", t->ndim, ndim_a);
        bad(err, errlen, tf_st_label(f), name, msg);
        return NULL;
    }
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 1 || t->shape[d] > INT_MAX) {
            snprintf(msg, sizeof msg, "dimension %d is %lld, expected 1..%d", d,
                     (long long)t->shape[d], INT_MAX);
            bad(err, errlen, tf_st_label(f), name, msg);
            return NULL;
        }
    return t;
}

static tf_status check_finite(const tf_st_tensor *t, const char *path, char *err, size_t errlen) {
    const unsigned char *p = t->data;
    for (uint64_t i = 0; i < t->numel; i++) {
        float x;
        memcpy(&x, p + 4 * i, 4);
        if (!isfinite(x)) {
            char msg[96];
            snprintf(msg, sizeof msg, "element %llu is not finite", (unsigned long long)i);
            return bad(err, errlen, path, t->name, msg);
        }
    }
    return TF_OK;
}

static tf_status validate(tf_datafile *d, char *err, size_t errlen) {
    const tf_st_file *f = d->f;
    const char *path = tf_st_label(f);
    char msg[192];
    if (!(d->tok = need(f, "msa_tokens", 3, 3, err, errlen)) ||
        !(d->pair = need(f, "pair_features", 4, 4, err, errlen)) ||
        !(d->target = need(f, "target_distances", 4, 3, err, errlen)))
        return TF_ERR_USAGE;
    if (d->tok->dtype != TF_ST_I32 && d->tok->dtype != TF_ST_I64)
        return bad(err, errlen, path, "msa_tokens", "dtype must be I32 or I64");
    if (d->pair->dtype != TF_ST_F32)
        return bad(err, errlen, path, "pair_features", "dtype must be F32");
    if (d->target->dtype != TF_ST_F32)
        return bad(err, errlen, path, "target_distances", "dtype must be F32");
    d->n = (int)d->tok->shape[0];
    d->S = (int)d->tok->shape[1];
    d->N = (int)d->tok->shape[2];
    const int64_t *p = d->pair->shape, *t = d->target->shape;
    if (p[0] != d->n || p[1] != d->N || p[2] != d->N || p[3] != TF_DATA_PAIR_DIM) {
        snprintf(msg, sizeof msg,
                 "shape [%lld,%lld,%lld,%lld], expected [%d,%d,%d,%d] (from msa_tokens)",
                 (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3], d->n, d->N,
                 d->N, TF_DATA_PAIR_DIM);
        return bad(err, errlen, path, "pair_features", msg);
    }
    if (t[0] != d->n || t[1] != d->N || t[2] != d->N || (d->target->ndim == 4 && t[3] != 1)) {
        snprintf(msg, sizeof msg,
                 "shape [%lld,%lld,%lld%s], expected [%d,%d,%d,1] (from msa_tokens)",
                 (long long)t[0], (long long)t[1], (long long)t[2],
                 d->target->ndim == 4 ? (t[3] == 1 ? ",1" : ",?") : "", d->n, d->N, d->N);
        return bad(err, errlen, path, "target_distances", msg);
    }
    const unsigned char *q = d->tok->data;
    for (uint64_t i = 0; i < d->tok->numel; i++) {
        long long v;
        if (d->tok->dtype == TF_ST_I32) {
            int32_t x;
            memcpy(&x, q + 4 * i, 4);
            v = x;
        } else {
            int64_t x;
            memcpy(&x, q + 8 * i, 8);
            v = x;
        }
        if (v < 0 || v >= TF_DATA_VOCAB) {
            snprintf(msg, sizeof msg, "element %llu is %lld, expected 0..%d", (unsigned long long)i,
                     v, TF_DATA_VOCAB - 1);
            return bad(err, errlen, path, "msa_tokens", msg);
        }
    }
    tf_status st = check_finite(d->pair, path, err, errlen);
    if (st == TF_OK) st = check_finite(d->target, path, err, errlen);
    return st;
}

tf_status tf_datafile_parse(const void *buf, size_t len, const char *label, tf_datafile **out,
                            char *err, size_t errlen) {
    *out = NULL;
    tf_datafile *d = calloc(1, sizeof *d);
    if (!d) {
        if (errlen) snprintf(err, errlen, "%s: out of memory", label);
        return TF_ERR_NOMEM;
    }
    tf_status st = tf_st_parse_buffer(&d->f, buf, len, label, err, errlen);
    if (st == TF_OK) st = validate(d, err, errlen);
    if (st) {
        tf_datafile_close(d);
        return st;
    }
    *out = d;
    return TF_OK;
}

tf_status tf_datafile_open(const char *path, tf_datafile **out, char *err, size_t errlen) {
    *out = NULL;
    unsigned char *img = NULL;
    size_t len = 0;
    /* Read, not mapped: the file may be rewritten or truncated while training
     * runs, and what was validated here is what every batch is drawn from. */
    if (tf_io_read_file(path, &img, &len, TF_IO_MAX_SAFETENSORS, err, errlen) != 0) return TF_ERR_IO;
    tf_status st = tf_datafile_parse(img, len, path, out, err, errlen);
    if (st) {
        free(img);
        return st;
    }
    (*out)->image = img;
    return TF_OK;
}

int tf_datafile_count(const tf_datafile *d) { return d->n; }
int tf_datafile_S(const tf_datafile *d) { return d->S; }
int tf_datafile_N(const tf_datafile *d) { return d->N; }

void tf_datafile_batch(const tf_datafile *d, long step, tf_batch *b) {
    if (b->S != d->S || b->N != d->N) {
        /* a caller bug, not a user error: the CLI sizes the batch from the file */
        fprintf(stderr, "tf_datafile_batch: batch S=%d N=%d but the file has S=%d N=%d\n", b->S,
                b->N, d->S, d->N);
        abort();
    }
    const unsigned long long n = (unsigned long long)d->n;
    const size_t SN = (size_t)d->S * d->N, NN = (size_t)d->N * d->N;
    /* (step*B + j) mod n without overflow, step < 0 included */
    long sm = step % (long)n;
    unsigned long long base =
        ((unsigned long long)(sm < 0 ? sm + (long)n : sm) * ((unsigned long long)b->B % n)) % n;
    for (int j = 0; j < b->B; j++) {
        size_t s = (size_t)((base + (unsigned long long)j) % n);
        const unsigned char *tok = (const unsigned char *)d->tok->data;
        if (d->tok->dtype == TF_ST_I32) {
            memcpy(b->tokens + (size_t)j * SN, tok + s * SN * 4, SN * 4);
        } else {
            for (size_t i = 0; i < SN; i++) {
                int64_t x;
                memcpy(&x, tok + (s * SN + i) * 8, 8);
                b->tokens[(size_t)j * SN + i] = (int32_t)x; /* checked in [0,21) at open */
            }
        }
        memcpy(b->pair + (size_t)j * NN * TF_DATA_PAIR_DIM,
               (const unsigned char *)d->pair->data + s * NN * TF_DATA_PAIR_DIM * 4,
               NN * TF_DATA_PAIR_DIM * 4);
        memcpy(b->target + (size_t)j * NN, (const unsigned char *)d->target->data + s * NN * 4,
               NN * 4);
    }
}

void tf_datafile_close(tf_datafile *d) {
    if (!d) return;
    tf_st_close(d->f);
    free(d->image);
    free(d);
}
