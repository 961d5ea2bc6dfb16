/* safetensors writer: temp file, fsync, rename, fsync the directory. A reader
 * (or a crash) sees either the old file or the complete new one. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio/io_util.h"
#include "fileio/outcheck.h"
#include "io/safetensors.h"

static int g_inject_stage; /* test hook, see safetensors.h */

void tf_st_test_inject_write_failure(int stage) { g_inject_stage = stage; }

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *c = p;
    while (n > 0) {
        /* chunks below 1 GiB: Linux caps single writes just under 2 GiB */
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, c, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Raw decimal: cJSON would print integers above 2^31 through "%g". */
static int add_u64(cJSON *arr, unsigned long long v) {
    char s[32];
    snprintf(s, sizeof s, "%llu", v);
    cJSON *r = cJSON_CreateRaw(s);
    return r && cJSON_AddItemToArray(arr, r);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Builds the padded header. Returns NULL with err filled on invalid input. */
static char *build_header(const tf_st_out *t, size_t n, const char *const *meta, size_t n_meta,
                          uint64_t *nbytes, size_t *hlen, char *err, size_t errlen) {
    char nb[96];
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = t[i].name ? t[i].name : "";
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '\0' || strcmp(names[i], "__metadata__") == 0 ||
            (i > 0 && strcmp(names[i - 1], names[i]) == 0)) {
            snprintf(err, errlen, "tensor name '%s' is empty, reserved or repeated",
                     tf_io_printable(nb, sizeof nb, names[i]));
            free(names);
            return NULL;
        }
    }
    free(names);

    cJSON *root = cJSON_CreateObject();
    if (!root) goto oom;
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        if (!m) goto oom;
        for (size_t i = 0; i < n_meta; i++) {
            if (!meta[2 * i] || !meta[2 * i + 1]) {
                snprintf(err, errlen, "metadata entry %zu has a NULL key or value", i);
                cJSON_Delete(root);
                return NULL;
            }
            if (!cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1])) goto oom;
        }
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = tf_io_printable(nb, sizeof nb, t[i].name);
        if ((unsigned)t[i].dtype >= TF_ST_DTYPE_COUNT || t[i].ndim < 0 ||
            t[i].ndim > TF_ST_MAX_DIMS) {
            snprintf(err, errlen, "tensor '%s': bad dtype or rank", nm);
            cJSON_Delete(root);
            return NULL;
        }
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            uint64_t v = (uint64_t)t[i].shape[d];
            if (t[i].shape[d] < 0 || (v != 0 && numel > UINT64_MAX / 16 / v)) {
                snprintf(err, errlen, "tensor '%s': shape[%d] = %lld is negative or too large", nm,
                         d, (long long)t[i].shape[d]);
                cJSON_Delete(root);
                return NULL;
            }
            numel *= v;
        }
        uint64_t bytes = numel * tf_st_dtype_size(t[i].dtype);
        if (bytes > 0 && !t[i].data) {
            snprintf(err, errlen, "tensor '%s': NULL data", nm);
            cJSON_Delete(root);
            return NULL;
        }
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        if (!e || !cJSON_AddStringToObject(e, "dtype", tf_st_dtype_name(t[i].dtype))) goto oom;
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        cJSON *of = cJSON_AddArrayToObject(e, "data_offsets");
        if (!sh || !of) goto oom;
        for (int d = 0; d < t[i].ndim; d++)
            if (!add_u64(sh, (uint64_t)t[i].shape[d])) goto oom;
        if (!add_u64(of, off) || !add_u64(of, off + bytes)) goto oom;
        off += bytes;
    }
    *nbytes = off;
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t jl = strlen(json);
    size_t padded = (jl + 7) / 8 * 8; /* 8 + padded is a multiple of 8: aligned data */
    char *h = malloc(padded + 1);
    if (!h) {
        free(json);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(h, json, jl);
    memset(h + jl, ' ', padded - jl);
    h[padded] = '\0';
    free(json);
    *hlen = padded;
    return h;
oom:
    cJSON_Delete(root);
    snprintf(err, errlen, "out of memory");
    return NULL;
}

tf_status tf_st_write(const char *path, const tf_st_out *tensors, size_t n, const char *const *meta,
                      size_t n_meta, char *err, size_t errlen) {
    char e[256] = "";
    uint64_t nbytes = 0;
    size_t hlen = 0;
    int stage = g_inject_stage;
    g_inject_stage = 0;
    char *header = build_header(tensors, n, meta, n_meta, &nbytes, &hlen, e, sizeof e);
    if (!header) {
        if (errlen) snprintf(err, errlen, "%s: cannot write: %s", path, e);
        return strstr(e, "out of memory") ? TF_ERR_NOMEM : TF_ERR_INTERNAL;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(header);
        if (errlen) snprintf(err, errlen, "%s: cannot write: out of memory", path);
        return TF_ERR_NOMEM;
    }
    int fd = tf_io_tmp_open(path, tmp, plen + 32, err, errlen);
    if (fd < 0) {
        free(tmp);
        free(header);
        return TF_ERR_IO;
    }
    const char *what = "write";
    int ok = 1;
    {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++)
            len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
        ok = write_all(fd, len8, 8) == 0 && write_all(fd, header, hlen) == 0;
        if (ok && stage == 1) {
            errno = EIO;
            ok = 0;
        }
        for (size_t i = 0; ok && i < n; i++) {
            uint64_t numel = 1;
            for (int d = 0; d < tensors[i].ndim; d++)
                numel *= (uint64_t)tensors[i].shape[d];
            size_t bytes = (size_t)(numel * tf_st_dtype_size(tensors[i].dtype));
            if (bytes > 0) ok = write_all(fd, tensors[i].data, bytes) == 0;
        }
        if (ok) {
            what = "fsync";
            ok = fsync(fd) == 0;
        }
        int saved = errno;
        if (close(fd) != 0 && ok) {
            what = "close";
            ok = 0;
        } else {
            errno = saved;
        }
        if (ok && stage == 2) {
            what = "rename";
            errno = EIO;
            ok = 0;
        }
    }
    if (!ok) {
        int saved = errno;
        unlink(tmp);
        if (errlen)
            snprintf(err, errlen,
                     "%s: cannot write (%s of its temporary file %s): %s; the previous file, if "
                     "any, is unchanged",
                     path, what, strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp,
                     strerror(saved));
        free(tmp);
        free(header);
        return TF_ERR_IO;
    }
    int rc = tf_io_commit(tmp, path, err, errlen);
    free(tmp);
    free(header);
    (void)nbytes;
    return rc == 0 ? TF_OK : TF_ERR_IO;
}
