/* What the CUDA backend prefers and provides (ops.h tf_backend_caps).
 *
 * At level 3 the outer product mean runs its product and its backward as
 * single ops (opm_outer, opm_bwd), and in fp32 the triangle multiplication's
 * projections and gates as one GEMM (in tf32 cuBLAS' TF32 GEMMs they would
 * replace are faster); bf16 and fp16 run the transition's MLP as one op each
 * way on mma.sync. The weight gradients run on a lane of their own.
 * Batches are drawn by a host thread, staged on the side queue during the
 * backward, and the phases issued back to back; phases can be captured as
 * graphs. */
#include "cuda_caps.h"
#include "cuda_common.h"

#include <string.h>

extern "C" size_t tf_cu_wgrad_lane_bytes(void)
{
    return TF_CU_WORKSPACE_BYTES + TF_CU_SCRATCH_FLOATS * sizeof(float) +
           TF_CU_MMA_COUNTERS * sizeof(int);
}

extern "C" void tf_cu_caps(const tf_backend *be, tf_backend_caps *c)
{
    const int v3 = be->kernel_level >= 3;
    memset(c, 0, sizeof *c);
    c->name = "cuda";
    c->device_memory = 1;
    c->opm_bwd_op = v3;
    c->opm_outer_op = v3;
    c->trimul_merged = v3 && !be->tf32;
    c->wgrad_lane = v3 && be->plan.lane != TF_GPU_LANE_OFF;
    c->wgrad_lane_bytes = tf_cu_wgrad_lane_bytes();
    c->prefetch_batches = 1;
    c->stage_batches = 1;
    c->pipelined_phases = 1;
    c->graphs = 1;
    c->max_head_dim = 64; /* the attention kernels keep a head's row in registers */
    c->act_types = tf_gpu_act_types(&be->caps); /* gpu_plan.c: by the device */
    /* the half types' transition as one kernel each way (cuda_transition.cu) */
    if (tf_gpu_mlp_fused(&be->plan, &be->caps, 1))
        c->transition_op = c->act_types & (1u << TF_BF16 | 1u << TF_F16);
    /* the triangle multiplication's projections and gates (cuda_trimul_proj.cu) */
    if (v3 && c->trimul_merged && tf_gpu_trimul_proj(&be->plan, &be->caps, 1))
        c->trimul_proj_op = c->act_types & (1u << TF_BF16 | 1u << TF_F16);
    /* and the outer product mean (cuda_opm_fused*.cu) */
    if (v3 && tf_gpu_opm_fused(&be->plan, &be->caps, 1)) {
        c->opm_fused_op = c->act_types & (1u << TF_BF16 | 1u << TF_F16);
        c->opm_fused_max_s = TF_GPU_OPM_FUSED_MAX_S;
    }
    c->ln_stream_copy = 1; /* every LayerNorm backward kernel stores dxh (cuda_layernorm.cu) */
}

extern "C" void tf_cu_graph_destroy(tf_backend *be, void *graph)
{
    (void)be;
    tf_cuda_graph_destroy(graph);
}
