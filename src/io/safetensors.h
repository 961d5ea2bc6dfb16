/* safetensors: a strict reader and an atomic writer.
 *
 * File layout (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header length H, H bytes of UTF-8 JSON (possibly padded with
 * spaces), then the data section. The JSON maps tensor names to
 * {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * data section) plus an optional "__metadata__" string->string map.
 *
 * The reader checks everything before handing out a single pointer: sizes,
 * header bound (<= 100 MB and within the file), UTF-8, JSON syntax, known
 * dtypes, integral non-negative shapes, shape*dtype == byte range without
 * overflow, ranges inside the data section, unique names, and that the tensors
 * tile the data section exactly (no overlap, no gap, no trailing bytes: the
 * same rule as the reference Rust implementation). Errors are one line:
 * "<file>: tensor '<name>': <problem>".
 *
 * The writer writes "<path>.tmp.<pid>", fsyncs it, renames it over <path> and
 * fsyncs the directory; on any failure the temp file is removed and an
 * existing <path> is left untouched.
 */
#ifndef TF_IO_SAFETENSORS_H
#define TF_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TF_ST_BOOL,
    TF_ST_U8,
    TF_ST_I8,
    TF_ST_F8_E5M2,
    TF_ST_F8_E4M3,
    TF_ST_I16,
    TF_ST_U16,
    TF_ST_F16,
    TF_ST_BF16,
    TF_ST_I32,
    TF_ST_U32,
    TF_ST_F32,
    TF_ST_I64,
    TF_ST_U64,
    TF_ST_F64,
    TF_ST_DTYPE_COUNT
} tf_st_dtype;

#define TF_ST_MAX_DIMS 8
#define TF_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* 100 MB, as the reference */

const char *tf_st_dtype_name(tf_st_dtype d);
size_t tf_st_dtype_size(tf_st_dtype d);

typedef struct {
    const char *name;
    tf_st_dtype dtype;
    int ndim;
    int64_t shape[TF_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t nbytes;
    uint64_t begin;   /* byte offset into the data section */
    const void *data; /* may be unaligned: read elements with memcpy */
} tf_st_tensor;

typedef struct tf_st_file tf_st_file;

/* Parse a complete file image. The buffer is borrowed: it must outlive *out.
 * label names the source in error messages (a path, or "buffer"). */
tf_status tf_st_parse_buffer(tf_st_file **out, const void *buf, size_t len, const char *label,
                             char *err, size_t errlen);
/* Read and parse a file (a regular file of at most TF_IO_MAX_SAFETENSORS
 * bytes: anything else is refused before reading). The bytes are copied,
 * not mapped: truncating the file while it is loaded cannot fault. */
tf_status tf_st_open(tf_st_file **out, const char *path, char *err, size_t errlen);
void tf_st_close(tf_st_file *f);

const char *tf_st_label(const tf_st_file *f);
size_t tf_st_count(const tf_st_file *f);
/* Tensors sorted by name, i < tf_st_count. */
const tf_st_tensor *tf_st_at(const tf_st_file *f, size_t i);
/* NULL when absent. */
const tf_st_tensor *tf_st_find(const tf_st_file *f, const char *name);
/* "__metadata__" entries, sorted by key. */
size_t tf_st_meta_count(const tf_st_file *f);
void tf_st_meta_at(const tf_st_file *f, size_t i, const char **key, const char **value);
const char *tf_st_meta_get(const tf_st_file *f, const char *key); /* NULL when absent */

/* ---- writer ---- */
typedef struct {
    const char *name;
    tf_st_dtype dtype;
    int ndim;
    int64_t shape[TF_ST_MAX_DIMS];
    const void *data; /* numel * dtype size bytes (NULL allowed when that is 0) */
} tf_st_out;

/* Writes tensors in the given order (data offsets follow that order) and
 * metadata as n_meta (key, value) pairs: meta[2i] = key, meta[2i+1] = value.
 * Returns TF_ERR_IO (file untouched) on a system failure, TF_ERR_INTERNAL on
 * invalid arguments (duplicate names, negative dims, ...). */
tf_status tf_st_write(const char *path, const tf_st_out *tensors, size_t n, const char *const *meta,
                      size_t n_meta, char *err, size_t errlen);

/* Test hook: make the next tf_st_write fail at a stage (1 = after the header
 * has been written to the temp file, 2 = after fsync, just before the rename).
 * 0 disarms. One-shot. Not thread-safe; tests only. */
void tf_st_test_inject_write_failure(int stage);

#ifdef __cplusplus
}
#endif
#endif
