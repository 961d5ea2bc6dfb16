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

typedef struct {
    int rank, size;             /* in the job */
    int local_rank, local_size; /* on this node */
    int mpi;                    /* MPI was initialised by tf_dist_init */
    int launched;               /* a launcher's environment started this process */
    double timeout_s;           /* a collective waiting longer aborts the job */
    double comm_ms;             /* time in collectives since the last tf_dist_take_comm_ms */
    double comm_bytes;          /* bytes reduced since the last tf_dist_take_comm_ms */
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

/* g[0..n) <- the mean over ranks of g, in place, host memory (MPI). */
void tf_dist_mean_host(tf_dist *d, float *g, size_t n);
/* The mean over ranks of one value (the reported loss). */
double tf_dist_mean_scalar(tf_dist *d, double v);

/* The step's gradient reduction, between the backward and the optimizer:
 * be NULL: g is host memory (the CPU backend), averaged over MPI; else g is
 * on the device of the GPU backend be, averaged through NCCL on its own
 * stream, ordered after the backward and before the optimizer. */
struct tf_backend;
void tf_dist_reduce_grads(tf_dist *d, float *g, size_t n, struct tf_backend *be);

/* The trainer's side (trainer.c): a trainer created with this rank's share
 * of the batch (global / size) draws its slice of each step's global batch,
 * reduces its gradients every step and reports the global batch in
 * tf_trainer_config (so checkpoints and the JSON hold the global batch). */
struct tf_trainer;
void tf_trainer_set_dist(struct tf_trainer *t, tf_dist *d);

/* Milliseconds of communication and bytes reduced since the last call. */
double tf_dist_take_comm_ms(tf_dist *d, double *bytes);

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
void tf_dist_nccl_mean(tf_dist *d, float *g, size_t n, struct tf_backend *be);
double tf_dist_nccl_take_ms(tf_dist *d, double *bytes);

#ifdef __cplusplus
}
#endif
#endif
