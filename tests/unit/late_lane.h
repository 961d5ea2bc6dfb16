/* The late lane: the CPU backend wrapped with a weight-gradient lane that
 * runs each wgrad GEMM as late as the op table's contract allows, only when
 * a wait (or a sync) covers it, so that a missing wait shows as a wrong
 * result. Shared by test_lane (which also ignores one chosen wait) and the
 * two-rank dist_lane test. Header-only: one lane per test program. */
#ifndef TF_LATE_LANE_H
#define TF_LATE_LANE_H

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"

typedef struct {
    tf_gemm_args a;
    const char *name;
} late_lane_gemm;

static struct {
    const tf_ops *cpu;
    tf_ops ops;
    int on;
    late_lane_gemm *q;
    long nq, cap, done;
    long waits;        /* waits that covered queued GEMMs */
    long drop;         /* the wait (by its index among those) to ignore; -1 none */
    long left_at_sync; /* GEMMs still queued at a sync */
} L;

static void late_lane_run(tf_backend *be, long upto) {
    for (; L.done < upto; L.done++) L.cpu->gemm(be, &L.q[L.done].a, L.q[L.done].name);
}

static void late_lane_gemm_op(tf_backend *be, const tf_gemm_args *a, const char *name) {
    if (!L.on || !a->wgrad) {
        L.cpu->gemm(be, a, name);
        return;
    }
    if (L.nq == L.cap) {
        L.cap = L.cap ? 2 * L.cap : 256;
        L.q = realloc(L.q, (size_t)L.cap * sizeof *L.q);
        if (!L.q) {
            fprintf(stderr, "late lane: out of memory\n");
            exit(1);
        }
    }
    L.q[L.nq++] = (late_lane_gemm){*a, name};
}

static int late_lane_enable(tf_backend *be) {
    (void)be;
    L.on = 1;
    return 0;
}
static long late_lane_mark(tf_backend *be) {
    (void)be;
    return L.nq;
}
static void late_lane_wait(tf_backend *be, long upto) {
    if (upto < 0 || upto > L.nq) upto = L.nq;
    if (upto <= L.done) return; /* covered already: no wait on a device either */
    if (L.waits++ == L.drop) return;
    late_lane_run(be, upto);
}
static void late_lane_sync(tf_backend *be) {
    L.left_at_sync += L.nq - L.done;
    late_lane_run(be, L.nq);
    L.cpu->sync(be);
}

/* An empty queue and fresh counts; `drop` as in L.drop */
static void late_lane_reset(long drop) {
    L.nq = L.done = L.waits = L.left_at_sync = 0;
    L.drop = drop;
}

/* The CPU backend's ops with the lane in front (the caps say it has one) */
static const tf_ops *late_lane_wrap(const tf_ops *cpu, tf_backend_caps *caps) {
    L.cpu = cpu;
    L.ops = *cpu;
    L.ops.gemm = late_lane_gemm_op;
    L.ops.wgrad_enable = late_lane_enable;
    L.ops.wgrad_mark = late_lane_mark;
    L.ops.wgrad_wait = late_lane_wait;
    L.ops.sync = late_lane_sync;
    caps->wgrad_lane = 1;
    return &L.ops;
}

#endif
