/* `tinyfold train` and `tinyfold profile`: set up (checkpoint, data file,
 * backend, profiler), run warm-up + timed steps, report, write files. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "backend/backend.h"
#include "dist/dist.h"
#include "io/checkpoint.h"
#include "io/datafile.h"
#include "prof/markers.h"
#include "prof/profiler.h"
#include "train/hostmem.h"
#include "train/nonfinite.h"
#include "train/trainer.h"

#include <cJSON.h>
#include <math.h>
#include <signal.h>
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

typedef struct {
    size_t avail;       /* MemAvailable before the trainer (0: unknown) */
    size_t batch_bytes; /* the CLI's own batch (--data) */
} run_state_mem;

/* The host memory the run holds beyond the trainer's own plan (which the
 * trainer checks itself): staging copies of the parameters for loading and
 * saving checkpoints, the CLI's batch for --data. An accepted run must get
 * through its final save, so these count against the same 90% rule. */
static int check_host_memory(const run_state_mem *m, const tf_cli_opts *o, const tf_config *c,
                             size_t trainer_bytes, int planned)
{
    if (!m->avail)
        return TF_EXIT_OK; /* no /proc/meminfo: nothing to plan against */
    size_t load = o->resume_path ? tf_checkpoint_load_bytes(c, 1)
                  : o->load_path ? tf_checkpoint_load_bytes(c, 0)
                                 : 0;
    size_t save = o->save_path ? tf_checkpoint_save_bytes(c) : 0;
    size_t extra = (load > save ? load : save) + m->batch_bytes;
    size_t need = trainer_bytes + extra, allowed = m->avail / 10 * 9;
    if (need <= allowed)
        return TF_EXIT_OK;
    double params_gb = (double)tf_param_count_floats(c) * sizeof(float) / 1e9;
    tf_cli_error("this run needs %s%.2f GB of host memory (training %.2f GB, of which parameters, "
                 "gradients and AdamW moments %.2f GB; %s %.2f GB) and a run may use at most 90%% "
                 "of the %.2f GB available: reduce %s",
                 planned ? "" : "at least ", need / 1e9, trainer_bytes / 1e9, 4 * params_gb,
                 save >= load ? "saving the checkpoint (3 copies of the parameters)"
                              : "loading the checkpoint",
                 (load > save ? load : save) / 1e9, m->avail / 1e9,
                 /* the parameters dominate: the model's width and depth matter */
                 7 * params_gb * 1e9 > (double)need / 2
                     ? "--msa-dim, --pair-dim or --num-blocks (the parameters grow with "
                       "msa_dim^2 and pair_dim^2 per block)"
                     : "--batch-size, --seq-len or --num-seqs (the activations), or "
                       "--num-blocks");
    return TF_EXIT_USAGE;
}

/* Rank 0 writes (the weights are the same on every rank); every rank learns
 * whether it could. */
static int save_checkpoint(tf_trainer *t, const char *path, long global_step, tf_dist *d)
{
    char err[2 * 4096 + 512];
    int rc = TF_EXIT_OK;
    if (d->rank == 0) {
        tf_status s = tf_checkpoint_save(t, path, global_step, err, sizeof err);
        if (s != TF_OK) {
            tf_cli_error("--save: %s", err);
            rc = TF_EXIT_FAIL;
        }
    }
    return tf_dist_max_int(d, rc);
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
    tf_dist *dist;
    char rank_out[4200]; /* profile --out DIR of a rank r > 0: DIR/rank<r> */
} run_state;

/* What every rank must agree on: the model, the problem, the training, the
 * level and the build (FNV-1a over the fields, not the struct's padding).
 * The device and the thread count may differ. */
static uint64_t config_hash(const tf_config *c, const tf_cli_opts *o)
{
    uint64_t h = 1469598103934665603ull;
    const long long v[] = {c->msa_dim, c->pair_dim, c->n_blocks, c->n_heads_msa, c->n_heads_pair,
                           c->outer_dim, c->vocab, c->pair_input_dim, c->batch, c->seq_len,
                           c->n_seqs, c->num_steps, c->warmup_steps, (long long)c->seed,
                           c->impl, c->fusion.qkv_msa, c->fusion.qkv_triangle, c->fusion.flash,
                           c->fusion.triangle, c->backend, c->precision, c->graph,
                           o->save_every, o->dist_check_every, o->dist_bucket_kb,
                           o->resume_path != NULL,
                           o->load_path != NULL, o->data_path != NULL, (long long)sizeof *c,
                           tf_built_with_cuda()};
    uint32_t lr;
    memcpy(&lr, &c->learning_rate, sizeof lr);
    for (size_t i = 0; i <= sizeof v / sizeof v[0]; i++) {
        uint64_t x = i < sizeof v / sizeof v[0] ? (uint64_t)v[i] : lr;
        for (int b = 0; b < 8; b++)
            h = (h ^ ((x >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    for (const char *p = TF_VERSION; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* A run of several ranks (mpirun -np P): the checks every rank makes before
 * the trainer, in the same order everywhere (each is a collective). */
static int dist_setup(run_state *r, const tf_cli_opts *o)
{
    tf_dist *d = r->dist;
    tf_config *c = &r->c;
    const int cuda = c->backend == TF_BACKEND_CUDA;
    if (d->size > 1) {
        if (!tf_dist_same_u64(d, config_hash(c, o))) {
            if (d->rank == 0)
                tf_cli_error("the %d ranks were started with different configurations (seed, "
                             "sizes, steps, level, files or build): every rank must run the same "
                             "command and binary",
                             d->size);
            return TF_EXIT_USAGE;
        }
        if (c->batch % d->size) {
            if (d->rank == 0)
                tf_cli_error("--batch-size: '%d' is not accepted with %d ranks: the global batch "
                             "is split evenly, so it must be a multiple of %d",
                             c->batch, d->size, d->size);
            return TF_EXIT_USAGE;
        }
        if (o->data_path) {
            if (d->rank == 0)
                tf_cli_error("--data: not accepted with %d ranks (data parallel runs draw the "
                             "synthetic data); run one process",
                             d->size);
            return TF_EXIT_USAGE;
        }
        if (cuda && !(o->set & TF_SET_DEVICE))
            c->device = d->local_rank; /* one device per rank of the node */
        if (cuda && !tf_dist_devices_distinct(d, c->device)) {
            if (d->rank == 0)
                tf_cli_error("--device: two ranks of one node would share a GPU (%d ranks on "
                             "the node): run one rank per device, without --device",
                             d->local_size);
            return TF_EXIT_USAGE;
        }
    }
#ifdef TF_HAVE_NCCL
    /* under a launcher, even one rank reduces through NCCL (a check of the path) */
    if (cuda && d->launched) {
        char err[512];
        if (tf_dist_nccl_init(d, c->device, err, sizeof err)) {
            tf_cli_error("%s", err);
            return tf_cli_exit_for(TF_ERR_DEVICE);
        }
    }
#endif
    if (cuda && d->size > 1 && !d->nccl) {
        if (d->rank == 0)
            tf_cli_error("--backend cuda: %d ranks need NCCL and this build has none; use "
                         "--backend cpu or one process",
                         d->size);
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

/* Everything before the first step. Returns an exit status. */
static int setup(run_state *r, const tf_cli_opts *o)
{
    char err[2 * 4096 + 512];
    tf_status s;
    r->c = o->cfg;
    /* Read the checkpoint's config first: a wrong file fails before any work. */
    const char *ck = o->resume_path ? o->resume_path : o->load_path;
    if (ck) {
        tf_config stored;
        long gs = 0;
        /* before its config is merged: a file without the run's state (a
         * state_dict of weights, a model file without its optimizer file)
         * has no problem or training to take */
        s = o->resume_path ? tf_checkpoint_check_resumable(ck, err, sizeof err) : TF_OK;
        if (s == TF_OK)
            s = tf_checkpoint_peek_config(ck, &stored, &gs, err, sizeof err);
        if (s != TF_OK) {
            tf_cli_error("%s: %s", o->resume_path ? "--resume" : "--load", err);
            return TF_EXIT_USAGE;
        }
        int rc = merge_stored(&r->c, &stored, o->set, o->resume_path != NULL);
        if (rc != TF_EXIT_OK)
            return rc;
        /* every checkpoint the run saves must be one it could resume */
        long room = TF_CKPT_STEP_MAX - (o->resume_path ? gs : 0);
        if (room < (long)r->c.warmup_steps + r->c.num_steps) {
            char q[64];
            tf_cli_quote(q, sizeof q, ck);
            tf_cli_error("--num-steps: '%d' is not accepted with --resume '%s' at global step "
                         "%ld: a checkpoint's global step is at most %lld, so at most %ld more "
                         "step%s can be taken",
                         r->c.num_steps, q, gs, TF_CKPT_STEP_MAX, room, room == 1 ? "" : "s");
            return TF_EXIT_USAGE;
        }
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
    if ((rc = dist_setup(r, o)) != TF_EXIT_OK)
        return rc;
    if (o->memory_budget > 0 && (rc = tf_cli_apply_memory_budget(&r->c, o->memory_budget)))
        return rc;

    if (o->cmd == TF_CMD_PROFILE) {
#ifdef TF_NO_PROF_HOOKS
        tf_cli_error("profile: this build has the profiling hooks compiled out "
                     "(CMake TF_PROF_HOOKS=OFF, a benchmark-only build); rebuild with the default");
        return TF_EXIT_USAGE;
#endif
        /* Before the trainer: CUPTI must see the first CUDA work. */
        /* several ranks: each profiles itself; rank 0 merges the traces */
        if (o->out_path && r->dist->rank > 0)
            snprintf(r->rank_out, sizeof r->rank_out, "%s/rank%d", o->out_path, r->dist->rank);
        const int gpu = r->c.backend == TF_BACKEND_CUDA || r->c.backend == TF_BACKEND_HIP;
        if (!gpu && o->gpu_timer) { /* --backend auto found no GPU */
            size_t len = strlen(r->note);
            snprintf(r->note + len, sizeof r->note - len, "%s--gpu-timer ignored on the CPU",
                     len ? "; " : "");
        }
        tf_prof_opts po = {.out_dir = r->rank_out[0] ? r->rank_out : o->out_path,
                           .selected_regions = o->selected_regions,
                           .include_warmup = o->include_warmup,
                           .trace_max_steps = o->trace_steps,
                           .counters = o->counters,
                           .cuda = r->c.backend == TF_BACKEND_CUDA,
                           .hip = r->c.backend == TF_BACKEND_HIP,
                           .gpu_timer = gpu ? (tf_prof_gpu_timer)o->gpu_timer
                                            : TF_PROF_GPU_TIMER_DEFAULT,
                           .top = o->top};
        r->prof = tf_prof_create(&po, err, sizeof err);
        if (!r->prof) {
            tf_cli_error("profile: %s", err);
            return TF_EXIT_USAGE;
        }
    }
    run_state_mem mem = {.avail = tf_hostmem_available()};
    if (r->df)
        mem.batch_bytes = tf_hostmem_batch_bytes(&r->c);
    /* First against what the trainer holds at least (parameters, gradients,
     * two moments), before it allocates; then against what it planned. */
    int on_host = r->c.backend == TF_BACKEND_CPU;
    rc = check_host_memory(&mem, o, &r->c,
                           on_host ? 4 * tf_param_count_floats(&r->c) * sizeof(float) : 0, 0);
    if (rc != TF_EXIT_OK)
        return rc;
    tf_config mine = r->c; /* this rank's share of the global batch */
    mine.batch /= r->dist->size;
    s = tf_trainer_create(&r->t, &mine, err, sizeof err);
    if (s != TF_OK) {
        r->t = NULL;
        tf_cli_error("%s", err);
        return tf_cli_exit_for(s);
    }
    r->dist->bucket_bytes = (double)o->dist_bucket_kb * 1024;
    if ((r->dist->size > 1 || r->dist->nccl) && tf_trainer_set_dist(r->t, r->dist)) {
        tf_cli_error("out of host memory for the gradients' buckets");
        return TF_EXIT_USAGE;
    }
    rc = check_host_memory(&mem, o, &r->c, on_host ? tf_trainer_backend_bytes(r->t) : 0, 1);
    if (rc != TF_EXIT_OK)
        return rc;
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
    if (!r->recs || (r->df && !tf_hostmem_batch_alloc(&r->batch, &r->c))) {
        tf_cli_error("out of host memory for the step records or the batch");
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

static void teardown(run_state *r)
{
    /* the trainer's graphs first: with --graph they hold NCCL's captured
     * work, whose resources the communicator reclaims when they go */
    if (r->t)
        tf_trainer_destroy(r->t);
#ifdef TF_HAVE_NCCL
    if (r->dist->nccl)
        tf_dist_nccl_destroy(r->dist);
#endif
    if (r->prof)
        tf_prof_destroy(r->prof);
    if (r->df)
        tf_datafile_close(r->df);
    tf_hostmem_batch_free(&r->batch);
    free(r->recs);
}

static void describe_run(const run_state *r, const tf_cli_opts *o, char *backend, size_t bn,
                         char *data, size_t dn)
{
    const tf_config *c = &r->c;
    int len;
    if (c->backend == TF_BACKEND_CPU)
        len = snprintf(backend, bn, "%s | %s | %d thread%s | OpenMP wait: %s",
                       tf_trainer_backend_name(r->t), tf_cli_blas_info(), c->threads,
                       c->threads == 1 ? "" : "s", tf_cli_omp_wait_info());
    else
        len = snprintf(backend, bn, "%s (device %d)", tf_trainer_backend_name(r->t), c->device);
    if (r->dist->size > 1 && len >= 0 && (size_t)len < bn)
        len += snprintf(backend + len, bn - (size_t)len, " | %d ranks (%s), %d sample%s each",
                        r->dist->size, c->backend == TF_BACKEND_CPU ? "MPI" : "NCCL",
                        c->batch / r->dist->size, c->batch / r->dist->size == 1 ? "" : "s");
    if (r->note[0] && len >= 0 && (size_t)len < bn)
        snprintf(backend + len, bn - (size_t)len, " (%s)", r->note);
    if (r->df)
        snprintf(data, dn, "%s (%d samples; sample j of step g = (g*B + j) mod %d)", o->data_path,
                 tf_datafile_count(r->df), tf_datafile_count(r->df));
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

/* A signal seen by one rank stops every rank at the same step. */
static int stop_signal(tf_dist *d)
{
    int s = tf_cli_stop_signal();
    return d->size > 1 ? tf_dist_max_int(d, s) : s;
}

/* --dist-check-every: 1 when the weights are bit for bit the same on every
 * rank (FNV-1a of their bytes, compared by min and max across ranks). */
static int weights_agree(tf_trainer *t, tf_dist *d, float *host, size_t n)
{
    tf_trainer_get_params(t, host);
    const unsigned char *b = (const unsigned char *)host;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return tf_dist_same_u64(d, h);
}

static int train_run(tf_cli_opts *o, tf_dist *d);

int tf_cli_train(tf_cli_opts *o)
{
    tf_dist d;
    char err[512];
    if (tf_dist_init(&d, o->dist_timeout, err, sizeof err) != 0) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    tf_cli_error_rank(d.rank);
    int rc = train_run(o, &d);
    /* A failed rank exits without MPI_Finalize (which waits for every rank):
     * the launcher then ends the others rather than leave them waiting. */
    if (rc == TF_EXIT_OK || d.size == 1)
        tf_dist_finalize(&d);
    return rc;
}

static int train_run(tf_cli_opts *o, tf_dist *d)
{
    run_state r;
    memset(&r, 0, sizeof r);
    r.dist = d;
    watch_signals(o);
    int rc = setup(&r, o);
    if (rc != TF_EXIT_OK) {
        teardown(&r);
        return rc;
    }
    const tf_config *c = &r.c;
    FILE *out = stdout;
    int verbose = !o->quiet && d->rank == 0;
    int live = verbose && !o->no_progress && isatty(STDERR_FILENO);
    size_t backend_bytes = tf_trainer_backend_bytes(r.t);
    if (verbose) {
        char bline[768], dline[512];
        describe_run(&r, o, bline, sizeof bline, dline, sizeof dline);
        float scale = 1.0f;
        tf_trainer_get_loss_scale(r.t, &scale, NULL, NULL);
        tf_cli_print_header(out, o, c, bline, dline, r.start, backend_bytes,
                            tf_trainer_arena_bytes(r.t), scale);
        fflush(out);
    }

    int W = c->warmup_steps, N = c->num_steps, n = 0;
    double timed_ms = 0;
    int failed = 0, stop = 0;
    long saved_step = -1; /* the global step of the checkpoint last written */
    float *check_buf = o->dist_check_every && d->size > 1
                           ? malloc(tf_param_count_floats(c) * sizeof(float))
                           : NULL;
    if (o->dist_check_every && d->size > 1 && !check_buf) {
        tf_cli_error("out of host memory for --dist-check-every's copy of the weights");
        failed = TF_EXIT_FAIL;
    }
    for (int i = 0; i < W + N && !failed && !(stop = stop_signal(d)); i++) {
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
                              .step_ms = st.step_ms + file_ms,
                              .comm_ms = st.comm_ms,
                              .exposed_comm_ms = st.exposed_comm_ms,
                              .loss_scaled = c->precision == TF_PREC_FP16,
                              .skipped = st.skipped,
                              .loss_scale = st.loss_scale};
        e->samples_per_sec = e->step_ms > 0 ? c->batch / (e->step_ms * 1e-3) : 0.0;
        tf_cli_signals_step_ms(e->step_ms);
        if (s != TF_OK) {
            if (live)
                tf_cli_progress_clear();
            /* what became non-finite, from what can be checked after the
             * step (train/nonfinite.h) */
            if (s == TF_ERR_NONFINITE || !isfinite(st.loss)) {
                tf_nonfinite_why why;
                char cause[640];
                tf_nonfinite_explain(r.t, &why);
                tf_nonfinite_describe(&why, c->precision, i == 0,
                                      o->resume_path || o->load_path ? "checkpoint's weights"
                                                                     : "initial weights",
                                      g, cause, sizeof cause);
                tf_cli_error("loss is not finite in the forward of %s step %d/%d (global step "
                             "%ld, loss %g%s): %s",
                             warm ? "warm-up" : "timed", k, warm ? W : N, g, (double)st.loss,
                             i == 0 ? ", the run's first step, before any update" : "", cause);
            } else {
                tf_cli_error("training step failed at global step %ld (status %d)", g, (int)s);
            }
            failed = s == TF_ERR_NONFINITE ? TF_EXIT_FAIL : tf_cli_exit_for(s);
            if (failed == TF_EXIT_OK)
                failed = TF_EXIT_FAIL;
            break;
        }
        if (!warm)
            timed_ms += e->step_ms;
        if (verbose && (warm || k == 1 || k % o->log_every == 0 || k == N || e->counter_replay ||
                        e->skipped)) {
            if (live)
                tf_cli_progress_clear();
            if (warm)
                tf_cli_print_warmup(out, k, W, e);
            else
                tf_cli_print_step(out, k, N, e, backend_bytes);
            fflush(out);
        }
        if (check_buf && (g + 1) % o->dist_check_every == 0 &&
            !weights_agree(r.t, d, check_buf, tf_param_count_floats(c))) {
            if (d->rank == 0)
                tf_cli_error("--dist-check-every: the weights differ across the %d ranks after "
                             "global step %ld (the ranks applied different updates)",
                             d->size, g + 1);
            failed = TF_EXIT_FAIL;
            break;
        }
        if (o->save_every && (g + 1) % o->save_every == 0 && i + 1 < W + N) {
            if ((rc = save_checkpoint(r.t, o->save_path, g + 1, d)) != TF_EXIT_OK) {
                failed = rc;
                break;
            }
            saved_step = g + 1;
        }
    }
    tf_cli_signals_steps_over();
    free(check_buf);
    if (live)
        tf_cli_progress_clear();

    tf_cli_summary sum;
    tf_cli_summarize(&sum, r.recs, n, c->batch, 3.0 * tf_flops_forward(c));
    sum.peak_bytes = tf_trainer_backend_bytes(r.t);
    sum.arena_bytes = tf_trainer_arena_bytes(r.t);
    sum.rss_bytes = tf_cli_peak_rss_bytes();
    sum.graph_kernels = tf_trainer_graph_kernels(r.t);
    sum.ranks = d->size;
    sum.comm = d->size > 1 || d->nccl;
    sum.loss_scaled = c->precision == TF_PREC_FP16;
    tf_trainer_get_loss_scale(r.t, &sum.loss_scale, NULL, NULL);
    if (!failed && !stop && d->rank == 0) {
        if (verbose)
            fprintf(out, "%s\n", "==============================================================="
                                 "=================");
        tf_cli_print_summary(out, &sum, o->memprof, tf_param_count_floats(c));
        fflush(out);
    }

    /* Interrupted: the last completed step left the trainer consistent, so
     * the checkpoint is that step's. */
    int wrote_save = 0, wrote_json = 0;
    if (!failed && o->save_path) {
        /* a signal right after a --save-every save: that file is this step's */
        if (saved_step != r.start + n)
            failed = save_checkpoint(r.t, o->save_path, r.start + n, d);
        wrote_save = !failed;
    }
    char err[2 * 4096 + 512];
    cJSON *run = tf_cli_run_json(o->cmd == TF_CMD_PROFILE ? "profile" : "train", c,
                                 tf_param_count_floats(c), &sum, r.recs, n);
    cJSON_AddStringToObject(run, "status", failed ? "failed" : stop ? "interrupted" : "completed");
    cJSON_AddNumberToObject(run, "steps_completed", n);
    /* A failed run still leaves its steps in --json: that is what one debugs from. */
    if (o->json_path && d->rank == 0) {
        if (tf_cli_write_json(o->json_path, run, err, sizeof err) != 0) {
            tf_cli_error("--json: %s", err);
            if (!failed)
                failed = TF_EXIT_FAIL;
        } else {
            wrote_json = 1;
        }
    }
    if (stop && !failed && d->rank == 0)
        tf_cli_error("%s by %s after %d of %d steps (global step %ld)%s%s%s",
                     stop == SIGINT ? "interrupted" : "terminated", tf_cli_signal_name(stop), n,
                     W + N, r.start + n, wrote_save || wrote_json ? "; wrote " : "",
                     wrote_save ? "--save" : "", wrote_save && wrote_json ? " and --json"
                                                 : wrote_json            ? "--json"
                                                                         : "");
    if (stop && !failed)
        failed = 128 + stop;
    if (!failed && r.prof) {
        /* the tables are rank 0's to print; the others' files go to DIR/rank<r> */
        FILE *pout = d->rank == 0 ? out : fopen("/dev/null", "w");
        if (!pout || tf_prof_finish(r.prof, run, pout, err, sizeof err) != 0) {
            tf_cli_error("profile: %s", pout ? err : "cannot open /dev/null");
            failed = TF_EXIT_FAIL;
        }
        if (pout && pout != out)
            fclose(pout);
    }
    if (o->cmd == TF_CMD_PROFILE && d->size > 1) {
        int all = tf_dist_max_int(d, failed); /* every rank's trace is written */
        if (!all && d->rank == 0 && o->out_path &&
            tf_dist_merge_traces(o->out_path, d->size, err, sizeof err) != 0) {
            tf_cli_error("profile: %s", err);
            failed = TF_EXIT_FAIL;
        }
    }
    cJSON_Delete(run);
    teardown(&r);
    return failed;
}
