/* A training run: the launch's ranks, the trainer, the step loop and the
 * checkpoints it writes. */
#define _POSIX_C_SOURCE 200809L
#include "train/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/checkpoint.h"
#include "train/hostmem.h"
#include "train/nonfinite.h"
#include "train/trainer.h"
#include "train/trainer_io.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

tf_status tf_run_begin(tf_run *r, const tf_run_opts *o, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->o = *o;
    r->saved_step = -1;
    err[0] = '\0';
    char why[512];
    if (!tf_dist_init(&r->dist, o->dist_timeout, why, sizeof why)) return TF_OK;
    snprintf(err, errlen, "%s", why);
    return TF_ERR_USAGE;
}

void tf_run_end(tf_run *r, int ok) {
    if (ok || r->dist.size == 1) tf_dist_finalize(&r->dist);
}

/* The host memory the run holds beyond the trainer's own plan (which the
 * trainer checks itself): staging copies of the parameters for loading and
 * saving checkpoints, the batch of --data. An accepted run must get through
 * its final save, so these count against the same 90% rule. planned: the
 * trainer's bytes are its plan's, else its least. */
static tf_status check_host_memory(const tf_run *r, size_t avail, size_t trainer_bytes, int planned,
                                   char *err, size_t errlen) {
    if (!avail) return TF_OK; /* no /proc/meminfo: nothing to plan against */
    const tf_run_opts *o = &r->o;
    const tf_config *c = &r->c;
    size_t load = o->resume_path ? tf_checkpoint_load_bytes(c, 1)
                  : o->load_path ? tf_checkpoint_load_bytes(c, 0)
                                 : 0;
    size_t save = o->save_path ? tf_checkpoint_save_bytes(c) : 0;
    size_t batch = r->df ? tf_hostmem_batch_bytes(c) : 0;
    size_t extra = (load > save ? load : save) + batch;
    size_t need = trainer_bytes + extra, allowed = avail / 10 * 9;
    if (need <= allowed) return TF_OK;
    double params_gb = (double)tf_param_count_floats(c) * sizeof(float) / 1e9;
    snprintf(err, errlen,
             "this run needs %s%.2f GB of host memory (training %.2f GB, of which parameters, "
             "gradients and AdamW moments %.2f GB; %s %.2f GB) and a run may use at most 90%% "
             "of the %.2f GB available: reduce %s",
             planned ? "" : "at least ", need / 1e9, trainer_bytes / 1e9, 4 * params_gb,
             save >= load ? "saving the checkpoint (3 copies of the parameters)"
                          : "loading the checkpoint",
             (load > save ? load : save) / 1e9, avail / 1e9,
             /* the parameters dominate: the model's width and depth matter */
             7 * params_gb * 1e9 > (double)need / 2
                 ? "--msa-dim, --pair-dim or --num-blocks (the parameters grow with "
                   "msa_dim^2 and pair_dim^2 per block)"
                 : "--batch-size, --seq-len or --num-seqs (the activations), or "
                   "--num-blocks");
    return TF_ERR_NOMEM;
}

/* The checkpoint the run starts from, into the trainer. */
static tf_status load_checkpoint(tf_run *r, char *err, size_t errlen) {
    const int resume = r->o.resume_path != NULL;
    char why[2 * 4096 + 512];
    long gs = 0;
    tf_status s = tf_checkpoint_load(r->t, resume ? r->o.resume_path : r->o.load_path, resume, &gs,
                                     why, sizeof why);
    if (s != TF_OK) {
        snprintf(err, errlen, "%s: %s", resume ? "--resume" : "--load", why);
        return s == TF_ERR_INTERNAL ? TF_ERR_INTERNAL : TF_ERR_USAGE;
    }
    if (resume) r->start = gs; /* the run continues at the checkpoint's global step */
    return TF_OK;
}

tf_status tf_run_create(tf_run *r, tf_prof *prof, char *err, size_t errlen) {
    tf_dist *d = &r->dist;
    char why[2 * 4096 + 512];
    err[0] = '\0';
    /* First against what the trainer holds at least (parameters, gradients,
     * two moments), before it allocates; then against what it planned. */
    const size_t avail = tf_hostmem_available();
    const int on_host = r->c.backend == TF_BACKEND_CPU;
    const size_t least = on_host ? 4 * tf_param_count_floats(&r->c) * sizeof(float) : 0;
    tf_status s = check_host_memory(r, avail, least, 0, err, errlen);
    if (s != TF_OK) return s;
    tf_config mine = r->c; /* this rank's share of the global batch */
    mine.batch /= d->size;
    if ((s = tf_trainer_create(&r->t, &mine, why, sizeof why)) != TF_OK) {
        r->t = NULL;
        snprintf(err, errlen, "%s", why);
        return s;
    }
    d->bucket_bytes = (double)r->o.dist_bucket_kb * 1024;
    if ((d->size > 1 || d->nccl) && tf_trainer_set_dist(r->t, d)) {
        snprintf(err, errlen, "out of host memory for the gradients' buckets");
        return TF_ERR_NOMEM;
    }
    s = check_host_memory(r, avail, on_host ? tf_trainer_backend_bytes(r->t) : 0, 1, err, errlen);
    if (s != TF_OK) return s;
    if (prof) tf_trainer_set_prof(r->t, prof);
    if ((r->o.resume_path || r->o.load_path) && (s = load_checkpoint(r, err, errlen)) != TF_OK)
        return s;
    if (r->df && !tf_hostmem_batch_alloc(&r->batch, &r->c)) {
        snprintf(err, errlen, "out of host memory for the batch");
        return TF_ERR_NOMEM;
    }
    if (r->o.dist_check_every && d->size > 1 &&
        !(r->check_buf = malloc(tf_param_count_floats(&r->c) * sizeof(float)))) {
        snprintf(err, errlen, "out of host memory for --dist-check-every's copy of the weights");
        return TF_ERR_NOMEM;
    }
    return TF_OK;
}

/* Rank 0 writes (the weights are the same on every rank); every rank learns
 * whether it could. */
static tf_status save(tf_run *r, long global_step, char *err, size_t errlen) {
    char why[2 * 4096 + 512];
    int bad = 0;
    if (r->dist.rank == 0 &&
        tf_checkpoint_save(r->t, r->o.save_path, global_step, why, sizeof why) != TF_OK) {
        snprintf(err, errlen, "--save: %s", why);
        bad = 1;
    }
    return tf_dist_max_int(&r->dist, bad) ? TF_ERR_IO : TF_OK;
}

/* Step i of the run on its batch: the data file's, or the synthetic one. */
static tf_status step(tf_run *r, long global_step, tf_step_stats *st) {
    if (!r->df) return tf_trainer_step(r->t, global_step, st);
    const double t0 = now_ms();
    tf_datafile_batch(r->df, global_step, &r->batch);
    const double file_ms = now_ms() - t0;
    tf_status s = tf_trainer_step_batch(r->t, &r->batch, st);
    st->data_ms += file_ms;
    st->step_ms += file_ms;
    return s;
}

/* Step i failed: what became non-finite, from what can be checked after the
 * step (train/nonfinite.h), or the status. */
static tf_status step_failed(tf_run *r, int i, const tf_step_stats *st, tf_status s, char *err,
                             size_t errlen) {
    const int W = r->c.warmup_steps, N = r->c.num_steps, warm = i < W;
    const int k = warm ? i + 1 : i - W + 1; /* 1-based within warm-up or timed steps */
    const long g = r->start + i;
    if (s != TF_ERR_NONFINITE && isfinite(st->loss)) {
        snprintf(err, errlen, "training step failed at global step %ld (status %d)", g, (int)s);
        return s;
    }
    tf_nonfinite_why why;
    char cause[640];
    tf_nonfinite_explain(r->t, &why);
    tf_nonfinite_describe(&why, r->c.precision, i == 0,
                          r->o.resume_path || r->o.load_path ? "checkpoint's weights"
                                                             : "initial weights",
                          g, cause, sizeof cause);
    snprintf(err, errlen,
             "loss is not finite in the forward of %s step %d/%d (global step %ld, loss %g%s): %s",
             warm ? "warm-up" : "timed", k, warm ? W : N, g, (double)st->loss,
             i == 0 ? ", the run's first step, before any update" : "", cause);
    return s;
}

/* A signal seen by one rank stops every rank at the same step. */
static int stop_signal(tf_run *r, const tf_run_hooks *h) {
    int s = h->stop ? h->stop(h->ctx) : 0;
    return r->dist.size > 1 ? tf_dist_max_int(&r->dist, s) : s;
}

/* --dist-check-every: 1 when the weights are bit for bit the same on every
 * rank (FNV-1a of their bytes, compared by min and max across ranks). */
static int weights_agree(tf_run *r) {
    const size_t n = tf_param_count_floats(&r->c);
    tf_trainer_get_params(r->t, r->check_buf);
    const unsigned char *b = (const unsigned char *)r->check_buf;
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++)
        hash = (hash ^ b[i]) * 1099511628211ull;
    return tf_dist_same_u64(&r->dist, hash);
}

tf_status tf_run_steps(tf_run *r, const tf_run_hooks *h, char *err, size_t errlen) {
    const int n = r->c.warmup_steps + r->c.num_steps;
    const tf_run_opts *o = &r->o;
    err[0] = '\0';
    for (int i = 0; i < n && !(r->stop = stop_signal(r, h)); i++) {
        const long g = r->start + i;
        if (h->before) h->before(h->ctx, i);
        tf_step_stats st = {0};
        tf_status s = step(r, g, &st);
        r->steps = i + 1;
        if (h->after) h->after(h->ctx, i, &st, s);
        if (s != TF_OK) return step_failed(r, i, &st, s, err, errlen);
        if (r->check_buf && (g + 1) % o->dist_check_every == 0 && !weights_agree(r)) {
            if (r->dist.rank == 0)
                snprintf(err, errlen,
                         "--dist-check-every: the weights differ across the %d ranks after "
                         "global step %ld (the ranks applied different updates)",
                         r->dist.size, g + 1);
            return TF_ERR_INTERNAL;
        }
        if (o->save_every && (g + 1) % o->save_every == 0 && i + 1 < n) {
            if ((s = save(r, g + 1, err, errlen)) != TF_OK) return s;
            r->saved_step = g + 1;
        }
    }
    return TF_OK;
}

tf_status tf_run_save_final(tf_run *r, char *err, size_t errlen) {
    err[0] = '\0';
    const long last = r->start + r->steps;
    /* a signal right after a --save-every save: that file is this step's */
    if (!r->o.save_path || r->saved_step == last) return TF_OK;
    return save(r, last, err, errlen);
}

void tf_run_close(tf_run *r) {
    if (r->t) tf_trainer_destroy(r->t);
    r->t = NULL;
#ifdef TF_HAVE_NCCL
    if (r->dist.nccl) tf_dist_nccl_destroy(&r->dist);
#endif
    if (r->df) tf_datafile_close(r->df);
    r->df = NULL;
    tf_hostmem_batch_free(&r->batch);
    free(r->check_buf);
    r->check_buf = NULL;
}
