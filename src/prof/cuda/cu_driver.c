#define _POSIX_C_SOURCE 200809L
#include "prof/cuda/cu_driver.h"

#include <dlfcn.h>

typedef CUresult (*ctx_get_current_fn)(CUcontext *);

CUresult tf_cu_ctx_get_current(CUcontext *ctx) {
    static ctx_get_current_fn fn;
    if (!fn) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return CUDA_ERROR_NOT_INITIALIZED;
        /* POSIX: casting through a union avoids the object-to-function pointer warning */
        union { void *p; ctx_get_current_fn f; } u = {dlsym(h, "cuCtxGetCurrent")};
        if (!u.p) return CUDA_ERROR_NOT_FOUND;
        fn = u.f;
    }
    return fn(ctx);
}
