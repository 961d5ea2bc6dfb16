/* The backends as one table: each row says what the backend is called, how
 * to ask whether it is usable, and how to create, describe and destroy one.
 * Everything that chooses, names or lists backends (the CLI, the config
 * reader and validation, the profiler) goes through this table, so a new
 * backend is its folder, its tf_backend_kind and its row in registry.c.
 *
 * A build compiles one GPU backend at most (CUDA with nvcc or HIP with
 * hipcc: the same sources), yet every row is always in the table: a row the
 * build lacks answers built() 0, and tf_backend_usable and tf_backend_brief
 * then say so in words instead of calling its functions. */
#ifndef TF_BACKEND_REGISTRY_H
#define TF_BACKEND_REGISTRY_H

#include <stddef.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    tf_backend_kind kind;
    const char *name;  /* --backend's word and the config's: "cpu" */
    const char *title; /* in sentences: "CPU", "CUDA", "HIP" */
    /* a device with memory of its own: GPU-only switches (--graph,
     * --precision tf32, --gpu-timer) apply, and auto tries it before the
     * CPU; the words of messages about it */
    int gpu;
    const char *device;    /* "no usable %s device": "CUDA", "AMD GPU" */
    const char *absent;    /* why it is not available in a build without it */
    const char *configure; /* the build that has it: "a build configured with %s" */
    const char *found;     /* --backend auto's note when it picks it */
    const char *details;   /* appended to auto's note when it is built but unusable */
    /* the profiler: CUPTI (NVIDIA's activity records and counters) can time
     * its ops; without it a GPU's ops are timed by events on its queues
     * (ops->queue), and these say where the rest comes from */
    int cupti;
    const char *events;   /* the events' name: "hipEvents" */
    const char *counters; /* the tools that read its hardware counters */
    const char *records;  /* where kernel records come from */

    int (*built)(void);                    /* compiled into this build */
    int (*available)(char *why, size_t n); /* 1 when usable, else 0 with why */
    /* --backend auto: 1 when a device is there (asked cheaply first); NULL
     * for the CPU, the fallback */
    int (*detect)(char *why, size_t n);
    void (*brief)(char *out, size_t n); /* why it is unusable, in a few words */
    int (*create)(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o, char *err,
                  size_t errlen);
    void (*describe)(const tf_backend *be, char *out, size_t n); /* one line for `validate` */
    void (*destroy)(tf_backend *be);
} tf_backend_entry;

/* The rows in their order (cpu, cuda, hip): i from 0; NULL past the last. */
const tf_backend_entry *tf_backend_at(size_t i);
/* The row of a kind; NULL for TF_BACKEND_AUTO and for a value no row has. */
const tf_backend_entry *tf_backend_find(tf_backend_kind kind);
/* A backend's word, "auto" for TF_BACKEND_AUTO, "?" for anything else. */
const char *tf_backend_kind_name(tf_backend_kind kind);
/* A word to its kind ("auto" included): 0, else 1 with one line in err
 * naming the word and the accepted ones. */
int tf_backend_parse_name(const char *name, tf_backend_kind *kind, char *err, size_t errlen);
/* The accepted words for a message: "cpu, cuda, hip or auto". */
void tf_backend_names(char *out, size_t n);
/* The accepted words joined by sep, auto last: "cpu|cuda|hip|auto". */
void tf_backend_words(char *out, size_t n, const char *sep);
/* The words of this build's backends, joined by sep: "cpu, cuda". */
void tf_backend_built_names(char *out, size_t n, const char *sep);

/* This build's GPU backend: the built GPU row, else the first GPU row (for
 * which tf_backend_usable and tf_backend_brief then say the build has none). */
const tf_backend_entry *tf_backend_gpu(void);
/* e->available where the build has e, else 0 with why = e->absent. */
int tf_backend_usable(const tf_backend_entry *e, char *why, size_t n);
/* e->brief where the build has e, else "this build has no <title> backend". */
void tf_backend_brief(const tf_backend_entry *e, char *out, size_t n);
/* --backend auto: the first built row whose detect finds a device, else the
 * CPU's row. why: the last refusal's words. */
const tf_backend_entry *tf_backend_auto(char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
