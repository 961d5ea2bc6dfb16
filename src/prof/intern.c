/* String interning and the region-path tree of the profiler.
 *
 * Names arrive as C strings that may live in a caller's stack buffer
 * ("block_3"), so they are keyed by content (FNV-1a, open addressing), and
 * each distinct name is copied once. A region path is a node (parent, name)
 * of a tree; its id is what launches and regions are recorded against. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

int prof_intern_init(prof_intern *t) {
    memset(t, 0, sizeof *t);
    t->nslots = 256;
    t->slots = calloc(t->nslots, sizeof *t->slots);
    return t->slots ? 0 : -1;
}

void prof_intern_free(prof_intern *t) {
    for (uint32_t i = 0; i < t->n; i++) free(t->strs[i]);
    free(t->strs);
    free(t->hashes);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint32_t lookup(const prof_intern *t, const char *s, uint32_t h, uint32_t *slot) {
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t v = t->slots[i];
        if (v == 0) {
            *slot = i;
            return PROF_NONE;
        }
        if (t->hashes[v - 1] == h && strcmp(t->strs[v - 1], s) == 0) return v - 1;
    }
}

uint32_t prof_intern_find(const prof_intern *t, const char *s) {
    uint32_t slot;
    if (!t->slots) return PROF_NONE;
    return lookup(t, s, fnv1a(s), &slot);
}

static int rehash(prof_intern *t) {
    uint32_t ns = t->nslots * 2;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t id = 0; id < t->n; id++) {
        uint32_t i = t->hashes[id] & (ns - 1);
        while (slots[i]) i = (i + 1) & (ns - 1);
        slots[i] = id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

uint32_t prof_intern_id(prof_intern *t, const char *s) {
    if (!s) s = "(null)";
    uint32_t h = fnv1a(s), slot;
    uint32_t id = lookup(t, s, h, &slot);
    if (id != PROF_NONE) return id;
    if (t->n == t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 64;
        char **strs = realloc(t->strs, nc * sizeof *strs);
        if (!strs) return PROF_NONE;
        t->strs = strs;
        uint32_t *hs = realloc(t->hashes, nc * sizeof *hs);
        if (!hs) return PROF_NONE;
        t->hashes = hs;
        t->cap = nc;
    }
    char *copy = strdup(s);
    if (!copy) return PROF_NONE;
    id = t->n++;
    t->strs[id] = copy;
    t->hashes[id] = h;
    t->slots[slot] = id + 1;
    /* keep the load under one half so probes stay short */
    if (2 * t->n > t->nslots && rehash(t) != 0) {
        /* the table still works at a higher load; only fails when full */
        if (t->n + 1 >= t->nslots) return PROF_NONE;
    }
    return id;
}

/* ---- region paths ---- */

static uint32_t path_hash(uint32_t parent, uint32_t name) {
    uint64_t x = ((uint64_t)parent << 32 | name) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32);
}

static int path_rehash(tf_prof *p, uint32_t ns) {
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t id = 1; id < p->npaths; id++) {
        uint32_t i = path_hash(p->paths[id].parent, p->paths[id].name) & (ns - 1);
        while (slots[i]) i = (i + 1) & (ns - 1);
        slots[i] = id + 1;
    }
    free(p->path_slots);
    p->path_slots = slots;
    p->path_nslots = ns;
    return 0;
}

static int name_selected(const tf_prof *p, uint32_t name) {
    for (int i = 0; i < p->nsel; i++)
        if (p->sel_ids[i] == name) return 1;
    return 0;
}

uint32_t prof_path_child(tf_prof *p, uint32_t parent, uint32_t name) {
    uint32_t mask = p->path_nslots - 1;
    uint32_t i = path_hash(parent, name) & mask;
    for (;; i = (i + 1) & mask) {
        uint32_t v = p->path_slots[i];
        if (v == 0) break;
        const prof_path *q = &p->paths[v - 1];
        if (q->parent == parent && q->name == name) return v - 1;
    }
    if (p->npaths >= (1u << PROF_CTX_PATH_BITS) - 1) return PROF_NONE; /* ctx encoding limit */
    if (p->npaths == p->cap_paths) {
        size_t cap = p->cap_paths;
        if (prof_reserve((void **)&p->paths, &cap, p->npaths + 1, sizeof *p->paths)) return PROF_NONE;
        p->cap_paths = (uint32_t)cap;
    }
    const prof_path *par = &p->paths[parent];
    const char *nm = p->names.strs[name];
    size_t lp = strlen(par->path), ln = strlen(nm);
    char *full = malloc(lp + ln + 2);
    if (!full) return PROF_NONE;
    if (lp) {
        memcpy(full, par->path, lp);
        full[lp] = '/';
        memcpy(full + lp + 1, nm, ln + 1);
    } else {
        memcpy(full, nm, ln + 1);
    }
    uint32_t id = p->npaths++;
    prof_path *q = &p->paths[id];
    memset(q, 0, sizeof *q);
    q->parent = parent;
    q->name = name;
    q->depth = par->depth + 1;
    q->selected = p->nsel == 0 || par->selected || name_selected(p, name);
    q->path = full;
    p->path_slots[i] = id + 1;
    if (2 * p->npaths > p->path_nslots) path_rehash(p, p->path_nslots * 2); /* best effort */
    return id;
}
