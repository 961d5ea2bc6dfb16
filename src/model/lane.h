/* The weight-gradient lane's hazards, derived by the executor.
 *
 * A GEMM on the lane (ops.h wgrad_*) runs after the main queue's work issued
 * before it, and beside what is issued after it, until a wgrad_wait covers
 * it. So a later main-queue op may not write what a pending lane GEMM reads
 * or writes, nor read what it writes. Every op wrapper of exec.c states the
 * memory its op reads and writes (tf_span); the executor keeps the lane's
 * pending GEMMs with theirs and, before a main-queue op that conflicts with
 * one, makes the main queue wait for the lane up to the last conflicting
 * GEMM (the lane runs in order), and, where that GEMM's module has ended,
 * up to the module's last GEMM: one wait where a module's temporaries are
 * reused instead of one per GEMM. Arena reuse is such a write, so it needs
 * no rule of its own; the modules state no waits.
 *
 * Work on a queue other than the main one (a bucket's all-reduce on the
 * communication stream) is checked against the same pending GEMMs
 * (tf_x_lane_ticket): that queue waits for the lane itself, up to the last
 * conflicting GEMM, and the main queue does not wait. */
#ifndef TF_MODEL_LANE_H
#define TF_MODEL_LANE_H

#include <stddef.h>
#include <stdint.h>

/* bytes [lo, hi) of backend memory; lo == hi: none */
typedef struct {
    uintptr_t lo, hi;
} tf_span;

#define TF_LANE_PENDING 128 /* pending lane GEMMs kept; beyond, the lane is joined */

typedef struct {
    long ticket;   /* wgrad_wait(ticket) covers it */
    int module;    /* the backward module that issued it (exec.h bwd_module) */
    tf_span r[4]; /* A, B, R, aux */
    tf_span w;    /* C (read too: weight gradients accumulate) */
} tf_lane_gemm;

typedef struct {
    tf_lane_gemm q[TF_LANE_PENDING];
    int n;       /* pending, oldest first */
    long waits;  /* waits issued so far */
} tf_lane;

/* n bytes at p (NULL: none) */
static inline tf_span tf_span_b(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p;
    return (tf_span){lo, p ? lo + n : lo};
}
/* n floats at p (NULL: none) */
static inline tf_span tf_span_f(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p;
    return (tf_span){lo, p ? lo + n * sizeof(float) : lo};
}

#endif
