/* CPU backend: context, memory accounting and the "cpu" op table.
 *
 * Memory is host memory. Each block carries a 64-byte header in front that
 * records its size, so that free() can keep the current/peak byte counts
 * without a lookup table; the pointer handed out stays 64-byte aligned. */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

static int cpu_alloc(tf_backend *be, void **p, size_t bytes) {
    *p = NULL;
    if (bytes > SIZE_MAX - 2 * TF_CPU_ALIGN) /* the rounding below would overflow */
        return 1;
    const size_t payload = round_up(bytes ? bytes : 1, TF_CPU_ALIGN);
    unsigned char *blk = aligned_alloc(TF_CPU_ALIGN, payload + TF_CPU_ALIGN);
    if (!blk)
        return 1;
    memcpy(blk, &payload, sizeof payload);
    be->cur_bytes += payload;
    if (be->cur_bytes > be->peak_bytes)
        be->peak_bytes = be->cur_bytes;
    *p = blk + TF_CPU_ALIGN;
    return 0;
}

static void cpu_free(tf_backend *be, void *p) {
    if (!p)
        return;
    unsigned char *blk = (unsigned char *)p - TF_CPU_ALIGN;
    size_t payload;
    memcpy(&payload, blk, sizeof payload);
    be->cur_bytes -= payload;
    free(blk);
}

static int cpu_host_alloc(tf_backend *be, void **p, size_t bytes) {
    (void)be;
    *p = NULL;
    if (bytes > PTRDIFF_MAX) /* no object is larger (and ASan aborts on it) */
        return 1;
    *p = malloc(bytes ? bytes : 1);
    return *p == NULL;
}

static void cpu_host_free(tf_backend *be, void *p) {
    (void)be;
    free(p);
}

static void cpu_no_wait(tf_backend *be) { (void)be; }

static void cpu_upload(tf_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes)
        memcpy(dst, src, bytes);
}

static void cpu_copy_rows(tf_backend *be, void *dst, long dst_ld, const void *src, long src_ld,
                          long cols, long rows, tf_dtype t) {
    tf_cpu_dtype_check(t, "copy_rows");
    const size_t es = tf_dtype_size(t); /* a copy: the bits move, whatever the type */
#pragma omp parallel for if (rows * cols > (1L << 16)) schedule(static) num_threads(be->threads)
    for (long r = 0; r < rows; r++)
        memcpy((char *)dst + r * dst_ld * es, (const char *)src + r * src_ld * es,
               es * (size_t)cols);
}
static void cpu_copy(tf_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

static void cpu_zero(tf_backend *be, void *p, size_t bytes) {
    (void)be;
    if (bytes)
        memset(p, 0, bytes);
}

static void cpu_sync(tf_backend *be) {
    (void)be;
}

/* The CPU's level 3: the outer product mean weight-first (fewer FLOPs, no
 * permute) and the triangle multiplication's GEMMs merged; the rest of the
 * reference composition, one queue, host memory, no graphs. */
static void cpu_caps(const tf_backend *be, tf_backend_caps *c) {
    const int v3 = be->kernel_level >= 3;
    memset(c, 0, sizeof *c);
    c->name = "cpu";
    c->opm_weight_first = v3;
    c->trimul_merged = v3;
    c->act_types = (1u << TF_F32) | (1u << TF_BF16) | (1u << TF_F16);
    c->ln_stream_copy = 1;
}

static const tf_ops cpu_ops = {
    .name = "cpu",
    .destroy = tf_cpu_backend_destroy,
    .peak_bytes = tf_cpu_backend_peak_bytes,
    .describe = tf_cpu_backend_describe,
    .caps = cpu_caps,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_upload,
    .copy = cpu_copy,
    .copy_rows = cpu_copy_rows,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .side_upload = cpu_upload,
    .main_wait_side = cpu_no_wait,
    .side_wait_main = cpu_no_wait,
    /* the ops: tf_cpu_<name> for each (op_list.h) */
#define TF_OP(ret, op, params) .op = tf_cpu_##op,
#include "backend/op_list.h"
};

int tf_cpu_backend_create(tf_backend **be, const tf_ops **ops, const tf_backend_opts *o, char *err,
                          size_t errlen) {
    int threads = o ? o->threads : 0;
    int level = o ? o->kernel_level : 2;
    *be = NULL;
    if (threads < 0) {
        snprintf(err, errlen, "cpu backend: threads must be >= 0 (0 = all cores), got %d", threads);
        return 1;
    }
    tf_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cpu backend: out of host memory");
        return 1;
    }
    b->threads = threads > 0 ? threads : omp_get_num_procs();
    b->kernel_level = level;
    b->bf16_dnnl = tf_cpu_dnnl_hw();
    /* OpenBLAS's OpenMP build follows omp_get_max_threads() of the caller;
     * setting both keeps our loops and its GEMMs on the same thread count. */
    omp_set_num_threads(b->threads);
    openblas_set_num_threads(b->threads);
    *be = b;
    if (ops)
        *ops = &cpu_ops;
    return 0;
}

void tf_cpu_backend_destroy(tf_backend *be) {
    if (!be)
        return;
    tf_cpu_dnnl_destroy(be);
    tf_cpu_scratch_free(be);
    free(be);
}

size_t tf_cpu_backend_peak_bytes(const tf_backend *be) {
    return be ? be->peak_bytes : 0;
}

const char *tf_cpu_blas_kernels_note(void) {
    static char note[96];
    /* OpenBLAS picks its kernels at load time: from OPENBLAS_CORETYPE when the
     * environment sets it (a container image may, for every CPU), else from
     * the CPU it knows. */
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && forced[0]) {
        snprintf(note, sizeof note, " set by OPENBLAS_CORETYPE=%.40s", forced);
        return note;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    const char *core = openblas_get_corename();
    static const char *const avx512_cores[] = {"skylakex", "cooperlake", "sapphirerapids"};
    int uses_avx512 = 0;
    for (size_t i = 0; core && i < sizeof avx512_cores / sizeof avx512_cores[0]; i++) {
        size_t k = 0;
        while (core[k] && avx512_cores[i][k] &&
               (core[k] | 0x20) == avx512_cores[i][k]) /* ASCII letters, any case */
            k++;
        uses_avx512 |= !core[k] && !avx512_cores[i][k];
    }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && !uses_avx512)
        return ", AVX-512 unused: this OpenBLAS does not know the CPU";
#endif
    return "";
}

void tf_cpu_backend_describe(const tf_backend *be, char *out, size_t n) {
    if (!n)
        return;
    /* openblas_get_config() reads "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...":
     * keep its first two words (name and version). */
    char ver[64] = "OpenBLAS";
    const char *cfg = openblas_get_config();
    if (cfg) {
        int words = 0;
        size_t i = 0;
        for (; cfg[i] && i + 1 < sizeof ver; i++) {
            if (cfg[i] == ' ' && ++words == 2)
                break;
            ver[i] = cfg[i];
        }
        ver[i] = '\0';
    }
    const char *par = "sequential";
    switch (openblas_get_parallel()) {
    case OPENBLAS_THREAD: par = "pthreads"; break;
    case OPENBLAS_OPENMP: par = "openmp"; break;
    default: break;
    }
    const char *core = openblas_get_corename();
    const int threads = be ? be->threads : omp_get_max_threads();
    /* where the half types' GEMMs run: the one thing that decides whether
     * bf16 saves time on this CPU, not only memory */
    const char *dnnl = tf_cpu_dnnl_version();
    const int on_dnnl = be ? be->bf16_dnnl : tf_cpu_dnnl_hw();
    const char *half = on_dnnl ? dnnl
                       : dnnl  ? "widened to fp32 (this CPU has no AVX512-BF16)"
                               : "widened to fp32 (this build has no oneDNN)";
    snprintf(out, n, "%s (%s, %s kernels%s), %d thread%s, cores: %d, bf16 GEMMs: %s", ver, par,
             core ? core : "unknown", tf_cpu_blas_kernels_note(), threads, threads == 1 ? "" : "s",
             omp_get_num_procs(), half);
}
