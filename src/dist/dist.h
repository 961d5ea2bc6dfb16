/* Data parallel across processes: one process (rank) per device, each
 * training on its slice of the global batch, the gradients averaged across
 * ranks before the optimizer so that every rank applies the same update.
 *
 * Launch is the job of the standard tools (mpirun, srun): this layer reads
 * which rank it is and how many there are. Builds without MPI (CMake TF_MPI)
 * link dist_single.c, which runs one rank and refuses a multi-rank launch.
 * The collectives of the CPU backend are MPI's; the CUDA backend's go
 * through NCCL (dist_nccl.c). */
#ifndef TF_DIST_H
#define TF_DIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One bucket of the step's gradient reduction (bucket.c): floats
 * [lo, lo + n) of the gradient buffer, issued when backward stage `stage`
 * ends (model/exec.h bwd_stage), its all-reduce timed from issue to
 * completion (host ms; on the CPU the completion is seen at a poll). */
typedef struct {
    size_t lo, n;
    int stage;
    double t0, t1;
    int done;
} tf_dist_bucket;

typedef struct {
    int rank, size;             /* in the job */
    int local_rank, local_size; /* on this node */
    int mpi;                    /* MPI was initialised by tf_dist_init */
    int launched;               /* a launcher's environment started this process */
    double timeout_s;           /* a collective waiting longer aborts the job */
    double comm_ms;             /* time in collectives since the last tf_dist_take_comm_ms */
    double comm_bytes;          /* bytes reduced since the last tf_dist_take_comm_ms */
    double exposed_ms;          /* of comm_ms: waited for after the backward's compute */
    /* The buckets (--dist-bucket-kb): once bucket_bytes of gradients are
     * final, they are all-reduced while the backward goes on; 0: one
     * all-reduce after the backward. The same plan on every rank (the
     * collectives must match). next: the first bucket not yet issued. */
    double bucket_bytes;
    tf_dist_bucket *bk;
    int nbk, next, ndone; /* ndone: of the issued ones, seen complete (MPI) */
    void *rq;                   /* dist_mpi.c: a request per bucket */
    void *nccl;                 /* dist_nccl.c's state, NULL without NCCL */
} tf_dist;

/* The rank count the launcher's environment announces (Open MPI, MPICH/PMI,
 * Slurm's srun), 1 when none does; `var` gets the variable that said so. */
int tf_dist_launch_size(char *var, size_t n);

/* Sets up the job: MPI when the launcher started several ranks (or one,
 * under mpirun). Returns 0, or 2 with one line in err (e.g. a multi-rank
 * launch of a build without MPI). */
int tf_dist_init(tf_dist *d, double timeout_s, char *err, size_t n);
void tf_dist_finalize(tf_dist *d);
/* Ends every rank now (after a fatal error on this one). */
void tf_dist_abort(tf_dist *d, int code);

/* 1 when every rank passed the same value (e.g. a hash of the configuration):
 * an all-reduce of min and max. */
int tf_dist_same_u64(tf_dist *d, uint64_t v);
/* The maximum of v over the ranks (an exit status everyone agrees on). */
int tf_dist_max_int(tf_dist *d, int v);
/* 1 when no two ranks of a node passed the same device ordinal. */
int tf_dist_devices_distinct(tf_dist *d, int device);

/* The buckets over MPI, host memory (dist_mpi.c; no-ops without MPI): the
 * next bucket issued; the ones in flight tested; all waited for with the
 * deadline, then g[0..n) divided by the rank count. */
void tf_dist_mpi_issue(tf_dist *d, float *g);
void tf_dist_mpi_progress(tf_dist *d);
void tf_dist_mpi_finish(tf_dist *d, float *g, size_t n);
/* The mean over ranks of one value (the reported loss). */
double tf_dist_mean_scalar(tf_dist *d, double v);

/* The buckets of a gradient buffer of n floats (bucket.c) from what each
 * backward stage writes: hi[s], the highest float written by stage s plus
 * one (exec.h grad_hi), for nstages stages. After stage s the floats from
 * max(hi[s+1..]) up are final; a bucket is cut there once it holds
 * bucket_bytes, and the rest goes after the last stage. 0, or 1 (no
 * memory). */
int tf_dist_plan_buckets(tf_dist *d, const size_t *hi, int nstages, size_t n);

/* The step's gradient reduction, in the buckets' order. queue NULL: g is
 * host memory (the CPU backend), averaged over MPI; else g is on the device
 * of the GPU backend whose main queue (ops->queue) that is, averaged through
 * NCCL on its own stream, each bucket after an event of the backend's queue.
 * tf_dist_issue: the next bucket's all-reduce starts (the caller has made
 * its gradients final); tf_dist_progress: lets MPI move the ones in flight
 * (called after every op while some are: Open MPI has no progress thread,
 * and a stage end is too rare for a collective of many rounds);
 * tf_dist_reduce_grads, after the backward:
 * issues the buckets not yet issued, then waits for all of them (MPI; the
 * wait is the exposed time) or makes the backend's stream wait (NCCL; the
 * host waits with the deadline in tf_dist_wait_device) and divides by the
 * rank count. */
void tf_dist_issue(tf_dist *d, float *g, void *queue);
void tf_dist_progress(tf_dist *d);
void tf_dist_reduce_grads(tf_dist *d, float *g, size_t n, void *queue);
/* Before the host waits for the backend's stream: polls the reductions'
 * completion within --dist-timeout (NCCL; a no-op elsewhere). */
void tf_dist_wait_device(tf_dist *d);
/* The device queue the buckets' all-reduces run on (NCCL's stream, for
 * ops.h wgrad_wait_queue), NULL when they run on the host (MPI). */
void *tf_dist_queue(tf_dist *d);
/* A graph holding a step's reduction (tf_dist_reduce_grads issued under
 * capture: the all-reduces, their timing and the join are its nodes) was
 * launched: what it reduces is counted and timed, and tf_dist_wait_device
 * waits for it, as after an eager step (NCCL; a no-op elsewhere). */
void tf_dist_replayed(tf_dist *d);

/* Milliseconds of communication and bytes reduced since the last call;
 * exposed (may be NULL): the part after the backward's compute ended. */
double tf_dist_take_comm_ms(tf_dist *d, double *bytes, double *exposed);

/* A step's all-reduce spans (host ms, CLOCK_MONOTONIC) for the profiler's
 * trace; calls fn(arg, t0, t1, bytes) for each bucket of the last step with
 * host times (the CPU; NCCL's run on the device, in CUPTI's records). */
void tf_dist_each_span(const tf_dist *d, void (*fn)(void *, double, double, double), void *arg);

/* tinyfold profile on several ranks: rank 0 merges DIR/rank<r>/trace.json
 * (r = 1..nranks-1) into DIR/trace.json, a process per rank (trace_merge.c).
 * 0, or 1 with one line in err. */
int tf_dist_merge_traces(const char *dir, int nranks, char *err, size_t n);

/* Rank 0's n bytes to every rank (0 on success). */
int tf_dist_bcast(tf_dist *d, void *buf, size_t n);

/* dist_nccl.cu (builds with NCCL, TF_HAVE_NCCL): the communicator over the
 * job's ranks on `device` (sets d->nccl; 0 on success, else one line in err),
 * its end, and the device time of the reductions since the last call. */
int tf_dist_nccl_init(tf_dist *d, int device, char *err, size_t n);
void tf_dist_nccl_destroy(tf_dist *d);
void tf_dist_nccl_issue(tf_dist *d, float *g, void *queue);
void tf_dist_nccl_finish(tf_dist *d, void *queue);
void *tf_dist_nccl_queue(tf_dist *d);
void tf_dist_nccl_replayed(tf_dist *d);
void tf_dist_nccl_wait(tf_dist *d);
double tf_dist_nccl_take_ms(tf_dist *d, double *bytes, double *exposed);

#ifdef __cplusplus
}
#endif
#endif
