/* CUDA side of the profiler: CUPTI activity records (kernels, memcpy,
 * memset) give the device truth; a CUPTI API callback tags every runtime and
 * driver call's correlation id with the host context (step, region path, op)
 * current at that moment, so each kernel lands in its region and step.
 *
 *  - Correlation: the callback runs synchronously on the calling thread (the
 *    model's), at API entry, before the kernel can complete; it writes
 *    (correlationId -> p->ctx) into a ring indexed by correlationId. A kernel
 *    record finds its context there when it is drained. The ring holds the
 *    last 2^20 API calls: far more than the calls between a launch and the
 *    drain at the end of its step.
 *  - CUDA graphs: launches during stream capture yield no kernel records, but
 *    each captured node is created under the region that issued it: the
 *    resource callback GRAPHNODE_CREATED (and _CLONED on instantiation) maps
 *    graphNodeId -> context. Replayed kernels carry their node id, so they are
 *    attributed per node; the step comes from the graph launch's correlation.
 *  - Buffers: CUPTI hands completed buffers to bufferCompleted on its own
 *    thread. That callback only copies compact records (names interned into a
 *    table of its own) into a queue under a mutex; the main thread drains the
 *    queue at each step end and at finish, where selection and warm-up
 *    filters are applied and the records are folded into the profiler.
 *  - Clocks: CUPTI timestamps (CLOCK_REALTIME based) are shifted onto the
 *    profiler's CLOCK_MONOTONIC by an offset measured at start. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "prof/prof_internal.h"

/* libstdc++'s demangler (for prof_cuda_demangle); the CUDA link line carries libstdc++. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define RING_BITS 20
#define BUF_BYTES (4u << 20)

typedef struct {
    uint32_t corr;
    uint64_t ctx;
} corr_slot;

typedef struct {
    uint64_t node; /* graphNodeId + 1; 0 = empty */
    uint64_t ctx;
} node_slot;

typedef struct {
    uint8_t kind;
    uint32_t name; /* id in gpu_state.knames */
    uint32_t corr, stream;
    uint64_t graph_node;
    uint64_t start, end; /* CUPTI clock */
    uint32_t grid[3], block[3];
    int32_t regs, smem;
} pend_rec;

typedef struct {
    tf_prof *p;
    CUpti_SubscriberHandle sub;
    int subscribed;
    int64_t offset; /* CUPTI timestamp - profiler clock */
    corr_slot *ring;
    node_slot *nodes;
    size_t nnodes, cap_nodes; /* cap is a power of two */
    /* guarded by mu: filled on CUPTI's thread */
    pthread_mutex_t mu;
    pend_rec *pend;
    size_t npend, cap_pend;
    prof_intern knames;
    size_t dropped, outside_steps, lost_pending;
    /* main thread: kname id -> profiler name id */
    uint32_t *kmap;
    size_t cap_kmap;
    pend_rec *work;
    size_t cap_work;
    int stopped;
    char warn[256];
} gpu_state;

/* CUPTI's buffer callbacks take no user pointer: one CUDA profiler at a time. */
static gpu_state *g_gpu;
static pthread_mutex_t g_gpu_mu = PTHREAD_MUTEX_INITIALIZER;

#define CUPTI_TRY(call)                                                                           \
    do {                                                                                          \
        CUptiResult r_ = (call);                                                                  \
        if (r_ != CUPTI_SUCCESS) {                                                                \
            const char *s_ = NULL;                                                                \
            cuptiGetResultString(r_, &s_);                                                        \
            snprintf(err, errlen, "CUPTI: %s failed (%s:%d): %s", #call, __FILE__, __LINE__,      \
                     s_ ? s_ : "unknown error");                                                  \
            goto fail;                                                                            \
        }                                                                                         \
    } while (0)

/* ---- graph node map (main thread) ---- */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

static void node_put(gpu_state *g, uint64_t node, uint64_t ctx) {
    if (2 * (g->nnodes + 1) > g->cap_nodes) {
        size_t nc = g->cap_nodes ? g->cap_nodes * 2 : 1024;
        node_slot *ns = calloc(nc, sizeof *ns);
        if (!ns) return;
        for (size_t i = 0; i < g->cap_nodes; i++) {
            if (!g->nodes[i].node) continue;
            size_t j = mix64(g->nodes[i].node) & (nc - 1);
            while (ns[j].node) j = (j + 1) & (nc - 1);
            ns[j] = g->nodes[i];
        }
        free(g->nodes);
        g->nodes = ns;
        g->cap_nodes = nc;
    }
    size_t j = mix64(node + 1) & (g->cap_nodes - 1);
    while (g->nodes[j].node && g->nodes[j].node != node + 1) j = (j + 1) & (g->cap_nodes - 1);
    if (!g->nodes[j].node) g->nnodes++;
    g->nodes[j].node = node + 1;
    g->nodes[j].ctx = ctx;
}

static int node_get(const gpu_state *g, uint64_t node, uint64_t *ctx) {
    if (!g->cap_nodes) return 0;
    size_t j = mix64(node + 1) & (g->cap_nodes - 1);
    for (; g->nodes[j].node; j = (j + 1) & (g->cap_nodes - 1))
        if (g->nodes[j].node == node + 1) {
            *ctx = g->nodes[j].ctx;
            return 1;
        }
    return 0;
}

/* ---- callbacks ---- */
/* Driver launch calls: every runtime launch (and cuBLAS's) ends in one. */
static int is_launch(CUpti_CallbackId cbid) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        return 1;
    default:
        return 0;
    }
}

static void CUPTIAPI api_callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                  const void *data) {
    gpu_state *g = userdata;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *cd = data;
        if (cd->callbackSite != CUPTI_API_ENTER) return;
        corr_slot *s = &g->ring[cd->correlationId & ((1u << RING_BITS) - 1)];
        s->corr = cd->correlationId;
        s->ctx = g->p->ctx;
        if (dom == CUPTI_CB_DOMAIN_DRIVER_API && is_launch(cbid) && prof_gpu_counters_pending(g->p))
            prof_gpu_counters_learn(g->p, cd->symbolName); /* --counters: which ops launch what */
    } else if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
        const CUpti_ResourceData *rd = data;
        const CUpti_GraphData *gd = rd->resourceDescriptor;
        if (!gd || !gd->node) return;
        uint64_t id = 0, orig = 0, ctx = g->p->ctx;
        if (cuptiGetGraphNodeId(gd->node, &id) != CUPTI_SUCCESS) return;
        if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && gd->originalNode &&
            cuptiGetGraphNodeId(gd->originalNode, &orig) == CUPTI_SUCCESS)
            node_get(g, orig, &ctx); /* a clone keeps the context of its original */
        node_put(g, id, ctx);
    }
}

/* Completed activity buffers are kept for reuse (up to POOL_MAX, freed with
 * the profiler): CUPTI asks for a buffer after every flush, i.e. every step,
 * and a fresh 4 MB one is paid for again as CUPTI fills it, inside the
 * profiled step's first region: a reused one is paid for already. */
#define POOL_MAX 8
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_pool[POOL_MAX];
static int g_npool;

static void buffer_release(void *b) {
    pthread_mutex_lock(&g_pool_mu);
    if (b && g_npool < POOL_MAX) {
        g_pool[g_npool++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&g_pool_mu);
    free(b);
}

static void pool_free(void) {
    pthread_mutex_lock(&g_pool_mu);
    while (g_npool) free(g_pool[--g_npool]);
    pthread_mutex_unlock(&g_pool_mu);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    void *b = NULL;
    pthread_mutex_lock(&g_pool_mu);
    if (g_npool) b = g_pool[--g_npool];
    pthread_mutex_unlock(&g_pool_mu);
    if (!b && posix_memalign(&b, 8, BUF_BYTES) != 0) b = NULL;
    *buffer = b;
    *size = b ? BUF_BYTES : 0;
    *max_records = 0;
}

char *prof_cuda_demangle(const char *name) {
    int status = -1;
    char *d = (name[0] == '_' && name[1] == 'Z') ? __cxa_demangle(name, NULL, NULL, &status) : NULL;
    if (d && status == 0) return d;
    free(d);
    return NULL;
}

/* Called with g->mu held. */
static void push_rec(gpu_state *g, const pend_rec *r) {
    if (g->npend == g->cap_pend &&
        prof_reserve((void **)&g->pend, &g->cap_pend, g->npend + 1, sizeof *g->pend)) {
        g->lost_pending++;
        return;
    }
    g->pend[g->npend++] = *r;
}

/* Called with g->mu held: raw (mangled) names are interned here and
 * demangled on the main thread (map_name). */
static uint32_t kname(gpu_state *g, const char *name) {
    return prof_intern_id(&g->knames, name ? name : "(unnamed kernel)");
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)size;
    pthread_mutex_lock(&g_gpu_mu);
    gpu_state *g = g_gpu;
    if (g) pthread_mutex_lock(&g->mu);
    CUpti_Activity *rec = NULL;
    while (g && valid && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        pend_rec r;
        memset(&r, 0, sizeof r);
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            r.kind = PROF_KIND_KERNEL;
            r.name = kname(g, k->name);
            r.corr = k->correlationId;
            r.stream = k->graphId ? PROF_STREAM_GRAPH : k->streamId;
            r.graph_node = k->graphId ? k->graphNodeId : 0;
            r.start = k->start;
            r.end = k->end;
            r.grid[0] = (uint32_t)k->gridX, r.grid[1] = (uint32_t)k->gridY, r.grid[2] = (uint32_t)k->gridZ;
            r.block[0] = (uint32_t)k->blockX, r.block[1] = (uint32_t)k->blockY,
            r.block[2] = (uint32_t)k->blockZ;
            r.regs = k->registersPerThread;
            r.smem = k->staticSharedMemory + k->dynamicSharedMemory;
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            static const char *const kinds[] = {"[memcpy]",     "[memcpy HtoD]", "[memcpy DtoH]",
                                                "[memcpy HtoA]", "[memcpy AtoH]", "[memcpy AtoA]",
                                                "[memcpy AtoD]", "[memcpy DtoA]", "[memcpy DtoD]",
                                                "[memcpy HtoH]", "[memcpy PtoP]"};
            r.kind = PROF_KIND_MEMCPY;
            r.name = prof_intern_id(&g->knames, m->copyKind < 11 ? kinds[m->copyKind] : kinds[0]);
            r.corr = m->correlationId;
            r.stream = m->graphId ? PROF_STREAM_GRAPH : m->streamId;
            r.graph_node = m->graphId ? m->graphNodeId : 0;
            r.start = m->start;
            r.end = m->end;
            r.regs = r.smem = -1;
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            r.kind = PROF_KIND_MEMSET;
            r.name = prof_intern_id(&g->knames, "[memset]");
            r.corr = m->correlationId;
            r.stream = m->graphId ? PROF_STREAM_GRAPH : m->streamId;
            r.graph_node = m->graphId ? m->graphNodeId : 0;
            r.start = m->start;
            r.end = m->end;
            r.regs = r.smem = -1;
        } else {
            continue;
        }
        if (r.name == PROF_NONE) {
            g->lost_pending++;
            continue;
        }
        push_rec(g, &r);
    }
    if (g) {
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
            g->dropped += dropped;
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&g_gpu_mu);
    buffer_release(buffer);
}

/* ---- main-thread side ---- */
int prof_gpu_start(tf_prof *p, char *err, size_t errlen) {
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        snprintf(err, errlen, "CUDA profiling: no usable CUDA device (cudaGetDeviceCount: %s)",
                 ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
        return -1;
    }
    gpu_state *g = calloc(1, sizeof *g);
    if (!g || pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g);
        snprintf(err, errlen, "profiler: out of memory");
        return -1;
    }
    g->p = p;
    g->ring = calloc((size_t)1 << RING_BITS, sizeof *g->ring);
    if (!g->ring || prof_intern_init(&g->knames) != 0) {
        snprintf(err, errlen, "profiler: out of memory");
        goto fail_nolock;
    }
    pthread_mutex_lock(&g_gpu_mu);
    if (g_gpu) {
        pthread_mutex_unlock(&g_gpu_mu);
        snprintf(err, errlen, "CUDA profiling: only one CUDA profiler can run at a time");
        goto fail_nolock;
    }
    g_gpu = g;
    pthread_mutex_unlock(&g_gpu_mu);
    p->gpu = g;
    p->ctx = prof_ctx_make(PROF_CTX_STEP_NONE, PROF_ROOT, PROF_CTX_NO_OP);
    CUPTI_TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_TRY(cuptiSubscribe(&g->sub, (CUpti_CallbackFunc)api_callback, g));
    g->subscribed = 1;
    CUPTI_TRY(cuptiEnableDomain(1, g->sub, CUPTI_CB_DOMAIN_RUNTIME_API));
    CUPTI_TRY(cuptiEnableDomain(1, g->sub, CUPTI_CB_DOMAIN_DRIVER_API));
    CUPTI_TRY(cuptiEnableCallback(1, g->sub, CUPTI_CB_DOMAIN_RESOURCE,
                                  CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
    CUPTI_TRY(cuptiEnableCallback(1, g->sub, CUPTI_CB_DOMAIN_RESOURCE,
                                  CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    /* clock offset: bracket one CUPTI timestamp with two host readings */
    uint64_t ts = 0;
    int64_t a = prof_now_ns();
    CUPTI_TRY(cuptiGetTimestamp(&ts));
    int64_t b = prof_now_ns();
    g->offset = (int64_t)ts - (a + (b - a) / 2);
    return 0;
fail:
    prof_gpu_stop(p); /* tf_prof_destroy frees the rest */
    return -1;
fail_nolock:
    free(g->ring);
    prof_intern_free(&g->knames);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return -1;
}

static uint32_t map_name(gpu_state *g, uint32_t kid) {
    tf_prof *p = g->p;
    if (kid >= g->cap_kmap) {
        size_t old = g->cap_kmap;
        if (prof_reserve((void **)&g->kmap, &g->cap_kmap, (size_t)kid + 1, sizeof *g->kmap))
            return PROF_NONE;
        for (size_t i = old; i < g->cap_kmap; i++) g->kmap[i] = PROF_NONE;
    }
    if (g->kmap[kid] == PROF_NONE) {
        pthread_mutex_lock(&g->mu); /* CUPTI's thread may grow the table */
        char *raw = strdup(g->knames.strs[kid]);
        pthread_mutex_unlock(&g->mu);
        if (!raw) return PROF_NONE;
        char *d = prof_cuda_demangle(raw);
        g->kmap[kid] = prof_intern_id(&p->names, d ? d : raw);
        free(d);
        free(raw);
    }
    return g->kmap[kid];
}

void prof_gpu_drain(tf_prof *p, int force) {
    gpu_state *g = p->gpu;
    if (!g || g->stopped) return;
    if (force) cudaDeviceSynchronize(); /* the last kernels have their end times */
    cuptiActivityFlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    /* swap the queue with the spare array so CUPTI's thread is not held
     * while folding; the spare is reused next time (no steady-state malloc) */
    pthread_mutex_lock(&g->mu);
    pend_rec *recs = g->pend;
    size_t n = g->npend, cap = g->cap_pend;
    g->pend = g->work;
    g->cap_pend = g->cap_work;
    g->npend = 0;
    pthread_mutex_unlock(&g->mu);
    g->work = recs;
    g->cap_work = cap;
    for (size_t i = 0; i < n; i++) {
        const pend_rec *r = &recs[i];
        const corr_slot *s = &g->ring[r->corr & ((1u << RING_BITS) - 1)];
        uint64_t ctx = s->corr == r->corr ? s->ctx : 0, nctx;
        if (!prof_ctx_valid(ctx) || prof_ctx_step(ctx) == PROF_CTX_STEP_NONE ||
            prof_ctx_step(ctx) >= p->nsteps) {
            g->outside_steps++; /* setup work before the first step, etc. */
            continue;
        }
        uint32_t step = prof_ctx_step(ctx);
        uint32_t path = prof_ctx_path(ctx), op = prof_ctx_op(ctx);
        if (r->graph_node && node_get(g, r->graph_node, &nctx) && prof_ctx_valid(nctx)) {
            path = prof_ctx_path(nctx); /* the region that captured this node */
            op = prof_ctx_op(nctx);
        }
        if (!p->steps[step].collected) continue;
        if (path >= p->npaths) path = PROF_ROOT;
        if (!p->paths[path].selected) continue;
        prof_launch l;
        memset(&l, 0, sizeof l);
        l.name = map_name(g, r->name);
        if (l.name == PROF_NONE) {
            p->oom = 1;
            continue;
        }
        l.op = op == PROF_CTX_NO_OP ? l.name : op;
        l.path = path;
        l.step = step;
        l.stream = r->stream;
        l.kind = r->kind;
        l.start = (int64_t)r->start - g->offset;
        l.end = (int64_t)r->end - g->offset;
        memcpy(l.grid, r->grid, sizeof l.grid);
        memcpy(l.block, r->block, sizeof l.block);
        l.regs = r->regs;
        l.smem = r->smem;
        prof_record_launch(p, &l);
    }
}

void prof_gpu_stop(tf_prof *p) {
    gpu_state *g = p->gpu;
    if (!g || g->stopped) return;
    g->stopped = 1;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (g->subscribed) cuptiUnsubscribe(g->sub);
    g->subscribed = 0;
    pthread_mutex_lock(&g_gpu_mu);
    if (g_gpu == g) g_gpu = NULL;
    pthread_mutex_unlock(&g_gpu_mu);
}

void prof_gpu_free(tf_prof *p) {
    gpu_state *g = p->gpu;
    if (!g) return;
    prof_gpu_stop(p);
    pool_free(); /* the stop's forced flush has handed back every buffer */
    prof_gpu_counters_free(p);
    free(g->ring);
    free(g->nodes);
    free(g->pend);
    free(g->work);
    free(g->kmap);
    prof_intern_free(&g->knames);
    pthread_mutex_destroy(&g->mu);
    free(g);
    p->gpu = NULL;
}

const char *prof_gpu_warning(const tf_prof *p) {
    gpu_state *g = p->gpu;
    if (!g || (!g->dropped && !g->lost_pending)) return NULL;
    snprintf(g->warn, sizeof g->warn,
             "CUPTI dropped %zu activity records and %zu were lost for lack of memory: kernel "
             "statistics are incomplete",
             g->dropped, g->lost_pending);
    return g->warn;
}
