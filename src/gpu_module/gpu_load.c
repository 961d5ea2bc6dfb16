/* Loading the GPU module (gpu_module.h) from the executable's directory, and
 * asking the driver alone whether a device exists, so that --backend auto on
 * a machine without a GPU loads no GPU library. */
#define _DEFAULT_SOURCE /* readlink, realpath */
#include "gpu_module/gpu_module.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TF_HAVE_CUDA
#include <cuda.h> /* the driver API's types and CUDA_VERSION; the calls go through dlsym */
#define TF_GPU_NAME "CUDA"
#else
#define TF_GPU_NAME "HIP"
#endif

/* the executable's functions the GPU code calls */
static const tf_gpu_host host = {
    .prof_now_ns = prof_now_ns,
    .prof_reserve = prof_reserve,
    .prof_intern_init = prof_intern_init,
    .prof_intern_free = prof_intern_free,
    .prof_intern_id = prof_intern_id,
    .prof_record_launch = prof_record_launch,
    .dist_abort = tf_dist_abort,
    .dist_bcast = tf_dist_bcast,
};

static const tf_gpu_api *api;
static int tried;
static char load_err[3 * PATH_MAX + 512];

/* the module's path: the executable's directory (dir) and TF_GPU_MODULE_FILE */
static int module_path(char *out, size_t n, char *dir, size_t dn)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    int w = snprintf(dir, dn, "%s", exe);
    if (w <= 0 || (size_t)w >= dn) return -1;
    w = snprintf(out, n, "%s/%s", exe, TF_GPU_MODULE_FILE);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* s as one shell word: as it is when plain, else in single quotes */
static void shell_word(char *out, size_t n, const char *s)
{
    static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789_./+-=:,@%";
    if (s[0] && strspn(s, plain) == strlen(s)) {
        snprintf(out, n, "%s", s);
        return;
    }
    size_t k = 0;
    if (k + 1 < n) out[k++] = '\'';
    for (; *s && k + 5 < n; s++) {
        if (*s == '\'') { /* ' -> '\'' */
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = *s;
        }
    }
    if (k + 1 < n) out[k++] = '\'';
    out[k < n ? k : n - 1] = '\0';
}

/* The module file is not there: the command that builds it (the target
 * tinyfold_gpu of the build directory this executable was configured in). */
static void say_missing(const char *path, const char *dir)
{
    char built[PATH_MAX], here[PATH_MAX], word[2 * PATH_MAX + 8];
    if (!realpath(TF_GPU_MODULE_BUILD_DIR, built)) {
        snprintf(load_err, sizeof load_err,
                 "cannot load the " TF_GPU_NAME " backend: %s does not exist, and the build "
                 "directory this binary came from (%s) is gone: build tinyfold and its GPU "
                 "module together (make build)",
                 path, TF_GPU_MODULE_BUILD_DIR);
        return;
    }
    shell_word(word, sizeof word, built);
    if (realpath(dir, here) && strcmp(built, here) == 0)
        snprintf(load_err, sizeof load_err,
                 "cannot load the " TF_GPU_NAME " backend: %s is not built; build it with: "
                 "cmake --build %s --target tinyfold_gpu",
                 path, word);
    else
        snprintf(load_err, sizeof load_err,
                 "cannot load the " TF_GPU_NAME " backend: %s does not exist; this binary's "
                 "build makes it with: cmake --build %s --target tinyfold_gpu (then copy %s/"
                 TF_GPU_MODULE_FILE " next to the binary)",
                 path, word, built);
}

static const tf_gpu_api *open_module(void)
{
    char path[PATH_MAX], dir[PATH_MAX];
    if (module_path(path, sizeof path, dir, sizeof dir) != 0) {
        snprintf(load_err, sizeof load_err,
                 "cannot load the " TF_GPU_NAME " backend: the executable's directory is not "
                 "readable from /proc/self/exe, where " TF_GPU_MODULE_FILE " is looked for");
        return NULL;
    }
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        say_missing(path, dir);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the file that is missing or does not load: the
         * module itself or one of the GPU libraries it needs */
        const char *e = dlerror();
        snprintf(load_err, sizeof load_err, "cannot load the " TF_GPU_NAME " backend: %s",
                 e ? e : path);
        return NULL;
    }
    union { /* POSIX: an object pointer to a function pointer through a union */
        void *p;
        tf_gpu_module_open_fn f;
    } u = {dlsym(h, TF_GPU_MODULE_ENTRY)};
    const tf_gpu_api *a = u.p ? u.f(&host) : NULL;
    if (!a || a->abi != TF_GPU_MODULE_ABI || a->size != sizeof(tf_gpu_api)) {
        snprintf(load_err, sizeof load_err,
                 "cannot load the " TF_GPU_NAME " backend: %s is not this build's (%s); rebuild "
                 "tinyfold and its module together",
                 path, !a ? "no " TF_GPU_MODULE_ENTRY : "another version of the interface");
        dlclose(h);
        return NULL;
    }
    return a;
}

const tf_gpu_api *tf_gpu_load(char *err, size_t n)
{
    if (!tried) {
        tried = 1;
        api = open_module();
    }
    if (!api && err && n) snprintf(err, n, "%s", load_err);
    return api;
}

const tf_gpu_api *tf_gpu_loaded(void) { return api; }

static void say(char *out, size_t n, const char *s)
{
    if (out && n) snprintf(out, n, "%s", s);
}

#ifdef TF_HAVE_CUDA
typedef CUresult (*cu_init_fn)(unsigned int);
typedef CUresult (*cu_int_fn)(int *);
typedef CUresult (*cu_name_fn)(CUresult, const char **);

int tf_gpu_probe(char *why, size_t n, char *brief, size_t bn)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (why && n) snprintf(why, n, "no usable CUDA device: no CUDA driver (%s)", e ? e : "");
        say(brief, bn, "no GPU found (no CUDA driver)");
        return 0;
    }
    union {
        void *p;
        cu_init_fn f;
    } init = {dlsym(h, "cuInit")};
    union {
        void *p;
        cu_int_fn f;
    } version = {dlsym(h, "cuDriverGetVersion")}, count = {dlsym(h, "cuDeviceGetCount")};
    union {
        void *p;
        cu_name_fn f;
    } name = {dlsym(h, "cuGetErrorName")};
    if (!init.p || !version.p || !count.p || !name.p) {
        if (why && n) snprintf(why, n, "no usable CUDA device: libcuda.so.1 lacks the driver API");
        say(brief, bn, "no usable GPU (libcuda.so.1 lacks the driver API)");
        dlclose(h);
        return 0;
    }
    int v = 0, c = 0;
    const char *what = NULL;
    CUresult r = init.f(0);
    if (r == CUDA_SUCCESS && (r = version.f(&v)) == CUDA_SUCCESS && v < CUDA_VERSION) {
        if (why && n)
            snprintf(why, n, "no usable CUDA device: the driver supports CUDA %d.%d, this build "
                             "needs %d.%d",
                     v / 1000, v % 1000 / 10, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        if (brief && bn)
            snprintf(brief, bn, "no usable GPU (driver too old for CUDA %d)", CUDA_VERSION / 1000);
        dlclose(h);
        return 0;
    }
    if (r == CUDA_SUCCESS) r = count.f(&c);
    if (r != CUDA_SUCCESS || c <= 0) {
        if (r != CUDA_SUCCESS && name.f(r, &what) != CUDA_SUCCESS) what = NULL;
        if (why && n) {
            if (r != CUDA_SUCCESS)
                snprintf(why, n, "no usable CUDA device: the driver says %s (code %d)",
                         what ? what : "an unknown error", (int)r);
            else
                snprintf(why, n, "no usable CUDA device: the driver found 0 devices");
        }
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE)
            say(brief, bn, "no GPU found");
        else if (brief && bn)
            snprintf(brief, bn, "no usable GPU (%s)", what ? what : "driver error");
        dlclose(h);
        return 0;
    }
    /* a device: libcuda stays loaded (the CUDA runtime opens it again) */
    if (why && n) snprintf(why, n, "%d CUDA device(s)", c);
    say(brief, bn, "");
    return 1;
}
#else
int tf_gpu_probe(char *why, size_t n, char *brief, size_t bn)
{
    if (access("/dev/kfd", R_OK | W_OK) == 0) {
        say(why, n, "the ROCm driver's /dev/kfd is there");
        say(brief, bn, "");
        return 1;
    }
    say(why, n, "no ROCm runtime: /dev/kfd is missing or not accessible (the amdgpu kernel "
                "driver is not loaded, or this user is not in the render group)");
    say(brief, bn, "no GPU found (no ROCm driver)");
    return 0;
}
#endif
