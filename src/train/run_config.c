/* A run's configuration: the options, and what a checkpoint and a data file
 * fix of it. */
#include <stddef.h>
#include <stdio.h>

#include "io/checkpoint.h"
#include "io/text_quote.h"
#include "train/run.h"

/* A checkpoint fixes the model (--load) or the model, problem and training
 * (--resume): a knob given on the command line must agree with it, the
 * others are taken from it. */
static tf_status merge_stored(tf_config *c, const tf_config *st, unsigned set, int resume,
                              char *err, size_t errlen) {
    static const struct {
        unsigned bit;
        const char *flag;
        size_t off;
        int model; /* 1: part of the model (also fixed by --load) */
    } knobs[] = {
        {TF_SET_BATCH, "--batch-size", offsetof(tf_config, batch), 0},
        {TF_SET_SEQ_LEN, "--seq-len", offsetof(tf_config, seq_len), 0},
        {TF_SET_N_SEQS, "--num-seqs", offsetof(tf_config, n_seqs), 0},
        {TF_SET_BLOCKS, "--num-blocks", offsetof(tf_config, n_blocks), 1},
        {TF_SET_MSA_DIM, "--msa-dim", offsetof(tf_config, msa_dim), 1},
        {TF_SET_PAIR_DIM, "--pair-dim", offsetof(tf_config, pair_dim), 1},
    };
    const char *how = resume ? "--resume: the checkpoint was trained with"
                             : "--load: the checkpoint holds a model with";
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        int mine = *(const int *)((const char *)c + knobs[i].off);
        int theirs = *(const int *)((const char *)st + knobs[i].off);
        if ((resume || knobs[i].model) && (set & knobs[i].bit) && mine != theirs) {
            snprintf(err, errlen, "%s: '%d' is not accepted with %s %d", knobs[i].flag, mine, how,
                     theirs);
            return TF_ERR_USAGE;
        }
    }
    if (!resume) {
        c->n_blocks = st->n_blocks;
        c->msa_dim = st->msa_dim;
        c->pair_dim = st->pair_dim;
        c->n_heads_msa = st->n_heads_msa;
        c->n_heads_pair = st->n_heads_pair;
        c->outer_dim = st->outer_dim;
        c->vocab = st->vocab;
        c->pair_input_dim = st->pair_input_dim;
        return TF_OK;
    }
    if ((set & TF_SET_LR) && c->learning_rate != st->learning_rate) {
        snprintf(err, errlen, "--learning-rate: '%g' is not accepted with %s %g",
                 (double)c->learning_rate, how, (double)st->learning_rate);
        return TF_ERR_USAGE;
    }
    if ((set & TF_SET_SEED) && c->seed != st->seed) {
        snprintf(err, errlen, "--seed: '%llu' is not accepted with %s %llu",
                 (unsigned long long)c->seed, how, (unsigned long long)st->seed);
        return TF_ERR_USAGE;
    }
    if ((set & TF_SET_WARMUP) && c->warmup_steps > 0) {
        snprintf(err, errlen,
                 "--warmup-steps: '%d' is not accepted with --resume: a resumed run takes "
                 "no warm-up (it continues bit for bit)",
                 c->warmup_steps);
        return TF_ERR_USAGE;
    }
    /* Model and problem from the file; how and how long to run from the command line. */
    tf_config run = *c;
    *c = *st;
    c->num_steps = run.num_steps;
    c->warmup_steps = 0;
    c->impl = run.impl;
    c->fusion = run.fusion;
    c->backend = run.backend;
    c->device = run.device;
    c->threads = run.threads;
    c->precision = run.precision;
    c->graph = run.graph;
    return TF_OK;
}

/* The checkpoint's config, read first: a wrong file fails before any work. */
static tf_status from_checkpoint(tf_run *r, char *err, size_t errlen) {
    const tf_run_opts *o = &r->o;
    const char *ck = o->resume_path ? o->resume_path : o->load_path;
    const char *flag = o->resume_path ? "--resume" : "--load";
    char why[2 * 4096 + 512];
    tf_config stored;
    long gs = 0;
    /* before its config is merged: a file without the run's state (a
     * state_dict of weights, a model file without its optimizer file) has
     * no problem or training to take */
    tf_status s = o->resume_path ? tf_checkpoint_check_resumable(ck, why, sizeof why) : TF_OK;
    if (s == TF_OK) s = tf_checkpoint_peek_config(ck, &stored, &gs, why, sizeof why);
    if (s != TF_OK) {
        snprintf(err, errlen, "%s: %s", flag, why);
        return TF_ERR_USAGE;
    }
    s = merge_stored(&r->c, &stored, o->set, o->resume_path != NULL, err, errlen);
    if (s != TF_OK) return s;
    /* every checkpoint the run saves must be one it could resume */
    long room = TF_CKPT_STEP_MAX - (o->resume_path ? gs : 0);
    if (room < (long)r->c.warmup_steps + r->c.num_steps) {
        char q[64];
        tf_text_quote(q, sizeof q, ck);
        snprintf(err, errlen,
                 "--num-steps: '%d' is not accepted with --resume '%s' at global step %ld: a "
                 "checkpoint's global step is at most %lld, so at most %ld more step%s can be "
                 "taken",
                 r->c.num_steps, q, gs, TF_CKPT_STEP_MAX, room, room == 1 ? "" : "s");
        return TF_ERR_USAGE;
    }
    return TF_OK;
}

/* --data: the file's N and S are the problem's (a knob given must agree). */
static tf_status from_datafile(tf_run *r, char *err, size_t errlen) {
    const tf_run_opts *o = &r->o;
    tf_config *c = &r->c;
    char why[2 * 4096 + 512];
    if (tf_datafile_open(o->data_path, &r->df, why, sizeof why) != TF_OK) {
        snprintf(err, errlen, "--data: %s", why);
        return TF_ERR_USAGE;
    }
    const int S = tf_datafile_S(r->df), N = tf_datafile_N(r->df);
    const int resumed = o->resume_path != NULL;
    const int fixed_n = resumed || (o->set & TF_SET_SEQ_LEN);
    const int fixed_s = resumed || (o->set & TF_SET_N_SEQS);
    if ((fixed_n && N != c->seq_len) || (fixed_s && S != c->n_seqs)) {
        char q[64];
        tf_text_quote(q, sizeof q, o->data_path);
        snprintf(err, errlen,
                 "--data: '%s' is not accepted: its samples have --seq-len %d --num-seqs %d, "
                 "the run has %d and %d",
                 q, N, S, c->seq_len, c->n_seqs);
        return TF_ERR_USAGE;
    }
    c->seq_len = N;
    c->n_seqs = S;
    return TF_OK;
}

tf_status tf_run_configure(tf_run *r, char *err, size_t errlen) {
    err[0] = '\0';
    r->c = r->o.cfg;
    tf_status s = TF_OK;
    if (r->o.resume_path || r->o.load_path) s = from_checkpoint(r, err, errlen);
    if (s == TF_OK && r->o.data_path) s = from_datafile(r, err, errlen);
    if (s == TF_OK && tf_config_validate(&r->c, err, errlen) != TF_OK) s = TF_ERR_USAGE;
    return s;
}
