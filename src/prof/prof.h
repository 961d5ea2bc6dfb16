/* Profiling hooks the model and trainer call. A NULL tf_prof means profiling
 * is off: every hook is then one branch (plus an NVTX range on CUDA builds,
 * which costs nothing without a tool attached).
 *
 * Regions nest: forward_pass > block_0 > msa_row_attention > msa_qkv ...
 * Ops (one backend launch each) are bracketed by tf_prof_op_begin/end; on the
 * CPU the host timer around an op is the kernel's duration, on CUDA the device
 * truth comes from CUPTI. */
#ifndef TF_PROF_H
#define TF_PROF_H

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef TF_NO_PROF_HOOKS
/* benchmark build (CMake TF_PROF_HOOKS=OFF): the hooks are not even a branch */
static inline void tf_region_push(tf_prof *p, const char *name) { (void)p, (void)name; }
static inline void tf_region_pop(tf_prof *p) { (void)p; }
static inline void tf_prof_op_begin(tf_prof *p, const char *name) { (void)p, (void)name; }
static inline void tf_prof_op_end(tf_prof *p) { (void)p; }
static inline void tf_prof_op_cost(tf_prof *p, const char *name, double flops, double bytes) {
    (void)p, (void)name, (void)flops, (void)bytes;
}
#else
void tf_region_push(tf_prof *p, const char *name);
void tf_region_pop(tf_prof *p);
/* Called around every op issued to the backend. name is the op's stable kernel
 * name on the CPU ("sgemm_nt", "layernorm_fwd", ...). */
void tf_prof_op_begin(tf_prof *p, const char *name);
void tf_prof_op_end(tf_prof *p);
/* The analytic cost of the op being issued (model/op_cost.h: FLOPs and the
 * minimum bytes, from its shapes), keyed by its region path and name. One
 * step's worth is kept (the first step that issues ops: every step issues
 * the same ones, and a replayed graph issues none from the host). */
void tf_prof_op_cost(tf_prof *p, const char *name, double flops, double bytes);
#endif
/* Step boundaries (step index, warm-up or timed). */
void tf_prof_step_begin(tf_prof *p, long step, int warmup);
void tf_prof_step_end(tf_prof *p, long step);
/* CUDA --counters: steps must issue their kernels eagerly (no graph capture
 * or replay) until the counters are collected. */
int tf_prof_wants_eager(const tf_prof *p);
/* Is the current step the counter step (kernel replay, not timed)? */
int tf_prof_counter_step(const tf_prof *p);

#ifdef __cplusplus
}
#endif
#endif
