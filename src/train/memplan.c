/* Choosing --recompute from the dry-run plan. Each candidate is planned by
 * tf_trainer_plan (the same forward and backward the trainer runs, no op
 * executed), so every figure here is the one a run would allocate. */
#include "train/memplan.h"

#include <stdio.h>

static const char *const mode_names[] = {"none", "blocks", "modules"};
static const tf_recompute order[] = {TF_RECOMPUTE_NONE, TF_RECOMPUTE_BLOCKS,
                                     TF_RECOMPUTE_MODULES};
enum { N_MODES = 3 };

tf_status tf_memplan_choose(tf_config *c, double limit, size_t *bytes, char *err,
                            size_t errlen) {
    size_t least = 0;
    tf_recompute least_mode = TF_RECOMPUTE_NONE;
    for (int i = 0; i < N_MODES; i++) {
        tf_config x = *c;
        x.recompute = order[i];
        size_t b = 0;
        tf_status st = tf_trainer_plan(&x, &b, err, errlen);
        if (st != TF_OK) return st;
        if ((double)b <= limit) {
            c->recompute = order[i];
            *bytes = b;
            return TF_OK;
        }
        if (i == 0 || b < least) least = b, least_mode = order[i];
    }
    c->recompute = least_mode;
    *bytes = least;
    return TF_ERR_NOMEM;
}

void tf_memplan_suggest(const tf_config *c, double limit, char *out, size_t n) {
    static const char *reduce = "reduce --batch-size, --seq-len, --num-seqs or --num-blocks";
    tf_config x = *c;
    char err[256];
    size_t b = 0;
    tf_status st = tf_memplan_choose(&x, limit, &b, err, sizeof err);
    if (st == TF_OK && x.recompute != c->recompute)
        snprintf(out, n, "fits with --recompute %s: %.2f GB", mode_names[x.recompute], b / 1e9);
    else if (st == TF_ERR_NOMEM && x.recompute != c->recompute)
        snprintf(out, n, "the least is %.2f GB with --recompute %s; %s", b / 1e9,
                 mode_names[x.recompute], reduce);
    else
        snprintf(out, n, "%s", reduce);
}
