/* The hooks of prof.h: region stack, op timing, step boundaries.
 *
 * With p == NULL every hook is one branch (plus the NVTX/ROCTx marker of a
 * region on GPU builds, so external tools see names even without the
 * built-in profiler). On the CPU an op's duration is the host time between
 * op_begin and op_end; under CUPTI the hooks only keep the encoded host
 * context current (p->ctx) so the CUPTI callbacks can tag each launch with
 * it; under the GPU event timer they record an event pair around the op
 * (gpu_timer.c), read after the step. */
#include <string.h>

#include "prof/markers.h"
#include "prof/prof_internal.h"

static inline uint32_t top_path(const tf_prof *p) {
    return p->depth ? p->stack[p->depth - 1].path : PROF_ROOT;
}

static inline int collecting(const tf_prof *p, uint32_t path) {
    return p->in_step && p->steps[p->cur_step].collected && p->paths[path].selected;
}

static void update_ctx(tf_prof *p) {
    uint32_t step = p->in_step ? (uint32_t)p->cur_step : PROF_CTX_STEP_NONE;
    uint32_t op = p->nops ? p->ops[p->nops - 1].name : PROF_CTX_NO_OP;
    if (op >= PROF_CTX_NO_OP) op = PROF_CTX_NO_OP;
    p->ctx = prof_ctx_make(step, top_path(p), op);
}

#ifndef TF_NO_PROF_HOOKS
void tf_region_push(tf_prof *p, const char *name) {
    tf_marker_push(name);
    if (!p) return;
    if (p->depth == PROF_MAX_DEPTH || p->overflow) {
        p->overflow++;
        return;
    }
    uint32_t id = prof_intern_id(&p->names, name);
    uint32_t path = id == PROF_NONE ? PROF_NONE : prof_path_child(p, top_path(p), id);
    if (path == PROF_NONE) { /* out of memory: keep the stack balanced, record nothing */
        p->oom = 1;
        p->overflow++;
        return;
    }
    p->stack[p->depth].path = path;
    if (prof_arena_step(p)) {
        prof_arena_touch(p);
        p->stack[p->depth].mem_in = p->stack[p->depth].mem_hi = *p->arena_top;
    }
    p->stack[p->depth].start = prof_now_ns();
    p->depth++;
    if (p->gpu) update_ctx(p);
}

void tf_region_pop(tf_prof *p) {
    tf_marker_pop();
    if (!p) return;
    if (p->overflow) {
        p->overflow--;
        return;
    }
    if (p->depth == 0) {
        p->unbalanced++;
        return;
    }
    int64_t end = prof_now_ns();
    p->depth--;
    uint32_t path = p->stack[p->depth].path;
    int64_t start = p->stack[p->depth].start;
    if (prof_arena_step(p)) {
        prof_arena_touch(p);
        prof_path *q = &p->paths[path];
        size_t in = p->stack[p->depth].mem_in, hi = p->stack[p->depth].mem_hi;
        if (*p->arena_top > hi) hi = *p->arena_top;
        q->arena_kept += (int64_t)*p->arena_top - (int64_t)in;
        if (hi - in > q->arena_hi) q->arena_hi = hi - in;
        q->arena_seen = 1;
        if (p->depth && hi > p->stack[p->depth - 1].mem_hi) p->stack[p->depth - 1].mem_hi = hi;
    }
    if (p->gpu) update_ctx(p);
    if (!collecting(p, path)) return;
    prof_path *q = &p->paths[path];
    q->calls++;
    q->host_ns += end - start;
    if (p->steps[p->cur_step].traced) {
        if (p->nrev == p->cap_rev &&
            prof_reserve((void **)&p->rev, &p->cap_rev, p->nrev + 1, sizeof *p->rev)) {
            p->oom = 1;
            return;
        }
        p->rev[p->nrev++] = (prof_region_ev){path, (uint32_t)p->cur_step, start, end};
    }
}

void tf_prof_op_begin(tf_prof *p, const char *name) {
    if (!p) return;
    if (p->nops == PROF_MAX_OPS) {
        p->ops_overflow++;
        return;
    }
    int n = p->nops;
    p->ops[n].counted = 0;
    if (!p->gpu && !collecting(p, top_path(p))) {
        /* CPU, not collected here: no interning, no clock */
        p->ops[n].name = PROF_NONE;
        p->nops++;
        return;
    }
    uint32_t id = prof_intern_id(&p->names, name);
    if (id == PROF_NONE) {
        p->oom = 1;
        p->ops_overflow++;
        return;
    }
    p->nops++;
    p->ops[n].name = id;
    if (p->gpu) {
        update_ctx(p);
        /* CUDA --counters: a profiling window around a matching op */
        if (tf_prof_counter_step(p)) p->ops[n].counted = prof_gpu_counters_op_begin(p);
        return;
    }
    if (p->evt) {
        prof_evt_op_begin(p, n);
        return;
    }
    /* CPU: counters around matching ops, read before the clock starts */
    if (p->cpuc && prof_name_matches(p, id)) {
        prof_cpuc_begin(p->cpuc);
        p->ops[n].counted = 1;
    }
    p->ops[n].start = prof_now_ns();
}

void tf_prof_op_end(tf_prof *p) {
    if (!p) return;
    if (p->ops_overflow) {
        p->ops_overflow--;
        return;
    }
    if (p->nops == 0) {
        p->unbalanced++;
        return;
    }
    int n = --p->nops;
    if (p->gpu) {
        if (p->ops[n].counted) prof_gpu_counters_op_end(p);
        update_ctx(p);
        return;
    }
    if (p->ops[n].name == PROF_NONE) return; /* was not collected at begin */
    if (p->evt) {
        if (collecting(p, top_path(p))) prof_evt_op_end(p, n, p->ops[n].name, top_path(p));
        return;
    }
    int64_t end = prof_now_ns();
    if (p->ops[n].counted) prof_cpuc_end(p->cpuc, p->ops[n].name);
    uint32_t path = top_path(p);
    if (!collecting(p, path)) return;
    prof_launch l;
    memset(&l, 0, sizeof l);
    l.name = l.op = p->ops[n].name;
    l.path = path;
    l.step = (uint32_t)p->cur_step;
    l.kind = PROF_KIND_KERNEL;
    l.start = p->ops[n].start;
    l.end = end;
    l.regs = l.smem = -1;
    prof_record_launch(p, &l);
}
#endif /* TF_NO_PROF_HOOKS */

/* The event timer times the ops the host issues: a replayed graph issues none. */
int tf_prof_wants_eager(const tf_prof *p) {
    return p && (p->evt || prof_gpu_counters_pending(p));
}

int tf_prof_counter_step(const tf_prof *p) {
    return p && p->in_step && p->steps[p->cur_step].counter_step;
}

void tf_prof_step_begin(tf_prof *p, long step, int warmup) {
    if (!p) return;
    if (p->in_step) tf_prof_step_end(p, p->steps[p->cur_step].step); /* missing end */
    if (prof_device_timed(p) && p->out_dir && !p->ceil_measured) {
        /* the roofline's ceilings on the run's device, before its first step
         * (outside every step, so CUPTI's records of them are not collected) */
        p->ceil_measured = 1;
        if (prof_gpu_ceilings(&p->ceil) != 0) memset(&p->ceil, 0, sizeof p->ceil);
    }
    if (p->nsteps == p->cap_steps &&
        prof_reserve((void **)&p->steps, &p->cap_steps, p->nsteps + 1, sizeof *p->steps)) {
        p->oom = 1;
        return;
    }
    prof_step *s = &p->steps[p->nsteps];
    memset(s, 0, sizeof *s);
    s->step = step;
    s->warmup = warmup != 0;
    int collect = !warmup || p->include_warmup;
    if (collect && prof_gpu_counters_pending(p) && prof_gpu_counters_ready(p)) {
        /* CUDA: the first collectable step after a matching kernel was seen
         * measures counters (kernel replay distorts its timings, so it is not
         * a timed step) */
        s->counter_step = 1;
        collect = 0;
    }
    s->collected = collect;
    if (collect) {
        p->steps_collected++;
        if (p->steps_traced < (size_t)p->trace_max_steps) {
            s->traced = 1;
            p->steps_traced++;
        } else {
            p->trace_cap_hit = 1;
        }
    }
    p->cur_step = p->nsteps++;
    p->in_step = 1;
    if (p->gpu) {
        update_ctx(p);
        if (s->counter_step) prof_gpu_counters_step_begin(p);
    }
    s->start = prof_now_ns();
    if (p->evt) prof_evt_step_begin(p);
}

void tf_prof_step_end(tf_prof *p, long step) {
    (void)step;
    if (!p || !p->in_step) return;
    prof_step *s = &p->steps[p->cur_step];
    s->end = prof_now_ns();
    if (p->evt) prof_evt_step_end(p); /* records into this step */
    p->in_step = 0;
    if (p->gpu) {
        if (s->counter_step) {
            prof_gpu_counters_step_end(p);
            p->steps_collected_counter_done = 1;
        } else if (prof_gpu_counters_pending(p)) {
            prof_gpu_counters_learning_done(p); /* a step issued kernels, none matched */
        }
        update_ctx(p);
        prof_gpu_drain(p, 0);
    }
    /* After the first traced step its launch count sizes the whole trace
     * window, so later traced steps record without reallocating. */
    if (s->traced && !p->reserved_trace) {
        p->reserved_trace = 1;
        size_t want = p->nlaunch + (size_t)(p->trace_max_steps - 1) * (size_t)s->launches * 11 / 10;
        prof_reserve((void **)&p->launches, &p->cap_launch, want, sizeof *p->launches);
        size_t rwant = p->nrev * (size_t)p->trace_max_steps * 11 / 10;
        prof_reserve((void **)&p->rev, &p->cap_rev, rwant, sizeof *p->rev);
    }
}
