/* Text from a file made safe for a terminal or a markdown table. */
#ifndef TF_FILEIO_TEXT_ESCAPE_H
#define TF_FILEIO_TEXT_ESCAPE_H

#include <stddef.h>

enum { TF_ESC_MARKDOWN = 1 /* also '|' as "\|": it would end a table cell */ };

/* Copies s into out (n bytes) with every control character (C0, DEL, the
 * C1 range U+0080..U+009F) and every byte that is not part of valid UTF-8
 * written as "\xHH", so that no escape sequence, carriage return or line
 * break of the input reaches the output; with TF_ESC_MARKDOWN '|' becomes
 * "\|". Cut at a character boundary when out is too short. Returns out. */
char *tf_text_escape(char *out, size_t n, const char *s, int flags);

#endif
