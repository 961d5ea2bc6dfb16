/* The tinyfold program: shared declarations of src/cli/.
 *
 * main.c dispatches subcommands; options.c holds the one option table that
 * parse.c feeds to getopt_long and help.c prints; train.c hands train and
 * profile to a run (src/train/run.h) and prints it: report.c prints what a
 * run prints, runjson.c writes the run JSON. bench.c, validate.c and grad.c
 * are the other subcommands. util.c has the strict number parsers and the
 * one-line error printer. */
#ifndef TF_CLI_H
#define TF_CLI_H

#include "tinyfold.h"
#include "train/run.h"

#include <stdint.h>
#include <stdio.h>

struct cJSON;

/* Exit statuses (documented in --help and docs/cli.md). */
enum { TF_EXIT_OK = 0, TF_EXIT_FAIL = 1, TF_EXIT_USAGE = 2 };

/* Subcommands that take options, as bits of the option table. */
enum {
    TF_CMD_TRAIN = 1,
    TF_CMD_PROFILE = 2,
    TF_CMD_VALIDATE = 4,
    TF_CMD_BENCH = 8,
    TF_CMD_GRAD = 16
};

typedef struct {
    int cmd;        /* TF_CMD_* */
    tf_config cfg;  /* defaults + options; backend may still be AUTO */
    unsigned set;   /* TF_SET_* (train/run.h) */
    int fusion_override[4]; /* -1 unset, else 0/1: qkv_msa, qkv_triangle, flash, triangle */
    /* train / profile */
    const char *json_path, *save_path, *load_path, *resume_path, *data_path;
    /* the optimizer files beside --save's and --resume's checkpoints (NULL without) */
    const char *save_optim_path, *resume_optim_path;
    char optim_buf[2][4200];
    int save_every; /* 0 = only at the end */
    int quiet, log_every, no_progress, memprof, validate_setup;
    /* data parallel (mpirun): collective deadline, weights check every K steps (0: off) */
    int dist_timeout, dist_check_every;
    int dist_bucket_kb; /* the gradients' buckets (0: one all-reduce after the backward) */
    /* profile (out_path is also grad's --out) */
    const char *out_path, *selected_regions, *counters;
    const char *profile_regions; /* train / profile: an external profiler's regions */
    int include_warmup, trace_steps, top;
    int gpu_timer; /* --gpu-timer: tf_prof_gpu_timer (0: the backend's default) */
    /* bench */
    const char *problems, *impls;
    int bench_steps;
    const char *scaling; /* bench --scaling: a list of N */
    double memory_budget; /* --memory-budget in bytes; 0 = none */
    int omp_wait; /* --omp-wait: tf_omp_wait, applied before main (ompwait/tf_omp_wait.h) */
    int use_amp; /* --use-amp: --precision fp16 (the reference's knob) */
    int help; /* --help was given: help printed, exit 0 */
} tf_cli_opts;

/* ---- options.c: the option table ---- */
/* Option ids (getopt_long vals). */
enum {
    TF_OPT_HELP = 'h',
    TF_OPT_BATCH = 300,
    TF_OPT_SEQ_LEN,
    TF_OPT_N_SEQS,
    TF_OPT_BLOCKS,
    TF_OPT_MSA_DIM,
    TF_OPT_PAIR_DIM,
    TF_OPT_STEPS,
    TF_OPT_WARMUP,
    TF_OPT_LR,
    TF_OPT_SEED,
    TF_OPT_IMPL,
    TF_OPT_ALL_FUSION_ON,
    TF_OPT_ALL_FUSION_OFF,
    TF_OPT_QKV_MSA_ON,
    TF_OPT_QKV_MSA_OFF,
    TF_OPT_QKV_TRI_ON,
    TF_OPT_QKV_TRI_OFF,
    TF_OPT_FLASH_ON,
    TF_OPT_FLASH_OFF,
    TF_OPT_TRI_ON,
    TF_OPT_TRI_OFF,
    TF_OPT_BACKEND,
    TF_OPT_DEVICE,
    TF_OPT_THREADS,
    TF_OPT_OMP_WAIT,
    TF_OPT_PRECISION,
    TF_OPT_USE_AMP,
    TF_OPT_GRAPH,
    TF_OPT_GPU_PLAN,
    TF_OPT_DATA,
    TF_OPT_LOAD,
    TF_OPT_SAVE,
    TF_OPT_SAVE_EVERY,
    TF_OPT_RESUME,
    TF_OPT_JSON,
    TF_OPT_MEMPROF,
    TF_OPT_LOG_EVERY,
    TF_OPT_NO_PROGRESS,
    TF_OPT_QUIET,
    TF_OPT_VALIDATE_SETUP,
    TF_OPT_DIST_TIMEOUT,
    TF_OPT_DIST_CHECK,
    TF_OPT_DIST_BUCKET,
    TF_OPT_OUT,
    TF_OPT_REGIONS,
    TF_OPT_PROFILE_REGIONS,
    TF_OPT_INCLUDE_WARMUP,
    TF_OPT_TRACE_STEPS,
    TF_OPT_COUNTERS,
    TF_OPT_TOP,
    TF_OPT_GPU_TIMER,
    TF_OPT_PROBLEMS,
    TF_OPT_IMPLS,
    TF_OPT_BENCH_STEPS,
    TF_OPT_RECOMPUTE,
    TF_OPT_CHUNK_SIZE,
    TF_OPT_MEM_BUDGET,
    TF_OPT_SCALING,
};

typedef struct {
    const char *name;    /* long name without "--" */
    int has_arg;         /* no_argument / required_argument */
    int id;              /* getopt_long val */
    unsigned cmds;       /* TF_CMD_* bits */
    const char *metavar; /* NULL for switches; read through tf_cli_metavar */
    const char *help;    /* one or more lines, default and range included */
} tf_cli_optdef;

extern const tf_cli_optdef tf_cli_optdefs[];
extern const int tf_cli_n_optdefs;
const tf_cli_optdef *tf_cli_optdef_by_id(int id);
/* What the value is, for help and messages ("N", "cpu|cuda|hip|auto"): the
 * option's metavar, or for --backend the backend table's words; NULL for
 * switches. */
const char *tf_cli_metavar(const tf_cli_optdef *d);
const char *tf_cli_cmd_name(int cmd);

/* ---- parse.c ---- */
/* Fills o for cmd from argv (argv[0] is the command or program name).
 * Returns TF_EXIT_OK, or TF_EXIT_USAGE after printing one line. With --help
 * it prints the command's help, sets o->help and returns TF_EXIT_OK. */
int tf_cli_parse(tf_cli_opts *o, int cmd, int argc, char **argv);
/* Resolves --backend auto (note: what was chosen and why), checks an explicit
 * cuda is usable, resolves --threads 0. Returns TF_EXIT_OK or TF_EXIT_USAGE
 * after printing one line. */
int tf_cli_resolve_backend(tf_config *c, char *note, size_t notelen);

/* ---- threads.c ---- */
/* OpenBLAS's compile-time thread limit (MAX_THREADS of its config), 0 unknown. */
int tf_cli_blas_max_threads(void);
/* Caps *threads at the BLAS limit and the processors available; returns 1
 * and says so in note ("1024 threads capped at 64, ...") when it lowered it. */
int tf_cli_cap_threads(int *threads, char *note, size_t n);
/* ---- blas_memory.c ---- */
/* Under an address-space limit (ulimit -v): room for the buffers OpenBLAS
 * gives threads threads (it spins when it cannot get one), or one line and
 * TF_EXIT_USAGE. */
int tf_cli_check_blas_memory(int threads);
/* The OpenMP wait policy in effect, for headers ("auto: spin 1000 times, then sleep ..."). */
const char *tf_cli_omp_wait_info(void);
/* The --omp-wait setting in force: "auto", "active" or "passive". */
const char *tf_cli_omp_wait_setting(void);

/* ---- json_out.c: JSON documents, `--json -` ---- */
/* The run JSON's schema; raised when a field changes meaning or goes away. */
#define TF_RUN_JSON_SCHEMA 1
int tf_cli_json_is_stdout(const char *path); /* "-" */
/* Sets standard output aside for the JSON; fd 1 then writes to stderr. */
int tf_cli_json_stdout_begin(void);
int tf_cli_json_stdout_write(const char *text, size_t len, char *err, size_t errlen);
/* Writes a JSON document atomically (tmp file, fsync, rename); path "-":
 * the set-aside standard output. */
int tf_cli_write_json(const char *path, const struct cJSON *j, char *err, size_t errlen);

/* ---- help.c ---- */
void tf_cli_help_main(FILE *f);
void tf_cli_help_cmd(FILE *f, int cmd);
void tf_cli_help_compare(FILE *f); /* `compare --help` and `help compare` */
/* "unknown command 'X' (did you mean Y? expected ...)", context before it
 * ("help: " or ""); returns TF_EXIT_USAGE. */
int tf_cli_unknown_command(const char *context, const char *name);
/* `tinyfold help [cmd]`: returns the exit status. */
int tf_cli_help_command(int argc, char **argv);

/* ---- util.c ---- */
/* Prints "tinyfold: <msg>\n" on stderr (one line: newlines are replaced). */
void tf_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Data parallel runs: errors of rank r > 0 say "rank r: " after "tinyfold: ". */
void tf_cli_error_rank(int rank);
/* A user-supplied string made safe to print on one line, truncated
 * (io/text_quote.h). */
void tf_cli_quote(char *out, size_t n, const char *s);
/* Strict parsers: the whole text must be the number, in range; on error they
 * print "--flag: 'text' is not accepted: expected ..." and return TF_EXIT_USAGE. */
int tf_cli_parse_int(int *out, const char *flag, const char *text, long lo, long hi);
int tf_cli_parse_u64(uint64_t *out, const char *flag, const char *text);
int tf_cli_parse_lr(float *out, const char *flag, const char *text, double hi);
/* text must be one of names[i]; *out = vals[i]. expected: "v1, v2 or v3". */
/* ---- memory_opts.c ---- */
/* A byte count: digits with an optional fraction and unit (K M G T: 1000^k,
 * KiB MiB GiB TiB: 1024^k, a trailing B allowed); > 0. */
int tf_cli_parse_size(double *out, const char *flag, const char *text);
/* bench --scaling: a comma-separated list of N in [1, TF_LIM_SEQ_LEN_MAX]. */
int tf_cli_check_scaling(const char *flag, const char *text);
/* --memory-budget: set c->recompute to the cheapest setting whose planned
 * memory fits in budget bytes, or one line saying what the least is. */
int tf_cli_apply_memory_budget(tf_config *c, double budget);
/* bench --scaling (bench_scaling.c) */
int tf_cli_bench_scaling(tf_cli_opts *o, const tf_config *base, int cpu);

/* One line: "FLAG: 'TEXT' is not accepted: expected EXPECTED"; TF_EXIT_USAGE. */
int tf_cli_reject(const char *flag, const char *text, const char *expected);
int tf_cli_parse_choice(int *out, const char *flag, const char *text, const char *const *names,
                        const int *vals, int n, const char *expected);
/* 2653760 -> "2,653,760" */
void tf_cli_thousands(char *out, size_t n, unsigned long long v);
double tf_cli_now_ms(void);
size_t tf_cli_peak_rss_bytes(void);
const char *tf_cli_impl_name(tf_impl impl);        /* "v1" */
const char *tf_cli_impl_desc(tf_impl impl);        /* "baseline", ... */
/* Maps a library status to an exit status (user-caused -> 2, else 1). */
int tf_cli_exit_for(tf_status s);
/* Checks the directory of path exists and is writable (before a long run). */
int tf_cli_check_writable(const char *flag, const char *path);

/* ---- outputs.c ---- */
/* Every file o will write: creatable (temporary name included), absent or a
 * regular file, not an input and not another output. Returns TF_EXIT_OK or
 * TF_EXIT_USAGE after printing one line. */
int tf_cli_check_outputs(const tf_cli_opts *o);

/* ---- signals.c ---- */
/* SIGINT/SIGTERM: the first sets the flag tf_cli_stop_signal returns and a
 * deadline (signals.c): a run whose step loop has not ended by then exits as
 * for a second signal. The second (one within 250 ms of the first is that
 * one delivered twice) removes the tracked temporary files and exits 128 +
 * signal. */
void tf_cli_signals_install(void);
/* The step loop: a step took ms (the deadline follows the longest), and the
 * loop has ended (no deadline from then on: the run writes its outputs). */
void tf_cli_signals_step_ms(double ms);
void tf_cli_signals_steps_over(void);
/* Tracks "<path>.tmp.<pid>" (the atomic writers' temporary name) for removal
 * on the second signal. Call before tf_cli_signals_install. */
void tf_cli_signals_track(const char *path);
int tf_cli_stop_signal(void); /* 0, or SIGINT / SIGTERM */
const char *tf_cli_signal_name(int sig);
void tf_cli_ignore_sigpipe(void);
/* At exit: a write error on stdout is reported on stderr and makes a zero rc
 * non-zero. Returns the exit status. */
int tf_cli_finish_stdout(int rc);

/* ---- train.c: train and profile ---- */
int tf_cli_train(tf_cli_opts *o);

/* ---- report.c ---- */
typedef struct {
    long step; /* global step index (warm-up included) */
    int warmup;
    int counter_replay; /* --counters on CUDA: kernels replayed, left out of the means */
    float loss;
    double data_ms, forward_ms, backward_ms, optimizer_ms, step_ms, samples_per_sec;
    double comm_ms; /* data parallel: in collectives */
    double exposed_comm_ms; /* of comm_ms: not hidden behind the backward */
    int loss_scaled; /* fp16: the loss was scaled dynamically (the step line shows how) */
    int skipped;     /* fp16: the gradients overflowed, the update was skipped */
    float loss_scale; /* what this step's loss was multiplied by (1 unless fp16) */
} tf_cli_steprec;

typedef struct {
    int n_timed;
    long total_samples;
    double samples_per_sec; /* mean of per-step samples/s over timed steps */
    double step_ms, data_ms, forward_ms, backward_ms, optimizer_ms;
    double comm_ms; /* data parallel: in collectives (from issue to completion) */
    double exposed_comm_ms; /* of comm_ms: waited for after the backward's compute */
    int ranks;      /* data parallel: processes (1: a plain run) */
    int comm;       /* the gradients went through a collective (comm_ms is reported) */
    double mean_loss, final_loss;
    size_t peak_bytes, arena_bytes, rss_bytes;
    size_t graph_kernels; /* CUDA --graph: kernel nodes in the captured step, else 0 */
    double gflops; /* 3 * forward FLOPs / mean step time */
    int loss_scaled;    /* fp16: the loss was scaled dynamically */
    int steps;          /* steps run, warm-up included */
    long skipped_steps; /* of them: skipped by the loss scaler (warm-up included) */
    float loss_scale;   /* the scale after the last step (what the next would use) */
} tf_cli_summary;

void tf_cli_summarize(tf_cli_summary *s, const tf_cli_steprec *r, int n, int batch,
                      double flops_step);
void tf_cli_print_header(FILE *f, const tf_cli_opts *o, const tf_config *c,
                         const char *backend_line, const char *data_line, long start_step,
                         size_t backend_bytes, size_t arena_bytes, float loss_scale);
void tf_cli_print_step(FILE *f, int k, int n, const tf_cli_steprec *r, size_t backend_bytes);
void tf_cli_print_warmup(FILE *f, int k, int n, const tf_cli_steprec *r);
/* Live progress line on stderr while step k of n runs: the last step's loss
 * and speed (prev may be NULL) and the time left (\r, erased by
 * tf_cli_progress_clear). */
void tf_cli_progress(int warm, int k, int n, const tf_cli_steprec *prev, double eta_s);
void tf_cli_progress_clear(void);
void tf_cli_print_summary(FILE *f, const tf_cli_summary *s, int memprof, size_t param_floats);
/* What --precision P stores and computes, for the header ("bf16 activations, ..."). */
const char *tf_cli_precision_desc(tf_precision p);

/* ---- runjson.c ---- */
/* The run JSON (docs/cli.md). Caller deletes. */
struct cJSON *tf_cli_run_json(const char *command, const tf_config *c, size_t params,
                              const tf_cli_summary *s, const tf_cli_steprec *r, int n);
/* {"backends":[...],"compiler":..,"blas":..} */
struct cJSON *tf_cli_build_json(void);
const char *tf_cli_blas_info(void);

/* ---- suggest.c ---- */
size_t tf_cli_edit_distance(const char *a, size_t an, const char *b, size_t bn);
const tf_cli_optdef *tf_cli_nearest_option(const char *name, size_t len, unsigned cmd);
/* The nearest of names[0..n) to name by the same rule, NULL when none is near. */
const char *tf_cli_nearest_name(const char *name, const char *const *names, size_t n);

/* ---- regions.c ---- */
/* A comma-separated list of profiling region names (--selected-regions,
 * --profile-regions): TF_EXIT_OK, or one line naming the first unknown name
 * and the valid ones (TF_EXIT_USAGE). */
int tf_cli_check_regions(const char *flag, const char *list);

/* ---- bench.c, validate.c, grad.c ---- */
int tf_cli_bench(tf_cli_opts *o);
int tf_cli_validate(tf_cli_opts *o);
int tf_cli_grad(tf_cli_opts *o);

#endif
