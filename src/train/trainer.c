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
#include "train/data_parallel.h"
#include "train/feed.h"
#include "train/memplan.h"
#include "train/optim.h"
#include "train/plan.h"
#include "prof/prof.h"
#include "prof/profiler.h"
#include "train/rng.h"
#include "train/trainer.h"

struct tf_trainer {
    tf_plan plan; /* the backend, the model's layout and composition, the arena */
    tf_config pub; /* what tf_trainer_config reports: the global batch */
    tf_dp dp; /* data parallel (tf_trainer_set_dist) */
    float *params, *grads;
    tf_optim opt; /* AdamW and fp16's loss scale */
    /* the last step's loss was not finite and the step stopped after its
     * forward: the weights and the device batch are what that forward read */
    int nonfinite_held;
    void *arena_mem;
    float *loss, *pred;
    tf_feed feed; /* the batch from the host to the model's inputs */
    /* caps.pipelined_phases, without the profiler: the step's phases are
     * issued back to back and timed by marks on the device */
    int pipelined;
    /* page-locked: [0] the loss, [1] the gradients' non-finite flag, [2] the
     * loss scale, [16..] the AdamW hyper-parameters (ops.h TF_HYPER_*) */
    float *step_host;
    long cur_step;
    tf_prof *prof;
    void *graph[3]; /* forward, backward, optimizer (--graph where caps.graphs) */
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

/* Initialisation (docs/model.md, section 7): Linear weights and the embedding ~ N(0, 0.02); LayerNorm 1 / 0. */
static void init_params(const tf_trainer *t, float *host) {
    for (size_t i = 0; i < t->plan.ntensors; i++) {
        const tf_param_info *p = &t->plan.table[i];
        float *w = host + p->offset;
        if (p->ndim == 1) {
            size_t len = strlen(p->name);
            int is_bias = len > 5 && strcmp(p->name + len - 5, ".bias") == 0;
            for (size_t k = 0; k < p->count; k++) w[k] = is_bias ? 0.0f : 1.0f;
        } else {
            tf_rng r;
            tf_rng_init(&r, t->plan.cfg.seed, TF_STREAM_INIT, i);
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
    return t->plan.ops->alloc(t->plan.be, p, bytes ? bytes : 4);
}

/* The model and the optimizer on the buffers allocated. */
static void wire(tf_trainer *t) {
    tf_model *M = &t->plan.M;
    M->c = &t->plan.cfg;
    M->params = t->params;
    M->grads = t->grads;
    M->tokens = t->feed.in.tokens;
    M->pair = t->feed.in.pair;
    M->target = t->feed.in.target;
    M->loss = t->loss;
    M->pred = t->pred;
    M->loss_scale = t->opt.hyper + TF_HYPER_LOSS_SCALE;
    t->plan.ex.w_base = t->params;
    t->plan.ex.wh = t->opt.wh ? t->opt.wh : t->params;
    t->opt.params = t->params;
    t->opt.grads = t->grads;
}

/* After the plan: the memory, the parameters' initial values, the moments
 * and the batch buffers. */
static tf_status allocate(tf_trainer *t, char *err, size_t errlen) {
    const tf_plan *p = &t->plan;
    const tf_config *c = &p->cfg;
    const size_t B = (size_t)c->batch, N = (size_t)c->seq_len;
    const size_t pbytes = p->param_bytes, arena_bytes = p->arena_bytes, need = tf_plan_need(p);
    tf_feed_init(&t->feed, p->ops, p->be, c, &p->caps);
    if (!p->caps.device_memory) {
        size_t avail = mem_available_bytes();
        size_t host_batch = p->batch_bytes;
        if (avail && need + host_batch > avail / 10 * 9) {
            tf_config cc = *c;
            tf_trainer_destroy(t);
            char fits[200];
            tf_memplan_suggest(&cc, (double)(avail / 10 * 9), fits, sizeof fits);
            snprintf(err, errlen,
                     "this problem needs %.2f GB of memory (parameters, gradients and AdamW "
                     "moments %.2f GB, activations %.2f GB) and a run may use at most 90%% of the "
                     "%.2f GB available: %s",
                     (need + host_batch) / 1e9, 4 * pbytes / 1e9, arena_bytes / 1e9, avail / 1e9,
                     4 * pbytes > arena_bytes ? "reduce --msa-dim, --pair-dim or --num-blocks"
                                              : fits);
            return TF_ERR_NOMEM;
        }
    }
    if (balloc(t, (void **)&t->params, pbytes) || balloc(t, (void **)&t->grads, pbytes) ||
        tf_optim_alloc(&t->opt) ||
        tf_feed_alloc_inputs(&t->feed) ||
        balloc(t, (void **)&t->pred, B * N * N * sizeof(float)) ||
        balloc(t, (void **)&t->loss, 4 * sizeof(float)) ||
        balloc(t, &t->arena_mem, arena_bytes)) {
        const int on_device = p->caps.device_memory;
        tf_config cc = *c;
        tf_trainer_destroy(t);
        char fits[200]; /* the free memory is not known here: the plans of the others */
        tf_memplan_suggest(&cc, -1.0, fits, sizeof fits);
        snprintf(err, errlen,
                 "not enough %s memory: this problem needs %.2f GB (activations %.2f GB); %s",
                 on_device ? "device" : "host", need / 1e9, arena_bytes / 1e9, fits);
        return TF_ERR_NOMEM;
    }
    t->plan.arena = (tf_arena){.base = t->arena_mem, .cap = arena_bytes};
    float *host = malloc(pbytes);
    if (!host || tf_feed_alloc_host(&t->feed)) {
        free(host);
        set_err(err, errlen, "out of host memory for the batch buffers");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    /* issuing the phases back to back is a speed-up only: without the
     * page-locked bytes, wait at each phase boundary */
    t->pipelined = p->caps.pipelined_phases && p->ops->mark &&
                   !p->ops->host_alloc(p->be, (void **)&t->step_host,
                                       (16 + TF_HYPER_COUNT) * sizeof(float));
    init_params(t, host);
    p->ops->upload(p->be, t->params, host, pbytes);
    free(host);
    p->ops->zero(p->be, t->grads, pbytes);
    tf_optim_reset(&t->opt);
    wire(t);
    tf_optim_refresh(&t->opt);
    p->ops->sync(p->be);
    return TF_OK;
}

/* After the plan was built in t (whatever it returned). */
static tf_status create(tf_trainer **out, tf_trainer *t, tf_status st, char *err, size_t errlen) {
    *out = NULL;
    if (st == TF_OK) {
        if (tf_optim_init(&t->opt, &t->plan)) {
            set_err(err, errlen, "out of host memory creating the trainer");
            st = TF_ERR_NOMEM;
        }
    }
    if (st != TF_OK) {
        tf_trainer_destroy(t);
        return st;
    }
    if ((st = allocate(t, err, errlen)) != TF_OK) return st; /* t is gone */
    t->pub = t->plan.cfg;
    *out = t;
    return TF_OK;
}

tf_status tf_trainer_create(tf_trainer **out, const tf_config *c, char *err, size_t errlen) {
    *out = NULL;
    tf_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        set_err(err, errlen, "out of host memory creating the trainer");
        return TF_ERR_NOMEM;
    }
    return create(out, t, tf_plan_open(&t->plan, c, err, errlen), err, errlen);
}

tf_status tf_trainer_create_on(tf_trainer **out, const tf_config *c, tf_backend *be,
                               const tf_ops *ops, const tf_backend_caps *caps, char *err,
                               size_t errlen) {
    *out = NULL;
    tf_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        ops->destroy(be);
        set_err(err, errlen, "out of host memory creating the trainer");
        return TF_ERR_NOMEM;
    }
    return create(out, t, tf_plan_build(&t->plan, c, be, ops, caps, err, errlen), err, errlen);
}

void tf_trainer_destroy(tf_trainer *t) {
    if (!t) return;
    tf_feed_stop(&t->feed);
    if (t->plan.be) {
        t->plan.ops->sync(t->plan.be); /* no upload still reads the host batches */
        tf_feed_free(&t->feed);
        if (t->step_host) t->plan.ops->host_free(t->plan.be, t->step_host);
        for (int i = 0; i < 3; i++)
            if (t->graph[i]) t->plan.ops->graph_destroy(t->plan.be, t->graph[i]);
        tf_optim_free(&t->opt);
        void *bufs[] = {t->params, t->grads, t->pred, t->loss, t->arena_mem};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) t->plan.ops->free(t->plan.be, bufs[i]);
    }
    tf_plan_close(&t->plan);
    free(t);
}

const tf_config *tf_trainer_config(const tf_trainer *t) { return &t->pub; }

int tf_trainer_set_dist(tf_trainer *t, tf_dist *d) {
    /* this rank draws samples [B rank, B (rank + 1)) of each global batch */
    t->pub.batch = t->plan.cfg.batch * d->size;
    tf_feed_set_slice(&t->feed, t->pub.batch, t->plan.cfg.batch * d->rank);
    return tf_dp_attach(&t->dp, d, &t->plan, t->grads);
}

static int back_to_back(const tf_trainer *t);

const char *tf_trainer_backend_name(const tf_trainer *t) { return t->plan.ops->name; }
void tf_trainer_set_prof(tf_trainer *t, tf_prof *p) {
    t->prof = p;
    t->plan.ex.prof = p;
    tf_prof_watch_arena(p, &t->plan.arena.top);
    /* the GPU event timer records on this backend's queues */
    if (t->plan.caps.device_memory) tf_prof_attach_gpu(p, t->plan.be);
}

/* The three phases. Their phase regions (forward_pass, ...) are opened by
 * run_phase, outside any graph capture, so replayed steps are timed too. */
static void issue_forward(void *arg) {
    tf_trainer *t = arg;
    tf_model_forward(&t->plan.ex, &t->plan.M);
}
static void issue_backward(void *arg) {
    tf_trainer *t = arg;
    tf_model_backward(&t->plan.ex, &t->plan.M);
}
/* A training step's backward: where the backward issues the gradients'
 * reduction (data_parallel.h), inside the phase and so inside its graph. */
static void issue_backward_step(void *arg) {
    tf_trainer *t = arg;
    tf_model_backward(&t->plan.ex, &t->plan.M);
    tf_dp_reduce_in_backward(&t->dp, t->prof);
}
static void issue_optimizer(void *arg) {
    tf_trainer *t = arg;
    tf_optim_issue(&t->opt);
}

/* this step's phases go to the device back to back (the profiler, set after
 * creation, wants a wait at each boundary) */
static int back_to_back(const tf_trainer *t) { return t->pipelined && !t->prof; }

/* page-locked host memory for the optimizer's queued uploads, NULL: at once */
static float *pinned(const tf_trainer *t, int at) {
    return back_to_back(t) ? t->step_host + at : NULL;
}

static const char *phase_name[3] = {"forward_pass", "backward_pass", "optimizer_step"};

static void issue_phase(tf_trainer *t, int i, void (*fn)(void *)) {
    if (t->graphs_ready)
        t->plan.ops->graph_launch(t->plan.be, t->graph[i]);
    else
        fn(t);
}

/* Run one phase, eagerly or as a replayed graph, inside its region; `during`
 * (may be NULL) runs on the host after the phase is issued, before the wait. */
static void run_phase(tf_trainer *t, int i, void (*fn)(void *), void (*during)(tf_trainer *)) {
    tf_region_push(t->prof, phase_name[i]);
    issue_phase(t, i, fn);
    if (during) during(t);
    t->plan.ops->sync(t->plan.be);
    tf_region_pop(t->prof);
}

/* While the backward runs: the next step's batch (drawn by the prefetch
 * thread) goes to the staging buffers on the side queue. Not during a
 * counter-replay step: the replayed kernels should have the GPU to
 * themselves. */
static void stage_next(tf_trainer *t) {
    if (!tf_prof_counter_step(t->prof)) tf_feed_stage(&t->feed, t->cur_step);
}

/* On the host while a training step's backward runs */
static void during_backward(tf_trainer *t) {
    tf_dp_after_backward(&t->dp, t->graphs_ready, !back_to_back(t));
    stage_next(t);
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
    t->plan.ops->mark(t->plan.be, i + 1);
}

static tf_status pipelined_phases(tf_trainer *t, tf_step_stats *st, double t0, double t1) {
    const tf_ops *o = t->plan.ops;
    o->mark(t->plan.be, 0);
    tf_optim_seed(&t->opt, pinned(t, 2));
    issue_marked(t, 0, issue_forward);
    o->download_async(t->plan.be, t->step_host, t->loss, sizeof(float));
    issue_marked(t, 1, issue_backward_step);
    during_backward(t);
    tf_dp_reduce(&t->dp, t->prof, !back_to_back(t));
    tf_optim_prepare(&t->opt, pinned(t, 16));
    issue_marked(t, 2, issue_optimizer);
    if (t->opt.scaler.enabled)
        o->download_async(t->plan.be, t->step_host + 1, t->opt.hyper + TF_HYPER_NONFINITE,
                          sizeof(float));
    tf_dp_wait(&t->dp); /* NCCL, with the deadline */
    o->sync(t->plan.be);
    double t4 = now_ms();
    tf_optim_end(&t->opt, t->opt.scaler.enabled ? t->step_host[1] : 0.0f, st);
    float loss = t->step_host[0];
    tf_status rc = tf_dp_mean_loss(&t->dp, &loss);
    if (st) {
        st->loss = loss;
        st->data_ms = t1 - t0;
        st->forward_ms = o->mark_ms(t->plan.be, 0, 1);
        st->backward_ms = o->mark_ms(t->plan.be, 1, 2);
        st->optimizer_ms = o->mark_ms(t->plan.be, 2, 3);
        st->step_ms = t4 - t0;
        tf_dp_stats(&t->dp, t->prof, st);
        /* mark 2 precedes the wait for the all-reduces that the backward
         * did not hide (the exposed part, timed from the same point on the
         * device): that time is not the optimizer's. Where the backward issues
         * the reduction the wait ends the backward phase, before mark 2: not the backward's. */
        if (st->exposed_comm_ms > 0 && t->dp.in_backward)
            st->backward_ms = fmax(0.0, st->backward_ms - st->exposed_comm_ms);
        else if (st->exposed_comm_ms > 0)
            st->optimizer_ms = fmax(0.0, st->optimizer_ms - st->exposed_comm_ms);
        st->counter_replay = 0;
    }
    tf_prof_step_end(t->prof, t->cur_step);
    return rc;
}

static tf_status train_step(tf_trainer *t, const tf_batch *b, long step, int warmup,
                            tf_step_stats *st, double t0) {
    tf_status rc = TF_OK;
    t->cur_step = step;
    tf_feed_load(&t->feed, b, step);
    const int pipelined = back_to_back(t);
    if (!pipelined) t->plan.ops->sync(t->plan.be);
    double t1 = now_ms();
    tf_region_pop(t->prof); /* data_loading */
    /* --graph: captured at the last warm-up step, so that every timed step is
     * a replay (its time without the capture's); without warm-up steps
     * (e.g. after --resume) at the first step. --counters on CUDA needs eager
     * steps until it has run (prof.h). */
    const int capture_now = !warmup || step == t->plan.cfg.warmup_steps - 1;
    if (t->plan.cfg.graph && t->plan.caps.graphs && capture_now && !t->graphs_ready &&
        !tf_prof_wants_eager(t->prof)) {
        void (*fns[3])(void *) = {issue_forward, issue_backward_step, issue_optimizer};
        for (int i = 0; i < 3; i++) {
            tf_region_push(t->prof, phase_name[i]);
            int bad = t->plan.ops->graph_capture(t->plan.be, fns[i], t, &t->graph[i]);
            if (!bad) t->graph_kernels += t->plan.ops->graph_captured_kernels(t->plan.be);
            tf_region_pop(t->prof);
            if (bad) return TF_ERR_INTERNAL;
        }
        t->graphs_ready = 1;
    }
    if (pipelined) return pipelined_phases(t, st, t0, t1);
    tf_optim_seed(&t->opt, pinned(t, 2));
    run_phase(t, 0, issue_forward, NULL);
    sample_memory(t);
    double t2 = now_ms();
    float loss = 0;
    t->plan.ops->download(t->plan.be, &loss, t->loss, sizeof loss);
    if (!isfinite(loss)) rc = TF_ERR_NONFINITE;
    t->nonfinite_held = 0;
    if (rc == TF_ERR_NONFINITE && !(tf_dp_ranks(&t->dp) > 1)) {
        /* a non-finite loss ends the run: no backward and no update, so
         * that the weights stay those this forward read (for
         * tf_trainer_explain_nonfinite). Ranks would all have to agree. */
        t->nonfinite_held = 1;
        if (st) {
            memset(st, 0, sizeof *st);
            st->loss = loss;
            st->data_ms = t1 - t0;
            st->forward_ms = t2 - t1;
            st->step_ms = t2 - t0;
            st->loss_scale = t->opt.scaler.scale;
        }
        tf_prof_step_end(t->prof, step);
        return rc;
    }
    run_phase(t, 1, issue_backward_step, during_backward);
    sample_memory(t);
    double t3 = now_ms();
    tf_dp_reduce(&t->dp, t->prof, !back_to_back(t));
    double t3c = now_ms();
    tf_optim_prepare(&t->opt, pinned(t, 16));
    run_phase(t, 2, issue_optimizer, NULL);
    double t4 = now_ms();
    float nonfinite = 0.0f;
    if (t->opt.scaler.enabled)
        t->plan.ops->download(t->plan.be, &nonfinite, t->opt.hyper + TF_HYPER_NONFINITE,
                              sizeof nonfinite);
    tf_optim_end(&t->opt, nonfinite, st);
    if (tf_dp_ranks(&t->dp) > 1) rc = tf_dp_mean_loss(&t->dp, &loss);
    if (st) {
        st->loss = loss;
        st->data_ms = t1 - t0;
        st->forward_ms = t2 - t1;
        st->backward_ms = t3 - t2;
        st->optimizer_ms = t4 - t3c;
        tf_dp_stats(&t->dp, t->prof, st); /* tf_dp_reduce waited for them (t3 .. t3c) */
        if (t->dp.in_backward) /* or the backward phase did: not its compute */
            st->backward_ms = fmax(0.0, st->backward_ms - st->exposed_comm_ms);
        st->step_ms = t4 - t0;
        st->counter_replay = tf_prof_counter_step(t->prof);
    }
    tf_prof_step_end(t->prof, step);
    return rc;
}

tf_status tf_trainer_step(tf_trainer *t, long step, tf_step_stats *st) {
    int warmup = step < t->plan.cfg.warmup_steps;
    tf_prof_step_begin(t->prof, step, warmup);
    double t0 = now_ms();
    tf_region_push(t->prof, "data_loading");
    return train_step(t, tf_feed_next(&t->feed, step), step, warmup, st, t0);
}

tf_status tf_trainer_step_batch(tf_trainer *t, const tf_batch *b, tf_step_stats *st) {
    long step = t->opt.step;
    int warmup = step < t->plan.cfg.warmup_steps;
    tf_prof_step_begin(t->prof, step, warmup);
    double t0 = now_ms();
    tf_region_push(t->prof, "data_loading");
    return train_step(t, b, step, warmup, st, t0);
}

tf_status tf_trainer_grad(tf_trainer *t, const tf_batch *b, float *loss, float *pred) {
    /* fp16 seeds with the loss scale (its gradients would underflow
     * without) and divides it out after: exact, the scale is a power of two */
    const float scale = t->opt.scaler.scale;
    t->plan.ops->upload(t->plan.be, t->opt.hyper + TF_HYPER_LOSS_SCALE, &scale, sizeof scale);
    tf_feed_upload(&t->feed, b);
    run_phase(t, 0, issue_forward, NULL);
    run_phase(t, 1, issue_backward, NULL);
    if (scale != 1.0f) {
        t->plan.ops->scale(t->plan.be, t->grads, t->grads, 1.0f / scale, (long)t->plan.nparams,
                           TF_F32);
        t->plan.ops->sync(t->plan.be);
    }
    t->plan.ops->download(t->plan.be, loss, t->loss, sizeof *loss);
    if (pred)
        t->plan.ops->download(t->plan.be, pred, t->pred,
                              (size_t)t->plan.cfg.batch * t->plan.cfg.seq_len *
                                  t->plan.cfg.seq_len * sizeof(float));
    return isfinite(*loss) ? TF_OK : TF_ERR_NONFINITE;
}

int tf_trainer_nonfinite_held(const tf_trainer *t) { return t->nonfinite_held; }

void tf_trainer_get_batch(tf_trainer *t, tf_batch *host) {
    t->plan.ops->sync(t->plan.be);
    tf_feed_download(&t->feed, host);
}

void tf_trainer_get_params(tf_trainer *t, float *host) {
    t->plan.ops->sync(t->plan.be);
    t->plan.ops->download(t->plan.be, host, t->params, t->plan.nparams * sizeof(float));
}
void tf_trainer_set_params(tf_trainer *t, const float *host) {
    t->plan.ops->upload(t->plan.be, t->params, host, t->plan.nparams * sizeof(float));
    tf_optim_refresh(&t->opt);
    t->plan.ops->sync(t->plan.be);
}
void tf_trainer_get_grads(tf_trainer *t, float *host) {
    t->plan.ops->sync(t->plan.be);
    t->plan.ops->download(t->plan.be, host, t->grads, t->plan.nparams * sizeof(float));
}
void tf_trainer_get_adam(tf_trainer *t, float *m_host, float *v_host, long *step) {
    t->plan.ops->sync(t->plan.be);
    tf_optim_get(&t->opt, m_host, v_host, step);
}
void tf_trainer_set_adam(tf_trainer *t, const float *m_host, const float *v_host, long step) {
    tf_optim_set(&t->opt, m_host, v_host, step);
    t->plan.ops->sync(t->plan.be);
}

void tf_trainer_get_loss_scale(const tf_trainer *t, float *scale, long *clean_steps,
                               long *skipped) {
    if (scale) *scale = t->opt.scaler.scale;
    if (clean_steps) *clean_steps = t->opt.scaler.clean_steps;
    if (skipped) *skipped = t->opt.scaler.skipped;
}
void tf_trainer_set_loss_scale(tf_trainer *t, float scale, long clean_steps, long skipped) {
    if (!t->opt.scaler.enabled) return;
    t->opt.scaler.scale = scale;
    t->opt.scaler.clean_steps = clean_steps;
    t->opt.scaler.skipped = skipped;
}

size_t tf_trainer_arena_bytes(const tf_trainer *t) { return t->plan.arena.cap; }
size_t tf_trainer_arena_peak(const tf_trainer *t) { return t->plan.arena.peak; }
size_t tf_trainer_graph_kernels(const tf_trainer *t) {
    return t->graphs_ready ? t->graph_kernels : 0;
}

size_t tf_trainer_backend_bytes(const tf_trainer *t) {
    return t->plan.ops->peak_bytes(t->plan.be);
}
