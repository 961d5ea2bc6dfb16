/* The one place where a collected launch (a CPU op, a kernel, a memcpy or
 * memset, an op timed by GPU events) is folded into the aggregates: kernel
 * statistics, steps, regions, op costs and the trace rows. */
#include <string.h>

#include "prof/prof_internal.h"

int prof_name_matches(tf_prof *p, uint32_t name) {
    if (!p->counters) return 0;
    if (name >= p->name_match_cap) {
        size_t old = p->name_match_cap;
        if (prof_reserve((void **)&p->name_match, &p->name_match_cap, (size_t)name + 1, 1)) return 0;
        memset(p->name_match + old, -1, p->name_match_cap - old);
    }
    if (p->name_match[name] < 0)
        p->name_match[name] = strstr(p->names.strs[name], p->counters) != NULL;
    return p->name_match[name];
}

void prof_record_launch(tf_prof *p, const prof_launch *l) {
    if (l->name >= p->kstats_cap) {
        size_t old = p->kstats_cap;
        if (prof_reserve((void **)&p->kstats, &p->kstats_cap, (size_t)l->name + 1,
                         sizeof *p->kstats)) {
            p->oom = 1;
            return;
        }
        memset(p->kstats + old, 0, (p->kstats_cap - old) * sizeof *p->kstats);
    }
    int64_t d = l->end - l->start;
    if (d < 0) d = 0;
    prof_stat *s = &p->kstats[l->name];
    if (s->calls == 0 || d < s->min_ns) s->min_ns = d;
    if (d > s->max_ns) s->max_ns = d;
    s->calls++;
    s->total_ns += d;
    double delta = (double)d - s->mean;
    s->mean += delta / (double)s->calls;
    s->m2 += delta * ((double)d - s->mean);
    s->kind = l->kind;
    prof_step *st = &p->steps[l->step];
    if (l->kind == PROF_KIND_KERNEL) {
        p->kernel_total_ns += d;
        p->launches_total++;
        st->launches++;
        st->kernel_ns += d;
        p->paths[l->path].launches++;
        prof_opcost_time(p, l->path, l->op, d);
        /* inclusive kernel time up the tree, within the selection only */
        for (uint32_t q = l->path; p->paths[q].selected; q = p->paths[q].parent) {
            p->paths[q].kernel_ns += d;
            if (q == PROF_ROOT) break;
        }
    }
    if (st->traced) {
        if (p->nlaunch == p->cap_launch &&
            prof_reserve((void **)&p->launches, &p->cap_launch, p->nlaunch + 1,
                         sizeof *p->launches)) {
            p->oom = 1;
            return;
        }
        p->launches[p->nlaunch++] = *l;
    }
}
