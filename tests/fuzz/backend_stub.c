/* The CPU backend's entry points for the readers' fuzz targets, which link
 * the backend table (src/backend/registry.c: the config reader checks
 * backend names against it) but no backend: creating one always fails. */
#include <stdio.h>

#include "backend/backend.h"

int tf_cpu_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o,
                          char *err, size_t errlen)
{
    (void)o;
    *be = NULL;
    *ops = NULL;
    if (err && errlen) snprintf(err, errlen, "no backend in a fuzz target");
    return 1;
}

void tf_cpu_backend_describe(const tf_backend *be, char *out, size_t n)
{
    (void)be;
    if (out && n) out[0] = '\0';
}

void tf_cpu_backend_destroy(tf_backend *be) { (void)be; }
