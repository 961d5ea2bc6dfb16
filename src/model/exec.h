/* The execution context the model runs in, and thin wrappers over the op
 * table that (a) skip execution while the arena is being planned, (b) give
 * every op a stable kernel name for the profiler (one branch when it is off)
 * and (c) state the memory each op reads and writes, from which the
 * weight-gradient lane's waits follow (lane.h). The model calls the op table
 * only through them. */
#ifndef TF_MODEL_EXEC_H
#define TF_MODEL_EXEC_H

#include "backend/ops.h"
#include "model/arena.h"
#include "model/lane.h"
#include "model/op_cost.h"
#include "prof/prof.h"
#include "tinyfold.h"

/* A residual stream's gradient (fp32) and its copies in the activations'
 * type (exec.c tf_x_stream_grad). A LayerNorm backward that writes into
 * the stream's gradient also stores its rounded values into a copy
 * (op_list.h layernorm_bwd dxh) and records the range; the next module
 * reads the range's copy instead of converting the gradient again. Any
 * later write into the recorded range drops the record. */
#define TF_STREAM_COPIES 2 /* copies per stream: two with the weight-gradient lane */
typedef struct {
    const float *f; /* the fp32 gradient, n floats */
    size_t n;
    /* its copies of type at, n elements each, for the whole backward: the
     * LayerNorms of backward module k write copy k % nh, so that with the
     * lane a module's weight gradients, which read the copy it was given,
     * may run on through the next module (as its temporaries' slots do) */
    void *h[TF_STREAM_COPIES];
    int nh;
    int cur;       /* the copy the record is in */
    size_t lo, hi; /* the record: f[lo, hi) rounded is h[cur][lo, hi); lo == hi: none */
} tf_stream_copy;

typedef struct {
    const tf_ops *ops;
    tf_backend *be;
    tf_prof *prof;
    tf_arena *arena;
    int planning;   /* plan the arena: ops are not executed */
    /* The activations' element type (tinyfold.h tf_precision: fp32 for fp32
     * and tf32, else the half type). Residual streams, statistics, the loss
     * and everything of the parameters stay fp32; the GEMMs read the
     * weights from a copy in this type (wh, the parameters' copy; exec.c
     * tf_x_w). tf_exec_fp32 runs a part of the model (the embeddings, the
     * distance head) with fp32 activations and the fp32 weights. */
    tf_dtype at;
    const float *w_base; /* the fp32 parameters */
    const void *wh;      /* their copy in type at (== w_base when at is fp32) */
    tf_fusion fu;   /* which fusions are on */
    int level;      /* 1..3 (v3 uses the fused elementwise kernels) */
    /* The level-3 composition, from the backend's preferences (ops.h
     * tf_backend_caps; 0 at levels 1-2):
     *   opm_weight_first: the outer product mean composed weight-first
     *     (outer_product.c: fewer FLOPs and no permute, but many small GEMMs);
     *   opm_bwd_op, opm_outer_op: its backward and its permuted product as
     *     one op each (op_list.h opm_bwd, opm_outer);
     *   trimul_merged: the triangle multiplication's projections and gates
     *     as one GEMM (triangle_mult.c). */
    int opm_weight_first, opm_bwd_op, opm_outer_op, trimul_merged;
    /* the transition's MLP as one op each way (op_list.h transition_fwd/_bwd:
     * the backend's caps.transition_op has the type at; transition.c) */
    int transition_op;
    /* the outer product mean as one op each way (op_list.h opm_fwd, opm_bwd_dz:
     * the backend's caps.opm_fused_op has the type at, the shape is
     * TF_OPM_FUSED_OP_SHAPE and S at most this; 0: composed) */
    int opm_fused_max_s;
    /* the triangle multiplication's projections and gates as one op each
     * way (op_list.h trimul_proj_fwd/_bwd: caps.trimul_proj_op has the type at,
     * C is TF_TRIMUL_PROJ_OP_C; triangle_mult.c, merged composition only) */
    int trimul_proj_op;
    /* The weight gradients on a lane of their own (ops.h wgrad_*),
     * overlapping the rest of their module's backward. The executor makes
     * the main queue wait for them where an op would touch their memory
     * (lane.h); the backward ends with the lane joined (tf_x_lane_join). */
    int wgrad_async;
    tf_lane lane;
    /* With the lane, the modules' backward temporaries alternate between two
     * slots of bwd_slot bytes (model.c module_begin), so that a module's
     * weight gradients may run on into the next module's backward: only the
     * module after it, which reuses the slot, may have to wait for them.
     * bwd_slot_need: the largest module's temporaries, measured by the first
     * planning pass. */
    /* tf_recompute (model.c block_fwd): what the forward keeps for the backward */
    int recompute;
    /* --chunk-size (chunk.c): the pair modules' rows per chunk; 0 = whole */
    int chunk;
    size_t bwd_slot, bwd_slot_need, bwd_base, bwd_saved_peak;
    int bwd_module;
    /* The backward's stages, for data parallel reduction in buckets: the
     * loss head (stage 0), each module in backward order, the embeddings
     * (the last, after the lane is joined). tf_x_stage_end ends one and
     * calls stage_end(stage_ctx, stage) when set (not while planning).
     * grad_hi, when set: every op's writes into the gradient buffer
     * [grad_base, grad_base + grad_n) are recorded, grad_hi[s] the highest
     * float written by stage s, plus one (set by a planning pass: what the
     * buckets are built from, derived like the lane's waits). */
    int bwd_stage;
    void (*stage_end)(void *ctx, int stage);
    void *stage_ctx;
    size_t *grad_hi;
    int grad_stages; /* entries of grad_hi */
    /* The stream gradients' copies (tf_stream_copy): stream_copies, the
     * backend's LayerNorm backwards write them (caps.ln_stream_copy); sc[0..nsc)
     * the streams tracked (none in fp32), from tf_x_stream_copies_begin to
     * tf_x_stream_copies_end. */
    int stream_copies;
    int nsc;
    tf_stream_copy sc[2]; /* the pair's (dz) and the MSA's (dm) */
    /* called after every op when set (not while planning): MPI's
     * non-blocking all-reduces move only inside MPI calls */
    void (*op_done)(void *ctx);
    const float *grad_base;
    size_t grad_n;
} tf_exec;

#define TF_BLOCK_MODULES 9 /* an Evoformer block's modules (model.c) */
/* Stages of the backward of a model of n_blocks (bwd_stage). */
static inline int tf_bwd_stages(int n_blocks) { return 2 + TF_BLOCK_MODULES * n_blocks; }
/* Ends the current backward stage (see bwd_stage). */
void tf_x_stage_end(tf_exec *ex);
/* Before something off the main queue reads or writes p[0..n) (an
 * all-reduce of gradients on the host): the main queue waits for the lane's
 * GEMMs that write it. */
void tf_x_grads_final(tf_exec *ex, const float *p, size_t n);
/* The same hazard for work on a queue of its own (a device all-reduce): the
 * lane ticket (ops.h wgrad_mark) that queue must wait for before it reads or
 * writes p[0..n) (ops.h wgrad_wait_queue), 0 when no pending lane GEMM
 * touches it. Nothing is waited for here: the GEMMs stay pending for the
 * main queue's own hazards, and the main queue goes on. */
long tf_x_lane_ticket(const tf_exec *ex, const float *p, size_t n);

/* The main queue waits for every weight gradient still on the lane (the end
 * of the backward: a step, and a graph capture, ends joined). */
void tf_x_lane_join(tf_exec *ex);

static inline void tf_rpush(tf_exec *ex, const char *name) {
    if (!ex->planning) tf_region_push(ex->prof, name);
}
static inline void tf_rpop(tf_exec *ex) {
    if (!ex->planning) tf_region_pop(ex->prof);
}
/* n fp32 elements (streams, statistics) */
static inline float *tf_alloc_act(tf_exec *ex, size_t n) { return tf_arena_alloc(ex->arena, n); }
/* n activations of type ex->at */
static inline void *tf_alloc_at(tf_exec *ex, size_t n) {
    return tf_arena_alloc_bytes(ex->arena, n * tf_dtype_size(ex->at));
}
/* p + n elements of the activation type */
static inline void *tf_at(const tf_exec *ex, const void *p, long n) {
    return p ? (char *)p + n * (long)tf_dtype_size(ex->at) : NULL;
}
/* Runs the calls up to tf_exec_fp32_end in fp32 (activations and weights);
 * returns the type to restore. */
static inline tf_dtype tf_exec_fp32_begin(tf_exec *ex) {
    tf_dtype t = ex->at;
    ex->at = TF_F32;
    return t;
}
static inline void tf_exec_fp32_end(tf_exec *ex, tf_dtype t) { ex->at = t; }
/* The weight the GEMMs read for W (a pointer into the fp32 parameters): W
 * itself in fp32, else its element in the copy of type at. */
const void *tf_x_w(const tf_exec *ex, const float *W);
/* A residual stream's gradient (fp32) as the module's activations' type: dz
 * itself in fp32, else the copy a LayerNorm backward left of exactly these
 * values (tf_stream_copy), else a converted copy from the arena (PyTorch's
 * autocast casts the gradient of a half branch the same way). */
const void *tf_x_stream_grad(tf_exec *ex, const float *dz, long n);
/* The backward's stream gradients dz [nz] and dm [nm]: in half precision,
 * with ex->stream_copies, their copies allocated from the arena (to be kept
 * until tf_x_stream_copies_end, before the arena is released under them). */
void tf_x_stream_copies_begin(tf_exec *ex, const float *dz, size_t nz, const float *dm,
                              size_t nm);
void tf_x_stream_copies_end(tf_exec *ex);
/* The pair bias [H, rows] (type at) from z [rows, C] (op_list.h pair_bias_fwd) */
void tf_x_pair_bias_fwd(tf_exec *ex, void *bias, const float *z, const float *W, long rows, int C,
                        int H);
/* The pair bias' backward into the pair stream dz [rows, C] (op_list.h
 * pair_bias_bwd; dbias head-major [H, rows] of type at, W fp32): its copy in
 * half precision where dz is a tracked stream gradient (tf_stream_copy), and
 * db32 (NULL: none) the widened dbias */
void tf_x_pair_bias_bwd(tf_exec *ex, float *dz, float *db32, const void *dbias, const float *W,
                        long rows, int C, int H);
/* dst (type dt) = src (type st), n elements */
void tf_x_convert(tf_exec *ex, void *dst, tf_dtype dt, const void *src, tf_dtype st, long n);
void tf_x_check_finite(tf_exec *ex, float *flag, const float *x, long n);

/* ---- linear layers (no bias; W is [out, in] in the fp32 parameters, y = x W^T) ----
 * x, y, dy, dx are activations (type at); the GEMMs read W's copy (tf_x_w). */
void tf_linear_fwd(tf_exec *ex, void *y, const void *x, const float *W, long rows, int in,
                   int out, float beta, tf_epilogue epi);
/* y = x W^T + beta res, y and res fp32 (a residual stream; ops.h
 * tf_gemm_args.R: no copy of res into y first) */
void tf_linear_fwd_res(tf_exec *ex, float *y, const void *x, const float *W, long rows, int in,
                       int out, float beta, tf_epilogue epi, const float *res);
/* dx (= or += when accumulate) dy W ; dW += dy^T x (fp32). dx may be NULL. */
void tf_linear_bwd(tf_exec *ex, void *dx, float *dW, const void *dy, const void *x,
                   const float *W, long rows, int in, int out, int accumulate);
/* the same with an epilogue on dx (TF_EPI_DRELU with aux: through a ReLU) */
void tf_linear_bwd_epi(tf_exec *ex, void *dx, float *dW, const void *dy, const void *x,
                       const float *W, long rows, int in, int out, int accumulate,
                       tf_epilogue epi, const void *aux);
void tf_gemm(tf_exec *ex, const tf_gemm_args *a, const char *name);
/* A strided-batched GEMM description (ops.h semantics), no epilogue, every
 * operand an activation (type at). */
tf_gemm_args tf_gemm_make(const tf_exec *ex, int tA, int tB, int M, int N, int K, float alpha,
                          float beta, const void *A, long lda, long sA, const void *B, long ldb,
                          long sB, void *C, long ldc, long sC, int batch);

/* ---- other op wrappers: `void *` tensors are activations (type at) ----
 * LayerNorm: x and dx are of type xt (a residual stream: fp32; an
 * activation: at), out and dout activations. */
void tf_x_layernorm_fwd(tf_exec *ex, void *out, float *mean, float *rstd, const void *x,
                        tf_dtype xt, const float *g, const float *b, long rows, int C);
void tf_x_layernorm_bwd(tf_exec *ex, void *dx, tf_dtype xt, float *dg, float *db,
                        const void *dout, const void *x, const float *mean, const float *rstd,
                        const float *g, long rows, int C, int accumulate);
/* layernorm2: x, dx fp32 (a residual stream) */
void tf_x_layernorm2_fwd(tf_exec *ex, void *out, float *stats, const float *x, const float *g1,
                         const float *b1, const float *g2, const float *b2, long rows, int C);
void tf_x_layernorm2_bwd(tf_exec *ex, float *dx, float *dg1, float *db1, float *dg2, float *db2,
                         const void *dout, const float *x, const float *stats, const float *g1,
                         const float *b1, const float *g2, long rows, int C, int accumulate);
void tf_x_permute(tf_exec *ex, void *out, const void *in, int rank, const int *dims,
                  const int *perm, int accumulate);
/* copy, zero: fp32 (streams, gradients); copy_rows: activations */
void tf_x_copy(tf_exec *ex, float *dst, const float *src, size_t n);
void tf_x_copy_rows(tf_exec *ex, void *dst, long dst_ld, const void *src, long src_ld, long cols,
                    long rows);
void tf_x_zero(tf_exec *ex, float *p, size_t n);
void tf_x_zero_at(tf_exec *ex, void *p, size_t n); /* n activations */
/* add: fp32 (the residual streams at levels 1-2) */
void tf_x_add(tf_exec *ex, float *y, const float *a, const float *b, long n);
void tf_x_mul(tf_exec *ex, void *y, const void *a, const void *b, long n);
void tf_x_scale(tf_exec *ex, void *y, const void *x, float alpha, long n);
void tf_x_act_fwd(tf_exec *ex, tf_act act, void *y, const void *x, long n);
void tf_x_act_bwd(tf_exec *ex, tf_act act, void *dx, const void *dy, const void *y, long n);
void tf_x_softmax_fwd(tf_exec *ex, void *y, const void *x, long rows, int cols);
void tf_x_softmax_bwd(tf_exec *ex, void *dx, const void *dy, const void *y, long rows, int cols);
void tf_x_gate_fwd(tf_exec *ex, void *y, const void *a, const void *g, long n);
void tf_x_gate_bwd(tf_exec *ex, void *da, void *dg, const void *dy, const void *a, const void *g,
                   long n);
/* out, res fp32 (a residual stream) */
void tf_x_gate_residual_fwd(tf_exec *ex, float *out, const float *res, const void *a,
                            const void *g, long n);
void tf_x_gate_cmajor_fwd(tf_exec *ex, void *lr_t, const void *a, const void *g, long ld,
                          long rows, long inner, int C);
void tf_x_gate_cmajor_bwd(tf_exec *ex, void *da, void *dg, const void *dlr_t, const void *a,
                          const void *g, long ld, long rows, long inner, int C);
void tf_x_opm_outer(tf_exec *ex, void *outer_p, const void *a, int B, int S, int N, int co);
void tf_x_opm_bwd(tf_exec *ex, void *da, const void *dop, const void *a, int B, int S, int N,
                  int co);
/* z_out = z_in + the outer product mean of a through W (op_list.h opm_fwd; W the
 * fp32 parameter, read from the copy of type at) */
void tf_x_opm_fwd(tf_exec *ex, float *z_out, const float *z_in, const void *a, const float *W,
                  int B, int S, int N, int co, int cz);
/* the triangle multiplication's norms, projections and gates (op_list.h
 * trimul_proj_fwd/_bwd; y, stats as tf_x_layernorm2_fwd's; W4, Wog the fp32
 * parameters, read from the copy of type at; ldt the channel-major tensors'
 * channel stride) */
void tf_x_trimul_proj_fwd(tf_exec *ex, void *lr_t, void *og, void *y, float *stats,
                          const float *x, const float *g1, const float *b1, const float *g2,
                          const float *b2, const float *W4, const float *Wog, long rows, long ldt,
                          int C);
void tf_x_trimul_proj_bwd(tf_exec *ex, void *dproj, const void *dlr_t, const void *y,
                          const float *W4, long rows, long ldt, int C);
/* and its output stage (op_list.h trimul_out_fwd/_bwd; Wo the fp32 parameter,
 * read from the copy of type at; dz the fp32 stream gradient) */
void tf_x_trimul_out_fwd(tf_exec *ex, float *z_out, const float *z_in, const void *u_t,
                         const float *Wo, const void *og, long rows, long ldt, int C);
void tf_x_trimul_out_bwd(tf_exec *ex, void *dout, void *dog, void *du, const float *dz,
                         const void *u_t, const float *Wo, const void *og, long rows, long ldt,
                         int C);
/* its backward from dz (type at): da assigned, dW (fp32) += (op_list.h opm_bwd_dz) */
void tf_x_opm_bwd_dz(tf_exec *ex, void *da, float *dW, const void *dz, const void *a,
                     const float *W, int B, int S, int N, int co, int cz);
/* the transition's MLP (op_list.h transition_fwd/_bwd; W1, W2 the fp32
 * parameters, read from the copy of type at); x, x_out, dx fp32 */
void tf_x_transition_fwd(tf_exec *ex, float *x_out, float *mean, float *rstd, const float *x,
                         const float *g, const float *b, const float *W1, const float *W2,
                         long rows, int C);
void tf_x_transition_bwd(tf_exec *ex, float *dx, float *dg, float *db, void *xn, void *h,
                         void *dh, const void *dy, const float *x, const float *mean,
                         const float *rstd, const float *g, const float *b, const float *W1,
                         const float *W2, long rows, int C);
void tf_x_add_bcast_mid(tf_exec *ex, void *y, const void *x, long outer, long mid, long inner);
/* x and y of type t (fp32 for weight-gradient partials) */
void tf_x_sum_mid(tf_exec *ex, void *y, const void *x, long outer, long mid, long inner,
                  int accumulate, tf_dtype t);
void tf_x_attn_fwd(tf_exec *ex, const tf_attn_args *a);
void tf_x_attn_bwd(tf_exec *ex, const tf_attn_args *a);
void tf_x_embed_fwd(tf_exec *ex, float *out, const float *table, const int32_t *tok, long n,
                    int C, int vocab);
void tf_x_embed_bwd(tf_exec *ex, float *dtable, const float *dout, const int32_t *tok, long n,
                    int C, int vocab);
void tf_x_mse_head_fwd(tf_exec *ex, float *pred, float *loss, const float *logit,
                       const float *target, long n, float dmax);
void tf_x_mse_head_bwd(tf_exec *ex, float *dlogit, const float *pred, const float *target, long n,
                       float dmax, const float *loss_scale);
/* AdamW over p [n]; ph (NULL: none) p's copy in the activations' type
 * (tf_x_w's), rewritten with it */
void tf_x_adamw(tf_exec *ex, float *p, void *ph, const float *g, float *m, float *v, long n,
                const float *hyper);

#endif
