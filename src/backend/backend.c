/* Backend creation: picks the CPU or the CUDA backend for a kind and asks the
 * one created what it prefers (ops->caps). */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"

int tf_backend_create(tf_backend_kind *kind, const tf_backend_opts *o, tf_backend **be,
                      const tf_ops **ops, tf_backend_caps *caps, char *err, size_t errlen) {
    char why[256] = "";
    *be = NULL;
    *ops = NULL;
    tf_backend_kind k = *kind;
    if (k == TF_BACKEND_AUTO)
        k = tf_cuda_backend_available(why, sizeof why) ? TF_BACKEND_CUDA : TF_BACKEND_CPU;
    int rc;
    if (k == TF_BACKEND_CUDA) {
        if (!tf_cuda_backend_available(why, sizeof why)) {
            snprintf(err, errlen, "--backend cuda: no usable CUDA device (%s); use --backend cpu",
                     why);
            return 1;
        }
        rc = tf_cuda_backend_create(be, ops, o, err, errlen);
    } else {
        rc = tf_cpu_backend_create(be, ops, o, err, errlen);
    }
    if (rc) return rc;
    *kind = k;
    if (caps) {
        memset(caps, 0, sizeof *caps);
        (*ops)->caps(*be, caps);
    }
    return 0;
}
