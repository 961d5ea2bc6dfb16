/* Small helpers shared by the src/io files. */
#define _POSIX_C_SOURCE 200809L
#include "io/io_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

void tf_io_remove_stale_tmp(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir || !blen) {
        free(dir);
        return;
    }
    DIR *d = opendir(dir);
    if (!d) {
        free(dir);
        return;
    }
    long me = (long)getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, blen) != 0 || strncmp(nm + blen, ".tmp.", 5) != 0) continue;
        const char *digits = nm + blen + 5;
        char *end = NULL;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (digits[0] < '0' || digits[0] > '9' || *end || errno || pid <= 0 || pid == me)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours) */
        size_t need = strlen(dir) + strlen(nm) + 2;
        char *full = malloc(need);
        if (!full) break;
        snprintf(full, need, "%s/%s", dir, nm);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode)) unlink(full);
        free(full);
    }
    closedir(d);
    free(dir);
}

int tf_io_read_file(const char *path, unsigned char **buf, size_t *len, size_t max_len, char *err,
                    size_t errlen) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errlen) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (errlen) snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > max_len) {
        if (errlen)
            snprintf(err, errlen, "%s: %lld bytes, more than the %zu this reader accepts", path,
                     (long long)st.st_size, max_len);
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(n + 1);
    if (!b) {
        if (errlen) snprintf(err, errlen, "%s: out of memory for %zu bytes", path, n);
        close(fd);
        return -1;
    }
    /* one byte more than expected: a file that grew is caught too */
    while (got <= n) {
        ssize_t r = read(fd, b + got, n + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            if (errlen) snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
            free(b);
            close(fd);
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        if (errlen)
            snprintf(err, errlen, "%s: changed while being read (%zu bytes read, %zu expected)",
                     path, got, n);
        free(b);
        return -1;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

/* A whole file (any kind: a pipe too) into memory, NUL-terminated. */
char *tf_io_slurp(const char *path, size_t *len, int *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *err = errno;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *q = realloc(buf, cap * 2);
            if (!q) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = q;
            cap *= 2;
        }
    }
    *err = ferror(f) ? EIO : buf ? 0 : ENOMEM;
    fclose(f);
    if (*err) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
