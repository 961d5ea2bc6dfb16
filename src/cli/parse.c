/* Command-line parsing with getopt_long over the table of options.c.
 *
 * Every mistake ends in exactly one line on stderr naming the flag, the value
 * and what is accepted, and exit status 2. getopt_long's own messages are
 * off (opterr = 0); its habit of accepting unique prefixes ("--seq" for
 * --seq-len) is undone: a long option must be spelled in full. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "io/checkpoint.h"
#include "config/limits.h"
#include "backend/gpu_plan.h"
#include "backend/registry.h"
#include "prof/profiler.h"
#include "ompwait/tf_omp_wait.h"

#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

static const char *const impl_names[] = {"v1", "v2", "v3"};
static const int impl_vals[] = {TF_IMPL_V1, TF_IMPL_V2, TF_IMPL_V3};
static const char *const recompute_names[] = {"none", "blocks", "modules"};
static const int recompute_vals[] = {TF_RECOMPUTE_NONE, TF_RECOMPUTE_BLOCKS,
                                     TF_RECOMPUTE_MODULES};
static const char *const timer_names[] = {"cupti", "events"};
static const int timer_vals[] = {TF_PROF_GPU_TIMER_CUPTI, TF_PROF_GPU_TIMER_EVENTS};
static const char *const omp_wait_names[] = {"active", "passive", "auto"};
static const int omp_wait_vals[] = {TF_OMP_WAIT_ACTIVE, TF_OMP_WAIT_PASSIVE, TF_OMP_WAIT_AUTO};

/* A comma-separated list whose items are all in names[]. */
static int check_list(const char *flag, const char *text, const char *const *names, int n,
                      const char *expected)
{
    char item[64];
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        int ok = 0;
        if (len > 0 && len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
            for (int i = 0; i < n; i++)
                ok |= strcmp(item, names[i]) == 0;
        }
        if (!ok) {
            char q[64];
            tf_cli_quote(q, sizeof q, text);
            tf_cli_error("%s: '%s' is not accepted: expected %s", flag, q, expected);
            return TF_EXIT_USAGE;
        }
        if (!p[len])
            return TF_EXIT_OK;
        p += len + 1;
    }
}

static int nonempty(const char *flag, const char *arg, const char *what)
{
    if (*arg)
        return TF_EXIT_OK;
    tf_cli_error("%s: '' is not accepted: expected %s", flag, what);
    return TF_EXIT_USAGE;
}

static int apply(tf_cli_opts *o, int id, const char *flag, const char *arg)
{
    tf_config *c = &o->cfg;
    int v = 0, rc;
    switch (id) {
    case TF_OPT_BATCH:
        o->set |= TF_SET_BATCH;
        return tf_cli_parse_int(&c->batch, flag, arg, 1, TF_LIM_BATCH_MAX);
    case TF_OPT_SEQ_LEN:
        o->set |= TF_SET_SEQ_LEN;
        return tf_cli_parse_int(&c->seq_len, flag, arg, 1, TF_LIM_SEQ_LEN_MAX);
    case TF_OPT_N_SEQS:
        o->set |= TF_SET_N_SEQS;
        return tf_cli_parse_int(&c->n_seqs, flag, arg, 1, TF_LIM_N_SEQS_MAX);
    case TF_OPT_BLOCKS:
        o->set |= TF_SET_BLOCKS;
        return tf_cli_parse_int(&c->n_blocks, flag, arg, 1, TF_LIM_BLOCKS_MAX);
    case TF_OPT_MSA_DIM:
        o->set |= TF_SET_MSA_DIM;
        return tf_cli_parse_int(&c->msa_dim, flag, arg, 1, TF_LIM_DIM_MAX);
    case TF_OPT_PAIR_DIM:
        o->set |= TF_SET_PAIR_DIM;
        return tf_cli_parse_int(&c->pair_dim, flag, arg, 1, TF_LIM_DIM_MAX);
    case TF_OPT_STEPS:
        o->set |= TF_SET_STEPS;
        return tf_cli_parse_int(&c->num_steps, flag, arg, 1, TF_LIM_STEPS_MAX);
    case TF_OPT_WARMUP:
        o->set |= TF_SET_WARMUP;
        return tf_cli_parse_int(&c->warmup_steps, flag, arg, 0, TF_LIM_WARMUP_MAX);
    case TF_OPT_LR:
        o->set |= TF_SET_LR;
        return tf_cli_parse_lr(&c->learning_rate, flag, arg, TF_LIM_LR_MAX);
    case TF_OPT_SEED:
        o->set |= TF_SET_SEED;
        return tf_cli_parse_u64(&c->seed, flag, arg);
    case TF_OPT_IMPL:
        o->set |= TF_SET_IMPL;
        rc = tf_cli_parse_choice(&v, flag, arg, impl_names, impl_vals, 3, "v1, v2 or v3");
        c->impl = (tf_impl)v;
        return rc;
    case TF_OPT_ALL_FUSION_ON:
    case TF_OPT_ALL_FUSION_OFF:
        for (int i = 0; i < 4; i++)
            o->fusion_override[i] = id == TF_OPT_ALL_FUSION_ON;
        return TF_EXIT_OK;
    case TF_OPT_QKV_MSA_ON: o->fusion_override[0] = 1; return TF_EXIT_OK;
    case TF_OPT_QKV_MSA_OFF: o->fusion_override[0] = 0; return TF_EXIT_OK;
    case TF_OPT_QKV_TRI_ON: o->fusion_override[1] = 1; return TF_EXIT_OK;
    case TF_OPT_QKV_TRI_OFF: o->fusion_override[1] = 0; return TF_EXIT_OK;
    case TF_OPT_FLASH_ON: o->fusion_override[2] = 1; return TF_EXIT_OK;
    case TF_OPT_FLASH_OFF: o->fusion_override[2] = 0; return TF_EXIT_OK;
    case TF_OPT_TRI_ON: o->fusion_override[3] = 1; return TF_EXIT_OK;
    case TF_OPT_TRI_OFF: o->fusion_override[3] = 0; return TF_EXIT_OK;
    case TF_OPT_BACKEND: {
        if (!tf_backend_parse_name(arg, &c->backend, NULL, 0))
            return TF_EXIT_OK;
        char names[128];
        tf_backend_names(names, sizeof names);
        return tf_cli_reject(flag, arg, names);
    }
    case TF_OPT_DEVICE:
        o->set |= TF_SET_DEVICE;
        return tf_cli_parse_int(&c->device, flag, arg, 0, TF_LIM_DEVICE_MAX);
    case TF_OPT_THREADS: return tf_cli_parse_int(&c->threads, flag, arg, 0, TF_LIM_THREADS_MAX);
    case TF_OPT_OMP_WAIT:
        rc = tf_cli_parse_choice(&v, flag, arg, omp_wait_names, omp_wait_vals, 3,
                                 "active, passive or auto");
        o->omp_wait = v;
        return rc;
    case TF_OPT_PRECISION: {
        const char *names[TF_PREC_COUNT];
        int vals[TF_PREC_COUNT];
        for (int i = 0; i < TF_PREC_COUNT; i++) {
            names[i] = tf_precision_name((tf_precision)i);
            vals[i] = i;
        }
        o->set |= TF_SET_PRECISION;
        rc = tf_cli_parse_choice(&v, flag, arg, names, vals, TF_PREC_COUNT,
                                 "fp32, tf32, bf16 or fp16");
        c->precision = (tf_precision)v;
        return rc;
    }
    case TF_OPT_USE_AMP: o->use_amp = 1; return TF_EXIT_OK;
    case TF_OPT_GRAPH: c->graph = 1; return TF_EXIT_OK;
    case TF_OPT_GPU_PLAN: {
        tf_gpu_plan p;
        char e[256];
        if (strlen(arg) >= sizeof c->gpu_plan) {
            tf_cli_error("%s: the spec is longer than %zu characters", flag,
                         sizeof c->gpu_plan - 1);
            return TF_EXIT_USAGE;
        }
        if (tf_gpu_plan_parse(arg, &p, e, sizeof e)) {
            tf_cli_error("%s", e);
            return TF_EXIT_USAGE;
        }
        snprintf(c->gpu_plan, sizeof c->gpu_plan, "%s", arg);
        return TF_EXIT_OK;
    }
    case TF_OPT_DATA: o->data_path = arg; return nonempty(flag, arg, "a data file");
    case TF_OPT_LOAD: o->load_path = arg; return nonempty(flag, arg, "a checkpoint file");
    case TF_OPT_RESUME: o->resume_path = arg; return nonempty(flag, arg, "a checkpoint file");
    case TF_OPT_SAVE: o->save_path = arg; return TF_EXIT_OK; /* checked for writability */
    case TF_OPT_JSON: o->json_path = arg; return TF_EXIT_OK;
    case TF_OPT_SAVE_EVERY:
        return tf_cli_parse_int(&o->save_every, flag, arg, 1, TF_LIM_STEPS_MAX);
    case TF_OPT_MEMPROF: o->memprof = 1; return TF_EXIT_OK;
    case TF_OPT_LOG_EVERY:
        return tf_cli_parse_int(&o->log_every, flag, arg, 1, TF_LIM_LOG_EVERY_MAX);
    case TF_OPT_NO_PROGRESS: o->no_progress = 1; return TF_EXIT_OK;
    case TF_OPT_QUIET: o->quiet = 1; return TF_EXIT_OK;
    case TF_OPT_VALIDATE_SETUP: o->validate_setup = 1; return TF_EXIT_OK;
    case TF_OPT_DIST_TIMEOUT:
        return tf_cli_parse_int(&o->dist_timeout, flag, arg, 1, TF_LIM_DIST_TIMEOUT_MAX);
    case TF_OPT_DIST_CHECK:
        return tf_cli_parse_int(&o->dist_check_every, flag, arg, 1, TF_LIM_STEPS_MAX);
    case TF_OPT_DIST_BUCKET:
        return tf_cli_parse_int(&o->dist_bucket_kb, flag, arg, 0, TF_LIM_DIST_BUCKET_KB_MAX);
    case TF_OPT_OUT: o->out_path = arg; return nonempty(flag, arg, "a path");
    case TF_OPT_REGIONS:
        o->selected_regions = arg;
        rc = nonempty(flag, arg, "comma-separated region names");
        return rc != TF_EXIT_OK ? rc : tf_cli_check_regions(flag, arg);
    case TF_OPT_PROFILE_REGIONS:
        o->profile_regions = arg;
        rc = nonempty(flag, arg, "comma-separated region names");
        return rc != TF_EXIT_OK ? rc : tf_cli_check_regions(flag, arg);
    case TF_OPT_INCLUDE_WARMUP: o->include_warmup = 1; return TF_EXIT_OK;
    case TF_OPT_TRACE_STEPS:
        return tf_cli_parse_int(&o->trace_steps, flag, arg, 1, TF_LIM_TRACE_STEPS_MAX);
    case TF_OPT_COUNTERS: o->counters = arg; return nonempty(flag, arg, "a kernel-name pattern");
    case TF_OPT_TOP: return tf_cli_parse_int(&o->top, flag, arg, 1, TF_LIM_TOP_MAX);
    case TF_OPT_GPU_TIMER:
        return tf_cli_parse_choice(&o->gpu_timer, flag, arg, timer_names, timer_vals, 2,
                                   "cupti or events");
    case TF_OPT_PROBLEMS: {
        static const char *const p[] = {"tiny", "small", "large"};
        o->problems = arg;
        return check_list(flag, arg, p, 3, "a comma-separated list of tiny, small, large");
    }
    case TF_OPT_IMPLS:
        o->impls = arg;
        return check_list(flag, arg, impl_names, 3, "a comma-separated list of v1, v2, v3");
    case TF_OPT_BENCH_STEPS:
        return tf_cli_parse_int(&o->bench_steps, flag, arg, 1, TF_LIM_BENCH_STEPS_MAX);
    case TF_OPT_RECOMPUTE:
        rc = tf_cli_parse_choice(&v, flag, arg, recompute_names, recompute_vals, 3,
                                 "none, blocks or modules");
        c->recompute = (tf_recompute)v;
        o->set |= TF_SET_RECOMPUTE;
        return rc;
    case TF_OPT_CHUNK_SIZE: /* at most --seq-len: tf_config_validate */
        return tf_cli_parse_int(&c->chunk_size, flag, arg, 1, TF_LIM_SEQ_LEN_MAX);
    case TF_OPT_MEM_BUDGET: return tf_cli_parse_size(&o->memory_budget, flag, arg);
    case TF_OPT_SCALING: o->scaling = arg; return tf_cli_check_scaling(flag, arg);
    }
    tf_cli_error("internal error: option id %d has no handler", id);
    return TF_EXIT_FAIL;
}

/* An option token that is not ours: unknown, misspelt, or another command's. */
static int unknown_option(int cmd, const char *tok)
{
    char q[64];
    tf_cli_quote(q, sizeof q, tok);
    const char *cmdname = tf_cli_cmd_name(cmd);
    if (strncmp(tok, "--", 2) == 0) {
        const char *name = tok + 2;
        size_t len = strcspn(name, "=");
        for (int i = 0; i < tf_cli_n_optdefs; i++) {
            const tf_cli_optdef *d = &tf_cli_optdefs[i];
            if (strlen(d->name) != len || strncmp(d->name, name, len) != 0)
                continue;
            if (!(d->cmds & (unsigned)cmd)) {
                tf_cli_error("--%s: not an option of '%s' (see tinyfold help %s)", d->name,
                             cmdname, cmdname);
            } else if (name[len] == '=' && d->has_arg == no_argument) {
                char v[64];
                tf_cli_quote(v, sizeof v, name + len + 1);
                tf_cli_error("--%s: '%s' is not accepted: this switch takes no value", d->name,
                             v);
            } else {
                tf_cli_error("unknown option '%s' for '%s' (see tinyfold help %s)", q, cmdname,
                             cmdname);
            }
            return TF_EXIT_USAGE;
        }
        const tf_cli_optdef *near = tf_cli_nearest_option(name, len, (unsigned)cmd);
        if (near) {
            tf_cli_error("unknown option '%s' for '%s' (did you mean --%s?)", q, cmdname,
                         near->name);
            return TF_EXIT_USAGE;
        }
    }
    tf_cli_error("unknown option '%s' for '%s' (see tinyfold help %s)", q, cmdname, cmdname);
    return TF_EXIT_USAGE;
}

static void missing_value(const tf_cli_optdef *d, int cmd)
{
    tf_cli_error("--%s: missing value: expected %s (see tinyfold help %s)", d->name,
                 tf_cli_metavar(d) ? tf_cli_metavar(d) : "a value", tf_cli_cmd_name(cmd));
}

/* Is tok the option's full spelling ("--name" or "--name=...")? */
static int spelt_in_full(const char *tok, const char *name)
{
    size_t len = strcspn(tok + 2, "=");
    return strncmp(tok, "--", 2) == 0 && strlen(name) == len && strncmp(tok + 2, name, len) == 0;
}

int tf_cli_parse(tf_cli_opts *o, int cmd, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    tf_config_default(&o->cfg);
    if (cmd == TF_CMD_PROFILE)
        o->cfg.num_steps = 10; /* a short, representative slice */
    for (int i = 0; i < 4; i++)
        o->fusion_override[i] = -1;
    o->log_every = 10;
    o->dist_timeout = 300;
    o->dist_bucket_kb = 2048;
    o->trace_steps = 5;
    o->top = 15;
    o->bench_steps = 5;

    struct option longopts[96];
    int n = 0;
    for (int i = 0; i < tf_cli_n_optdefs && n < 95; i++) {
        const tf_cli_optdef *d = &tf_cli_optdefs[i];
        if (d->cmds & (unsigned)cmd)
            longopts[n++] = (struct option){d->name, d->has_arg, NULL, d->id};
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};

    opterr = 0;
    optind = 0; /* GNU: full re-initialisation */
    for (;;) {
        int tokpos = optind ? optind : 1;
        int idx = -1;
        /* '+': stop at the first non-option; ':': report missing values as ':' */
        int c = getopt_long(argc, argv, "+:h", longopts, &idx);
        if (c == -1)
            break;
        const char *tok = argv[tokpos];
        if (c == '?')
            return unknown_option(cmd, tok);
        if (c == ':') {
            const tf_cli_optdef *d = tf_cli_optdef_by_id(optopt);
            if (d && !spelt_in_full(tok, d->name))
                return unknown_option(cmd, tok);
            if (d)
                missing_value(d, cmd);
            else
                tf_cli_error("option '%s' is missing its value", tok);
            return TF_EXIT_USAGE;
        }
        const tf_cli_optdef *d = tf_cli_optdef_by_id(c);
        /* Reject abbreviations: the token must name the option in full. */
        if (idx >= 0 && !spelt_in_full(tok, longopts[idx].name))
            return unknown_option(cmd, tok);
        if (c == TF_OPT_HELP) {
            tf_cli_help_cmd(stdout, cmd);
            o->help = 1;
            return TF_EXIT_OK;
        }
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", d->name);
        /* "--seq-len --batch-size 4": the next option is not a value. */
        if (d->has_arg == required_argument && !strchr(tok, '=') &&
            strncmp(optarg, "--", 2) == 0 && optarg[2]) {
            missing_value(d, cmd);
            return TF_EXIT_USAGE;
        }
        int rc = apply(o, c, flag, optarg);
        if (rc != TF_EXIT_OK)
            return rc;
    }
    if (optind < argc) {
        char q[64];
        tf_cli_quote(q, sizeof q, argv[optind]);
        tf_cli_error("unexpected argument '%s' for '%s' (options start with --; see tinyfold "
                     "help %s)",
                     q, tf_cli_cmd_name(cmd), tf_cli_cmd_name(cmd));
        return TF_EXIT_USAGE;
    }
    /* The wait policy was read from the same words before the OpenMP runtime
     * started; they agree unless --omp-wait was spelt in a way the early
     * reader does not know. */
    int applied;
    if (tf_omp_wait_requested(&applied) != (tf_omp_wait)o->omp_wait && applied) {
        tf_cli_error("--omp-wait: write it as '--omp-wait VALUE' or '--omp-wait=VALUE' (it is "
                     "applied before the other options are read)");
        return TF_EXIT_USAGE;
    }

    /* Fusion: the level's defaults, then the switches in command-line order. */
    tf_config *c = &o->cfg;
    c->fusion = tf_fusion_for_impl(c->impl);
    int *f[4] = {&c->fusion.qkv_msa, &c->fusion.qkv_triangle, &c->fusion.flash,
                 &c->fusion.triangle};
    for (int i = 0; i < 4; i++)
        if (o->fusion_override[i] >= 0)
            *f[i] = o->fusion_override[i];

    /* Rules between options. */
    if (o->use_amp) {
        if ((o->set & TF_SET_PRECISION) && c->precision != TF_PREC_FP16) {
            tf_cli_error("--use-amp: not accepted with --precision %s: --use-amp is --precision "
                         "fp16 (fp16 autocast with dynamic loss scaling)",
                         tf_precision_name(c->precision));
            return TF_EXIT_USAGE;
        }
        c->precision = TF_PREC_FP16;
    }
    if (cmd == TF_CMD_PROFILE && !o->out_path) {
        tf_cli_error("--out: missing: profile needs an output directory (--out DIR)");
        return TF_EXIT_USAGE;
    }
    if (cmd == TF_CMD_GRAD) {
        const char *need = !o->load_path ? "--load" : !o->data_path ? "--data"
                                                   : !o->out_path   ? "--out"
                                                                    : NULL;
        if (need) {
            tf_cli_error("%s: missing: grad needs --load WEIGHTS --data BATCH --out GRADS", need);
            return TF_EXIT_USAGE;
        }
    }
    if (o->resume_path && o->load_path) {
        tf_cli_error("--load: not accepted with --resume: the checkpoint to resume holds the "
                     "weights already");
        return TF_EXIT_USAGE;
    }
    /* the profiler's timers (also checked where --backend auto resolves) */
    const tf_backend_entry *be = tf_backend_find(o->cfg.backend); /* NULL: auto */
    if (o->gpu_timer && be && !be->gpu) {
        tf_cli_error("--gpu-timer: not accepted with --backend %s: the %s's ops are timed by "
                     "the host clock",
                     be->name, be->title);
        return TF_EXIT_USAGE;
    }
    const int events_only = be && be->gpu && !be->cupti;
    if (o->gpu_timer == TF_PROF_GPU_TIMER_CUPTI && events_only) {
        tf_cli_error("--gpu-timer: 'cupti' is NVIDIA's; on --backend %s the ops are timed by "
                     "%s (events, the default)",
                     be->name, be->events);
        return TF_EXIT_USAGE;
    }
    if (o->counters && events_only) {
        tf_cli_error("--counters: not accepted with --backend %s: the counters are CUPTI's "
                     "(NVIDIA); on %ss use %s",
                     be->name, be->device, be->counters);
        return TF_EXIT_USAGE;
    }
    if (o->counters && o->gpu_timer == TF_PROF_GPU_TIMER_EVENTS) {
        tf_cli_error("--counters: not accepted with --gpu-timer events: the counters "
                     "are CUPTI's (the default timer)");
        return TF_EXIT_USAGE;
    }
    if (o->memory_budget > 0 && (o->set & TF_SET_RECOMPUTE)) {
        tf_cli_error("--recompute: not accepted with --memory-budget: the budget chooses "
                     "--recompute (and --chunk-size, unless given); give one of the two");
        return TF_EXIT_USAGE;
    }
    if (o->save_every && !o->save_path) {
        tf_cli_error("--save-every: not accepted without --save FILE");
        return TF_EXIT_USAGE;
    }
    const char *ck[2] = {o->save_path, o->resume_path};
    const char **optim[2] = {&o->save_optim_path, &o->resume_optim_path};
    for (int i = 0; i < 2; i++)
        if (ck[i] && tf_checkpoint_optim_path(ck[i], o->optim_buf[i], sizeof o->optim_buf[i]) == 0)
            *optim[i] = o->optim_buf[i];
    return tf_cli_check_outputs(o);
}

/* A backend asked for by name that this build or machine cannot run: one line. */
static int check_backend(const tf_backend_entry *e)
{
    char why[1024] = ""; /* the GPU module's load error names paths */
    const tf_backend_entry *g = tf_backend_gpu();
    if (e->gpu && e != g && g->built()) {
        tf_cli_error("--backend: '%s' is not available: this build's GPU backend is %s "
                     "(use --backend %s, or a build configured with %s)",
                     e->name, g->title, g->name, e->configure);
        return TF_EXIT_USAGE;
    }
    if (!tf_backend_usable(e, why, sizeof why)) {
        tf_cli_error("--backend: '%s' is not available: %s", e->name,
                     why[0] ? why : "no usable GPU");
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}

int tf_cli_resolve_backend(tf_config *c, char *note, size_t notelen)
{
    char why[1024] = "";
    note[0] = '\0';
    const tf_backend_entry *e = tf_backend_find(c->backend);
    if (e) {
        int rc = check_backend(e);
        if (rc != TF_EXIT_OK)
            return rc;
    } else if (c->backend == TF_BACKEND_AUTO) {
        e = tf_backend_auto(why, sizeof why);
        c->backend = e->kind;
        if (e->gpu) {
            snprintf(note, notelen, "auto: %s", e->found);
        } else {
            /* A few words here; `tinyfold validate` prints the runtime's. */
            const tf_backend_entry *g = tf_backend_gpu();
            char brief[128];
            tf_backend_brief(g, brief, sizeof brief);
            snprintf(note, notelen, "auto: %s%s", brief, g->built() ? g->details : "");
            /* GPU-only switches do not apply: say so rather than fail. */
            if (c->precision == TF_PREC_TF32 || c->graph) {
                size_t len = strlen(note);
                snprintf(note + len, notelen - len, "; %s%s%s ignored on the CPU",
                         c->precision == TF_PREC_TF32 ? "--precision tf32" : "",
                         c->precision == TF_PREC_TF32 && c->graph ? " and " : "",
                         c->graph ? "--graph" : "");
                c->precision = TF_PREC_FP32;
                c->graph = 0;
            }
        }
    }
    if (c->threads == 0)
        c->threads = omp_get_max_threads();
    char capped[128];
    if (tf_cli_cap_threads(&c->threads, capped, sizeof capped)) {
        size_t len = strlen(note);
        snprintf(note + len, notelen - len, "%s%s", len ? "; " : "", capped);
    }
    return c->backend == TF_BACKEND_CPU ? tf_cli_check_blas_memory(c->threads) : TF_EXIT_OK;
}
