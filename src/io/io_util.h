/* Small helpers shared by the src/io files. */
#ifndef TF_IO_UTIL_H
#define TF_IO_UTIL_H

#include <stddef.h>

/* Copies s into buf (size n) for an error message: non-printable bytes become
 * '?', long strings are cut with "...". Returns buf. */
const char *tf_io_printable(char *buf, size_t n, const char *s);

#endif
