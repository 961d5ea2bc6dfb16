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

const char *tf_memplan_fmt(char *buf, size_t n, double bytes) {
    if (bytes >= 1e9)
        snprintf(buf, n, "%.2f GB", bytes / 1e9);
    else
        snprintf(buf, n, "%.1f MB", bytes / 1e6);
    return buf;
}

void tf_memplan_suggest(const tf_config *c, double limit, char *out, size_t n) {
    static const char *reduce = "reduce --batch-size, --seq-len, --num-seqs or --num-blocks";
    tf_config x = *c;
    char err[256];
    size_t b = 0;
    char f[32];
    if (limit < 0) { /* no limit known: the plans of the settings that keep less */
        size_t at = 0;
        out[0] = '\0';
        for (int i = (int)c->recompute + 1; i < N_MODES && at < n; i++) {
            x.recompute = order[i];
            if (tf_trainer_plan(&x, &b, err, sizeof err) != TF_OK) break;
            at += (size_t)snprintf(out + at, n - at, "--recompute %s needs %s; ", mode_names[i],
                                   tf_memplan_fmt(f, sizeof f, (double)b));
        }
        if (at < n) snprintf(out + at, n - at, "%s", reduce);
        return;
    }
    tf_status st = tf_memplan_choose(&x, limit, &b, err, sizeof err);
    if (st == TF_OK && x.recompute != c->recompute)
        snprintf(out, n, "fits with --recompute %s: %s", mode_names[x.recompute],
                 tf_memplan_fmt(f, sizeof f, (double)b));
    else if (st == TF_ERR_NOMEM && x.recompute != c->recompute)
        snprintf(out, n, "the least is %s with --recompute %s; %s",
                 tf_memplan_fmt(f, sizeof f, (double)b), mode_names[x.recompute], reduce);
    else
        snprintf(out, n, "%s", reduce);
}
