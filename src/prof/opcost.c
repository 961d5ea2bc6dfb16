/* Per-op analytic cost and kernel time, keyed by (region path, op name):
 * the data of the report's roofline. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "prof/prof_internal.h"

static uint32_t key_hash(uint32_t path, uint32_t name) {
    uint64_t k = ((uint64_t)path << 32) | name;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static int rehash(tf_prof *p, size_t nslots) {
    uint32_t *s = calloc(nslots, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < p->nopc; i++) {
        size_t h = key_hash(p->opc[i].path, p->opc[i].name) & (nslots - 1);
        while (s[h]) h = (h + 1) & (nslots - 1);
        s[h] = (uint32_t)i + 1;
    }
    free(p->opc_slots);
    p->opc_slots = s;
    p->opc_nslots = nslots;
    return 0;
}

/* The entry of (path, name), added when missing; NULL when out of memory. */
static prof_opcost *entry(tf_prof *p, uint32_t path, uint32_t name) {
    if (p->opc_nslots) {
        size_t h = key_hash(path, name) & (p->opc_nslots - 1);
        for (; p->opc_slots[h]; h = (h + 1) & (p->opc_nslots - 1)) {
            prof_opcost *e = &p->opc[p->opc_slots[h] - 1];
            if (e->path == path && e->name == name) return e;
        }
    }
    if ((p->nopc + 1) * 2 > p->opc_nslots && rehash(p, p->opc_nslots ? p->opc_nslots * 2 : 256))
        return NULL;
    if (p->nopc == p->cap_opc &&
        prof_reserve((void **)&p->opc, &p->cap_opc, p->nopc + 1, sizeof *p->opc))
        return NULL;
    prof_opcost *e = &p->opc[p->nopc];
    memset(e, 0, sizeof *e);
    e->path = path;
    e->name = name;
    size_t h = key_hash(path, name) & (p->opc_nslots - 1);
    while (p->opc_slots[h]) h = (h + 1) & (p->opc_nslots - 1);
    p->opc_slots[h] = (uint32_t)++p->nopc;
    return e;
}

#ifndef TF_NO_PROF_HOOKS
void tf_prof_op_cost(tf_prof *p, const char *name, double flops, double bytes) {
    if (!p || !p->in_step || p->overflow) return;
    if (p->cost_step < 0) p->cost_step = (long)p->cur_step;
    if (p->cost_step != (long)p->cur_step) return;
    uint32_t id = prof_intern_id(&p->names, name);
    uint32_t path = p->depth ? p->stack[p->depth - 1].path : PROF_ROOT;
    prof_opcost *e = id == PROF_NONE ? NULL : entry(p, path, id);
    if (!e) {
        p->oom = 1;
        return;
    }
    if (p->arena_top) prof_arena_touch(p); /* the op's outputs are allocated by now */
    e->has_cost = 1;
    e->calls++;
    e->flops += flops;
    e->bytes += bytes;
}
#endif

void prof_opcost_time(tf_prof *p, uint32_t path, uint32_t name, int64_t ns) {
    prof_opcost *e = entry(p, path, name);
    if (!e) {
        p->oom = 1;
        return;
    }
    e->kernel_ns += ns;
    e->launches++;
}

cJSON *prof_opcost_json(const tf_prof *p) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source",
                            "analytic: FLOPs and minimum bytes from each op's shapes "
                            "(src/model/op_cost.h), one step; kernel time over the collected steps");
    cJSON_AddNumberToObject(o, "cost_step",
                            p->cost_step >= 0 ? (double)p->steps[p->cost_step].step : -1.0);
    cJSON_AddNumberToObject(o, "steps_collected", (double)p->steps_collected);
    double tf = 0, tb = 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "ops");
    for (size_t i = 0; i < p->nopc; i++) {
        const prof_opcost *e = &p->opc[i];
        if (!e->has_cost && !e->kernel_ns) continue;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "path", p->paths[e->path].path);
        cJSON_AddStringToObject(j, "name", p->names.strs[e->name]);
        cJSON_AddNumberToObject(j, "calls_per_step", (double)e->calls);
        if (e->has_cost) {
            cJSON_AddNumberToObject(j, "flops", e->flops);
            cJSON_AddNumberToObject(j, "bytes", e->bytes);
            tf += e->flops;
            tb += e->bytes;
        } else {
            cJSON_AddNullToObject(j, "flops");
            cJSON_AddNullToObject(j, "bytes");
        }
        cJSON_AddNumberToObject(j, "kernel_ns", (double)e->kernel_ns);
        cJSON_AddNumberToObject(j, "launches", (double)e->launches);
        cJSON_AddItemToArray(arr, j);
    }
    cJSON_AddNumberToObject(o, "flops_per_step", tf);
    cJSON_AddNumberToObject(o, "bytes_per_step", tb);
    return o;
}

void tf_prof_watch_arena(tf_prof *p, const size_t *top) {
    if (p) p->arena_top = top;
}

cJSON *prof_arena_json(const tf_prof *p) {
    int any = 0;
    for (uint32_t id = 1; id < p->npaths && !any; id++) any = p->paths[id].arena_seen;
    if (!any) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source",
                            "the activation arena's fill level at region boundaries and ops "
                            "of one step: kept = still allocated at the region's end (a forward "
                            "module's saved activations), peak = most held above its entry");
    cJSON *arr = cJSON_AddArrayToObject(o, "regions");
    for (uint32_t id = 1; id < p->npaths; id++) {
        const prof_path *q = &p->paths[id];
        if (!q->arena_seen) continue;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "path", q->path);
        cJSON_AddNumberToObject(j, "kept_bytes", (double)q->arena_kept);
        cJSON_AddNumberToObject(j, "peak_bytes", (double)q->arena_hi);
        cJSON_AddItemToArray(arr, j);
    }
    return o;
}

void prof_opcost_free(tf_prof *p) {
    free(p->opc);
    free(p->opc_slots);
    p->opc = NULL;
    p->opc_slots = NULL;
    p->nopc = p->cap_opc = p->opc_nslots = 0;
}
