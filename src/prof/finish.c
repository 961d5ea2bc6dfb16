/* The end of a profile: the open step closed, the GPU's last records
 * drained and the four files written. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "fileio/outfile.h"
#include "prof/prof_internal.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int tf_prof_finish(tf_prof *p, const struct cJSON *run, char *err, size_t errlen) {
    if (!p) {
        set_err(err, errlen, "profiler: finish called without a profiler");
        return -1;
    }
    if (p->finished) {
        set_err(err, errlen, "profiler: finish called twice");
        return -1;
    }
    p->finished = 1;
    if (p->in_step) tf_prof_step_end(p, p->steps[p->cur_step].step);
    if (p->gpu) {
        prof_gpu_drain(p, 1);
        prof_gpu_stop(p);
    }
    int rc = 0;
    if (p->out_dir) {
        static const char *const files[4] = {"kernel_stats.csv", "kernel_trace.csv",
                                             "summary.json", "trace.json"};
        if (tf_io_mkdir_p(p->out_dir) != 0) {
            set_err(err, errlen, "profile output directory '%s': %s", p->out_dir, strerror(errno));
            rc = -1;
        }
        for (int i = 0; i < 4 && rc == 0; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", p->out_dir, files[i]);
            switch (i) {
            case 0: rc = prof_write_stats_csv(p, path, err, errlen); break;
            case 1: rc = prof_write_trace_csv(p, path, err, errlen); break;
            case 2: rc = prof_write_summary(p, run, path, err, errlen); break;
            default: rc = prof_write_trace_json(p, path, err, errlen); break;
            }
        }
    }
    p->written = p->out_dir && rc == 0;
    return rc;
}
