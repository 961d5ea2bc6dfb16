/* The GPU backend's plan: which engine runs each GEMM and which kernel each
 * attention, as plain data and pure functions (no GPU, no CUDA headers), so
 * that the choice for every call of a problem can be printed and tested on
 * any machine (tests/unit/test_gpu_plan.c).
 *
 *  - tf_gpu_caps: what the device and the build can run (from the device at
 *    backend creation; tests fill it by hand).
 *  - tf_gpu_plan: the policy, built by tf_gpu_plan_default from the caps,
 *    the precision and the kernel level; `--gpu-plan SPEC` overrides fields
 *    (tf_gpu_plan_parse), tests fill it directly.
 *  - tf_gpu_route_gemm / tf_gpu_route_attn: plan + caps + shape -> what runs.
 *    The CUDA backend launches what they return (cuda_gemm.cu, cuda_attn*.cu);
 *    the one choice left to run time is cuBLASLt's: where its heuristic has no
 *    algorithm for a shape, the LT engine falls back to cuBLAS.
 *
 * The default routes are the fastest measured on the H200 (bench/RESULTS.md):
 * fp32 GEMMs with many full 128 x 128 tiles on the wgmma 3xTF32 kernel (on
 * mma.sync without wgmma), the weight gradients (few tiles, long K) as a
 * wide split K on wgmma, everything else and every tf32 GEMM on cuBLASLt;
 * attention on kernel5 (tensor cores) at head size 32, kernel4 for short
 * rows, kernel2/3 above L 128. Half types (bf16, fp16): GEMMs on cuBLASLt
 * (the weight gradients under dw=half on the half wgmma kernel; cuBLAS at
 * levels 1-2), attention on kernel5 where it fits (L <= 128,
 * head size 16 or 32; TF32 products, exact on half inputs), else kernel1. */
#ifndef TF_GPU_PLAN_H
#define TF_GPU_PLAN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the backend's GEMM workspace (cuBLAS, cuBLASLt and the split-K partials
 * share it) and the tensor-core GEMM's split-K tile counters: they bound the
 * splits a route may take */
#define TF_GPU_WORKSPACE_BYTES ((size_t)32 << 20)
#define TF_GPU_MMA_COUNTERS 1024

typedef enum { TF_GPU_VENDOR_NVIDIA = 0, TF_GPU_VENDOR_AMD = 1 } tf_gpu_vendor;

typedef struct {
    tf_gpu_vendor vendor;
    int cc_major, cc_minor; /* compute capability (NVIDIA) */
    int sm_count;           /* multiprocessors (compute units) */
    int warp_size;
    int has_wgmma;     /* sm_90a code in this build and a 9.0 device (probed) */
    int has_mma_sync;  /* mma.sync m16n8k8 TF32 (sm_80+) */
    int has_cp_async;  /* cp.async global -> shared (sm_80+) */
} tf_gpu_caps;

/* caps of an H200 with this build's sm_90a code: what the tests route for */
tf_gpu_caps tf_gpu_caps_h200(void);

/* The activation types the GPU backend takes on such a device (ops.h
 * tf_backend_caps.act_types, bit 1 << tf_dtype, tf_dtype.h's values: fp32 0,
 * bf16 1, fp16 2): fp32 always; on NVIDIA fp16 from compute capability 7.0
 * and bf16 from 8.0 (their tensor cores, which cuBLAS' half GEMMs use); on
 * AMD all three (rocBLAS' f16 and bf16 GEMMs; the HIP targets built, gfx90a
 * and later, multiply both on their matrix cores). */
unsigned tf_gpu_act_types(const tf_gpu_caps *caps);

/* ---- the plan ------------------------------------------------------------ */
/* level-3 GEMMs */
typedef enum {
    TF_GPU_GEMM_AUTO = 0, /* per shape, the fastest measured (tf_gpu_route_gemm) */
    TF_GPU_GEMM_CUBLAS,   /* every GEMM on the library (cuBLASLt, else cuBLAS) */
    TF_GPU_GEMM_MMA,      /* the mma.sync kernel wherever it runs, no wgmma */
    TF_GPU_GEMM_WGMMA,    /* fp32: the wgmma kernel wherever it runs */
    TF_GPU_GEMM_COUNT_
} tf_gpu_gemm_policy;

/* level-3 GEMMs with few tiles over a long K (the weight gradients) */
typedef enum {
    TF_GPU_DW_AUTO = 0, /* fp32: split K one wave wide on wgmma where the tiles are full */
    TF_GPU_DW_MMA,      /* fp32: the same on mma.sync, on every shape */
    TF_GPU_DW_LT,       /* no wide split: routed as the other GEMMs */
    TF_GPU_DW_HALF,     /* as auto, and bf16/fp16 dW = A^T B (fp32 result) split the same
                           way on the half wgmma kernel (not yet timed on a GPU: opt-in) */
    TF_GPU_DW_COUNT_
} tf_gpu_dw_policy;

/* level-3 attention */
typedef enum {
    TF_GPU_ATTN_AUTO = 0, /* per shape (tf_gpu_route_attn) */
    TF_GPU_ATTN_K1,       /* the level-1 kernels: no tensor cores, no cp.async */
    TF_GPU_ATTN_K2,       /* kernel2 everywhere (never kernel4 or 5) */
    TF_GPU_ATTN_K3,       /* kernel3 above L 32, kernel2 below (never kernel4 or 5) */
    TF_GPU_ATTN_K4,       /* kernel4 wherever it runs (L <= 128, d <= 32) */
    TF_GPU_ATTN_K5,       /* kernel5 (tensor cores) wherever it runs (L <= 128, d 16|32) */
    TF_GPU_ATTN_K6,       /* the half types on kernel6 at every L (fp32, tf32: auto) */
    TF_GPU_ATTN_COUNT_
} tf_gpu_attn_policy;

typedef enum { TF_GPU_LANE_AUTO = 0, TF_GPU_LANE_ON, TF_GPU_LANE_OFF, TF_GPU_LANE_COUNT_ } tf_gpu_lane;

/* the outer product mean's kernels in bf16/fp16 (fp32 always FFMA) */
typedef enum {
    TF_GPU_OPM_AUTO = 0,  /* as fused */
    TF_GPU_OPM_FFMA,      /* the FFMA kernels (cuda_opm.cu), composed */
    TF_GPU_OPM_COMPOSED,  /* the product and the backward on mma.sync, composed */
    TF_GPU_OPM_FUSED,     /* one kernel each way where it runs (tf_gpu_opm_fused), else as composed */
    TF_GPU_OPM_COUNT_
} tf_gpu_opm_policy;

/* the transition's MLP in bf16/fp16 (fp32 and tf32 always compose it) */
typedef enum {
    TF_GPU_MLP_AUTO = 0,  /* composed: the fused kernels' step is still the slower */
    TF_GPU_MLP_COMPOSED,  /* LayerNorm and GEMM ops, as fp32 */
    TF_GPU_MLP_FUSED,     /* one fused kernel each way on wgmma where it runs */
    TF_GPU_MLP_COUNT_
} tf_gpu_mlp_policy;

/* the triangle multiplication's projections and gates in bf16/fp16 */
typedef enum {
    TF_GPU_TRIMUL_AUTO = 0, /* as composed */
    TF_GPU_TRIMUL_COMPOSED, /* the merged GEMM and gate_cmajor_fwd/_bwd */
    TF_GPU_TRIMUL_FUSED,    /* one kernel each way where it runs (tf_gpu_trimul_proj) */
    TF_GPU_TRIMUL_COUNT_
} tf_gpu_trimul_policy;

typedef struct tf_gpu_plan_s {
    int level;                /* kernel level 1..3: 1-2 are the baselines (cuBLAS, kernel1) */
    tf_gpu_gemm_policy gemm;
    tf_gpu_dw_policy dw;
    tf_gpu_attn_policy attn;
    tf_gpu_lane lane;         /* the weight-gradient lane (ops.h wgrad_*): AUTO is on */
    tf_gpu_opm_policy opm;
    tf_gpu_mlp_policy mlp;
    tf_gpu_trimul_policy trimul;
    int wgrad_delay_us;       /* tests only: each lane GEMM held back this long (0: none) */
} tf_gpu_plan;

/* The plan for caps, precision (tf32 0/1) and kernel level (1..3). Without
 * mma.sync or cp.async (the caps of another vendor's GPU): the portable plan. */
tf_gpu_plan tf_gpu_plan_default(const tf_gpu_caps *caps, int tf32, int level);
/* No wgmma, no mma.sync, no cp.async: the library GEMMs and kernels any CUDA
 * or HIP GPU runs (level 3 otherwise). */
tf_gpu_plan tf_gpu_plan_portable(void);

/* `--gpu-plan SPEC`: "default", "portable", or comma-separated key=value
 * (gemm=auto|cublas|mma|wgmma, dw=auto|mma|lt|half, attn=auto|k1|k2|k3|k4|k5|k6,
 * lane=auto|on|off, opm=auto|ffma|composed|fused, mlp=auto|composed|fused,
 * trimul=auto|composed|fused, wgrad_delay_us=0..100000), each applied over the plan
 * named before it ("portable,lane=off"; without a name, over default). The
 * result holds AUTO for what is not given: tf_gpu_plan_apply puts it over the
 * device's default. 0 ok; 1 with one line in err naming what is accepted. */
int tf_gpu_plan_parse(const char *spec, tf_gpu_plan *out, char *err, size_t errlen);
/* base with every field of over that is not AUTO (level: base's) */
tf_gpu_plan tf_gpu_plan_apply(tf_gpu_plan base, const tf_gpu_plan *over);
/* "gemm=auto,dw=auto,attn=auto,lane=auto,opm=auto,mlp=auto,trimul=auto" (and
 * wgrad_delay_us when set),
 * a spec tf_gpu_plan_parse reads back */
void tf_gpu_plan_format(const tf_gpu_plan *p, char *out, size_t n);
/* the accepted keys and values, one line (help text, errors) */
const char *tf_gpu_plan_help(void);

/* ---- GEMM routing -------------------------------------------------------- */
typedef enum {
    TF_GPU_ENG_CUBLAS = 0, /* cublasGemmStridedBatchedEx (R copied into C first) */
    TF_GPU_ENG_LT,         /* cuBLASLt (no algorithm for the shape: cuBLAS); at levels
                              1-2 only a RELU product, fused */
    TF_GPU_ENG_MMA,        /* the mma.sync kernel (cuda_gemm_mma.cu) */
    TF_GPU_ENG_WGMMA,      /* the wgmma kernel (cuda_gemm_wgmma.cu) */
    TF_GPU_ENG_WIDE_MMA,   /* wide split K on mma.sync, partials added by a reduce kernel */
    TF_GPU_ENG_WIDE_WGMMA, /* wide split K on wgmma, the same reduce */
    TF_GPU_ENG_COUNT_
} tf_gpu_engine;

/* a GEMM call as the router sees it (row-major, ops.h tf_gemm_args) */
typedef struct {
    int M, N, K, batch;
    int neg_stride; /* batch > 1 with a negative stride */
    int relu;       /* the RELU epilogue */
    int beta_zero;  /* beta == 0 (C not read) */
    int half;       /* bf16/fp16 operands or result: the library engines, and for the
                       weight gradients the half wgmma kernel (the other tensor-core
                       kernels multiply fp32 as 3xTF32 or TF32) */
    int ta, tb;     /* A stored [K, M], B stored [N, K] (tf_gemm_args transA, transB) */
    int c_half;     /* the result in the half type (else fp32) */
} tf_gpu_gemm_shape;

typedef struct {
    tf_gpu_engine engine;
    int tile;      /* MMA / WIDE_MMA: 128 (8 warps) or 64 (4 warps); wgmma: 128 */
    int splits;    /* split K (1: none); MMA / WGMMA add the splits in their last block */
    int kchunk;    /* K per split (a multiple of 32) */
    int x3;        /* the tensor-core kernels: 3xTF32 (fp32), else one TF32 product */
    int wg_short;  /* WGMMA: the two-blocks-an-SM schedule for short K */
    int half;      /* WIDE_WGMMA: the half types' kernel (cuda_gemm_wgmma_dw.cu) */
} tf_gpu_gemm_route;

tf_gpu_gemm_route tf_gpu_route_gemm(const tf_gpu_plan *p, const tf_gpu_caps *caps,
                                    const tf_gpu_gemm_shape *s, int tf32);
const char *tf_gpu_engine_name(tf_gpu_engine e);
/* "wgmma 128 x3", "wide-wgmma 128 s12 x3", "lt", ...: the route in a word or three */
void tf_gpu_gemm_route_format(const tf_gpu_gemm_route *r, char *out, size_t n);

/* ---- attention routing --------------------------------------------------- */
typedef enum {
    TF_GPU_ATTN_KERNEL1 = 1, /* cuda_attn_fwd.cu / cuda_attn_bwd.cu */
    TF_GPU_ATTN_KERNEL2,     /* cuda_attn2_*.cu, register tiles */
    TF_GPU_ATTN_KERNEL3,     /* cuda_attn2_*.cu, 64 threads, 8x8 tiles (L > 32) */
    TF_GPU_ATTN_KERNEL4,     /* cuda_attn4_*.cu, one block per (b, o, h) */
    TF_GPU_ATTN_KERNEL5,     /* cuda_attn5_*.cu, mma.sync (TF32) */
    TF_GPU_ATTN_KERNEL6      /* cuda_attn6_*.cu, the half types' flash attention (m16n8k16) */
} tf_gpu_attn_kernel;

typedef struct {
    int L, d;     /* rows (= keys) and head size */
    int backward; /* the backward (else the forward) */
    int half;     /* bf16/fp16 elements: kernel6 or kernel1, the kernels that take them */
} tf_gpu_attn_shape;

tf_gpu_attn_kernel tf_gpu_route_attn(const tf_gpu_plan *p, const tf_gpu_caps *caps,
                                     const tf_gpu_attn_shape *s, int tf32);
const char *tf_gpu_attn_kernel_name(tf_gpu_attn_kernel k);

/* The outer product mean's backward and product for half types on mma.sync
 * (cuda_opm_mma.cu: exact products, fp32 sums) at level 3 with co 32 unless
 * the plan says opm=ffma; else the FFMA kernels (cuda_opm.cu), which the fp32
 * path always takes. */
int tf_gpu_opm_on_mma(const tf_gpu_plan *p, const tf_gpu_caps *caps, int co, int half);

/* The outer product mean's forward as one kernel (cuda_opm_fused.cu, op_list.h
 * opm_fwd: the [B, N, N, co, co] product never in memory) for half types at
 * level 3 on NVIDIA's mma.sync and cp.async under opm=auto or fused (faster
 * than the composition: bench/RESULTS.md); shapes TF_OPM_FUSED_OP_SHAPE, S up to
 * TF_GPU_OPM_FUSED_MAX_S (its a rows staged whole in shared memory) */
#define TF_GPU_OPM_FUSED_MAX_S 64
int tf_gpu_opm_fused(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half);

/* The transition's MLP as one fused kernel each way (cuda_transition.cu,
 * wgmma: op_list.h transition_fwd/_bwd, which the model then calls) for half
 * types at level 3 on sm_90a code where the plan says mlp=fused; else, and
 * always in fp32 and tf32, the model composes LayerNorm and GEMM ops. */
int tf_gpu_mlp_fused(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half);

/* The triangle multiplication's projections and gates as one kernel each
 * way (cuda_trimul_proj.cu, op_list.h trimul_proj_fwd/_bwd: proj never stored)
 * and its output stage as one more (cuda_trimul_out.cu, trimul_out_fwd/_bwd)
 * for half types at level 3 on NVIDIA's mma.sync and cp.async under
 * trimul=fused; else (auto: the fused kernels' step is still the slower)
 * the merged GEMM and gate_cmajor ops. */
int tf_gpu_trimul_proj(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half);

#ifdef __cplusplus
}
#endif
#endif
