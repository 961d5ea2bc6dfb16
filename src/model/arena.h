/* The activation arena: one allocation, planned before step 1.
 *
 * The model asks for activation buffers with tf_arena_alloc in the order it
 * computes; backward temporaries are released with mark/release (a stack).
 * Planning runs the same forward+backward code with `planning` set (no op is
 * executed, pointers are fake offsets), which yields the exact peak; the real
 * arena is then allocated once. Each step resets the arena, so every step gets
 * the same addresses (a precondition of CUDA graph capture). */
#ifndef TF_ARENA_H
#define TF_ARENA_H

#include <stddef.h>

typedef struct {
    char *base;   /* NULL while planning */
    size_t top;   /* bytes in use */
    size_t peak;  /* high-water mark */
    size_t cap;   /* bytes available (0 while planning = unbounded) */
    int overflow; /* set when an allocation did not fit (a planning bug) */
} tf_arena;

float *tf_arena_alloc(tf_arena *a, size_t n_floats);
void *tf_arena_alloc_bytes(tf_arena *a, size_t bytes);
static inline size_t tf_arena_mark(const tf_arena *a) { return a->top; }
static inline void tf_arena_release(tf_arena *a, size_t mark) { a->top = mark; }
static inline void tf_arena_reset(tf_arena *a) { a->top = 0; }

#endif
