/* Stepping: a training step's three phases (forward, backward, optimizer)
 * with per-phase timing, issued one of three ways. Eagerly, the device
 * synchronised at each phase boundary, as the reference does: on the CPU
 * and under the profiler. Back to back (caps.pipelined_phases, without the
 * profiler): one wait a step, the phase times from marks on the device. As
 * captured graphs (--graph where caps.graphs), replayed from the last
 * warm-up step on, either way. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "prof/prof.h"
#include "prof/profiler.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
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
    if (t->prof) tf_prof_memory(t->prof, t->plan.ops->peak_bytes(t->plan.be), 0);
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
    tf_optim_seed(&t->opt, t->step_host + 2);
    issue_marked(t, 0, issue_forward);
    o->download_async(t->plan.be, t->step_host, t->loss, sizeof(float));
    issue_marked(t, 1, issue_backward_step);
    during_backward(t);
    tf_dp_reduce(&t->dp, t->prof, 0); /* waited for at the step's end */
    tf_optim_prepare(&t->opt, t->step_host + 16);
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
         * device): that time is not the optimizer's. Where the backward
         * issues the reduction the wait ends the backward phase, before mark
         * 2: not the backward's. */
        if (st->exposed_comm_ms > 0 && t->dp.in_backward)
            st->backward_ms = fmax(0.0, st->backward_ms - st->exposed_comm_ms);
        else if (st->exposed_comm_ms > 0)
            st->optimizer_ms = fmax(0.0, st->optimizer_ms - st->exposed_comm_ms);
        st->counter_replay = 0;
    }
    tf_prof_step_end(t->prof, t->cur_step);
    return rc;
}

/* --graph: the phases are captured at the last warm-up step, so that every
 * timed step is a replay (its time without the capture's); without warm-up
 * steps (e.g. after --resume) at the first step. --counters on CUDA needs
 * eager steps until it has run (prof.h). */
static tf_status capture(tf_trainer *t, long step, int warmup) {
    const int now = !warmup || step == t->plan.cfg.warmup_steps - 1;
    if (!t->plan.cfg.graph || !t->plan.caps.graphs || !now || t->graphs_ready ||
        tf_prof_wants_eager(t->prof))
        return TF_OK;
    void (*fns[3])(void *) = {issue_forward, issue_backward_step, issue_optimizer};
    for (int i = 0; i < 3; i++) {
        tf_region_push(t->prof, phase_name[i]);
        int bad = t->plan.ops->graph_capture(t->plan.be, fns[i], t, &t->graph[i]);
        if (!bad) t->graph_kernels += t->plan.ops->graph_captured_kernels(t->plan.be);
        tf_region_pop(t->prof);
        if (bad) return TF_ERR_INTERNAL;
    }
    t->graphs_ready = 1;
    return TF_OK;
}

/* The phases with a wait at each boundary, timed on the host. A non-finite
 * loss ends the run after the forward: no backward and no update, so that
 * the weights stay those this forward read (for tf_nonfinite_explain);
 * ranks would all have to agree, so not under data parallelism. */
static tf_status eager_phases(tf_trainer *t, tf_step_stats *st, double t0, double t1) {
    tf_status rc = TF_OK;
    tf_optim_seed(&t->opt, NULL);
    run_phase(t, 0, issue_forward, NULL);
    sample_memory(t);
    double t2 = now_ms();
    float loss = 0;
    t->plan.ops->download(t->plan.be, &loss, t->loss, sizeof loss);
    if (!isfinite(loss)) rc = TF_ERR_NONFINITE;
    t->nonfinite_held = rc == TF_ERR_NONFINITE && tf_dp_ranks(&t->dp) == 1;
    if (t->nonfinite_held) {
        if (st) {
            memset(st, 0, sizeof *st);
            st->loss = loss;
            st->data_ms = t1 - t0;
            st->forward_ms = t2 - t1;
            st->step_ms = t2 - t0;
            st->loss_scale = t->opt.scaler.scale;
        }
        tf_prof_step_end(t->prof, t->cur_step);
        return rc;
    }
    run_phase(t, 1, issue_backward_step, during_backward);
    sample_memory(t);
    double t3 = now_ms();
    tf_dp_reduce(&t->dp, t->prof, 1);
    double t3c = now_ms();
    tf_optim_prepare(&t->opt, NULL);
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
        if (t->dp.in_backward)            /* or the backward phase did: not its compute */
            st->backward_ms = fmax(0.0, st->backward_ms - st->exposed_comm_ms);
        st->step_ms = t4 - t0;
        st->counter_replay = tf_prof_counter_step(t->prof);
    }
    tf_prof_step_end(t->prof, t->cur_step);
    return rc;
}

/* A training step on b, or where b is NULL on step's synthetic batch. */
static tf_status train_step(tf_trainer *t, const tf_batch *b, long step, tf_step_stats *st) {
    const int warmup = step < t->plan.cfg.warmup_steps;
    tf_prof_step_begin(t->prof, step, warmup);
    const double t0 = now_ms();
    tf_region_push(t->prof, "data_loading");
    if (!b) b = tf_feed_next(&t->feed, step);
    t->cur_step = step;
    tf_feed_load(&t->feed, b, step);
    const int pipelined = back_to_back(t);
    if (!pipelined) t->plan.ops->sync(t->plan.be);
    const double t1 = now_ms();
    tf_region_pop(t->prof); /* data_loading */
    tf_status rc = capture(t, step, warmup);
    if (rc != TF_OK) return rc;
    return pipelined ? pipelined_phases(t, st, t0, t1) : eager_phases(t, st, t0, t1);
}

tf_status tf_trainer_step(tf_trainer *t, long step, tf_step_stats *st) {
    return train_step(t, NULL, step, st);
}

tf_status tf_trainer_step_batch(tf_trainer *t, const tf_batch *b, tf_step_stats *st) {
    return train_step(t, b, t->opt.step, st);
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
