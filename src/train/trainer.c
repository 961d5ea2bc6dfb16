/* The trainer, owner of its parts (trainer_internal.h): it has the plan
 * built (plan.c), checks the memory the plan needs, allocates the buffers
 * the parts share (the parameters, their gradients, the arena, the loss and
 * the predictions), initialises the parameters, and wires the model, the
 * feed, the optimizer and data parallel to them. step.c runs the steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/profiler.h"
#include "train/hostmem.h"
#include "train/memplan.h"
#include "train/rng.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

static void set_err(char *err, size_t n, const char *msg) {
    if (err && n) snprintf(err, n, "%s", msg);
}

/* Initialisation (docs/model.md, section 7): Linear weights and the
 * embedding ~ N(0, 0.02); LayerNorm 1 / 0. */
static void init_params(const tf_trainer *t, float *host) {
    for (size_t i = 0; i < t->plan.ntensors; i++) {
        const tf_param_info *p = &t->plan.table[i];
        float *w = host + p->offset;
        if (p->ndim == 1) {
            size_t len = strlen(p->name);
            int is_bias = len > 5 && strcmp(p->name + len - 5, ".bias") == 0;
            for (size_t k = 0; k < p->count; k++)
                w[k] = is_bias ? 0.0f : 1.0f;
        } else {
            tf_rng r;
            tf_rng_init(&r, t->plan.cfg.seed, TF_STREAM_INIT, i);
            for (size_t k = 0; k < p->count; k++)
                w[k] = (float)(0.02 * tf_rng_normal(&r));
        }
    }
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

/* Where the backend's memory is the host's, a run may take 90% of what is
 * available. On refusal t is gone. */
static tf_status check_host(tf_trainer *t, char *err, size_t errlen) {
    const tf_plan *p = &t->plan;
    const size_t avail = p->caps.device_memory ? 0 : tf_hostmem_available();
    const size_t need = tf_plan_need(p) + p->batch_bytes; /* the host batch too */
    if (!avail || need <= avail / 10 * 9) return TF_OK;
    const tf_config c = p->cfg;
    const size_t pbytes = p->param_bytes, arena_bytes = p->arena_bytes;
    tf_trainer_destroy(t);
    char fits[200];
    tf_memplan_suggest(&c, (double)(avail / 10 * 9), fits, sizeof fits);
    snprintf(err, errlen,
             "this problem needs %.2f GB of memory (parameters, gradients and AdamW moments "
             "%.2f GB, activations %.2f GB) and a run may use at most 90%% of the %.2f GB "
             "available: %s",
             need / 1e9, 4 * pbytes / 1e9, arena_bytes / 1e9, avail / 1e9,
             4 * pbytes > arena_bytes ? "reduce --msa-dim, --pair-dim or --num-blocks" : fits);
    return TF_ERR_NOMEM;
}

/* The backend's buffers, then the host's. On failure t is gone. */
static tf_status allocate(tf_trainer *t, char *err, size_t errlen) {
    const tf_plan *p = &t->plan;
    const tf_config *c = &p->cfg;
    const size_t pbytes = p->param_bytes, arena_bytes = p->arena_bytes;
    const size_t pred_bytes = (size_t)c->batch * c->seq_len * c->seq_len * sizeof(float);
    if (balloc(t, (void **)&t->params, pbytes) || balloc(t, (void **)&t->grads, pbytes) ||
        tf_optim_alloc(&t->opt) || tf_feed_alloc_inputs(&t->feed) ||
        balloc(t, (void **)&t->pred, pred_bytes) ||
        balloc(t, (void **)&t->loss, 4 * sizeof(float)) || balloc(t, &t->arena_mem, arena_bytes)) {
        const tf_config cc = *c;
        const int on_device = p->caps.device_memory;
        const size_t need = tf_plan_need(p);
        tf_trainer_destroy(t);
        char fits[200]; /* the free memory is not known here: the plans of the others */
        tf_memplan_suggest(&cc, -1.0, fits, sizeof fits);
        snprintf(err, errlen,
                 "not enough %s memory: this problem needs %.2f GB (activations %.2f GB); %s",
                 on_device ? "device" : "host", need / 1e9, arena_bytes / 1e9, fits);
        return TF_ERR_NOMEM;
    }
    t->plan.arena = (tf_arena){.base = t->arena_mem, .cap = arena_bytes};
    if (tf_feed_alloc_host(&t->feed)) {
        set_err(err, errlen, "out of host memory for the batch buffers");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
    /* issuing the phases back to back is a speed-up only: without the
     * page-locked bytes, wait at each phase boundary */
    t->pipelined =
        p->caps.pipelined_phases && p->ops->mark &&
        !p->ops->host_alloc(p->be, (void **)&t->step_host, (16 + TF_HYPER_COUNT) * sizeof(float));
    return TF_OK;
}

/* The parameters' initial values, zero gradients and moments, the parts
 * wired. 0, or 1 without the host memory for the initial values. */
static int initialise(tf_trainer *t) {
    const tf_plan *p = &t->plan;
    float *host = malloc(p->param_bytes);
    if (!host) return 1;
    init_params(t, host);
    p->ops->upload(p->be, t->params, host, p->param_bytes);
    free(host);
    p->ops->zero(p->be, t->grads, p->param_bytes);
    tf_optim_reset(&t->opt);
    wire(t);
    tf_optim_refresh(&t->opt);
    p->ops->sync(p->be);
    return 0;
}

/* After the plan was built in t, whatever it returned. */
static tf_status create(tf_trainer **out, tf_trainer *t, tf_status st, char *err, size_t errlen) {
    if (st == TF_OK && tf_optim_init(&t->opt, &t->plan)) {
        set_err(err, errlen, "out of host memory creating the trainer");
        st = TF_ERR_NOMEM;
    }
    if (st != TF_OK) {
        tf_trainer_destroy(t);
        return st;
    }
    tf_feed_init(&t->feed, t->plan.ops, t->plan.be, &t->plan.cfg, &t->plan.caps);
    if ((st = check_host(t, err, errlen)) != TF_OK) return st; /* t is gone */
    if ((st = allocate(t, err, errlen)) != TF_OK) return st;
    if (initialise(t)) {
        set_err(err, errlen, "out of host memory for the batch buffers");
        tf_trainer_destroy(t);
        return TF_ERR_NOMEM;
    }
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

const char *tf_trainer_backend_name(const tf_trainer *t) { return t->plan.ops->name; }
void tf_trainer_set_prof(tf_trainer *t, tf_prof *p) {
    t->prof = p;
    t->plan.ex.prof = p;
    tf_prof_watch_arena(p, &t->plan.arena.top);
    /* the GPU event timer records on this backend's queues */
    if (t->plan.caps.device_memory) tf_prof_attach_gpu(p, t->plan.ops, t->plan.be);
}

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

size_t tf_trainer_backend_bytes(const tf_trainer *t) { return t->plan.ops->peak_bytes(t->plan.be); }
