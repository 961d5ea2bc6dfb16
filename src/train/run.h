/* A training run: the configuration that a checkpoint (--load, --resume)
 * and a data file fix (run_config.c), what the ranks of a data parallel
 * launch must agree on before the trainer (run_ranks.c), the trainer, and
 * the step loop with its periodic and final saves (run.c). Its caller parses the options
 * and prints: it hears of each step through hooks, and gets each failure as
 * one line, empty on the ranks that leave the telling to rank 0. */
#ifndef TF_TRAIN_RUN_H
#define TF_TRAIN_RUN_H

#include "dist/dist.h"
#include "io/datafile.h"
#include "tinyfold.h"

/* The knobs given explicitly (tf_run_opts.set): a checkpoint or a data file
 * must agree with them, and fixes the others. */
enum {
    TF_SET_BATCH = 1u << 0,
    TF_SET_SEQ_LEN = 1u << 1,
    TF_SET_N_SEQS = 1u << 2,
    TF_SET_BLOCKS = 1u << 3,
    TF_SET_MSA_DIM = 1u << 4,
    TF_SET_PAIR_DIM = 1u << 5,
    TF_SET_LR = 1u << 6,
    TF_SET_SEED = 1u << 7,
    TF_SET_WARMUP = 1u << 8,
    TF_SET_STEPS = 1u << 9,
    TF_SET_IMPL = 1u << 10,
    TF_SET_DEVICE = 1u << 11,
    TF_SET_PRECISION = 1u << 12,
    TF_SET_RECOMPUTE = 1u << 13
};

typedef struct {
    tf_config cfg; /* the options; backend may still be AUTO */
    unsigned set;  /* TF_SET_* */
    const char *resume_path, *load_path, *data_path, *save_path; /* NULL: none */
    int save_every;       /* a checkpoint every K global steps (0: only at the end) */
    int dist_timeout;     /* seconds a collective may take before the job ends */
    int dist_check_every; /* the weights compared across ranks every K steps (0: off) */
    int dist_bucket_kb;   /* the gradients' buckets (0: one all-reduce after the backward) */
} tf_run_opts;

typedef struct {
    tf_run_opts o;
    tf_config c; /* the run's: the options, the checkpoint's and the data file's */
    long start;  /* the global step of the run's first step */
    tf_dist dist;
    tf_datafile *df; /* --data */
    tf_batch batch;  /* the data file's batch of a step */
    tf_trainer *t;
    float *check_buf; /* --dist-check-every: a copy of the weights */
    int steps;        /* steps run (warm-up included; a failed one too) */
    long saved_step;  /* the global step of the checkpoint last written, -1 */
    int stop;         /* the signal that stopped the step loop, 0 */
} tf_run;

typedef struct {
    void *ctx;
    /* a signal asks to stop: its number, else 0 (NULL: none) */
    int (*stop)(void *ctx);
    /* before step i (0-based, warm-up included; NULL: none) */
    void (*before)(void *ctx, int i);
    /* after step i, failed or not: its figures (the data file's read
     * included) and status */
    void (*after)(void *ctx, int i, const tf_step_stats *st, tf_status s);
} tf_run_hooks;

/* The run's phases, in this order; each returns TF_OK or a status with one
 * line in err (errlen 3 * 4096 holds any). Between them the caller resolves
 * the backend (configure leaves AUTO), applies a memory budget and creates
 * a profiler. */
/* Joins the ranks of the launch. */
tf_status tf_run_begin(tf_run *r, const tf_run_opts *o, char *err, size_t errlen);
/* r->c from the options, the checkpoint and the data file; validated. */
tf_status tf_run_configure(tf_run *r, char *err, size_t errlen);
/* A launch of several ranks: the checks every rank makes before the
 * trainer, in the same order everywhere (each is a collective); NCCL's
 * communicator where the ranks reduce through it. */
tf_status tf_run_check_ranks(tf_run *r, char *err, size_t errlen);
/* The trainer (prof may be NULL), the checkpoint loaded into it, the
 * buffers of the step loop. */
tf_status tf_run_create(tf_run *r, tf_prof *prof, char *err, size_t errlen);
/* The warm-up and timed steps, with the saves of --save-every, until the
 * last, a failure, or a signal (r->stop). */
tf_status tf_run_steps(tf_run *r, const tf_run_hooks *h, char *err, size_t errlen);
/* --save: the checkpoint of the last step run (a stopped run's too: the
 * last completed step left the trainer consistent). */
tf_status tf_run_save_final(tf_run *r, char *err, size_t errlen);
/* Frees what tf_run_create and tf_run_configure made (the trainer first:
 * with --graph its graphs hold NCCL's captured work). */
void tf_run_close(tf_run *r);
/* Leaves the launch. A failed rank leaves without MPI_Finalize (which waits
 * for every rank): the launcher then ends the others rather than leave them
 * waiting. */
void tf_run_end(tf_run *r, int ok);

#endif
