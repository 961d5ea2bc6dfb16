/* Small helpers shared by the src/io files (and the CLI's atomic writes). */
#ifndef TF_IO_UTIL_H
#define TF_IO_UTIL_H

#include <stddef.h>

/* Copies s into buf (size n) for an error message: non-printable bytes become
 * '?', long strings are cut with "...". Returns buf. */
const char *tf_io_printable(char *buf, size_t n, const char *s);

/* Removes "<path>.tmp.<pid>" files that a killed process left beside path:
 * those whose pid is not a running process (another live writer's temporary
 * file is left alone). Called before each atomic write of path; best effort. */
void tf_io_remove_stale_tmp(const char *path);

/* Reads a whole regular file into memory (NUL-terminated, *len excludes the
 * NUL). The size is taken from fstat and must be what read returns: a file
 * that shrinks or grows while being read is refused. Returns 0, or -1 with a
 * one-line reason in err. */
int tf_io_read_file(const char *path, unsigned char **buf, size_t *len, size_t max_len, char *err,
                    size_t errlen);

/* Reads a whole file of any kind (a pipe too) into memory, NUL-terminated,
 * *len excluding the NUL; NULL with errno's value in *err on failure. The
 * caller frees it. */
char *tf_io_slurp(const char *path, size_t *len, int *err);

#endif
