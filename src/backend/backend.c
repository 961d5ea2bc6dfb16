/* Backend creation: the options from a config, the registry's row for a
 * kind (registry.h) creates it, and the one created says what it prefers
 * (ops->caps). */
#include <stdio.h>
#include <string.h>

#include "backend/registry.h"

int tf_backend_opts_from_config(tf_backend_opts *o, const tf_config *c, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->threads = c->threads;
    o->device = c->device;
    o->kernel_level = (int)c->impl;
    o->tf32 = c->precision == TF_PREC_TF32;
    if (c->gpu_plan[sizeof c->gpu_plan - 1]) {
        if (err && errlen) snprintf(err, errlen, "--gpu-plan: the spec is not a terminated string");
        return 1;
    }
    return c->gpu_plan[0] ? tf_gpu_plan_parse(c->gpu_plan, &o->gpu_plan, err, errlen) : 0;
}

int tf_backend_create(tf_backend_kind *kind, const tf_backend_opts *o, tf_backend **be,
                      const tf_ops **ops, tf_backend_caps *caps, char *err, size_t errlen) {
    char why[1024] = ""; /* the GPU module's load error names paths */
    *be = NULL;
    *ops = NULL;
    const tf_backend_entry *e =
        *kind == TF_BACKEND_AUTO ? tf_backend_auto(why, sizeof why) : tf_backend_find(*kind);
    if (!e) {
        char names[128];
        tf_backend_names(names, sizeof names);
        snprintf(err, errlen, "--backend: '%d' is not accepted: expected %s", (int)*kind, names);
        return 1;
    }
    if (e->gpu && e != tf_backend_gpu()) {
        snprintf(err, errlen, "--backend %s: this build has no %s backend; use --backend cpu",
                 e->name, e->title);
        return 1;
    }
    if (!tf_backend_usable(e, why, sizeof why)) {
        snprintf(err, errlen, "--backend %s: no usable %s device (%s); use --backend cpu", e->name,
                 e->device, why);
        return 1;
    }
    int rc = e->create(be, ops, o, err, errlen);
    if (rc) return rc;
    *kind = e->kind;
    if (caps) {
        memset(caps, 0, sizeof *caps);
        (*ops)->caps(*be, caps);
    }
    return 0;
}
