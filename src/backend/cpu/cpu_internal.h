/* CPU backend internals: the context, scratch memory, a vectorisable exp and
 * the op implementations (one file per family) that cpu_backend.c puts in
 * the tf_ops table. Not part of any contract: only src/backend/cpu includes it. */
#ifndef TF_CPU_INTERNAL_H
#define TF_CPU_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Every aligned block and every per-thread scratch slice starts on 64 bytes
 * (one cache line, one AVX-512 vector). */
#define TF_CPU_ALIGN 64

/* Scratch buffers an op and the ops it calls may hold at once. */
#define TF_CPU_SCRATCH_DEPTH 4

struct tf_backend {
    int threads;       /* OpenMP threads used by every parallel region */
    int kernel_level;  /* 1..3: the composition cpu_caps prefers (the ops ignore it) */
    size_t cur_bytes;  /* bytes currently allocated through ops->alloc */
    size_t peak_bytes; /* high-water mark of cur_bytes */
    /* host scratch owned by the backend, a stack of buffers (see tf_cpu_scratch) */
    struct {
        void *p;
        size_t bytes;
    } scratch[TF_CPU_SCRATCH_DEPTH];
    int scratch_top; /* buffers held by tf_cpu_scratch_push */
    /* bf16 GEMMs take oneDNN's matmul (cpu_gemm_dnnl.c): set at creation when
     * the build has oneDNN and the CPU AVX512-BF16 (tf_cpu_dnnl_hw); a test
     * clears it to run the widening path on the same backend */
    int bf16_dnnl;
    long dnnl_gemms;           /* GEMMs that oneDNN ran (a test's check of the route) */
    struct tf_cpu_dnnl *dnnl;  /* its engine and primitive cache, made at the first use */
};

/* Backend-owned host scratch of at least `bytes`, 64-byte aligned: the buffer
 * on top of the scratch stack, valid until the op returns. Each buffer grows
 * on demand (the first step grows it, later steps reuse it); ops run one at a
 * time on the calling thread. The op table has no way to report an error, so
 * running out of host memory here aborts with a message.
 * An op that calls another (a bf16/fp16 op widening its operands into fp32
 * scratch, then running the fp32 op on them) holds its buffer with
 * tf_cpu_scratch_push, so that tf_cpu_scratch in the op it calls gets the
 * next buffer, and gives it back with tf_cpu_scratch_pop. */
void *tf_cpu_scratch(tf_backend *be, size_t bytes);
void *tf_cpu_scratch_push(tf_backend *be, size_t bytes);
void tf_cpu_scratch_pop(tf_backend *be);
/* Frees every buffer of the stack (the backend's destroy). */
void tf_cpu_scratch_free(tf_backend *be);

/* Round n up to a multiple of TF_CPU_ALIGN / sizeof(float) floats, so that
 * per-thread slices of a scratch buffer stay aligned. */
static inline size_t tf_cpu_pad_floats(size_t n) {
    const size_t q = TF_CPU_ALIGN / sizeof(float);
    return (n + q - 1) / q * q;
}

/* exp(x) for float, written so that `#pragma omp simd` loops vectorise it
 * (glibc only offers a vector expf under -ffast-math). Cody-Waite reduction
 * x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial: its
 * truncation error |r|^8/8! < 6e-9 is far below half an ulp (6e-8), so the
 * result is within ~1-2 ulp of the true value. Overflow gives +inf, inputs
 * below ln(FLT_MIN) give 0 (no subnormal results), NaN propagates. */
static inline float tf_cpu_expf(float x) {
    const float hi = 88.72283f;  /* just below ln(FLT_MAX) */
    const float lo = -87.33654f; /* ln(FLT_MIN): n >= -126 */
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f; /* 9 significant bits: n*ln2_hi is exact */
    const float ln2_lo = -2.12194440e-4f;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < lo ? lo : (x > hi ? hi : x);
    float t = xc * log2e + shifter;
    float n = t - shifter; /* n in [-126, 128] */
    float r = xc - n * ln2_hi;
    r = r - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n with n = 128 is not a float: use 2 * 2^(n-1) for n > 0 (exact). */
    float n1 = n > 0.0f ? n - 1.0f : n;
    p = n > 0.0f ? p * 2.0f : p;
    union {
        float f;
        int32_t i;
    } sc;
    /* shift as unsigned: n1 + 127 is negative for tiny x (then y is discarded) */
    sc.i = (int32_t)((uint32_t)((int32_t)n1 + 127) << 23);
    float y = p * sc.f;
    y = x > hi ? INFINITY : y;
    return x < lo ? 0.0f : y;
}

static inline float tf_cpu_sigmoidf(float x) {
    return 1.0f / (1.0f + tf_cpu_expf(-x));
}

/* Row l of head h of slice (b, o) of an attention operand view. */
static inline float *tf_cpu_attn_row(const tf_attn_view *v, int b, int o, int l, int h, int d) {
    return (float *)v->p + (long)b * v->sb + (long)o * v->so + (long)l * v->sl + (long)h * d;
}

/* Row i of dbias(b,h,:,:) from one o's dS row: assigned for the first o and
 * accumulated for the next ones, in o order (so the sum is deterministic). */
static inline void tf_cpu_attn_dbias_row(const tf_attn_args *a, int b, int h, int i,
                                         const float *ds, int first_o) {
    float *db = (float *)a->dbias + (long)b * a->bias_sb + (long)h * a->bias_sh + (long)i * a->bias_si;
    const long sj = a->bias_sj;
    if (first_o)
        for (int j = 0; j < a->L; j++) db[j * sj] = ds[j];
    else
        for (int j = 0; j < a->L; j++) db[j * sj] += ds[j];
}

/* Parallel regions below this many elements run on one thread (fork/join
 * costs a few microseconds). */
#define TF_CPU_PAR_MIN 32768

/* ---- element types (cpu_convert.c) ----
 * Element i of a tensor of type t (strides and offsets count elements). */
static inline void *tf_cpu_at(void *p, tf_dtype t, long i) {
    return (char *)p + i * (long)tf_dtype_size(t);
}
static inline const void *tf_cpu_cat(const void *p, tf_dtype t, long i) {
    return (const char *)p + i * (long)tf_dtype_size(t);
}

/* one bf16/fp16 element (t is TF_BF16 or TF_F16) to fp32 and back */
static inline float tf_cpu_half_to_f32(uint16_t h, tf_dtype t) {
    return t == TF_BF16 ? tf_bf16_to_f32(h) : tf_f16_to_f32(h);
}
static inline uint16_t tf_cpu_f32_to_half(float f, tf_dtype t) {
    return t == TF_BF16 ? tf_f32_to_bf16(f) : tf_f32_to_f16(f);
}

/* aborts with a message for a type outside tf_dtype (the op table has no
 * error path) */
void tf_cpu_dtype_check(tf_dtype t, const char *op);

/* n elements of type t widened into fp32 and fp32 rounded to t; rows of
 * cols elements ld apart to and from packed fp32 [rows, cols]; OpenMP over
 * blocks or rows when large */
void tf_cpu_widen(tf_backend *be, float *dst, const void *src, tf_dtype t, long n);
void tf_cpu_narrow(tf_backend *be, void *dst, tf_dtype t, const float *src, long n);
void tf_cpu_widen_rows(tf_backend *be, float *dst, const void *src, tf_dtype t, long ld,
                       long rows, long cols);
void tf_cpu_narrow_rows(tf_backend *be, void *dst, tf_dtype t, long ld, const float *src,
                        long rows, long cols);

/* Rows as fp32 inside an op's row loop: tf_cpu_row_in gives the n elements
 * at element `off` of p as fp32, p itself when t is fp32, else widened into
 * buf; tf_cpu_row_out gives where to compute the output row (p itself, or
 * buf, holding the old values widened when `load`: an accumulating output),
 * and tf_cpu_row_store rounds buf into p (nothing for fp32). So an fp32 op
 * reads and writes its tensors in place and a half one the same arithmetic
 * on exact copies. */
static inline const float *tf_cpu_row_in(float *buf, const void *p, tf_dtype t, long off,
                                         long n) {
    if (t == TF_F32)
        return (const float *)p + off;
    tf_dtype_to_f32(buf, tf_cpu_cat(p, t, off), t, (size_t)n);
    return buf;
}
static inline float *tf_cpu_row_out(float *buf, void *p, tf_dtype t, long off, long n, int load) {
    if (t == TF_F32)
        return (float *)p + off;
    if (load)
        tf_dtype_to_f32(buf, tf_cpu_cat(p, t, off), t, (size_t)n);
    return buf;
}
static inline void tf_cpu_row_store(void *p, tf_dtype t, long off, const float *row, long n) {
    if (t != TF_F32)
        tf_dtype_from_f32(tf_cpu_at(p, t, off), t, row, (size_t)n);
}

/* ---- the ops: tf_cpu_<name> for every entry of op_list.h, one file per
 * family (cpu_gemm.c, cpu_norm.c, ...) ---- */
#define TF_OP(ret, op, params) ret tf_cpu_##op params;
#include "backend/op_list.h"

/* one unbatched row-major GEMM of packed operands (lda, ldb, ldc from the
 * shapes): C (type ct) = op(A) op(B) + beta (R or, R NULL, C); A, B of type t */
void tf_cpu_gemm_packed(tf_backend *be, int tA, int tB, int M, int N, int K, const void *A,
                        const void *B, void *C, float beta, const void *R, tf_dtype t, tf_dtype ct,
                        const char *name);
/* oneDNN's bf16 matmul (cpu_gemm_dnnl.c): tf_cpu_dnnl_hw says whether this
 * build has oneDNN and this CPU AVX512-BF16; tf_cpu_gemm_dnnl runs a GEMM
 * and returns 1, or returns 0 having written nothing where it does not take
 * that GEMM; tf_cpu_dnnl_destroy frees the cache; tf_cpu_dnnl_version is
 * "oneDNN x.y.z", NULL in a build without it. */
int tf_cpu_dnnl_hw(void);
int tf_cpu_gemm_dnnl(tf_backend *be, const tf_gemm_args *a);
void tf_cpu_dnnl_destroy(tf_backend *be);
const char *tf_cpu_dnnl_version(void);

/* Register-blocked attention slices (cpu_attn_simd.c) for the head sizes
 * where tf_cpu_attn_simd_ok(d); buf holds tf_cpu_attn_simd_floats(L, d)
 * floats. The slices (these and cpu_attn.c's) take fp32 views only. */
int tf_cpu_attn_simd_ok(int d);
size_t tf_cpu_attn_simd_floats(int L, int d);
void tf_cpu_attn_fwd_slice_simd(const tf_attn_args *a, int b, int o, int h, float *buf);
void tf_cpu_attn_bwd_slice_simd(const tf_attn_args *a, int b, int o, int h, float *buf,
                                int first_o);

#endif
