/* Derived figures shared by the printed profile and the files: kernels by
 * time, launches by start, step/phase totals, module regions aggregated
 * over blocks. */
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

const char *const prof_phase_names[4] = {"data_loading", "forward_pass", "backward_pass",
                                         "optimizer_step"};

static const tf_prof *sort_p;
static int by_total_desc(const void *a, const void *b) {
    const prof_stat *x = &sort_p->kstats[*(const uint32_t *)a];
    const prof_stat *y = &sort_p->kstats[*(const uint32_t *)b];
    if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
    /* ties: by name, so the order is reproducible */
    return strcmp(sort_p->names.strs[*(const uint32_t *)a], sort_p->names.strs[*(const uint32_t *)b]);
}

uint32_t *prof_sorted_kernels(const tf_prof *p, size_t *n, int kind) {
    *n = 0;
    uint32_t *ids = malloc((p->kstats_cap + 1) * sizeof *ids);
    if (!ids) return NULL;
    for (size_t i = 0; i < p->kstats_cap; i++)
        if (p->kstats[i].calls && p->kstats[i].kind == kind) ids[(*n)++] = (uint32_t)i;
    sort_p = p; /* single-threaded: finish runs on the model's thread */
    qsort(ids, *n, sizeof *ids, by_total_desc);
    return ids;
}

static int by_start(const void *a, const void *b) {
    const prof_launch *x = &sort_p->launches[*(const size_t *)a];
    const prof_launch *y = &sort_p->launches[*(const size_t *)b];
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

size_t *prof_launch_order(const tf_prof *p) {
    size_t *idx = malloc((p->nlaunch + 1) * sizeof *idx);
    if (!idx) return NULL;
    for (size_t i = 0; i < p->nlaunch; i++) idx[i] = i;
    sort_p = p;
    qsort(idx, p->nlaunch, sizeof *idx, by_start);
    return idx;
}

typedef struct {
    uint32_t key; /* step index * 4 + phase */
    int64_t start, end;
} busy_iv;

static int by_key_start(const void *a, const void *b) {
    const busy_iv *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* The phase (0..3) a path lies in, -1 if none. */
static int phase_of(const tf_prof *p, uint32_t path) {
    while (path != PROF_ROOT && p->paths[path].parent != PROF_ROOT) path = p->paths[path].parent;
    if (path == PROF_ROOT) return -1;
    for (int k = 0; k < 4; k++)
        if (!strcmp(p->names.strs[p->paths[path].name], prof_phase_names[k])) return k;
    return -1;
}

/* Busy time per phase over the traced steps: the union of the kernels'
 * spans, so kernels that run beside each other (the weight-gradient lane)
 * count once. */
static void busy_totals(const tf_prof *p, prof_totals *t) {
    busy_iv *iv = malloc((p->nlaunch ? p->nlaunch : 1) * sizeof *iv);
    if (!iv) return;
    size_t n = 0;
    for (size_t i = 0; i < p->nlaunch; i++) {
        const prof_launch *l = &p->launches[i];
        const int k = l->kind == PROF_KIND_KERNEL ? phase_of(p, l->path) : -1;
        if (k < 0 || !p->steps[l->step].collected) continue;
        iv[n++] = (busy_iv){l->step * 4u + (uint32_t)k, l->start, l->end};
    }
    qsort(iv, n, sizeof *iv, by_key_start);
    for (size_t i = 0; i < n;) {
        const uint32_t key = iv[i].key;
        int64_t s = iv[i].start, e = iv[i].end;
        for (i++; i < n && iv[i].key == key; i++) {
            if (iv[i].start > e) {
                t->phase_busy_ns[key % 4] += e - s;
                s = iv[i].start;
            }
            if (iv[i].end > e) e = iv[i].end;
        }
        t->phase_busy_ns[key % 4] += e - s;
    }
    for (size_t i = 0; i < p->nsteps; i++)
        t->busy_steps += p->steps[i].collected && p->steps[i].traced;
    free(iv);
}

void prof_compute_totals(const tf_prof *p, prof_totals *t) {
    memset(t, 0, sizeof *t);
    if (prof_device_timed(p)) busy_totals(p, t);
    for (size_t i = 0; i < p->nsteps; i++)
        if (p->steps[i].collected && p->steps[i].end > p->steps[i].start)
            t->step_ns += p->steps[i].end - p->steps[i].start;
    for (uint32_t id = 1; id < p->npaths; id++) {
        const prof_path *q = &p->paths[id];
        if (q->parent != PROF_ROOT || (q->calls == 0 && q->kernel_ns == 0)) continue;
        for (int k = 0; k < 4; k++) {
            if (strcmp(p->names.strs[q->name], prof_phase_names[k]) != 0) continue;
            t->phase_ns[k] += q->host_ns;
            t->phase_kernel_ns[k] += q->kernel_ns;
            t->phase_calls[k] += q->calls;
            t->phase_seen[k] = 1;
        }
    }
    t->launches_per_step =
        p->steps_collected ? (double)p->launches_total / (double)p->steps_collected : 0.0;
}

static int is_block(const char *s) {
    if (strncmp(s, "block_", 6) != 0 || !s[6]) return 0;
    for (s += 6; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

static int by_module_total(const void *a, const void *b) {
    const prof_module *x = a, *y = b;
    int64_t tx = x->fwd_ns + x->bwd_ns + x->other_ns, ty = y->fwd_ns + y->bwd_ns + y->other_ns;
    if (tx != ty) return tx < ty ? 1 : -1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* The module a region path is in: its outermost component past the phase
 * that is not a block (PROF_NONE: none, or a path outside the model's
 * phases); *phase 0 forward, 1 backward, 2 other; *depth how many such
 * components the path has (1: the module's own region). */
static uint32_t module_of(const tf_prof *p, uint32_t id, int *phase, int *depth) {
    uint32_t comp[PROF_MAX_DEPTH + 1];
    int nc = 0;
    for (uint32_t k = id; k != PROF_ROOT && nc <= PROF_MAX_DEPTH; k = p->paths[k].parent)
        comp[nc++] = p->paths[k].name; /* leaf first */
    *phase = 2, *depth = 0;
    if (!nc) return PROF_NONE;
    const char *first = p->names.strs[comp[nc - 1]];
    int hi = nc - 1;
    if (!strcmp(first, "forward_pass")) *phase = 0, hi--;
    else if (!strcmp(first, "backward_pass")) *phase = 1, hi--;
    else if (!strcmp(first, "optimizer_step") || !strcmp(first, "data_loading")) return PROF_NONE;
    uint32_t name = PROF_NONE;
    for (int k = hi; k >= 0; k--) {
        if (is_block(p->names.strs[comp[k]])) continue;
        if (!(*depth)++) name = comp[k];
    }
    return name;
}

/* the index of name's module in m[0..n), n where there is none */
static size_t module_find(const prof_module *m, size_t n, uint32_t name) {
    size_t j = 0;
    while (j < n && m[j].name != name) j++;
    return j;
}

/* name's module, added to m when missing */
static size_t module_slot(prof_module *m, size_t *n, uint32_t name) {
    const size_t j = module_find(m, *n, name);
    if (j == *n) {
        m[j].name = name;
        (*n)++;
    }
    return j;
}

prof_module *prof_modules(const tf_prof *p, size_t *n) {
    *n = 0;
    prof_module *m = calloc(p->npaths + 1, sizeof *m);
    if (!m) return NULL;
    for (uint32_t id = 1; id < p->npaths; id++) {
        const prof_path *q = &p->paths[id];
        /* under CUDA graph replay a module region is entered once (at capture)
         * while its kernels run every step: keep paths that only have kernels */
        if (q->calls == 0 && q->kernel_ns == 0) continue;
        int phase, depth;
        const uint32_t name = module_of(p, id, &phase, &depth);
        if (name == PROF_NONE || depth != 1) continue; /* a phase or block itself, or a sub-step */
        const size_t j = module_slot(m, n, name);
        int64_t v = prof_device_timed(p) ? q->kernel_ns : q->host_ns;
        if (phase == 0) m[j].fwd_ns += v;
        else if (phase == 1) m[j].bwd_ns += v;
        else m[j].other_ns += v;
        m[j].calls += q->calls;
    }
    /* the analytic costs of the ops inside each (any depth), where timed */
    for (size_t i = 0; i < p->nopc; i++) {
        const prof_opcost *e = &p->opc[i];
        int phase, depth;
        const uint32_t name = e->has_cost ? module_of(p, e->path, &phase, &depth) : PROF_NONE;
        if (name == PROF_NONE) continue;
        const size_t j = module_find(m, *n, name);
        if (j == *n) continue; /* no time collected for it */
        m[j].flops += e->flops;
        m[j].bytes += e->bytes;
    }
    qsort(m, *n, sizeof *m, by_module_total);
    return m;
}

prof_op_row *prof_op_rows(const tf_prof *p, size_t *n) {
    *n = 0;
    prof_op_row *r = calloc(p->nopc + 1, sizeof *r);
    if (!r) return NULL;
    for (size_t i = 0; i < p->nopc; i++) {
        const prof_opcost *e = &p->opc[i];
        if (!e->has_cost || e->kernel_ns <= 0) continue;
        int phase, depth;
        const uint32_t mod = module_of(p, e->path, &phase, &depth);
        if (mod == PROF_NONE) continue;
        size_t j = 0;
        while (j < *n && !(r[j].module == mod && r[j].phase == phase && r[j].name == e->name)) j++;
        if (j == *n) r[(*n)++] = (prof_op_row){mod, e->name, phase, 0, 0, 0};
        r[j].flops += e->flops;
        r[j].bytes += e->bytes;
        r[j].ns += e->kernel_ns;
    }
    return r;
}
