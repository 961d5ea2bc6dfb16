/* The ops: the entries of the op table (tf_ops, ops.h) that compute, each
 * declared once, here, as TF_OP(return type, name, (parameters)), with its
 * contract in the conventions of ops.h. An X-macro list: the includer
 * defines TF_OP, includes this file (after ops.h's types; no include
 * guard) and gets one expansion per op; the file #undefs TF_OP at its end.
 * From it come:
 *   ops.h                 the members      ret (*name) params;
 *   cpu/cpu_internal.h    CPU prototypes   ret tf_cpu_<name> params;
 *   cpu/cpu_backend.c     the CPU table    .name = tf_cpu_<name>,
 *   cuda/cuda_common.h    CUDA and HIP     ret tf_cu_t_<name> params;
 *   cuda/cuda_backend.cu  their table      o.name = tf_cu_t_<name>;
 * So every backend defines every op under its prefix (a missing one fails
 * to link). One without a kernel for an op defines an entry that fails, and
 * its caps keep the model from calling it (the HIP build's stand-ins,
 * hip/tf_hip_nv_only.cu).
 *
 * Adding an op: its entry here; tf_cpu_<name> in a CPU op file;
 * tf_cu_t_<name> in the .cu file of its kernels (an fp32 / half dispatch as
 * cuda_typed_ops.cu writes it for the older ops); the executor's wrapper
 * tf_x_<name> (model/exec.h, exec.c: the memory it touches, its name for
 * the profiler) and its cost (model/op_cost.h); the module that calls it;
 * its tests. The backend's own entries (memory, queues, graphs, the
 * weight-gradient lane) are not ops: ops.h declares them, and each backend
 * fills them in its own words, leaving the optional ones NULL. */
#ifndef TF_OP
#error "define TF_OP(ret, name, params) before including backend/op_list.h"
#endif

/* ---- dense algebra ---- */
TF_OP(void, gemm, (tf_backend *be, const tf_gemm_args *a, const char *name))

/* ---- layer norm over the last axis (C), eps given; saves mean/rstd [rows] ----
 * fwd: out = (x-mean)*rstd*gamma + beta (out may not alias x)
 * bwd: dx = (accumulate ? dx + : ) LN'(dout); dgamma += sum dout*xhat; dbeta += sum dout
 * x and dx are of type xt, out and dout of type yt (a residual stream is
 * normalised into a half activation); the rest is fp32.
 * dxh (NULL: not wanted; given only with xt fp32): each element of dx as
 * stored, also rounded to yt into dxh (the bits a convert of dx gives: a
 * residual stream's gradient for the next module's half activations). */
TF_OP(void, layernorm_fwd, (tf_backend *be, void *out, float *mean, float *rstd, const void *x,
                            const float *gamma, const float *beta, long rows, int C, float eps,
                            tf_dtype xt, tf_dtype yt))
TF_OP(void, layernorm_bwd, (tf_backend *be, void *dx, void *dxh, float *dgamma, float *dbeta,
                            const void *dout, const void *x, const float *mean, const float *rstd,
                            const float *gamma, long rows, int C, int accumulate, tf_dtype xt,
                            tf_dtype yt))

/* ---- two LayerNorms in a row over the same C (v3: a module's block norm,
 * then its own norm): y1 = LN(x; g1, b1), out = LN(y1; g2, b2), eps given.
 * stats [4, rows]: mean1, rstd1, mean2, rstd2, saved by fwd for bwd; y1 is
 * not stored (bwd recomputes it from x and stats). out may not alias x.
 * bwd: dx (= or += when accumulate) is the gradient through both from dout;
 * dg1, db1, dg2, db2 accumulate; dxh as layernorm_bwd's. One pass each way
 * instead of two, and one [rows, C] tensor less to keep. C <= TF_LN2_MAX_C (the model composes two
 * layernorm ops for wider rows). Types as layernorm's (xt: x, dx; yt:
 * out, dout); y1 is fp32 in registers, not rounded to yt. ---- */
TF_OP(void, layernorm2_fwd, (tf_backend *be, void *out, float *stats, const void *x,
                             const float *g1, const float *b1, const float *g2, const float *b2,
                             long rows, int C, float eps, tf_dtype xt, tf_dtype yt))
TF_OP(void, layernorm2_bwd, (tf_backend *be, void *dx, void *dxh, float *dg1, float *db1,
                             float *dg2, float *db2, const void *dout, const void *x,
                             const float *stats, const float *g1, const float *b1, const float *g2,
                             long rows, int C, int accumulate, tf_dtype xt, tf_dtype yt))

/* ---- softmax over the last axis (materialised scores path, v1) ----
 * fwd: y = softmax(x) (y may alias x); bwd: dx = y * (dy - sum(dy*y)) (dx may alias dy) */
TF_OP(void, softmax_fwd, (tf_backend *be, void *y, const void *x, long rows, int cols, tf_dtype t))
TF_OP(void, softmax_bwd, (tf_backend *be, void *dx, const void *dy, const void *y, long rows,
                          int cols, tf_dtype t))

/* ---- fused attention (v2/v3) ---- */
TF_OP(void, attn_fwd, (tf_backend *be, const tf_attn_args *a))
TF_OP(void, attn_bwd, (tf_backend *be, const tf_attn_args *a))

/* ---- data movement ---- */
TF_OP(void, permute, (tf_backend *be, void *out, const void *in, const tf_permute_args *a))
/* y[o, m, i] += x[o, i] for m < mid (broadcast add over the middle axis) */
TF_OP(void, add_bcast_mid, (tf_backend *be, void *y, const void *x, long outer, long mid,
                            long inner, tf_dtype t))
/* y[o, i] (= or +=) sum_m x[o, m, i] (summed in fp32, rounded once) */
TF_OP(void, sum_mid, (tf_backend *be, void *y, const void *x, long outer, long mid, long inner,
                      int accumulate, tf_dtype t))

/* ---- elementwise, contiguous n (all may alias in place), every tensor of type t ---- */
/* y = a + b */
TF_OP(void, add, (tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t))
/* y = a * b */
TF_OP(void, mul, (tf_backend *be, void *y, const void *a, const void *b, long n, tf_dtype t))
/* y = alpha x */
TF_OP(void, scale, (tf_backend *be, void *y, const void *x, float alpha, long n, tf_dtype t))
TF_OP(void, act_fwd, (tf_backend *be, tf_act act, void *y, const void *x, long n, tf_dtype t))
/* dx = dy * act'(.) written in terms of the activation OUTPUT y */
TF_OP(void, act_bwd, (tf_backend *be, tf_act act, void *dx, const void *dy, const void *y, long n,
                      tf_dtype t))
/* fused gating (v3): y = a * sigmoid(g); gate_bwd: da = dy*sigmoid(g),
 * dg = dy*a*s*(1-s) (both assigned) */
TF_OP(void, gate_fwd, (tf_backend *be, void *y, const void *a, const void *g, long n, tf_dtype t))
TF_OP(void, gate_bwd, (tf_backend *be, void *da, void *dg, const void *dy, const void *a,
                       const void *g, long n, tf_dtype t))
/* gated L|R to channel-major (v3: the triangle multiplication's gating and
 * the transpose before its product, in one pass each way), s in {0, 1},
 * rows r = b*inner + p (inner divides rows, B = rows / inner):
 *   fwd: lr_t[s, b, c, p] = a[r*ld + s*C + c] * sigmoid(g[r*ld + s*C + c])
 *   bwd, dy = dlr_t[s, b, c, p]: da[r*ld + s*C + c] = dy*sig,
 *        dg[r*ld + s*C + c] = dy*a*sig*(1-sig)   (assigned)
 * lr_t, dlr_t [2, B, C, inner] (inner = rows: [2, C, rows]); the
 * arithmetic of gate_fwd/_bwd, so the results are those of gate_* then a
 * permute. Outputs alias no input. Every tensor of type t. */
TF_OP(void, gate_cmajor_fwd, (tf_backend *be, void *lr_t, const void *a, const void *g, long ld,
                              long rows, long inner, int C, tf_dtype t))
TF_OP(void, gate_cmajor_bwd, (tf_backend *be, void *da, void *dg, const void *dlr_t, const void *a,
                              const void *g, long ld, long rows, long inner, int C, tf_dtype t))
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
TF_OP(void, trimul_proj_fwd, (tf_backend *be, void *lr_t, void *og, void *y, float *stats,
                              const float *x, const float *g1, const float *b1, const float *g2,
                              const float *b2, float eps, const void *W4, const void *Wog,
                              long rows, long ldt, int C, tf_dtype t))
TF_OP(void, trimul_proj_bwd, (tf_backend *be, void *dproj, const void *dlr_t, const void *y,
                              const void *W4, long rows, long ldt, int C, tf_dtype t))
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
TF_OP(void, trimul_out_fwd, (tf_backend *be, float *z_out, const float *z_in, const void *u_t,
                             const void *Wo, const void *og, long rows, long ldt, int C,
                             tf_dtype t))
TF_OP(void, trimul_out_bwd, (tf_backend *be, void *dout, void *dog, void *du, const float *dz,
                             const void *u_t, const void *Wo, const void *og, long rows, long ldt,
                             int C, tf_dtype t))
/* fused gate + residual (v3): out = res + a * sigmoid(g) (out may be res);
 * out and res are fp32 (a residual stream), a and g of type t */
TF_OP(void, gate_residual_fwd, (tf_backend *be, float *out, const float *res, const void *a,
                                const void *g, long n, tf_dtype t))

/* ---- outer product mean backward (v3 on CUDA): the gradient of a through
 * outer[b,(i,p),(j,q)] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q], read straight from
 * the gradient dop [B, N, N, co, co] of its permuted form (dop[b,i,j,p,q]):
 *   da[b,s,i,p] = (1/S) sum_{j,q} a[b,s,j,q] (dop[b,i,j,p,q] + dop[b,j,i,q,p])
 * a, da [B, S, N, co]; da assigned. One pass instead of a permute of dop
 * and two GEMMs that each read it. Every tensor of type t. ---- */
TF_OP(void, opm_bwd, (tf_backend *be, void *da, const void *dop, const void *a, int B, int S, int N,
                      int co, tf_dtype t))
/* ---- outer product mean's product, in its permuted form (v3 on CUDA):
 *   outer_p[b,i,j,p,q] = (1/S) sum_s a[b,s,i,p] a[b,s,j,q]
 * a [B, S, N, co], outer_p [B, N, N, co, co] assigned: the GEMM
 * A_b^T A_b / S and the permute of its [B, N, co, N, co] result in one
 * pass that writes outer_p once. Every tensor of type t. ---- */
TF_OP(void, opm_outer, (tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                        tf_dtype t))
/* ---- the outer product mean's forward from a as one op (v3, the types
 * of caps.opm_fused_op, TF_OPM_FUSED_OP_SHAPE):
 *   z_out[b,i,j,c] = z_in[b,i,j,c] + sum_{p,q} outer_p[b,i,j,p,q] W[c, p*co+q]
 * outer_p as opm_outer computes it (rounded to t) but never stored. a
 * [B, S, N, co] and W [cz, co*co] of type t; z_in, z_out [B, N, N, cz]
 * fp32 (z_out may be z_in). The CPU's op is that composition of its
 * ops (opm_outer, the GEMM with R): the reference. ---- */
TF_OP(void, opm_fwd, (tf_backend *be, float *z_out, const float *z_in, const void *a, const void *W,
                      int B, int S, int N, int co, int cz, tf_dtype t))
/* ---- and its backward from dz [B, N, N, cz] (type t) as one op:
 *   dop = dz W (rounded to t), da = opm_bwd's of dop (assigned, type t),
 *   dW [cz, co*co] (fp32) += dz^T outer_p (outer_p as opm_outer's)
 * neither outer_p nor dop stored. The CPU's op is that composition. ---- */
TF_OP(void, opm_bwd_dz, (tf_backend *be, void *da, float *dW, const void *dz, const void *a,
                         const void *W, int B, int S, int N, int co, int cz, tf_dtype t))

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
TF_OP(void, transition_fwd, (tf_backend *be, float *x_out, float *mean, float *rstd, const float *x,
                             const float *gamma, const float *beta, const void *W1, const void *W2,
                             long rows, int C, float eps, tf_dtype t))
TF_OP(void, transition_bwd, (tf_backend *be, float *dx, float *dgamma, float *dbeta, void *xn,
                             void *h, void *dh, const void *dy, const float *x, const float *mean,
                             const float *rstd, const float *gamma, const float *beta,
                             const void *W1, const void *W2, long rows, int C, tf_dtype t))

/* ---- embedding: out[t, :] = table[tok[t], :] (zeros for a token outside [0, vocab));
 * bwd: dtable[v,:] += sum over t with tok[t]==v (deterministic) ---- */
TF_OP(void, embed_fwd, (tf_backend *be, float *out, const float *table, const int32_t *tok, long n,
                        int C, int vocab))
TF_OP(void, embed_bwd, (tf_backend *be, float *dtable, const float *dout, const int32_t *tok,
                        long n, int C, int vocab))

/* ---- distance head + MSE loss ----
 * fwd: pred[i] = dmax * sigmoid(logit[i]); loss[0] = mean_i (pred[i]-target[i])^2
 *      (loss is backend memory, one float; deterministic reduction)
 * bwd: dlogit[i] = seed * 2/n * (pred[i]-target[i]) * pred[i] * (1 - pred[i]/dmax),
 *      seed = *loss_scale (backend memory, hyper + TF_HYPER_LOSS_SCALE; NULL: 1)
 * All fp32. */
TF_OP(void, mse_head_fwd, (tf_backend *be, float *pred, float *loss, const float *logit,
                           const float *target, long n, float dmax))
TF_OP(void, mse_head_bwd, (tf_backend *be, float *dlogit, const float *pred, const float *target,
                           long n, float dmax, const float *loss_scale))

/* ---- AdamW (PyTorch semantics) over one contiguous range ----
 * g = grad * hyper[TF_HYPER_GRAD_MUL] (the loss scale undone; 1 multiplies
 * exactly), then p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), bc_i = 1 - b_i^step.
 * When hyper[TF_HYPER_NONFINITE] != 0, p, m and v are left as they are.
 * The hyper-parameters are read from BACKEND memory at run time (so a captured
 * CUDA graph sees the current step): hyper[TF_HYPER_COUNT], the enum above.
 * ph (NULL: none; t bf16 or fp16): each updated p also stored rounded to t
 * (the GEMMs' weight copy: the bits a convert of p gives), left as it is
 * with p on a skipped step. */
TF_OP(void, adamw, (tf_backend *be, float *p, void *ph, const float *g, float *m, float *v, long n,
                    const float *hyper, tf_dtype t))

/* ---- the pair bias of the MSA row attention from the pair stream, head-
 * major (z [rows, C] and W [H, C] fp32, H <= TF_PAIR_BIAS_MAX_H):
 *   bias[h rows + r] = sum_c z[r C + c] W[h C + c]
 * the sum over c in order by fused multiply-adds (fmaf) from 0, rounded
 * once to t. One pass over z, where a narrow fp32 GEMM and (half types) a
 * conversion of its result ran. ---- */
TF_OP(void, pair_bias_fwd, (tf_backend *be, void *bias, const float *z, const float *W, long rows,
                            int C, int H, tf_dtype t))
/* ---- the pair bias' backward into the pair stream (the MSA row
 * attention's bias, head-major: dbias [H, rows] of type t, W [H, C] fp32,
 * H <= TF_PAIR_BIAS_MAX_H):
 *   dz[r, c] += sum_h dbias[h rows + r] W[h C + c]
 * the sum over h in order by fused multiply-adds (fmaf) from 0, then added
 * to dz (fp32). dzh (NULL: not wanted; t half): the new dz rounded to t, as
 * layernorm_bwd's dxh; db32 (NULL: not wanted): dbias widened to fp32 (for
 * the weight gradient's fp32 GEMM). One pass over dz, where a GEMM, a
 * conversion of dbias and one of the stream's gradient ran. ---- */
TF_OP(void, pair_bias_bwd, (tf_backend *be, float *dz, void *dzh, float *db32, const void *dbias,
                            const float *W, long rows, int C, int H, tf_dtype t))

/* ---- element types and the finiteness check ---- */
/* dst[i] = src[i] converted (i < n): widening is exact, narrowing rounds
 * to nearest even (tf_dtype.h); st == dt copies. No overlap. */
TF_OP(void, convert, (tf_backend *be, void *dst, tf_dtype dt, const void *src, tf_dtype st, long n))
/* flag[0] = 1 when some x[i] (i < n) is inf or NaN; otherwise flag is
 * left as it is (so calls over several ranges OR together). flag is
 * backend memory (hyper + TF_HYPER_NONFINITE). */
TF_OP(void, check_finite, (tf_backend *be, float *flag, const float *x, long n))

#undef TF_OP
