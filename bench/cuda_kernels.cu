/* Micro-benchmark of the CUDA backend's own kernels, each kernel version on the
 * model's shapes: attention fwd/bwd, permute, LayerNorm bwd (and fwd), and the
 * elementwise ops. Runs on an NVIDIA GPU (built for sm_90 / H200).
 *
 * Versions are picked the way the trainer picks them, through the backend's
 * kernel level: level 1 runs kernel1 (v1/v2's kernels), level 3 kernel2; for
 * attention with L > 32 the level-3 rows force kernel2 and kernel3 at every
 * head size (plans attn=k2 and attn=k3, src/backend/gpu_plan.h: an A/B of
 * the two; the default takes kernel3 for head size 17..32 only), and
 * attention with L <= 128 gets a row for kernel4 (attn=k4, one block per
 * (b, o, h); the default there for head size 16 and 32).
 * Each measurement captures REPS calls of the op into a CUDA graph (so host
 * launch gaps do not count), launches it twice to warm up, then 20 times
 * between CUDA events on the backend's stream; it prints the median time per
 * call, the effective bandwidth (bytes each call must read + write once) and,
 * for attention, TFLOP/s (fwd 4 L^2 d per head; bwd 10 L^2 d: S recomputed,
 * dP, dV, dK, dQ; dbias' recomputation not counted).
 *
 * Build and run on the GPU machine: bench/cuda_kernels.sh [groups], groups
 * among attn permute ln ew gemm (default all). It compiles this file with the
 * backend's sources (nothing else of tinyfold is needed) into $OUT or /tmp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_attn4.h" /* tf_attn4_smem_bytes */
#include "backend/cuda/cuda_common.h"
#include "backend/gpu_plan.h"

#define REPS 10
#define TIMED 20
#define WARM 2

/* [1] level 1, [2] level 3 with attention kernel2 for L > 32, [3] level 3
 * with kernel3 there, [4] level 3 with kernel4 for L <= 128 */
static tf_backend *g_be[5];
static tf_backend *g_k5_be[2]; /* attn=k5: fp32 (3xTF32), tf32 */

/* a backend at level, precision and plan (NULL: the default) */
static tf_backend *make_be(int level, int tf32, tf_gpu_gemm_policy gemm, tf_gpu_dw_policy dw,
                           tf_gpu_attn_policy attn);
static const tf_ops *g_ops;

static void die(const char *what)
{
    fprintf(stderr, "cuda_kernels: %s\n", what);
    exit(1);
}

static float *dalloc(size_t n)
{
    void *p = NULL;
    if (g_ops->alloc(g_be[3], &p, n * sizeof(float))) die("out of device memory");
    return (float *)p;
}
/* normal(0, sd) values (fixed seed), uploaded */
static float *drand(size_t n, float sd, unsigned seed)
{
    std::vector<float> h(n);
    unsigned long long s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i < n; i += 2) {
        double u[2];
        for (int k = 0; k < 2; ++k) {
            s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
            u[k] = ((s * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
        }
        const double r = sqrt(-2.0 * log(u[0] + 1e-300)), t = 6.283185307179586 * u[1];
        h[i] = (float)(sd * r * cos(t));
        if (i + 1 < n) h[i + 1] = (float)(sd * r * sin(t));
    }
    float *d = dalloc(n);
    g_ops->upload(g_be[3], d, h.data(), n * sizeof(float));
    return d;
}
static void dfree(float *p) { g_ops->free(g_be[3], p); }

/* ---- timing ---- */
struct job {
    std::function<void(tf_backend *)> fn;
    tf_backend *be;
};
static void run_job(void *arg)
{
    job *j = (job *)arg;
    for (int r = 0; r < REPS; ++r) j->fn(j->be);
}

/* median microseconds per call of fn on backend g_be[k] */
static double time_be(tf_backend *be, const std::function<void(tf_backend *)> &fn);
static double time_op(int k, const std::function<void(tf_backend *)> &fn)
{
    return time_be(g_be[k], fn);
}
static double time_be(tf_backend *be, const std::function<void(tf_backend *)> &fn)
{
    job j{fn, be};
    fn(be); /* first call outside the graph (nothing lazy left for capture) */
    TF_CUDA_CHECK(cudaStreamSynchronize(be->stream));
    void *ge = NULL;
    if (tf_cuda_graph_capture(be, run_job, &j, &ge)) die("graph capture failed");
    cudaEvent_t a, b;
    TF_CUDA_CHECK(cudaEventCreate(&a));
    TF_CUDA_CHECK(cudaEventCreate(&b));
    for (int w = 0; w < WARM; ++w) tf_cuda_graph_launch(be, ge);
    std::vector<float> ms;
    for (int t = 0; t < TIMED; ++t) {
        TF_CUDA_CHECK(cudaEventRecord(a, be->stream));
        tf_cuda_graph_launch(be, ge);
        TF_CUDA_CHECK(cudaEventRecord(b, be->stream));
        TF_CUDA_CHECK(cudaEventSynchronize(b));
        float x = 0.f;
        TF_CUDA_CHECK(cudaEventElapsedTime(&x, a, b));
        ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    tf_cuda_graph_destroy(ge);
    TF_CUDA_CHECK(cudaEventDestroy(a));
    TF_CUDA_CHECK(cudaEventDestroy(b));
    return 1000.0 * 0.5 * (ms[TIMED / 2 - 1] + ms[TIMED / 2]) / REPS;
}

/* one table row per version: names[k] for g_be[k] (NULL: not run); bytes and
 * flops per call (flops 0: not printed) */
static void report(const char *op, const char *shape, const char *const names[5], double bytes,
                   double flops, const std::function<void(tf_backend *)> &fn)
{
    double t1 = 0, t3 = 0;
    for (int k = 1; k <= 4; ++k) {
        if (!names[k]) continue;
        const double us = time_op(k, fn);
        if (k == 1) t1 = us;
        if (k == 3) t3 = us;
        printf("%-14s %-34s %s %-30s %9.2f us %6.0f GB/s", op, shape, k == 1 ? "L1" : "L3",
               names[k], us, bytes / (us * 1e3));
        if (flops > 0) printf(" %6.2f TFLOP/s", flops / (us * 1e6));
        if (k > 1) printf("  x%.2f vs L1", t1 / us);
        if (k == 4 && t3 > 0) printf("  x%.2f vs %s", t3 / us, names[3]);
        printf("\n");
        fflush(stdout);
    }
}
static void report2(const char *op, const char *shape, const char *v1, const char *v3,
                    double bytes, double flops, const std::function<void(tf_backend *)> &fn)
{
    const char *const names[5] = {NULL, v1, NULL, v3, NULL};
    report(op, shape, names, bytes, flops, fn);
}

/* ---- attention ---- */
/* [B, X, Y, H, d] with row stride ld, attended along Y (row) or X (column),
 * as src/model/attention.c lays it out */
static tf_attn_view aview(float *p, int X, int Y, long ld, int colwise)
{
    tf_attn_view v;
    v.p = p;
    v.sb = (long)X * Y * ld;
    v.so = colwise ? ld : (long)Y * ld;
    v.sl = colwise ? (long)Y * ld : ld;
    return v;
}

static void bench_attn(const char *name, int B, int X, int Y, int H, int d, int colwise,
                       int bias)
{
    const int C = H * d, L = colwise ? X : Y, O = colwise ? Y : X;
    const long rows = (long)B * X * Y, ld = 3L * C, nh = (long)B * O * H;
    float *qkv = drand(rows * ld, 1.f, 1), *dqkv = dalloc(rows * ld);
    float *out = dalloc(rows * C), *dout = drand(rows * C, 1.f, 2);
    float *lse = dalloc(nh * L), *work = dalloc(nh * L);
    float *bb = bias ? drand((long)B * L * L * H, 1.f, 3) : NULL;
    float *db = bias ? dalloc((long)B * L * L * H) : NULL;
    tf_attn_args a;
    memset(&a, 0, sizeof a);
    a.nb = B, a.no = O, a.nh = H, a.L = L, a.d = d, a.scale = 1.f / sqrtf((float)d);
    a.q = aview(qkv, X, Y, ld, colwise), a.k = aview(qkv + C, X, Y, ld, colwise);
    a.v = aview(qkv + 2 * C, X, Y, ld, colwise), a.out = aview(out, X, Y, C, colwise);
    a.dq = aview(dqkv, X, Y, ld, colwise), a.dk = aview(dqkv + C, X, Y, ld, colwise);
    a.dv = aview(dqkv + 2 * C, X, Y, ld, colwise), a.dout = aview(dout, X, Y, C, colwise);
    if (bias)
        a.bias = bb, a.bias_sb = (long)L * L * H, a.bias_si = (long)L * H, a.bias_sj = H,
        a.bias_sh = 1, a.dbias = db;
    a.lse = lse, a.work = work;
    char shape[96];
    snprintf(shape, sizeof shape, "%s B%d O%d H%d L%d d%d", name, B, O, H, L, d);
    const double hd = (double)nh * L * d * 4; /* one [L, d] operand of every head, bytes */
    const double fl = (double)nh * L * L * d;
    g_ops->attn_fwd(g_be[3], &a); /* out and lse for the backward */
    const bool k3 = L > 32; /* kernel3 exists for the t64 class only */
    const bool k4 = L <= 128 && d <= 32; /* kernel4: one block per (b, o, h) */
    const char *const fw[5] = {NULL, "attn_fwd_kernel1", k3 ? "attn_fwd_kernel2" : NULL,
                               k3 ? "attn_fwd_kernel3" : "attn_fwd_kernel2",
                               k4 ? "attn_fwd_kernel4" : NULL};
    const char *const bw[5] = {NULL, "attn_bwd_{dot,dkdv,dq}1 (+dbias)",
                               k3 ? "attn_bwd_kernel2 (+dq, dbias)" : NULL,
                               k3 ? "attn_bwd_kernel3 (+dq, dbias)" : "attn_bwd_kernel2 (+dbias)",
                               k4 ? (bias ? "attn_bwd_kernel4 (+dbias2)" : "attn_bwd_kernel4")
                                  : NULL};
    if (k4) /* what limits kernel4's blocks per SM, with its registers (ptxas above) */
        printf("# %s: kernel4 shared memory %zu B forward, %zu B backward per block\n", shape,
               tf_attn4_smem_bytes(L, d, 0), tf_attn4_smem_bytes(L, d, 1));
    report("attn_fwd", shape, fw, 4 * hd + nh * L * 4.0, 4 * fl,
           [&](tf_backend *be) { g_ops->attn_fwd(be, &a); });
    report("attn_bwd", shape, bw, 8 * hd + 2.0 * nh * L * 4 + (bias ? 2.0 * B * H * L * L * 4 : 0),
           10 * fl, [&](tf_backend *be) { g_ops->attn_bwd(be, &a); });
    if (L <= 128 && (d == 16 || d == 32)) { /* kernel5: forward and backward on the tensor cores */
        double us[2];
        for (int k = 0; k < 2; ++k)
            us[k] = time_be(g_k5_be[k], [&](tf_backend *be) { g_ops->attn_fwd(be, &a); });
        printf("%-14s %-34s L3 %-30s %9.2f us %6.2f TFLOP/s (3xTF32); tf32 %.2f us %6.2f TFLOP/s\n",
               "attn_fwd", shape, "attn_fwd_kernel5", us[0], 4 * fl / (us[0] * 1e6), us[1],
               4 * fl / (us[1] * 1e6));
        for (int k = 0; k < 2; ++k)
            us[k] = time_be(g_k5_be[k], [&](tf_backend *be) { g_ops->attn_bwd(be, &a); });
        printf("%-14s %-34s L3 %-30s %9.2f us %6.2f TFLOP/s (3xTF32); tf32 %.2f us %6.2f TFLOP/s\n",
               "attn_bwd", shape, bias ? "attn_bwd_kernel5 (+dbias2)" : "attn_bwd_kernel5", us[0],
               10 * fl / (us[0] * 1e6), us[1], 10 * fl / (us[1] * 1e6));
        fflush(stdout);
    }
    dfree(qkv), dfree(dqkv), dfree(out), dfree(dout), dfree(lse), dfree(work);
    if (bias) dfree(bb), dfree(db);
}

/* ---- permute ---- */
static void bench_perm(const char *name, int rank, const int *dims, const int *perm)
{
    tf_permute_args p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    long n = 1;
    for (int k = 0; k < rank; ++k) p.dims[k] = dims[k], p.perm[k] = perm[k], n *= dims[k];
    float *in = drand(n, 1.f, 4), *out = dalloc(n);
    char shape[96];
    int len = snprintf(shape, sizeof shape, "%s [", name);
    for (int k = 0; k < rank; ++k) len += snprintf(shape + len, sizeof shape - len, "%s%d", k ? "," : "", dims[k]);
    snprintf(shape + len, sizeof shape - len, "]");
    report2("permute", shape, "permute_{kernel1,transpose1}", "permute_{rows,transpose}2",
           8.0 * n, 0, [&](tf_backend *be) { g_ops->permute(be, out, in, &p); });
    dfree(in), dfree(out);
}

/* ---- LayerNorm ---- */
static void bench_ln(const char *name, long rows, int C)
{
    const long n = rows * C;
    float *x = drand(n, 1.f, 5), *g = drand(C, 1.f, 6), *bt = drand(C, 1.f, 7);
    float *y = dalloc(n), *mu = dalloc(rows), *rs = dalloc(rows), *dout = drand(n, 1.f, 8);
    float *dx = dalloc(n), *dg = dalloc(C), *db = dalloc(C);
    char shape[96];
    snprintf(shape, sizeof shape, "%s rows%ld C%d", name, rows, C);
    report2("layernorm_fwd", shape, "layernorm_fwd_kernel1", "layernorm_fwd_kernel2",
           4.0 * (2 * n + 2 * rows), 0,
           [&](tf_backend *be) { g_ops->layernorm_fwd(be, y, mu, rs, x, g, bt, rows, C, 1e-5f, TF_F32, TF_F32); });
    report2("layernorm_bwd", shape, "dparams1+reduce1+dx1 (3 launches)",
           "layernorm_bwd2 (1 launch)", 4.0 * (3 * n + 2 * rows), 0, [&](tf_backend *be) {
               g_ops->layernorm_bwd(be, dx, dg, db, dout, x, mu, rs, g, rows, C, 0, TF_F32, TF_F32);
           });
    dfree(x), dfree(g), dfree(bt), dfree(y), dfree(mu), dfree(rs), dfree(dout), dfree(dx);
    dfree(dg), dfree(db);
}

/* ---- elementwise (one version: float4 grid-stride at every level) ---- */
static void bench_ew(long n)
{
    float *a = drand(n, 1.f, 9), *b = drand(n, 1.f, 10), *c = drand(n, 1.f, 11);
    float *y = dalloc(n), *z = dalloc(n);
    char shape[64];
    snprintf(shape, sizeof shape, "n=%ld", n);
    const double f = 4.0 * n;
    report2("add", shape, "add_kernel1", "add_kernel1", 3 * f, 0,
           [&](tf_backend *be) { g_ops->add(be, y, a, b, n, TF_F32); });
    report2("mul", shape, "mul_kernel1", "mul_kernel1", 3 * f, 0,
           [&](tf_backend *be) { g_ops->mul(be, y, a, b, n, TF_F32); });
    report2("act_bwd(relu)", shape, "relu_bwd_kernel1", "relu_bwd_kernel1", 3 * f, 0,
           [&](tf_backend *be) { g_ops->act_bwd(be, TF_ACT_RELU, y, a, b, n, TF_F32); });
    report2("gate_fwd", shape, "gate_fwd_kernel1", "gate_fwd_kernel1", 3 * f, 0,
           [&](tf_backend *be) { g_ops->gate_fwd(be, y, a, b, n, TF_F32); });
    report2("gate_bwd", shape, "gate_bwd_kernel1", "gate_bwd_kernel1", 5 * f, 0,
           [&](tf_backend *be) { g_ops->gate_bwd(be, y, z, a, b, c, n, TF_F32); });
    report2("gate_residual", shape, "gate_residual_fwd_kernel1", "gate_residual_fwd_kernel1",
           4 * f, 0, [&](tf_backend *be) { g_ops->gate_residual_fwd(be, c, c, a, b, n, TF_F32); });
    dfree(a), dfree(b), dfree(c), dfree(y), dfree(z);
}

/* ---- GEMM: cuBLASLt vs the tensor-core kernel, fp32 and tf32 ----
 * The model's shapes (R = pair rows B*N*N, Rm = MSA rows B*S*N): forward
 * x W^T (NT), backward dX = dY W (NN) and dW = dY^T X (TN, K = rows), the
 * triangle product per (b, channel), the outer product per b. Then the
 * weight gradients ("dW split" rows: dW += dy^T x, few tiles, K = rows) on
 * cuBLASLt, on wgmma with split K capped at 16 added by the last split
 * (gemm=wgmma dw=lt: 1.5-10x slower than cuBLASLt), and with split K one
 * wave wide added by a separate kernel (dw=auto, the default: wgmma on full
 * tiles; and dw=mma: mma.sync), and in tf32 cuBLASLt against the wide split
 * on mma.sync with one TF32 product (dw=mma). */
static tf_backend *g_gemm_be[9]; /* lt fp32, mma fp32, lt tf32, mma tf32, wgmma fp32 (split K
                                    <= 16), the default fp32 (twice), wide split K on mma.sync
                                    (fp32, tf32) */
/* Times one GEMM shape on the backends g_gemm_be[be_k[0..n)] into us[];
 * fl: its FLOPs. Returns 0 (nothing timed) when TF_BENCH_GEMM=text is set
 * and the name does not contain it (e.g. to put one shape under ncu). */
static int bench_gemm_time(const char *name, int ta, int tb, int M, int N, int K, int batch,
                           float beta, const int *be_k, int n, double *us, double *fl)
{
    const char *only = getenv("TF_BENCH_GEMM");
    if (only && *only && !strstr(name, only)) return 0;
    const long ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *A = drand((size_t)ar * ac * batch, 1.f, 1), *B = drand((size_t)br * bc * batch, 1.f, 2);
    float *C = drand((size_t)M * N * batch, 1.f, 3);
    tf_gemm_args a = {ta, tb, M, N, K, 1.f, beta, A, ac, ar * ac, B, bc, br * bc,
                      C, N, (long)M * N, batch, TF_EPI_NONE, NULL, NULL, 0, TF_F32, TF_F32};
    *fl = 2.0 * M * N * K * batch;
    for (int k = 0; k < n; ++k)
        us[k] = time_be(g_gemm_be[be_k[k]], [&](tf_backend *be) { g_ops->gemm(be, &a, "bench"); });
    dfree(A), dfree(B), dfree(C);
    return 1;
}
static void bench_gemm_one(const char *name, int ta, int tb, int M, int N, int K, int batch,
                           float beta)
{
    static const int be_k[6] = {0, 1, 2, 3, 4, 5};
    double us[6], fl;
    if (!bench_gemm_time(name, ta, tb, M, N, K, batch, beta, be_k, 6, us, &fl)) return;
    printf("%-22s %c%c M=%-6d N=%-5d K=%-6d b=%-4d fp32: lt %8.2f us mma %8.2f us (x%.2f, "
           "%5.1f TF/s) wgmma %8.2f us (x%.2f, %5.1f TF/s; default plan %8.2f)  tf32: lt %8.2f "
           "mma %8.2f (x%.2f, %5.1f TF/s)\n",
           name, ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, batch, us[0], us[1], us[0] / us[1],
           fl / (us[1] * 1e6), us[4], us[0] / us[4], fl / (us[4] * 1e6), us[5], us[2], us[3],
           us[2] / us[3], fl / (us[3] * 1e6));
    fflush(stdout);
}
/* a weight gradient: cuBLASLt, wgmma split K <= 16, wide split K (auto, mma);
 * tf32: cuBLASLt, wide split K (mma) */
static void bench_gemm_dw(const char *name, int ta, int tb, int M, int N, int K, int batch,
                          float beta)
{
    static const int be_k[6] = {0, 4, 6, 7, 2, 8};
    double us[6], fl;
    if (!bench_gemm_time(name, ta, tb, M, N, K, batch, beta, be_k, 6, us, &fl)) return;
    printf("%-26s %c%c M=%-4d N=%-4d K=%-6d b=%-2d fp32: lt %8.2f us (%5.1f TF/s) wgmma split<=16 "
           "%8.2f us (x%.2f)  wide auto %8.2f us (x%.2f, %5.1f TF/s)  wide mma %8.2f us (x%.2f)  "
           "tf32: lt %8.2f us wide %8.2f us (x%.2f, %5.1f TF/s)\n",
           name, ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, batch, us[0], fl / (us[0] * 1e6), us[1],
           us[0] / us[1], us[2], us[0] / us[2], fl / (us[2] * 1e6), us[3], us[0] / us[3], us[4],
           us[5], us[4] / us[5], fl / (us[5] * 1e6));
    fflush(stdout);
}
static void bench_gemm(const char *p, int B, int N, int S)
{
    const int R = B * N * N, Rm = B * S * N;
    char nm[64];
#define G(label, ...)                                   \
    do {                                                \
        snprintf(nm, sizeof nm, "%s %s", p, label);     \
        bench_gemm_one(nm, __VA_ARGS__);                \
    } while (0)
    G("pair x W^T", 0, 1, R, 128, 128, 1, 0.f);
    G("pair proj x4", 0, 1, R, 512, 128, 1, 0.f);
    G("pair lin2 fwd", 0, 1, R, 128, 512, 1, 0.f);
    G("pair dX", 0, 0, R, 128, 128, 1, 0.f);
    G("pair dX K512", 0, 0, R, 128, 512, 1, 0.f);
    G("pair dW", 1, 0, 128, 128, R, 1, 1.f);
    G("pair dW 512", 1, 0, 512, 128, R, 1, 1.f);
    G("tri product", 0, 1, N, N, N, B * 128, 0.f);
    G("outer product", 1, 0, N * 32, N * 32, S, B, 0.f);
    G("outer_to_pair", 0, 1, R, 128, 1024, 1, 0.f);
    G("outer_to_pair dW", 1, 0, 128, 1024, R, 1, 1.f);
    G("msa x W^T", 0, 1, Rm, 64, 64, 1, 0.f);
    G("msa qkv", 0, 1, Rm, 192, 64, 1, 0.f);
    G("msa dW", 1, 0, 64, 64, Rm, 1, 1.f);
#undef G
#define D(label, ...)                                           \
    do {                                                        \
        snprintf(nm, sizeof nm, "%s dW split %s", p, label);    \
        bench_gemm_dw(nm, __VA_ARGS__);                         \
    } while (0)
    D("128x128", 1, 0, 128, 128, R, 1, 1.f);
    D("512x128", 1, 0, 512, 128, R, 1, 1.f);
    D("128x512", 1, 0, 128, 512, R, 1, 1.f);
    D("msa 64x64", 1, 0, 64, 64, Rm, 1, 1.f);
    D("msa 256x64", 1, 0, 256, 64, Rm, 1, 1.f);
    D("msa 192x64", 1, 0, 192, 64, Rm, 1, 1.f);
    D("opm 32x64", 1, 0, 32, 64, Rm, 1, 1.f);
    D("256x128", 1, 0, 256, 128, R, 1, 1.f);
    D("384x128", 1, 0, 384, 128, R, 1, 1.f);
    D("128x1024", 1, 0, 128, 1024, R, 1, 1.f);
#undef D
}

static int want(int argc, char **argv, const char *group)
{
    if (argc < 2) return 1;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], group)) return 1;
    return 0;
}

static tf_backend *make_be(int level, int tf32, tf_gpu_gemm_policy gemm, tf_gpu_dw_policy dw,
                           tf_gpu_attn_policy attn)
{
    tf_backend_opts o;
    tf_gpu_plan p;
    tf_backend *be = NULL;
    char err[256];
    memset(&o, 0, sizeof o);
    memset(&p, 0, sizeof p);
    p.gemm = gemm, p.dw = dw, p.attn = attn;
    o.kernel_level = level;
    o.tf32 = tf32;
    o.gpu_plan = p;
    if (tf_cuda_backend_create(&be, &g_ops, &o, err, sizeof err)) die(err);
    return be;
}

int main(int argc, char **argv)
{
    char err[256];
    if (!tf_cuda_backend_available(err, sizeof err)) {
        printf("SKIP: %s\n", err);
        return 0;
    }
    static const tf_gpu_attn_policy attn_k[5] = {TF_GPU_ATTN_AUTO, TF_GPU_ATTN_AUTO,
                                                  TF_GPU_ATTN_K2, TF_GPU_ATTN_K3, TF_GPU_ATTN_K4};
    for (int k = 1; k <= 4; ++k)
        g_be[k] = make_be(k == 1 ? 1 : 3, 0, TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, attn_k[k]);
    for (int k = 0; k < 2; ++k)
        g_k5_be[k] = make_be(3, k, TF_GPU_GEMM_AUTO, TF_GPU_DW_AUTO, TF_GPU_ATTN_K5);
    tf_cuda_backend_describe(g_be[3], err, sizeof err);
    printf("# %s\n# median of %d graph launches of %d calls each; GB/s = bytes read + written "
           "once per call\n", err, TIMED, REPS);
    /* small problem B4 N64 S16, large B4 N128 S32 (docs/model.md's two problems) */
    static const struct {
        const char *name;
        int N, S;
    } P[2] = {{"small", 64, 16}, {"large", 128, 32}};
    for (int k = 0; k < 2; ++k) {
        const int B = 4, N = P[k].N, S = P[k].S;
        char nm[32];
        if (want(argc, argv, "attn")) {
            snprintf(nm, sizeof nm, "%s tri_start", P[k].name);
            bench_attn(nm, B, N, N, 4, 32, 0, 0);
            snprintf(nm, sizeof nm, "%s tri_end", P[k].name);
            bench_attn(nm, B, N, N, 4, 32, 1, 0);
            snprintf(nm, sizeof nm, "%s msa_row", P[k].name);
            bench_attn(nm, B, S, N, 4, 16, 0, 1);
            snprintf(nm, sizeof nm, "%s msa_col", P[k].name);
            bench_attn(nm, B, S, N, 4, 16, 1, 0);
        }
        if (want(argc, argv, "permute")) {
            const int opm[5] = {B, N, 32, N, 32}, po[5] = {0, 1, 3, 2, 4};
            /* the triangle multiplication's: fused L|R [B,N,N,2,C] -> [2,B,C,N,N],
             * its gradient back, and u [B,C,N,N] -> [B,N,N,C] */
            const int lr[5] = {B, N, N, 2, 128}, pf[5] = {3, 0, 4, 1, 2};
            const int dl[5] = {2, B, 128, N, N}, pb[5] = {1, 3, 4, 0, 2};
            const int up[4] = {B, 128, N, N}, pl[4] = {0, 2, 3, 1};
            snprintf(nm, sizeof nm, "%s opm", P[k].name);
            bench_perm(nm, 5, opm, po);
            snprintf(nm, sizeof nm, "%s trimul_lr_to_chan", P[k].name);
            bench_perm(nm, 5, lr, pf);
            snprintf(nm, sizeof nm, "%s trimul_lr_from_chan", P[k].name);
            bench_perm(nm, 5, dl, pb);
            snprintf(nm, sizeof nm, "%s trimul_from_chan", P[k].name);
            bench_perm(nm, 4, up, pl);
        }
        if (want(argc, argv, "ln")) {
            snprintf(nm, sizeof nm, "%s pair", P[k].name);
            bench_ln(nm, (long)B * N * N, 128);
            snprintf(nm, sizeof nm, "%s msa", P[k].name);
            bench_ln(nm, (long)B * S * N, 64);
        }
        if (want(argc, argv, "ew")) bench_ew((long)B * N * N * 256);
        if (want(argc, argv, "gemm")) {
            if (!g_gemm_be[0])
                for (int g = 0; g < 9; ++g) {
                    static const tf_gpu_gemm_policy gp[9] = {
                        TF_GPU_GEMM_CUBLAS, TF_GPU_GEMM_MMA,   TF_GPU_GEMM_AUTO,
                        TF_GPU_GEMM_MMA,    TF_GPU_GEMM_WGMMA, TF_GPU_GEMM_AUTO,
                        TF_GPU_GEMM_AUTO,   TF_GPU_GEMM_AUTO,  TF_GPU_GEMM_AUTO};
                    static const tf_gpu_dw_policy dp[9] = {
                        TF_GPU_DW_AUTO, TF_GPU_DW_AUTO, TF_GPU_DW_AUTO, TF_GPU_DW_AUTO, TF_GPU_DW_LT,
                        TF_GPU_DW_AUTO, TF_GPU_DW_AUTO, TF_GPU_DW_MMA,  TF_GPU_DW_MMA};
                    g_gemm_be[g] = make_be(3, g == 2 || g == 3 || g == 8, gp[g], dp[g],
                                           TF_GPU_ATTN_AUTO);
                }
            bench_gemm(P[k].name, B, N, S);
        }
    }
    for (int g = 0; g < 9; ++g) tf_cuda_backend_destroy(g_gemm_be[g]);
    for (int k = 0; k < 2; ++k) tf_cuda_backend_destroy(g_k5_be[k]);
    for (int k = 1; k <= 4; ++k) tf_cuda_backend_destroy(g_be[k]);
    return 0;
}
