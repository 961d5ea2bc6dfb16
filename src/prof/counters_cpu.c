/* CPU counters for --counters PATTERN: perf_event_open counters of the
 * calling thread, read before and after every collected op whose name
 * contains PATTERN. Software events (task-clock, page faults, context
 * switches, migrations) usually open; hardware events need a CPU PMU, which
 * the project's machines lack: those are reported "unavailable (<errno>)",
 * never as zeros. OpenMP worker threads are not counted (the counters follow
 * the thread that issues the op). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cJSON.h>

#include "prof/prof_internal.h"

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} events[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
};
#define NEV ((int)(sizeof events / sizeof events[0]))
_Static_assert(NEV <= PROF_CPUC_MAX, "PROF_CPUC_MAX too small");

typedef struct {
    uint64_t calls;
    uint64_t sum[PROF_CPUC_MAX];
} per_name;

struct prof_cpuc {
    int fd[PROF_CPUC_MAX];
    int err[PROF_CPUC_MAX];
    uint64_t begin[PROF_CPUC_MAX];
    per_name *per; /* indexed by name id */
    size_t cap;
};

static int open_event(uint32_t type, uint64_t config, int exclude_kernel) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = config;
    a.exclude_kernel = (unsigned)exclude_kernel;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, -1,
                        PERF_FLAG_FD_CLOEXEC);
}

prof_cpuc *prof_cpuc_open(void) {
    prof_cpuc *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < PROF_CPUC_MAX; i++) c->fd[i] = -1;
    for (int i = 0; i < NEV; i++) {
        int fd = open_event(events[i].type, events[i].config, 0);
        if (fd < 0 && (errno == EACCES || errno == EPERM)) /* paranoid: user space only */
            fd = open_event(events[i].type, events[i].config, 1);
        c->fd[i] = fd;
        c->err[i] = fd < 0 ? errno : 0;
    }
    return c;
}

void prof_cpuc_close(prof_cpuc *c) {
    if (!c) return;
    for (int i = 0; i < NEV; i++)
        if (c->fd[i] >= 0) close(c->fd[i]);
    free(c->per);
    free(c);
}

void prof_cpuc_read(prof_cpuc *c, uint64_t *v) {
    for (int i = 0; i < NEV; i++) {
        v[i] = 0;
        if (c->fd[i] >= 0 && read(c->fd[i], &v[i], sizeof v[i]) != (ssize_t)sizeof v[i]) v[i] = 0;
    }
}

void prof_cpuc_begin(prof_cpuc *c) { prof_cpuc_read(c, c->begin); }

void prof_cpuc_end(prof_cpuc *c, uint32_t name) {
    uint64_t v[PROF_CPUC_MAX];
    prof_cpuc_read(c, v);
    if (name >= c->cap) {
        size_t old = c->cap;
        if (prof_reserve((void **)&c->per, &c->cap, (size_t)name + 1, sizeof *c->per)) return;
        memset(c->per + old, 0, (c->cap - old) * sizeof *c->per);
    }
    per_name *q = &c->per[name];
    q->calls++;
    for (int i = 0; i < NEV; i++) q->sum[i] += v[i] - c->begin[i];
}

static void unavailable(char *buf, size_t n, int err) {
    snprintf(buf, n, "unavailable (%s)", strerror(err));
}

cJSON *prof_cpuc_json(const prof_cpuc *c, const tf_prof *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", "perf_event_open (calling thread)");
    cJSON_AddStringToObject(o, "pattern", p->counters);
    cJSON *ev = cJSON_AddObjectToObject(o, "events");
    for (int i = 0; i < NEV; i++) {
        char buf[128];
        if (c->fd[i] >= 0) snprintf(buf, sizeof buf, "ok");
        else unavailable(buf, sizeof buf, c->err[i]);
        cJSON_AddStringToObject(ev, events[i].name, buf);
    }
    cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
    for (size_t id = 0; id < c->cap; id++) {
        const per_name *q = &c->per[id];
        if (!q->calls) continue;
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", p->names.strs[id]);
        cJSON_AddNumberToObject(k, "calls", (double)q->calls);
        cJSON *m = cJSON_AddObjectToObject(k, "metrics"); /* mean per call */
        cJSON *t = cJSON_AddObjectToObject(k, "totals");
        for (int i = 0; i < NEV; i++) {
            if (c->fd[i] < 0) continue;
            cJSON_AddNumberToObject(m, events[i].name, (double)q->sum[i] / (double)q->calls);
            cJSON_AddNumberToObject(t, events[i].name, (double)q->sum[i]);
        }
        cJSON_AddItemToArray(ks, k);
    }
    return o;
}

void prof_cpuc_print(const prof_cpuc *c, const tf_prof *p, FILE *out) {
    size_t matched = 0;
    for (size_t id = 0; id < c->cap; id++) matched += c->per[id].calls != 0;
    fprintf(out, "Counters (perf_event_open, calling thread) for ops matching '%s'", p->counters);
    if (!matched) {
        fprintf(out, ": no collected op matched\n");
    } else {
        fprintf(out, ", mean per call:\n%-32s | %9s", "Kernel", "Calls");
        for (int i = 0; i < NEV; i++)
            if (c->fd[i] >= 0) fprintf(out, " | %16s", i == 0 ? "task-clock ns" : events[i].name);
        fputc('\n', out);
        for (size_t id = 0; id < c->cap; id++) {
            const per_name *q = &c->per[id];
            if (!q->calls) continue;
            fprintf(out, "%-32.32s | %9llu", p->names.strs[id], (unsigned long long)q->calls);
            for (int i = 0; i < NEV; i++)
                if (c->fd[i] >= 0) fprintf(out, " | %16.3f", (double)q->sum[i] / (double)q->calls);
            fputc('\n', out);
        }
    }
    for (int i = 0; i < NEV; i++) {
        if (c->fd[i] >= 0) continue;
        char buf[128];
        unavailable(buf, sizeof buf, c->err[i]);
        fprintf(out, "  %s: %s\n", events[i].name, buf);
    }
}
