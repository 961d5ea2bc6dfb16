/* safetensors reader: validate the whole header before exposing any data.
 * See safetensors.h for the rules. */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio/io_util.h"

struct tf_st_file {
    char *label;
    const unsigned char *buf;
    size_t len;
    unsigned char *owned; /* the image read by tf_st_open, freed on close */
    tf_st_tensor *t; /* sorted by name */
    size_t n;
    char **meta_k, **meta_v; /* sorted by key */
    size_t n_meta;
};

static const struct {
    const char *name;
    size_t size;
} k_dtypes[TF_ST_DTYPE_COUNT] = {
    [TF_ST_BOOL] = {"BOOL", 1},       [TF_ST_U8] = {"U8", 1},           [TF_ST_I8] = {"I8", 1},
    [TF_ST_F8_E5M2] = {"F8_E5M2", 1}, [TF_ST_F8_E4M3] = {"F8_E4M3", 1}, [TF_ST_I16] = {"I16", 2},
    [TF_ST_U16] = {"U16", 2},         [TF_ST_F16] = {"F16", 2},         [TF_ST_BF16] = {"BF16", 2},
    [TF_ST_I32] = {"I32", 4},         [TF_ST_U32] = {"U32", 4},         [TF_ST_F32] = {"F32", 4},
    [TF_ST_I64] = {"I64", 8},         [TF_ST_U64] = {"U64", 8},         [TF_ST_F64] = {"F64", 8},
};

const char *tf_st_dtype_name(tf_st_dtype d) {
    return (unsigned)d < TF_ST_DTYPE_COUNT ? k_dtypes[d].name : "?";
}

size_t tf_st_dtype_size(tf_st_dtype d) {
    return (unsigned)d < TF_ST_DTYPE_COUNT ? k_dtypes[d].size : 0;
}

static int dtype_from_name(const char *s, tf_st_dtype *d) {
    for (int i = 0; i < TF_ST_DTYPE_COUNT; i++)
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *d = (tf_st_dtype)i;
            return 1;
        }
    return 0;
}

/* ---- header text checks ---------------------------------------------------- */

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF) and no raw control
 * bytes other than JSON whitespace. Returns the offset of the first bad byte
 * or -1. */
static long bad_utf8_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return (long)i;
            i++;
            continue;
        }
        size_t need;
        unsigned cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else
            return (long)i;
        if (n - i <= need) return (long)i;
        for (size_t k = 1; k <= need; k++) {
            unsigned cc = s[i + k];
            if ((cc & 0xC0) != 0x80) return (long)i;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += need + 1;
    }
    return -1;
}

/* cJSON decodes "\u0000" into a NUL that silently truncates the string; refuse
 * it so that every name and value is exactly what the file says. */
static long escaped_nul_at(const unsigned char *s, size_t n) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            if (s[i] == '"') in_str = 1;
            continue;
        }
        if (s[i] == '"') {
            in_str = 0;
        } else if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0) return (long)i;
            i++; /* skip the escaped character */
        }
    }
    return -1;
}

/* ---- building the index ----------------------------------------------------- */

typedef struct {
    const char *label;
    char *err;
    size_t errlen;
} ctx;

static tf_status fail(const ctx *c, tf_status st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s: %s", c->label, msg);
    return st;
}

/* An exact non-negative integer (JSON numbers are doubles in cJSON; anything
 * above 2^53 cannot be exact and is far beyond any file we accept). */
static int get_uint(const cJSON *j, uint64_t *v) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740991.0 || floor(d) != d) return 0;
    *v = (uint64_t)d;
    return 1;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const tf_st_tensor *)a)->name, ((const tf_st_tensor *)b)->name);
}

static int cmp_by_begin(const void *a, const void *b) {
    const tf_st_tensor *x = *(const tf_st_tensor *const *)a, *y = *(const tf_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static tf_status parse_metadata(const ctx *c, tf_st_file *f, const cJSON *m) {
    if (!cJSON_IsObject(m)) return fail(c, TF_ERR_USAGE, "\"__metadata__\" is not a JSON object");
    size_t n = 0;
    for (const cJSON *e = m->child; e; e = e->next)
        n++;
    f->meta_k = calloc(n ? n : 1, sizeof *f->meta_k);
    f->meta_v = calloc(n ? n : 1, sizeof *f->meta_v);
    if (!f->meta_k || !f->meta_v) return fail(c, TF_ERR_NOMEM, "out of memory");
    for (const cJSON *e = m->child; e; e = e->next) {
        char kb[96];
        if (!cJSON_IsString(e))
            return fail(c, TF_ERR_USAGE, "\"__metadata__\" value of key '%s' is not a string",
                        tf_io_printable(kb, sizeof kb, e->string));
        f->meta_k[f->n_meta] = strdup(e->string);
        f->meta_v[f->n_meta] = strdup(e->valuestring);
        f->n_meta++;
        if (!f->meta_k[f->n_meta - 1] || !f->meta_v[f->n_meta - 1])
            return fail(c, TF_ERR_NOMEM, "out of memory");
    }
    /* sort keys (insertion sort: metadata maps are small) and reject duplicates */
    for (size_t i = 1; i < f->n_meta; i++)
        for (size_t j = i; j > 0 && strcmp(f->meta_k[j - 1], f->meta_k[j]) > 0; j--) {
            char *tk = f->meta_k[j], *tv = f->meta_v[j];
            f->meta_k[j] = f->meta_k[j - 1];
            f->meta_v[j] = f->meta_v[j - 1];
            f->meta_k[j - 1] = tk;
            f->meta_v[j - 1] = tv;
        }
    for (size_t i = 1; i < f->n_meta; i++)
        if (strcmp(f->meta_k[i - 1], f->meta_k[i]) == 0) {
            char kb[96];
            return fail(c, TF_ERR_USAGE, "\"__metadata__\" key '%s' appears twice",
                        tf_io_printable(kb, sizeof kb, f->meta_k[i]));
        }
    return TF_OK;
}

static tf_status parse_tensor(const ctx *c, tf_st_tensor *t, const cJSON *e, uint64_t data_len) {
    char nb[96];
    const char *nm = tf_io_printable(nb, sizeof nb, e->string);
    if (!cJSON_IsObject(e))
        return fail(c, TF_ERR_USAGE, "tensor '%s': entry is not a JSON object", nm);
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *k = e->child; k; k = k->next) {
        const cJSON **slot = strcmp(k->string, "dtype") == 0          ? &dtype
                             : strcmp(k->string, "shape") == 0        ? &shape
                             : strcmp(k->string, "data_offsets") == 0 ? &offs
                                                                      : NULL;
        char kb[64];
        if (!slot)
            return fail(c, TF_ERR_USAGE, "tensor '%s': unknown field '%s'", nm,
                        tf_io_printable(kb, sizeof kb, k->string));
        if (*slot)
            return fail(c, TF_ERR_USAGE, "tensor '%s': field '%s' appears twice", nm, k->string);
        *slot = k;
    }
    if (!dtype || !shape || !offs)
        return fail(c, TF_ERR_USAGE, "tensor '%s': missing field '%s'", nm,
                    !dtype   ? "dtype"
                    : !shape ? "shape"
                             : "data_offsets");
    char db[32];
    if (!cJSON_IsString(dtype) || !dtype_from_name(dtype->valuestring, &t->dtype))
        return fail(c, TF_ERR_USAGE, "tensor '%s': unknown dtype %s", nm,
                    cJSON_IsString(dtype) ? tf_io_printable(db, sizeof db, dtype->valuestring)
                                          : "(not a string)");
    if (!cJSON_IsArray(shape))
        return fail(c, TF_ERR_USAGE, "tensor '%s': shape is not an array", nm);
    t->ndim = 0;
    t->numel = 1;
    int overflow = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        uint64_t v;
        if (t->ndim == TF_ST_MAX_DIMS)
            return fail(c, TF_ERR_USAGE, "tensor '%s': more than %d dimensions", nm,
                        TF_ST_MAX_DIMS);
        if (!get_uint(d, &v))
            return fail(c, TF_ERR_USAGE, "tensor '%s': shape[%d] is not a non-negative integer", nm,
                        t->ndim);
        t->shape[t->ndim++] = (int64_t)v;
        if (v != 0 && t->numel > UINT64_MAX / v)
            overflow = 1;
        else
            t->numel *= v;
    }
    /* a zero dimension makes the product 0 whatever overflowed before it */
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) {
            t->numel = 0;
            overflow = 0;
        }
    size_t es = k_dtypes[t->dtype].size;
    if (overflow || t->numel > UINT64_MAX / es)
        return fail(c, TF_ERR_USAGE, "tensor '%s': shape element count overflows", nm);
    t->nbytes = t->numel * es;
    uint64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !get_uint(offs->child, &b) ||
        !get_uint(offs->child->next, &en))
        return fail(c, TF_ERR_USAGE,
                    "tensor '%s': data_offsets is not a pair of non-negative integers", nm);
    if (en < b)
        return fail(c, TF_ERR_USAGE, "tensor '%s': data_offsets [%llu,%llu] end before begin", nm,
                    (unsigned long long)b, (unsigned long long)en);
    if (en > data_len)
        return fail(c, TF_ERR_USAGE,
                    "tensor '%s': data_offsets [%llu,%llu] out of range of the %llu-byte data "
                    "section (truncated file?)",
                    nm, (unsigned long long)b, (unsigned long long)en,
                    (unsigned long long)data_len);
    if (en - b != t->nbytes)
        return fail(c, TF_ERR_USAGE,
                    "tensor '%s': shape mismatch: %llu elements of %s = %llu bytes but "
                    "data_offsets [%llu,%llu] hold %llu bytes",
                    nm, (unsigned long long)t->numel, k_dtypes[t->dtype].name,
                    (unsigned long long)t->nbytes, (unsigned long long)b, (unsigned long long)en,
                    (unsigned long long)(en - b));
    t->begin = b;
    return TF_OK;
}

/* Tensors must tile [0, data_len) exactly. */
static tf_status check_layout(const ctx *c, tf_st_file *f, uint64_t data_len) {
    tf_st_tensor **p = malloc((f->n ? f->n : 1) * sizeof *p);
    if (!p) return fail(c, TF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < f->n; i++)
        p[i] = &f->t[i];
    qsort(p, f->n, sizeof *p, cmp_by_begin);
    uint64_t pos = 0;
    tf_status st = TF_OK;
    for (size_t i = 0; i < f->n && st == TF_OK; i++) {
        char a[96], b[96];
        if (p[i]->begin < pos)
            st = fail(c, TF_ERR_USAGE, "tensor '%s': data_offsets [%llu,%llu] overlap tensor '%s'",
                      tf_io_printable(a, sizeof a, p[i]->name), (unsigned long long)p[i]->begin,
                      (unsigned long long)(p[i]->begin + p[i]->nbytes),
                      tf_io_printable(b, sizeof b, p[i - 1]->name));
        else if (p[i]->begin > pos)
            st = fail(c, TF_ERR_USAGE,
                      "tensor '%s': data bytes [%llu,%llu) before it belong to no tensor",
                      tf_io_printable(a, sizeof a, p[i]->name), (unsigned long long)pos,
                      (unsigned long long)p[i]->begin);
        pos = p[i]->begin + p[i]->nbytes;
    }
    if (st == TF_OK && pos != data_len)
        st = fail(c, TF_ERR_USAGE,
                  "the data section has %llu trailing bytes that belong to no tensor",
                  (unsigned long long)(data_len - pos));
    free(p);
    return st;
}

static tf_status parse_json(const ctx *c, tf_st_file *f, const cJSON *root,
                            const unsigned char *data, uint64_t data_len) {
    if (!cJSON_IsObject(root)) return fail(c, TF_ERR_USAGE, "header JSON is not an object");
    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (meta) return fail(c, TF_ERR_USAGE, "\"__metadata__\" appears twice");
            meta = e;
        } else {
            n++;
        }
    }
    if (meta) {
        tf_status st = parse_metadata(c, f, meta);
        if (st) return st;
    }
    f->t = calloc(n ? n : 1, sizeof *f->t);
    if (!f->t) return fail(c, TF_ERR_NOMEM, "out of memory");
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e == meta) continue;
        tf_st_tensor *t = &f->t[f->n];
        t->name = strdup(e->string);
        if (!t->name) return fail(c, TF_ERR_NOMEM, "out of memory");
        f->n++;
        tf_status st = parse_tensor(c, t, e, data_len);
        if (st) return st;
        t->data = data + t->begin;
    }
    qsort(f->t, f->n, sizeof *f->t, cmp_by_name);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->t[i - 1].name, f->t[i].name) == 0) {
            char nb[96];
            return fail(c, TF_ERR_USAGE, "tensor '%s': name appears twice",
                        tf_io_printable(nb, sizeof nb, f->t[i].name));
        }
    return check_layout(c, f, data_len);
}

static tf_status parse_image(const ctx *c, tf_st_file *f) {
    const unsigned char *buf = f->buf;
    size_t len = f->len;
    if (len < 8)
        return fail(c, TF_ERR_USAGE,
                    "truncated file: %zu bytes, less than the 8-byte header length field", len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | buf[i];
    if (hlen > TF_ST_MAX_HEADER)
        return fail(c, TF_ERR_USAGE, "header length %llu exceeds the %llu-byte limit",
                    (unsigned long long)hlen, (unsigned long long)TF_ST_MAX_HEADER);
    if (hlen > len - 8)
        return fail(c, TF_ERR_USAGE,
                    "header length %llu exceeds the %zu bytes after the length field (truncated "
                    "file?)",
                    (unsigned long long)hlen, len - 8);
    const unsigned char *h = buf + 8;
    long bad = bad_utf8_at(h, hlen);
    if (bad >= 0)
        return fail(c, TF_ERR_USAGE, "bad JSON header: invalid UTF-8 or control byte at byte %ld",
                    bad);
    bad = escaped_nul_at(h, hlen);
    if (bad >= 0)
        return fail(c, TF_ERR_USAGE, "bad JSON header: \\u0000 in a string at byte %ld", bad);
    /* cJSON gets a NUL-terminated copy: no read can pass the end of the header */
    char *text = malloc(hlen + 1);
    if (!text)
        return fail(c, TF_ERR_NOMEM, "out of memory (header of %llu bytes)",
                    (unsigned long long)hlen);
    memcpy(text, h, hlen);
    text[hlen] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
    tf_status st = TF_OK;
    if (!root) {
        st = fail(c, TF_ERR_USAGE, "bad JSON header: syntax error near byte %ld",
                  end ? (long)(end - text) : 0L);
    } else {
        for (const char *q = end; q < text + hlen; q++)
            if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') {
                st = fail(c, TF_ERR_USAGE,
                          "bad JSON header: unexpected data after the JSON at byte %ld",
                          (long)(q - text));
                break;
            }
        if (st == TF_OK) st = parse_json(c, f, root, h + hlen, (uint64_t)(len - 8 - hlen));
    }
    cJSON_Delete(root);
    free(text);
    return st;
}

static tf_status finish_parse(tf_st_file **out, tf_st_file *f, const char *label, char *err,
                              size_t errlen) {
    ctx c = {label ? label : "buffer", err, errlen};
    f->label = strdup(c.label);
    if (!f->label) {
        tf_st_close(f);
        return fail(&c, TF_ERR_NOMEM, "out of memory");
    }
    tf_status st = parse_image(&c, f);
    if (st) {
        tf_st_close(f);
        return st;
    }
    *out = f;
    return TF_OK;
}

tf_status tf_st_parse_buffer(tf_st_file **out, const void *buf, size_t len, const char *label,
                             char *err, size_t errlen) {
    *out = NULL;
    tf_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (errlen) snprintf(err, errlen, "%s: out of memory", label ? label : "buffer");
        return TF_ERR_NOMEM;
    }
    f->buf = buf;
    f->len = len;
    return finish_parse(out, f, label, err, errlen);
}

tf_status tf_st_open(tf_st_file **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    unsigned char *img = NULL;
    size_t len = 0;
    /* Read, not mapped: a file truncated by another program while it is
     * loaded cannot fault the reader (a mapping would raise SIGBUS). */
    if (tf_io_read_file(path, &img, &len, TF_IO_MAX_SAFETENSORS, err, errlen) != 0)
        return TF_ERR_IO;
    tf_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(img);
        if (errlen) snprintf(err, errlen, "%s: out of memory", path);
        return TF_ERR_NOMEM;
    }
    f->owned = img;
    f->buf = img;
    f->len = len;
    return finish_parse(out, f, path, err, errlen);
}

void tf_st_close(tf_st_file *f) {
    if (!f) return;
    free(f->owned);
    for (size_t i = 0; i < f->n; i++)
        free((char *)f->t[i].name);
    free(f->t);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_k[i]);
        free(f->meta_v[i]);
    }
    free(f->meta_k);
    free(f->meta_v);
    free(f->label);
    free(f);
}

const char *tf_st_label(const tf_st_file *f) { return f->label; }
size_t tf_st_count(const tf_st_file *f) { return f->n; }
const tf_st_tensor *tf_st_at(const tf_st_file *f, size_t i) { return i < f->n ? &f->t[i] : NULL; }

const tf_st_tensor *tf_st_find(const tf_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t[mid].name, name);
        if (c == 0) return &f->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t tf_st_meta_count(const tf_st_file *f) { return f->n_meta; }

void tf_st_meta_at(const tf_st_file *f, size_t i, const char **key, const char **value) {
    *key = i < f->n_meta ? f->meta_k[i] : NULL;
    *value = i < f->n_meta ? f->meta_v[i] : NULL;
}

const char *tf_st_meta_get(const tf_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_k[i], key) == 0) return f->meta_v[i];
    return NULL;
}
