/* The one check of the files a command writes, and the two steps every
 * atomic writer shares (its temporary file, its rename).
 *
 * Before any work a command lists its inputs and outputs and calls
 * tf_io_check_paths: each output can be created (its temporary name
 * "<name>.tmp.<pid>" included), is absent or a regular file (a FIFO, a
 * device, a symbolic link, dangling or not, or a directory would be replaced
 * by the final rename), and is neither an input nor another output of the
 * command. Identity is the resolved path (the directory through realpath,
 * then the last component) and, for files that exist, the device and inode.
 *
 * At the end a writer creates "<name>.tmp.<pid>" with tf_io_tmp_open
 * (exclusively: never through a link planted under that name), writes and
 * fsyncs it, and tf_io_commit checks the target once more (it may have
 * become a FIFO or a link while the command ran), renames and fsyncs the
 * directory. */
#ifndef TF_FILEIO_OUTCHECK_H
#define TF_FILEIO_OUTCHECK_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

typedef struct {
    const char *flag; /* "--save", for messages */
    const char *path; /* as given */
    const char *what; /* "the --data file", "--json's file" */
    int output;       /* 1: written, 0: read */
    int deferred;     /* an output whose directory the command creates: compared only */
    /* filled by tf_io_check_paths */
    char resolved[PATH_MAX + NAME_MAX + 2]; /* "" when it cannot be resolved */
    int exists;
    dev_t dev;
    ino_t ino;
} tf_io_path;

/* The whole check of n paths. Returns 0, or -1 with
 * "FLAG: 'PATH' is not accepted: WHY" in err. */
int tf_io_check_paths(tf_io_path *v, int n, char *err, size_t errlen);

/* 0 when a rename may put a file at path (it is absent or a regular file;
 * a symbolic link is not followed), else -1 with the reason in why. */
int tf_io_target_ok(const char *path, char *why, size_t n);

/* Creates "<path>.tmp.<pid>" (its name in tmp) for writing, exclusively;
 * stale ones of dead processes are removed first. Returns the descriptor, or
 * -1 with "<path>: ..." in err. */
int tf_io_tmp_open(const char *path, char *tmp, size_t tmpn, char *err, size_t errlen);

/* Puts the complete, fsynced tmp at path: tf_io_target_ok, rename, fsync of
 * the directory. On failure tmp is removed, path left as it was, and err
 * says why ("<path>: ..."). Returns 0 or -1. */
int tf_io_commit(const char *tmp, const char *path, char *err, size_t errlen);

#endif
