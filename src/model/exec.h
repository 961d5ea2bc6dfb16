/* The execution context the model runs in, and thin wrappers over the op
 * table that (a) skip execution while the arena is being planned and (b) give
 * every op a stable kernel name for the profiler (one branch when it is off). */
#ifndef TF_MODEL_EXEC_H
#define TF_MODEL_EXEC_H

#include "backend/ops.h"
#include "model/arena.h"
#include "prof/prof.h"
#include "tinyfold.h"

typedef struct {
    const tf_ops *ops;
    tf_backend *be;
    tf_prof *prof;
    tf_arena *arena;
    int planning;   /* plan the arena: ops are not executed */
    tf_fusion fu;   /* which fusions are on */
    int level;      /* 1..3 (v3 uses the fused elementwise kernels) */
    /* v3 outer product mean composed weight-first (outer_product.c): fewer
     * FLOPs and no permute, but many small GEMMs; chosen where it is faster
     * (the CPU: -160 ms/step; on the H200 it was 3.8 vs 3.1 ms/step slower) */
    int opm_weight_first;
    /* v3 CUDA: the outer product mean's backward as one op (ops.h opm_bwd),
     * and in fp32 the triangle multiplication's projections and gates as one
     * GEMM (triangle_mult.c). Measured side by side on the H200 (RESULTS.md
     * entry 12): fp32 faster, 40 launches fewer and 57 / 226 MiB less memory;
     * tf32 3.8% / 4.6% slower with both (cuBLAS' TF32 GEMMs they replace are
     * already fast). Since opm_bwd_kernel3 (entry 14) the backward op gains
     * in tf32 too (+2.3% small, +0.6% large: TF_OPM_BWD_OP=0|1). The CPU's
     * v3 merges the triangle GEMMs too (its outer product mean is
     * weight-first). */
    int opm_bwd_op, trimul_merged;
    /* v3 CUDA: the outer product in its permuted form as one op (ops.h
     * opm_outer) instead of a GEMM and a permute (TF_OPM_OUTER_OP=0|1) */
    int opm_outer_op;
    /* v3: the triangle product channel-major (triangle_mult.c: no permute of
     * u; its GEMMs read u transposed), on every backend and precision. CUDA
     * fp32 kept [B, C, N, N] until the weight gradients moved to the wgmma
     * wide split (neutral then, RESULTS.md entry 13); since, on the H200:
     * small 438.8 -> 442.3 samples/s, large 131.1 -> 133.0, 552 -> 536
     * launches (entry 15). TF_TRIMUL_CMAJOR=0|1 overrides it (an A/B knob). */
    int trimul_cmajor;
    /* v3: a module's two LayerNorms in a row as one op (model.c tf_ln2_fwd);
     * TF_LAYERNORM2=0|1 overrides the default (an A/B knob) */
    int ln2;
    /* v3 CUDA: the weight gradients on a lane of their own (ops.h wgrad_*),
     * overlapping the rest of their module's backward. The modules wait for
     * them before anything overwrites what they read (tf_x_wgrad_wait) and at
     * every release of backward memory (tf_bwd_release). TF_WGRAD_LANE=0|1. */
    int wgrad_async;
    /* With the lane, the modules' backward temporaries alternate between two
     * slots of bwd_slot bytes (model.c module_begin), so that a module's
     * weight gradients may run on into the next module's backward: the wait
     * moves to the module after it, which reuses the slot. 0: off, each
     * module waits at its end. bwd_slot_need: the largest module's
     * temporaries, measured by the first planning pass. slot_ticket: the
     * lane's count when the slot's last module ended. TF_WGRAD_SLOTS=0|1. */
    int wgrad_slots;
    /* tf_recompute (model.c block_fwd): what the forward keeps for the backward */
    int recompute;
    size_t bwd_slot, bwd_slot_need, bwd_base, bwd_saved_peak;
    long slot_ticket[2];
    int bwd_module;
} tf_exec;

#define TF_EXEC_OP(ex, kname, call)                                                   \
    do {                                                                              \
        if (!(ex)->planning) {                                                        \
            tf_prof *p_ = (ex)->prof;                                                 \
            if (p_) tf_prof_op_begin(p_, kname);                                      \
            (ex)->ops->call;                                                          \
            if (p_) tf_prof_op_end(p_);                                               \
        }                                                                             \
    } while (0)

/* The weight-gradient lane (ops.h wgrad_*): how many weight gradients were
 * issued so far, and make the main queue wait for the first `upto` (< 0: all). */
static inline long tf_x_wgrad_mark(tf_exec *ex) {
    return ex->wgrad_async && !ex->planning ? ex->ops->wgrad_mark(ex->be) : 0;
}
static inline void tf_x_wgrad_wait(tf_exec *ex, long upto) {
    if (ex->wgrad_async && !ex->planning) ex->ops->wgrad_wait(ex->be, upto);
}
/* If a weight gradient was issued since wmark (= tf_x_wgrad_mark), the main
 * queue waits for it and, the lane running in order, every earlier one. */
static inline void tf_x_wgrad_join(tf_exec *ex, long wmark) {
    if (tf_x_wgrad_mark(ex) != wmark) tf_x_wgrad_wait(ex, -1);
}
/* Backward memory handed back to the arena (taken at mark, wmark then): the
 * next op may overwrite it, so a weight gradient issued since, which may read
 * it, is waited for first. */
static inline void tf_bwd_release(tf_exec *ex, size_t mark, long wmark) {
    /* with the slots (bwd_slot) a module's temporaries are not reused before
     * the module after next, which waits (model.c module_begin) */
    if (!ex->bwd_slot) tf_x_wgrad_join(ex, wmark);
    tf_arena_release(ex->arena, mark);
}

static inline void tf_rpush(tf_exec *ex, const char *name) {
    if (!ex->planning) tf_region_push(ex->prof, name);
}
static inline void tf_rpop(tf_exec *ex) {
    if (!ex->planning) tf_region_pop(ex->prof);
}
static inline float *tf_alloc_act(tf_exec *ex, size_t n) { return tf_arena_alloc(ex->arena, n); }

/* ---- linear layers (no bias; W is [out, in], y = x W^T) ---- */
void tf_linear_fwd(tf_exec *ex, float *y, const float *x, const float *W, long rows, int in,
                   int out, float beta, tf_epilogue epi);
/* y = x W^T + beta res (ops.h tf_gemm_args.R: no copy of res into y first) */
void tf_linear_fwd_res(tf_exec *ex, float *y, const float *x, const float *W, long rows, int in,
                       int out, float beta, tf_epilogue epi, const float *res);
/* dx (= or += when accumulate) dy W ; dW += dy^T x. dx may be NULL. */
void tf_linear_bwd(tf_exec *ex, float *dx, float *dW, const float *dy, const float *x,
                   const float *W, long rows, int in, int out, int accumulate);
/* the same with an epilogue on dx (TF_EPI_DRELU with aux: through a ReLU) */
void tf_linear_bwd_epi(tf_exec *ex, float *dx, float *dW, const float *dy, const float *x,
                       const float *W, long rows, int in, int out, int accumulate,
                       tf_epilogue epi, const float *aux);
void tf_gemm(tf_exec *ex, const tf_gemm_args *a, const char *name);
/* A strided-batched GEMM description (ops.h semantics), no epilogue. */
tf_gemm_args tf_gemm_make(int tA, int tB, int M, int N, int K, float alpha, float beta,
                          const float *A, long lda, long sA, const float *B, long ldb, long sB,
                          float *C, long ldc, long sC, int batch);

/* ---- other op wrappers ---- */
void tf_x_layernorm_fwd(tf_exec *ex, float *out, float *mean, float *rstd, const float *x,
                        const float *g, const float *b, long rows, int C);
void tf_x_layernorm_bwd(tf_exec *ex, float *dx, float *dg, float *db, const float *dout,
                        const float *x, const float *mean, const float *rstd, const float *g,
                        long rows, int C, int accumulate);
void tf_x_layernorm2_fwd(tf_exec *ex, float *out, float *stats, const float *x, const float *g1,
                         const float *b1, const float *g2, const float *b2, long rows, int C);
void tf_x_layernorm2_bwd(tf_exec *ex, float *dx, float *dg1, float *db1, float *dg2, float *db2,
                         const float *dout, const float *x, const float *stats, const float *g1,
                         const float *b1, const float *g2, long rows, int C, int accumulate);
void tf_x_permute(tf_exec *ex, float *out, const float *in, int rank, const int *dims,
                  const int *perm, int accumulate);
void tf_x_copy(tf_exec *ex, float *dst, const float *src, size_t n);
void tf_x_zero(tf_exec *ex, float *p, size_t n);
void tf_x_add(tf_exec *ex, float *y, const float *a, const float *b, long n);
void tf_x_mul(tf_exec *ex, float *y, const float *a, const float *b, long n);
void tf_x_scale(tf_exec *ex, float *y, const float *x, float alpha, long n);
void tf_x_act_fwd(tf_exec *ex, tf_act act, float *y, const float *x, long n);
void tf_x_act_bwd(tf_exec *ex, tf_act act, float *dx, const float *dy, const float *y, long n);
void tf_x_softmax_fwd(tf_exec *ex, float *y, const float *x, long rows, int cols);
void tf_x_softmax_bwd(tf_exec *ex, float *dx, const float *dy, const float *y, long rows,
                      int cols);
void tf_x_gate_fwd(tf_exec *ex, float *y, const float *a, const float *g, long n);
void tf_x_gate_bwd(tf_exec *ex, float *da, float *dg, const float *dy, const float *a,
                   const float *g, long n);
void tf_x_gate_residual_fwd(tf_exec *ex, float *out, const float *res, const float *a,
                            const float *g, long n);
void tf_x_gate_cmajor_fwd(tf_exec *ex, float *lr_t, const float *a, const float *g, long ld,
                          long rows, long inner, int C);
void tf_x_gate_cmajor_bwd(tf_exec *ex, float *da, float *dg, const float *dlr_t, const float *a,
                          const float *g, long ld, long rows, long inner, int C);
void tf_x_opm_outer(tf_exec *ex, float *outer_p, const float *a, int B, int S, int N, int co);
void tf_x_opm_bwd(tf_exec *ex, float *da, const float *dop, const float *a, int B, int S, int N,
                  int co);
void tf_x_add_bcast_mid(tf_exec *ex, float *y, const float *x, long outer, long mid, long inner);
void tf_x_sum_mid(tf_exec *ex, float *y, const float *x, long outer, long mid, long inner,
                  int accumulate);

#endif
