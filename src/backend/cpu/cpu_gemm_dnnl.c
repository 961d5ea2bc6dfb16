/* bf16 GEMMs on oneDNN's matmul primitive (AVX512-BF16 hardware dot
 * products, fp32 accumulation), for CPUs that have AVX512-BF16; elsewhere,
 * and in builds without oneDNN (TF_HAVE_DNNL unset), cpu_gemm.c widens the
 * operands to fp32 and runs OpenBLAS's sgemm.
 *
 * The GEMM maps onto one matmul: op(A) is the source [batch, M, K], op(B)
 * the weights [batch, K, N], both bf16, described by strides (a transposed
 * operand is the same memory with its two strides swapped; a batch stride of
 * 0 is a batch dimension of 1, which oneDNN broadcasts). alpha is the output
 * scale, beta a sum post-op on the destination, RELU an eltwise post-op, so
 * that for c_type fp32 or bf16 oneDNN writes C itself, rounding a bf16 C once
 * from the fp32 value (ops.h). A separate R is copied into C first (the sum
 * post-op reads the destination). DRELU (a select on aux, which post-ops
 * cannot express) gets an fp32 destination in scratch and the epilogue and
 * the store run here. Products of bf16 values are exact in fp32 and summed
 * in fp32, so the two paths differ by the summation order only (and the
 * bf16 dot-product instructions flush values below 2^-126 to zero).
 *
 * Not taken here (tf_cpu_gemm_dnnl returns 0, the widening path runs): K 0,
 * a C of another type, entries that share or overlap C (strideC 0: in
 * order), negative strides, and any GEMM for which oneDNN offers only its
 * reference implementation (orders of magnitude slower).
 *
 * Creating a primitive costs far more than a small GEMM, so primitives are
 * cached per backend, keyed by everything they bake in (shapes, strides,
 * alpha, beta, epilogue, types); the memory objects are kept with them and
 * get the call's pointers. The cache is small and fixed (a training step has
 * a few dozen distinct GEMMs) and replaces round-robin when full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

int tf_cpu_dnnl_hw(void) {
#if defined(TF_HAVE_DNNL) && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
#else
    return 0;
#endif
}

#ifdef TF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#define DNNL_CACHE 64

typedef struct { /* memcmp'd: zero-filled before it is set */
    int tA, tB, M, N, K, batch, nbA, nbB, relu, direct;
    long lda, ldb, ldc, sA, sB, sC;
    float alpha, beta;
    tf_dtype ct;
} dnnl_key;

typedef struct {
    dnnl_key k;
    int state; /* 0 empty, 1 a primitive, -1 not for oneDNN (widening path) */
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
} dnnl_entry;

struct tf_cpu_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_entry e[DNNL_CACHE];
    int next;
};

static void entry_clear(dnnl_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->src) dnnl_memory_destroy(e->src);
    if (e->wei) dnnl_memory_destroy(e->wei);
    if (e->dst) dnnl_memory_destroy(e->dst);
    memset(e, 0, sizeof *e);
}

void tf_cpu_dnnl_destroy(tf_backend *be) {
    struct tf_cpu_dnnl *d = be->dnnl;
    if (!d) return;
    for (int i = 0; i < DNNL_CACHE; i++) entry_clear(&d->e[i]);
    if (d->strm) dnnl_stream_destroy(d->strm);
    if (d->eng) dnnl_engine_destroy(d->eng);
    free(d);
    be->dnnl = NULL;
}

/* [nb,] rows x cols of type dt, element (p, i, j) at p*sb + i*sr + j*sc */
static int mat_md(dnnl_memory_desc_t *md, int nd, long nb, long rows, long cols, long sb,
                  long sr, long sc, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {0}, st = {0};
    int q = 0;
    if (nd == 3) dims[q] = nb, st[q++] = sb;
    dims[q] = rows, st[q++] = sr;
    dims[q] = cols, st[q++] = sc;
    return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, st) != dnnl_success;
}

/* The primitive for key k, or state -1 where oneDNN cannot run it well. */
static void entry_make(struct tf_cpu_dnnl *d, dnnl_entry *e, const dnnl_key *k) {
    e->k = *k;
    e->state = -1;
    const int nd = k->batch > 1 ? 3 : 2;
    const long rA = k->tA ? k->K : k->M, rB = k->tB ? k->N : k->K;
    dnnl_memory_desc_t ma, mb, mc;
    const dnnl_data_type_t cdt = k->direct && k->ct == TF_BF16 ? dnnl_bf16 : dnnl_f32;
    const long ldc = k->direct ? k->ldc : k->N, sC = k->direct ? k->sC : (long)k->M * k->N;
    /* a broadcast batch dimension (1) gets the one entry's span as its stride */
    if (mat_md(&ma, nd, k->nbA, k->M, k->K, k->nbA > 1 ? k->sA : rA * k->lda,
               k->tA ? 1 : k->lda, k->tA ? k->lda : 1, dnnl_bf16) ||
        mat_md(&mb, nd, k->nbB, k->K, k->N, k->nbB > 1 ? k->sB : rB * k->ldb,
               k->tB ? 1 : k->ldb, k->tB ? k->ldb : 1, dnnl_bf16) ||
        mat_md(&mc, nd, k->batch, k->M, k->N, sC, ldc, 1, cdt))
        return;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc) != dnnl_success) return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_post_ops_create(&po) == dnnl_success;
    if (ok && k->alpha != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha) == dnnl_success;
    if (ok && k->direct && k->beta != 0.0f)
        ok = dnnl_post_ops_append_sum(po, k->beta) == dnnl_success;
    /* clip_v2 with [0, inf] is max(x, 0) with a +0 for negative x (relu's
     * 0 * x would give -0, where the widening path gives +0) */
    if (ok && k->relu)
        ok = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, 0.0f, INFINITY) ==
             dnnl_success;
    if (ok) ok = dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    if (ok) ok = dnnl_primitive_desc_create(&pd, &md, attr, d->eng, NULL) == dnnl_success;
    const char *impl = NULL;
    if (ok)
        ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
             impl && strncmp(impl, "ref", 3) != 0;
    if (ok) ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    if (ok)
        ok = dnnl_memory_create(&e->src, &ma, d->eng, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->wei, &mb, d->eng, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->dst, &mc, d->eng, DNNL_MEMORY_NONE) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        entry_clear(e);
        e->k = *k;
        e->state = -1;
        return;
    }
    e->state = 1;
}

static dnnl_entry *lookup(struct tf_cpu_dnnl *d, const dnnl_key *k) {
    for (int i = 0; i < DNNL_CACHE; i++)
        if (d->e[i].state && !memcmp(&d->e[i].k, k, sizeof *k)) return &d->e[i];
    dnnl_entry *e = &d->e[d->next];
    d->next = (d->next + 1) % DNNL_CACHE;
    entry_clear(e);
    entry_make(d, e, k);
    return e;
}

static int engine(tf_backend *be) {
    if (be->dnnl) return 1;
    struct tf_cpu_dnnl *d = calloc(1, sizeof *d);
    if (!d) return 0;
    if (dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->strm, d->eng, dnnl_stream_default_flags) != dnnl_success) {
        if (d->eng) dnnl_engine_destroy(d->eng);
        free(d);
        be->bf16_dnnl = 0; /* no engine: the widening path from now on */
        return 0;
    }
    be->dnnl = d;
    return 1;
}

/* C = R, every entry's rows (R's ldc and strideC are C's) */
static void copy_r(tf_backend *be, const tf_gemm_args *a) {
    const size_t es = tf_dtype_size(a->c_type);
    const long rows = (long)a->batch * a->M;
#pragma omp parallel for if (rows * a->N >= TF_CPU_PAR_MIN) schedule(static) num_threads(be->threads)
    for (long r = 0; r < rows; r++) {
        const long off = (r / a->M) * a->strideC + (r % a->M) * a->ldc;
        memcpy((char *)a->C + off * (long)es, (const char *)a->R + off * (long)es,
               es * (size_t)a->N);
    }
}

/* DRELU: C = (aux > 0 ? f + beta * (R or C) : 0) rounded to c_type, f the
 * packed fp32 alpha * op(A) op(B) */
static void drelu_store(tf_backend *be, const tf_gemm_args *a, const float *f) {
    const tf_dtype ct = a->c_type;
    const void *in = a->R ? a->R : a->C;
    const long rows = (long)a->batch * a->M, N = a->N;
    const int nt = rows * N >= TF_CPU_PAR_MIN ? be->threads : 1;
    float *buf = tf_cpu_scratch(be, sizeof(float) * tf_cpu_pad_floats((size_t)N) * 2 * (size_t)nt);
#pragma omp parallel num_threads(nt)
    {
        float *x = buf + tf_cpu_pad_floats((size_t)N) * 2 * (size_t)omp_get_thread_num();
        float *vb = x + tf_cpu_pad_floats((size_t)N);
#pragma omp for schedule(static)
        for (long r = 0; r < rows; r++) {
            const long off = (r / a->M) * a->strideC + (r % a->M) * a->ldc;
            const float *fr = f + r * N;
            const float *xr = tf_cpu_row_in(x, a->aux, ct, off, N);
            /* fp32: C's row itself; a half type: vb, rounded into C below. An
             * fp32 cr may be that same row and a half one vb: element by
             * element in place either way. */
            float *v = tf_cpu_row_out(vb, a->C, ct, off, N, 0);
            if (a->beta != 0.0f) { /* beta == 0 reads neither R nor C */
                const float *cr = tf_cpu_row_in(vb, in, ct, off, N);
                for (long j = 0; j < N; j++) v[j] = fr[j] + a->beta * cr[j];
            } else {
                memcpy(v, fr, sizeof(float) * (size_t)N);
            }
            for (long j = 0; j < N; j++) v[j] = xr[j] > 0.0f ? v[j] : 0.0f;
            tf_cpu_row_store(a->C, ct, off, v, N);
        }
    }
}

int tf_cpu_gemm_dnnl(tf_backend *be, const tf_gemm_args *a) {
    if (a->ab_type != TF_BF16 || (a->c_type != TF_F32 && a->c_type != TF_BF16) || a->K <= 0)
        return 0;
    const long cspan = (long)(a->M - 1) * a->ldc + a->N;
    if (a->lda < 0 || a->ldb < 0 || a->ldc < a->N || a->strideA < 0 || a->strideB < 0 ||
        (a->batch > 1 && a->strideC < cspan))
        return 0;
    if (!engine(be)) return 0;
    const int drelu = a->epilogue == TF_EPI_DRELU;
    dnnl_key k;
    memset(&k, 0, sizeof k);
    k.tA = a->transA != 0, k.tB = a->transB != 0;
    k.M = a->M, k.N = a->N, k.K = a->K, k.batch = a->batch;
    k.nbA = a->batch > 1 && a->strideA != 0 ? a->batch : 1;
    k.nbB = a->batch > 1 && a->strideB != 0 ? a->batch : 1;
    k.lda = a->lda, k.ldb = a->ldb, k.ldc = a->ldc;
    k.sA = k.nbA > 1 ? a->strideA : 0, k.sB = k.nbB > 1 ? a->strideB : 0;
    k.sC = a->batch > 1 ? a->strideC : 0;
    k.alpha = a->alpha, k.beta = drelu ? 0.0f : a->beta;
    k.relu = a->epilogue == TF_EPI_RELU;
    k.direct = !drelu;
    k.ct = a->c_type;
    /* oneDNN's OpenMP regions follow omp_get_max_threads(), also when it
     * plans a primitive */
    if (omp_get_max_threads() != be->threads) omp_set_num_threads(be->threads);
    struct tf_cpu_dnnl *d = be->dnnl;
    dnnl_entry *e = lookup(d, &k);
    if (e->state != 1) return 0;
    float *f = NULL;
    if (drelu) {
        f = tf_cpu_scratch_push(be, sizeof(float) * (size_t)a->batch * a->M * a->N);
    } else if (a->R && a->R != a->C && a->beta != 0.0f) {
        copy_r(be, a);
    }
    dnnl_memory_set_data_handle(e->src, (void *)a->A);
    dnnl_memory_set_data_handle(e->wei, (void *)a->B);
    dnnl_memory_set_data_handle(e->dst, drelu ? (void *)f : a->C);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst}};
    const int ok = dnnl_primitive_execute(e->prim, d->strm, 3, args) == dnnl_success &&
                   dnnl_stream_wait(d->strm) == dnnl_success;
    if (!ok) { /* a primitive that was created runs: an internal error */
        fprintf(stderr, "tinyfold: internal error: cpu backend: oneDNN's matmul failed\n");
        abort();
    }
    if (drelu) {
        drelu_store(be, a, f);
        tf_cpu_scratch_pop(be);
    }
    be->dnnl_gemms++;
    return 1;
}

const char *tf_cpu_dnnl_version(void) {
    static char v[32];
    const dnnl_version_t *dv = dnnl_version();
    snprintf(v, sizeof v, "oneDNN %d.%d.%d", dv->major, dv->minor, dv->patch);
    return v;
}

#else /* built without oneDNN: every bf16 GEMM takes the widening path */

int tf_cpu_gemm_dnnl(tf_backend *be, const tf_gemm_args *a) {
    (void)be;
    (void)a;
    return 0;
}

void tf_cpu_dnnl_destroy(tf_backend *be) { (void)be; }

const char *tf_cpu_dnnl_version(void) { return NULL; }

#endif
