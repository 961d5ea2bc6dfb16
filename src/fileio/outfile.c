/* An output file written through stdio, atomically, and mkdir -p
 * (outfile.h). */
#define _POSIX_C_SOURCE 200809L
#include "fileio/outfile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio/outcheck.h"

FILE *tf_io_open_out(const char *path, char *err, size_t errlen) {
    char tmp[4300];
    int fd = tf_io_tmp_open(path, tmp, sizeof tmp, err, errlen);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && !f) {
        if (err && errlen) snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    return f;
}

int tf_io_close_out(FILE *f, const char *path, int keep, char *err, size_t errlen) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!keep || bad) {
        unlink(tmp);
        if (keep && err && errlen)
            snprintf(err, errlen, "error writing '%s': %s (the previous file, if any, is unchanged)",
                     path, strerror(e));
        return keep ? -1 : 0;
    }
    char why[4400];
    if (tf_io_commit(tmp, path, why, sizeof why) != 0) {
        if (err && errlen) snprintf(err, errlen, "error writing %s", why);
        return -1;
    }
    return 0;
}

int tf_io_mkdir_p(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, dir, n + 1);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(buf, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
