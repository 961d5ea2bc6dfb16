/* The analytic cost of one op from its shapes: FLOPs and the minimum bytes it
 * must move (every operand read once, every result written once, in bytes of
 * its element type: the GEMM's ab_type and c_type, fp32 for the other ops).
 * Each formula is written once, here (inline functions): an op's cost is
 * added in one place.
 *
 * Conventions (the unit tests count by hand against them):
 *  - a multiply-add is 2 FLOPs; exp, sqrt, a division are 1 FLOP each;
 *  - a GEMM is 2*M*N*K per batch entry (the beta*C and epilogue terms are
 *    elementwise, left out as tf_flops_forward leaves them out); its bytes
 *    are A, B, C written, C (or R) read when beta != 0, aux read; an operand
 *    with batch stride 0 (a shared weight) is read once;
 *  - "minimum" means compulsory traffic: a cache that held everything would
 *    still move these bytes, so bytes / time is a lower bound on achieved
 *    bandwidth and FLOPs / bytes an upper bound on arithmetic intensity. */
#ifndef TF_MODEL_OP_COST_H
#define TF_MODEL_OP_COST_H

#include "backend/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double flops, bytes;
} tf_op_cost;

/* flops, and bytes from a count of floats */
static inline tf_op_cost tf_cost_floats(double flops, double floats) {
    tf_op_cost c = {flops, floats * 4.0};
    return c;
}

/* elements of one operand over the batch: once when its batch stride is 0 */
static inline double tf_cost_over_batch(double per, long stride, int batch) {
    return per * (batch > 1 && stride == 0 ? 1.0 : (double)batch);
}

/* FLOPs per element of the elementwise ops (the convention above) */
#define TF_FLOPS_SIGMOID 4.0 /* negate, exp, add, divide */
#define TF_FLOPS_GATE_FWD (TF_FLOPS_SIGMOID + 1.0)
#define TF_FLOPS_GATE_BWD (TF_FLOPS_SIGMOID + 5.0) /* da = dy s; dg = dy a s (1 - s) */
#define TF_FLOPS_GATE_RES (TF_FLOPS_GATE_FWD + 1.0)

static inline tf_op_cost tf_cost_gemm(const tf_gemm_args *a) {
    int batch = a->batch > 0 ? a->batch : 1;
    double M = a->M, N = a->N, K = a->K;
    double fl = 2.0 * M * N * K * batch;
    /* bytes: A and B in ab_type, C (and R, aux) in c_type */
    const double eab = (double)tf_dtype_size(a->ab_type), ec = (double)tf_dtype_size(a->c_type);
    double c = tf_cost_over_batch(M * N, a->strideC, batch) * ec;
    double x = (tf_cost_over_batch(M * K, a->strideA, batch) +
                tf_cost_over_batch(K * N, a->strideB, batch)) * eab + c;
    if (a->beta != 0.0f) x += c; /* C or R read */
    if (a->aux) x += c;
    tf_op_cost r = {fl, x};
    return r;
}

/* Flash attention over T = nb*no*nh heads of L x L scores, head size d:
 * S = scale q k^T (+ bias), softmax, P v. Softmax per score: scale, max, subtract, exp, sum, divide (6), +1 for the
 * bias add. Bytes: q, k, v read, out and lse written, the bias read once
 * (shared across o). */
static inline tf_op_cost tf_cost_attn_fwd(const tf_attn_args *a) {
    double T = (double)a->nb * a->no * a->nh, L = a->L, d = a->d;
    double per = a->bias ? 7.0 : 6.0;
    double fl = T * (4.0 * L * L * d + per * L * L);
    double x = 4.0 * T * L * d + T * L;
    if (a->bias) x += (double)a->nb * a->nh * L * L;
    return tf_cost_floats(fl, x);
}

/* Backward recomputes S (2 L^2 d), then dV, dP, dQ, dK (4 x 2 L^2 d); per
 * score: recompute P (scale, bias, subtract, exp: 4), dS = P (dP - D) (2),
 * and D = rowsum(dO o) is 2 per output element. Bytes: q, k, v, out, dout
 * read, dq, dk, dv written, lse read, dbias written once. */
static inline tf_op_cost tf_cost_attn_bwd(const tf_attn_args *a) {
    double T = (double)a->nb * a->no * a->nh, L = a->L, d = a->d;
    double fl = T * (10.0 * L * L * d + 6.0 * L * L + 2.0 * L * d);
    double x = 8.0 * T * L * d + T * L;
    if (a->bias) x += (double)a->nb * a->nh * L * L; /* bias read */
    if (a->dbias) x += (double)a->nb * a->nh * L * L;
    return tf_cost_floats(fl, x);
}

/* per element: mean (1), variance (subtract, square-add: 3), normalise
 * (subtract, multiply: 2), affine (multiply-add: 2); per row a sqrt and a
 * division. x read, out written, mean and rstd written, gamma and beta read. */
static inline tf_op_cost tf_cost_layernorm_fwd(long rows, int C) {
    double n = (double)rows * C;
    return tf_cost_floats(8.0 * n + 2.0 * rows, 2.0 * n + 2.0 * rows + 2.0 * C);
}

/* per element: xhat (2), g = dout gamma (1), the two row sums (3),
 * dx = rstd (g - m1 - xhat m2) (4), dgamma and dbeta (3). dout, x read, dx
 * written (and read when accumulating), mean, rstd, gamma read, dgamma and
 * dbeta read and written. */
static inline tf_op_cost tf_cost_layernorm_bwd(long rows, int C, int accumulate) {
    double n = (double)rows * C;
    double x = (accumulate ? 4.0 : 3.0) * n + 2.0 * rows + 5.0 * C;
    return tf_cost_floats(13.0 * n, x);
}

/* two LayerNorms; y1 never leaves the op */
static inline tf_op_cost tf_cost_layernorm2_fwd(long rows, int C) {
    double n = (double)rows * C;
    return tf_cost_floats(16.0 * n + 4.0 * rows, 2.0 * n + 4.0 * rows + 4.0 * C);
}

/* the two backwards and the recomputation of y1 (6: xhat and the affine) */
static inline tf_op_cost tf_cost_layernorm2_bwd(long rows, int C, int accumulate) {
    double n = (double)rows * C;
    double x = (accumulate ? 4.0 : 3.0) * n + 4.0 * rows + 11.0 * C;
    return tf_cost_floats(32.0 * n, x);
}

/* max, subtract, exp, sum, divide */
static inline tf_op_cost tf_cost_softmax_fwd(long rows, int cols) {
    double n = (double)rows * cols;
    return tf_cost_floats(5.0 * n, 2.0 * n);
}

/* dot (2), subtract and multiply (2) */
static inline tf_op_cost tf_cost_softmax_bwd(long rows, int cols) {
    double n = (double)rows * cols;
    return tf_cost_floats(4.0 * n, 3.0 * n);
}

/* n elements; reads inputs operands, writes outputs results of n, flops_per
 * each */
static inline tf_op_cost tf_cost_elementwise(long n, int inputs, int outputs, double flops_per) {
    return tf_cost_floats(flops_per * (double)n, (double)(inputs + outputs) * (double)n);
}

/* pair_bias_fwd: z [rows, C] and W read, bias [H, rows] of tsize bytes an
 * element written, 2 C flops an element of bias */
static inline tf_op_cost tf_cost_pair_bias_fwd(long rows, int C, int H, size_t tsize) {
    tf_op_cost c = tf_cost_floats(2.0 * (double)rows * C * H, (double)rows * C + (double)H * C);
    c.bytes += (double)H * (double)rows * (double)tsize;
    return c;
}

/* pair_bias_bwd: dz [rows, C] read and written, dbias [H, rows] of tsize
 * bytes an element and W read, 2 H flops an element of dz; db32 written
 * when wide */
static inline tf_op_cost tf_cost_pair_bias_bwd(long rows, int C, int H, size_t tsize, int wide) {
    const double db32 = wide ? (double)H * rows : 0.0;
    tf_op_cost c = tf_cost_floats(2.0 * (double)rows * C * H, 2.0 * (double)rows * C + (double)H * C + db32);
    c.bytes += (double)H * (double)rows * (double)tsize;
    return c;
}

static inline tf_op_cost tf_cost_permute(long n, int accumulate) {
    return tf_cost_floats(accumulate ? (double)n : 0.0, (accumulate ? 3.0 : 2.0) * (double)n);
}

/* outer_p = A_b^T A_b / S: 2 S (N co)^2 per batch entry, a read once, outer_p written */
static inline tf_op_cost tf_cost_opm_outer(int B, int S, int N, int co) {
    double nc = (double)N * co;
    return tf_cost_floats(2.0 * B * S * nc * nc, (double)B * S * nc + (double)B * nc * nc);
}

/* The outer product mean's forward as one op (op_list.h opm_fwd), es the
 * activations' bytes: the product's and the projection's FLOPs; a and W
 * read once, z_in read and z_out written (fp32); the product never stored */
static inline tf_op_cost tf_cost_opm_fwd(int B, int S, int N, int co, int cz, int es) {
    const double nc = (double)N * co, pairs = (double)B * N * N;
    tf_op_cost c = {2.0 * B * S * nc * nc + 2.0 * pairs * co * co * cz,
                    es * ((double)B * S * nc + (double)cz * co * co) + 8.0 * pairs * cz};
    return c;
}

/* Its backward from dz (op_list.h opm_bwd_dz): the product again, dop = dz W,
 * dW += dz^T outer_p and da's two terms; dz, a and W read once, da written,
 * dW read and written (fp32) */
static inline tf_op_cost tf_cost_opm_bwd_dz(int B, int S, int N, int co, int cz, int es) {
    const double nc = (double)N * co, pairs = (double)B * N * N, K = (double)co * co;
    tf_op_cost c = {6.0 * B * S * nc * nc + 4.0 * pairs * K * cz,
                    es * (pairs * cz + 2.0 * B * S * nc + cz * K) + 8.0 * cz * K};
    return c;
}

/* The triangle multiplication's projections and gates (op_list.h
 * trimul_proj_fwd/_bwd), es the activations' bytes: the forward's two
 * LayerNorms and GEMM of 5C columns (4C and og's), x read (fp32), y, the
 * gated L|R and og written; the backward's GEMM of 4C columns, y and dlr_t
 * read, dproj written */
static inline tf_op_cost tf_cost_trimul_proj(long rows, int C, int backward, int es) {
    const double n = (double)rows * C;
    tf_op_cost c;
    if (backward) {
        c.flops = 8.0 * n * C + 8.0 * n;
        c.bytes = es * (n + 2.0 * n + 4.0 * n + 4.0 * C * C);
    } else {
        const tf_op_cost ln = tf_cost_layernorm2_fwd(rows, C);
        c.flops = 10.0 * n * C + 4.0 * n + ln.flops;
        c.bytes = 4.0 * n + 16.0 * rows + es * (n + 2.0 * n + n + 5.0 * C * C);
    }
    return c;
}

/* The triangle multiplication's output stage (op_list.h trimul_out_fwd/_bwd),
 * es the activations' bytes: the forward's GEMM of C columns, u and og read,
 * the stream read and written (fp32); the backward's two GEMMs (out again,
 * du), dz (fp32), u and og read, dout, dog and du written */
static inline tf_op_cost tf_cost_trimul_out(long rows, int C, int backward, int es) {
    const double n = (double)rows * C;
    tf_op_cost c;
    if (backward) {
        c.flops = 4.0 * n * C + 8.0 * n;
        c.bytes = 4.0 * n + es * (2.0 * n + 3.0 * n + (double)C * C);
    } else {
        c.flops = 2.0 * n * C + 4.0 * n;
        c.bytes = 8.0 * n + es * (2.0 * n + (double)C * C);
    }
    return c;
}

/* The transition's MLP (op_list.h transition_fwd/_bwd), es the activations'
 * bytes: the forward's LayerNorm and two GEMMs of
 * 8 rows C^2 each, x read and x_out written (fp32), the weights read once;
 * the backward's three GEMMs (h again, dh, dxn) and the LayerNorm's, x, dy,
 * dx (read and written) and xn, h, dh written for the weight gradients. */
static inline tf_op_cost tf_cost_transition_fwd(long rows, int C, int es) {
    const double n = (double)rows * C, w = 8.0 * C * C * es / 4.0;
    tf_op_cost c = tf_cost_layernorm_fwd(rows, C);
    c.flops += 16.0 * n * C + 4.0 * n * 4;
    c.bytes = 4.0 * (2.0 * n + 2.0 * rows + 2.0 * C + w);
    return c;
}
static inline tf_op_cost tf_cost_transition_bwd(long rows, int C, int es) {
    const double n = (double)rows * C, w = 8.0 * C * C * es / 4.0;
    tf_op_cost c = tf_cost_layernorm_bwd(rows, C, 1);
    c.flops += 24.0 * n * C + 8.0 * n * 4;
    c.bytes = 4.0 * (3.0 * n + n * es / 4.0 * (1 + 1 + 4 + 4) + 2.0 * rows + 4.0 * C + w);
    return c;
}

/* da = (1/S) a (dop + dop^T): 2 S (N co)^2 per batch entry and the sum of the
 * two dop terms; dop and a read, da written */
static inline tf_op_cost tf_cost_opm_bwd(int B, int S, int N, int co) {
    double nc = (double)N * co;
    return tf_cost_floats(2.0 * B * S * nc * nc + (double)B * nc * nc,
                          (double)B * nc * nc + 2.0 * B * S * nc);
}

/* y[o,m,i] += x[o,i] */
static inline tf_op_cost tf_cost_add_bcast_mid(long outer, long mid, long inner) {
    double n = (double)outer * mid * inner;
    return tf_cost_floats(n, 2.0 * n + (double)outer * inner);
}

/* y[o,i] (+)= sum_m x[o,m,i] */
static inline tf_op_cost tf_cost_sum_mid(long outer, long mid, long inner, int accumulate) {
    double n = (double)outer * mid * inner, o = (double)outer * inner;
    return tf_cost_floats(n, n + (accumulate ? 2.0 : 1.0) * o);
}

/* a gather: the tokens and the rows read, the rows written */
static inline tf_op_cost tf_cost_embed_fwd(long n, int C) {
    return tf_cost_floats(0.0, (double)n + 2.0 * (double)n * C);
}

/* a scatter-add: tokens and dout read, the table read and written */
static inline tf_op_cost tf_cost_embed_bwd(long n, int C, int vocab) {
    return tf_cost_floats((double)n * C, (double)n + (double)n * C + 2.0 * (double)vocab * C);
}

/* pred = dmax sigmoid(l) (5), (pred - t)^2 summed (3); logit, target read,
 * pred written, the loss (one float) */
static inline tf_op_cost tf_cost_mse_head_fwd(long n) {
    return tf_cost_floats((TF_FLOPS_SIGMOID + 4.0) * (double)n, 3.0 * (double)n + 1.0);
}

/* dlogit = 2/n (pred - t) pred (1 - pred/dmax): 6 */
static inline tf_op_cost tf_cost_mse_head_bwd(long n) {
    return tf_cost_floats(6.0 * (double)n, 3.0 * (double)n);
}

/* decay (1), m (3), v (4), sqrt, two divisions, an add, a multiply-subtract
 * (6): 14; p, g, m, v read, p, m, v written */
static inline tf_op_cost tf_cost_adamw(long n) {
    return tf_cost_floats(14.0 * (double)n, 7.0 * (double)n);
}

#ifdef __cplusplus
}
#endif
#endif
