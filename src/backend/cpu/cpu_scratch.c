/* The CPU backend's host scratch: a stack of growable buffers
 * (cpu_internal.h, tf_cpu_scratch), owned by the backend and freed with it. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"

void *tf_cpu_scratch(tf_backend *be, size_t bytes) {
    if (be->scratch_top >= TF_CPU_SCRATCH_DEPTH) {
        fprintf(stderr, "tinyfold: internal error: cpu backend: scratch stack deeper than %d\n",
                TF_CPU_SCRATCH_DEPTH);
        abort();
    }
    void **p = &be->scratch[be->scratch_top].p;
    size_t *have = &be->scratch[be->scratch_top].bytes;
    if (bytes <= *have) return *p;
    /* some headroom, rounded up to the alignment */
    size_t n = (bytes + bytes / 4 + TF_CPU_ALIGN - 1) / TF_CPU_ALIGN * TF_CPU_ALIGN;
    void *s = aligned_alloc(TF_CPU_ALIGN, n);
    if (!s) {
        fprintf(stderr, "tinyfold: cpu backend: out of host memory for %zu bytes of scratch\n", n);
        abort();
    }
    free(*p);
    *p = s;
    *have = n;
    return s;
}

void *tf_cpu_scratch_push(tf_backend *be, size_t bytes) {
    void *s = tf_cpu_scratch(be, bytes);
    be->scratch_top++;
    return s;
}

void tf_cpu_scratch_pop(tf_backend *be) { be->scratch_top--; }

void tf_cpu_scratch_free(tf_backend *be) {
    for (int k = 0; k < TF_CPU_SCRATCH_DEPTH; k++)
        free(be->scratch[k].p);
}
