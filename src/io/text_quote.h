/* A user's string (a path, an option's value) made safe to quote in a
 * one-line message (text_quote.c). */
#ifndef TF_IO_TEXT_QUOTE_H
#define TF_IO_TEXT_QUOTE_H

#include <stddef.h>

/* Copies s into out (n bytes) with every byte outside printable ASCII as
 * '?', cut after 48 characters with "..." (a 1 MB argument stays one short
 * line). */
void tf_text_quote(char *out, size_t n, const char *s);

#endif
