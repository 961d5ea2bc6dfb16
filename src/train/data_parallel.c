/* The gradients' reduction across ranks, from inside the step. */
#include "train/data_parallel.h"

#include <math.h>

#include "prof/prof.h"
#include "prof/profiler.h"

/* The gradients' backend's main queue for the all-reduces to follow (NULL:
 * host memory, reduced over MPI). */
static void *main_queue(const tf_dp *x) { return x->be ? x->ops->queue(x->be, 0) : NULL; }

/* The end of a backward stage: the buckets whose gradients it made final
 * go, after the lane's GEMMs that write them: on a device queue of their own
 * that queue waits for the lane and the main queue goes on; on the host
 * (MPI) the main queue waits. MPI moves the others. */
static void stage_done(void *arg, int stage) {
    tf_dp *x = arg;
    tf_dist *d = x->dist;
    void *q = x->be ? tf_dist_queue(d) : NULL;
    while (d->next < d->nbk && d->bk[d->next].stage == stage) {
        const tf_dist_bucket *b = &d->bk[d->next];
        if (q && x->ops->wgrad_wait_queue) {
            const long upto = tf_x_lane_ticket(x->ex, x->grads + b->lo, b->n);
            if (upto > 0) x->ops->wgrad_wait_queue(x->be, q, upto);
        } else {
            tf_x_grads_final(x->ex, x->grads + b->lo, b->n);
        }
        tf_dist_issue(d, x->grads, main_queue(x));
    }
    tf_dist_progress(d);
}

/* After an op on the CPU: MPI moves the buckets in flight. */
static void op_done(void *arg) {
    tf_dp *x = arg;
    tf_dist_progress(x->dist);
}

int tf_dp_attach(tf_dp *x, tf_dist *d, tf_plan *p, float *grads) {
    const int on_device = p->caps.device_memory;
    *x = (tf_dp){.dist = d,
                 .ex = &p->ex,
                 .ops = p->ops,
                 .be = on_device ? p->be : NULL,
                 .grads = grads,
                 .n = p->nparams};
    /* --graph: the backend's graphs capture NCCL's collectives, so the
     * buckets are the eager ones, issued by the backward phase (captured
     * once, replayed every step) */
    const int graphs = p->cfg.graph && p->caps.graphs;
    x->in_backward = graphs && d->nccl && on_device;
    const double keep = d->bucket_bytes;
    if ((graphs && !x->in_backward) || !p->grad_hi) d->bucket_bytes = 0;
    int bad = tf_dist_plan_buckets(d, p->grad_hi ? p->grad_hi : &p->nparams,
                                   p->grad_hi ? p->nstages : 1, p->nparams);
    d->bucket_bytes = keep;
    if ((!graphs || x->in_backward) && d->nbk > 1) {
        p->ex.stage_end = stage_done;
        p->ex.stage_ctx = x;
        if (!on_device) p->ex.op_done = op_done;
    }
    return bad;
}

int tf_dp_ranks(const tf_dp *x) { return x->dist ? x->dist->size : 1; }

void tf_dp_reduce_in_backward(tf_dp *x, tf_prof *prof) {
    if (!x->in_backward) return;
    tf_region_push(prof, "allreduce");
    tf_dist_reduce_grads(x->dist, x->grads, x->n, main_queue(x));
    tf_region_pop(prof);
}

void tf_dp_after_backward(tf_dp *x, int replayed, int wait) {
    if (!x->in_backward) return;
    if (replayed) tf_dist_replayed(x->dist);
    if (wait) tf_dist_wait_device(x->dist);
}

void tf_dp_reduce(tf_dp *x, tf_prof *prof, int wait) {
    if (!x->dist || (x->dist->size == 1 && !x->dist->nccl) || x->in_backward) return;
    tf_region_push(prof, "allreduce");
    tf_dist_reduce_grads(x->dist, x->grads, x->n, main_queue(x));
    if (wait) tf_dist_wait_device(x->dist); /* the phase's wait follows */
    tf_region_pop(prof);
}

void tf_dp_wait(tf_dp *x) {
    if (x->dist) tf_dist_wait_device(x->dist);
}

tf_status tf_dp_mean_loss(tf_dp *x, float *loss) {
    if (tf_dp_ranks(x) > 1) *loss = (float)tf_dist_mean_scalar(x->dist, *loss);
    return isfinite(*loss) ? TF_OK : TF_ERR_NONFINITE;
}

/* The step's all-reduce spans to the profiler's trace. */
static void comm_span(void *arg, double t0, double t1, double bytes) {
    tf_prof_comm(arg, (int64_t)(t0 * 1e6), (int64_t)(t1 * 1e6), bytes);
}

void tf_dp_stats(tf_dp *x, tf_prof *prof, tf_step_stats *st) {
    st->comm_ms = st->exposed_comm_ms = 0;
    if (!x->dist) return;
    if (prof) tf_dist_each_span(x->dist, comm_span, prof);
    st->comm_ms = tf_dist_take_comm_ms(x->dist, NULL, &st->exposed_comm_ms);
}
