/* The op table: everything the model asks of a backend.
 *
 * The TinyOpenFold model (src/model/) is written once against this table; the
 * CPU backend (src/backend/cpu/) fills it with CBLAS + OpenMP, the CUDA backend
 * (src/backend/cuda/) with cuBLAS/cuBLASLt + kernels. Adding an entry is a
 * decision: prefer composing existing ops in the model.
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
    /* dst[i] = src[i] converted (i < n): widening is exact, narrowing rounds
     * to nearest even (tf_dtype.h); st == dt copies. No overlap. */
    void (*convert)(tf_backend *be, void *dst, tf_dtype dt, const void *src, tf_dtype st, long n);
    /* flag[0] = 1 when some x[i] (i < n) is inf or NaN; otherwise flag is
     * left as it is (so calls over several ranges OR together). flag is
     * backend memory (hyper + TF_HYPER_NONFINITE). */
    void (*check_finite)(tf_backend *be, float *flag, const float *x, long n);
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

    /* ---- dense algebra ---- */
    void (*gemm)(tf_backend *be, const tf_gemm_args *a, const char *name);
    /* Optional (NULL on the CPU): the weight-gradient lane. After wgrad_enable
     * (0 ok, else out of device memory), GEMMs with wgrad set run on a queue of
     * their own, each after the main queue's work issued before it, so that
     * they overlap the main queue's work issued after it. wgrad_mark gives
     * how many such GEMMs were issued so far; wgrad_wait(upto) makes later
     * main-queue work wait for the first `upto` of them (upto < 0: all). Every
     * one must be waited for before the step ends (a graph capture joins its
     * queues). */
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

    /* ---- layer norm over the last axis (C), eps given; saves mean/rstd [rows] ----
     * fwd: out = (x-mean)*rstd*gamma + beta (out may not alias x)
     * bwd: dx = (accumulate ? dx + : ) LN'(dout); dgamma += sum dout*xhat; dbeta += sum dout
     * x and dx are of type xt, out and dout of type yt (a residual stream is
     * normalised into a half activation); the rest is fp32. */
    void (*layernorm_fwd)(tf_backend *be, void *out, float *mean, float *rstd,
                          const void *x, const float *gamma, const float *beta,
                          long rows, int C, float eps, tf_dtype xt, tf_dtype yt);
    void (*layernorm_bwd)(tf_backend *be, void *dx, float *dgamma, float *dbeta,
                          const void *dout, const void *x, const float *mean,
                          const float *rstd, const float *gamma, long rows, int C,
                          int accumulate, tf_dtype xt, tf_dtype yt);

    /* ---- two LayerNorms in a row over the same C (v3: a module's block norm,
     * then its own norm): y1 = LN(x; g1, b1), out = LN(y1; g2, b2), eps given.
     * stats [4, rows]: mean1, rstd1, mean2, rstd2, saved by fwd for bwd; y1 is
     * not stored (bwd recomputes it from x and stats). out may not alias x.
     * bwd: dx (= or += when accumulate) is the gradient through both from dout;
     * dg1, db1, dg2, db2 accumulate. One pass each way instead of two, and one
     * [rows, C] tensor less to keep. C <= TF_LN2_MAX_C (the model composes two
     * layernorm ops for wider rows). Types as layernorm's (xt: x, dx; yt:
     * out, dout); y1 is fp32 in registers, not rounded to yt. ---- */
    void (*layernorm2_fwd)(tf_backend *be, void *out, float *stats, const void *x,
                           const float *g1, const float *b1, const float *g2, const float *b2,
                           long rows, int C, float eps, tf_dtype xt, tf_dtype yt);
    void (*layernorm2_bwd)(tf_backend *be, void *dx, float *dg1, float *db1, float *dg2,
                           float *db2, const void *dout, const void *x, const float *stats,
                           const float *g1, const float *b1, const float *g2, long rows, int C,
                           int accumulate, tf_dtype xt, tf_dtype yt);

    /* ---- softmax over the last axis (materialised scores path, v1) ----
     * fwd: y = softmax(x) (y may alias x); bwd: dx = y * (dy - sum(dy*y)) (dx may alias dy) */
    void (*softmax_fwd)(tf_backend *be, void *y, const void *x, long rows, int cols,
                        tf_dtype t);
    void (*softmax_bwd)(tf_backend *be, void *dx, const void *dy, const void *y,
                        long rows, int cols, tf_dtype t);

    /* ---- fused attention (v2/v3) ---- */
    void (*attn_fwd)(tf_backend *be, const tf_attn_args *a);
    void (*attn_bwd)(tf_backend *be, const tf_attn_args *a);

    /* ---- data movement ---- */
    void (*permute)(tf_backend *be, void *out, const void *in, const tf_permute_args *a);
    /* y[o, m, i] += x[o, i] for m < mid (broadcast add over the middle axis) */
    void (*add_bcast_mid)(tf_backend *be, void *y, const void *x, long outer, long mid,
                          long inner, tf_dtype t);
    /* y[o, i] (= or +=) sum_m x[o, m, i] (summed in fp32, rounded once) */
    void (*sum_mid)(tf_backend *be, void *y, const void *x, long outer, long mid,
                    long inner, int accumulate, tf_dtype t);

    /* ---- elementwise, contiguous n (all may alias in place), every tensor of type t ---- */
    void (*add)(tf_backend *be, void *y, const void *a, const void *b, long n,
                tf_dtype t); /* y = a + b */
    void (*mul)(tf_backend *be, void *y, const void *a, const void *b, long n,
                tf_dtype t); /* y = a * b */
    void (*scale)(tf_backend *be, void *y, const void *x, float alpha, long n,
                  tf_dtype t); /* y = alpha x */
    void (*act_fwd)(tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t);
    /* dx = dy * act'(.) written in terms of the activation OUTPUT y */
    void (*act_bwd)(tf_backend *be, tf_act act, void *dx, const void *dy, const void *y,
                    long n, tf_dtype t);
    /* fused gating (v3): y = a * sigmoid(g); gate_bwd: da = dy*sigmoid(g),
     * dg = dy*a*s*(1-s) (both assigned) */
    void (*gate_fwd)(tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t);
    void (*gate_bwd)(tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                     const void *g, long n, tf_dtype t);
    /* gated L|R to channel-major (v3: the triangle multiplication's gating and
     * the transpose before its product, in one pass each way), s in {0, 1},
     * rows r = b*inner + p (inner divides rows, B = rows / inner):
     *   fwd: lr_t[s, b, c, p] = a[r*ld + s*C + c] * sigmoid(g[r*ld + s*C + c])
     *   bwd, dy = dlr_t[s, b, c, p]: da[r*ld + s*C + c] = dy*sig,
     *        dg[r*ld + s*C + c] = dy*a*sig*(1-sig)   (assigned)
     * lr_t, dlr_t [2, B, C, inner] (inner = rows: [2, C, rows]); the
     * arithmetic of gate_fwd/_bwd, so the results are those of gate_* then a
     * permute. Outputs alias no input. Every tensor of type t. */
    void (*gate_cmajor_fwd)(tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                            long rows, long inner, int C, tf_dtype t);
    void (*gate_cmajor_bwd)(tf_backend *be, void *da, void *dg, const void *dlr_t,
                            const void *a, const void *g, long ld, long rows, long inner, int C,
                            tf_dtype t);
    /* ---- the triangle multiplication's norms, projections and gates (v3,
     * merged, the types of caps.trimul_proj_op, TF_TRIMUL_PROJ_OP_C), y [rows, C]:
     *   fwd: y, stats = layernorm2_fwd's of x (fp32, the residual stream; g1,
     *        b1, g2, b2, eps as there; y of type t written),
     *        proj = y W4^T rounded to t ([rows, 4C]: L R | gate L, gate R),
     *        lr_t = gate_cmajor_fwd's of proj (ld 4C, inner = rows), og = y Wog^T
     *   bwd: proj again, dproj [rows, 4C] = gate_cmajor_bwd's (values' gradients
     *        at columns 0.., the gates' at 2C..)
     * proj never stored. W4 [4C, C], Wog [C, C], every tensor of type t. The
     * channel-major tensors (lr_t, dlr_t [2C, ldt]) hold the rows' values at
     * c ldt + r: ldt = rows, or the whole tensor's rows for a chunk of them
     * (ldt >= rows). The CPU's ops are that composition. ---- */
    void (*trimul_proj_fwd)(tf_backend *be, void *lr_t, void *og, void *y, float *stats,
                            const float *x, const float *g1, const float *b1, const float *g2,
                            const float *b2, float eps, const void *W4, const void *Wog, long rows,
                            long ldt, int C, tf_dtype t);
    void (*trimul_proj_bwd)(tf_backend *be, void *dproj, const void *dlr_t, const void *y,
                            const void *W4, long rows, long ldt, int C, tf_dtype t);
    /* ---- its output stage (the same types and C), u_t [C, ldt] (the
     * channel-major product, as lr_t), Wo [C, C], og [rows, C] (the gate's
     * logits):
     *   fwd: out = (u_t^T Wo^T) rounded to t; z_out = z_in + out * sigmoid(og)
     *        (gate_residual_fwd's; z_out may be z_in)
     *   bwd: out again, dy = dz rounded to t; dout, dog = gate_bwd's of (dy,
     *        out, og); du [C, ldt] = Wo^T dout^T rounded to t (assigned; du
     *        NULL: not wanted)
     * out never stored; z_in, z_out, dz fp32 (the residual stream and its
     * gradient), every other tensor of type t. The CPU's ops are that
     * composition. ---- */
    void (*trimul_out_fwd)(tf_backend *be, float *z_out, const float *z_in, const void *u_t,
                           const void *Wo, const void *og, long rows, long ldt, int C,
                           tf_dtype t);
    void (*trimul_out_bwd)(tf_backend *be, void *dout, void *dog, void *du, const float *dz,
                           const void *u_t, const void *Wo, const void *og, long rows, long ldt,
                           int C, tf_dtype t);
    /* fused gate + residual (v3): out = res + a * sigmoid(g) (out may be res);
     * out and res are fp32 (a residual stream), a and g of type t */
    void (*gate_residual_fwd)(tf_backend *be, float *out, const float *res, const void *a,
                              const void *g, long n, tf_dtype t);

    /* ---- outer product mean backward (v3 on CUDA): the gradient of a through
     * outer[b,(i,p),(j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q], read straight from
     * the gradient dop [B, N, N, co, co] of its permuted form (dop[b,i,j,p,q]):
     *   da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p])
     * a, da [B, S, N, co]; da assigned. One pass instead of a permute of dop
     * and two GEMMs that each read it. Every tensor of type t. ---- */
    void (*opm_bwd)(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                    int N, int co, tf_dtype t);
    /* ---- outer product mean's product, in its permuted form (v3 on CUDA):
     *   outer_p[b,i,j,p,q] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q]
     * a [B, S, N, co], outer_p [B, N, N, co, co] assigned: the GEMM
     * A_b^T A_b / S and the permute of its [B, N, co, N, co] result in one
     * pass that writes outer_p once. Every tensor of type t. ---- */
    void (*opm_outer)(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                      tf_dtype t);
    /* ---- the outer product mean's forward from a as one op (v3, the types
     * of caps.opm_fused_op, TF_OPM_FUSED_OP_SHAPE):
     *   z_out[b,i,j,c] = z_in[b,i,j,c] + sum_{p,q} outer_p[b,i,j,p,q] W[c, p*co+q]
     * outer_p as opm_outer computes it (rounded to t) but never stored. a
     * [B, S, N, co] and W [cz, co*co] of type t; z_in, z_out [B, N, N, cz]
     * fp32 (z_out may be z_in). The CPU's op is that composition of its
     * ops (opm_outer, the GEMM with R): the reference. ---- */
    void (*opm_fwd)(tf_backend *be, float *z_out, const float *z_in, const void *a, const void *W,
                    int B, int S, int N, int co, int cz, tf_dtype t);
    /* ---- and its backward from dz [B, N, N, cz] (type t) as one op:
     *   dop = dz W (rounded to t), da = opm_bwd's of dop (assigned, type t),
     *   dW [cz, co*co] (fp32) += dz^T outer_p (outer_p as opm_outer's)
     * neither outer_p nor dop stored. The CPU's op is that composition. ---- */
    void (*opm_bwd_dz)(tf_backend *be, void *da, float *dW, const void *dz, const void *a,
                       const void *W, int B, int S, int N, int co, int cz, tf_dtype t);

    /* ---- the transition's MLP as one op each way (v3, the types of
     * caps.transition_op, C of TF_TRANSITION_OP_C), eps given:
     *   fwd: xn = LN(x; gamma, beta) (mean, rstd [rows] saved), h = relu(xn W1^T),
     *        x_out = x + h W2^T   (x_out may be x; NULL: only the statistics)
     *   bwd: dh = dy W2 where h > 0, else 0; dxn = dh W1; dx += LN'(dxn) (the
     *        residual stream's convention); dgamma, dbeta += as layernorm_bwd's;
     *        xn, h and dh are assigned for the caller's weight gradients
     *        (dW2 += dy^T h, dW1 += dh^T xn: GEMMs, so they may take the lane).
     * W1 [4C, C] and W2 [C, 4C] (the linear layers' [out, in]), xn, h, dh, dy
     * of type t; x, x_out, dx, the statistics and gamma, beta fp32. xn, h, dh
     * and dxn are rounded to t where the composition stores them (layernorm_fwd,
     * gemm RELU, gemm DRELU, gemm); the forward stores neither xn nor h (the
     * backward recomputes them from x and the statistics). The CPU's ops are
     * that composition of its ops: the reference. ---- */
    void (*transition_fwd)(tf_backend *be, float *x_out, float *mean, float *rstd, const float *x,
                           const float *gamma, const float *beta, const void *W1, const void *W2,
                           long rows, int C, float eps, tf_dtype t);
    void (*transition_bwd)(tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn,
                           void *h, void *dh, const void *dy, const float *x, const float *mean,
                           const float *rstd, const float *gamma, const float *beta,
                           const void *W1, const void *W2, long rows, int C, tf_dtype t);

    /* ---- embedding: out[t, :] = table[tok[t], :] (zeros for a token outside [0, vocab));
     * bwd: dtable[v,:] += sum over t with tok[t]==v (deterministic) ---- */
    void (*embed_fwd)(tf_backend *be, float *out, const float *table, const int32_t *tok,
                      long n, int C, int vocab);
    void (*embed_bwd)(tf_backend *be, float *dtable, const float *dout, const int32_t *tok,
                      long n, int C, int vocab);

    /* ---- distance head + MSE loss ----
     * fwd: pred[i] = dmax * sigmoid(logit[i]); loss[0] = mean_i (pred[i]-target[i])^2
     *      (loss is backend memory, one float; deterministic reduction)
     * bwd: dlogit[i] = seed * 2/n * (pred[i]-target[i]) * pred[i] * (1 - pred[i]/dmax),
     *      seed = *loss_scale (backend memory, hyper + TF_HYPER_LOSS_SCALE; NULL: 1)
     * All fp32. */
    void (*mse_head_fwd)(tf_backend *be, float *pred, float *loss, const float *logit,
                         const float *target, long n, float dmax);
    void (*mse_head_bwd)(tf_backend *be, float *dlogit, const float *pred, const float *target,
                         long n, float dmax, const float *loss_scale);

    /* ---- AdamW (PyTorch semantics) over one contiguous range ----
     * g = grad * hyper[TF_HYPER_GRAD_MUL] (the loss scale undone; 1 multiplies
     * exactly), then p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), bc_i = 1 - b_i^step.
     * When hyper[TF_HYPER_NONFINITE] != 0, p, m and v are left as they are.
     * The hyper-parameters are read from BACKEND memory at run time (so a captured
     * CUDA graph sees the current step): hyper[TF_HYPER_COUNT], the enum above. */
    void (*adamw)(tf_backend *be, float *p, const float *g, float *m, float *v, long n,
                  const float *hyper);
} tf_ops;

#ifdef __cplusplus
}
#endif
#endif
