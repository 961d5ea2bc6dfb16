/* A command's JSON document, written atomically to its file, or with
 * `--json -` on standard output.
 *
 * `--json -`: the run JSON on standard output, everything else a command
 * prints (header, step lines, summary, tables) on standard error, so that
 * `tinyfold train --json - | jq .summary` reads one JSON document. The
 * process's stdout is kept on a descriptor of its own and file descriptor 1
 * becomes a copy of stderr, so no printf anywhere reaches the JSON. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "fileio/outcheck.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int json_fd = -1;

int tf_cli_json_is_stdout(const char *path) { return path && strcmp(path, "-") == 0; }

int tf_cli_json_stdout_begin(void)
{
    fflush(stdout);
    json_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (json_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        tf_cli_error("--json: '-' is not accepted: standard output cannot be set aside for the "
                     "JSON (%s)",
                     strerror(errno));
        return TF_EXIT_FAIL;
    }
    return TF_EXIT_OK;
}

int tf_cli_json_stdout_write(const char *text, size_t len, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(json_fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "standard output: write failed: %s",
                     w < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        off += (size_t)w;
    }
    if (write(json_fd, "\n", 1) != 1) {
        snprintf(err, errlen, "standard output: write failed: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int tf_cli_write_json(const char *path, const cJSON *j, char *err, size_t errlen)
{
    char *text = cJSON_Print(j);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory while formatting JSON", path);
        return -1;
    }
    size_t len = strlen(text);
    if (tf_cli_json_is_stdout(path)) {
        int r = tf_cli_json_stdout_write(text, len, err, errlen);
        cJSON_free(text);
        return r;
    }
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        cJSON_free(text);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int fd = tf_io_tmp_open(path, tmp, tlen, err, errlen);
    int rc = -1;
    if (fd >= 0) {
        size_t off = 0;
        while (off < len) {
            ssize_t w = write(fd, text + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        int ok = off == len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
        int saved = errno;
        if (close(fd) != 0 && ok) {
            ok = 0;
            saved = errno;
        }
        if (!ok) {
            snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(saved));
            unlink(tmp);
        } else {
            rc = tf_io_commit(tmp, path, err, errlen);
        }
    }
    free(tmp);
    cJSON_free(text);
    return rc;
}
