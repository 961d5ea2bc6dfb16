/* `tinyfold train` and `tinyfold profile`: the options to a run
 * (src/train/run.h), the profiler, and what the run prints: the header, the
 * step lines and live progress, the summary, the run JSON and the profile. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "backend/registry.h"
#include "prof/markers.h"
#include "prof/profiler.h"
#include "prof/summary.h"
#include "report/prof_table.h"
#include "train/run.h"
#include "train/trainer.h"

#include <cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const tf_cli_opts *o;
    tf_run run;
    tf_prof *prof;
    tf_cli_steprec *recs; /* a record per step run */
    double timed_ms;      /* the timed steps' time so far */
    int verbose, live;    /* step lines; the live progress line on a terminal */
    size_t backend_bytes;
    FILE *out;
    char note[384];      /* how the backend was chosen */
    char rank_out[4200]; /* profile --out DIR of a rank r > 0: DIR/rank<r> */
} cli_run;

/* A run's failure: its line, where this rank has one, and the exit status. */
static int failed(tf_status s, const char *err)
{
    if (err[0])
        tf_cli_error("%s", err);
    return tf_cli_exit_for(s);
}

/* profile: the profiler, before the trainer (CUPTI must see the first CUDA
 * work). Several ranks: each profiles itself; rank 0 merges the traces. */
static int create_profiler(cli_run *cr)
{
    const tf_cli_opts *o = cr->o;
    const tf_run *r = &cr->run;
#ifdef TF_NO_PROF_HOOKS
    tf_cli_error("profile: this build has the profiling hooks compiled out "
                 "(CMake TF_PROF_HOOKS=OFF, a benchmark-only build); rebuild with the default");
    return TF_EXIT_USAGE;
#endif
    char err[2 * 4096 + 512];
    if (o->out_path && r->dist.rank > 0)
        snprintf(cr->rank_out, sizeof cr->rank_out, "%s/rank%d", o->out_path, r->dist.rank);
    const tf_backend_entry *be = tf_backend_find(r->c.backend);
    const int gpu = be && be->gpu;
    if (!gpu && o->gpu_timer) { /* --backend auto found no GPU */
        size_t len = strlen(cr->note);
        snprintf(cr->note + len, sizeof cr->note - len, "%s--gpu-timer ignored on the CPU",
                 len ? "; " : "");
    }
    tf_prof_opts po = {.out_dir = cr->rank_out[0] ? cr->rank_out : o->out_path,
                       .selected_regions = o->selected_regions,
                       .include_warmup = o->include_warmup,
                       .trace_max_steps = o->trace_steps,
                       .counters = o->counters,
                       .backend = r->c.backend,
                       .gpu_timer =
                           gpu ? (tf_prof_gpu_timer)o->gpu_timer : TF_PROF_GPU_TIMER_DEFAULT,
                       .top = o->top,
                       .precision = r->c.precision};
    cr->prof = tf_prof_create(&po, err, sizeof err);
    if (!cr->prof) {
        tf_cli_error("profile: %s", err);
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

/* Everything before the first step. Returns an exit status. */
static int setup(cli_run *cr)
{
    const tf_cli_opts *o = cr->o;
    tf_run *r = &cr->run;
    char err[3 * 4096];
    tf_status s = tf_run_configure(r, err, sizeof err);
    if (s != TF_OK)
        return failed(s, err);
    int rc = tf_cli_resolve_backend(&r->c, cr->note, sizeof cr->note);
    if (rc != TF_EXIT_OK)
        return rc;
    if (o->profile_regions && tf_marker_select(o->profile_regions, err, sizeof err)) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    if ((s = tf_run_check_ranks(r, err, sizeof err)) != TF_OK)
        return failed(s, err);
    if (o->memory_budget > 0 && (rc = tf_cli_apply_memory_budget(&r->c, o->memory_budget)))
        return rc;
    if (o->cmd == TF_CMD_PROFILE && (rc = create_profiler(cr)) != TF_EXIT_OK)
        return rc;
    if ((s = tf_run_create(r, cr->prof, err, sizeof err)) != TF_OK)
        return failed(s, err);
    cr->recs = calloc((size_t)r->c.warmup_steps + (size_t)r->c.num_steps, sizeof *cr->recs);
    if (!cr->recs) {
        tf_cli_error("out of host memory for the step records");
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

static void teardown(cli_run *cr)
{
    tf_run_close(&cr->run);
    if (cr->prof)
        tf_prof_destroy(cr->prof);
    free(cr->recs);
}

static void describe_run(const cli_run *cr, char *backend, size_t bn, char *data, size_t dn)
{
    const tf_run *r = &cr->run;
    const tf_config *c = &r->c;
    int len;
    if (c->backend == TF_BACKEND_CPU)
        len = snprintf(backend, bn, "%s | %s | %d thread%s | OpenMP wait: %s",
                       tf_trainer_backend_name(r->t), tf_cli_blas_info(), c->threads,
                       c->threads == 1 ? "" : "s", tf_cli_omp_wait_info());
    else
        len = snprintf(backend, bn, "%s (device %d)", tf_trainer_backend_name(r->t), c->device);
    if (r->dist.size > 1 && len >= 0 && (size_t)len < bn)
        len += snprintf(backend + len, bn - (size_t)len, " | %d ranks (%s), %d sample%s each",
                        r->dist.size, c->backend == TF_BACKEND_CPU ? "MPI" : "NCCL",
                        c->batch / r->dist.size, c->batch / r->dist.size == 1 ? "" : "s");
    if (cr->note[0] && len >= 0 && (size_t)len < bn)
        snprintf(backend + len, bn - (size_t)len, " (%s)", cr->note);
    if (r->df)
        snprintf(data, dn, "%s (%d samples; sample j of step g = (g*B + j) mod %d)",
                 cr->o->data_path, tf_datafile_count(r->df), tf_datafile_count(r->df));
    else
        snprintf(data, dn, "synthetic, generated on demand from the seed (pool of %d samples)",
                 TF_DATASET_SIZE);
}

/* The temporary names of every file the run writes, removed on a second
 * signal; then the handlers. */
static void watch_signals(const tf_cli_opts *o)
{
    tf_cli_signals_track(o->save_path);
    tf_cli_signals_track(o->save_optim_path);
    if (!tf_cli_json_is_stdout(o->json_path))
        tf_cli_signals_track(o->json_path);
    if (o->cmd == TF_CMD_PROFILE && o->out_path) {
        static const char *const files[] = {"kernel_stats.csv", "kernel_trace.csv",
                                            "summary.json", "trace.json"};
        for (int i = 0; i < 4; i++) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", o->out_path, files[i]);
            tf_cli_signals_track(p);
        }
    }
    tf_cli_signals_install();
}

/* ---- the step loop's hooks (train/run.h) ---- */
static int stop_hook(void *ctx)
{
    (void)ctx;
    return tf_cli_stop_signal();
}

/* The live progress line: the time left from the timed mean once there is
 * one, else from the last step. */
static void before_hook(void *ctx, int i)
{
    cli_run *cr = ctx;
    if (!cr->live)
        return;
    const int W = cr->run.c.warmup_steps, N = cr->run.c.num_steps, warm = i < W;
    const tf_cli_steprec *prev = i ? &cr->recs[i - 1] : NULL;
    double per_ms = i > W ? cr->timed_ms / (i - W) : prev ? prev->step_ms : 0;
    tf_cli_progress(warm, warm ? i + 1 : i - W + 1, warm ? W : N, prev,
                    per_ms * 1e-3 * (W + N - i));
}

/* The step's record, and its line where it is one to print. */
static void after_hook(void *ctx, int i, const tf_step_stats *st, tf_status s)
{
    cli_run *cr = ctx;
    const tf_config *c = &cr->run.c;
    const int W = c->warmup_steps, N = c->num_steps, warm = i < W;
    const int k = warm ? i + 1 : i - W + 1; /* 1-based within warm-up or timed steps */
    tf_cli_steprec *e = &cr->recs[i];
    *e = (tf_cli_steprec){.step = cr->run.start + i,
                          .warmup = warm,
                          .counter_replay = st->counter_replay,
                          .loss = st->loss,
                          .data_ms = st->data_ms,
                          .forward_ms = st->forward_ms,
                          .backward_ms = st->backward_ms,
                          .optimizer_ms = st->optimizer_ms,
                          .step_ms = st->step_ms,
                          .comm_ms = st->comm_ms,
                          .exposed_comm_ms = st->exposed_comm_ms,
                          .loss_scaled = c->precision == TF_PREC_FP16,
                          .skipped = st->skipped,
                          .loss_scale = st->loss_scale};
    e->samples_per_sec = e->step_ms > 0 ? c->batch / (e->step_ms * 1e-3) : 0.0;
    tf_cli_signals_step_ms(e->step_ms);
    if (s != TF_OK)
        return;
    if (!warm)
        cr->timed_ms += e->step_ms;
    if (cr->verbose && (warm || k == 1 || k % cr->o->log_every == 0 || k == N ||
                        e->counter_replay || e->skipped)) {
        if (cr->live)
            tf_cli_progress_clear();
        if (warm)
            tf_cli_print_warmup(cr->out, k, W, e);
        else
            tf_cli_print_step(cr->out, k, N, e, cr->backend_bytes);
        fflush(cr->out);
    }
}

/* The profile's table, as the profiler collected it. */
static void print_profile(const tf_prof *p, FILE *out)
{
    tf_prof_summary s;
    if (tf_prof_summarize(p, &s) != 0)
        return;
    tf_report_prof_table(&s, out);
    tf_prof_summary_free(&s);
}

/* After the steps: the summary, the final save, the JSON, the profile.
 * Returns the exit status. */
static int finish(cli_run *cr, int fail)
{
    const tf_cli_opts *o = cr->o;
    tf_run *r = &cr->run;
    const tf_config *c = &r->c;
    const tf_dist *d = &r->dist;
    const int n = r->steps, stop = r->stop;
    tf_cli_summary sum;
    tf_cli_summarize(&sum, cr->recs, n, c->batch, 3.0 * tf_flops_forward(c));
    sum.peak_bytes = tf_trainer_backend_bytes(r->t);
    sum.arena_bytes = tf_trainer_arena_bytes(r->t);
    sum.rss_bytes = tf_cli_peak_rss_bytes();
    sum.graph_kernels = tf_trainer_graph_kernels(r->t);
    sum.ranks = d->size;
    sum.comm = d->size > 1 || d->nccl;
    sum.loss_scaled = c->precision == TF_PREC_FP16;
    tf_trainer_get_loss_scale(r->t, &sum.loss_scale, NULL, NULL);
    if (!fail && !stop && d->rank == 0) {
        if (cr->verbose)
            fprintf(cr->out, "%s\n", "========================================"
                                      "========================================");
        tf_cli_print_summary(cr->out, &sum, o->memprof, tf_param_count_floats(c));
        fflush(cr->out);
    }

    char err[3 * 4096];
    int wrote_save = 0, wrote_json = 0;
    if (!fail && o->save_path) {
        tf_status s = tf_run_save_final(r, err, sizeof err);
        if (s != TF_OK)
            fail = failed(s, err);
        wrote_save = !fail;
    }
    cJSON *run = tf_cli_run_json(o->cmd == TF_CMD_PROFILE ? "profile" : "train", c,
                                 tf_param_count_floats(c), &sum, cr->recs, n);
    cJSON_AddStringToObject(run, "status", fail ? "failed" : stop ? "interrupted" : "completed");
    cJSON_AddNumberToObject(run, "steps_completed", n);
    /* A failed run still leaves its steps in --json: that is what one debugs from. */
    if (o->json_path && d->rank == 0) {
        if (tf_cli_write_json(o->json_path, run, err, sizeof err) != 0) {
            tf_cli_error("--json: %s", err);
            if (!fail)
                fail = TF_EXIT_FAIL;
        } else {
            wrote_json = 1;
        }
    }
    if (stop && !fail && d->rank == 0)
        tf_cli_error("%s by %s after %d of %d steps (global step %ld)%s%s%s",
                     stop == SIGINT ? "interrupted" : "terminated", tf_cli_signal_name(stop), n,
                     c->warmup_steps + c->num_steps, r->start + n,
                     wrote_save || wrote_json ? "; wrote " : "", wrote_save ? "--save" : "",
                     wrote_save && wrote_json ? " and --json"
                     : wrote_json             ? "--json"
                                              : "");
    if (stop && !fail)
        fail = 128 + stop;
    if (!fail && cr->prof) {
        /* the tables are rank 0's to print; the others' files go to DIR/rank<r> */
        int frc = tf_prof_finish(cr->prof, run, err, sizeof err);
        if (d->rank == 0)
            print_profile(cr->prof, cr->out);
        if (frc != 0) {
            tf_cli_error("profile: %s", err);
            fail = TF_EXIT_FAIL;
        }
    }
    if (o->cmd == TF_CMD_PROFILE && d->size > 1) {
        int all = tf_dist_max_int(&r->dist, fail); /* every rank's trace is written */
        if (!all && d->rank == 0 && o->out_path &&
            tf_dist_merge_traces(o->out_path, d->size, err, sizeof err) != 0) {
            tf_cli_error("profile: %s", err);
            fail = TF_EXIT_FAIL;
        }
    }
    cJSON_Delete(run);
    return fail;
}

static int train_run(cli_run *cr)
{
    const tf_cli_opts *o = cr->o;
    tf_run *r = &cr->run;
    watch_signals(o);
    int rc = setup(cr);
    if (rc != TF_EXIT_OK) {
        teardown(cr);
        return rc;
    }
    cr->out = stdout;
    cr->verbose = !o->quiet && r->dist.rank == 0;
    cr->live = cr->verbose && !o->no_progress && isatty(STDERR_FILENO);
    cr->backend_bytes = tf_trainer_backend_bytes(r->t);
    if (cr->verbose) {
        char bline[768], dline[512];
        describe_run(cr, bline, sizeof bline, dline, sizeof dline);
        float scale = 1.0f;
        tf_trainer_get_loss_scale(r->t, &scale, NULL, NULL);
        tf_cli_print_header(cr->out, o, &r->c, bline, dline, r->start, cr->backend_bytes,
                            tf_trainer_arena_bytes(r->t), scale);
        fflush(cr->out);
    }
    char err[3 * 4096];
    const tf_run_hooks hooks = {cr, stop_hook, before_hook, after_hook};
    tf_status s = tf_run_steps(r, &hooks, err, sizeof err);
    tf_cli_signals_steps_over();
    if (cr->live)
        tf_cli_progress_clear();
    rc = s == TF_OK ? TF_EXIT_OK : failed(s, err);
    rc = finish(cr, rc);
    teardown(cr);
    return rc;
}

int tf_cli_train(tf_cli_opts *o)
{
    const tf_run_opts ro = {.cfg = o->cfg,
                            .set = o->set,
                            .resume_path = o->resume_path,
                            .load_path = o->load_path,
                            .data_path = o->data_path,
                            .save_path = o->save_path,
                            .save_every = o->save_every,
                            .dist_timeout = o->dist_timeout,
                            .dist_check_every = o->dist_check_every,
                            .dist_bucket_kb = o->dist_bucket_kb};
    cli_run cr;
    memset(&cr, 0, sizeof cr);
    cr.o = o;
    char err[3 * 4096];
    tf_status s = tf_run_begin(&cr.run, &ro, err, sizeof err);
    if (s != TF_OK)
        return failed(s, err);
    tf_cli_error_rank(cr.run.dist.rank);
    int rc = train_run(&cr);
    tf_run_end(&cr.run, rc == TF_EXIT_OK);
    return rc;
}
