// CUPTI range profiler (see range_profiler.h). Sequence, as the CUPTI
// documentation orders it: profiler init -> chip name -> counter
// availability -> host initialize (range profiler) -> add metrics -> config
// image -> range profiler enable -> counter data image -> set config (auto
// range, kernel replay) -> start ... work ... stop -> decode -> evaluate.
// With kernel replay CUPTI replays each kernel once per pass and restores
// its memory itself, so the profiled step needs no help from the caller.
// One profiler object serves several windows (start ... stop): each stop
// decodes, and the new ranges are evaluated and handed to the caller.
#include "prof/cuda/range_profiler.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

struct tf_rp {
    CUcontext ctx = nullptr;
    bool prof_init = false;
    CUpti_Profiler_Host_Object *host = nullptr;
    CUpti_RangeProfiler_Object *obj = nullptr;
    std::vector<uint8_t> avail, config, data;
    std::vector<std::string> names;  // all requested metrics
    std::vector<std::string> why;    // empty = collected
    std::vector<const char *> used;  // the collected ones, for CUPTI
    std::vector<int> used_index;     // used[k] is names[used_index[k]]
    size_t max_ranges = 0;
    size_t evaluated = 0;  // ranges of the counter data image already handed out
    bool started = false;
};

static bool check(CUptiResult r, const char *what, char *err, size_t errlen) {
    if (r == CUPTI_SUCCESS) return true;
    const char *s = nullptr;
    cuptiGetResultString(r, &s);
    std::snprintf(err, errlen, "CUPTI range profiler: %s failed: %s", what, s ? s : "unknown error");
    return false;
}

#define RP_TRY(call)                                                                              \
    do {                                                                                          \
        if (!check((call), #call, err, errlen)) return -1;                                       \
    } while (0)

extern "C" int tf_rp_metric_ok(const tf_rp *r, int m) {
    return m >= 0 && (size_t)m < r->why.size() && r->why[(size_t)m].empty();
}

extern "C" const char *tf_rp_metric_why(const tf_rp *r, int m) {
    if (m < 0 || (size_t)m >= r->why.size() || r->why[(size_t)m].empty()) return nullptr;
    return r->why[(size_t)m].c_str();
}

static int setup(tf_rp *r, char *err, size_t errlen) {
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, nullptr};
    RP_TRY(cuptiProfilerInitialize(&ip));
    r->prof_init = true;

    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        std::snprintf(err, errlen, "CUPTI range profiler: no current CUDA device");
        return -1;
    }
    CUpti_Device_GetChipName_Params cp = {CUpti_Device_GetChipName_Params_STRUCT_SIZE, nullptr, 0, nullptr};
    cp.deviceIndex = (size_t)dev;
    RP_TRY(cuptiDeviceGetChipName(&cp));

    CUpti_Profiler_GetCounterAvailability_Params ap = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE, nullptr, r->ctx, 0, nullptr};
    RP_TRY(cuptiProfilerGetCounterAvailability(&ap));
    r->avail.resize(ap.counterAvailabilityImageSize);
    ap.pCounterAvailabilityImage = r->avail.data();
    RP_TRY(cuptiProfilerGetCounterAvailability(&ap));

    CUpti_Profiler_Host_Initialize_Params hp = {};
    hp.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
    hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hp.pChipName = cp.pChipName;
    hp.pCounterAvailabilityImage = r->avail.data();
    RP_TRY(cuptiProfilerHostInitialize(&hp));
    r->host = hp.pHostObject;

    // Which metrics the chip knows: each one is tried on a throwaway host
    // object, because one failed add leaves the object unusable for the rest.
    for (size_t m = 0; m < r->names.size(); m++) {
        CUpti_Profiler_Host_Initialize_Params tp = hp;
        tp.pHostObject = nullptr;
        RP_TRY(cuptiProfilerHostInitialize(&tp));
        CUpti_Profiler_Host_ConfigAddMetrics_Params am = {};
        am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
        am.pHostObject = tp.pHostObject;
        const char *name = r->names[m].c_str();
        am.ppMetricNames = &name;
        am.numMetrics = 1;
        CUptiResult res = cuptiProfilerHostConfigAddMetrics(&am);
        CUpti_Profiler_Host_Deinitialize_Params td = {};
        td.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
        td.pHostObject = tp.pHostObject;
        cuptiProfilerHostDeinitialize(&td);
        if (res != CUPTI_SUCCESS) {
            const char *s = nullptr;
            cuptiGetResultString(res, &s);
            r->why[m] = std::string("unavailable (") + (s ? s : "not supported") + ")";
            continue;
        }
        r->used.push_back(r->names[m].c_str());
        r->used_index.push_back((int)m);
    }
    if (!r->used.empty()) {
        CUpti_Profiler_Host_ConfigAddMetrics_Params am = {};
        am.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
        am.pHostObject = r->host;
        am.ppMetricNames = r->used.data();
        am.numMetrics = r->used.size();
        RP_TRY(cuptiProfilerHostConfigAddMetrics(&am));
    }
    if (r->used.empty()) {
        std::snprintf(err, errlen, "CUPTI range profiler: none of the metrics is supported on %s",
                      cp.pChipName ? cp.pChipName : "this GPU");
        return -1;
    }

    CUpti_Profiler_Host_GetConfigImageSize_Params sp = {};
    sp.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
    sp.pHostObject = r->host;
    RP_TRY(cuptiProfilerHostGetConfigImageSize(&sp));
    r->config.resize(sp.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gp = {};
    gp.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
    gp.pHostObject = r->host;
    gp.configImageSize = r->config.size();
    gp.pConfigImage = r->config.data();
    RP_TRY(cuptiProfilerHostGetConfigImage(&gp));

    CUpti_RangeProfiler_Enable_Params ep = {};
    ep.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    ep.ctx = r->ctx;
    RP_TRY(cuptiRangeProfilerEnable(&ep));
    r->obj = ep.pRangeProfilerObject;

    CUpti_RangeProfiler_GetCounterDataSize_Params dp = {};
    dp.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    dp.pRangeProfilerObject = r->obj;
    dp.pMetricNames = r->used.data();
    dp.numMetrics = r->used.size();
    dp.maxNumOfRanges = r->max_ranges;
    dp.maxNumRangeTreeNodes = (uint32_t)r->max_ranges;
    RP_TRY(cuptiRangeProfilerGetCounterDataSize(&dp));
    r->data.resize(dp.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params cip = {};
    cip.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    cip.pRangeProfilerObject = r->obj;
    cip.counterDataSize = r->data.size();
    cip.pCounterData = r->data.data();
    RP_TRY(cuptiRangeProfilerCounterDataImageInitialize(&cip));

    CUpti_RangeProfiler_SetConfig_Params sc = {};
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = r->obj;
    sc.configSize = r->config.size();
    sc.pConfig = r->config.data();
    sc.counterDataImageSize = r->data.size();
    sc.pCounterDataImage = r->data.data();
    sc.range = CUPTI_AutoRange;
    sc.replayMode = CUPTI_KernelReplay;
    sc.maxRangesPerPass = r->max_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    RP_TRY(cuptiRangeProfilerSetConfig(&sc));
    return 0;
}

extern "C" int tf_rp_create(tf_rp **out, void *cu_ctx, const char *const *metrics, int nmetrics,
                            size_t max_ranges, char *err, size_t errlen) {
    *out = nullptr;
    tf_rp *r = new (std::nothrow) tf_rp;
    if (!r) {
        std::snprintf(err, errlen, "profiler: out of memory");
        return -1;
    }
    try {
        r->ctx = (CUcontext)cu_ctx;
        r->max_ranges = max_ranges;
        for (int m = 0; m < nmetrics; m++) r->names.emplace_back(metrics[m]);
        r->why.resize(r->names.size());
        if (setup(r, err, errlen) != 0) {
            tf_rp_destroy(r);
            return -1;
        }
    } catch (const std::bad_alloc &) {
        std::snprintf(err, errlen, "profiler: out of memory");
        tf_rp_destroy(r);
        return -1;
    }
    *out = r;
    return 0;
}

extern "C" int tf_rp_start(tf_rp *r, char *err, size_t errlen) {
    CUpti_RangeProfiler_Start_Params sp = {};
    sp.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = r->obj;
    RP_TRY(cuptiRangeProfilerStart(&sp));
    r->started = true;
    return 0;
}

extern "C" int tf_rp_stop(tf_rp *r, void (*fn)(void *, const char *, const double *), void *arg,
                          size_t *dropped, char *err, size_t errlen) {
    *dropped = 0;
    if (!r->started) {
        std::snprintf(err, errlen, "CUPTI range profiler: stop without start");
        return -1;
    }
    r->started = false;
    CUpti_RangeProfiler_Stop_Params st = {};
    st.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    st.pRangeProfilerObject = r->obj;
    RP_TRY(cuptiRangeProfilerStop(&st));
    if (!st.isAllPassSubmitted) {
        // kernel replay submits every pass itself; anything else is a bug here
        std::snprintf(err, errlen, "CUPTI range profiler: not all passes were submitted");
        return -1;
    }
    CUpti_RangeProfiler_DecodeData_Params dd = {};
    dd.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
    dd.pRangeProfilerObject = r->obj;
    RP_TRY(cuptiRangeProfilerDecodeData(&dd));
    *dropped = dd.numOfRangeDropped;

    CUpti_RangeProfiler_GetCounterDataInfo_Params ci = {};
    ci.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
    ci.pCounterDataImage = r->data.data();
    ci.counterDataImageSize = r->data.size();
    RP_TRY(cuptiRangeProfilerGetCounterDataInfo(&ci));

    std::vector<double> used_vals(r->used.size()), all(r->names.size());
    // The image accumulates the ranges of every window since tf_rp_create:
    // hand out only the new ones.
    for (size_t i = r->evaluated; i < ci.numTotalRanges; i++) {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {};
        ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
        ri.pCounterDataImage = r->data.data();
        ri.counterDataImageSize = r->data.size();
        ri.rangeIndex = i;
        ri.rangeDelimiter = "/";
        RP_TRY(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {};
        ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
        ev.pHostObject = r->host;
        ev.pCounterDataImage = r->data.data();
        ev.counterDataImageSize = r->data.size();
        ev.rangeIndex = i;
        ev.ppMetricNames = r->used.data();
        ev.numMetrics = r->used.size();
        ev.pMetricValues = used_vals.data();
        RP_TRY(cuptiProfilerHostEvaluateToGpuValues(&ev));
        for (size_t m = 0; m < all.size(); m++) all[m] = NAN;
        for (size_t k = 0; k < r->used.size(); k++) all[(size_t)r->used_index[k]] = used_vals[k];
        // The name belongs to CUPTI (its documentation does not hand ownership
        // over for this call), so it is only read here.
        fn(arg, ri.rangeName ? ri.rangeName : "(unnamed range)", all.data());
    }
    if (ci.numTotalRanges > r->evaluated) r->evaluated = ci.numTotalRanges;
    return 0;
}

extern "C" void tf_rp_destroy(tf_rp *r) {
    if (!r) return;
    if (r->obj) {
        CUpti_RangeProfiler_Disable_Params dp = {};
        dp.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
        dp.pRangeProfilerObject = r->obj;
        cuptiRangeProfilerDisable(&dp);
    }
    if (r->host) {
        CUpti_Profiler_Host_Deinitialize_Params hd = {};
        hd.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
        hd.pHostObject = r->host;
        cuptiProfilerHostDeinitialize(&hd);
    }
    if (r->prof_init) {
        CUpti_Profiler_DeInitialize_Params di = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE, nullptr};
        cuptiProfilerDeInitialize(&di);
    }
    delete r;
}
