/* One Perfetto trace for a data parallel profile: rank r (> 0) wrote its
 * trace to DIR/rank<r>/trace.json, rank 0 to DIR/trace.json; rank 0 merges
 * them into DIR/trace.json, a process per rank and track kind: the profiler's
 * pid p becomes 100 r + p and its process "tinyfold host" / "GPU" is named
 * "rank r host" / "rank r GPU". The timestamps are each rank's own, from its
 * profiler's creation, which follows the start-up collective on every rank:
 * the ranks line up to within that collective's skew. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "fileio/io_util.h"
#include "fileio/outcheck.h"

/* the whole file (a regular file the profiler wrote), or NULL */
static char *slurp(const char *path, size_t *len) {
    unsigned char *b = NULL;
    char e[8];
    return tf_io_read_file(path, &b, len, TF_IO_MAX_TEXT, e, 0) == 0 ? (char *)b : NULL;
}

/* The events of a trace (between "traceEvents":[ and the closing ]}),
 * written to f with the pids and process names of rank r. */
static int copy_events(FILE *f, const char *trace, int r, int lead_comma) {
    const char *beg = strstr(trace, "\"traceEvents\":[");
    const char *end = strrchr(trace, ']');
    if (!beg || !end || end < beg) return 1;
    beg += strlen("\"traceEvents\":[");
    if (lead_comma) fputc(',', f);
    for (const char *p = beg; p < end;) {
        int pid;
        char name[16];
        if (sscanf(p, "\"pid\":%d", &pid) == 1 && strncmp(p, "\"pid\":", 6) == 0) {
            fprintf(f, "\"pid\":%d", 100 * r + pid);
            p += 6;
            while (*p >= '0' && *p <= '9') p++;
        } else if (strncmp(p, "{\"name\":\"tinyfold host\"}", 24) == 0 ||
                   strncmp(p, "{\"name\":\"GPU\"}", 14) == 0) {
            int host = p[9] == 't';
            snprintf(name, sizeof name, "%s", host ? "host" : "GPU");
            fprintf(f, "{\"name\":\"rank %d %s\"}", r, name);
            p += host ? 24 : 14;
        } else {
            fputc(*p++, f);
        }
    }
    return 0;
}

int tf_dist_merge_traces(const char *dir, int nranks, char *err, size_t n) {
    size_t plen = strlen(dir) + 64;
    char *path = malloc(plen), *tmp = malloc(plen + 32);
    char *own = NULL;
    FILE *f = NULL;
    int rc = 1;
    size_t len;
    if (!path || !tmp) goto done;
    snprintf(path, plen, "%s/trace.json", dir);
    if (!(own = slurp(path, &len))) {
        snprintf(err, n, "merging the ranks' traces: cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    const char *ev = strstr(own, "\"traceEvents\":[");
    int fd = ev ? tf_io_tmp_open(path, tmp, plen + 32, err, 0) : -1;
    if (fd >= 0 && !(f = fdopen(fd, "wb"))) {
        close(fd);
        unlink(tmp);
    }
    if (!f) {
        snprintf(err, n, "merging the ranks' traces: cannot write '%s.tmp.%ld'", path,
                 (long)getpid());
        goto done;
    }
    fwrite(own, 1, (size_t)(ev - own), f);
    fputs("\"traceEvents\":[", f);
    int bad = copy_events(f, own, 0, 0);
    for (int r = 1; r < nranks && !bad; r++) {
        char *rp = malloc(plen);
        char *t = NULL;
        if (rp) snprintf(rp, plen, "%s/rank%d/trace.json", dir, r);
        if (!rp || !(t = slurp(rp, &len)) || copy_events(f, t, r, 1)) {
            snprintf(err, n, "merging the ranks' traces: cannot read rank %d's trace under '%s'",
                     r, dir);
            bad = 1;
        }
        free(t);
        free(rp);
    }
    fputs("\n]}\n", f);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    f = NULL;
    if (bad) {
        remove(tmp);
        goto done;
    }
    char why[4400];
    if (tf_io_commit(tmp, path, why, sizeof why) != 0) {
        snprintf(err, n, "merging the ranks' traces: %s", why);
        goto done;
    }
    rc = 0;
done:
    if (f) fclose(f);
    free(own);
    free(path);
    free(tmp);
    return rc;
}
