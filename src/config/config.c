/* Configuration defaults, level -> fusion mapping, and validation.
 *
 * Validation messages name the CLI flag of a field where it has one, so the
 * CLI can print them as they are ("tinyfold: " + message); fields without a
 * flag are named as in tf_config. The ranges live in config/limits.h, shared with
 * the parser and the help text. */
#include "tinyfold.h"

#include "config/config.h"
#include "config/limits.h"
#include "backend/registry.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* The fastest correct level: the default of --impl. One constant, so the lead
 * can change it in one place once the levels have been measured. */
#define TF_DEFAULT_IMPL TF_IMPL_V3

void tf_config_default(tf_config *c)
{
    *c = (tf_config){0};
    c->msa_dim = 64;
    c->pair_dim = 128;
    c->n_blocks = 4;
    c->n_heads_msa = 4;
    c->n_heads_pair = 4;
    c->outer_dim = 32;
    c->vocab = 21;
    c->pair_input_dim = 65;
    c->batch = 4;
    c->seq_len = 64;
    c->n_seqs = 16;
    c->num_steps = 30;
    c->warmup_steps = 5;
    c->learning_rate = 3e-4f;
    c->seed = 42;
    c->impl = TF_DEFAULT_IMPL;
    c->fusion = tf_fusion_for_impl(TF_DEFAULT_IMPL);
    c->backend = TF_BACKEND_AUTO;
    c->device = 0;
    c->threads = 0;
    c->precision = TF_PREC_FP32;
    c->graph = 0;
    c->recompute = TF_RECOMPUTE_NONE;
    c->chunk_size = 0;
}

tf_fusion tf_fusion_for_impl(tf_impl impl)
{
    int on = impl != TF_IMPL_V1; /* v2 and v3 fuse everything; v1 nothing */
    return (tf_fusion){.qkv_msa = on, .qkv_triangle = on, .flash = on, .triangle = on};
}

static tf_status fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return TF_ERR_USAGE;
}

/* An integer field in [lo, hi]; name is the flag or field name. */
static int bad_int(const char *name, long v, long lo, long hi, char *err, size_t errlen)
{
    if (v >= lo && v <= hi)
        return 0;
    fail(err, errlen, "%s: '%ld' is not accepted: expected an integer in [%ld, %ld]", name, v, lo,
         hi);
    return 1;
}

static int bad_flag01(const char *name, int v, char *err, size_t errlen)
{
    if (v == 0 || v == 1)
        return 0;
    fail(err, errlen, "%s: '%d' is not accepted: expected 0 or 1", name, v);
    return 1;
}

tf_status tf_config_validate(const tf_config *c, char *err, size_t errlen)
{
    tf_backend_opts bo;
    return tf_config_check(c, &bo, err, errlen);
}

tf_status tf_config_check(const tf_config *c, tf_backend_opts *bo, char *err, size_t errlen)
{
    if (!c)
        return fail(err, errlen, "config: NULL is not accepted");
    if (err && errlen)
        err[0] = '\0';

    /* Single fields, in the order of --help. */
    if (tf_backend_opts_from_config(bo, c, err, errlen))
        return TF_ERR_USAGE;
    if (bo->gpu_plan.lane == TF_GPU_LANE_ON && c->recompute != TF_RECOMPUTE_NONE)
        return fail(err, errlen,
                    "--gpu-plan: 'lane=on' is not accepted with --recompute %s: a "
                    "recomputing run does without the weight-gradient lane (expected "
                    "lane=auto or lane=off)",
                    c->recompute == TF_RECOMPUTE_BLOCKS ? "blocks" : "modules");
    if (bad_int("--batch-size", c->batch, 1, TF_LIM_BATCH_MAX, err, errlen) ||
        bad_int("--seq-len", c->seq_len, 1, TF_LIM_SEQ_LEN_MAX, err, errlen) ||
        bad_int("--num-seqs", c->n_seqs, 1, TF_LIM_N_SEQS_MAX, err, errlen) ||
        bad_int("--num-blocks", c->n_blocks, 1, TF_LIM_BLOCKS_MAX, err, errlen) ||
        bad_int("--num-steps", c->num_steps, 1, TF_LIM_STEPS_MAX, err, errlen) ||
        bad_int("--warmup-steps", c->warmup_steps, 0, TF_LIM_WARMUP_MAX, err, errlen) ||
        bad_int("n_heads_msa", c->n_heads_msa, 1, TF_LIM_HEADS_MAX, err, errlen) ||
        bad_int("n_heads_pair", c->n_heads_pair, 1, TF_LIM_HEADS_MAX, err, errlen) ||
        bad_int("--msa-dim", c->msa_dim, 1, TF_LIM_DIM_MAX, err, errlen) ||
        bad_int("--pair-dim", c->pair_dim, 1, TF_LIM_DIM_MAX, err, errlen) ||
        bad_int("outer_dim", c->outer_dim, 1, TF_LIM_OUTER_MAX, err, errlen) ||
        bad_int("vocab", c->vocab, TF_LIM_VOCAB_MIN, TF_LIM_VOCAB_MAX, err, errlen) ||
        bad_int("pair_input_dim", c->pair_input_dim, TF_LIM_PAIR_INPUT, TF_LIM_PAIR_INPUT, err,
                errlen) ||
        bad_int("--device", c->device, 0, TF_LIM_DEVICE_MAX, err, errlen) ||
        bad_int("--threads", c->threads, 0, TF_LIM_THREADS_MAX, err, errlen))
        return TF_ERR_USAGE;

    /* !(x > 0) also catches NaN. */
    if (!(c->learning_rate > 0.0f) || !isfinite(c->learning_rate) ||
        c->learning_rate > TF_LIM_LR_MAX)
        return fail(err, errlen,
                    "--learning-rate: '%g' is not accepted: expected a number in (0, %g]",
                    (double)c->learning_rate, TF_LIM_LR_MAX);

    if (c->impl != TF_IMPL_V1 && c->impl != TF_IMPL_V2 && c->impl != TF_IMPL_V3)
        return fail(err, errlen, "--impl: '%d' is not accepted: expected v1, v2 or v3",
                    (int)c->impl);
    if (!tf_backend_find(c->backend) && c->backend != TF_BACKEND_AUTO) {
        char names[128];
        tf_backend_names(names, sizeof names);
        return fail(err, errlen, "--backend: '%d' is not accepted: expected %s", (int)c->backend,
                    names);
    }
    if ((unsigned)c->precision >= TF_PREC_COUNT)
        return fail(err, errlen,
                    "--precision: '%d' is not accepted: expected fp32, tf32, bf16 or fp16",
                    (int)c->precision);
    if (bad_flag01("--graph", c->graph, err, errlen) ||
        bad_flag01("fusion.qkv_msa", c->fusion.qkv_msa, err, errlen) ||
        bad_flag01("fusion.qkv_triangle", c->fusion.qkv_triangle, err, errlen) ||
        bad_flag01("fusion.flash", c->fusion.flash, err, errlen) ||
        bad_flag01("fusion.triangle", c->fusion.triangle, err, errlen))
        return TF_ERR_USAGE;

    if (c->recompute != TF_RECOMPUTE_NONE && c->recompute != TF_RECOMPUTE_BLOCKS &&
        c->recompute != TF_RECOMPUTE_MODULES)
        return fail(err, errlen,
                    "--recompute: '%d' is not accepted: expected none, blocks or modules",
                    (int)c->recompute);

    /* Cross-field rules. */
    if (c->chunk_size < 0 || c->chunk_size > c->seq_len)
        return fail(err, errlen,
                    "--chunk-size: '%d' is not accepted: expected 1..%d (at most --seq-len)",
                    c->chunk_size, c->seq_len);
    if (c->msa_dim % c->n_heads_msa != 0)
        return fail(err, errlen,
                    "--msa-dim: '%d' is not accepted: expected a multiple of the MSA head count "
                    "(%d) in [%d, %d]",
                    c->msa_dim, c->n_heads_msa, c->n_heads_msa, TF_LIM_DIM_MAX);
    if (c->pair_dim % c->n_heads_pair != 0)
        return fail(err, errlen,
                    "--pair-dim: '%d' is not accepted: expected a multiple of the pair head count "
                    "(%d) in [%d, %d]",
                    c->pair_dim, c->n_heads_pair, c->n_heads_pair, TF_LIM_DIM_MAX);
    /* GEMM row counts are ints (backend/ops.h): the pair stack has B*N*N rows,
     * the MSA stack B*S*N. */
    long long rows_pair = (long long)c->batch * c->seq_len * c->seq_len;
    long long rows_msa = (long long)c->batch * c->n_seqs * c->seq_len;
    if (rows_pair > TF_LIM_ROWS_MAX)
        return fail(err, errlen,
                    "--seq-len: '%d' is not accepted with --batch-size %d: batch * seq_len^2 = "
                    "%lld exceeds %ld (GEMM rows are 32-bit)",
                    c->seq_len, c->batch, rows_pair, TF_LIM_ROWS_MAX);
    if (rows_msa > TF_LIM_ROWS_MAX)
        return fail(err, errlen,
                    "--num-seqs: '%d' is not accepted with --batch-size %d --seq-len %d: "
                    "batch * num_seqs * seq_len = %lld exceeds %ld (GEMM rows are 32-bit)",
                    c->n_seqs, c->batch, c->seq_len, rows_msa, TF_LIM_ROWS_MAX);
    /* TF32 and graphs are CUDA features; with auto the CLI drops them with a
     * note when it lands on the CPU. */
    if (c->backend == TF_BACKEND_CPU && c->precision == TF_PREC_TF32)
        return fail(err, errlen,
                    "--precision: 'tf32' is not accepted with --backend cpu: TF32 is a CUDA "
                    "tensor-core mode (expected fp32, bf16 or fp16)");
    if (c->backend == TF_BACKEND_CPU && c->graph)
        return fail(err, errlen,
                    "--graph: not accepted with --backend cpu: graph capture is a CUDA feature");
    return TF_OK;
}

const char *tf_precision_name(tf_precision p) {
    static const char *names[TF_PREC_COUNT] = {"fp32", "tf32", "bf16", "fp16"};
    return (unsigned)p < TF_PREC_COUNT ? names[p] : "?";
}
