/* What a rocprofv3 --stats CSV holds. All its summaries share the kernel
 * summary's header ("Name","Calls","TotalDurationNs",...), so compare tells
 * them apart by the file's name (<prefix>_memory_copy_stats.csv,
 * _hip_api_stats.csv, ...) and, for a renamed file, by its rows: copy
 * directions, allocation and scratch operations, HIP and HSA calls, tracing
 * domains are no kernels. */
#include <string.h>

#include "report/compare_rocprof.h"

typedef struct {
    const char *suffix, *what;
} stats_kind;

/* rocprofv3's summaries other than kernel_stats.csv */
static const stats_kind kinds[] = {
    {"memory_copy_stats.csv", "memory copy"},
    {"memory_allocation_stats.csv", "memory allocation"},
    {"scratch_memory_stats.csv", "scratch memory"},
    {"hip_api_stats.csv", "HIP API"},
    {"hsa_api_stats.csv", "HSA API"},
    {"marker_api_stats.csv", "marker API"},
    {"rccl_api_stats.csv", "RCCL API"},
    {"rocdecode_api_stats.csv", "rocDecode API"},
    {"rocjpeg_api_stats.csv", "rocJPEG API"},
    {"domain_stats.csv", "tracing domain"},
    {"api_stats.csv", "API"}, /* any other API's */
};

const char *tf_cmp_stats_kind_of_path(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t lb = strlen(base);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t ls = strlen(kinds[i].suffix);
        /* the whole name, or after a '_' or '.' of a prefix (pid, -o name) */
        if (lb >= ls && !strcmp(base + lb - ls, kinds[i].suffix) &&
            (lb == ls || base[lb - ls - 1] == '_' || base[lb - ls - 1] == '.'))
            return kinds[i].what;
    }
    return NULL;
}

static int upper_id(const char *s) { /* [A-Z0-9_]+ */
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

static const char *kind_of_row(const char *name) {
    if (!strncmp(name, "MEMORY_COPY_", 12)) return "memory copy";
    if (!strncmp(name, "MEMORY_ALLOCATION_", 18)) return "memory allocation";
    if (!strncmp(name, "SCRATCH_MEMORY_", 15)) return "scratch memory";
    if (!strncmp(name, "hsa_", 4)) return "HSA API";
    if (!strncmp(name, "hip", 3) && ((name[3] >= 'A' && name[3] <= 'Z') || name[3] == '_'))
        return "HIP API";
    if (!strncmp(name, "__hip", 5)) return "HIP API";
    if (upper_id(name) &&
        (!strcmp(name, "KERNEL_DISPATCH") || strstr(name, "_API") || !strcmp(name, "MEMORY_COPY")))
        return "tracing domain";
    return NULL;
}

const char *tf_cmp_stats_kind_of_rows(const char *sofar, const char *name, int first) {
    const char *rk = kind_of_row(name);
    if (first) return rk;
    return sofar && rk && !strcmp(sofar, rk) ? sofar : NULL;
}
