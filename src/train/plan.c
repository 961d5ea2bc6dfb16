/* The trainer's plan: which backend, the model's layout and composition on
 * it, and the arena's bytes from a dry run of the step. */
#include "train/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static tf_dtype act_type(tf_precision p) {
    return p == TF_PREC_BF16 ? TF_BF16 : p == TF_PREC_FP16 ? TF_F16 : TF_F32;
}

/* The model's composition on this backend (exec.h) from its preferences;
 * levels 1-2 stay the reference composition. --recompute asks for memory
 * before time, so it runs without the weight-gradient lane: the lane's
 * workspaces (caps.wgrad_lane_bytes) and the second slot of backward
 * temporaries (exec.h bwd_slot, the largest module's recomputed forward and
 * backward) are a large share of what a recomputed step keeps. */
static void compose(tf_plan *p) {
    const tf_backend_caps *k = &p->caps;
    const int v3 = p->cfg.impl >= TF_IMPL_V3;
    p->ex.opm_weight_first = v3 && k->opm_weight_first;
    p->ex.opm_bwd_op = v3 && k->opm_bwd_op;
    p->ex.opm_outer_op = v3 && k->opm_outer_op;
    p->ex.trimul_merged = v3 && k->trimul_merged;
    p->ex.transition_op = v3 && (k->transition_op >> p->at & 1u);
    p->ex.trimul_proj_op = v3 && (k->trimul_proj_op >> p->at & 1u);
    p->ex.opm_fused_max_s = v3 && (k->opm_fused_op >> p->at & 1u) ? k->opm_fused_max_s : 0;
    p->ex.wgrad_async = v3 && k->wgrad_lane && p->ops->wgrad_enable != NULL &&
                        p->cfg.recompute == TF_RECOMPUTE_NONE;
    /* the same bits as converting the stream gradients: at every level */
    p->ex.stream_copies = k->ln_stream_copy;
}

/* The widest attention head of the problem against the backend's kernels. */
static tf_status check_heads(const tf_plan *p, char *err, size_t errlen) {
    const tf_config *c = &p->cfg;
    const int lim = p->caps.max_head_dim;
    const int dm = c->msa_dim / c->n_heads_msa, dz = c->pair_dim / c->n_heads_pair;
    if (!lim || (dm <= lim && dz <= lim)) return TF_OK;
    const int msa = dm > lim;
    snprintf(err, errlen,
             "%s: '%d' is not accepted with --backend %s: head size %d exceeds %d "
             "(expected at most %d)",
             msa ? "--msa-dim" : "--pair-dim", msa ? c->msa_dim : c->pair_dim, p->caps.name,
             msa ? dm : dz, lim, lim * (msa ? c->n_heads_msa : c->n_heads_pair));
    return TF_ERR_USAGE;
}

static tf_status check_precision(const tf_plan *p, char *err, size_t errlen) {
    if (p->at == TF_F32 || (p->caps.act_types & (1u << p->at))) return TF_OK; /* fp32: all */
    snprintf(err, errlen,
             "--precision: '%s' is not accepted with --backend %s: its ops do not take %s "
             "activations on this build and device (expected fp32%s)",
             tf_precision_name(p->cfg.precision), p->caps.name, tf_dtype_name(p->at),
             p->caps.device_memory ? " or tf32" : "");
    return TF_ERR_USAGE;
}

/* The step's forward and backward without executing ops: the arena's
 * high-water mark, and what each backward stage writes into the gradients,
 * recorded against a fake address far above the arena's fake ones (never
 * dereferenced). */
static size_t plan_arena(tf_plan *p) {
    tf_exec *ex = &p->ex;
    ex->planning = 1;
    ex->at = p->at;
    p->M.c = &p->cfg;
    p->M.grads = (float *)((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 2));
    ex->grad_base = p->M.grads;
    ex->grad_n = p->nparams;
    ex->grad_hi = p->grad_hi;
    ex->grad_stages = p->grad_hi ? p->nstages : 0;
    tf_model_forward(ex, &p->M);
    tf_model_backward(ex, &p->M);
    if (ex->wgrad_async && ex->bwd_slot_need) {
        /* again with the two slots the first pass measured (exec.h bwd_slot) */
        ex->bwd_slot = ex->bwd_slot_need;
        p->arena.peak = 0;
        tf_model_forward(ex, &p->M);
        tf_model_backward(ex, &p->M);
    }
    ex->planning = 0;
    ex->grad_hi = NULL;
    p->M.grads = NULL;
    return p->arena.peak;
}

tf_status tf_plan_open(tf_plan *p, const tf_config *c, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    tf_backend_opts bo;
    tf_status st = tf_config_check(c, &bo, err, errlen);
    if (st != TF_OK) return st;
    tf_backend_kind kind = c->backend;
    tf_backend *be = NULL;
    const tf_ops *ops = NULL;
    tf_backend_caps caps;
    if (tf_backend_create(&kind, &bo, &be, &ops, &caps, err, errlen)) return TF_ERR_DEVICE;
    tf_config cb = *c;
    cb.backend = kind;
    return tf_plan_build(p, &cb, be, ops, &caps, err, errlen);
}

tf_status tf_plan_build(tf_plan *p, const tf_config *c, tf_backend *be, const tf_ops *ops,
                        const tf_backend_caps *caps, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->be = be;
    p->ops = ops;
    p->caps = *caps;
    p->at = act_type(c->precision);
    tf_status st = check_heads(p, err, errlen);
    if (st == TF_OK) st = check_precision(p, err, errlen);
    if (st != TF_OK) return st;

    p->ntensors = tf_param_count_tensors(c);
    p->nparams = tf_param_count_floats(c);
    p->table = calloc(p->ntensors, sizeof *p->table);
    p->M.off.blk = calloc((size_t)c->n_blocks, sizeof(tf_block_off));
    p->M.acts = calloc((size_t)c->n_blocks, sizeof(tf_block_act));
    if (!p->table || !p->M.off.blk || !p->M.acts) {
        if (err && errlen) snprintf(err, errlen, "out of host memory creating the trainer");
        return TF_ERR_NOMEM;
    }
    tf_param_table(c, p->table);
    tf_model_offsets(c, p->table, &p->M.off);
    p->nstages = tf_bwd_stages(c->n_blocks);
    p->grad_hi = calloc((size_t)p->nstages, sizeof *p->grad_hi); /* NULL: one bucket */

    p->ex.ops = ops;
    p->ex.be = be;
    p->ex.arena = &p->arena;
    p->ex.fu = c->fusion;
    p->ex.level = (int)c->impl;
    compose(p);
    p->ex.recompute = (int)c->recompute;
    p->ex.chunk = c->chunk_size;
    if (p->ex.wgrad_async && ops->wgrad_enable(be)) {
        snprintf(err, errlen,
                 "not enough device memory for the weight-gradient lane's workspaces (%.0f MiB)",
                 (double)p->caps.wgrad_lane_bytes / (1 << 20));
        return TF_ERR_NOMEM;
    }
    p->arena_bytes = plan_arena(p);
    const size_t B = (size_t)c->batch, S = (size_t)c->n_seqs, N = (size_t)c->seq_len;
    p->param_bytes = p->nparams * sizeof(float);
    p->half_bytes = p->at == TF_F32 ? 0 : p->nparams * tf_dtype_size(p->at);
    p->batch_bytes = B * S * N * 4 + B * N * N * (65 + 3) * 4;
    return TF_OK;
}

size_t tf_plan_need(const tf_plan *p) {
    return 4 * p->param_bytes + p->half_bytes + p->arena_bytes + p->batch_bytes;
}

void tf_plan_close(tf_plan *p) {
    if (p->be) {
        p->ops->sync(p->be);
        p->ops->destroy(p->be);
    }
    free(p->table);
    free(p->grad_hi);
    free(p->M.off.blk);
    free(p->M.acts);
    memset(p, 0, sizeof *p);
}

tf_status tf_trainer_plan(const tf_config *c, size_t *bytes, char *err, size_t errlen) {
    tf_plan p;
    tf_status st = tf_plan_open(&p, c, err, errlen);
    /* on the CPU the host batch too */
    if (st == TF_OK) *bytes = tf_plan_need(&p) + (p.caps.device_memory ? 0 : p.batch_bytes);
    tf_plan_close(&p);
    return st;
}
