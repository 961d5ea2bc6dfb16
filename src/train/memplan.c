/* Choosing --recompute and --chunk-size from the dry-run plan. Each
 * candidate is planned by tf_trainer_plan (the same forward and backward the
 * trainer runs, no op executed), so every figure here is the one a run would
 * allocate. */
#include "train/memplan.h"

#include <stdio.h>

static const char *const mode_names[] = {"none", "blocks", "modules"};
enum { N_CAND_MAX = 3 + 2 * 7 };

/* The settings in the order of their step time: none, blocks, modules, then
 * modules with chunks of K = the powers of two below N down to N / 64, the
 * largest first (more chunks, more ops; at most 64 chunks per sample keep
 * the plans quick), then blocks with them (less memory: the block's forward
 * again keeps nothing of the chunked modules, which then run their forward
 * once more in their backward). A chunk size the caller gave stays: the
 * three modes with it. */
static int candidates(const tf_config *c, tf_config *out) {
    int n = 0;
    for (int m = 0; m < 3; m++) {
        out[n] = *c;
        out[n++].recompute = (tf_recompute)m;
    }
    if (c->chunk_size) return n;
    int top = 1;
    while (2 * top < c->seq_len) top *= 2;
    for (int m = TF_RECOMPUTE_MODULES; m >= TF_RECOMPUTE_BLOCKS; m--)
        for (int k = top; k >= 1 && k < c->seq_len && 64 * k >= c->seq_len && n < N_CAND_MAX;
             k /= 2) {
            out[n] = *c;
            out[n].recompute = (tf_recompute)m;
            out[n++].chunk_size = k;
        }
    return n;
}

const char *tf_memplan_setting(char *buf, size_t n, const tf_config *c) {
    if (c->chunk_size)
        snprintf(buf, n, "--recompute %s --chunk-size %d", mode_names[c->recompute],
                 c->chunk_size);
    else
        snprintf(buf, n, "--recompute %s", mode_names[c->recompute]);
    return buf;
}

tf_status tf_memplan_choose(tf_config *c, double limit, size_t *bytes, char *err,
                            size_t errlen) {
    tf_config cand[N_CAND_MAX];
    const int n = candidates(c, cand);
    size_t least = 0;
    int least_i = 0;
    for (int i = 0; i < n; i++) {
        size_t b = 0;
        tf_status st = tf_trainer_plan(&cand[i], &b, err, errlen);
        if (st != TF_OK) return st;
        if ((double)b <= limit) {
            *c = cand[i];
            *bytes = b;
            return TF_OK;
        }
        if (i == 0 || b < least) least = b, least_i = i;
    }
    *c = cand[least_i];
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

static int same_setting(const tf_config *a, const tf_config *b) {
    return a->recompute == b->recompute && a->chunk_size == b->chunk_size;
}

void tf_memplan_suggest(const tf_config *c, double limit, char *out, size_t n) {
    static const char *reduce = "reduce --batch-size, --seq-len, --num-seqs or --num-blocks";
    tf_config x = *c;
    char err[256], f[32], s[64];
    size_t b = 0;
    if (limit < 0) { /* no limit known: the plans of the settings that keep less */
        tf_config cand[N_CAND_MAX];
        const int nc = candidates(c, cand);
        size_t at = 0;
        out[0] = '\0';
        for (int i = (int)c->recompute + 1; i < nc && at < n; i++) {
            /* the modes, then one chunk size: of the largest power of two <= N / 8 */
            if (cand[i].chunk_size && i + 1 < nc && cand[i].chunk_size > c->seq_len / 8) continue;
            if (tf_trainer_plan(&cand[i], &b, err, sizeof err) != TF_OK) break;
            at += (size_t)snprintf(out + at, n - at, "%s needs %s; ",
                                   tf_memplan_setting(s, sizeof s, &cand[i]),
                                   tf_memplan_fmt(f, sizeof f, (double)b));
            if (cand[i].chunk_size) break;
        }
        if (at < n) snprintf(out + at, n - at, "%s", reduce);
        return;
    }
    tf_status st = tf_memplan_choose(&x, limit, &b, err, sizeof err);
    if (st == TF_OK && !same_setting(&x, c))
        snprintf(out, n, "fits with %s: %s", tf_memplan_setting(s, sizeof s, &x),
                 tf_memplan_fmt(f, sizeof f, (double)b));
    else if (st == TF_ERR_NOMEM && !same_setting(&x, c))
        snprintf(out, n, "the least is %s with %s; %s", tf_memplan_fmt(f, sizeof f, (double)b),
                 tf_memplan_setting(s, sizeof s, &x), reduce);
    else
        snprintf(out, n, "%s", reduce);
}
