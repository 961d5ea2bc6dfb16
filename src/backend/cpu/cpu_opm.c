/* Outer product mean ops on the CPU (op_list.h opm_bwd, opm_outer): the
 * gradient of a through the outer product, read straight from the gradient
 * of its permuted form, and the permuted product itself. The CPU's own v3
 * composes the outer product mean weight-first and never calls these; they
 * are the references the CUDA kernels are tested against, so they are
 * written plainly: per (b, i) in parallel, sums in index order. A bf16/fp16
 * call widens its inputs into fp32 scratch, runs the fp32 op there and
 * rounds the result once into its output. */
#include "cpu_internal.h"

static void opm_bwd_f32(tf_backend *be, float *da, const float *dop, const float *a, int B, int S,
                        int N, int co) {
    const long NC = (long)N * co, cc = (long)co * co;
    const float inv = 1.0f / (float)S;
#pragma omp parallel for schedule(static) collapse(2) num_threads(be->threads)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            const float *d = dop + (long)b * N * N * cc;
            for (int s = 0; s < S; s++) {
                const float *as = a + ((long)b * S + s) * NC;
                float *out = da + (((long)b * S + s) * N + i) * co;
                for (int p = 0; p < co; p++) {
                    float acc = 0.f;
                    for (int j = 0; j < N; j++) {
                        const float *t1 = d + ((long)i * N + j) * cc + (long)p * co; /* [q] */
                        const float *t2 = d + ((long)j * N + i) * cc + p;           /* [q*co] */
                        const float *aj = as + (long)j * co;
                        for (int q = 0; q < co; q++) acc += aj[q] * (t1[q] + t2[(long)q * co]);
                    }
                    out[p] = acc * inv;
                }
            }
        }
}

static void opm_outer_f32(tf_backend *be, float *outer_p, const float *a, int B, int S, int N,
                          int co) {
    const long NC = (long)N * co, cc = (long)co * co;
    const float inv = 1.0f / (float)S;
#pragma omp parallel for schedule(static) collapse(2) num_threads(be->threads)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            const float *ab = a + (long)b * S * NC;
            for (int j = 0; j < N; j++) {
                float *out = outer_p + (((long)b * N + i) * N + j) * cc;
                for (int p = 0; p < co; p++)
                    for (int q = 0; q < co; q++) {
                        float acc = 0.f;
                        for (int s = 0; s < S; s++)
                            acc += ab[s * NC + (long)i * co + p] * ab[s * NC + (long)j * co + q];
                        out[(long)p * co + q] = acc * inv;
                    }
            }
        }
}

void tf_cpu_opm_bwd(tf_backend *be, void *da, const void *dop, const void *a, int B, int S,
                    int N, int co, tf_dtype t) {
    if (t == TF_F32) {
        opm_bwd_f32(be, da, dop, a, B, S, N, co);
        return;
    }
    tf_cpu_dtype_check(t, "opm_bwd");
    const long na = (long)B * S * N * co, nd = (long)B * N * N * co * co;
    const size_t pa = tf_cpu_pad_floats((size_t)na), pd = tf_cpu_pad_floats((size_t)nd);
    float *af = tf_cpu_scratch_push(be, (2 * pa + pd) * sizeof(float));
    float *daf = af + pa, *dopf = daf + pa;
    tf_cpu_widen(be, af, a, t, na);
    tf_cpu_widen(be, dopf, dop, t, nd);
    opm_bwd_f32(be, daf, dopf, af, B, S, N, co);
    tf_cpu_narrow(be, da, t, daf, na);
    tf_cpu_scratch_pop(be);
}

void tf_cpu_opm_outer(tf_backend *be, void *outer_p, const void *a, int B, int S, int N, int co,
                      tf_dtype t) {
    if (t == TF_F32) {
        opm_outer_f32(be, outer_p, a, B, S, N, co);
        return;
    }
    tf_cpu_dtype_check(t, "opm_outer");
    const long na = (long)B * S * N * co, no = (long)B * N * N * co * co;
    const size_t pa = tf_cpu_pad_floats((size_t)na);
    float *af = tf_cpu_scratch_push(be, (pa + tf_cpu_pad_floats((size_t)no)) * sizeof(float));
    float *of = af + pa;
    tf_cpu_widen(be, af, a, t, na);
    opm_outer_f32(be, of, af, B, S, N, co);
    tf_cpu_narrow(be, outer_p, t, of, no);
    tf_cpu_scratch_pop(be);
}

/* The forward as one op (op_list.h opm_fwd): the composition the model runs
 * without it, opm_outer into scratch and the residual GEMM */
void tf_cpu_opm_fwd(tf_backend *be, float *z_out, const float *z_in, const void *a, const void *W,
                    int B, int S, int N, int co, int cz, tf_dtype t) {
    tf_cpu_dtype_check(t, "opm_fwd");
    const long pairs = (long)B * N * N;
    void *op = tf_cpu_scratch_push(be, (size_t)pairs * co * co * tf_dtype_size(t));
    tf_cpu_opm_outer(be, op, a, B, S, N, co, t);
    tf_cpu_gemm_packed(be, 0, 1, (int)pairs, cz, co * co, op, W, z_out, 1.0f, z_in, t, TF_F32,
                       "opm_fwd");
    tf_cpu_scratch_pop(be);
}

/* The backward from dz as one op (op_list.h opm_bwd_dz): the composition the
 * model runs without it (opm_outer, the two GEMMs of the projection's
 * backward, opm_bwd) */
void tf_cpu_opm_bwd_dz(tf_backend *be, void *da, float *dW, const void *dz, const void *a,
                       const void *W, int B, int S, int N, int co, int cz, tf_dtype t) {
    tf_cpu_dtype_check(t, "opm_bwd_dz");
    const long pairs = (long)B * N * N, K = (long)co * co;
    const size_t es = tf_dtype_size(t);
    char *op = tf_cpu_scratch_push(be, 2 * (size_t)pairs * K * es), *dop = op + (size_t)pairs * K * es;
    tf_cpu_opm_outer(be, op, a, B, S, N, co, t);
    /* dop = dz W; dW += dz^T outer_p */
    tf_cpu_gemm_packed(be, 0, 0, (int)pairs, (int)K, cz, dz, W, dop, 0.0f, NULL, t, t,
                       "opm_bwd_dz_dop");
    tf_cpu_gemm_packed(be, 1, 0, cz, (int)K, (int)pairs, dz, op, dW, 1.0f, NULL, t, TF_F32,
                       "opm_bwd_dz_dw");
    tf_cpu_opm_bwd(be, da, dop, a, B, S, N, co, t);
    tf_cpu_scratch_pop(be);
}
