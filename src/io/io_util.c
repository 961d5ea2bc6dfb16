/* Small helpers shared by the src/io files. */
#include "io/io_util.h"

#include <string.h>

const char *tf_io_printable(char *buf, size_t n, const char *s) {
    if (n == 0) return buf;
    if (!s) s = "(null)";
    size_t len = strlen(s), i = 0;
    for (; i < len && i + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
    buf[i] = '\0';
    if (i < len && n >= 4) memcpy(buf + n - 4, "...", 4);
    return buf;
}
