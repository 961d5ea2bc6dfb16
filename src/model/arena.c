#include "model/arena.h"

#include <stdint.h>

#define TF_ARENA_ALIGN 256 /* bytes: keeps vector loads and cuBLAS happy */

/* While planning, base is NULL and we hand out a fake, never-dereferenced
 * address above a guard page so that NULL checks in the model still work. */
#define TF_ARENA_FAKE_BASE ((uintptr_t)1 << 20)

float *tf_arena_alloc(tf_arena *a, size_t n_floats) {
    return tf_arena_alloc_bytes(a, n_floats * sizeof(float));
}

void *tf_arena_alloc_bytes(tf_arena *a, size_t n) {
    size_t bytes = (n + TF_ARENA_ALIGN - 1) & ~(size_t)(TF_ARENA_ALIGN - 1);
    if (bytes == 0) bytes = TF_ARENA_ALIGN;
    size_t at = a->top;
    if (a->base && at + bytes > a->cap) {
        a->overflow = 1;
        return NULL;
    }
    a->top += bytes;
    if (a->top > a->peak) a->peak = a->top;
    uintptr_t base = a->base ? (uintptr_t)a->base : TF_ARENA_FAKE_BASE;
    return (void *)(base + at);
}
