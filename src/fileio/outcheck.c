/* The one check of the files a command writes (see outcheck.h). */
#define _DEFAULT_SOURCE /* realpath */
#define _POSIX_C_SOURCE 200809L
#include "fileio/outcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio/io_util.h"

static int refuse(const tf_io_path *e, const char *why, char *err, size_t errlen) {
    char q[64];
    tf_io_printable(q, sizeof q, e->path);
    if (errlen) snprintf(err, errlen, "%s: '%s' is not accepted: %s", e->flag, q, why);
    return -1;
}

/* Splits path into its directory ("." when none) and last component. */
static int split(const char *path, char *dir, size_t dn, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    size_t len = slash ? (size_t)(slash - path) : 1;
    if (slash == path) len = 1; /* "/name" */
    if (len >= dn) return -1;
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    return 0;
}

int tf_io_target_ok(const char *path, char *why, size_t n) {
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    if (n)
        snprintf(why, n,
                 "it exists and is %s; outputs are written to a temporary file renamed over "
                 "the name, which would replace it: give a regular file's name",
                 tf_io_kind_of(st.st_mode));
    return -1;
}

/* An output: creatable, temporary name included; a regular file if it exists. */
static int check_output(tf_io_path *e, char *err, size_t errlen) {
    char dir[PATH_MAX];
    const char *base;
    char msg[PATH_MAX + 160];
    if (!*e->path) return refuse(e, "expected a file name", err, errlen);
    char suffix[32];
    int slen = snprintf(suffix, sizeof suffix, ".tmp.%ld", (long)getpid());
    if (strlen(e->path) + (size_t)slen >= PATH_MAX) {
        snprintf(msg, sizeof msg, "the path is longer than %d bytes with its temporary suffix",
                 PATH_MAX - 1);
        return refuse(e, msg, err, errlen);
    }
    if (split(e->path, dir, sizeof dir, &base) != 0 || !*base)
        return refuse(e, "expected a file name, not a directory", err, errlen);
    if (strlen(base) + (size_t)slen > NAME_MAX) {
        snprintf(msg, sizeof msg,
                 "its last component is %zu bytes; with the temporary suffix '%s' it must stay "
                 "within %d",
                 strlen(base), suffix, NAME_MAX);
        return refuse(e, msg, err, errlen);
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return refuse(e, "its directory does not exist", err, errlen);
    if (access(dir, W_OK | X_OK) != 0) return refuse(e, "its directory is not writable", err, errlen);
    if (tf_io_target_ok(e->path, msg, sizeof msg) != 0) return refuse(e, msg, err, errlen);
    if (lstat(e->path, &st) == 0) {
        e->exists = 1;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    /* Create and remove the temporary file: any other reason it cannot be
     * written (read-only file system, quota of inodes, ...) shows now. */
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s%s", e->path, suffix);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
        snprintf(msg, sizeof msg, "cannot create its temporary file: %s", strerror(errno));
        return refuse(e, msg, err, errlen);
    }
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    char rdir[PATH_MAX];
    if (realpath(dir, rdir))
        snprintf(e->resolved, sizeof e->resolved, "%s/%s", strcmp(rdir, "/") ? rdir : "", base);
    return 0;
}

/* An output whose directory the command creates, or an input: only its
 * identity (an input's reader reports what is wrong with it). */
static void identify(tf_io_path *e) {
    struct stat st;
    char r[PATH_MAX];
    if ((e->output ? lstat(e->path, &st) : stat(e->path, &st)) == 0) {
        e->exists = 1;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    if (realpath(e->path, r)) {
        snprintf(e->resolved, sizeof e->resolved, "%s", r);
        return;
    }
    /* an output not yet there: its directory resolved, then its name */
    char dir[PATH_MAX];
    const char *base;
    if (e->output && split(e->path, dir, sizeof dir, &base) == 0 && *base && realpath(dir, r))
        snprintf(e->resolved, sizeof e->resolved, "%s/%s", strcmp(r, "/") ? r : "", base);
}

static int same_file(const tf_io_path *a, const tf_io_path *b) {
    if (a->exists && b->exists && a->dev == b->dev && a->ino == b->ino) return 1;
    return a->resolved[0] && strcmp(a->resolved, b->resolved) == 0;
}

int tf_io_check_paths(tf_io_path *v, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        v[i].resolved[0] = '\0';
        v[i].exists = 0;
        if (v[i].output && !v[i].deferred) {
            if (check_output(&v[i], err, errlen) != 0) return -1;
        } else {
            identify(&v[i]);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            if (!v[i].output && !v[j].output) continue; /* two inputs may well be one file */
            if (!same_file(&v[i], &v[j])) continue;
            const tf_io_path *out = v[i].output ? &v[i] : &v[j];
            const tf_io_path *other = out == &v[i] ? &v[j] : &v[i];
            char why[256];
            snprintf(why, sizeof why, "it is also %s%s", other->what,
                     other->output ? ": two outputs of one command must be different files"
                                   : ": the command would overwrite its own input");
            return refuse(out, why, err, errlen);
        }
    return 0;
}

int tf_io_tmp_open(const char *path, char *tmp, size_t tmpn, char *err, size_t errlen) {
    int k = snprintf(tmp, tmpn, "%s.tmp.%ld", path, (long)getpid());
    if (k < 0 || (size_t)k >= tmpn) {
        if (errlen) snprintf(err, errlen, "%s: the name is too long", path);
        return -1;
    }
    tf_io_remove_stale_tmp(path); /* left by a killed process */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 && errno == EEXIST && lstat(tmp, &st) == 0 && S_ISREG(st.st_mode)) {
        /* this process's own, left by a failed write: replaced */
        unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0 && errlen)
        snprintf(err, errlen, "%s: cannot create its temporary file %s: %s", path,
                 strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp, strerror(errno));
    return fd;
}

static int fsync_dir_of(const char *path) {
    char dir[PATH_MAX];
    const char *base;
    if (split(path, dir, sizeof dir, &base) != 0) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    /* some file systems cannot fsync a directory: nothing more to do there */
    if (r != 0 && (errno == EINVAL || errno == EROFS)) r = 0;
    close(fd);
    return r;
}

int tf_io_commit(const char *tmp, const char *path, char *err, size_t errlen) {
    char why[256];
    if (tf_io_target_ok(path, why, sizeof why) != 0) {
        unlink(tmp);
        if (errlen) snprintf(err, errlen, "%s: not replaced: %s", path, why);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        if (errlen)
            snprintf(err, errlen, "%s: cannot rename its temporary file over it: %s; the previous "
                                  "file, if any, is unchanged",
                     path, strerror(e));
        return -1;
    }
    if (fsync_dir_of(path) != 0) {
        if (errlen)
            snprintf(err, errlen, "%s: written, but fsync of its directory failed: %s", path,
                     strerror(errno));
        return -1;
    }
    return 0;
}
