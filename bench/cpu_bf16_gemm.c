/* The CPU GEMM for bf16 activations, measured three ways at the model's
 * shapes (a development harness, not part of tinyfold):
 *   fp32   cblas_sgemm on fp32 operands (what fp32 training runs today)
 *   sw     bf16 operands widened to fp32 in software, then cblas_sgemm
 *          (the route any x86-64 can take; the widening is timed with it)
 *   dnnl   oneDNN's bf16 matmul (AVX512-BF16 where the CPU has it), fp32
 *          accumulation and an fp32 result
 * Each case: 3 warm-up calls, then the median of REPS calls. Prints GFLOP/s
 * and each one's speed over fp32's (x), and checks dnnl and sw against an fp64 product of
 * the same bf16 inputs (relative L2).
 *   cc -O2 bench/cpu_bf16_gemm.c -o cpu_bf16_gemm -lopenblas -ldnnl -lm
 *   OMP_NUM_THREADS=2 ./cpu_bf16_gemm [reps]                (bench/cpu_bf16_gemm.sh) */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                      \
    do {                                                                              \
        dnnl_status_t st_ = (x);                                                      \
        if (st_ != dnnl_success) {                                                    \
            fprintf(stderr, "cpu_bf16_gemm: %s failed (%d)\n", #x, (int)st_);        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* round to nearest even, as the hardware's conversion does (no NaNs here) */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char *name;
    int M, N, K, transA; /* C[M,N] = op(A) B, A [M,K] (or [K,M] when transA), B [K,N] */
} shape;

typedef struct {
    const shape *s;
    float *A, *B, *C, *Aw; /* Aw: the widened copy of Ab (sw) */
    uint16_t *Ab, *Bb;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_t mm;
    dnnl_memory_t ma, mb, mc;
} gemm_case;

static void run_fp32(gemm_case *g) {
    const shape *s = g->s;
    cblas_sgemm(CblasRowMajor, s->transA ? CblasTrans : CblasNoTrans, CblasNoTrans, s->M, s->N,
                s->K, 1.f, g->A, s->transA ? s->M : s->K, g->B, s->N, 0.f, g->C, s->N);
}

static void run_sw(gemm_case *g) {
    const shape *s = g->s;
    long na = (long)s->M * s->K, nb = (long)s->K * s->N;
#pragma omp parallel for
    for (long i = 0; i < na; i++) g->Aw[i] = from_bf16(g->Ab[i]);
#pragma omp parallel for
    for (long i = 0; i < nb; i++) g->B[i] = from_bf16(g->Bb[i]);
    cblas_sgemm(CblasRowMajor, s->transA ? CblasTrans : CblasNoTrans, CblasNoTrans, s->M, s->N,
                s->K, 1.f, g->Aw, s->transA ? s->M : s->K, g->B, s->N, 0.f, g->C, s->N);
}

static void run_dnnl(gemm_case *g) {
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, g->ma}, {DNNL_ARG_WEIGHTS, g->mb}, {DNNL_ARG_DST, g->mc}};
    CHECK(dnnl_primitive_execute(g->mm, g->strm, 3, args));
    CHECK(dnnl_stream_wait(g->strm));
}

static void dnnl_setup(gemm_case *g) {
    const shape *s = g->s;
    dnnl_memory_desc_t da, db, dc;
    dnnl_dims_t a_dims = {s->M, s->K}, b_dims = {s->K, s->N}, c_dims = {s->M, s->N};
    /* transA: A is stored [K, M], i.e. the [M, K] operand in column-major order */
    CHECK(dnnl_memory_desc_init_by_tag(&da, 2, a_dims, dnnl_bf16, s->transA ? dnnl_ba : dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&db, 2, b_dims, dnnl_bf16, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&dc, 2, c_dims, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    CHECK(dnnl_matmul_desc_init(&md, &da, &db, NULL, &dc));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &md, NULL, g->eng, NULL));
    CHECK(dnnl_primitive_create(&g->mm, pd));
    CHECK(dnnl_primitive_desc_destroy(pd));
    CHECK(dnnl_memory_create(&g->ma, &da, g->eng, g->Ab));
    CHECK(dnnl_memory_create(&g->mb, &db, g->eng, g->Bb));
    CHECK(dnnl_memory_create(&g->mc, &dc, g->eng, g->C));
}

static double median_ms(void (*fn)(gemm_case *), gemm_case *g, int reps) {
    double *t = malloc(sizeof(double) * reps);
    for (int i = 0; i < 3; i++) fn(g);
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms();
        fn(g);
        t[i] = now_ms() - t0;
    }
    qsort(t, reps, sizeof *t, cmp_d);
    double m = t[reps / 2];
    free(t);
    return m;
}

/* ||C - ref|| / ||ref||, ref the fp64 product of the bf16 inputs */
static double rel_err(const gemm_case *g) {
    const shape *s = g->s;
    double num = 0, den = 0;
    for (int i = 0; i < s->M; i += 7)
        for (int j = 0; j < s->N; j++) {
            double r = 0;
            for (int k = 0; k < s->K; k++) {
                long ai = s->transA ? (long)k * s->M + i : (long)i * s->K + k;
                r += (double)from_bf16(g->Ab[ai]) * from_bf16(g->Bb[(long)k * s->N + j]);
            }
            double d = g->C[(long)i * s->N + j] - r;
            num += d * d, den += r * r;
        }
    return sqrt(num / den);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 21;
    if (reps < 1) reps = 21;
    /* the small problem (B4 N64 S16, pair 128, MSA 64): pair rows 16384, MSA rows 4096 */
    static const shape shapes[] = {
        {"pair proj 16384x128x128", 16384, 128, 128, 0},
        {"pair trans up 16384x512x128", 16384, 512, 128, 0},
        {"pair trans down 16384x128x512", 16384, 128, 512, 0},
        {"msa qkv 4096x192x64", 4096, 192, 64, 0},
        {"pair wgrad 128x128x16384 (A^T)", 128, 128, 16384, 1},
    };
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    printf("%-32s %9s %9s %9s %8s %8s %9s %9s\n", "shape", "fp32", "sw", "dnnl", "sw x",
           "dnnl x", "err sw", "err dnnl");
    printf("%-32s %9s %9s %9s\n", "", "GFLOP/s", "GFLOP/s", "GFLOP/s");
    srand(7);
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        const shape *s = &shapes[q];
        gemm_case g = {.s = s, .eng = eng, .strm = strm};
        long na = (long)s->M * s->K, nb = (long)s->K * s->N, nc = (long)s->M * s->N;
        g.A = malloc(sizeof(float) * na), g.Aw = malloc(sizeof(float) * na);
        g.B = malloc(sizeof(float) * nb), g.C = malloc(sizeof(float) * nc);
        g.Ab = malloc(2 * na), g.Bb = malloc(2 * nb);
        for (long i = 0; i < na; i++) g.Ab[i] = to_bf16((float)rand() / RAND_MAX - 0.5f);
        for (long i = 0; i < nb; i++) g.Bb[i] = to_bf16((float)rand() / RAND_MAX - 0.5f);
        for (long i = 0; i < na; i++) g.A[i] = from_bf16(g.Ab[i]);
        for (long i = 0; i < nb; i++) g.B[i] = from_bf16(g.Bb[i]);
        dnnl_setup(&g);
        double flop = 2.0 * s->M * s->N * s->K;
        double t32 = median_ms(run_fp32, &g, reps);
        double tsw = median_ms(run_sw, &g, reps);
        double esw = rel_err(&g);
        double tdn = median_ms(run_dnnl, &g, reps);
        double edn = rel_err(&g);
        printf("%-32s %9.1f %9.1f %9.1f %8.2f %8.2f %9.1e %9.1e\n", s->name, flop / t32 / 1e6,
               flop / tsw / 1e6, flop / tdn / 1e6, t32 / tsw, t32 / tdn, esw, edn);
        dnnl_primitive_destroy(g.mm);
        dnnl_memory_destroy(g.ma), dnnl_memory_destroy(g.mb), dnnl_memory_destroy(g.mc);
        free(g.A), free(g.Aw), free(g.B), free(g.C), free(g.Ab), free(g.Bb);
    }
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
