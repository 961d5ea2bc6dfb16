/* The trainer: owns the backend, the four parameter-sized buffers (params,
 * grads, Adam m and v, one table describes them all), the planned activation
 * arena and the batch buffers, and runs training steps with per-phase timing:
 * the device is synchronised at each phase boundary, as the reference does,
 * on the CPU and under the profiler; a CUDA step without the profiler issues
 * the phases back to back and times them with device events
 * (pipelined_phases). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "model/model.h"
#include "prof/prof.h"
#include "prof/profiler.h"
#include "train/rng.h"

typedef struct { size_t off, n; } tf_range;

struct tf_trainer {
    tf_config cfg;
    const tf_ops *ops;
    tf_backend *be;
    int is_cuda;
    tf_param_info *table;
    size_t ntensors, nparams;
    float *params, *grads, *adam_m, *adam_v, *hyper;
    long adam_step;
    tf_range *ranges; /* trainable contiguous ranges for AdamW */
    int nranges;
    tf_arena arena;
    void *arena_mem;
    int32_t *tokens;
    float *pair, *target, *loss, *pred;
    tf_batch hb;     /* host batch of the current step */
    /* CUDA: the next step's synthetic batch is drawn by a host thread while
     * the device runs the current step (double buffer: hb and hb_next). */
    int prefetch;
    int batch_pinned; /* hb, hb_next from ops->host_alloc (else malloc) */
    tf_batch hb_next;
    pthread_t pf_thread; /* one worker for the run, started at the first step */
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    int pf_started, pf_busy, pf_quit; /* pf_busy: the worker is drawing pf_step */
    int pf_threads;                  /* OpenMP threads the worker draws with */
    int pf_running; /* a batch was asked for and not yet waited for */
    int pf_have;    /* waited for: hb_next holds pf_step */
    long pf_step;
    /* CUDA without the profiler: the step's phases are issued back to back
     * and timed by marks on the device (TF_PHASE_SYNC=1: a wait at each
     * phase boundary instead, as under the profiler) */
    int pipelined;
    float *step_host; /* page-locked: [0] the loss, [8..15] the AdamW hyper-parameters */
    /* CUDA: hb_next is uploaded on the side queue into these during the
     * current step's backward; the next step copies them into the inputs
     * device to device (TF_BATCH_STAGE=0: off, each step uploads itself) */
    int stage;
    int32_t *st_tokens;
    float *st_pair, *st_target;
    long staged_step; /* the step whose batch is in the staging buffers, -1 */
    long cur_step;
    tf_model M;
    tf_exec ex;
    tf_prof *prof;
    void *graph[3]; /* forward, backward, optimizer (CUDA --graph) */
    int graphs_ready;
    size_t graph_kernels; /* kernel nodes in the three captured graphs */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void set_err(char *err, size_t n, const char *msg) {
    if (err && n) snprintf(err, n, "%s", msg);
}

/* SPEC init: Linear weights and the embedding ~ N(0, 0.02); LayerNorm 1 / 0. */
static void init_params(const tf_trainer *t, float *host) {
    for (size_t i = 0; i < t->ntensors; i++) {
        const tf_param_info *p = &t->table[i];
        float *w = host + p->offset;
        if (p->ndim == 1) {
            size_t len = strlen(p->name);
            int is_bias = len > 5 && strcmp(p->name + len - 5, ".bias") == 0;
            for (size_t k = 0; k < p->count; k++) w[k] = is_bias ? 0.0f : 1.0f;
        } else {
            tf_rng r;
            tf_rng_init(&r, t->cfg.seed, TF_STREAM_INIT, i);
            for (size_t k = 0; k < p->count; k++) w[k] = (float)(0.02 * tf_rng_normal(&r));
        }
    }
}

static size_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static int balloc(tf_trainer *t, void **p, size_t bytes) {
    return t->ops->alloc(t->be, p, bytes ? bytes : 4);
}

static void build_ranges(tf_trainer *t) {
    t->ranges = calloc(t->ntensors, sizeof *t->ranges);
    t->nranges = 0;
    for (size_t i = 0; i < t->ntensors; i++) {
        const tf_param_info *p = &t->table[i];
        if (!p->trainable) continue;
        if (t->nranges && t->ranges[t->nranges - 1].off + t->ranges[t->nranges - 1].n == p->offset)
            t->ranges[t->nranges - 1].n += p->count;
        else
            t->ranges[t->nranges++] = (tf_range){p->offset, p->count};
    }
}

static void setup_model(tf_trainer *t) {
    tf_model *M = &t->M;
    M->c = &t->cfg;
    M->params = t->params;
    M->grads = t->grads;
    M->tokens = t->tokens;
    M->pair = t->pair;
    M->target = t->target;
    M->loss = t->loss;
    M->pred = t->pred;
}

/* The host batch buffers come from the backend (page-locked on CUDA: the
 * per-step upload runs several times faster than from pageable memory).
 * TF_BATCH_PAGEABLE=1 keeps them in malloc'd memory, for an A/B. */
static int batch_host_alloc(tf_trainer *t, void **p, size_t bytes) {
    if (!t->batch_pinned) {
        *p = malloc(bytes);
        return *p == NULL;
    }
    return t->ops->host_alloc(t->be, p, bytes);
}

/* Bytes of a batch's three arrays: tokens, pair features, target distances
 * (the order of every loop below over a batch's arrays). */
static void batch_sizes(const tf_trainer *t, size_t sz[3]) {
    const size_t B = (size_t)t->cfg.batch, S = (size_t)t->cfg.n_seqs, N = (size_t)t->cfg.seq_len;
    sz[0] = B * S * N * sizeof(int32_t);
    sz[1] = B * N * N * 65 * sizeof(float);
    sz[2] = B * N * N * sizeof(float);
}

static int batch_alloc(tf_trainer *t, tf_batch *b) {
    size_t sz[3];
    batch_sizes(t, sz);
    void **f[3] = {(void **)&b->tokens, (void **)&b->pair, (void **)&b->target};
    for (int i = 0; i < 3; i++)
        if (batch_host_alloc(t, f[i], sz[i]))
            return 1;
    return 0;
}

static void batch_free(tf_trainer *t, tf_batch *b) {
    void *p[3] = {b->tokens, b->pair, b->target};
    for (int i = 0; i < 3; i++) {
        if (t->batch_pinned)
            t->ops->host_free(t->be, p[i]);
        else
            free(p[i]);
    }
    b->tokens = NULL, b->pair = NULL, b->target = NULL;
}

tf_status tf_trainer_create(tf_trainer **out, const tf_config *c, char *err, size_t errlen) {
    *out = NULL;
    tf_status st = tf_config_validate(c, err, errlen);
    if (st != TF_OK) return st;
    tf_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        set_err(err, errlen, "out of host memory creating the trainer");
        return TF_ERR_NOMEM;
    }
    t->cfg = *c;
    tf_backend_opts bo = {c->threads, c->device, (int)c->impl, c->precision == TF_PREC_TF32};
    tf_backend_kind kind = c->backend;
    char why[256] = "";
    if (kind == TF_BACKEND_AUTO)
        kind = !tf_cuda_backend_available(why, sizeof why) ? TF_BACKEND_CPU
               : tf_built_with_hip()                      ? TF_BACKEND_HIP
                                                          : TF_BACKEND_CUDA;
    int rc;
    if (kind == TF_BACKEND_CUDA || kind == TF_BACKEND_HIP) { /* one GPU backend (tf_cuda_*) */
        /* the CUDA attention kernels keep a head's row in registers: d <= 64 */
        int dm = c->msa_dim / c->n_heads_msa, dz = c->pair_dim / c->n_heads_pair;
        if (dm > 64 || dz > 64) {
            snprintf(err, errlen,
                     "%s: '%d' is not accepted with --backend cuda: head size %d exceeds 64 "
                     "(expected at most %d)",
                     dm > 64 ? "--msa-dim" : "--pair-dim", dm > 64 ? c->msa_dim : c->pair_dim,
                     dm > 64 ? dm : dz, 64 * (dm > 64 ? c->n_heads_msa : c->n_heads_pair));
            free(t);
            return TF_ERR_USAGE;
        }
        if (!tf_cuda_backend_available(why, sizeof why)) {
            snprintf(err, errlen, "--backend cuda: no usable CUDA device (%s); use --backend cpu",
                     why);
            free(t);
            return TF_ERR_DEVICE;
        }
        rc = tf_cuda_backend_create(&t->be, &t->ops, &bo, err, errlen);
        t->is_cuda = 1;
    } else {
        rc = tf_cpu_backend_create(&t->be, &t->ops, &bo, err, errlen);
    }
    t->cfg.backend = kind;
    if (rc) {
        free(t);
        return TF_ERR_DEVICE;
    }

    t->ntensors = tf_param_count_tensors(c);
    t->nparams = tf_param_count_floats(c);
    t->table = calloc(t->ntensors, sizeof *t->table);
    t->M.off.blk = calloc((size_t)c->n_blocks, sizeof(tf_block_off));
    t->M.acts = calloc((size_t)c->n_blocks, sizeof(tf_block_act));
    if (!t->table || !t->M.off.blk || !t->M.acts) {
        set_err(err, errlen, "out of host memory creating the trainer");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    tf_param_table(c, t->table);
    tf_model_offsets(c, t->table, &t->M.off);
    build_ranges(t);

    /* Plan the activation arena: run forward + backward without executing ops. */
    const int B = c->batch, S = c->n_seqs, N = c->seq_len;
    t->ex.ops = t->ops;
    t->ex.be = t->be;
    t->ex.arena = &t->arena;
    t->ex.fu = c->fusion;
    t->ex.level = (int)c->impl;
    t->ex.opm_weight_first = c->impl >= TF_IMPL_V3 && !t->is_cuda;
    t->ex.opm_bwd_op = c->impl >= TF_IMPL_V3 && t->is_cuda;
    t->ex.trimul_merged = c->impl >= TF_IMPL_V3 && (!t->is_cuda || c->precision == TF_PREC_FP32);
    t->ex.trimul_cmajor = 1;
    t->ex.ln2 = 1;
    int phase_sync = 0;
    t->ex.opm_outer_op = c->impl >= TF_IMPL_V3 && t->is_cuda;
    t->ex.wgrad_async = 1; /* where the backend has the lane, v3 (below) */
    t->ex.wgrad_slots = 1;
    static const char *const knobs[8] = {"TF_TRIMUL_CMAJOR", "TF_LAYERNORM2", "TF_PHASE_SYNC",
                                         "TF_OPM_BWD_OP", "TF_OPM_OUTER_OP",
                                         "TF_TRIMUL_MERGED", "TF_WGRAD_LANE",
                                         "TF_WGRAD_SLOTS"}; /* A/B knobs */
    int *const knob_flag[8] = {&t->ex.trimul_cmajor, &t->ex.ln2, &phase_sync, &t->ex.opm_bwd_op,
                               &t->ex.opm_outer_op, &t->ex.trimul_merged, &t->ex.wgrad_async,
                               &t->ex.wgrad_slots};
    for (int k = 0; k < 8; k++) {
        const char *v = getenv(knobs[k]);
        if (!v) continue;
        if (strcmp(v, "0") && strcmp(v, "1")) {
            snprintf(err, errlen, "%s=%s: accepted values are 0 and 1", knobs[k], v);
            tf_trainer_destroy(t);
            return TF_ERR_USAGE;
        }
        *knob_flag[k] = v[0] == '1';
    }
    /* levels 1-2 stay the reference composition */
    t->ex.opm_bwd_op &= c->impl >= TF_IMPL_V3;
    t->ex.opm_outer_op &= c->impl >= TF_IMPL_V3;
    t->ex.trimul_merged &= c->impl >= TF_IMPL_V3;
    t->ex.wgrad_async &= c->impl >= TF_IMPL_V3 && t->ops->wgrad_enable != NULL;
    if (t->ex.wgrad_async && t->ops->wgrad_enable(t->be)) {
        set_err(err, errlen, "not enough device memory for the weight-gradient lane's "
                             "workspaces (36 MiB); TF_WGRAD_LANE=0 runs without it");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    t->ex.planning = 1;
    setup_model(t);
    tf_model_forward(&t->ex, &t->M);
    tf_model_backward(&t->ex, &t->M);
    if (t->ex.wgrad_async && t->ex.wgrad_slots && t->ex.bwd_slot_need) {
        /* again with the two slots the first pass measured (exec.h bwd_slot) */
        t->ex.bwd_slot = t->ex.bwd_slot_need;
        t->arena.peak = 0;
        tf_model_forward(&t->ex, &t->M);
        tf_model_backward(&t->ex, &t->M);
    }
    t->ex.planning = 0;
    size_t arena_bytes = t->arena.peak;

    size_t pbytes = t->nparams * sizeof(float);
    size_t batch_bytes = (size_t)B * S * N * 4 + (size_t)B * N * N * (65 + 3) * 4;
    size_t need = 4 * pbytes + arena_bytes + batch_bytes;
    if (!t->is_cuda) {
        size_t avail = mem_available_bytes();
        size_t host_batch = batch_bytes;
        if (avail && need + host_batch > avail / 10 * 9) {
            snprintf(err, errlen,
                     "this problem needs %.2f GB of memory (activations %.2f GB) but only %.2f GB "
                     "is available: reduce --batch-size, --seq-len, --num-seqs or --num-blocks",
                     (need + host_batch) / 1e9, arena_bytes / 1e9, avail / 1e9);
            tf_trainer_destroy(t);
            return TF_ERR_NOMEM;
        }
    }
    if (balloc(t, (void **)&t->params, pbytes) || balloc(t, (void **)&t->grads, pbytes) ||
        balloc(t, (void **)&t->adam_m, pbytes) || balloc(t, (void **)&t->adam_v, pbytes) ||
        balloc(t, (void **)&t->hyper, 8 * sizeof(float)) ||
        balloc(t, (void **)&t->tokens, (size_t)B * S * N * sizeof(int32_t)) ||
        balloc(t, (void **)&t->pair, (size_t)B * N * N * 65 * sizeof(float)) ||
        balloc(t, (void **)&t->target, (size_t)B * N * N * sizeof(float)) ||
        balloc(t, (void **)&t->pred, (size_t)B * N * N * sizeof(float)) ||
        balloc(t, (void **)&t->loss, 4 * sizeof(float)) ||
        balloc(t, &t->arena_mem, arena_bytes)) {
        snprintf(err, errlen,
                 "not enough %s memory: this problem needs %.2f GB (activations %.2f GB); reduce "
                 "--batch-size, --seq-len, --num-seqs or --num-blocks",
                 t->is_cuda ? "device" : "host", need / 1e9, arena_bytes / 1e9);
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    t->arena = (tf_arena){.base = t->arena_mem, .cap = arena_bytes};
    t->hb.B = B;
    t->hb.S = S;
    t->hb.N = N;
    t->hb_next = t->hb;
    t->prefetch = t->is_cuda;
    if (t->prefetch) {
        pthread_mutex_init(&t->pf_mu, NULL);
        pthread_cond_init(&t->pf_cv, NULL);
        /* leave two cores to the main thread and the CUDA driver */
        int n = omp_get_max_threads(), p = omp_get_num_procs() - 2;
        t->pf_threads = n < p ? n : p < 1 ? 1 : p;
    }
    {
        const char *pg = getenv("TF_BATCH_PAGEABLE");
        const char *sg = getenv("TF_BATCH_STAGE");
        t->batch_pinned = !(pg && !strcmp(pg, "1"));
        t->stage = t->prefetch && t->batch_pinned && !(sg && !strcmp(sg, "0"));
    }
    float *host = malloc(pbytes);
    if (!host || batch_alloc(t, &t->hb) || (t->prefetch && batch_alloc(t, &t->hb_next))) {
        free(host);
        set_err(err, errlen, "out of host memory for the batch buffers");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    /* staging is a speed-up only: without the device memory, do without */
    t->staged_step = -1;
    if (t->stage) {
        size_t sz[3];
        batch_sizes(t, sz);
        void **f[3] = {(void **)&t->st_tokens, (void **)&t->st_pair, (void **)&t->st_target};
        for (int i = 0; i < 3 && t->stage; i++)
            if (balloc(t, f[i], sz[i]))
                t->stage = 0;
    }
    /* issuing the phases back to back is a speed-up only: without the
     * page-locked bytes, wait at each phase boundary */
    t->pipelined = t->is_cuda && !phase_sync && t->ops->mark &&
                   !t->ops->host_alloc(t->be, (void **)&t->step_host, 16 * sizeof(float));
    init_params(t, host);
    t->ops->upload(t->be, t->params, host, pbytes);
    free(host);
    t->ops->zero(t->be, t->grads, pbytes);
    t->ops->zero(t->be, t->adam_m, pbytes);
    t->ops->zero(t->be, t->adam_v, pbytes);
    t->ops->sync(t->be);
    setup_model(t);
    *out = t;
    return TF_OK;
}

static void prefetch_join(tf_trainer *t) {
    if (t->pf_running) {
        pthread_mutex_lock(&t->pf_mu);
        while (t->pf_busy) pthread_cond_wait(&t->pf_cv, &t->pf_mu);
        pthread_mutex_unlock(&t->pf_mu);
        t->pf_running = 0;
        t->pf_have = 1;
    }
}

void tf_trainer_destroy(tf_trainer *t) {
    if (!t) return;
    prefetch_join(t);
    if (t->pf_started) {
        pthread_mutex_lock(&t->pf_mu);
        t->pf_quit = 1;
        pthread_cond_broadcast(&t->pf_cv);
        pthread_mutex_unlock(&t->pf_mu);
        pthread_join(t->pf_thread, NULL);
    }
    if (t->prefetch) {
        pthread_mutex_destroy(&t->pf_mu);
        pthread_cond_destroy(&t->pf_cv);
    }
    if (t->be) {
        t->ops->sync(t->be); /* no upload still reads the host batches */
        batch_free(t, &t->hb_next);
        batch_free(t, &t->hb);
        if (t->step_host) t->ops->host_free(t->be, t->step_host);
        for (int i = 0; i < 3; i++)
            if (t->graph[i]) tf_cuda_graph_destroy(t->graph[i]);
        void *bufs[] = {t->params, t->grads, t->adam_m,    t->adam_v,   t->hyper,
                        t->tokens, t->pair,  t->target,    t->pred,     t->loss,
                        t->arena_mem, t->st_tokens, t->st_pair, t->st_target};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) t->ops->free(t->be, bufs[i]);
        if (t->is_cuda)
            tf_cuda_backend_destroy(t->be);
        else
            tf_cpu_backend_destroy(t->be);
    }
    free(t->table);
    free(t->ranges);
    free(t->M.off.blk);
    free(t->M.acts);
    free(t);
}

const tf_config *tf_trainer_config(const tf_trainer *t) { return &t->cfg; }
const char *tf_trainer_backend_name(const tf_trainer *t) { return t->ops->name; }
void tf_trainer_set_prof(tf_trainer *t, tf_prof *p) {
    t->prof = p;
    t->ex.prof = p;
}

static void upload_batch(tf_trainer *t, const tf_batch *b) {
    size_t sz[3];
    batch_sizes(t, sz);
    void *dst[3] = {t->tokens, t->pair, t->target};
    const void *src[3] = {b->tokens, b->pair, b->target};
    for (int i = 0; i < 3; i++)
        t->ops->upload(t->be, dst[i], src[i], sz[i]);
}

/* The three phases. Their phase regions (forward_pass, ...) are opened by
 * run_phase, outside any graph capture, so replayed steps are timed too. */
static void issue_forward(void *arg) {
    tf_trainer *t = arg;
    tf_model_forward(&t->ex, &t->M);
}
static void issue_backward(void *arg) {
    tf_trainer *t = arg;
    tf_model_backward(&t->ex, &t->M);
}
static void issue_optimizer(void *arg) {
    tf_trainer *t = arg;
    for (int i = 0; i < t->nranges; i++) {
        const tf_range *r = &t->ranges[i];
        TF_EXEC_OP(&t->ex, "adamw",
                   adamw(t->be, t->params + r->off, t->grads + r->off, t->adam_m + r->off,
                         t->adam_v + r->off, (long)r->n, t->hyper));
    }
}

/* this step's phases go to the device back to back (the profiler, set after
 * creation, wants a wait at each boundary) */
static int back_to_back(const tf_trainer *t) { return t->pipelined && !t->prof; }

static void set_hyper(tf_trainer *t) {
    const double b1 = 0.9, b2 = 0.999;
    long s = t->adam_step;
    float h[8] = {t->cfg.learning_rate, (float)b1, (float)b2, 1e-8f, 0.01f,
                  (float)(1.0 - pow(b1, (double)s)), (float)(1.0 - pow(b2, (double)s)), 0.0f};
    if (back_to_back(t)) {
        memcpy(t->step_host + 8, h, sizeof h); /* read by the device: set once a step */
        t->ops->upload_async(t->be, t->hyper, t->step_host + 8, sizeof h);
    } else {
        t->ops->upload(t->be, t->hyper, h, sizeof h);
    }
}

static const char *phase_name[3] = {"forward_pass", "backward_pass", "optimizer_step"};

static void issue_phase(tf_trainer *t, int i, void (*fn)(void *)) {
    if (t->graphs_ready)
        tf_cuda_graph_launch(t->be, t->graph[i]);
    else
        fn(t);
}

/* Run one phase, eagerly or as a replayed graph, inside its region; `during`
 * (may be NULL) runs on the host after the phase is issued, before the wait. */
static void run_phase(tf_trainer *t, int i, void (*fn)(void *), void (*during)(tf_trainer *)) {
    tf_region_push(t->prof, phase_name[i]);
    issue_phase(t, i, fn);
    if (during) during(t);
    t->ops->sync(t->be);
    tf_region_pop(t->prof);
}

/* While the backward runs: the next step's batch (drawn by the prefetch
 * thread) goes to the staging buffers on the side queue. The side queue
 * already waits for this step's copies out of the staging buffers
 * (side_wait_main in train_step). Not during a counter-replay step: the
 * replayed kernels should have the GPU to themselves. */
static void stage_next(tf_trainer *t) {
    if (!t->stage || tf_prof_counter_step(t->prof) || (!t->pf_running && !t->pf_have))
        return;
    prefetch_join(t);
    if (t->pf_step != t->cur_step + 1)
        return;
    size_t sz[3];
    batch_sizes(t, sz);
    void *dst[3] = {t->st_tokens, t->st_pair, t->st_target};
    const void *src[3] = {t->hb_next.tokens, t->hb_next.pair, t->hb_next.target};
    for (int i = 0; i < 3; i++)
        t->ops->side_upload(t->be, dst[i], src[i], sz[i]);
    t->staged_step = t->pf_step;
}

static void sample_memory(tf_trainer *t) {
    if (t->prof) tf_prof_memory(t->prof, tf_trainer_backend_bytes(t), 0);
}

/* The three phases issued back to back, the device never waiting for the
 * host between them: one wait at the end of the step, the phase times from
 * marks on the device (mark 0 after the batch copies). */
static void issue_marked(tf_trainer *t, int i, void (*fn)(void *)) {
    tf_region_push(t->prof, phase_name[i]); /* the NVTX / ROCTx range only */
    issue_phase(t, i, fn);
    tf_region_pop(t->prof);
    t->ops->mark(t->be, i + 1);
}

static tf_status pipelined_phases(tf_trainer *t, tf_step_stats *st, double t0, double t1) {
    const tf_ops *o = t->ops;
    o->mark(t->be, 0);
    issue_marked(t, 0, issue_forward);
    o->download_async(t->be, t->step_host, t->loss, sizeof(float));
    issue_marked(t, 1, issue_backward);
    stage_next(t);
    t->adam_step++;
    set_hyper(t);
    issue_marked(t, 2, issue_optimizer);
    o->sync(t->be);
    double t4 = now_ms();
    float loss = t->step_host[0];
    if (st) {
        st->loss = loss;
        st->data_ms = t1 - t0;
        st->forward_ms = o->mark_ms(t->be, 0, 1);
        st->backward_ms = o->mark_ms(t->be, 1, 2);
        st->optimizer_ms = o->mark_ms(t->be, 2, 3);
        st->step_ms = t4 - t0;
        st->counter_replay = 0;
    }
    tf_prof_step_end(t->prof, t->cur_step);
    return isfinite(loss) ? TF_OK : TF_ERR_NONFINITE;
}

static tf_status train_step(tf_trainer *t, const tf_batch *b, long step, int warmup,
                            tf_step_stats *st, double t0) {
    tf_status rc = TF_OK;
    t->cur_step = step;
    if (t->stage && t->staged_step == step && b == &t->hb) {
        size_t sz[3];
        batch_sizes(t, sz);
        void *dst[3] = {t->tokens, t->pair, t->target};
        const void *src[3] = {t->st_tokens, t->st_pair, t->st_target};
        t->ops->main_wait_side(t->be);
        for (int i = 0; i < 3; i++)
            t->ops->copy(t->be, dst[i], src[i], sz[i]);
    } else {
        upload_batch(t, b);
    }
    t->staged_step = -1;
    /* the next staged upload may only overwrite the staging buffers after
     * the copies above */
    if (t->stage) t->ops->side_wait_main(t->be);
    const int pipelined = back_to_back(t);
    if (!pipelined) t->ops->sync(t->be);
    double t1 = now_ms();
    tf_region_pop(t->prof); /* data_loading */
    /* --graph: captured at the last warm-up step, so that every timed step is
     * a replay (its time without the capture's ~7 ms); without warm-up steps
     * (e.g. after --resume) at the first step. --counters on CUDA needs eager
     * steps until it has run (prof.h). */
    const int capture_now = !warmup || step == t->cfg.warmup_steps - 1;
    if (t->cfg.graph && t->is_cuda && capture_now && !t->graphs_ready &&
        !tf_prof_wants_eager(t->prof)) {
        void (*fns[3])(void *) = {issue_forward, issue_backward, issue_optimizer};
        for (int i = 0; i < 3; i++) {
            tf_region_push(t->prof, phase_name[i]);
            int bad = tf_cuda_graph_capture(t->be, fns[i], t, &t->graph[i]);
            if (!bad) t->graph_kernels += tf_cuda_graph_captured_kernels(t->be);
            tf_region_pop(t->prof);
            if (bad) return TF_ERR_INTERNAL;
        }
        t->graphs_ready = 1;
    }
    if (pipelined) return pipelined_phases(t, st, t0, t1);
    run_phase(t, 0, issue_forward, NULL);
    sample_memory(t);
    double t2 = now_ms();
    float loss = 0;
    t->ops->download(t->be, &loss, t->loss, sizeof loss);
    if (!isfinite(loss)) rc = TF_ERR_NONFINITE;
    run_phase(t, 1, issue_backward, stage_next);
    sample_memory(t);
    double t3 = now_ms();
    t->adam_step++;
    set_hyper(t);
    run_phase(t, 2, issue_optimizer, NULL);
    double t4 = now_ms();
    if (st) {
        st->loss = loss;
        st->data_ms = t1 - t0;
        st->forward_ms = t2 - t1;
        st->backward_ms = t3 - t2;
        st->optimizer_ms = t4 - t3;
        st->step_ms = t4 - t0;
        st->counter_replay = tf_prof_counter_step(t->prof);
    }
    tf_prof_step_end(t->prof, step);
    return rc;
}

/* The prefetch worker: one thread for the run, drawing with fewer OpenMP
 * threads than the machine has cores. A thread a step made libgomp build a
 * team a step, and a team as wide as the machine took the cores the main
 * thread needs to feed the GPU (0.8 ms of a 6.7 ms step at the small
 * problem, session 7). */
static void *prefetch_main(void *arg) {
    tf_trainer *t = arg;
    omp_set_num_threads(t->pf_threads);
    pthread_mutex_lock(&t->pf_mu);
    for (;;) {
        while (!t->pf_busy && !t->pf_quit) pthread_cond_wait(&t->pf_cv, &t->pf_mu);
        if (t->pf_quit) break;
        long step = t->pf_step;
        pthread_mutex_unlock(&t->pf_mu);
        tf_data_batch(t->cfg.seed, step, &t->hb_next);
        pthread_mutex_lock(&t->pf_mu);
        t->pf_busy = 0;
        pthread_cond_broadcast(&t->pf_cv);
    }
    pthread_mutex_unlock(&t->pf_mu);
    return NULL;
}

/* Makes t->hb the batch of `step`, from the prefetch when it has it, and
 * starts drawing step + 1. */
static void next_batch(tf_trainer *t, long step) {
    int have = 0;
    prefetch_join(t);
    if (t->pf_have && t->pf_step == step) {
        tf_batch tmp = t->hb;
        t->hb = t->hb_next;
        t->hb_next = tmp;
        have = 1;
    }
    t->pf_have = 0;
    if (!have) tf_data_batch(t->cfg.seed, step, &t->hb);
    if (t->prefetch && !t->pf_started)
        t->pf_started = pthread_create(&t->pf_thread, NULL, prefetch_main, t) == 0;
    if (t->pf_started) {
        pthread_mutex_lock(&t->pf_mu);
        t->pf_step = step + 1;
        t->pf_busy = 1;
        pthread_cond_broadcast(&t->pf_cv);
        pthread_mutex_unlock(&t->pf_mu);
        t->pf_running = 1;
    }
}

tf_status tf_trainer_step(tf_trainer *t, long step, tf_step_stats *st) {
    int warmup = step < t->cfg.warmup_steps;
    tf_prof_step_begin(t->prof, step, warmup);
    double t0 = now_ms();
    tf_region_push(t->prof, "data_loading");
    next_batch(t, step);
    return train_step(t, &t->hb, step, warmup, st, t0);
}

tf_status tf_trainer_step_batch(tf_trainer *t, const tf_batch *b, tf_step_stats *st) {
    long step = t->adam_step;
    int warmup = step < t->cfg.warmup_steps;
    tf_prof_step_begin(t->prof, step, warmup);
    double t0 = now_ms();
    tf_region_push(t->prof, "data_loading");
    return train_step(t, b, step, warmup, st, t0);
}

tf_status tf_trainer_grad(tf_trainer *t, const tf_batch *b, float *loss, float *pred) {
    upload_batch(t, b);
    run_phase(t, 0, issue_forward, NULL);
    run_phase(t, 1, issue_backward, NULL);
    t->ops->download(t->be, loss, t->loss, sizeof *loss);
    if (pred)
        t->ops->download(t->be, pred, t->pred,
                         (size_t)t->cfg.batch * t->cfg.seq_len * t->cfg.seq_len * sizeof(float));
    return isfinite(*loss) ? TF_OK : TF_ERR_NONFINITE;
}

void tf_trainer_get_params(tf_trainer *t, float *host) {
    t->ops->sync(t->be);
    t->ops->download(t->be, host, t->params, t->nparams * sizeof(float));
}
void tf_trainer_set_params(tf_trainer *t, const float *host) {
    t->ops->upload(t->be, t->params, host, t->nparams * sizeof(float));
    t->ops->sync(t->be);
}
void tf_trainer_get_grads(tf_trainer *t, float *host) {
    t->ops->sync(t->be);
    t->ops->download(t->be, host, t->grads, t->nparams * sizeof(float));
}
void tf_trainer_get_adam(tf_trainer *t, float *m_host, float *v_host, long *step) {
    t->ops->sync(t->be);
    if (m_host) t->ops->download(t->be, m_host, t->adam_m, t->nparams * sizeof(float));
    if (v_host) t->ops->download(t->be, v_host, t->adam_v, t->nparams * sizeof(float));
    if (step) *step = t->adam_step;
}
void tf_trainer_set_adam(tf_trainer *t, const float *m_host, const float *v_host, long step) {
    if (m_host) t->ops->upload(t->be, t->adam_m, m_host, t->nparams * sizeof(float));
    if (v_host) t->ops->upload(t->be, t->adam_v, v_host, t->nparams * sizeof(float));
    t->adam_step = step;
    t->ops->sync(t->be);
}

size_t tf_trainer_arena_bytes(const tf_trainer *t) { return t->arena.cap; }
size_t tf_trainer_graph_kernels(const tf_trainer *t) {
    return t->graphs_ready ? t->graph_kernels : 0;
}

size_t tf_trainer_backend_bytes(const tf_trainer *t) {
    return t->is_cuda ? tf_cuda_backend_peak_bytes(t->be) : tf_cpu_backend_peak_bytes(t->be);
}
