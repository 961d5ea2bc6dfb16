/* A trainer's steps timed for a benchmark (timed.h). */
#include "train/timed.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

tf_status tf_timed_steps(tf_trainer *t, int warmup, int steps, void (*before)(void *ctx, int i),
                         void *ctx, tf_timed *r) {
    r->median_ms = 0;
    r->failed = -1;
    double *ms = malloc((size_t)steps * sizeof *ms);
    if (!ms) return TF_ERR_NOMEM;
    tf_status s = TF_OK;
    for (int i = 0; i < warmup + steps && s == TF_OK; i++) {
        if (before) before(ctx, i);
        tf_step_stats st = {0};
        s = tf_trainer_step(t, i, &st);
        if (s != TF_OK) {
            r->failed = i;
            r->st = st;
        } else if (i >= warmup) {
            ms[i - warmup] = st.step_ms;
        }
    }
    if (s == TF_OK) {
        qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
        r->median_ms = steps % 2 ? ms[steps / 2] : 0.5 * (ms[steps / 2 - 1] + ms[steps / 2]);
    }
    free(ms);
    return s;
}
