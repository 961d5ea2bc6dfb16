/* The job over MPI: rank and node-local rank, the start-up checks and the
 * host-memory collectives of the CPU backend.
 *
 * Every collective is issued non-blocking and waited for here, with a
 * deadline: a rank that died or hangs would otherwise leave the others in
 * MPI_Allreduce forever (a killed rank usually makes mpirun end the job; a
 * stopped or deadlocked one does not). Past the deadline this rank says so in
 * one line and aborts the job (MPI_Abort ends every rank, non-zero). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dist/dist.h"

static MPI_Comm local_comm = MPI_COMM_NULL;

int tf_dist_init(tf_dist *d, double timeout_s, char *err, size_t n) {
    *d = (tf_dist){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1,
                   .timeout_s = timeout_s};
    char var[64];
    tf_dist_launch_size(var, sizeof var);
    if (!var[0]) return 0; /* not under a launcher: one process, no MPI */
    int provided = 0;
    /* threads: only the main thread calls MPI */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, n, "MPI_Init failed (launched with %s)", var);
        return 2;
    }
    d->mpi = 1;
    d->launched = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL,
                        &local_comm);
    MPI_Comm_rank(local_comm, &d->local_rank);
    MPI_Comm_size(local_comm, &d->local_size);
    return 0;
}

void tf_dist_finalize(tf_dist *d) {
    tf_dist_plan_buckets(d, NULL, 0, 0);
    if (!d->mpi) return;
    if (local_comm != MPI_COMM_NULL) MPI_Comm_free(&local_comm);
    MPI_Finalize();
    d->mpi = 0;
}

void tf_dist_abort(tf_dist *d, int code) {
    if (d->mpi) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Waits for rq until the deadline; polling (MPI_Test also drives the
 * transfer), sleeping a little between polls after the first millisecond. */
static void wait_deadline(tf_dist *d, MPI_Request *rq, const char *what) {
    const double t0 = now_ms();
    for (;;) {
        int done = 0;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) break;
        double el = now_ms() - t0;
        if (d->timeout_s > 0 && el > d->timeout_s * 1e3) {
            fprintf(stderr,
                    "tinyfold: rank %d of %d: %s: no answer from the other ranks within %g s "
                    "(--dist-timeout): a rank died or hangs; ending every rank\n",
                    d->rank, d->size, what, d->timeout_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (el > 1.0) nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    const double ms = now_ms() - t0;
    d->comm_ms += ms;
    d->exposed_ms += ms; /* a blocking collective hides nothing */
}

static void allreduce(tf_dist *d, void *buf, int count, MPI_Datatype ty, MPI_Op op,
                      MPI_Comm comm, const char *what) {
    MPI_Request rq;
    MPI_Iallreduce(MPI_IN_PLACE, buf, count, ty, op, comm, &rq);
    wait_deadline(d, &rq, what);
}

int tf_dist_same_u64(tf_dist *d, uint64_t v) {
    if (!d->mpi || d->size == 1) return 1;
    uint64_t lo = v, hi = v;
    allreduce(d, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD, "comparing the ranks");
    allreduce(d, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, "comparing the ranks");
    return lo == hi;
}

int tf_dist_max_int(tf_dist *d, int v) {
    if (!d->mpi || d->size == 1) return v;
    allreduce(d, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, "agreeing on a status");
    return v;
}

int tf_dist_devices_distinct(tf_dist *d, int device) {
    if (!d->mpi || d->size == 1) return 1;
    int *all = calloc((size_t)d->local_size, sizeof *all), bad = all == NULL;
    if (all) {
        MPI_Request rq;
        MPI_Iallgather(&device, 1, MPI_INT, all, 1, MPI_INT, local_comm, &rq);
        wait_deadline(d, &rq, "gathering the devices");
        for (int i = 0; i < d->local_size; i++)
            for (int j = 0; j < i; j++) bad |= all[i] == all[j];
        free(all);
    }
    return !tf_dist_max_int(d, bad);
}

/* The buckets over MPI: each an MPI_Iallreduce issued as its gradients are
 * final (no progress thread: Open MPI moves a non-blocking collective inside
 * MPI calls, so tf_dist_mpi_progress tests them at every stage end). */
static MPI_Request *requests(tf_dist *d) {
    if (!d->rq) { /* a request and an index a bucket */
        d->rq = malloc((size_t)(d->nbk > 0 ? d->nbk : 1) * (sizeof(MPI_Request) + sizeof(int)));
        if (!d->rq) {
            fprintf(stderr, "tinyfold: rank %d of %d: out of host memory for the all-reduce "
                            "requests\n", d->rank, d->size);
            tf_dist_abort(d, 1);
        }
    }
    return d->rq;
}

void tf_dist_mpi_issue(tf_dist *d, float *g) {
    MPI_Request *rq = requests(d);
    tf_dist_bucket *b = &d->bk[d->next];
    b->done = 0;
    b->t0 = now_ms();
    MPI_Iallreduce(MPI_IN_PLACE, g + b->lo, (int)b->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                   &rq[d->next]);
    d->next++;
}

/* Marks the issued buckets that completed (one MPI_Testsome). */
static int poll_buckets(tf_dist *d) {
    MPI_Request *rq = requests(d);
    int *idx = (int *)(rq + (d->nbk > 0 ? d->nbk : 1)), k = 0;
    MPI_Testsome(d->next, rq, &k, idx, MPI_STATUSES_IGNORE);
    const double t = now_ms();
    for (int i = 0; i < k && k != MPI_UNDEFINED; i++) {
        d->bk[idx[i]].t1 = t;
        d->bk[idx[i]].done = 1;
    }
    int open = 0;
    for (int i = 0; i < d->next; i++) open += !d->bk[i].done;
    return open;
}

void tf_dist_mpi_progress(tf_dist *d) {
    if (d->next > d->ndone) d->ndone = d->next - poll_buckets(d);
}

void tf_dist_mpi_finish(tf_dist *d, float *g, size_t n) {
    const double t0 = now_ms();
    while (poll_buckets(d)) {
        double el = now_ms() - t0;
        if (d->timeout_s > 0 && el > d->timeout_s * 1e3) {
            fprintf(stderr,
                    "tinyfold: rank %d of %d: all-reduce of the gradients: no answer from the "
                    "other ranks within %g s (--dist-timeout): a rank died or hangs; ending "
                    "every rank\n",
                    d->rank, d->size, d->timeout_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (el > 1.0) nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    const double t1 = now_ms();
    d->exposed_ms += t1 - t0;
    /* the time in communication: the union of the buckets' spans (issued
     * in order; a later one may finish first) */
    double end = -1e300, sum = 0;
    for (int i = 0; i < d->nbk; i++) {
        const tf_dist_bucket *b = &d->bk[i];
        double lo = b->t0 > end ? b->t0 : end;
        if (b->t1 > lo) sum += b->t1 - lo;
        if (b->t1 > end) end = b->t1;
    }
    d->comm_ms += sum;
    /* sum, then one rounding by 1/P (exact when P is a power of two) */
    const float s = 1.0f / (float)d->size;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) g[i] *= s;
    d->comm_bytes += (double)n * sizeof(float);
    d->next = d->ndone = 0;
}

double tf_dist_mean_scalar(tf_dist *d, double v) {
    if (!d->mpi || d->size == 1) return v;
    allreduce(d, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, "all-reduce of the loss");
    return v / d->size;
}

int tf_dist_bcast(tf_dist *d, void *buf, size_t n) {
    if (!d->mpi || d->size == 1) return 0;
    if (n > (size_t)INT_MAX) return 1;
    MPI_Request rq;
    MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    wait_deadline(d, &rq, "broadcast from rank 0");
    return 0;
}
