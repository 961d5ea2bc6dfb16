/* The ranks of a data parallel run: what they must agree on before the
 * trainer. */
#include <stdio.h>
#include <string.h>

#include "backend/registry.h"
#include "train/run.h"

/* The backends this binary has, a bit a registry row: ranks of builds with
 * different GPU backends (or none) must not pair up. */
static long long built_rows(void) {
    long long m = 0;
    for (size_t i = 0; tf_backend_at(i); i++)
        if (tf_backend_at(i)->built()) m |= 1ll << i;
    return m;
}

/* What every rank must agree on: the model, the problem, the training, the
 * level and the build (FNV-1a over the fields, not the struct's padding).
 * The device and the thread count may differ. */
static uint64_t config_hash(const tf_config *c, const tf_run_opts *o) {
    uint64_t h = 1469598103934665603ull;
    const long long v[] = {c->msa_dim,
                           c->pair_dim,
                           c->n_blocks,
                           c->n_heads_msa,
                           c->n_heads_pair,
                           c->outer_dim,
                           c->vocab,
                           c->pair_input_dim,
                           c->batch,
                           c->seq_len,
                           c->n_seqs,
                           c->num_steps,
                           c->warmup_steps,
                           (long long)c->seed,
                           c->impl,
                           c->fusion.qkv_msa,
                           c->fusion.qkv_triangle,
                           c->fusion.flash,
                           c->fusion.triangle,
                           c->backend,
                           c->precision,
                           c->graph,
                           o->save_every,
                           o->dist_check_every,
                           o->dist_bucket_kb,
                           o->resume_path != NULL,
                           o->load_path != NULL,
                           o->data_path != NULL,
                           (long long)sizeof *c,
                           built_rows()};
    uint32_t lr;
    memcpy(&lr, &c->learning_rate, sizeof lr);
    for (size_t i = 0; i <= sizeof v / sizeof v[0]; i++) {
        uint64_t x = i < sizeof v / sizeof v[0] ? (uint64_t)v[i] : lr;
        for (int b = 0; b < 8; b++)
            h = (h ^ ((x >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    for (const char *p = TF_VERSION; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* Several ranks: the same command everywhere, a batch that splits evenly,
 * the synthetic data, one device per rank. Rank 0 tells. */
static tf_status check_several(tf_run *r, char *err, size_t errlen) {
    tf_dist *d = &r->dist;
    tf_config *c = &r->c;
    const int tell = d->rank == 0, cuda = c->backend == TF_BACKEND_CUDA;
    if (!tf_dist_same_u64(d, config_hash(c, &r->o))) {
        if (tell)
            snprintf(err, errlen,
                     "the %d ranks were started with different configurations (seed, sizes, "
                     "steps, level, files or build): every rank must run the same command and "
                     "binary",
                     d->size);
        return TF_ERR_USAGE;
    }
    if (c->batch % d->size) {
        if (tell)
            snprintf(err, errlen,
                     "--batch-size: '%d' is not accepted with %d ranks: the global batch is "
                     "split evenly, so it must be a multiple of %d",
                     c->batch, d->size, d->size);
        return TF_ERR_USAGE;
    }
    if (r->o.data_path) {
        if (tell)
            snprintf(err, errlen,
                     "--data: not accepted with %d ranks (data parallel runs draw the synthetic "
                     "data); run one process",
                     d->size);
        return TF_ERR_USAGE;
    }
    if (cuda && !(r->o.set & TF_SET_DEVICE))
        c->device = d->local_rank; /* one device per rank of the node */
    if (cuda && !tf_dist_devices_distinct(d, c->device)) {
        if (tell)
            snprintf(err, errlen,
                     "--device: two ranks of one node would share a GPU (%d ranks on the node): "
                     "run one rank per device, without --device",
                     d->local_size);
        return TF_ERR_USAGE;
    }
    return TF_OK;
}

tf_status tf_run_check_ranks(tf_run *r, char *err, size_t errlen) {
    tf_dist *d = &r->dist;
    const int cuda = r->c.backend == TF_BACKEND_CUDA;
    err[0] = '\0';
    if (d->size > 1) {
        tf_status s = check_several(r, err, errlen);
        if (s != TF_OK) return s;
    }
#ifdef TF_HAVE_NCCL
    /* under a launcher, even one rank reduces through NCCL (a check of the path) */
    char why[512];
    if (cuda && d->launched && tf_dist_nccl_init(d, r->c.device, why, sizeof why)) {
        snprintf(err, errlen, "%s", why);
        return TF_ERR_DEVICE;
    }
#endif
    if (cuda && d->size > 1 && !d->nccl) {
        if (d->rank == 0)
            snprintf(err, errlen,
                     "--backend cuda: %d ranks need NCCL and this build has none; use --backend "
                     "cpu or one process",
                     d->size);
        return TF_ERR_USAGE;
    }
    return TF_OK;
}
