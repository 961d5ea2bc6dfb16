/* Text made safe for where it is written: text from a file for a terminal
 * or a markdown table, any name as a JSON string or a CSV field. */
#ifndef TF_FILEIO_TEXT_ESCAPE_H
#define TF_FILEIO_TEXT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

enum { TF_ESC_MARKDOWN = 1 /* also '|' as "\|": it would end a table cell */ };

/* Copies s into out (n bytes) with every control character (C0, DEL, the
 * C1 range U+0080..U+009F) and every byte that is not part of valid UTF-8
 * written as "\xHH", so that no escape sequence, carriage return or line
 * break of the input reaches the output; with TF_ESC_MARKDOWN '|' becomes
 * "\|". Cut at a character boundary when out is too short. Returns out. */
char *tf_text_escape(char *out, size_t n, const char *s, int flags);

/* s as a quoted JSON string: '"' and '\' escaped, every byte below 0x20
 * or above 0x7e as "\u00HH" (the file stays ASCII). */
void tf_json_str(FILE *f, const char *s);
/* s as a quoted CSV field (RFC 4180: '"' doubled). */
void tf_csv_str(FILE *f, const char *s);

#endif
