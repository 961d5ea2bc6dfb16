/* A user's string made safe to quote in a one-line message. */
#include "io/text_quote.h"

void tf_text_quote(char *out, size_t n, const char *s) {
    const size_t keep = 48;
    size_t j = 0;
    if (!n) return;
    for (size_t i = 0; s && s[i] && j + 4 < n; i++) {
        if (i == keep) {
            out[j++] = '.';
            out[j++] = '.';
            out[j++] = '.';
            break;
        }
        unsigned char ch = (unsigned char)s[i];
        out[j++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    out[j] = '\0';
}
