/* NVTX / ROCTx markers (see markers.h). */
#include "prof/markers.h"

#if defined(TF_HAVE_HIP)
#include <rocprofiler-sdk-roctx/roctx.h>

void tf_marker_push(const char *name) { roctxRangePushA(name); }
void tf_marker_pop(void) { roctxRangePop(); }

#elif defined(TF_HAVE_CUDA)
#include <nvtx3/nvToolsExt.h>

/* The domain is created on first use; markers come from the model's thread. */
static nvtxDomainHandle_t tf_domain;

void tf_marker_push(const char *name) {
    if (!tf_domain) tf_domain = nvtxDomainCreateA("tinyfold");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(tf_domain, &a);
}

void tf_marker_pop(void) {
    if (tf_domain) nvtxDomainRangePop(tf_domain);
}

#else
typedef int tf_markers_unused; /* CPU build: markers are inline no-ops */
#endif
