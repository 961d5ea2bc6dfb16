/* The GPU event timer's bookkeeping (gpu_timer.h): event pairs per op,
 * resolved into op records after the step. */
#include <stdlib.h>
#include <string.h>

#include "prof/gpu_timer.h"
#include "prof/prof_internal.h"

void prof_evt_step_begin(tf_prof *p) {
    prof_evt *e = p->evt;
    e->ev_step = -1;
    e->nspans = 0;
    e->last_lane_end = -1;
    if (!e->have_clk || !p->steps[p->cur_step].collected) return;
    e->clk.rewind(e->clk.ctx);
    e->ev_step = e->clk.record(e->clk.ctx, 0);
    /* the previous step ended with a wait: the queue is idle and the event
     * happens as it is recorded, so it anchors the step on the host clock */
    e->host_step = prof_now_ns();
    if (e->ev_step < 0) e->failed = 1;
}

void prof_evt_op_begin(tf_prof *p, int slot) {
    prof_evt *e = p->evt;
    e->open[slot].ev = e->ev_step < 0 ? -1 : e->clk.record(e->clk.ctx, 0);
    e->open[slot].lane = e->ev_step < 0 ? 0 : e->clk.lane_ops(e->clk.ctx);
}

void prof_evt_op_end(tf_prof *p, int slot, uint32_t name, uint32_t path) {
    prof_evt *e = p->evt;
    if (e->ev_step < 0) return;
    int begin = e->open[slot].ev;
    int lane = e->clk.lane_ops(e->clk.ctx) != e->open[slot].lane;
    int end = begin < 0 ? -1 : e->clk.record(e->clk.ctx, lane);
    if (end < 0 || (e->nspans == e->cap_spans &&
                    prof_reserve((void **)&e->spans, &e->cap_spans, e->nspans + 1,
                                 sizeof *e->spans))) {
        e->dropped++;
        return;
    }
    e->spans[e->nspans++] = (prof_evt_span){name, path, (uint32_t)p->cur_step, begin, end,
                                            lane ? e->last_lane_end : -1, (uint8_t)lane};
    if (lane) e->last_lane_end = end;
}

void prof_evt_step_end(tf_prof *p) {
    prof_evt *e = p->evt;
    int ev0 = e->ev_step;
    size_t n = e->nspans;
    e->ev_step = -1;
    e->nspans = 0;
    if (ev0 < 0 || n == 0) return;
    if (e->clk.wait(e->clk.ctx) != 0) {
        e->failed = 1;
        e->dropped += n;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const prof_evt_span *s = &e->spans[i];
        int64_t b = 0, t = 0, a = 0;
        if (e->clk.elapsed_ns(e->clk.ctx, ev0, s->ev_begin, &b) ||
            e->clk.elapsed_ns(e->clk.ctx, ev0, s->ev_end, &t) ||
            (s->ev_after >= 0 && e->clk.elapsed_ns(e->clk.ctx, ev0, s->ev_after, &a))) {
            e->failed = 1;
            e->dropped++;
            continue;
        }
        if (s->ev_after >= 0 && a > b) b = a; /* the lane was still busy */
        if (t < b) t = b;
        prof_launch l;
        memset(&l, 0, sizeof l);
        l.name = l.op = s->name;
        l.path = s->path;
        l.step = s->step;
        l.stream = s->lane;
        l.kind = PROF_KIND_KERNEL;
        l.start = e->host_step + b;
        l.end = e->host_step + t;
        l.regs = l.smem = -1;
        prof_record_launch(p, &l);
    }
}

void prof_evt_free(prof_evt *e) {
    if (!e) return;
    if (e->have_clk) e->clk.close(e->clk.ctx);
    free(e->spans);
    free(e);
}

const char *prof_evt_warning(prof_evt *e) {
    if (!e->have_clk) return "GPU event timer: no GPU backend was attached (tf_prof_attach_gpu): "
                             "no op was timed";
    if (!e->dropped && !e->failed) return NULL;
    snprintf(e->warn, sizeof e->warn,
             "GPU event timer: %zu ops were not timed (%s): op statistics are incomplete",
             e->dropped, e->failed ? "an event could not be recorded or read"
                                   : "more than the events a step may hold");
    return e->warn;
}
