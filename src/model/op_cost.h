/* The analytic cost of one op from its shapes: FLOPs and the minimum bytes it
 * must move (every operand read once, every result written once, in bytes of
 * its element type: the GEMM's ab_type and c_type, fp32 for the other ops).
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

tf_op_cost tf_cost_gemm(const tf_gemm_args *a);
/* flash attention over T = nb*no*nh heads of L x L scores, head size d */
tf_op_cost tf_cost_attn_fwd(const tf_attn_args *a);
tf_op_cost tf_cost_attn_bwd(const tf_attn_args *a);
tf_op_cost tf_cost_layernorm_fwd(long rows, int C);
tf_op_cost tf_cost_layernorm_bwd(long rows, int C, int accumulate);
tf_op_cost tf_cost_layernorm2_fwd(long rows, int C);
tf_op_cost tf_cost_layernorm2_bwd(long rows, int C, int accumulate);
tf_op_cost tf_cost_softmax_fwd(long rows, int cols);
tf_op_cost tf_cost_softmax_bwd(long rows, int cols);
/* n elements; reads inputs operands, writes one result of n, flops_per each */
tf_op_cost tf_cost_elementwise(long n, int inputs, int outputs, double flops_per);
tf_op_cost tf_cost_permute(long n, int accumulate);
tf_op_cost tf_cost_opm_outer(int B, int S, int N, int co);
tf_op_cost tf_cost_trimul_proj(long rows, int C, int backward, int es);
tf_op_cost tf_cost_trimul_out(long rows, int C, int backward, int es);
tf_op_cost tf_cost_opm_fwd(int B, int S, int N, int co, int cz, int es);
tf_op_cost tf_cost_opm_bwd_dz(int B, int S, int N, int co, int cz, int es);
tf_op_cost tf_cost_transition_fwd(long rows, int C, int es);
tf_op_cost tf_cost_transition_bwd(long rows, int C, int es);
tf_op_cost tf_cost_opm_bwd(int B, int S, int N, int co);
/* y[o,m,i] += x[o,i]; y[o,i] (+)= sum_m x[o,m,i] */
tf_op_cost tf_cost_add_bcast_mid(long outer, long mid, long inner);
tf_op_cost tf_cost_sum_mid(long outer, long mid, long inner, int accumulate);
tf_op_cost tf_cost_embed_fwd(long n, int C);
tf_op_cost tf_cost_embed_bwd(long n, int C, int vocab);
tf_op_cost tf_cost_mse_head_fwd(long n);
tf_op_cost tf_cost_mse_head_bwd(long n);
tf_op_cost tf_cost_adamw(long n);

/* FLOPs per element of the elementwise ops (the convention above) */
#define TF_FLOPS_SIGMOID 4.0 /* negate, exp, add, divide */
#define TF_FLOPS_GATE_FWD (TF_FLOPS_SIGMOID + 1.0)
#define TF_FLOPS_GATE_BWD (TF_FLOPS_SIGMOID + 5.0) /* da = dy s; dg = dy a s (1 - s) */
#define TF_FLOPS_GATE_RES (TF_FLOPS_GATE_FWD + 1.0)

#ifdef __cplusplus
}
#endif
#endif
