/* The backend table (registry.h). The GPU rows share one set of entry
 * points, tf_cuda_* (backend.h): the GPU module's loader in a GPU build,
 * cuda_stub.c otherwise; built() tells which row a build has. */
#include <stdio.h>
#include <string.h>

#include "backend/registry.h"

static int always(void) { return 1; }
static int cpu_available(char *why, size_t n) {
    if (why && n) why[0] = '\0';
    return 1;
}
static void cpu_brief(char *out, size_t n) {
    if (out && n) out[0] = '\0';
}

static const tf_backend_entry k_backends[] = {
    {.kind = TF_BACKEND_CPU,
     .name = "cpu",
     .title = "CPU",
     .built = always,
     .available = cpu_available,
     .brief = cpu_brief,
     .create = tf_cpu_backend_create,
     .describe = tf_cpu_backend_describe,
     .destroy = tf_cpu_backend_destroy},
    {.kind = TF_BACKEND_CUDA,
     .name = "cuda",
     .title = "CUDA",
     .gpu = 1,
     .device = "CUDA",
     .absent = "this build has no CUDA backend (no CUDA compiler found at build time)",
     .configure = "CUDA",
     .found = "a CUDA device is usable",
     .details = "; details: tinyfold validate",
     .cupti = 1,
     .events = "CUDA events",
     .built = tf_built_with_cuda,
     .available = tf_cuda_backend_available,
     .detect = tf_gpu_auto_available,
     .brief = tf_cuda_unavailable_brief,
     .create = tf_cuda_backend_create,
     .describe = tf_cuda_backend_describe,
     .destroy = tf_cuda_backend_destroy},
    {.kind = TF_BACKEND_HIP,
     .name = "hip",
     .title = "HIP",
     .gpu = 1,
     .device = "AMD GPU",
     .absent = "this build has no HIP backend (configure with cmake -DTF_HIP=ON where hipcc is "
               "installed)",
     .configure = "cmake -DTF_HIP=ON",
     .found = "an AMD GPU is usable (HIP)",
     .details = "",
     .events = "hipEvents",
     .counters = "rocprofv3 --pmc or rocprof-compute (docs/amd.md)",
     .records = "rocprofv3 --kernel-trace --stats, then tinyfold compare RUN/ KERNEL_STATS.csv",
     .built = tf_built_with_hip,
     .available = tf_cuda_backend_available,
     .detect = tf_gpu_auto_available,
     .brief = tf_cuda_unavailable_brief,
     .create = tf_cuda_backend_create,
     .describe = tf_cuda_backend_describe,
     .destroy = tf_cuda_backend_destroy},
};
#define N_BACKENDS (sizeof k_backends / sizeof k_backends[0])

const tf_backend_entry *tf_backend_at(size_t i) { return i < N_BACKENDS ? &k_backends[i] : NULL; }

const tf_backend_entry *tf_backend_find(tf_backend_kind kind) {
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (k_backends[i].kind == kind) return &k_backends[i];
    return NULL;
}

const char *tf_backend_kind_name(tf_backend_kind kind) {
    const tf_backend_entry *e = tf_backend_find(kind);
    return e ? e->name : kind == TF_BACKEND_AUTO ? "auto" : "?";
}

/* every row's word, then "auto" after last (cut to n, terminated) */
static void join_words(char *out, size_t n, const char *sep, const char *last) {
    if (!out || !n) return;
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_BACKENDS && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? sep : "", k_backends[i].name);
    if (len < n) snprintf(out + len, n - len, "%sauto", last);
}

void tf_backend_names(char *out, size_t n) { join_words(out, n, ", ", " or "); }

void tf_backend_words(char *out, size_t n, const char *sep) { join_words(out, n, sep, sep); }

void tf_backend_built_names(char *out, size_t n, const char *sep) {
    if (!out || !n) return;
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_BACKENDS && len < n; i++)
        if (k_backends[i].built())
            len += (size_t)snprintf(out + len, n - len, "%s%s", len ? sep : "", k_backends[i].name);
}

int tf_backend_parse_name(const char *name, tf_backend_kind *kind, char *err, size_t errlen) {
    if (name) {
        if (strcmp(name, "auto") == 0) {
            *kind = TF_BACKEND_AUTO;
            return 0;
        }
        for (size_t i = 0; i < N_BACKENDS; i++)
            if (strcmp(name, k_backends[i].name) == 0) {
                *kind = k_backends[i].kind;
                return 0;
            }
    }
    if (err && errlen) {
        char names[128];
        tf_backend_names(names, sizeof names);
        snprintf(err, errlen, "backend '%.64s' is not known: expected %s", name ? name : "(null)",
                 names);
    }
    return 1;
}

const tf_backend_entry *tf_backend_gpu(void) {
    const tf_backend_entry *first = NULL;
    for (size_t i = 0; i < N_BACKENDS; i++) {
        const tf_backend_entry *e = &k_backends[i];
        if (!e->gpu) continue;
        if (e->built()) return e;
        if (!first) first = e;
    }
    return first;
}

int tf_backend_usable(const tf_backend_entry *e, char *why, size_t n) {
    if (e->built()) return e->available(why, n);
    if (why && n) snprintf(why, n, "%s", e->absent);
    return 0;
}

void tf_backend_brief(const tf_backend_entry *e, char *out, size_t n) {
    if (e->built())
        e->brief(out, n);
    else if (out && n)
        snprintf(out, n, "this build has no %s backend", e->title);
}

const tf_backend_entry *tf_backend_auto(char *why, size_t n) {
    for (size_t i = 0; i < N_BACKENDS; i++) {
        const tf_backend_entry *e = &k_backends[i];
        if (e->detect && e->built() && e->detect(why, n)) return e;
    }
    return tf_backend_find(TF_BACKEND_CPU);
}
