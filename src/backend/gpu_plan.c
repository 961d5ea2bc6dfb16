/* The GPU plan and its routing (gpu_plan.h): plain C, no GPU. */
#include "backend/gpu_plan.h"
#include "backend/tf_dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tf_gpu_caps tf_gpu_caps_h200(void)
{
    tf_gpu_caps c;
    memset(&c, 0, sizeof c);
    c.vendor = TF_GPU_VENDOR_NVIDIA;
    c.cc_major = 9;
    c.cc_minor = 0;
    c.sm_count = 132;
    c.warp_size = 32;
    c.has_wgmma = 1;
    c.has_mma_sync = 1;
    c.has_cp_async = 1;
    return c;
}

tf_gpu_plan tf_gpu_plan_portable(void)
{
    tf_gpu_plan p;
    memset(&p, 0, sizeof p);
    p.level = 3;
    p.gemm = TF_GPU_GEMM_CUBLAS;
    p.dw = TF_GPU_DW_LT;
    p.attn = TF_GPU_ATTN_K1;
    p.lane = TF_GPU_LANE_AUTO;
    p.opm = TF_GPU_OPM_FFMA;
    p.mlp = TF_GPU_MLP_COMPOSED;
    p.trimul = TF_GPU_TRIMUL_COMPOSED;
    return p;
}

tf_gpu_plan tf_gpu_plan_default(const tf_gpu_caps *caps, int tf32, int level)
{
    (void)tf32; /* the routes read the precision per call */
    tf_gpu_plan p;
    if (!caps || !caps->has_mma_sync || !caps->has_cp_async) {
        p = tf_gpu_plan_portable();
    } else {
        memset(&p, 0, sizeof p);
    }
    p.level = level >= 1 && level <= 3 ? level : 3;
    return p;
}

tf_gpu_plan tf_gpu_plan_apply(tf_gpu_plan base, const tf_gpu_plan *o)
{
    if (!o) return base;
    if (o->gemm != TF_GPU_GEMM_AUTO) base.gemm = o->gemm;
    if (o->dw != TF_GPU_DW_AUTO) base.dw = o->dw;
    if (o->attn != TF_GPU_ATTN_AUTO) base.attn = o->attn;
    if (o->lane != TF_GPU_LANE_AUTO) base.lane = o->lane;
    if (o->opm != TF_GPU_OPM_AUTO) base.opm = o->opm;
    if (o->mlp != TF_GPU_MLP_AUTO) base.mlp = o->mlp;
    if (o->trimul != TF_GPU_TRIMUL_AUTO) base.trimul = o->trimul;
    if (o->wgrad_delay_us > 0) base.wgrad_delay_us = o->wgrad_delay_us;
    return base;
}

/* ---- names ---------------------------------------------------------------- */
static const char *const gemm_names[TF_GPU_GEMM_COUNT_] = {"auto", "cublas", "mma", "wgmma"};
static const char *const dw_names[TF_GPU_DW_COUNT_] = {"auto", "mma", "lt", "half"};
static const char *const attn_names[TF_GPU_ATTN_COUNT_] = {"auto", "k1", "k2", "k3",
                                                            "k4",   "k5", "k6"};
static const char *const lane_names[TF_GPU_LANE_COUNT_] = {"auto", "on", "off"};
static const char *const opm_names[TF_GPU_OPM_COUNT_] = {"auto", "ffma", "composed", "fused"};
static const char *const mlp_names[TF_GPU_MLP_COUNT_] = {"auto", "composed", "fused"};
static const char *const trimul_names[TF_GPU_TRIMUL_COUNT_] = {"auto", "composed", "fused"};
#define TF_GPU_DELAY_MAX 100000

const char *tf_gpu_plan_help(void)
{
    return "default, portable, or comma-separated key=value over them: gemm=auto|cublas|mma|wgmma, "
           "dw=auto|mma|lt|half, attn=auto|k1|k2|k3|k4|k5|k6, lane=auto|on|off, opm=auto|ffma|composed|fused, "
           "mlp=auto|composed|fused, trimul=auto|composed|fused, wgrad_delay_us=0..100000";
}

static int pick(const char *const *names, int n, const char *v, size_t len)
{
    for (int i = 0; i < n; ++i)
        if (strlen(names[i]) == len && !strncmp(names[i], v, len)) return i;
    return -1;
}

static void bad(char *err, size_t errlen, const char *what, const char *tok, size_t len,
                const char *accepted)
{
    if (err && errlen)
        snprintf(err, errlen, "--gpu-plan: %s '%.*s' is not accepted: %s", what, (int)len, tok,
                 accepted);
}

int tf_gpu_plan_parse(const char *spec, tf_gpu_plan *out, char *err, size_t errlen)
{
    tf_gpu_plan p;
    memset(&p, 0, sizeof p);
    if (!spec || !*spec) {
        if (err && errlen) snprintf(err, errlen, "--gpu-plan: empty: use %s", tf_gpu_plan_help());
        return 1;
    }
    const char *s = spec;
    for (;;) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (!eq) {
            if (len == 7 && !strncmp(s, "default", 7)) {
                memset(&p, 0, sizeof p);
            } else if (len == 8 && !strncmp(s, "portable", 8)) {
                p = tf_gpu_plan_portable();
                p.level = 0;
            } else {
                bad(err, errlen, "plan", s, len, tf_gpu_plan_help());
                return 1;
            }
        } else {
            const size_t kl = (size_t)(eq - s), vl = len - kl - 1;
            const char *v = eq + 1;
            int k = -1;
            if (kl == 4 && !strncmp(s, "gemm", 4)) {
                if ((k = pick(gemm_names, TF_GPU_GEMM_COUNT_, v, vl)) >= 0) p.gemm = k;
                else return bad(err, errlen, "gemm value", v, vl, "use auto, cublas, mma or wgmma"), 1;
            } else if (kl == 2 && !strncmp(s, "dw", 2)) {
                if ((k = pick(dw_names, TF_GPU_DW_COUNT_, v, vl)) >= 0) p.dw = k;
                else return bad(err, errlen, "dw value", v, vl, "use auto, mma, lt or half"), 1;
            } else if (kl == 4 && !strncmp(s, "attn", 4)) {
                if ((k = pick(attn_names, TF_GPU_ATTN_COUNT_, v, vl)) >= 0) p.attn = k;
                else return bad(err, errlen, "attn value", v, vl, "use auto, k1, k2, k3, k4, k5 or k6"), 1;
            } else if (kl == 4 && !strncmp(s, "lane", 4)) {
                if ((k = pick(lane_names, TF_GPU_LANE_COUNT_, v, vl)) >= 0) p.lane = k;
                else return bad(err, errlen, "lane value", v, vl, "use auto, on or off"), 1;
            } else if (kl == 3 && !strncmp(s, "opm", 3)) {
                if ((k = pick(opm_names, TF_GPU_OPM_COUNT_, v, vl)) >= 0) p.opm = k;
                else return bad(err, errlen, "opm value", v, vl, "use auto, ffma, composed or fused"), 1;
            } else if (kl == 3 && !strncmp(s, "mlp", 3)) {
                if ((k = pick(mlp_names, TF_GPU_MLP_COUNT_, v, vl)) >= 0) p.mlp = k;
                else return bad(err, errlen, "mlp value", v, vl, "use auto, composed or fused"), 1;
            } else if (kl == 6 && !strncmp(s, "trimul", 6)) {
                if ((k = pick(trimul_names, TF_GPU_TRIMUL_COUNT_, v, vl)) >= 0) p.trimul = k;
                else return bad(err, errlen, "trimul value", v, vl, "use auto, composed or fused"), 1;
            } else if (kl == 14 && !strncmp(s, "wgrad_delay_us", 14)) {
                char buf[16];
                char *e = NULL;
                long d = -1;
                if (vl > 0 && vl < sizeof buf) {
                    memcpy(buf, v, vl);
                    buf[vl] = 0;
                    d = strtol(buf, &e, 10);
                    if (*e || buf[0] == '-' || buf[0] == '+') d = -1;
                }
                if (d < 0 || d > TF_GPU_DELAY_MAX)
                    return bad(err, errlen, "wgrad_delay_us value", v, vl,
                               "use a whole number of microseconds, 0..100000"), 1;
                p.wgrad_delay_us = (int)d;
            } else {
                bad(err, errlen, "key", s, kl, tf_gpu_plan_help());
                return 1;
            }
        }
        if (!end) break;
        s = end + 1;
    }
    *out = p;
    return 0;
}

void tf_gpu_plan_format(const tf_gpu_plan *p, char *out, size_t n)
{
    if (!out || !n) return;
    int k = snprintf(out, n, "gemm=%s,dw=%s,attn=%s,lane=%s,opm=%s,mlp=%s,trimul=%s",
                     gemm_names[p->gemm], dw_names[p->dw], attn_names[p->attn],
                     lane_names[p->lane], opm_names[p->opm], mlp_names[p->mlp],
                     trimul_names[p->trimul]);
    if (p->wgrad_delay_us > 0 && k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, ",wgrad_delay_us=%d", p->wgrad_delay_us);
}

const char *tf_gpu_engine_name(tf_gpu_engine e)
{
    static const char *const n[TF_GPU_ENG_COUNT_] = {"cublas", "lt", "mma", "wgmma", "wide-mma",
                                                     "wide-wgmma"};
    return (unsigned)e < TF_GPU_ENG_COUNT_ ? n[e] : "?";
}

void tf_gpu_gemm_route_format(const tf_gpu_gemm_route *r, char *out, size_t n)
{
    if (!out || !n) return;
    if (r->engine == TF_GPU_ENG_CUBLAS || r->engine == TF_GPU_ENG_LT) {
        snprintf(out, n, "%s", tf_gpu_engine_name(r->engine));
        return;
    }
    char sp[16] = "";
    if (r->splits > 1) snprintf(sp, sizeof sp, " s%d", r->splits);
    snprintf(out, n, "%s %d%s%s%s", tf_gpu_engine_name(r->engine), r->tile, sp,
             r->half ? " half" : r->x3 ? " x3" : " tf32", r->wg_short ? " short" : "");
}

const char *tf_gpu_attn_kernel_name(tf_gpu_attn_kernel k)
{
    static const char *const n[] = {"?",       "kernel1", "kernel2", "kernel3",
                                    "kernel4", "kernel5", "kernel6"};
    return (unsigned)k <= TF_GPU_ATTN_KERNEL6 ? n[k] : "?";
}

/* ---- GEMM routing ----------------------------------------------------------
 * In the order the engines are tried: the weight gradients' wide split, the
 * tensor-core kernels, cuBLASLt, cuBLAS. */

static long cdiv(long a, long b) { return (a + b - 1) / b; }

#define WIDE_DEPTH 128
/* The wide split of K: per_sm blocks an SM over `tiles` tiles (one wave),
 * each split at least WIDE_DEPTH deep, the partials within the workspace,
 * each split whole slices of `slice` rows; into r's splits and kchunk. 0:
 * fewer than 2 splits (r untouched). */
static int wide_split(const tf_gpu_gemm_shape *s, long tiles, long per_sm, long sms, int slice,
                      tf_gpu_gemm_route *r)
{
    long n = sms * per_sm / tiles;
    if (n > s->K / WIDE_DEPTH) n = s->K / WIDE_DEPTH;
    const long cap = (long)(TF_GPU_WORKSPACE_BYTES / sizeof(float)) / ((long)s->batch * s->M * s->N);
    if (n > cap) n = cap;
    if (n < 2) return 0;
    r->kchunk = (int)(cdiv(cdiv(s->K, n), slice) * slice);
    r->splits = (int)cdiv(s->K, r->kchunk);
    return 1;
}

/* The wide split: few tiles over a long K (dW = dy^T x, K = rows). Split K as
 * wide as the GPU holds blocks (one wave), each split at least WIDE_DEPTH
 * deep, the partials in the workspace, added by a separate kernel. wgmma (1
 * block an SM) where M and N are at least 128; mma.sync (2 blocks of 128 x
 * 128, 4 of 64 x 64) under dw=mma. 0: not one for it. */
static int route_wide(const tf_gpu_gemm_shape *s, int dw, int wg_ok, int tf32, long sms,
                      tf_gpu_gemm_route *r)
{
    if (dw == 0 || s->K < 1024 || (tf32 && dw == 1)) return 0;
    const long big_tiles = (long)s->batch * cdiv(s->M, 128) * cdiv(s->N, 128);
    const int full = s->M >= 128 && s->N >= 128;
    const int wg = dw != 2;
    if (wg && !(wg_ok && full)) return 0;
    const int big = wg || full;
    const int bm = big ? 128 : 64;
    const long tiles = (long)s->batch * cdiv(s->M, bm) * cdiv(s->N, bm);
    if (big_tiles * 2 > sms) return 0; /* enough tiles without a split */
    if (!wide_split(s, tiles, wg ? 1 : big ? 2 : 4, sms, 32, r)) return 0;
    r->engine = wg ? TF_GPU_ENG_WIDE_WGMMA : TF_GPU_ENG_WIDE_MMA;
    r->tile = bm;
    r->x3 = !tf32;
    return 1;
}

/* The half types' weight gradients (dW = A^T B: A stored [K, M], B [K, N],
 * an fp32 result) as route_wide's split on the half wgmma kernel
 * (cuda_gemm_wgmma_dw.cu: 128 x 128 tiles, one block an SM, 64-row slices,
 * so each split takes whole slices). 0: not one for it. */
static int route_wide_half(const tf_gpu_gemm_shape *s, long sms, tf_gpu_gemm_route *r)
{
    if (!s->ta || s->tb || s->c_half || s->K < 1024) return 0;
    const long tiles = (long)s->batch * cdiv(s->M, 128) * cdiv(s->N, 128);
    if (tiles * 2 > sms) return 0; /* enough tiles without a split */
    if (!wide_split(s, tiles, 1, sms, 64, r)) return 0;
    r->engine = TF_GPU_ENG_WIDE_WGMMA;
    r->tile = 128;
    r->half = 1;
    return 1;
}

/* The tensor-core kernels. mma 1: where they measured faster than cuBLAS
 * (fp32; wgmma with full tiles, K >= 128 and more tiles than half the SMs;
 * mma.sync on 128 x 128 tiles that fill the GPU twice, no split K); mma 2:
 * mma.sync wherever it runs. wg 2: wgmma wherever it runs (fp32). */
#define WG_SHORT_K 512   /* wgmma: K at most this ... */
#define WG_SHORT_WAVES 3 /* ... and tiles for this many waves: two blocks an SM */
static int route_mma(const tf_gpu_gemm_shape *s, int mma, int wgp, int tf32, long sms,
                     tf_gpu_gemm_route *r)
{
    const long big_tiles = (long)s->batch * cdiv(s->M, 128) * cdiv(s->N, 128);
    const int wg = !tf32 && (wgp == 2 || (wgp == 1 && s->K >= 128 && s->M >= 128 &&
                                          s->N >= 128 && big_tiles * 2 > sms));
    const int big = wg || (big_tiles >= 2 * sms && s->M >= 128 && s->N >= 128);
    const int bm = big ? 128 : 64;
    const long tiles = (long)s->batch * cdiv(s->M, bm) * cdiv(s->N, bm);
    /* split K when the tiles leave most of the GPU idle and K is long: up to
     * one block per SM, each split at least 512 deep, at most 16 splits (the
     * last split of a tile adds them all) */
    int splits = 1;
    if (tiles * 2 <= sms && s->K >= 1024) {
        long n = sms / tiles;
        if (n > s->K / 512) n = s->K / 512;
        if (n > 16) n = 16;
        const long per = (long)bm * bm;
        const long cap = (long)(TF_GPU_WORKSPACE_BYTES / sizeof(float));
        while (n > 1 && tiles * n * per > cap) --n;
        if (tiles > TF_GPU_MMA_COUNTERS) n = 1;
        splits = (int)(n < 1 ? 1 : n);
    }
    int kchunk = s->K;
    if (splits > 1) {
        const int per = (s->K + splits - 1) / splits;
        kchunk = (per + 31) / 32 * 32;
        splits = (s->K + kchunk - 1) / kchunk;
    }
    if (!wg && mma == 1 && (splits > 1 || !big || s->K < 32 || tf32)) return 0;
    r->engine = wg ? TF_GPU_ENG_WGMMA : TF_GPU_ENG_MMA;
    r->tile = bm;
    r->splits = splits;
    r->kchunk = kchunk;
    r->x3 = !tf32;
    r->wg_short = wg && s->K <= WG_SHORT_K && splits == 1 &&
                  tiles >= (long)WG_SHORT_WAVES * sms;
    return 1;
}

unsigned tf_gpu_act_types(const tf_gpu_caps *caps)
{
    unsigned t = 1u << TF_F32;
    if (!caps) return t;
    if (caps->vendor == TF_GPU_VENDOR_AMD) /* rocBLAS' f16 and bf16 GEMMs (tf_hip_blas.cpp) */
        return t | 1u << TF_F16 | 1u << TF_BF16;
    if (caps->cc_major >= 7) t |= 1u << TF_F16;
    if (caps->cc_major >= 8) t |= 1u << TF_BF16;
    return t;
}

tf_gpu_gemm_route tf_gpu_route_gemm(const tf_gpu_plan *p, const tf_gpu_caps *caps,
                                    const tf_gpu_gemm_shape *s, int tf32)
{
    tf_gpu_gemm_route r;
    memset(&r, 0, sizeof r);
    r.engine = TF_GPU_ENG_CUBLAS;
    r.splits = 1;
    r.kchunk = s->K;
    const int lib_ok = s->K > 0 && !s->neg_stride;
    if (s->half && p->level >= 3) {
        /* half types: the weight gradients on the half wgmma kernel (dw=half
         * under gemm=auto or wgmma), else cuBLASLt (what it takes), else cuBLAS */
        const int wg_dw = caps && caps->has_wgmma && caps->has_mma_sync && caps->has_cp_async &&
                          p->dw == TF_GPU_DW_HALF &&
                          (p->gemm == TF_GPU_GEMM_AUTO || p->gemm == TF_GPU_GEMM_WGMMA);
        const long sms = caps && caps->sm_count > 0 ? caps->sm_count : 1;
        if (wg_dw && lib_ok && s->M >= 16 && s->N >= 16 && s->batch <= 65535 &&
            route_wide_half(s, sms, &r))
            return r;
        if (lib_ok) r.engine = TF_GPU_ENG_LT;
        return r;
    }
    if (p->level < 3) { /* the baselines: cuBLAS; RELU fused by cuBLASLt on a lone product */
        if (s->relu && s->batch == 1 && s->beta_zero && s->K > 0) r.engine = TF_GPU_ENG_LT;
        return r;
    }
    const long sms = caps && caps->sm_count > 0 ? caps->sm_count : 1;
    const int has_mma = caps && caps->has_mma_sync && caps->has_cp_async;
    const int has_wg = has_mma && caps->has_wgmma;
    /* the policy as three switches: mma (0 off, 1 where faster, 2 wherever),
     * wg (0 off, 1 where faster, 2 wherever), dw (0 off, 1 wgmma, 2 mma.sync) */
    int mma = 0, wg = 0, dw = 0;
    switch (p->gemm) {
    case TF_GPU_GEMM_AUTO: mma = !tf32, wg = 1, dw = 1; break;
    case TF_GPU_GEMM_CUBLAS: mma = 0, wg = 0, dw = 0; break;
    case TF_GPU_GEMM_MMA: mma = 2, wg = 0, dw = 1; break;
    case TF_GPU_GEMM_WGMMA: mma = !tf32, wg = 2, dw = 1; break;
    default: break;
    }
    if (p->dw == TF_GPU_DW_MMA) dw = 2;
    else if (p->dw == TF_GPU_DW_LT) dw = 0;
    if (!has_wg) wg = 0;
    if (!has_mma) mma = 0, dw = 0;
    /* what the tensor-core kernels take at all: K > 0, no negative strides,
     * M and N at least 16 (narrower outputs, e.g. the pair-bias projections,
     * suit cuBLAS), a batch the grid holds */
    const int tc_ok = lib_ok && s->M >= 16 && s->N >= 16 && s->batch <= 65535;
    if (tc_ok && route_wide(s, dw, wg, tf32, sms, &r)) return r;
    if (tc_ok && mma && route_mma(s, mma, wg, tf32, sms, &r)) return r;
    r.splits = 1;
    r.kchunk = s->K;
    r.tile = 0;
    r.x3 = 0;
    r.wg_short = 0;
    r.engine = lib_ok ? TF_GPU_ENG_LT : TF_GPU_ENG_CUBLAS;
    return r;
}

/* ---- attention routing ------------------------------------------------------ */
/* kernel5's domain: L <= 128 with head size exactly 16 or 32 */
static int k5_fits(const tf_gpu_attn_shape *s)
{
    return s->L >= 1 && s->L <= 128 && (s->d == 16 || s->d == 32);
}

/* kernel5 by default: head size 32 (the triangle attentions) above L 32 (L 16
 * in tf32), head size 16 (the MSA attentions) in tf32 above L 64; the
 * backward wherever the forward runs it */
static int k5_default(const tf_gpu_attn_shape *s, int tf32)
{
    return k5_fits(s) && ((s->d == 32 && (s->L > 32 || (tf32 && s->L > 16))) ||
                          (tf32 && s->d == 16 && s->L > 64));
}

/* kernel4 by default (L <= 128, head size 16 or 32): the backward except at
 * head size 16 with L 33..64, the forward at L <= 32 and at head size 32 with
 * L <= 64 */
static int k4_default(const tf_gpu_attn_shape *s)
{
    if (s->L < 1 || s->L > 128 || (s->d != 16 && s->d != 32)) return 0;
    if (s->backward) return !(s->d == 16 && s->L > 32 && s->L <= 64);
    return s->L <= 32 || (s->d == 32 && s->L <= 64);
}

tf_gpu_attn_kernel tf_gpu_route_attn(const tf_gpu_plan *p, const tf_gpu_caps *caps,
                                     const tf_gpu_attn_shape *s, int tf32)
{
    if (p->level < 3 || p->attn == TF_GPU_ATTN_K1) return TF_GPU_ATTN_KERNEL1;
    /* kernel2's dbias (kernel2, 3 and 4 use it) copies with cp.async, kernel5
     * multiplies on mma.sync */
    if (!caps || !caps->has_cp_async) return TF_GPU_ATTN_KERNEL1;
    const int k5_ok = caps->has_mma_sync;
    /* half types at head size 16 or 32: kernel6 (flash attention on the
     * m16n8k16 tile, any L) above one key tile (L > 64), kernel5 at or below
     * it, where its whole-row scores cost less than kernel6's online softmax
     * and tile loop; attn=k5 / attn=k6 force one where it fits; else kernel1 */
    if (s->half) {
        if (!k5_ok || (s->d != 16 && s->d != 32) || s->L < 1) return TF_GPU_ATTN_KERNEL1;
        if (p->attn == TF_GPU_ATTN_K6 || !k5_fits(s)) return TF_GPU_ATTN_KERNEL6;
        return p->attn == TF_GPU_ATTN_K5 || s->L <= 64 ? TF_GPU_ATTN_KERNEL5 : TF_GPU_ATTN_KERNEL6;
    }
    /* k6 names the half types' kernel: fp32 and tf32 route as auto */
    const tf_gpu_attn_policy a = p->attn == TF_GPU_ATTN_K6 ? TF_GPU_ATTN_AUTO : p->attn;
    if (a == TF_GPU_ATTN_K5 && k5_ok && k5_fits(s)) return TF_GPU_ATTN_KERNEL5;
    if (a == TF_GPU_ATTN_K4 && s->L >= 1 && s->L <= 128 && s->d >= 1 && s->d <= 32)
        return TF_GPU_ATTN_KERNEL4;
    const int dflt = a == TF_GPU_ATTN_AUTO || a == TF_GPU_ATTN_K5 || a == TF_GPU_ATTN_K4;
    if (dflt && a != TF_GPU_ATTN_K4 && k5_ok && k5_default(s, tf32)) return TF_GPU_ATTN_KERNEL5;
    if (dflt && k4_default(s)) return TF_GPU_ATTN_KERNEL4;
    /* kernel2/3: the tile class (L <= 16, <= 32 or padded head size 64: one
     * of kernel2's; above: kernel3 at padded head size 32, else kernel2) */
    const int dm = s->d <= 16 ? 16 : s->d <= 32 ? 32 : 64;
    if (s->L <= 32 || dm == 64) return TF_GPU_ATTN_KERNEL2;
    if (a == TF_GPU_ATTN_K3) return TF_GPU_ATTN_KERNEL3;
    if (a == TF_GPU_ATTN_K2) return TF_GPU_ATTN_KERNEL2;
    return dm == 32 ? TF_GPU_ATTN_KERNEL3 : TF_GPU_ATTN_KERNEL2;
}

int tf_gpu_opm_on_mma(const tf_gpu_plan *p, const tf_gpu_caps *caps, int co, int half)
{
    return half && p->level >= 3 && p->opm != TF_GPU_OPM_FFMA && caps && caps->has_mma_sync &&
           co == 32;
}

int tf_gpu_opm_fused(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half)
{
    return half && p->level >= 3 && (p->opm == TF_GPU_OPM_FUSED || p->opm == TF_GPU_OPM_AUTO) &&
           caps && caps->vendor == TF_GPU_VENDOR_NVIDIA && caps->has_mma_sync &&
           caps->has_cp_async;
}

int tf_gpu_trimul_proj(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half)
{
    return half && p->level >= 3 && p->trimul == TF_GPU_TRIMUL_FUSED && caps &&
           caps->vendor == TF_GPU_VENDOR_NVIDIA && caps->has_mma_sync && caps->has_cp_async;
}

int tf_gpu_mlp_fused(const tf_gpu_plan *p, const tf_gpu_caps *caps, int half)
{
    return half && p->level >= 3 && p->mlp == TF_GPU_MLP_FUSED && caps &&
           caps->vendor == TF_GPU_VENDOR_NVIDIA && caps->has_wgmma;
}
