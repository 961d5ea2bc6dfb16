/* Small file helpers shared by every reader and writer (io_util.h). */
#define _POSIX_C_SOURCE 200809L
#include "fileio/io_util.h"

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

const char *tf_io_kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* 1073741824 -> "1 GiB", else the bytes */
static void size_str(char *buf, size_t n, size_t v) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    size_t x = v;
    while (u < 4 && x >= 1024 && x % 1024 == 0) {
        x /= 1024;
        u++;
    }
    snprintf(buf, n, "%zu %s", x, unit[u]);
}

int tf_io_read_file(const char *path, unsigned char **buf, size_t *len, size_t max_len, char *err,
                    size_t errlen) {
    *buf = NULL;
    *len = 0;
    char qp[128], lim[32];
    tf_io_printable(qp, sizeof qp, path);
    size_str(lim, sizeof lim, max_len);
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
     * below); a regular file ignores the flag. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errlen) snprintf(err, errlen, "%s: cannot open: %s", qp, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        if (errlen) snprintf(err, errlen, "%s: cannot stat: %s", qp, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        if (errlen)
            snprintf(err, errlen, "%s: not a regular file (it is %s); expected a regular file of "
                                  "at most %s",
                     qp, tf_io_kind_of(st.st_mode), lim);
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > max_len) {
        if (errlen)
            snprintf(err, errlen, "%s: %lld bytes, more than the %s this reader accepts", qp,
                     (long long)st.st_size, lim);
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(n + 1);
    if (!b) {
        if (errlen) snprintf(err, errlen, "%s: out of memory for its %zu bytes", qp, n);
        close(fd);
        return -1;
    }
    /* one byte more than expected: a file that grew is caught too */
    while (got <= n) {
        ssize_t r = read(fd, b + got, n + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            if (errlen) snprintf(err, errlen, "%s: read failed: %s", qp, strerror(errno));
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
                     qp, got, n);
        free(b);
        return -1;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}
