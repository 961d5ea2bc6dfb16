/* tinyfold: TinyOpenFold training in C. Public API.
 *
 * A trainer owns one model (parameters, gradients, Adam moments, activation
 * arena) on one backend (CPU or CUDA) at one implementation level. Errors are
 * values: functions return TF_OK or a status and fill a message buffer.
 */
#ifndef TINYFOLD_H
#define TINYFOLD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_VERSION "0.1.0"

typedef enum {
    TF_OK = 0,
    TF_ERR_USAGE = 2,    /* the user's input is wrong (bad flag, shape, file) */
    TF_ERR_NOMEM = 3,    /* not enough host or device memory */
    TF_ERR_DEVICE = 4,   /* backend unavailable (no CUDA device, driver) */
    TF_ERR_NONFINITE = 5,/* loss became NaN/Inf */
    TF_ERR_IO = 6,       /* file could not be read or written */
    TF_ERR_INTERNAL = 7  /* a bug or library failure */
} tf_status;

typedef enum { TF_IMPL_V1 = 1, TF_IMPL_V2 = 2, TF_IMPL_V3 = 3 } tf_impl;
/* HIP: the GPU backend built with hipcc for AMD GPUs (the same code as CUDA's) */
typedef enum {
    TF_BACKEND_CPU = 0,
    TF_BACKEND_CUDA = 1,
    TF_BACKEND_AUTO = 2,
    TF_BACKEND_HIP = 3
} tf_backend_kind;
/* fp32: fp32 everywhere. tf32: fp32 tensors, GEMMs on TF32 tensor cores (CUDA).
 * bf16, fp16: mixed precision. Parameters, their gradients and the AdamW
 * moments stay fp32 (master weights, with a half copy of the weights for the
 * GEMMs); activations are stored in the half type; the residual streams, the
 * statistics and the loss stay fp32; every op computes and accumulates in
 * fp32. fp16 scales the loss dynamically (PyTorch GradScaler's defaults,
 * src/train/loss_scale.h): what the reference's --use-amp does. */
typedef enum {
    TF_PREC_FP32 = 0,
    TF_PREC_TF32 = 1,
    TF_PREC_BF16 = 2,
    TF_PREC_FP16 = 3
} tf_precision;
#define TF_PREC_COUNT 4
/* "fp32", "tf32", "bf16", "fp16" */
const char *tf_precision_name(tf_precision p);
/* What the forward keeps for the backward (--recompute): everything; each
 * Evoformer block's inputs (the block's forward runs again inside its
 * backward); or each module's input (each module's forward runs again inside
 * its backward: the same extra forward, less memory). */
typedef enum {
    TF_RECOMPUTE_NONE = 0,
    TF_RECOMPUTE_BLOCKS = 1,
    TF_RECOMPUTE_MODULES = 2
} tf_recompute;

/* The reference's fusion switches (tiny_openfold_v2.py). v1 = all off,
 * v2 = all on, v3 = all on plus the custom-kernel level. */
typedef struct {
    int qkv_msa;      /* Q,K,V of MSA row/column attention in one GEMM */
    int qkv_triangle; /* Q,K,V of triangle attention in one GEMM */
    int flash;        /* streaming attention: N x N scores never stored */
    int triangle;     /* triangle mult: left/right projections in one GEMM, gates in one */
} tf_fusion;

typedef struct {
    /* model (docs/model.md, section 1) */
    int msa_dim, pair_dim, n_blocks, n_heads_msa, n_heads_pair, outer_dim;
    int vocab, pair_input_dim;
    /* problem */
    int batch, seq_len, n_seqs;
    /* training */
    int num_steps, warmup_steps;
    float learning_rate;
    uint64_t seed;
    /* implementation */
    tf_impl impl;
    tf_fusion fusion;
    tf_backend_kind backend;
    int device;
    int threads;          /* CPU threads; 0 = all cores */
    tf_precision precision;
    int graph;            /* CUDA: capture the whole step as a graph after warm-up */
    char gpu_plan[96];    /* CUDA: --gpu-plan SPEC (src/backend/gpu_plan.h); "" = default */
    /* memory (src/model/model.c block_fwd, src/model/chunk.c) */
    tf_recompute recompute;
    int chunk_size;       /* --chunk-size K: the pair modules K rows at a time; 0 = off */
} tf_config;

/* Defaults of docs/model.md section 1 (small problem, v-level = fastest). */
void tf_config_default(tf_config *c);
/* Fusion flags implied by a level. */
tf_fusion tf_fusion_for_impl(tf_impl impl);
/* Validate every field; on error writes one line naming the field, value and
 * what is accepted, and returns TF_ERR_USAGE. */
tf_status tf_config_validate(const tf_config *c, char *err, size_t errlen);

/* Parameter table (docs/model.md section 3 order, PyTorch state_dict names). */
typedef struct {
    char name[96];
    int ndim;
    int shape[2];
    size_t offset; /* in floats, into the one parameter buffer */
    size_t count;
    int trainable; /* 0 for pair_norm_outer (never used: no grad, no update) */
} tf_param_info;

size_t tf_param_count_tensors(const tf_config *c);
size_t tf_param_count_floats(const tf_config *c);
/* Fills table (caller-provided, tf_param_count_tensors entries). */
void tf_param_table(const tf_config *c, tf_param_info *table);

/* Forward FLOPs of one step's forward pass (the training step is ~3x). */
double tf_flops_forward(const tf_config *c);

/* ---- trainer ---- */
typedef struct tf_trainer tf_trainer;
typedef struct tf_prof tf_prof;

typedef struct {
    float loss;
    double data_ms, forward_ms, backward_ms, optimizer_ms, step_ms;
    double comm_ms;     /* data parallel: in collectives (gradients, loss) */
    double exposed_comm_ms; /* of comm_ms: waited for after the backward's compute ended */
    int counter_replay; /* CUDA --counters replayed this step's kernels: not a timed step */
    /* fp16: the gradients overflowed at this step's loss scale, so the
     * optimizer skipped the step (parameters and moments unchanged) */
    int skipped;
    float loss_scale; /* the scale this step's loss was multiplied by (1 unless fp16) */
} tf_step_stats;

/* A batch on the host: tokens [B,S,N] int32, pair [B,N,N,65], target [B,N,N]. */
typedef struct {
    int B, S, N;
    int32_t *tokens;
    float *pair;
    float *target;
} tf_batch;

tf_status tf_trainer_create(tf_trainer **out, const tf_config *c, char *err, size_t errlen);
void tf_trainer_destroy(tf_trainer *t);
const tf_config *tf_trainer_config(const tf_trainer *t);
const char *tf_trainer_backend_name(const tf_trainer *t);
/* Attach a profiler (NULL detaches). */
void tf_trainer_set_prof(tf_trainer *t, tf_prof *p);

/* One training step on the synthetic batch of step index `step` (0-based, warm-up
 * steps included). Returns TF_ERR_NONFINITE when the loss is not finite. */
tf_status tf_trainer_step(tf_trainer *t, long step, tf_step_stats *st);
/* One training step on a given host batch. */
tf_status tf_trainer_step_batch(tf_trainer *t, const tf_batch *b, tf_step_stats *st);
/* Forward + backward on a host batch, no update, gradients left in the trainer
 * (zeroed first). loss and (optionally) pred [B*N*N] are written to the host. */
tf_status tf_trainer_grad(tf_trainer *t, const tf_batch *b, float *loss, float *pred);

/* Host copies of the whole buffers (tf_param_count_floats floats each). */
void tf_trainer_get_params(tf_trainer *t, float *host);
void tf_trainer_set_params(tf_trainer *t, const float *host);
void tf_trainer_get_grads(tf_trainer *t, float *host);
void tf_trainer_get_adam(tf_trainer *t, float *m_host, float *v_host, long *step);
void tf_trainer_set_adam(tf_trainer *t, const float *m_host, const float *v_host, long step);
/* fp16's dynamic loss scale (src/train/loss_scale.h): the scale, the clean
 * steps since it last changed, and the steps skipped so far; what a
 * checkpoint keeps so that a resumed run scales as the straight run would.
 * Other precisions: scale 1, nothing skipped. */
void tf_trainer_get_loss_scale(const tf_trainer *t, float *scale, long *clean_steps,
                               long *skipped);
void tf_trainer_set_loss_scale(tf_trainer *t, float scale, long clean_steps, long skipped);

/* Memory: bytes of the planned activation arena and the total the trainer holds
 * on its backend (params, grads, moments, arena, batch buffers, library workspaces). */
size_t tf_trainer_arena_bytes(const tf_trainer *t);
/* The arena's high-water mark in the steps run so far (equals
 * tf_trainer_arena_bytes after a step: the plan is exact). */
size_t tf_trainer_arena_peak(const tf_trainer *t);
/* The dry run alone: the bytes a trainer for c would hold on its backend
 * (parameters, gradients, moments, arena, batch; on the CPU the host batch
 * too), without allocating them. */
tf_status tf_trainer_plan(const tf_config *c, size_t *bytes, char *err, size_t errlen);
size_t tf_trainer_backend_bytes(const tf_trainer *t);
/* CUDA --graph: kernel nodes in the captured step (forward, backward and
 * optimizer graphs together; 0 before capture or without graphs). */
size_t tf_trainer_graph_kernels(const tf_trainer *t);

/* ---- synthetic data (docs/model.md, section 8) ---- */
#define TF_DATASET_SIZE 1000
/* Sample `index` of the virtual dataset, deterministic in (seed, index). */
void tf_data_sample(uint64_t seed, long index, int S, int N, int32_t *tokens, float *pair,
                    float *target);
/* The B distinct sample indices used at training step `step`. */
void tf_data_step_indices(uint64_t seed, long step, int B, long *idx);
/* Fill a host batch (allocated by the caller) for a training step. */
void tf_data_batch(uint64_t seed, long step, tf_batch *b);
/* Samples [first, first + b->B) of the global batch of B_global of a step:
 * one rank's share in a data parallel run (tf_data_batch is the whole). */
void tf_data_batch_slice(uint64_t seed, long step, int B_global, int first, tf_batch *b);

#ifdef __cplusplus
}
#endif
#endif
