/* The GPU plan (src/backend/gpu_plan.h), on the CPU: no device needed.
 *
 *  1. The route of every GEMM and attention call of the small problem (B4
 *     N64 S16) and the large one (B4 N128 S32), v3, as the model issues them
 *     (a forward and backward through an op table that records the calls and
 *     runs nothing), for the H200's caps in fp32 and tf32 and for the
 *     portable plan: printed, one line per distinct call, and checked against
 *     the reference rules below.
 *  2. The same comparison over a sweep of shapes beyond the model's.
 *  3. --gpu-plan specs: the good ones parse and print back, the bad ones are
 *     refused with one line naming what is accepted.
 *
 * The reference (ref_gemm, ref_attn) states the default routes as separate
 * rules, in the order the CUDA backend tries the engines: the weight
 * gradients' wide split K, the wgmma kernel, the mma.sync kernel, cuBLASLt,
 * cuBLAS. The router computes the same from the plan's policies; a route
 * that differs is a change in what runs on the GPU (and in its bits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu_plan.h"
#include "backend/ops.h"
#include "model/exec.h"
#include "model/model.h"
#include "tinyfold.h"

/* ---- the reference rules ---------------------------------------------------- */
static long cdiv(long a, long b) { return (a + b - 1) / b; }

static tf_gpu_gemm_route ref_gemm(const tf_gpu_gemm_shape *s, int tf32, long sms)
{
    tf_gpu_gemm_route r;
    memset(&r, 0, sizeof r);
    r.splits = 1, r.kchunk = s->K;
    const int tc = s->K > 0 && !s->neg_stride && s->M >= 16 && s->N >= 16 && s->batch <= 65535;
    const long tiles = (long)s->batch * cdiv(s->M, 128) * cdiv(s->N, 128);
    const int full = s->M >= 128 && s->N >= 128;
    const long ws = (long)(TF_GPU_WORKSPACE_BYTES / sizeof(float));
    /* fp32 weight gradients: few full tiles over K >= 1024, one wave of
     * splits at least 128 deep on wgmma, partials in the workspace */
    if (tc && !tf32 && s->K >= 1024 && full && tiles * 2 <= sms) {
        long n = sms / tiles;
        if (n > s->K / 128) n = s->K / 128;
        if (n > ws / ((long)s->batch * s->M * s->N)) n = ws / ((long)s->batch * s->M * s->N);
        if (n >= 2) {
            r.engine = TF_GPU_ENG_WIDE_WGMMA, r.tile = 128, r.x3 = 1;
            r.kchunk = (int)((cdiv(s->K, n) + 31) / 32 * 32);
            r.splits = (int)cdiv(s->K, r.kchunk);
            return r;
        }
    }
    /* fp32 on wgmma: full tiles, K >= 128, more tiles than half the SMs
     * (never split then); two blocks an SM for K <= 512 over 3 waves */
    if (tc && !tf32 && full && s->K >= 128 && tiles * 2 > sms) {
        r.engine = TF_GPU_ENG_WGMMA, r.tile = 128, r.x3 = 1;
        r.wg_short = s->K <= 512 && tiles >= 3 * sms;
        return r;
    }
    /* fp32 on mma.sync: full 128 x 128 tiles filling the GPU twice, K 32..127
     * (wgmma took the longer K above) */
    if (tc && !tf32 && full && s->K >= 32 && tiles >= 2 * sms) {
        r.engine = TF_GPU_ENG_MMA, r.tile = 128, r.x3 = 1;
        return r;
    }
    r.engine = s->K > 0 && !s->neg_stride ? TF_GPU_ENG_LT : TF_GPU_ENG_CUBLAS;
    return r;
}

static tf_gpu_attn_kernel ref_attn(const tf_gpu_attn_shape *s, int tf32)
{
    const int L = s->L, d = s->d;
    if (L <= 128 && (d == 32 || d == 16) &&
        ((d == 32 && (L > 32 || (tf32 && L > 16))) || (tf32 && d == 16 && L > 64)))
        return TF_GPU_ATTN_KERNEL5;
    if (L <= 128 && (d == 16 || d == 32) &&
        (s->backward ? !(d == 16 && L > 32 && L <= 64) : (L <= 32 || (d == 32 && L <= 64))))
        return TF_GPU_ATTN_KERNEL4;
    if (L > 32 && d > 16 && d <= 32) return TF_GPU_ATTN_KERNEL3;
    return TF_GPU_ATTN_KERNEL2;
}

static int same_route(const tf_gpu_gemm_route *a, const tf_gpu_gemm_route *b)
{
    return a->engine == b->engine && a->splits == b->splits &&
           (a->splits == 1 || a->kchunk == b->kchunk) && a->tile == b->tile &&
           a->x3 == b->x3 && a->wg_short == b->wg_short;
}

/* ---- a recording op table: the model's calls, nothing run ------------------- */
#define MAX_CALLS 4096
typedef struct {
    tf_gpu_gemm_shape g;
    tf_gpu_attn_shape a;
    int is_attn, count;
    char name[48];
} rec_call;
static rec_call g_calls[MAX_CALLS];
static int g_ncalls;

static void rec(const rec_call *c)
{
    for (int i = 0; i < g_ncalls; ++i)
        if (g_calls[i].is_attn == c->is_attn && !memcmp(&g_calls[i].g, &c->g, sizeof c->g) &&
            !memcmp(&g_calls[i].a, &c->a, sizeof c->a) && !strcmp(g_calls[i].name, c->name)) {
            g_calls[i].count++;
            return;
        }
    assert_true(g_ncalls < MAX_CALLS);
    g_calls[g_ncalls] = *c;
    g_calls[g_ncalls++].count = 1;
}

static void r_gemm(tf_backend *be, const tf_gemm_args *a, const char *name)
{
    (void)be;
    rec_call c;
    memset(&c, 0, sizeof c);
    c.g.M = a->M, c.g.N = a->N, c.g.K = a->K, c.g.batch = a->batch;
    c.g.neg_stride = a->batch > 1 && (a->strideA < 0 || a->strideB < 0 || a->strideC < 0);
    c.g.relu = a->epilogue == TF_EPI_RELU;
    c.g.beta_zero = a->beta == 0.f;
    c.g.half = a->ab_type != TF_F32 || a->c_type != TF_F32;
    c.g.ta = a->transA, c.g.tb = a->transB, c.g.c_half = a->c_type != TF_F32;
    snprintf(c.name, sizeof c.name, "%s%s", name ? name : "?", a->wgrad ? " (wgrad)" : "");
    rec(&c);
}
static void r_attn(const tf_attn_args *a, int bwd)
{
    rec_call c;
    memset(&c, 0, sizeof c);
    c.is_attn = 1;
    c.a.L = a->L, c.a.d = a->d, c.a.backward = bwd, c.a.half = a->t != TF_F32;
    snprintf(c.name, sizeof c.name, "attention %s nb %d no %d nh %d", bwd ? "bwd" : "fwd", a->nb,
             a->no, a->nh);
    rec(&c);
}
static void r_attn_fwd(tf_backend *be, const tf_attn_args *a) { (void)be, r_attn(a, 0); }
static void r_attn_bwd(tf_backend *be, const tf_attn_args *a) { (void)be, r_attn(a, 1); }

/* every other op the model calls: nothing */
static void n_ln_fwd(tf_backend *b, void *o, float *m, float *r, const void *x, const float *g,
                     const float *be, long rows, int C, float eps, tf_dtype xt, tf_dtype yt)
{ (void)b, (void)o, (void)m, (void)r, (void)x, (void)g, (void)be, (void)rows, (void)C, (void)eps, (void)xt, (void)yt; }
static void n_ln_bwd(tf_backend *b, void *dx, void *dxh, float *dg, float *db, const void *dy,
                     const void *x, const float *m, const float *r, const float *g, long rows,
                     int C, int acc, tf_dtype xt, tf_dtype yt)
{ (void)b, (void)dx, (void)dxh, (void)dg, (void)db, (void)dy, (void)x, (void)m, (void)r, (void)g, (void)rows, (void)C, (void)acc, (void)xt, (void)yt; }
static void n_ln2_fwd(tf_backend *b, void *o, float *st, const void *x, const float *g1,
                      const float *b1, const float *g2, const float *b2, long rows, int C,
                      float eps, tf_dtype xt, tf_dtype yt)
{ (void)b, (void)o, (void)st, (void)x, (void)g1, (void)b1, (void)g2, (void)b2, (void)rows, (void)C, (void)eps, (void)xt, (void)yt; }
static void n_ln2_bwd(tf_backend *b, void *dx, void *dxh, float *dg1, float *db1, float *dg2,
                      float *db2, const void *dy, const void *x, const float *st, const float *g1,
                      const float *b1, const float *g2, long rows, int C, int acc, tf_dtype xt,
                      tf_dtype yt)
{ (void)b, (void)dx, (void)dxh, (void)dg1, (void)db1, (void)dg2, (void)db2, (void)dy, (void)x, (void)st, (void)g1, (void)b1, (void)g2, (void)rows, (void)C, (void)acc, (void)xt, (void)yt; }
static void n_sm_fwd(tf_backend *b, void *y, const void *x, long r, int c, tf_dtype t)
{ (void)b, (void)y, (void)x, (void)r, (void)c, (void)t; }
static void n_sm_bwd(tf_backend *b, void *dx, const void *dy, const void *y, long r, int c,
                     tf_dtype t)
{ (void)b, (void)dx, (void)dy, (void)y, (void)r, (void)c, (void)t; }
static void n_permute(tf_backend *b, void *o, const void *i, const tf_permute_args *a)
{ (void)b, (void)o, (void)i, (void)a; }
static void n_bcast(tf_backend *b, void *y, const void *x, long o, long m, long i, tf_dtype t)
{ (void)b, (void)y, (void)x, (void)o, (void)m, (void)i, (void)t; }
static void n_summid(tf_backend *b, void *y, const void *x, long o, long m, long i, int acc,
                     tf_dtype t)
{ (void)b, (void)y, (void)x, (void)o, (void)m, (void)i, (void)acc, (void)t; }
static void n_bin(tf_backend *b, void *y, const void *x, const void *z, long n, tf_dtype t)
{ (void)b, (void)y, (void)x, (void)z, (void)n, (void)t; }
static void n_scale(tf_backend *b, void *y, const void *x, float al, long n, tf_dtype t)
{ (void)b, (void)y, (void)x, (void)al, (void)n, (void)t; }
static void n_act_fwd(tf_backend *b, tf_act act, void *y, const void *x, long n, tf_dtype t)
{ (void)b, (void)act, (void)y, (void)x, (void)n, (void)t; }
static void n_act_bwd(tf_backend *b, tf_act act, void *dx, const void *dy, const void *y, long n,
                      tf_dtype t)
{ (void)b, (void)act, (void)dx, (void)dy, (void)y, (void)n, (void)t; }
static void n_gate_bwd(tf_backend *b, void *da, void *dg, const void *dy, const void *a,
                       const void *g, long n, tf_dtype t)
{ (void)b, (void)da, (void)dg, (void)dy, (void)a, (void)g, (void)n, (void)t; }
static void n_gate_res(tf_backend *b, float *o, const float *r, const void *a, const void *g,
                       long n, tf_dtype t)
{ (void)b, (void)o, (void)r, (void)a, (void)g, (void)n, (void)t; }
static void n_gcm_fwd(tf_backend *b, void *lr, const void *a, const void *g, long ld,
                      long rows, long inner, int C, tf_dtype t)
{ (void)b, (void)lr, (void)a, (void)g, (void)ld, (void)rows, (void)inner, (void)C, (void)t; }
static void n_gcm_bwd(tf_backend *b, void *da, void *dg, const void *dlr, const void *a,
                      const void *g, long ld, long rows, long inner, int C, tf_dtype t)
{ (void)b, (void)da, (void)dg, (void)dlr, (void)a, (void)g, (void)ld, (void)rows, (void)inner, (void)C, (void)t; }
static void n_opm_bwd(tf_backend *b, void *da, const void *dop, const void *a, int B, int S,
                      int N, int co, tf_dtype t)
{ (void)b, (void)da, (void)dop, (void)a, (void)B, (void)S, (void)N, (void)co, (void)t; }
static void n_opm_outer(tf_backend *b, void *o, const void *a, int B, int S, int N, int co,
                        tf_dtype t)
{ (void)b, (void)o, (void)a, (void)B, (void)S, (void)N, (void)co, (void)t; }
static void n_emb_fwd(tf_backend *b, float *o, const float *t, const int32_t *tok, long n, int C,
                      int V)
{ (void)b, (void)o, (void)t, (void)tok, (void)n, (void)C, (void)V; }
static void n_emb_bwd(tf_backend *b, float *dt, const float *dy, const int32_t *tok, long n,
                      int C, int V)
{ (void)b, (void)dt, (void)dy, (void)tok, (void)n, (void)C, (void)V; }
static void n_mse_fwd(tf_backend *b, float *p, float *l, const float *lg, const float *t, long n,
                      float dmax)
{ (void)b, (void)p, (void)l, (void)lg, (void)t, (void)n, (void)dmax; }
static void n_mse_bwd(tf_backend *b, float *dl, const float *p, const float *t, long n, float dmax,
                      const float *ls)
{ (void)b, (void)dl, (void)p, (void)t, (void)n, (void)dmax, (void)ls; }
static void n_pb_fwd(tf_backend *b, void *bias, const float *z, const float *W, long rows, int C,
                     int H, tf_dtype t)
{ (void)b, (void)bias, (void)z, (void)W, (void)rows, (void)C, (void)H, (void)t; }
static void n_pb_bwd(tf_backend *b, float *dz, void *dzh, float *db32, const void *d,
                     const float *W, long rows, int C, int H, tf_dtype t)
{ (void)b, (void)dz, (void)dzh, (void)db32, (void)d, (void)W, (void)rows, (void)C, (void)H, (void)t; }
static void n_zero(tf_backend *b, void *p, size_t n) { (void)b, (void)p, (void)n; }
static void n_copy(tf_backend *b, void *d, const void *s, size_t n) { (void)b, (void)d, (void)s, (void)n; }
static long n_wmark(tf_backend *b) { (void)b; return 0; }
static void n_wwait(tf_backend *b, long u) { (void)b, (void)u; }

static tf_ops rec_ops(void)
{
    tf_ops o;
    memset(&o, 0, sizeof o);
    o.name = "record";
    o.gemm = r_gemm, o.attn_fwd = r_attn_fwd, o.attn_bwd = r_attn_bwd;
    o.layernorm_fwd = n_ln_fwd, o.layernorm_bwd = n_ln_bwd;
    o.layernorm2_fwd = n_ln2_fwd, o.layernorm2_bwd = n_ln2_bwd;
    o.softmax_fwd = n_sm_fwd, o.softmax_bwd = n_sm_bwd, o.permute = n_permute;
    o.add_bcast_mid = n_bcast, o.sum_mid = n_summid, o.add = n_bin, o.mul = n_bin;
    o.scale = n_scale, o.act_fwd = n_act_fwd, o.act_bwd = n_act_bwd, o.gate_fwd = n_bin;
    o.gate_bwd = n_gate_bwd, o.gate_residual_fwd = n_gate_res, o.gate_cmajor_fwd = n_gcm_fwd;
    o.gate_cmajor_bwd = n_gcm_bwd, o.opm_bwd = n_opm_bwd, o.opm_outer = n_opm_outer;
    o.embed_fwd = n_emb_fwd, o.embed_bwd = n_emb_bwd, o.mse_head_fwd = n_mse_fwd;
    o.mse_head_bwd = n_mse_bwd, o.zero = n_zero, o.copy = n_copy, o.pair_bias_bwd = n_pb_bwd;
    o.pair_bias_fwd = n_pb_fwd;
    o.wgrad_mark = n_wmark, o.wgrad_wait = n_wwait;
    return o;
}

/* One v3 forward + backward of problem (B, N, S) as the trainer composes it
 * for the CUDA backend in that precision (plan.c: the outer product mean's
 * ops, the triangle GEMMs merged in fp32, the weight-gradient lane), the
 * calls recorded. */
static void record_model(int B, int N, int S, int tf32)
{
    static tf_ops ops;
    ops = rec_ops();
    tf_config c;
    tf_config_default(&c);
    c.batch = B, c.seq_len = N, c.n_seqs = S;
    c.impl = TF_IMPL_V3;
    c.fusion = tf_fusion_for_impl(TF_IMPL_V3);
    c.backend = TF_BACKEND_CUDA;
    c.precision = tf32 ? TF_PREC_TF32 : TF_PREC_FP32;
    const size_t nt = tf_param_count_tensors(&c);
    tf_param_info *table = calloc(nt, sizeof *table);
    tf_model M;
    memset(&M, 0, sizeof M);
    M.off.blk = calloc((size_t)c.n_blocks, sizeof(tf_block_off));
    M.acts = calloc((size_t)c.n_blocks, sizeof(tf_block_act));
    assert_non_null(table), assert_non_null(M.off.blk), assert_non_null(M.acts);
    tf_param_table(&c, table);
    tf_model_offsets(&c, table, &M.off);
    /* never dereferenced (nothing runs): addresses the model only offsets */
    static float fake[64];
    M.c = &c;
    M.params = M.grads = M.pred = M.loss = fake;
    M.pair = M.target = fake;
    M.tokens = (const int32_t *)(const void *)fake;
    tf_arena arena;
    memset(&arena, 0, sizeof arena); /* no base: addresses handed out, none backed */
    tf_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.ops = &ops;
    ex.arena = &arena;
    ex.fu = c.fusion;
    ex.level = 3;
    ex.opm_bwd_op = 1, ex.opm_outer_op = 1, ex.trimul_merged = !tf32;
    ex.wgrad_async = 1;
    g_ncalls = 0;
    tf_model_forward(&ex, &M);
    tf_model_backward(&ex, &M);
    free(table), free(M.off.blk), free(M.acts);
}

/* ---- 1. the model's calls ------------------------------------------------------ */
typedef struct {
    int engines[TF_GPU_ENG_COUNT_], kernels[8], mismatches, calls;
} tally;

static tally route_model(const char *prob, int tf32, const tf_gpu_plan *plan, const char *pname)
{
    const tf_gpu_caps caps = tf_gpu_caps_h200();
    tally t;
    memset(&t, 0, sizeof t);
    const int portable = plan->gemm == TF_GPU_GEMM_CUBLAS;
    printf("%s problem, %s, plan %s:\n", prob, tf32 ? "tf32" : "fp32", pname);
    for (int i = 0; i < g_ncalls; ++i) {
        const rec_call *c = &g_calls[i];
        char route[64];
        int ok;
        if (c->is_attn) {
            const tf_gpu_attn_kernel k = tf_gpu_route_attn(plan, &caps, &c->a, tf32);
            ok = portable ? k == TF_GPU_ATTN_KERNEL1 : k == ref_attn(&c->a, tf32);
            t.kernels[k] += c->count;
            snprintf(route, sizeof route, "%s", tf_gpu_attn_kernel_name(k));
            printf("  %-44s L %4d d %2d x%-3d -> %s%s\n", c->name, c->a.L, c->a.d, c->count,
                   route, ok ? "" : "  MISMATCH");
        } else {
            const tf_gpu_gemm_route r = tf_gpu_route_gemm(plan, &caps, &c->g, tf32);
            if (portable) {
                ok = r.engine == TF_GPU_ENG_LT || r.engine == TF_GPU_ENG_CUBLAS;
            } else {
                const tf_gpu_gemm_route w = ref_gemm(&c->g, tf32, caps.sm_count);
                ok = same_route(&r, &w);
            }
            t.engines[r.engine] += c->count;
            tf_gpu_gemm_route_format(&r, route, sizeof route);
            printf("  %-44s %6d x %5d x %6d b %4d x%-3d -> %s%s\n", c->name, c->g.M, c->g.N,
                   c->g.K, c->g.batch, c->count, route, ok ? "" : "  MISMATCH");
        }
        t.calls += c->count;
        t.mismatches += !ok;
    }
    printf("  %d calls:", t.calls);
    for (int e = 0; e < TF_GPU_ENG_COUNT_; ++e)
        if (t.engines[e]) printf(" %s %d", tf_gpu_engine_name((tf_gpu_engine)e), t.engines[e]);
    for (int k = 1; k <= TF_GPU_ATTN_KERNEL6; ++k)
        if (t.kernels[k]) printf(" %s %d", tf_gpu_attn_kernel_name((tf_gpu_attn_kernel)k), t.kernels[k]);
    printf("\n");
    return t;
}

static void test_model_routes(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int B, N, S;
    } prob[] = {{"small", 4, 64, 16}, {"large", 4, 128, 32}};
    const tf_gpu_caps caps = tf_gpu_caps_h200();
    for (int p = 0; p < 2; ++p)
        for (int tf32 = 0; tf32 <= 1; ++tf32) {
            record_model(prob[p].B, prob[p].N, prob[p].S, tf32);
            assert_true(g_ncalls > 10);
            const tf_gpu_plan d = tf_gpu_plan_default(&caps, tf32, 3);
            tally t = route_model(prob[p].name, tf32, &d, "default");
            assert_int_equal(t.mismatches, 0);
            if (!tf32) { /* fp32: wgmma for the big products and the weight gradients */
                assert_true(t.engines[TF_GPU_ENG_WGMMA] > 0);
                assert_true(t.engines[TF_GPU_ENG_WIDE_WGMMA] > 0);
            } else { /* tf32: the library's TF32 kernels for every GEMM */
                assert_int_equal(t.engines[TF_GPU_ENG_LT] + t.engines[TF_GPU_ENG_CUBLAS],
                                 t.calls - t.kernels[1] - t.kernels[2] - t.kernels[3] -
                                     t.kernels[4] - t.kernels[5]);
            }
            assert_true(t.kernels[TF_GPU_ATTN_KERNEL5] > 0);
            const tf_gpu_plan port = tf_gpu_plan_portable();
            t = route_model(prob[p].name, tf32, &port, "portable");
            assert_int_equal(t.mismatches, 0);
            assert_int_equal(t.kernels[2] + t.kernels[3] + t.kernels[4] + t.kernels[5], 0);
            assert_int_equal(t.engines[TF_GPU_ENG_MMA] + t.engines[TF_GPU_ENG_WGMMA] +
                                 t.engines[TF_GPU_ENG_WIDE_MMA] + t.engines[TF_GPU_ENG_WIDE_WGMMA],
                             0);
        }
}

/* ---- 2. a sweep beyond the model's shapes --------------------------------------- */
static void test_sweep(void **state)
{
    (void)state;
    const tf_gpu_caps caps = tf_gpu_caps_h200();
    static const int dims[] = {1, 15, 16, 17, 64, 100, 127, 128, 129, 256, 384, 512, 4096, 16384};
    static const int ks[] = {0, 1, 31, 32, 100, 127, 128, 512, 513, 1000, 1024, 2048, 4096,
                             16384, 65536, 262144};
    static const int batches[] = {1, 2, 4, 16, 64, 256};
    long n = 0, bad = 0;
    for (int tf32 = 0; tf32 <= 1; ++tf32) {
        const tf_gpu_plan p = tf_gpu_plan_default(&caps, tf32, 3);
        for (size_t a = 0; a < sizeof dims / sizeof *dims; ++a)
            for (size_t b = 0; b < sizeof dims / sizeof *dims; ++b)
                for (size_t k = 0; k < sizeof ks / sizeof *ks; ++k)
                    for (size_t q = 0; q < sizeof batches / sizeof *batches; ++q)
                        for (int neg = 0; neg <= 1; ++neg) {
                            tf_gpu_gemm_shape s = {dims[a], dims[b], ks[k], batches[q], 0, 0, 0, 0, 0, 0, 0};
                            s.neg_stride = neg && s.batch > 1;
                            const tf_gpu_gemm_route r = tf_gpu_route_gemm(&p, &caps, &s, tf32);
                            const tf_gpu_gemm_route w = ref_gemm(&s, tf32, caps.sm_count);
                            ++n;
                            if (!same_route(&r, &w)) {
                                if (bad++ < 10)
                                    printf("MISMATCH %d x %d x %d b %d %s: %s/%d, rule %s/%d\n",
                                           s.M, s.N, s.K, s.batch, tf32 ? "tf32" : "fp32",
                                           tf_gpu_engine_name(r.engine), r.splits,
                                           tf_gpu_engine_name(w.engine), w.splits);
                            }
                        }
        for (int L = 1; L <= 300; ++L)
            for (int d = 1; d <= 64; ++d)
                for (int bwd = 0; bwd <= 1; ++bwd) {
                    const tf_gpu_attn_shape s = {L, d, bwd, 0};
                    ++n;
                    if (tf_gpu_route_attn(&p, &caps, &s, tf32) != ref_attn(&s, tf32) && bad++ < 10)
                        printf("MISMATCH attention L %d d %d %s\n", L, d, bwd ? "bwd" : "fwd");
                }
    }
    printf("sweep: %ld routes, %ld differ from the rules\n", n, bad);
    assert_int_equal(bad, 0);
    /* wgmma's wide split bounds: within the workspace and the GEMM's K */
    const tf_gpu_plan p = tf_gpu_plan_default(&caps, 0, 3);
    const tf_gpu_gemm_shape s = {128, 128, 65536, 1, 0, 0, 0, 0, 0, 0, 0};
    const tf_gpu_gemm_route r = tf_gpu_route_gemm(&p, &caps, &s, 0);
    assert_int_equal(r.engine, TF_GPU_ENG_WIDE_WGMMA);
    assert_true(r.splits >= 2 && r.splits <= caps.sm_count);
    assert_true((long)r.splits * r.kchunk >= s.K && (long)(r.splits - 1) * r.kchunk < s.K);
}

/* levels 1-2, forced policies, caps without wgmma or mma.sync */
static void test_policies(void **state)
{
    (void)state;
    tf_gpu_caps caps = tf_gpu_caps_h200();
    const tf_gpu_gemm_shape big = {4096, 256, 128, 1, 0, 0, 0, 0, 0, 0, 0}, dw = {128, 128, 16384, 1, 0, 0, 0, 0, 0, 0, 0},
                            relu = {64, 64, 64, 1, 0, 1, 1, 0, 0, 0, 0}, k0 = {64, 64, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    tf_gpu_plan p = tf_gpu_plan_default(&caps, 0, 1);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &big, 0).engine, TF_GPU_ENG_CUBLAS);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &relu, 0).engine, TF_GPU_ENG_LT);
    const tf_gpu_attn_shape at = {64, 32, 0, 0};
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &at, 0), TF_GPU_ATTN_KERNEL1);
    p = tf_gpu_plan_default(&caps, 0, 3);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &k0, 0).engine, TF_GPU_ENG_CUBLAS);
    p.gemm = TF_GPU_GEMM_CUBLAS;
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &big, 0).engine, TF_GPU_ENG_LT);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &dw, 0).engine, TF_GPU_ENG_LT);
    p.dw = TF_GPU_DW_MMA; /* the wide split on mma.sync, also with the library elsewhere */
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &dw, 1).engine, TF_GPU_ENG_WIDE_MMA);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &dw, 1).x3, 0);
    p = tf_gpu_plan_default(&caps, 0, 3);
    p.gemm = TF_GPU_GEMM_MMA;
    tf_gpu_gemm_route r = tf_gpu_route_gemm(&p, &caps, &big, 0);
    assert_int_equal(r.engine, TF_GPU_ENG_MMA);
    assert_int_equal(r.tile, 64); /* 64 big tiles do not fill 132 SMs twice */
    p.gemm = TF_GPU_GEMM_WGMMA;
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &relu, 0).engine, TF_GPU_ENG_WGMMA);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &relu, 1).engine, TF_GPU_ENG_LT); /* 3xTF32 only */
    /* no wgmma code: mma.sync takes the shapes it is faster on */
    caps.has_wgmma = 0;
    p = tf_gpu_plan_default(&caps, 0, 3);
    const tf_gpu_gemm_shape many = {16384, 512, 128, 4, 0, 0, 0, 0, 0, 0, 0};
    r = tf_gpu_route_gemm(&p, &caps, &many, 0);
    assert_int_equal(r.engine, TF_GPU_ENG_MMA);
    assert_int_equal(r.tile, 128);
    assert_int_equal(tf_gpu_route_gemm(&p, &caps, &dw, 0).engine, TF_GPU_ENG_LT);
    /* another vendor's caps: the portable plan */
    caps.has_mma_sync = caps.has_cp_async = 0;
    p = tf_gpu_plan_default(&caps, 0, 3);
    assert_int_equal(p.gemm, TF_GPU_GEMM_CUBLAS);
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &at, 0), TF_GPU_ATTN_KERNEL1);
    /* forced attention kernels */
    caps = tf_gpu_caps_h200();
    p = tf_gpu_plan_default(&caps, 0, 3);
    const tf_gpu_attn_shape a16 = {64, 16, 1, 0}, a200 = {200, 32, 0, 0};
    p.attn = TF_GPU_ATTN_K4;
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &a16, 0), TF_GPU_ATTN_KERNEL4);
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &a200, 0), TF_GPU_ATTN_KERNEL3);
    p.attn = TF_GPU_ATTN_K2;
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &at, 0), TF_GPU_ATTN_KERNEL2);
    p.attn = TF_GPU_ATTN_K3;
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &at, 0), TF_GPU_ATTN_KERNEL3);
    p.attn = TF_GPU_ATTN_K5;
    assert_int_equal(tf_gpu_route_attn(&p, &caps, &a16, 0), TF_GPU_ATTN_KERNEL5);
}

/* ---- 3. specs ----------------------------------------------------------------- */
static void test_parse(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *formatted;
    } good[] = {
        {"default", "gemm=auto,dw=auto,attn=auto,lane=auto,opm=auto,mlp=auto,trimul=auto"},
        {"portable", "gemm=cublas,dw=lt,attn=k1,lane=auto,opm=ffma,mlp=composed,trimul=composed"},
        {"gemm=cublas,attn=k4", "gemm=cublas,dw=auto,attn=k4,lane=auto,opm=auto,mlp=auto,trimul=auto"},
        {"portable,lane=off", "gemm=cublas,dw=lt,attn=k1,lane=off,opm=ffma,mlp=composed,trimul=composed"},
        {"gemm=wgmma,dw=mma,attn=k5,lane=on,opm=ffma,mlp=composed,trimul=composed,wgrad_delay_us=2000",
         "gemm=wgmma,dw=mma,attn=k5,lane=on,opm=ffma,mlp=composed,trimul=composed,wgrad_delay_us=2000"},
        {"attn=k2,default", "gemm=auto,dw=auto,attn=auto,lane=auto,opm=auto,mlp=auto,trimul=auto"},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; ++i) {
        tf_gpu_plan p, q;
        char err[256] = "", out[128], again[128];
        assert_int_equal(tf_gpu_plan_parse(good[i].spec, &p, err, sizeof err), 0);
        tf_gpu_plan_format(&p, out, sizeof out);
        printf("spec %-56s -> %s\n", good[i].spec, out);
        assert_string_equal(out, good[i].formatted);
        assert_int_equal(tf_gpu_plan_parse(out, &q, err, sizeof err), 0); /* reads back */
        tf_gpu_plan_format(&q, again, sizeof again);
        assert_string_equal(again, out);
    }
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"", "empty"},
        {"fast", "plan 'fast' is not accepted: default, portable, or"},
        {"gemm=tensor", "gemm value 'tensor' is not accepted: use auto, cublas, mma or wgmma"},
        {"attn=k7", "attn value 'k7' is not accepted: use auto, k1, k2, k3, k4, k5 or k6"},
        {"dw=wg", "dw value 'wg' is not accepted: use auto, mma, lt or half"},
        {"lane=1", "lane value '1' is not accepted: use auto, on or off"},
        {"opm=mma", "opm value 'mma' is not accepted: use auto, ffma, composed or fused"},
        {"mlp=one", "mlp value 'one' is not accepted: use auto, composed or fused"},
        {"gemm=cublas,,attn=k4", "plan '' is not accepted"},
        {"tile=64", "key 'tile' is not accepted: default, portable, or"},
        {"wgrad_delay_us=-1", "wgrad_delay_us value '-1' is not accepted"},
        {"wgrad_delay_us=1e3", "wgrad_delay_us value '1e3' is not accepted"},
        {"wgrad_delay_us=100001", "wgrad_delay_us value '100001' is not accepted"},
        {"gemm=", "gemm value '' is not accepted"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
        tf_gpu_plan p;
        char err[256] = "";
        const int rc = tf_gpu_plan_parse(bad[i].spec, &p, err, sizeof err);
        printf("spec '%s' -> %s\n", bad[i].spec, err);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(err, bad[i].want));
        assert_null(strchr(err, '\n'));
        assert_true(!strncmp(err, "--gpu-plan: ", 12));
    }
    /* apply: the given fields over a base, AUTO keeps the base's */
    tf_gpu_plan over;
    assert_int_equal(tf_gpu_plan_parse("attn=k4", &over, NULL, 0), 0);
    const tf_gpu_plan m = tf_gpu_plan_apply(tf_gpu_plan_portable(), &over);
    assert_int_equal(m.gemm, TF_GPU_GEMM_CUBLAS);
    assert_int_equal(m.attn, TF_GPU_ATTN_K4);
    assert_int_equal(m.level, 3);
}

/* half types: GEMMs on the libraries but the weight gradients (the half wgmma
 * kernel),
 * attention at head size 16 or 32 on kernel5 where it fits and kernel6 above
 * (every L under attn=k6) whatever the level-3 policy but k1, kernel1
 * elsewhere; act_types by device */
static void test_half_routes(void **state)
{
    (void)state;
    tf_gpu_caps caps = tf_gpu_caps_h200();
    const tf_gpu_gemm_shape big = {4096, 256, 128, 1, 0, 0, 0, 1, 0, 0, 0},
                            dw = {128, 128, 16384, 1, 0, 0, 0, 1, 0, 0, 0},
                            relu = {64, 64, 64, 1, 0, 1, 1, 1, 0, 0, 0}, k0 = {64, 64, 0, 1, 0, 0, 0, 1, 0, 0, 0},
                            neg = {64, 64, 64, 2, 1, 0, 0, 1, 0, 0, 0};
    for (int level = 1; level <= 3; ++level) {
        const tf_gpu_plan p = tf_gpu_plan_default(&caps, 0, level);
        const tf_gpu_engine lib = level >= 3 ? TF_GPU_ENG_LT : TF_GPU_ENG_CUBLAS;
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &big, 0).engine, lib);
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &dw, 0).engine, lib);
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &relu, 0).engine, TF_GPU_ENG_LT);
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &k0, 0).engine, TF_GPU_ENG_CUBLAS);
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &neg, 0).engine, TF_GPU_ENG_CUBLAS);
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &big, 0).splits, 1);
    }
    tf_gpu_plan over, p = tf_gpu_plan_default(&caps, 0, 3);
    const char *specs[] = {"gemm=wgmma", "gemm=mma", "dw=mma"};
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(tf_gpu_plan_parse(specs[i], &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_route_gemm(&q, &caps, &big, 0).engine, TF_GPU_ENG_LT);
        assert_int_equal(tf_gpu_route_gemm(&q, &caps, &dw, 0).engine, TF_GPU_ENG_LT);
    }
    { /* the weight gradients (A^T B, fp32 result, K >= 1024, few tiles): split
       * one wave wide on the half wgmma kernel in whole 64-row slices under
       * dw=half and gemm=auto or wgmma; anything else stays on the library */
        tf_gpu_plan def = p;
        assert_int_equal(tf_gpu_plan_parse("dw=half", &over, NULL, 0), 0);
        const tf_gpu_plan p = tf_gpu_plan_apply(def, &over);
        const tf_gpu_gemm_shape w = {128, 128, 16384, 1, 0, 0, 0, 1, 1, 0, 0},
                                w2 = {512, 128, 65536, 1, 0, 0, 0, 1, 1, 0, 0},
                                odd = {130, 72, 3000, 3, 0, 0, 0, 1, 1, 0, 0};
        assert_int_equal(tf_gpu_route_gemm(&def, &caps, &w, 0).engine, TF_GPU_ENG_LT);
        const tf_gpu_gemm_route r = tf_gpu_route_gemm(&p, &caps, &w, 0);
        assert_int_equal(r.engine, TF_GPU_ENG_WIDE_WGMMA);
        assert_int_equal(r.half, 1);
        assert_int_equal(r.tile, 128);
        assert_int_equal(r.kchunk, 128); /* 132 SMs, at least 128 deep: 128 splits */
        assert_int_equal(r.splits, 128);
        const tf_gpu_gemm_route r2 = tf_gpu_route_gemm(&p, &caps, &w2, 0);
        assert_int_equal(r2.kchunk, 2048); /* 4 tiles: 33 splits of 1986, whole slices */
        assert_int_equal(r2.splits, 32);
        const tf_gpu_gemm_route r3 = tf_gpu_route_gemm(&p, &caps, &odd, 0);
        assert_int_equal(r3.engine, TF_GPU_ENG_WIDE_WGMMA); /* 6 tiles: 22 splits wanted */
        assert_int_equal(r3.kchunk % 64, 0);
        assert_true((long)r3.kchunk * r3.splits >= 3000 && (long)r3.kchunk * (r3.splits - 1) < 3000);
        char txt[64];
        tf_gpu_gemm_route_format(&r, txt, sizeof txt);
        assert_string_equal(txt, "wide-wgmma 128 s128 half");
        tf_gpu_gemm_shape no = w;
        no.ta = 0; /* not A^T B */
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        no = w, no.tb = 1;
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        no = w, no.c_half = 1; /* a half result */
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        no = w, no.K = 1000;
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        no = w, no.M = 2048, no.N = 1024; /* 128 tiles: no split */
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        no = w, no.M = 8; /* too narrow for the tensor-core kernels */
        assert_int_equal(tf_gpu_route_gemm(&p, &caps, &no, 0).engine, TF_GPU_ENG_LT);
        const char *lib[] = {"dw=lt", "dw=mma", "dw=half,gemm=mma", "dw=half,gemm=cublas"};
        for (int i = 0; i < 4; ++i) {
            assert_int_equal(tf_gpu_plan_parse(lib[i], &over, NULL, 0), 0);
            const tf_gpu_plan q = tf_gpu_plan_apply(def, &over);
            assert_int_equal(tf_gpu_route_gemm(&q, &caps, &w, 0).engine, TF_GPU_ENG_LT);
        }
        assert_int_equal(tf_gpu_plan_parse("dw=half,gemm=wgmma", &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(def, &over);
        assert_int_equal(tf_gpu_route_gemm(&q, &caps, &w, 0).engine, TF_GPU_ENG_WIDE_WGMMA);
        /* fp32 routes as auto under dw=half */
        const tf_gpu_gemm_shape f = {128, 128, 65536, 1, 0, 0, 0, 0, 1, 0, 0};
        const tf_gpu_gemm_route fa = tf_gpu_route_gemm(&def, &caps, &f, 0),
                                fh = tf_gpu_route_gemm(&p, &caps, &f, 0);
        assert_true(same_route(&fa, &fh));
        assert_int_equal(fh.engine, TF_GPU_ENG_WIDE_WGMMA);
        assert_int_equal(fh.half, 0);
        tf_gpu_caps nowg = caps;
        nowg.has_wgmma = 0;
        assert_int_equal(tf_gpu_route_gemm(&p, &nowg, &w, 0).engine, TF_GPU_ENG_LT);
        for (int level = 1; level <= 2; ++level) {
            const tf_gpu_plan b = tf_gpu_plan_default(&caps, 0, level);
            assert_int_equal(tf_gpu_route_gemm(&b, &caps, &w, 0).engine, TF_GPU_ENG_CUBLAS);
        }
        const tf_gpu_plan port = tf_gpu_plan_portable();
        assert_int_equal(tf_gpu_route_gemm(&port, &caps, &w, 0).engine, TF_GPU_ENG_LT);
    }
    const char *attn[] = {"attn=auto", "attn=k2", "attn=k3", "attn=k4", "attn=k5", "attn=k6"};
    for (int i = 0; i < 6; ++i) {
        assert_int_equal(tf_gpu_plan_parse(attn[i], &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
        for (int bwd = 0; bwd < 2; ++bwd) {
            const tf_gpu_attn_shape h = {64, 32, bwd, 1}, h16 = {128, 16, bwd, 1},
                                    wide = {2048, 32, bwd, 1}, d8 = {64, 8, bwd, 1},
                                    f = {64, 32, bwd, 0};
            /* kernel5 at L <= 64, kernel6 above; attn=k5 keeps kernel5 where
             * it fits (L <= 128), attn=k6 takes kernel6 everywhere */
            const tf_gpu_attn_kernel fit = i == 5 ? TF_GPU_ATTN_KERNEL6 : TF_GPU_ATTN_KERNEL5;
            const tf_gpu_attn_kernel fit128 = i == 4 ? TF_GPU_ATTN_KERNEL5 : TF_GPU_ATTN_KERNEL6;
            assert_int_equal(tf_gpu_route_attn(&q, &caps, &h, 0), fit);
            assert_int_equal(tf_gpu_route_attn(&q, &caps, &h16, 0), fit128);
            assert_int_equal(tf_gpu_route_attn(&q, &caps, &wide, 0), TF_GPU_ATTN_KERNEL6);
            assert_int_equal(tf_gpu_route_attn(&q, &caps, &d8, 0), TF_GPU_ATTN_KERNEL1);
            if (i == 0) {
                assert_int_not_equal(tf_gpu_route_attn(&q, &caps, &f, 0), TF_GPU_ATTN_KERNEL1);
                assert_int_not_equal(tf_gpu_route_attn(&q, &caps, &f, 0), TF_GPU_ATTN_KERNEL6);
            }
        }
    }
    for (int level = 1; level <= 2; ++level) { /* the baselines: kernel1 */
        const tf_gpu_plan b = tf_gpu_plan_default(&caps, 0, level);
        const tf_gpu_attn_shape h = {64, 32, 0, 1};
        assert_int_equal(tf_gpu_route_attn(&b, &caps, &h, 0), TF_GPU_ATTN_KERNEL1);
    }
    {
        const tf_gpu_attn_shape h = {64, 32, 0, 1};
        const tf_gpu_plan port = tf_gpu_plan_portable();
        assert_int_equal(tf_gpu_route_attn(&port, &caps, &h, 0), TF_GPU_ATTN_KERNEL1);
        tf_gpu_caps old = caps;
        old.has_mma_sync = 0;
        assert_int_equal(tf_gpu_route_attn(&p, &old, &h, 0), TF_GPU_ATTN_KERNEL1);
    }
    { /* the outer product mean: mma.sync for half types at level 3, co 32, unless opm=ffma */
        assert_int_equal(tf_gpu_opm_on_mma(&p, &caps, 32, 1), 1);
        assert_int_equal(tf_gpu_opm_on_mma(&p, &caps, 32, 0), 0);
        assert_int_equal(tf_gpu_opm_on_mma(&p, &caps, 12, 1), 0);
        const tf_gpu_plan port = tf_gpu_plan_portable(), l2 = tf_gpu_plan_default(&caps, 0, 2);
        assert_int_equal(tf_gpu_opm_on_mma(&port, &caps, 32, 1), 0);
        assert_int_equal(tf_gpu_opm_on_mma(&l2, &caps, 32, 1), 0);
        assert_int_equal(tf_gpu_plan_parse("opm=ffma", &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_opm_on_mma(&q, &caps, 32, 1), 0);
        tf_gpu_caps old = caps;
        old.has_mma_sync = 0;
        assert_int_equal(tf_gpu_opm_on_mma(&p, &old, 32, 1), 0);
        /* opm=composed: the same kernels, composed */
        assert_int_equal(tf_gpu_plan_parse("opm=composed", &over, NULL, 0), 0);
        const tf_gpu_plan cm = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_opm_on_mma(&cm, &caps, 32, 1), 1);
    }
    { /* its fused kernels: half types at level 3 on NVIDIA's mma.sync and cp.async
       * by default and under opm=fused; composed under opm=composed or opm=ffma,
       * in fp32 and tf32, at levels 1-2, in the portable plan and on AMD */
        assert_int_equal(tf_gpu_opm_fused(&p, &caps, 1), 1); /* auto fuses */
        assert_int_equal(tf_gpu_opm_fused(&p, &caps, 0), 0);
        const tf_gpu_plan port = tf_gpu_plan_portable(), l2 = tf_gpu_plan_default(&caps, 0, 2);
        assert_int_equal(tf_gpu_opm_fused(&port, &caps, 1), 0);
        assert_int_equal(tf_gpu_opm_fused(&l2, &caps, 1), 0);
        assert_int_equal(tf_gpu_plan_parse("opm=fused", &over, NULL, 0), 0);
        const tf_gpu_plan fz = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_opm_fused(&fz, &caps, 1), 1);
        assert_int_equal(tf_gpu_opm_fused(&fz, &caps, 0), 0);
        const char *off[2] = {"opm=composed", "opm=ffma"};
        for (int k = 0; k < 2; ++k) {
            assert_int_equal(tf_gpu_plan_parse(off[k], &over, NULL, 0), 0);
            const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
            assert_int_equal(tf_gpu_opm_fused(&q, &caps, 1), 0);
        }
        tf_gpu_caps old = caps, amd = caps, nocp = caps;
        old.has_mma_sync = 0;
        assert_int_equal(tf_gpu_opm_fused(&fz, &old, 1), 0);
        nocp.has_cp_async = 0;
        assert_int_equal(tf_gpu_opm_fused(&fz, &nocp, 1), 0);
        amd.vendor = TF_GPU_VENDOR_AMD;
        assert_int_equal(tf_gpu_opm_fused(&fz, &amd, 1), 0);
    }
    { /* the transition's MLP: one fused kernel each way for half types at level 3 on
       * wgmma (sm_90a code on a 9.0 device) under mlp=fused; by default, under mlp=composed, in fp32, tf32
       * and the portable plan LayerNorm and GEMM ops */
        assert_int_equal(tf_gpu_mlp_fused(&p, &caps, 1), 0); /* auto composes */
        tf_gpu_plan fz;
        assert_int_equal(tf_gpu_plan_parse("mlp=fused", &fz, NULL, 0), 0);
        const tf_gpu_plan f = tf_gpu_plan_apply(p, &fz);
        assert_int_equal(tf_gpu_mlp_fused(&f, &caps, 1), 1);
        assert_int_equal(tf_gpu_mlp_fused(&f, &caps, 0), 0);
        const tf_gpu_plan port = tf_gpu_plan_portable(), l2 = tf_gpu_plan_default(&caps, 0, 2);
        assert_int_equal(tf_gpu_mlp_fused(&port, &caps, 1), 0);
        assert_int_equal(tf_gpu_mlp_fused(&l2, &caps, 1), 0);
        assert_int_equal(tf_gpu_plan_parse("mlp=composed", &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_mlp_fused(&q, &caps, 1), 0);
        tf_gpu_caps old = caps, amd = caps;
        old.has_wgmma = 0; /* an A100, or a build without sm_90a */
        assert_int_equal(tf_gpu_mlp_fused(&f, &old, 1), 0);
        amd.vendor = TF_GPU_VENDOR_AMD;
        assert_int_equal(tf_gpu_mlp_fused(&f, &amd, 1), 0);
    }
    { /* the triangle multiplication's projections and gates: one kernel each way for
       * half types at level 3 on NVIDIA's mma.sync and cp.async under trimul=fused;
       * the GEMM and gate ops by default, under trimul=composed, in fp32 and tf32,
       * at levels 1-2, in the portable plan and on AMD */
        assert_int_equal(tf_gpu_trimul_proj(&p, &caps, 1), 0); /* auto composes */
        assert_int_equal(tf_gpu_trimul_proj(&p, &caps, 0), 0);
        const tf_gpu_plan port = tf_gpu_plan_portable(), l2 = tf_gpu_plan_default(&caps, 0, 2);
        assert_int_equal(tf_gpu_trimul_proj(&port, &caps, 1), 0);
        assert_int_equal(tf_gpu_trimul_proj(&l2, &caps, 1), 0);
        assert_int_equal(tf_gpu_plan_parse("trimul=fused", &over, NULL, 0), 0);
        const tf_gpu_plan fz = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_trimul_proj(&fz, &caps, 1), 1);
        assert_int_equal(tf_gpu_trimul_proj(&fz, &caps, 0), 0);
        assert_int_equal(tf_gpu_plan_parse("trimul=composed", &over, NULL, 0), 0);
        const tf_gpu_plan q = tf_gpu_plan_apply(p, &over);
        assert_int_equal(tf_gpu_trimul_proj(&q, &caps, 1), 0);
        tf_gpu_caps old = caps, amd = caps;
        old.has_mma_sync = 0;
        assert_int_equal(tf_gpu_trimul_proj(&fz, &old, 1), 0);
        amd.vendor = TF_GPU_VENDOR_AMD;
        assert_int_equal(tf_gpu_trimul_proj(&fz, &amd, 1), 0);
    }
    /* act_types: bf16 from compute capability 8.0, fp16 from 7.0; AMD: all */
    const unsigned f32 = 1u << TF_F32, bf = 1u << TF_BF16, f16 = 1u << TF_F16;
    assert_int_equal(tf_gpu_act_types(&caps), f32 | bf | f16);
    caps.cc_major = 8;
    assert_int_equal(tf_gpu_act_types(&caps), f32 | bf | f16);
    caps.cc_major = 7;
    assert_int_equal(tf_gpu_act_types(&caps), f32 | f16);
    caps.cc_major = 6;
    assert_int_equal(tf_gpu_act_types(&caps), f32);
    caps.vendor = TF_GPU_VENDOR_AMD;
    assert_int_equal(tf_gpu_act_types(&caps), f32 | bf | f16);
    assert_int_equal(tf_gpu_act_types(NULL), f32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_routes),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_policies),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_model_routes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
