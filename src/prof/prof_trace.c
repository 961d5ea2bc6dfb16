/* trace.json: the traced steps as a Perfetto / chrome://tracing timeline
 * (Chrome trace format, ts/dur in microseconds with ns precision).
 *
 * Tracks: pid 1 "tinyfold host" holds the region stack (tid 1, nested X
 * events), the steps (tid 2), the CPU ops (tid 3), the all-reduces of data
 * parallel runs (tid 4, their bytes in args; they overlap the ops they are
 * hidden behind) and the memory counter;
 * pid 2 "GPU" holds one track per CUDA stream, and one "CUDA graph" track
 * for replayed graphs (PROF_STREAM_GRAPH). X events on one tid must nest,
 * so launches that overlap on one track (a graph's weight-gradient branch,
 * programmatic dependent launch, nested CPU ops) are spread over extra
 * "overlap" lanes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio/outfile.h"
#include "fileio/text_escape.h"
#include "prof/prof_internal.h"

#define PID_HOST 1
#define PID_GPU 2
#define TID_REGIONS 1
#define TID_STEPS 2
#define TID_CPU_OPS 3
#define TID_COMM 4   /* and TID_COMM_OVERLAP + k for the k-th overlapping one */
#define TID_COMM_OVERLAP 90
#define COMM_LANES 8
#define TID_LANE0 100

typedef struct {
    uint32_t stream;
    int lane;
    int64_t last_end;
} lane_t;

static void ts_us(FILE *f, const char *key, int64_t ns) {
    /* ns / 1000 printed exactly with three decimals */
    if (ns < 0) {
        fputs(",\"", f);
        fputs(key, f);
        fputs("\":-", f);
        ns = -ns;
    } else {
        fprintf(f, ",\"%s\":", key);
    }
    fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static void meta(FILE *f, int *first, const char *what, int pid, int tid, const char *name) {
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
            *first ? "" : ",", what, pid, tid);
    tf_json_str(f, name);
    fputs("}}", f);
    *first = 0;
}

static void x_begin(FILE *f, int *first, const char *name, int pid, int tid, int64_t start,
                    int64_t dur) {
    fprintf(f, "%s\n{\"name\":", *first ? "" : ",");
    tf_json_str(f, name);
    fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d", pid, tid);
    ts_us(f, "ts", start);
    ts_us(f, "dur", dur < 0 ? 0 : dur);
    *first = 0;
}

static int by_region_start(const void *a, const void *b) {
    const prof_region_ev *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* parents first */
    return 0;
}

/* The tid of a launch on stream `stream` starting at `start`, ending at `end`. */
static int lane_tid(lane_t **lanes, size_t *n, size_t *cap, uint32_t stream, int64_t start,
                    int64_t end, int *is_new, int *lane_no) {
    int next_lane = 0;
    for (size_t i = 0; i < *n; i++) {
        lane_t *l = &(*lanes)[i];
        if (l->stream != stream) continue;
        next_lane = l->lane + 1;
        if (l->last_end <= start) {
            l->last_end = end;
            *is_new = 0;
            *lane_no = l->lane;
            return TID_LANE0 + (int)i;
        }
    }
    if (prof_reserve((void **)lanes, cap, *n + 1, sizeof **lanes)) return -1;
    (*lanes)[*n] = (lane_t){stream, next_lane, end};
    *is_new = 1;
    *lane_no = next_lane;
    return TID_LANE0 + (int)(*n)++;
}

int prof_write_trace_json(const tf_prof *p, const char *path, char *err, size_t errlen) {
    size_t *order = prof_launch_order(p);
    prof_region_ev *rev = malloc((p->nrev + 1) * sizeof *rev);
    FILE *f = NULL;
    lane_t *lanes = NULL;
    size_t nlanes = 0, cap_lanes = 0;
    int rc = -1, first = 1;
    if (!order || !rev) {
        snprintf(err, errlen, "profiler: out of memory writing trace.json");
        goto done;
    }
    f = tf_io_open_out(path, err, errlen);
    if (!f) goto done;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tinyfold_version\":\"" TF_VERSION "\"", f);
    fprintf(f, ",\"traced_steps\":%zu,\"trace_max_steps\":%d,\"trace_cap_hit\":%s},\n",
            p->steps_traced, p->trace_max_steps, p->trace_cap_hit ? "true" : "false");
    fputs("\"traceEvents\":[", f);
    meta(f, &first, "process_name", PID_HOST, 0, "tinyfold host");
    meta(f, &first, "thread_name", PID_HOST, TID_REGIONS, "regions");
    meta(f, &first, "thread_name", PID_HOST, TID_STEPS, "steps");
    if (prof_device_timed(p)) meta(f, &first, "process_name", PID_GPU, 0, "GPU");

    for (size_t i = 0; i < p->nsteps; i++) {
        const prof_step *s = &p->steps[i];
        if (!s->traced) continue;
        char name[64];
        snprintf(name, sizeof name, "step %ld", s->step);
        x_begin(f, &first, name, PID_HOST, TID_STEPS, s->start - p->t0, s->end - s->start);
        fprintf(f, ",\"args\":{\"step\":%ld,\"warmup\":%s,\"launches\":%llu}}", s->step,
                s->warmup ? "true" : "false", (unsigned long long)s->launches);
    }

    if (p->nrev) memcpy(rev, p->rev, p->nrev * sizeof *rev);
    qsort(rev, p->nrev, sizeof *rev, by_region_start);
    for (size_t i = 0; i < p->nrev; i++) {
        const prof_path *q = &p->paths[rev[i].path];
        x_begin(f, &first, p->names.strs[q->name], PID_HOST, TID_REGIONS, rev[i].start - p->t0,
                rev[i].end - rev[i].start);
        fputs(",\"args\":{\"path\":", f);
        tf_json_str(f, q->path);
        fprintf(f, ",\"step\":%ld}}", p->steps[rev[i].step].step);
    }

    const int gpu = prof_device_timed(p);
    for (size_t i = 0; i < p->nlaunch; i++) {
        const prof_launch *l = &p->launches[order[i]];
        int is_new, lane;
        int tid = lane_tid(&lanes, &nlanes, &cap_lanes, gpu ? l->stream : 0, l->start, l->end,
                           &is_new, &lane);
        if (tid < 0) {
            snprintf(err, errlen, "profiler: out of memory writing trace.json");
            goto done;
        }
        int pid = gpu ? PID_GPU : PID_HOST;
        if (!gpu) tid = lane ? tid : TID_CPU_OPS; /* lane 0 of the CPU is "cpu ops" */
        if (is_new) {
            char tname[64], sname[32];
            if (l->stream == PROF_STREAM_GRAPH)
                snprintf(sname, sizeof sname, "CUDA graph");
            else if (p->evt) /* the event timer's queues (gpu_timer.h) */
                snprintf(sname, sizeof sname, "%s", l->stream ? "wgrad lane" : "main queue");
            else
                snprintf(sname, sizeof sname, "stream %u", l->stream);
            if (gpu && lane)
                snprintf(tname, sizeof tname, "%s (overlap %d)", sname, lane);
            else if (gpu)
                snprintf(tname, sizeof tname, "%s", sname);
            else if (lane)
                snprintf(tname, sizeof tname, "cpu ops (nested %d)", lane);
            else
                snprintf(tname, sizeof tname, "cpu ops");
            meta(f, &first, "thread_name", pid, tid, tname);
        }
        x_begin(f, &first, p->names.strs[l->name], pid, tid, l->start - p->t0, l->end - l->start);
        fputs(",\"args\":{\"region\":", f);
        tf_json_str(f, p->paths[l->path].path);
        fprintf(f, ",\"step\":%ld", p->steps[l->step].step);
        if (l->op != l->name && l->op != PROF_CTX_NO_OP && l->op < p->names.n) {
            fputs(",\"op\":", f);
            tf_json_str(f, p->names.strs[l->op]);
        }
        if (l->grid[0])
            fprintf(f, ",\"grid\":\"%ux%ux%u\",\"block\":\"%ux%ux%u\",\"registers\":%d,"
                       "\"shared_mem_bytes\":%d",
                    l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                    l->regs, l->smem);
        fputs("}}", f);
    }

    /* X events on one track must nest: an all-reduce issued while the last
     * is in flight goes to an overlap track */
    int64_t comm_end[COMM_LANES];
    int comm_named[COMM_LANES] = {0};
    for (size_t i = 0; i < p->ncomm; i++) {
        const prof_comm *c = &p->comm[i];
        int k = 0;
        while (k < COMM_LANES - 1 && comm_named[k] && comm_end[k] > c->start) k++;
        int tid = k ? TID_COMM_OVERLAP + k : TID_COMM;
        if (!comm_named[k]) {
            char tname[48];
            if (k) snprintf(tname, sizeof tname, "allreduce (overlap %d)", k);
            else snprintf(tname, sizeof tname, "allreduce");
            meta(f, &first, "thread_name", PID_HOST, tid, tname);
            comm_named[k] = 1;
        }
        comm_end[k] = c->end;
        x_begin(f, &first, "allreduce", PID_HOST, tid, c->start - p->t0, c->end - c->start);
        fprintf(f, ",\"args\":{\"bytes\":%.0f,\"step\":%ld}}", c->bytes, p->steps[c->step].step);
    }

    for (size_t i = 0; i < p->nmem; i++) {
        fprintf(f, "%s\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":%d", first ? "" : ",", PID_HOST);
        ts_us(f, "ts", p->mem[i].t - p->t0);
        fprintf(f, ",\"args\":{\"backend_MiB\":%.3f,\"host_rss_MiB\":%.3f}}",
                (double)p->mem[i].backend / 1048576.0, (double)p->mem[i].host / 1048576.0);
        first = 0;
    }
    fputs("\n]}\n", f);
    rc = 0;
done:
    if (f && tf_io_close_out(f, path, rc == 0, err, errlen) != 0) rc = -1;
    free(order);
    free(rev);
    free(lanes);
    return rc;
}
