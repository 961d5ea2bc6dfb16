/* Backend creation: picks the CPU or the GPU backend for a kind and asks the
 * one created what it prefers (ops->caps). The GPU backend is one source
 * built by nvcc (kind cuda) or by hipcc (kind hip): a build has one of them. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"

int tf_backend_create(tf_backend_kind *kind, const tf_backend_opts *o, tf_backend **be,
                      const tf_ops **ops, tf_backend_caps *caps, char *err, size_t errlen) {
    char why[1024] = ""; /* the GPU module's load error names paths */
    *be = NULL;
    *ops = NULL;
    tf_backend_kind k = *kind;
    const tf_backend_kind gpu = tf_built_with_hip() ? TF_BACKEND_HIP : TF_BACKEND_CUDA;
    if (k == TF_BACKEND_AUTO) k = tf_gpu_auto_available(why, sizeof why) ? gpu : TF_BACKEND_CPU;
    int rc;
    if (k == TF_BACKEND_CUDA || k == TF_BACKEND_HIP) {
        const char *name = k == TF_BACKEND_HIP ? "hip" : "cuda";
        if (k != gpu) {
            snprintf(err, errlen, "--backend %s: this build has no %s backend; use --backend cpu",
                     name, k == TF_BACKEND_HIP ? "HIP" : "CUDA");
            return 1;
        }
        if (!tf_cuda_backend_available(why, sizeof why)) {
            snprintf(err, errlen, "--backend %s: no usable %s device (%s); use --backend cpu",
                     name, k == TF_BACKEND_HIP ? "AMD GPU" : "CUDA", why);
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
