/* `tinyfold train` and `tinyfold profile`: set up (checkpoint, data file,
 * backend, profiler), run warm-up + timed steps, report, write files. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "io/checkpoint.h"
#include "io/datafile.h"
#include "prof/markers.h"
#include "prof/profiler.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A checkpoint fixes the model (--load) or the model, problem and training
 * (--resume): a knob given on the command line must agree with it, the
 * others are taken from it. */
static int merge_stored(tf_config *c, const tf_config *st, unsigned set, int resume)
{
    static const struct {
        unsigned bit;
        const char *flag;
        size_t off;
        int model; /* 1: part of the model (also fixed by --load) */
    } knobs[] = {
        {TF_SET_BATCH, "--batch-size", offsetof(tf_config, batch), 0},
        {TF_SET_SEQ_LEN, "--seq-len", offsetof(tf_config, seq_len), 0},
        {TF_SET_N_SEQS, "--num-seqs", offsetof(tf_config, n_seqs), 0},
        {TF_SET_BLOCKS, "--num-blocks", offsetof(tf_config, n_blocks), 1},
        {TF_SET_MSA_DIM, "--msa-dim", offsetof(tf_config, msa_dim), 1},
        {TF_SET_PAIR_DIM, "--pair-dim", offsetof(tf_config, pair_dim), 1},
    };
    const char *how = resume ? "--resume: the checkpoint was trained with"
                             : "--load: the checkpoint holds a model with";
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        int mine = *(const int *)((const char *)c + knobs[i].off);
        int theirs = *(const int *)((const char *)st + knobs[i].off);
        if ((resume || knobs[i].model) && (set & knobs[i].bit) && mine != theirs) {
            tf_cli_error("%s: '%d' is not accepted with %s %d", knobs[i].flag, mine, how, theirs);
            return TF_EXIT_USAGE;
        }
    }
    if (!resume) {
        c->n_blocks = st->n_blocks;
        c->msa_dim = st->msa_dim;
        c->pair_dim = st->pair_dim;
        c->n_heads_msa = st->n_heads_msa;
        c->n_heads_pair = st->n_heads_pair;
        c->outer_dim = st->outer_dim;
        c->vocab = st->vocab;
        c->pair_input_dim = st->pair_input_dim;
        return TF_EXIT_OK;
    }
    if ((set & TF_SET_LR) && c->learning_rate != st->learning_rate) {
        tf_cli_error("--learning-rate: '%g' is not accepted with %s %g", (double)c->learning_rate,
                     how, (double)st->learning_rate);
        return TF_EXIT_USAGE;
    }
    if ((set & TF_SET_SEED) && c->seed != st->seed) {
        tf_cli_error("--seed: '%llu' is not accepted with %s %llu", (unsigned long long)c->seed,
                     how, (unsigned long long)st->seed);
        return TF_EXIT_USAGE;
    }
    if ((set & TF_SET_WARMUP) && c->warmup_steps > 0) {
        tf_cli_error("--warmup-steps: '%d' is not accepted with --resume: a resumed run takes "
                     "no warm-up (it continues bit for bit)",
                     c->warmup_steps);
        return TF_EXIT_USAGE;
    }
    /* Model and problem from the file; how and how long to run from the command line. */
    tf_config run = *c;
    *c = *st;
    c->num_steps = run.num_steps;
    c->warmup_steps = 0;
    c->impl = run.impl;
    c->fusion = run.fusion;
    c->backend = run.backend;
    c->device = run.device;
    c->threads = run.threads;
    c->precision = run.precision;
    c->graph = run.graph;
    return TF_EXIT_OK;
}

/* --data: the file's N and S are the problem's (a knob given must agree). */
static int adopt_datafile(tf_config *c, const tf_datafile *d, const char *path, unsigned set,
                          int resumed)
{
    int S = tf_datafile_S(d), N = tf_datafile_N(d);
    char q[64];
    tf_cli_quote(q, sizeof q, path);
    int fixed_n = resumed || (set & TF_SET_SEQ_LEN), fixed_s = resumed || (set & TF_SET_N_SEQS);
    if ((fixed_n && N != c->seq_len) || (fixed_s && S != c->n_seqs)) {
        tf_cli_error("--data: '%s' is not accepted: its samples have --seq-len %d --num-seqs %d, "
                     "the run has %d and %d",
                     q, N, S, c->seq_len, c->n_seqs);
        return TF_EXIT_USAGE;
    }
    c->seq_len = N;
    c->n_seqs = S;
    return TF_EXIT_OK;
}

static int save_checkpoint(tf_trainer *t, const char *path, long global_step)
{
    char err[512];
    tf_status s = tf_checkpoint_save(t, path, global_step, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("--save: %s", err);
        return TF_EXIT_FAIL;
    }
    return TF_EXIT_OK;
}

typedef struct {
    tf_config c;
    long start; /* global step of the first step of this run */
    tf_datafile *df;
    tf_prof *prof;
    tf_trainer *t;
    tf_cli_steprec *recs;
    tf_batch batch;
    char note[384];
} run_state;

/* Everything before the first step. Returns an exit status. */
static int setup(run_state *r, const tf_cli_opts *o)
{
    char err[512];
    tf_status s;
    r->c = o->cfg;
    /* Read the checkpoint's config first: a wrong file fails before any work. */
    const char *ck = o->resume_path ? o->resume_path : o->load_path;
    if (ck) {
        tf_config stored;
        long gs = 0;
        s = tf_checkpoint_peek_config(ck, &stored, &gs, err, sizeof err);
        if (s != TF_OK) {
            tf_cli_error("%s: %s", o->resume_path ? "--resume" : "--load", err);
            return TF_EXIT_USAGE;
        }
        int rc = merge_stored(&r->c, &stored, o->set, o->resume_path != NULL);
        if (rc != TF_EXIT_OK)
            return rc;
    }
    if (o->data_path) {
        s = tf_datafile_open(o->data_path, &r->df, err, sizeof err);
        if (s != TF_OK) {
            tf_cli_error("--data: %s", err);
            return TF_EXIT_USAGE;
        }
        int rc = adopt_datafile(&r->c, r->df, o->data_path, o->set, o->resume_path != NULL);
        if (rc != TF_EXIT_OK)
            return rc;
    }
    if (tf_config_validate(&r->c, err, sizeof err) != TF_OK) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    int rc = tf_cli_resolve_backend(&r->c, r->note, sizeof r->note);
    if (rc != TF_EXIT_OK)
        return rc;
    if (o->profile_regions && tf_marker_select(o->profile_regions, err, sizeof err)) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }

    if (o->cmd == TF_CMD_PROFILE) {
#ifdef TF_NO_PROF_HOOKS
        tf_cli_error("profile: this build has the profiling hooks compiled out "
                     "(CMake TF_PROF_HOOKS=OFF, a benchmark-only build); rebuild with the default");
        return TF_EXIT_USAGE;
#endif
        if (r->c.backend == TF_BACKEND_HIP) {
            /* host clocks would time the launches, not the kernels */
            tf_cli_error("profile: the built-in profiler's GPU timings are CUPTI's (NVIDIA); "
                         "on AMD GPUs profile with rocprofv3 (docs/amd.md), or use --backend cpu");
            return TF_EXIT_USAGE;
        }
        /* Before the trainer: CUPTI must see the first CUDA work. */
        tf_prof_opts po = {.out_dir = o->out_path,
                           .selected_regions = o->selected_regions,
                           .include_warmup = o->include_warmup,
                           .trace_max_steps = o->trace_steps,
                           .counters = o->counters,
                           .cuda = r->c.backend == TF_BACKEND_CUDA,
                           .top = o->top};
        r->prof = tf_prof_create(&po, err, sizeof err);
        if (!r->prof) {
            tf_cli_error("profile: %s", err);
            return TF_EXIT_USAGE;
        }
    }
    s = tf_trainer_create(&r->t, &r->c, err, sizeof err);
    if (s != TF_OK) {
        r->t = NULL;
        tf_cli_error("%s", err);
        return tf_cli_exit_for(s);
    }
    if (r->prof)
        tf_trainer_set_prof(r->t, r->prof);
    if (ck) {
        long gs = 0;
        s = tf_checkpoint_load(r->t, ck, o->resume_path != NULL, &gs, err, sizeof err);
        if (s != TF_OK) {
            tf_cli_error("%s: %s", o->resume_path ? "--resume" : "--load", err);
            return s == TF_ERR_INTERNAL ? TF_EXIT_FAIL : TF_EXIT_USAGE;
        }
        if (o->resume_path)
            r->start = gs; /* the run continues at the checkpoint's global step */
    }
    size_t n = (size_t)r->c.warmup_steps + (size_t)r->c.num_steps;
    r->recs = calloc(n, sizeof *r->recs);
    if (!r->recs || (r->df && !tf_cli_batch_alloc(&r->batch, &r->c))) {
        tf_cli_error("out of host memory for the step records or the batch");
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

static void teardown(run_state *r)
{
    if (r->t)
        tf_trainer_destroy(r->t);
    if (r->prof)
        tf_prof_destroy(r->prof);
    if (r->df)
        tf_datafile_close(r->df);
    tf_cli_batch_free(&r->batch);
    free(r->recs);
}

static void describe_run(const run_state *r, const tf_cli_opts *o, char *backend, size_t bn,
                         char *data, size_t dn)
{
    const tf_config *c = &r->c;
    int len;
    if (c->backend == TF_BACKEND_CPU)
        len = snprintf(backend, bn, "%s | %s | %d threads", tf_trainer_backend_name(r->t),
                       tf_cli_blas_info(), c->threads);
    else
        len = snprintf(backend, bn, "%s (device %d)", tf_trainer_backend_name(r->t), c->device);
    if (r->note[0] && len >= 0 && (size_t)len < bn)
        snprintf(backend + len, bn - (size_t)len, " (%s)", r->note);
    if (r->df)
        snprintf(data, dn, "%s (%d samples; sample j of step g = (g*B + j) mod %d)", o->data_path,
                 tf_datafile_count(r->df), tf_datafile_count(r->df));
    else
        snprintf(data, dn, "synthetic, generated on demand from the seed (pool of %d samples)",
                 TF_DATASET_SIZE);
}

int tf_cli_train(tf_cli_opts *o)
{
    run_state r;
    memset(&r, 0, sizeof r);
    int rc = setup(&r, o);
    if (rc != TF_EXIT_OK) {
        teardown(&r);
        return rc;
    }
    const tf_config *c = &r.c;
    FILE *out = stdout;
    int verbose = !o->quiet;
    int live = verbose && !o->no_progress && isatty(STDERR_FILENO);
    size_t backend_bytes = tf_trainer_backend_bytes(r.t);
    if (verbose) {
        char bline[768], dline[512];
        describe_run(&r, o, bline, sizeof bline, dline, sizeof dline);
        tf_cli_print_header(out, o, c, bline, dline, r.start, backend_bytes,
                            tf_trainer_arena_bytes(r.t));
        fflush(out);
    }

    int W = c->warmup_steps, N = c->num_steps, n = 0;
    double timed_ms = 0;
    int failed = 0;
    for (int i = 0; i < W + N; i++) {
        long g = r.start + i;
        int warm = i < W;
        int k = warm ? i + 1 : i - W + 1; /* 1-based within warm-up or timed steps */
        if (live) {
            /* Time left: the timed mean once there is one, else the last step. */
            const tf_cli_steprec *prev = n ? &r.recs[n - 1] : NULL;
            double per_ms = i > W ? timed_ms / (i - W) : prev ? prev->step_ms : 0;
            tf_cli_progress(warm, k, warm ? W : N, prev, per_ms * 1e-3 * (W + N - i));
        }
        tf_step_stats st = {0};
        tf_status s;
        double file_ms = 0;
        if (r.df) {
            double t0 = tf_cli_now_ms();
            tf_datafile_batch(r.df, g, &r.batch);
            file_ms = tf_cli_now_ms() - t0;
            s = tf_trainer_step_batch(r.t, &r.batch, &st);
        } else {
            s = tf_trainer_step(r.t, g, &st);
        }
        tf_cli_steprec *e = &r.recs[n++];
        *e = (tf_cli_steprec){.step = g,
                              .warmup = warm,
                              .counter_replay = st.counter_replay,
                              .loss = st.loss,
                              .data_ms = st.data_ms + file_ms,
                              .forward_ms = st.forward_ms,
                              .backward_ms = st.backward_ms,
                              .optimizer_ms = st.optimizer_ms,
                              .step_ms = st.step_ms + file_ms};
        e->samples_per_sec = e->step_ms > 0 ? c->batch / (e->step_ms * 1e-3) : 0.0;
        if (s != TF_OK) {
            if (live)
                tf_cli_progress_clear();
            if (s == TF_ERR_NONFINITE || !isfinite(st.loss))
                tf_cli_error("loss is not finite at %s step %d/%d (global step %ld, loss %g); "
                             "try a lower --learning-rate",
                             warm ? "warm-up" : "timed", k, warm ? W : N, g, (double)st.loss);
            else
                tf_cli_error("training step failed at global step %ld (status %d)", g, (int)s);
            failed = s == TF_ERR_NONFINITE ? TF_EXIT_FAIL : tf_cli_exit_for(s);
            if (failed == TF_EXIT_OK)
                failed = TF_EXIT_FAIL;
            break;
        }
        if (!warm)
            timed_ms += e->step_ms;
        if (verbose && (warm || k == 1 || k % o->log_every == 0 || k == N || e->counter_replay)) {
            if (live)
                tf_cli_progress_clear();
            if (warm)
                tf_cli_print_warmup(out, k, W, e);
            else
                tf_cli_print_step(out, k, N, e, backend_bytes);
            fflush(out);
        }
        if (o->save_every && (g + 1) % o->save_every == 0 && i + 1 < W + N &&
            (rc = save_checkpoint(r.t, o->save_path, g + 1)) != TF_EXIT_OK) {
            failed = rc;
            break;
        }
    }
    if (live)
        tf_cli_progress_clear();

    tf_cli_summary sum;
    tf_cli_summarize(&sum, r.recs, n, c->batch, 3.0 * tf_flops_forward(c));
    sum.peak_bytes = tf_trainer_backend_bytes(r.t);
    sum.arena_bytes = tf_trainer_arena_bytes(r.t);
    sum.rss_bytes = tf_cli_peak_rss_bytes();
    sum.graph_kernels = tf_trainer_graph_kernels(r.t);
    if (!failed) {
        if (verbose)
            fprintf(out, "%s\n", "==============================================================="
                                 "=================");
        tf_cli_print_summary(out, &sum, o->memprof, tf_param_count_floats(c));
        fflush(out);
    }

    if (!failed && o->save_path)
        failed = save_checkpoint(r.t, o->save_path, r.start + n);
    char err[512];
    cJSON *run = tf_cli_run_json(o->cmd == TF_CMD_PROFILE ? "profile" : "train", c,
                                 tf_param_count_floats(c), &sum, r.recs, n);
    /* A failed run still leaves its steps in --json: that is what one debugs from. */
    if (o->json_path && tf_cli_write_json(o->json_path, run, err, sizeof err) != 0) {
        tf_cli_error("--json: %s", err);
        if (!failed)
            failed = TF_EXIT_FAIL;
    }
    if (!failed && r.prof) {
        if (tf_prof_finish(r.prof, run, out, err, sizeof err) != 0) {
            tf_cli_error("profile: %s", err);
            failed = TF_EXIT_FAIL;
        }
    }
    cJSON_Delete(run);
    teardown(&r);
    return failed;
}
