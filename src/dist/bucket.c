/* The buckets of the gradient reduction, from what the backward's stages
 * write (model/exec.h grad_hi, recorded by a planning pass): no layout is
 * assumed, so a module whose gradients sit apart (the LayerNorms of a
 * block's pair modules come after all its weights) only delays its bucket. */
#include <stdlib.h>

#include "dist/dist.h"

/* one MPI call counts in int */
#define TF_BUCKET_MAX_FLOATS ((size_t)1 << 30)

int tf_dist_plan_buckets(tf_dist *d, const size_t *hi, int nstages, size_t n) {
    free(d->bk);
    free(d->rq);
    d->bk = NULL;
    d->rq = NULL;
    d->nbk = d->next = 0;
    if (nstages < 1 || n == 0) return 0;
    /* at most one bucket a stage, each split into MPI-sized pieces */
    size_t cap = (size_t)nstages + n / TF_BUCKET_MAX_FLOATS + 1;
    d->bk = calloc(cap, sizeof *d->bk);
    if (!d->bk) return 1;
    const size_t want = (size_t)(d->bucket_bytes / sizeof(float));
    size_t issued = n; /* [issued, n) is in buckets already */
    for (int s = 0; s < nstages; s++) {
        /* after stage s, everything from `ready` up is final */
        size_t ready = 0;
        for (int t = s + 1; t < nstages; t++)
            if (hi[t] > ready) ready = hi[t];
        if (ready > n) ready = n;
        const int last = s == nstages - 1;
        if (ready >= issued || (!last && (want == 0 || issued - ready < want))) continue;
        /* the higher piece first: the order the gradients became final */
        while (issued > ready) {
            size_t k = issued - ready < TF_BUCKET_MAX_FLOATS ? issued - ready : TF_BUCKET_MAX_FLOATS;
            d->bk[d->nbk++] = (tf_dist_bucket){.lo = issued - k, .n = k, .stage = s};
            issued -= k;
        }
    }
    return 0;
}

void tf_dist_each_span(const tf_dist *d, void (*fn)(void *, double, double, double), void *arg) {
    if (d->nccl) return;
    for (int i = 0; i < d->nbk; i++)
        if (d->bk[i].done) fn(arg, d->bk[i].t0, d->bk[i].t1, (double)d->bk[i].n * sizeof(float));
}
