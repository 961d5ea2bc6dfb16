/* Small helpers of every reader and writer of files: a path or a file's
 * kind in a message, stale temporary files, a bounded whole-file read. */
#ifndef TF_FILEIO_IO_UTIL_H
#define TF_FILEIO_IO_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/* Copies s into buf (size n) for an error message: non-printable bytes become
 * '?', long strings are cut with "...". Returns buf. */
const char *tf_io_printable(char *buf, size_t n, const char *s);

/* What a file of mode m is, for a refusal: "a directory", "a FIFO", "a
 * symbolic link" (lstat's), ..., else "not a regular file". */
const char *tf_io_kind_of(mode_t m);

/* Removes "<path>.tmp.<pid>" files that a killed process left beside path:
 * those whose pid is not a running process (another live writer's temporary
 * file is left alone). Called before each atomic write of path; best effort. */
void tf_io_remove_stale_tmp(const char *path);

/* What a reader accepts at most: the JSON and CSV files of compare and
 * report (run JSON, summary.json, trace.json, kernel_stats.csv, scaling
 * JSON), and safetensors files (checkpoints, data files). */
#define TF_IO_MAX_TEXT ((size_t)1 << 30)          /* 1 GiB */
#define TF_IO_MAX_SAFETENSORS ((size_t)64 << 30)  /* 64 GiB */

/* Reads a whole regular file into memory (NUL-terminated, *len excludes the
 * NUL). Anything else (a FIFO, a device, a directory) and a file above
 * max_len bytes are refused before a byte is read; opening never blocks. The
 * size is taken from fstat and must be what read returns: a file that
 * shrinks or grows while being read is refused. The bytes are copied, never
 * mapped, so a later truncation cannot fault the reader. Returns 0, or -1
 * with a one-line reason in err ("<path>: ..."). */
int tf_io_read_file(const char *path, unsigned char **buf, size_t *len, size_t max_len, char *err,
                    size_t errlen);

#endif
