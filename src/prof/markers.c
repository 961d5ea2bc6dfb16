/* NVTX / ROCTx markers and the selected regions' profiler switch (markers.h). */
#include "prof/markers.h"

#include <stdio.h>
#include <string.h>

#if defined(TF_HAVE_CUDA) || defined(TF_HAVE_HIP)
#define TF_SEL_MAX 16  /* selected region names */
#define TF_SEL_NAME 64 /* bytes of one name */

static char tf_sel[TF_SEL_MAX][TF_SEL_NAME];
static int tf_nsel;
static int tf_depth;          /* open ranges */
static int tf_sel_at = -1;    /* depth of the selected range that resumed collection */

static int tf_selected(const char *name)
{
    for (int i = 0; i < tf_nsel; ++i)
        if (!strcmp(tf_sel[i], name)) return 1;
    return 0;
}

#if defined(TF_HAVE_HIP)
/* ROCTx through dlopen: Debian ships no ROCTx, and a binary that needs none
 * runs where ROCm's profiler libraries are absent. rocprofiler-sdk-roctx
 * (ROCm 6.2+) has the pause/resume calls; roctracer's libroctx64 (older
 * ROCm) has the ranges only. */
#include <dlfcn.h>
#include <stdint.h>

typedef int (*roctx_push_fn)(const char *);
typedef int (*roctx_pop_fn)(void);
typedef void (*roctx_pause_fn)(uint64_t);
static struct {
    int tried;
    roctx_push_fn push;
    roctx_pop_fn pop;
    roctx_pause_fn pause, resume;
} tf_roctx;

static void roctx_load(void)
{
    static const char *const names[] = {"librocprofiler-sdk-roctx.so.1",
                                        "librocprofiler-sdk-roctx.so.0",
                                        "librocprofiler-sdk-roctx.so", "libroctx64.so.4",
                                        "libroctx64.so"};
    if (tf_roctx.tried) return;
    tf_roctx.tried = 1;
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; ++i)
        h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) return;
    tf_roctx.push = (roctx_push_fn)dlsym(h, "roctxRangePushA");
    tf_roctx.pop = (roctx_pop_fn)dlsym(h, "roctxRangePop");
    tf_roctx.pause = (roctx_pause_fn)dlsym(h, "roctxProfilerPause");
    tf_roctx.resume = (roctx_pause_fn)dlsym(h, "roctxProfilerResume");
}

static void prof_collect(int on)
{
    roctx_load();
    roctx_pause_fn f = on ? tf_roctx.resume : tf_roctx.pause;
    if (f) f(0); /* 0: every thread */
}
static void vendor_push(const char *name)
{
    roctx_load();
    if (tf_roctx.push) tf_roctx.push(name);
}
static void vendor_pop(void)
{
    if (tf_roctx.pop) tf_roctx.pop();
}

#elif defined(TF_HAVE_CUDA)
#include <nvtx3/nvToolsExt.h> /* header-only: NVTX loads nothing unless a tool injects itself */

#include "prof/prof_internal.h"

/* The domain is created on first use; markers come from the model's thread. */
static nvtxDomainHandle_t tf_domain;

/* cudaProfilerStart/Stop, in the GPU module: nothing to collect before it is loaded */
static void prof_collect(int on) { prof_gpu_profiler_collect(on); }
static void vendor_push(const char *name)
{
    if (!tf_domain) tf_domain = nvtxDomainCreateA("tinyfold");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(tf_domain, &a);
}
static void vendor_pop(void)
{
    if (tf_domain) nvtxDomainRangePop(tf_domain);
}
#endif

int tf_marker_select(const char *csv, char *err, size_t errlen)
{
    tf_nsel = 0;
    if (!csv || !*csv) return 0;
    const char *p = csv;
    for (;;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n >= TF_SEL_NAME) {
            snprintf(err, errlen, "--profile-regions: '%s' has an empty or over-long name "
                                  "(expected region names separated by commas, e.g. "
                                  "forward_pass,backward_pass)", csv);
            tf_nsel = 0;
            return 1;
        }
        if (tf_nsel == TF_SEL_MAX) {
            snprintf(err, errlen, "--profile-regions: more than %d names in '%s'", TF_SEL_MAX,
                     csv);
            tf_nsel = 0;
            return 1;
        }
        memcpy(tf_sel[tf_nsel], p, n);
        tf_sel[tf_nsel++][n] = '\0';
        if (!e) break;
        p = e + 1;
    }
    /* no pause here: the profilers this serves start with collection off
     * (ncu --profile-from-start off, nsys --capture-range=cudaProfilerApi,
     * rocprofv3 --selected-regions), and no GPU call may precede the
     * built-in profiler's CUPTI setup */
    return 0;
}

void tf_marker_push(const char *name)
{
    if (tf_nsel && tf_sel_at < 0 && tf_selected(name)) {
        tf_sel_at = tf_depth;
        prof_collect(1);
    }
    ++tf_depth;
    vendor_push(name);
}

void tf_marker_pop(void)
{
    vendor_pop();
    if (tf_depth > 0) --tf_depth;
    if (tf_sel_at >= 0 && tf_depth == tf_sel_at) {
        tf_sel_at = -1;
        prof_collect(0);
    }
}

#else
int tf_marker_select(const char *csv, char *err, size_t errlen)
{
    if (!csv || !*csv) return 0;
    snprintf(err, errlen, "--profile-regions: this build has no GPU profiler API (it narrows "
                          "an external profiler in CUDA and HIP builds)");
    return 1;
}
#endif
