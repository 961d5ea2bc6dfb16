/* Profiler lifecycle: create (options, timer, output directory), memory
 * samples, all-reduces, destroy. finish.c ends it; record.c folds each
 * collected launch in. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/registry.h"
#include "fileio/outfile.h"
#include "prof/prof_internal.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Splits the comma-separated list into interned names. */
static int parse_selected(tf_prof *p, const char *list, char *err, size_t errlen) {
    size_t n = strlen(list);
    p->sel_ids = calloc(n + 1, sizeof *p->sel_ids);
    if (!p->sel_ids) return -1;
    const char *s = list;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        while (len && (*s == ' ' || *s == '\t')) s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
        if (len == 0 || len > 255) {
            set_err(err, errlen, "selected regions: %s region name in '%s'",
                    len ? "too long a" : "empty", list);
            return -1;
        }
        char name[256];
        memcpy(name, s, len);
        name[len] = 0;
        uint32_t id = prof_intern_id(&p->names, name);
        if (id == PROF_NONE) return -1;
        p->sel_ids[p->nsel++] = id;
        if (!e) break;
        s = e + 1;
    }
    return 0;
}

/* "cuda and hip": the backends a GPU timer applies to */
static void gpu_names(char *out, size_t n) {
    const char *name[8];
    size_t k = 0, len = 0;
    for (size_t i = 0; tf_backend_at(i) && k < 8; i++)
        if (tf_backend_at(i)->gpu) name[k++] = tf_backend_at(i)->name;
    out[0] = '\0';
    for (size_t i = 0; i < k && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s",
                                i == 0 ? "" : i + 1 == k ? " and " : ", ", name[i]);
}

/* The timer of the run's backend (profiler.h, tf_prof_gpu_timer), refusing
 * what it cannot do: one line each. */
static int choose_timer(tf_prof *p, const tf_prof_opts *o, char *err, size_t errlen) {
    const tf_backend_entry *e = tf_backend_find(o->backend);
    p->timer = PROF_TIMER_HOST;
    if (!e) {
        char names[128];
        tf_backend_names(names, sizeof names);
        set_err(err, errlen, "profiler: backend %d is not one of %s (auto is resolved first)",
                (int)o->backend, names);
        return -1;
    }
    p->backend = e->name;
    p->records = e->cupti ? "profile with the default --gpu-timer cupti" : e->records;
    if ((int)o->gpu_timer < 0 || (int)o->gpu_timer > (int)TF_PROF_GPU_TIMER_EVENTS) {
        set_err(err, errlen, "gpu timer: unknown timer %d (accepted: cupti, events)",
                (int)o->gpu_timer);
        return -1;
    }
    if (!e->gpu) {
        if (o->gpu_timer == TF_PROF_GPU_TIMER_DEFAULT) return 0;
        char gpus[64];
        gpu_names(gpus, sizeof gpus);
        set_err(err, errlen, "gpu timer: the %s backend's ops are timed by the host clock "
                             "(a GPU timer applies to the %s backends)",
                e->name, gpus);
        return -1;
    }
    if (!e->cupti && o->gpu_timer == TF_PROF_GPU_TIMER_CUPTI) {
        set_err(err, errlen, "gpu timer: 'cupti' is NVIDIA's; on %s the ops are timed by %s "
                             "('events')",
                e->name, e->events);
        return -1;
    }
    p->timer = e->cupti && o->gpu_timer != TF_PROF_GPU_TIMER_EVENTS ? PROF_TIMER_CUPTI
                                                                    : PROF_TIMER_EVENTS;
    if (p->timer == PROF_TIMER_EVENTS && p->counters) {
        if (e->cupti)
            set_err(err, errlen, "counters: hardware counters need the CUPTI timer (not "
                                 "--gpu-timer events)");
        else
            set_err(err, errlen,
                    "counters: hardware counters are CUPTI's (NVIDIA); on %ss collect them with %s",
                    e->device, e->counters);
        return -1;
    }
    if (p->timer == PROF_TIMER_EVENTS && !prof_gpu_events_built()) {
        set_err(err, errlen, "GPU event timing: this build has no GPU backend");
        return -1;
    }
    return 0;
}

void tf_prof_attach_gpu(tf_prof *p, const struct tf_ops *ops, struct tf_backend *be) {
    if (!p || !p->evt || p->evt->have_clk || !ops || !be) return;
    char err[128];
    if (prof_gpu_events_open(&p->evt->clk, ops, be, err, sizeof err) != 0) {
        p->oom = 1;
        return;
    }
    p->evt->have_clk = 1;
}

tf_prof *tf_prof_create(const tf_prof_opts *o, char *err, size_t errlen) {
    tf_prof_opts d;
    memset(&d, 0, sizeof d);
    if (!o) o = &d;
    tf_prof *p = calloc(1, sizeof *p);
    if (!p || prof_intern_init(&p->names) != 0) {
        free(p);
        set_err(err, errlen, "profiler: out of memory");
        return NULL;
    }
    p->include_warmup = o->include_warmup != 0;
    p->trace_max_steps = o->trace_max_steps > 0 ? o->trace_max_steps : 5;
    p->top = o->top > 0 ? o->top : 15;
    p->precision = o->precision;
    p->t0 = prof_now_ns();
    p->cost_step = -1;
    if ((o->out_dir && !(p->out_dir = strdup(o->out_dir))) ||
        (o->counters && !(p->counters = strdup(o->counters))) ||
        (o->selected_regions && !(p->selected = strdup(o->selected_regions)))) {
        set_err(err, errlen, "profiler: out of memory");
        goto fail;
    }
    if (p->counters && !p->counters[0]) {
        set_err(err, errlen, "counters: empty kernel-name pattern");
        goto fail;
    }
    if (choose_timer(p, o, err, errlen) != 0) goto fail;
    if (p->selected && parse_selected(p, p->selected, err, errlen) != 0) {
        if (err && errlen && !err[0]) set_err(err, errlen, "profiler: out of memory");
        goto fail;
    }
    /* the root path: ops outside any region */
    size_t cap = 0;
    p->path_nslots = 256;
    p->path_slots = calloc(p->path_nslots, sizeof *p->path_slots);
    if (!p->path_slots || prof_reserve((void **)&p->paths, &cap, 256, sizeof *p->paths)) {
        set_err(err, errlen, "profiler: out of memory");
        goto fail;
    }
    p->cap_paths = (uint32_t)cap;
    memset(&p->paths[0], 0, sizeof p->paths[0]);
    p->paths[0].path = strdup("");
    p->paths[0].parent = PROF_NONE;
    p->paths[0].name = PROF_NONE;
    p->paths[0].selected = p->nsel == 0;
    p->npaths = 1;
    if (!p->paths[0].path) goto fail;
    if (p->out_dir && tf_io_mkdir_p(p->out_dir) != 0) {
        set_err(err, errlen, "profile output directory '%s': %s", p->out_dir, strerror(errno));
        goto fail;
    }
    if (p->out_dir && access(p->out_dir, W_OK) != 0) {
        set_err(err, errlen, "profile output directory '%s' is not writable: %s", p->out_dir,
                strerror(errno));
        goto fail;
    }
    if (p->timer == PROF_TIMER_CUPTI) {
        if (prof_gpu_start(p, err, errlen) != 0) goto fail;
    } else if (p->timer == PROF_TIMER_EVENTS) {
        if (!(p->evt = calloc(1, sizeof *p->evt))) {
            set_err(err, errlen, "profiler: out of memory");
            goto fail;
        }
        p->evt->ev_step = -1;
    } else if (p->counters) {
        p->cpuc = prof_cpuc_open();
        if (!p->cpuc) {
            set_err(err, errlen, "profiler: out of memory");
            goto fail;
        }
    }
    /* the roofline's ceilings, before any step; on CUDA at the first step's
     * begin instead (hooks.c), once the run has chosen its device */
    if (p->out_dir && !prof_device_timed(p)) prof_ceilings_measure_cpu(&p->ceil);
    return p;
fail:
    tf_prof_destroy(p);
    return NULL;
}

void tf_prof_memory(tf_prof *p, size_t backend_bytes, size_t host_bytes) {
    if (!p) return;
    if (host_bytes == 0) host_bytes = prof_current_rss();
    p->mem_samples++;
    if (backend_bytes > p->peak_backend) p->peak_backend = backend_bytes;
    if (host_bytes > p->peak_host) p->peak_host = host_bytes;
    uint32_t path = p->depth ? p->stack[p->depth - 1].path : PROF_ROOT;
    for (;;) {
        prof_path *q = &p->paths[path];
        if (backend_bytes > q->peak_backend) q->peak_backend = backend_bytes;
        if (host_bytes > q->peak_host) q->peak_host = host_bytes;
        if (path == PROF_ROOT) break;
        path = q->parent;
    }
    /* the counter track of the timeline covers the traced steps */
    if (p->in_step && p->steps[p->cur_step].traced && p->nmem < PROF_MAX_MEM_SAMPLES) {
        if (p->nmem == p->cap_mem &&
            prof_reserve((void **)&p->mem, &p->cap_mem, p->nmem + 1, sizeof *p->mem)) {
            p->oom = 1;
            return;
        }
        p->mem[p->nmem++] = (prof_mem){prof_now_ns(), backend_bytes, host_bytes};
    }
}

void tf_prof_comm(tf_prof *p, int64_t start_ns, int64_t end_ns, double bytes) {
    if (!p || !p->in_step || !p->steps[p->cur_step].traced) return;
    if (p->ncomm == p->cap_comm &&
        prof_reserve((void **)&p->comm, &p->cap_comm, p->ncomm + 1, sizeof *p->comm)) {
        p->oom = 1;
        return;
    }
    p->comm[p->ncomm++] = (prof_comm){start_ns, end_ns, bytes, (uint32_t)p->cur_step};
}

void tf_prof_destroy(tf_prof *p) {
    if (!p) return;
    if (p->gpu) prof_gpu_free(p);
    prof_evt_free(p->evt);
    if (p->cpuc) prof_cpuc_close(p->cpuc);
    for (uint32_t i = 0; i < p->npaths; i++) free(p->paths[i].path);
    free(p->paths);
    free(p->path_slots);
    prof_intern_free(&p->names);
    free(p->sel_ids);
    free(p->kstats);
    prof_opcost_free(p);
    free(p->steps);
    free(p->launches);
    free(p->rev);
    free(p->mem);
    free(p->comm);
    free(p->name_match);
    free(p->out_dir);
    free(p->selected);
    free(p->counters);
    free(p);
}
