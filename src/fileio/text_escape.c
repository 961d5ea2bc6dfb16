/* Text made safe for a terminal, a markdown table, a JSON string or a CSV
 * field (text_escape.h). */
#include "fileio/text_escape.h"

#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (2..4), 0 if there is none;
 * *cp its code point. */
static size_t utf8_seq(const unsigned char *s, unsigned *cp) {
    size_t len;
    unsigned c = s[0], min;
    if (c >= 0xc2 && c <= 0xdf) len = 2, c &= 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, c &= 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, c &= 0x07, min = 0x10000;
    else return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return len;
}

char *tf_text_escape(char *out, size_t n, const char *s, int flags) {
    if (!n) return out;
    size_t j = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char piece[8];
        size_t len = 1;
        unsigned cp = 0;
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(piece, sizeof piece, "\\x%02x", *p);
        } else if (*p == '|' && (flags & TF_ESC_MARKDOWN)) {
            memcpy(piece, "\\|", 3);
        } else if (*p < 0x80) {
            piece[0] = (char)*p;
            piece[1] = '\0';
        } else if ((len = utf8_seq(p, &cp)) != 0 && !(cp >= 0x80 && cp <= 0x9f)) {
            memcpy(piece, p, len);
            piece[len] = '\0';
        } else { /* a C1 control or a byte outside UTF-8: byte by byte, escaped */
            snprintf(piece, sizeof piece, "\\x%02x", *p);
            len = 1;
        }
        size_t k = strlen(piece);
        if (j + k >= n) break;
        memcpy(out + j, piece, k);
        j += k;
        p += len;
    }
    out[j] = '\0';
    return out;
}

void tf_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c); /* the file stays ASCII */
        else fputc(c, f);
    }
    fputc('"', f);
}

void tf_csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
