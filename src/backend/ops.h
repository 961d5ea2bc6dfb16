/* The op table: everything the model asks of a backend.
 *
 * The TinyOpenFold model (src/model/) is written once against this table; the
 * CPU backend (src/backend/cpu/) fills it with CBLAS + OpenMP, the CUDA backend
 * (src/backend/cuda/) with cuBLAS/cuBLASLt + kernels. The table is the
 * backend's own entries, declared below, and the ops, declared once in
 * op_list.h (which says what adding one takes). Adding an op is a decision:
 * prefer composing existing ops in the model.
 *
 * Conventions (all ops):
 *  - Row-major; pointers are backend memory (host memory on the CPU, device
 *    memory on CUDA); counts are element counts unless named bytes.
 *  - Element types (tf_dtype.h) are part of every op's contract. A `float *`
 *    argument is always fp32 (parameters, their gradients, the AdamW
 *    moments, LayerNorm statistics, lse, the loss and the residual streams
 *    where an op says so). A `void *` argument is an activation of the type
 *    the call names: gemm's ab_type / c_type (tf_gemm_args), the attention's
 *    and the permute's `t` in their argument structs, the trailing
 *    tf_dtype parameters of every other op. Strides and offsets count
 *    elements of that type. Whatever the storage type, ops compute in fp32:
 *    a half input is widened exactly, the result is rounded once to the
 *    output's type at the store (tf_dtype.h, round to nearest even), and
 *    sums (LayerNorm's, softmax's, the attention's, sum_mid's) accumulate in
 *    fp32.
 *  - caps.act_types says which activation types a backend's ops take.
 *  - Ops are asynchronous on devices: they are ordered on the backend's main
 *    queue (the weight-gradient lane's GEMMs and side_upload's copies run on
 *    queues of their own, ordered by the wgrad_* and *_wait_* ops); `sync`
 *    waits for all of them.
 *  - Outputs come first in argument lists. `dx`-style gradients are assigned
 *    unless the op says "accumulates" (+=). Parameter gradients always
 *    accumulate.
 *  - Ops never allocate; scratch they need is passed in (see tf_attn_args.work).
 *  - Aliasing is allowed only where an op says so.
 */
#ifndef TF_BACKEND_OPS_H
#define TF_BACKEND_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/tf_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_backend tf_backend; /* backend-private context */

typedef enum {
    TF_EPI_NONE = 0,
    TF_EPI_RELU = 1, /* C = max(C, 0) */
    TF_EPI_DRELU = 2 /* C = aux > 0 ? C : 0: the gradient through y = relu(.), aux = y
                        (a select, as act_bwd's ReLU: the same bits) */
} tf_epilogue;

/* Strided batched GEMM, row-major:
 *   for p in [0, batch): C_p = alpha * op(A_p) * op(B_p) + beta * C_p, then epilogue
 *   op(A_p) is [M,K]: A stored [M,K] (lda >= K) or, when transA, stored [K,M] (lda >= M)
 *   op(B_p) is [K,N]: B stored [K,N] (ldb >= N) or, when transB, stored [N,K] (ldb >= K)
 *   C_p [M,N], ldc >= N. X_p = X + p * strideX (in elements of X's type).
 * beta == 0 means C is not read (may hold NaN). The epilogue RELU is only used
 * with beta == 0. `name` is a stable label for traces ("msa_q_proj", ...), may be NULL.
 * Element types: A and B are ab_type, C, R and aux are c_type (zero: fp32).
 * Products are accumulated in fp32 whatever the types; alpha and beta are
 * fp32 and applied in fp32 to the fp32 sum and to R (or C) read as fp32; the
 * epilogue runs on that fp32 value, and the result is rounded to c_type once,
 * at the store (as a tensor-core GEMM with a half output does). With
 * strideC == 0 each entry stores, and the next reads, a c_type C.
 * Backends take the types of caps.act_types (fp32 always).
 * Optional fields (zero-initialised = unused):
 *   R:   the residual input: when non-NULL, beta scales R instead of C,
 *        C_p = alpha op(A_p) op(B_p) + beta R_p (R has C's ldc and strideC; R may
 *        equal C; C is then only written). Saves the copy before a residual GEMM.
 *   aux: TF_EPI_DRELU's mask, with C's ldc and strideC: applied after beta.
 *   wgrad: a weight gradient that may run beside the main queue (ops
 *        wgrad_enable below): the caller promises that no later main-queue op
 *        reads or writes C or writes A or B until a wgrad_wait covers this GEMM.
 *        Backends without the lane ignore it. */
typedef struct {
    int transA, transB;
    int M, N, K;
    float alpha, beta;
    const void *A; long lda; long strideA;
    const void *B; long ldb; long strideB;
    void *C; long ldc; long strideC;
    int batch;
    tf_epilogue epilogue;
    const void *R;
    const void *aux;
    int wgrad;
    tf_dtype ab_type; /* A, B */
    tf_dtype c_type;  /* C, R, aux */
} tf_gemm_args;

/* A strided view of a [nb, no, L, H, d] attention operand:
 *   element (b, o, l, h, c) lives at p[b*sb + o*so + l*sl + h*d + c]
 * (heads are always packed: head h occupies channels h*d .. h*d+d-1). */
typedef struct {
    void *p; /* of the attention's type t */
    long sb, so, sl;
} tf_attn_view;

/* Fused (flash-style) multi-head attention without materialising scores:
 *   for every (b, o, h): S[i,j] = scale * q_i . k_j + bias(b,h,i,j)
 *                        P = softmax_j(S);  out_i = sum_j P[i,j] v_j
 *   bias(b,h,i,j) = bias[b*bias_sb + h*bias_sh + i*bias_si + j*bias_sj] (shared across o),
 *   or no bias when bias == NULL.
 * Forward writes out and lse[((b*no + o)*nh + h)*L + i] = log(sum_j exp(S[i,j])).
 * Backward (same args plus gradients) assigns dq, dk, dv (views, may be views into
 * one fused [.., 3C] buffer) and, if dbias != NULL, ASSIGNS dbias(b,h,i,j) =
 * sum_o dS (same strides as bias). work: nb*no*nh*L floats of scratch (bwd only).
 * The sum over o must be deterministic (no float atomics).
 * Types: q, k, v, out, bias and their gradients are of type t; lse and work
 * fp32; scores, softmax and the sums over j are fp32. */
typedef struct {
    int nb, no, nh, L, d;
    float scale;
    tf_attn_view q, k, v, out;
    const void *bias; long bias_sb, bias_sh, bias_si, bias_sj;
    float *lse;
    /* backward only */
    tf_attn_view dq, dk, dv, dout;
    void *dbias;
    float *work;
    tf_dtype t;
} tf_attn_args;

/* Generic permute of a contiguous tensor of rank <= 6:
 *   out[i_perm[0], ..., i_perm[r-1]] = in[i_0, ..., i_{r-1}], i.e. out's axis a is
 *   in's axis perm[a] (numpy.transpose semantics). out is contiguous.
 *   If accumulate, out += permuted in. */
typedef struct {
    int rank;
    int dims[6];   /* dims of `in` */
    int perm[6];
    int accumulate;
    tf_dtype t; /* in and out */
} tf_permute_args;

typedef enum {
    TF_ACT_SIGMOID = 0, /* y = 1/(1+exp(-x)) */
    TF_ACT_RELU = 1     /* y = max(x, 0) */
} tf_act;

#define TF_MARKS 4         /* ops->mark: timing points per step */
#define TF_LN2_MAX_C 128 /* layernorm2: widest row (CUDA keeps a row in registers) */
#define TF_PAIR_BIAS_MAX_H 64 /* pair_bias_bwd: most heads (a row's in registers) */
/* transition_fwd/_bwd: the rows they take (C of 64 or 128) */
#define TF_TRANSITION_OP_C(C) ((C) == 64 || (C) == 128)
/* trimul_proj_fwd/_bwd, trimul_out_fwd/_bwd: the channels they take */
#define TF_TRIMUL_PROJ_OP_C(C) ((C) == 128)
/* opm_fwd, opm_bwd_dz: the shapes they take (co 32, cz 64 or 128; S up to
 * caps.opm_fused_max_s) */
#define TF_OPM_FUSED_OP_SHAPE(co, cz) ((co) == 32 && ((cz) == 64 || (cz) == 128))

/* What a backend prefers and provides, fixed when it is created (ops->caps):
 * the composition the model should use on it at its kernel level and
 * precision, and what the trainer may ask of it. Every preference is 0 at
 * levels 1-2 (the reference composition). */
typedef struct {
    const char *name;  /* "cpu", "cuda" */
    int device_memory; /* alloc'd memory is a device's (the trainer checks host memory when 0) */
    /* the model's level-3 composition (src/model/exec.h) */
    int opm_weight_first; /* outer product mean composed weight-first */
    int opm_bwd_op;       /* the outer product mean's backward as ops->opm_bwd */
    int opm_outer_op;     /* its product in permuted form as ops->opm_outer */
    int trimul_merged;    /* triangle multiplication: projections and gates in one GEMM */
    /* the weight-gradient lane (ops wgrad_*): used, and the memory
     * wgrad_enable takes */
    int wgrad_lane;
    size_t wgrad_lane_bytes;
    /* the trainer's data path and step issue */
    int prefetch_batches; /* draw the next batch on a host thread during the step */
    int stage_batches;    /* upload it on the side queue during the backward (needs prefetch) */
    int pipelined_phases; /* issue a step's phases back to back, timed by ops->mark */
    int graphs;           /* whole-phase graph capture (ops graph_*) */
    int max_head_dim;     /* widest attention head its kernels take (0: any) */
    unsigned act_types;   /* activation types its ops take: bit (1u << tf_dtype) */
    /* activation types (bit 1u << tf_dtype) whose level-3 transition at C of
     * TF_TRANSITION_OP_C runs as ops->transition_fwd/_bwd (0: the composition) */
    unsigned transition_op;
    /* activation types whose level-3 outer product mean runs as ops->opm_fwd
     * and ops->opm_bwd_dz (TF_OPM_FUSED_OP_SHAPE, S <= opm_fused_max_s; 0:
     * composed) */
    unsigned opm_fused_op;
    int opm_fused_max_s;
    /* activation types whose level-3 triangle multiplication (merged) forms
     * its projections and gates as ops->trimul_proj_fwd/_bwd and its output
     * stage as trimul_out_fwd/_bwd (TF_TRIMUL_PROJ_OP_C; 0: the GEMMs,
     * gate_cmajor and the gate ops) */
    unsigned trimul_proj_op;
    /* its layernorm_bwd and layernorm2_bwd store dx's rounded copy (dxh):
     * the model takes the next module's stream gradient from it instead of
     * a convert (src/model/exec.h tf_stream_copy; 0: converts) */
    int ln_stream_copy;
} tf_backend_caps;

/* AdamW's hyper-parameters in backend memory (ops adamw, mse_head_bwd,
 * check_finite): the trainer writes [0..8] before each optimizer phase;
 * [9] is written by check_finite and zeroed by the trainer each step. */
enum {
    TF_HYPER_LR = 0, TF_HYPER_B1, TF_HYPER_B2, TF_HYPER_EPS, TF_HYPER_WD,
    TF_HYPER_BC1, TF_HYPER_BC2,
    TF_HYPER_LOSS_SCALE, /* the loss's gradient is seeded with this (1: none) */
    TF_HYPER_GRAD_MUL,   /* AdamW reads g * this (1 / loss scale) */
    TF_HYPER_NONFINITE,  /* non-zero: AdamW changes nothing (a skipped step) */
    TF_HYPER_COUNT
};

typedef struct tf_ops {
    const char *name; /* "cpu", "cuda" */

    /* ---- the backend itself ----
     * destroy frees the backend and what it holds itself; peak_bytes is the high-water mark of what alloc handed out
     * (CUDA: and its library workspaces); describe writes one line for
     * `validate`; caps fills what it prefers and provides (above). */
    void (*destroy)(tf_backend *be);
    size_t (*peak_bytes)(const tf_backend *be);
    void (*describe)(const tf_backend *be, char *out, size_t n);
    void (*caps)(const tf_backend *be, tf_backend_caps *out);
    /* Optional (NULL where caps.graphs is 0): graph capture. graph_capture
     * records what fn(arg) issues on the main queue into *graph (0 ok, else
     * non-zero with one line on stderr), graph_launch replays it, and
     * graph_captured_kernels counts the kernels of the last capture. */
    int (*graph_capture)(tf_backend *be, void (*fn)(void *), void *arg, void **graph);
    int (*graph_launch)(tf_backend *be, void *graph);
    void (*graph_destroy)(tf_backend *be, void *graph);
    size_t (*graph_captured_kernels)(const tf_backend *be);

    /* ---- memory & sync ---- */
    int (*alloc)(tf_backend *be, void **p, size_t bytes); /* 0 ok, else out of memory */
    void (*free)(tf_backend *be, void *p);
    void (*upload)(tf_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download)(tf_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*copy)(tf_backend *be, void *dst, const void *src, size_t bytes); /* backend to backend */
    /* rows rows of cols floats: dst[r*dst_ld + j] = src[r*src_ld + j] (a block
     * of rows into or out of a wider tensor in one call; no overlap) */
    void (*copy_rows)(tf_backend *be, void *dst, long dst_ld, const void *src, long src_ld,
                      long cols, long rows, tf_dtype t);
    void (*zero)(tf_backend *be, void *p, size_t bytes);
    void (*sync)(tf_backend *be);
    /* host memory for data uploaded every step (the batch): page-locked on
     * CUDA, so that upload runs at the bus' speed (pageable copies go through
     * a staging buffer at a fraction of it); plain malloc on the CPU.
     * 0 ok, else out of memory. */
    int (*host_alloc)(tf_backend *be, void **p, size_t bytes);
    void (*host_free)(tf_backend *be, void *p);
    /* A second, copy-only queue beside the main one, so that the next batch
     * uploads while the current step computes. side_upload copies host memory
     * (from host_alloc; unchanged until the copy is known done) to the device
     * on it and returns at once; main_wait_side makes later main-queue work
     * wait for the side queue's work issued so far, side_wait_main the
     * reverse. sync waits for both queues. The CPU copies at once and the
     * waits do nothing. */
    void (*side_upload)(tf_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*main_wait_side)(tf_backend *be);
    void (*side_wait_main)(tf_backend *be);
    /* Optional (NULL on the CPU): a step issued without waiting at its phase
     * boundaries. upload_async / download_async queue a copy on the main
     * queue and return at once (host memory from host_alloc, untouched until
     * the next sync); mark records timing point k (0..TF_MARKS-1) on the main
     * queue, and mark_ms, after a sync, gives the milliseconds from point a
     * to point b. */
    void (*upload_async)(tf_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download_async)(tf_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*mark)(tf_backend *be, int k);
    double (*mark_ms)(tf_backend *be, int a, int b);

    /* ---- the weight-gradient lane and the queues' handles ----
     * Optional (NULL on the CPU). After wgrad_enable (0 ok, else out of
     * device memory), GEMMs with wgrad set run on a queue of their own, each
     * after the main queue's work issued before it, so that they overlap the
     * main queue's work issued after it. wgrad_mark gives how many such
     * GEMMs were issued so far; wgrad_wait(upto) makes later main-queue work
     * wait for the first `upto` of them (upto < 0: all). Every one must be
     * waited for before the step ends (a graph capture joins its queues). */
    int (*wgrad_enable)(tf_backend *be);
    long (*wgrad_mark)(tf_backend *be);
    void (*wgrad_wait)(tf_backend *be, long upto);
    /* Optional (NULL on the CPU, which has no queue of another's): the same
     * wait for a queue outside the backend instead of the main one. Work
     * issued later on `queue` (the backend's native queue handle: a
     * cudaStream_t of the same device, e.g. the all-reduces' stream) waits
     * for the first `upto` lane GEMMs (upto < 1: none); the main queue does
     * not wait, so those GEMMs still need a wgrad_wait before the main queue
     * touches their memory, and before the step ends. Under graph capture
     * `queue` joins the capture through the lane's branch. */
    void (*wgrad_wait_queue)(tf_backend *be, void *queue, long upto);
    /* Optional (NULL on the CPU): the native handle (a cudaStream_t) of the
     * main queue (lane 0) or of the weight-gradient lane (lane 1; NULL while
     * the lane is off), for what records on them from outside the backend
     * (the profiler's event clock), between ops. */
    void *(*queue)(tf_backend *be, int lane);

    /* ---- the ops (op_list.h: their signatures and contracts) ---- */
#define TF_OP(ret, op, params) ret (*op) params;
#include "backend/op_list.h"
} tf_ops;

#ifdef __cplusplus
}
#endif
#endif
