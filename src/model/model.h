/* The TinyOpenFold model: parameter offsets, saved activations, and the
 * forward/backward of every module (one file per module family):
 *   attention.c       the attention core (eager v1 / flash v2,v3)
 *   msa.c             MSA row attention, MSA column attention, the MSA stack
 *   outer_product.c   outer product mean
 *   triangle_mult.c   triangle multiplicative update (outgoing / incoming)
 *   triangle_attn.c   triangle attention (starting / ending node)
 *   transition.c      MSA and pair transitions
 *   model.c           embeddings, blocks, distance head + loss, whole forward/backward
 * Conventions (llm.c style): outputs first, activation gradients assigned except
 * on the residual streams (dm, dz), which accumulate; parameter gradients
 * accumulate. Activations come from the arena (exec.h).
 * Types: the residual streams (m, z and every module's output), their
 * gradients (dm, dz), LayerNorm statistics and the distance head are fp32
 * (`float *`); every other activation (`void *`) is of the run's activation
 * type ex->at, and pointer arithmetic on them goes through tf_at. */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include "model/exec.h"

/* ---- parameter offsets (floats) into the parameter / gradient buffers ---- */
typedef struct { size_t w, b; } tf_ln_off;
typedef struct {
    size_t row_q, row_k, row_v, row_o, row_pb;
    size_t col_q, col_k, col_v, col_o;
    size_t mt_w1, mt_w2;
    tf_ln_off norm_row, norm_col, norm_trans;
    size_t opm_outer, opm_pair;
    tf_ln_off opm_ln;
    struct { size_t lp, rp, lg, rg, op, og; tf_ln_off ln; } tm[2]; /* outgoing, incoming */
    struct { size_t q, k, v, o; tf_ln_off ln; } ta[2];              /* starting, ending */
    size_t pt_w1, pt_w2;
    tf_ln_off pn_outer, pn_tri_out, pn_tri_in, pn_attn_start, pn_attn_end, pn_trans;
} tf_block_off;

typedef struct {
    size_t msa_emb, pair_emb, dist;
    tf_block_off *blk;
    int n_blocks;
} tf_model_off;

/* ---- the attention core (attention.c) ---- */
typedef struct {
    int B, X, Y, H, d;
    int colwise;            /* attend along X (outer Y) instead of along Y (outer X) */
    long ld;                /* row stride of q/k/v: C, or 3C for a fused buffer */
    const void *q, *k, *v;
    const void *bias;       /* [B, L, L, H], head-major [H, B, L, L], or NULL */
    int bias_hmajor;        /* bias (and dbias) head-major: the flash composition only */
    /* saved for backward */
    void *o;                /* [B, X, Y, C] */
    float *lse;             /* flash */
    void *qp, *kp, *vp, *probs; /* eager: per-head copies and softmax probabilities */
} tf_attn_core;
void tf_attn_core_fwd(tf_exec *ex, tf_attn_core *a);
/* dq/dk/dv: buffers with the same layout (ld) as q/k/v, assigned; dbias (the bias' layout) assigned */
void tf_attn_core_bwd(tf_exec *ex, const tf_attn_core *a, void *dq, void *dk, void *dv,
                      void *dbias, const void *dout);

/* ---- saved activations ---- */
typedef struct { void *y; float *mean, *rstd; } tf_ln_act; /* LN output and statistics */

typedef struct {            /* MSA row or column attention */
    tf_ln_act ln;           /* block norm (msa_norm_row / msa_norm_col) */
    void *qkv;              /* fused [rows, 3C] or NULL */
    void *q, *k, *v;        /* separate [rows, C] (or views into qkv) */
    void *bias;             /* row only: [B, N, N, H] or head-major (tf_attn_core) */
    tf_attn_core core;
} tf_msa_attn_act;

typedef struct {            /* MSA or pair transition */
    tf_ln_act ln;
    void *h;                /* relu(x W1^T) [rows, 4C] */
} tf_transition_act;

/* The outer product mean's composition, decided once per forward from the
 * executor and the shape (tf_opm_plan_make, outer_product.c) */
typedef enum {
    TF_OPM_REF,          /* the product formed, permuted, then projected */
    TF_OPM_WEIGHT_FIRST, /* level 3 on the CPU (exec.h opm_weight_first) */
    TF_OPM_FUSED         /* one op each way (op_list.h opm_fwd, opm_bwd_dz) */
} tf_opm_kind;
typedef struct {
    tf_opm_kind kind;
    int chunked;  /* TF_OPM_REF with --chunk-size: the product onward chunk by chunk */
    int outer_op; /* TF_OPM_REF whole: the permuted product as one op (opm_outer) */
    int bwd_op;   /* TF_OPM_REF whole: its backward to da as one op (opm_bwd) */
} tf_opm_plan;

typedef struct {
    tf_opm_plan plan;
    tf_ln_act ln;           /* module layer_norm of m */
    void *a;                /* [B, S, N, co] */
    void *outer_p;          /* [B, N, N, co*co]: TF_OPM_REF whole, else NULL */
    /* weight-first composition (level 3, outer_product.c): */
    void *a_t;              /* a permuted to [B, N, S, co] */
    void *t;                /* T[b,s,p,j,c] = sum_q a[b,s,j,q] Wpair[c, p*co+q] */
} tf_opm_act;

/* The triangle multiplication's composition, decided once per forward from
 * the executor and the parameter layout (tf_trimul_plan_make,
 * triangle_mult.c): the projections as four GEMMs, two (fused) or one
 * (merged) or one op (proj_op); the gating composed (sigmoid, multiply),
 * by kernels per side (gate_kernel) or with the transpose (gate_kernel and
 * fused: gate_cmajor_fwd) */
typedef struct {
    int fused;       /* the triangle fusion: left|right in one GEMM, the gates in one */
    int merged;      /* level 3: projections and gates from one GEMM */
    int proj_op;     /* merged as ops (trimul_proj_fwd/_bwd, trimul_out_fwd/_bwd):
                        proj and out not kept */
    int gate_kernel; /* level 3: the gates by kernels (gate_*), no sigmoid kept */
    int cmajor;      /* level 3: channel-major product, no permute of u */
    int chunked;     /* --chunk-size (triangle_mult_chunk.c): only lr_t and u_p kept */
} tf_trimul_plan;

/* Rows of the triangle multiplication's input (the whole pair, or a chunk of
 * it): their norms, projections and gates (tf_trimul_rows_proj) */
typedef struct {
    tf_ln_act bln, ln;      /* block norm, module norm */
    void *proj, *gate;      /* fused: [rows, 2C] each (left|right); else NULL; merged:
                               proj [rows, 4C] (L R | gate L, gate R), gate = proj + 2C */
    long ld;                /* fused: the row stride of proj and gate */
    void *lp, *rp, *lg, *rg; /* separate: [rows, C] each; else NULL */
} tf_trimul_rows;

typedef struct {
    tf_trimul_plan plan;
    tf_trimul_rows r;       /* the whole pair's (not kept chunked) */
    void *sig;              /* sigmoid of the gates (v1/v2): [rows, 2C] */
    void *lr_t;             /* [2, B, C, N, N]: L_t [B,C,N,N] then R_t; cmajor: [2, C, B, N, N] */
    void *l_t, *r_t;
    void *u_p;              /* [B, N, N, C] the triangle product, channels last; cmajor:
                               [C, B, N, N], i.e. u^T as a [C, rows] matrix */
    void *out, *og, *og_sig; /* output projection, output gate logits, sigmoid (v1/v2) */
} tf_trimul_act;

typedef struct {
    tf_ln_act bln, ln;
    void *qkv, *q, *k, *v;
    void *yt;               /* eager ending: the transposed normalised pair */
    tf_attn_core core;
    void *o_t;              /* eager ending: core output transposed back [B,N,N,C] */
} tf_triattn_act;

typedef struct {
    float *m_in, *z_in;     /* block inputs */
    float *m1, *m2, *m3;    /* after row attn, col attn, transition */
    float *z1, *z2, *z3, *z4, *z5, *z6; /* after opm, tmo, tmi, tas, tae, pt */
    tf_msa_attn_act row, col;
    tf_transition_act mt, pt;
    tf_opm_act opm;
    tf_trimul_act tm[2];
    tf_triattn_act ta[2];
} tf_block_act;

/* The model's view of one training step. */
typedef struct {
    const tf_config *c;
    tf_model_off off;
    float *params, *grads;  /* backend memory, one buffer each */
    /* batch on the backend */
    const int32_t *tokens;  /* [B,S,N] */
    const float *pair;      /* [B,N,N,65] */
    const float *target;    /* [B,N,N] */
    float *loss;            /* backend scalar */
    float *pred;            /* [B,N,N] backend */
    const float *loss_scale; /* backend scalar the loss's gradient is seeded with (NULL: 1) */
    /* activations of the current step */
    float *m0, *z0, *logits;
    tf_block_act *acts;
} tf_model;

void tf_model_offsets(const tf_config *c, const tf_param_info *table, tf_model_off *off);

void tf_msa_row_attn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         tf_msa_attn_act *a, float *m_out, const float *m_in, const float *z);
void tf_msa_row_attn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         const tf_msa_attn_act *a, float *dm, float *dz, const float *m_in,
                         const float *z);
void tf_msa_col_attn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         tf_msa_attn_act *a, float *m_out, const float *m_in);
void tf_msa_col_attn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o,
                         const tf_msa_attn_act *a, float *dm, const float *m_in);
/* transition: x_out = x_in + relu(LN(x_in) W1^T) W2^T; w1/w2/ln are offsets */
void tf_transition_fwd(tf_exec *ex, const tf_model *M, size_t w1, size_t w2, tf_ln_off ln,
                       tf_transition_act *a, float *x_out, const float *x_in, long rows, int C);
void tf_transition_bwd(tf_exec *ex, const tf_model *M, size_t w1, size_t w2, tf_ln_off ln,
                       const tf_transition_act *a, float *dx, const float *x_in, long rows,
                       int C);
void tf_opm_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, tf_opm_act *a,
                float *z_out, const float *z_in, const float *m);
void tf_opm_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, const tf_opm_act *a,
                float *dm, const float *dz, const float *m);
tf_opm_plan tf_opm_plan_make(const tf_exec *ex, const tf_config *c);
/* which: 0 outgoing, 1 incoming. With ex->chunk the rows' parts run chunk by
 * chunk (triangle_mult_chunk.c). */
tf_trimul_plan tf_trimul_plan_make(const tf_exec *ex, const tf_block_off *o, int which, int C);
/* The projections and gates of rows r (their norms done) in plan p's
 * composition; without gate kernels the gates' sigmoid in place. proj_op:
 * nothing (the op forms them) */
void tf_trimul_rows_proj(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         const tf_trimul_plan *p, tf_trimul_rows *r, long rows);
/* Their backward: the gating's, from dproj (in: the gated L|R gradient,
 * channels last; out: the projections') and into dgate (the gates' logits),
 * n = rows * C; then the projections' into dy (added) and the weights */
void tf_trimul_rows_gate_bwd(tf_exec *ex, const tf_trimul_plan *p, const tf_trimul_rows *r,
                             void *dproj, void *dgate, long n);
void tf_trimul_rows_proj_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                             const tf_trimul_plan *p, const tf_trimul_rows *r, void *dy,
                             const void *dproj, const void *dgate, long rows);
/* The output stage of rows r0 .. r0 + n_rows: out = u Wo^T (u_p as the
 * product stores it, whole) and og = y Wog^T, allocated; the gate and
 * residual add (z_out NULL: none; without gate kernels og's sigmoid in
 * place); the gate's backward (og: the sigmoid without gate kernels, else
 * the logits), n = n_rows * C */
void tf_trimul_rows_out(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                        const tf_trimul_plan *p, const tf_trimul_rows *r, const void *u_p,
                        long r0, long n_rows, void **out, void **og);
void tf_trimul_rows_residual(tf_exec *ex, const tf_trimul_plan *p, float *z_out,
                             const float *z_in, const void *out, void *og, long n);
void tf_trimul_rows_out_bwd(tf_exec *ex, const tf_trimul_plan *p, void *dout, void *dog,
                            const void *dz, const void *out, const void *og, long n);
void tf_trimul_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   tf_trimul_act *a, float *z_out, const float *z_in);
void tf_trimul_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                   const tf_trimul_act *a, float *dz, const float *z_in);
/* The batched N x N x N products of the triangle multiplication over (b, c),
 * each operand [B*C, N, N] contiguous (triangle_mult.c) */
void tf_trimul_product(tf_exec *ex, int tA, int tB, const void *A, const void *Bm, void *Cm,
                       int B, int C, int N, const char *name);
void tf_trimul_fwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           tf_trimul_act *a, float *z_out, const float *z_in);
void tf_trimul_bwd_chunked(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                           const tf_trimul_act *a, float *dz, const float *z_in);

/* A pair tensor as a module sees it: nb samples of nx x ny positions (the
 * whole pair: B x N x N; a chunk of rows: 1 x K x N). transposed: the input
 * is the transposed pair (the ending node then attends along its rows). */
typedef struct { int nb, nx, ny, transposed; } tf_pair_shape;
/* which: 0 starting, 1 ending */
void tf_triattn_fwd_shape(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                          tf_triattn_act *a, float *z_out, const float *z_in, tf_pair_shape s);
void tf_triattn_bwd_shape(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                          const tf_triattn_act *a, float *dz, const float *z_in, tf_pair_shape s);
void tf_triattn_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                    tf_triattn_act *a, float *z_out, const float *z_in);
void tf_triattn_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                    const tf_triattn_act *a, float *dz, const float *z_in);

/* --chunk-size (chunk.c): a slab of the pair tensor's rows (b, i), samples
 * b .. b + nb, rows i0 .. i0 + ni of each: a chunk is one sample's K =
 * ex->chunk rows (nb = 1; chunk q by tf_chunk_at), the whole pair one slab
 * of every row (tf_chunk_whole). Its rows are contiguous: the pair's row
 * (b, i0) is the first, nb * ni * N positions in all. */
typedef struct { int b, nb, i0, ni; } tf_chunk;
int tf_chunk_count(const tf_exec *ex, const tf_config *c);
tf_chunk tf_chunk_at(const tf_exec *ex, const tf_config *c, int q);
tf_chunk tf_chunk_whole(const tf_config *c);
/* The slab's first position (b, i0, 0) of the pair, and its positions */
long tf_chunk_first(const tf_config *c, tf_chunk k);
long tf_chunk_positions(const tf_config *c, tf_chunk k);
/* A module's body over one slab of rows (ctx its arguments) */
typedef void (*tf_rows_fn)(tf_exec *ex, void *ctx, tf_chunk k);
/* Runs fn over the pair's rows: chunk by chunk when chunked, else once over
 * the whole pair; the arena is released after each call (what the module
 * keeps it allocates before) */
void tf_chunk_run(tf_exec *ex, const tf_config *c, int chunked, tf_rows_fn fn, void *ctx);
/* The triangle attentions (which 0, 1) and the pair transition (which 2),
 * chunk by chunk: the forward keeps nothing of the module but its output;
 * the backward runs each chunk's forward again, then its backward. Chunks of
 * rows; the ending node's of the transposed pair (its columns). */
void tf_chunked_pair_fwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *z_out, const float *z_in);
void tf_chunked_pair_bwd(tf_exec *ex, const tf_model *M, const tf_block_off *o, int which,
                         float *dz, const float *z_in);

/* Whole model (model.c). forward leaves loss and pred on the backend. */
void tf_model_forward(tf_exec *ex, tf_model *M);
/* Zeroes the gradient buffer, then accumulates every parameter gradient. */
void tf_model_backward(tf_exec *ex, tf_model *M);

/* Shared helpers (model.c) */
static inline const float *tf_P(const tf_model *M, size_t off) { return M->params + off; }
static inline float *tf_G(const tf_model *M, size_t off) { return M->grads + off; }
/* x and dx of type xt (fp32: a residual stream) */
void tf_ln_fwd(tf_exec *ex, const tf_model *M, tf_ln_off ln, tf_ln_act *a, const void *x,
               tf_dtype xt, long rows, int C);
void tf_ln_bwd(tf_exec *ex, const tf_model *M, tf_ln_off ln, const tf_ln_act *a, void *dx,
               tf_dtype xt, const void *dy, const void *x, long rows, int C, int accumulate);
/* A module's block norm then its own norm: b->y = LN(x; bn), a->y = LN(b->y; ln).
 * Level 3 (C <= TF_LN2_MAX_C): one layernorm2 op each way; b->y is then NULL
 * (not stored) and the four statistics rows are one allocation. */
void tf_ln2_fwd(tf_exec *ex, const tf_model *M, tf_ln_off bn, tf_ln_off ln, tf_ln_act *b,
                tf_ln_act *a, const float *x, long rows, int C);
/* Its one-op path's buffers (level 3) for an op that forms them itself
 * (op_list.h trimul_proj_fwd): a->y, the four statistics rows (returned) */
float *tf_ln2_alloc(tf_exec *ex, tf_ln_act *b, tf_ln_act *a, long rows, int C);
/* dx (+= when accumulate) from dy, the gradient of a->y; tmp: [rows, C] scratch
 * for the composed path (the gradient of b->y) */
void tf_ln2_bwd(tf_exec *ex, const tf_model *M, tf_ln_off bn, tf_ln_off ln, const tf_ln_act *b,
                const tf_ln_act *a, float *dx, void *tmp, const void *dy, const float *x,
                long rows, int C, int accumulate);
/* x_out = x_in + inp W^T. Levels 1-2: GEMM into a temporary, then an add (as
 * eager PyTorch); level 3: one GEMM with x_in as its residual input. x_out
 * NULL: nothing (a module's forward run again by --recompute modules, whose
 * output is not wanted). */
void tf_residual_linear(tf_exec *ex, float *x_out, const float *x_in, const void *inp,
                        const float *W, long rows, int in, int out);
/* Q/K/V projections (msa.c), shared with triangle attention. */
void tf_qkv_fwd(tf_exec *ex, const tf_model *M, int fused, size_t wq, const void *x, long rows,
                int C, void **qkv, void **q, void **k, void **v, long *ld);
void tf_qkv_bwd(tf_exec *ex, const tf_model *M, int fused, size_t wq, const void *x, long rows,
                int C, const void *dqkv, void *dx);

#endif
