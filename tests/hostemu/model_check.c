/* hostemu: the whole model on the emulated CUDA backend against the CPU
 * backend: loss and every parameter gradient of one step, at a level and a
 * shape that reach the kernels' real strides (run_model.sh builds it).
 *   model_check [N S outer_dim level [plan [bf16|fp16 [chunk]]]]   (defaults 20 5 8 3;
 *   B 1, one block, msa_dim 64 / pair_dim 128 with 4 heads: head sizes 16 and
 *   32 as in the model; chunk: the CUDA run's --chunk-size, the CPU's unchunked)
 * Tolerance: as test_cuda_model (same fp32 function, different summation
 * orders): 1e-4 per tensor; measured ~1e-6. A half type (both backends in
 * it, the CUDA one with its fused transition): test_mixed's bounds for the
 * device, loss 1e-2 and all gradients together 3e-2 (bf16; fp16 8x
 * tighter), the worst single tensor printed. Exit status 1 on failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model_testutil.h"
#include "tinyfold.h"

static float run(const tf_config *c, const float *w, const tf_batch *b, float *grad)
{
    char err[512];
    tf_trainer *t;
    float loss = 0.f;
    if (tf_trainer_create(&t, c, err, sizeof err) != TF_OK) {
        fprintf(stderr, "model_check: %s\n", err);
        exit(2);
    }
    tf_trainer_set_params(t, w);
    if (tf_trainer_grad(t, b, &loss, NULL) != TF_OK) {
        fprintf(stderr, "model_check: tf_trainer_grad failed\n");
        exit(2);
    }
    tf_trainer_get_grads(t, grad);
    tf_trainer_destroy(t);
    return loss;
}

int main(int argc, char **argv)
{
    const int B = 1, N = argc > 1 ? atoi(argv[1]) : 20, S = argc > 2 ? atoi(argv[2]) : 5;
    const int level = argc > 4 ? atoi(argv[4]) : 3;
    tf_config c;
    tf_config_default(&c);
    c.batch = B, c.seq_len = N, c.n_seqs = S, c.n_blocks = 1, c.msa_dim = 64, c.pair_dim = 128;
    c.outer_dim = argc > 3 ? atoi(argv[3]) : 8;
    c.backend = TF_BACKEND_CPU;
    c.impl = (tf_impl)level;
    c.fusion = tf_fusion_for_impl(c.impl);
    const char *prec = argc > 6 ? argv[6] : "fp32";
    c.precision = !strcmp(prec, "bf16") ? TF_PREC_BF16 : !strcmp(prec, "fp16") ? TF_PREC_FP16
                                                                              : TF_PREC_FP32;
    float *w = tf_test_weights(&c, 21);
    const long nz = (long)B * N * N;
    tf_batch b = {B, S, N, malloc(sizeof(int32_t) * B * S * N), malloc(sizeof(float) * nz * 65),
                  malloc(sizeof(float) * nz)};
    tf_data_batch(c.seed, 0, &b);
    const size_t np = tf_param_count_floats(&c), nt = tf_param_count_tensors(&c);
    float *g0 = malloc(np * sizeof(float)), *g1 = malloc(np * sizeof(float));
    const float l0 = run(&c, w, &b, g0);
    tf_config g = c;
    g.backend = TF_BACKEND_CUDA;
    if (argc > 5) snprintf(g.gpu_plan, sizeof g.gpu_plan, "%s", argv[5]); /* --gpu-plan */
    if (argc > 7) g.chunk_size = atoi(argv[7]);
    const float l1 = run(&g, w, &b, g1);
    tf_param_info *tab = calloc(nt, sizeof *tab);
    tf_param_table(&c, tab);
    double worst = 0, anum = 0, aden = 0;
    const char *wn = "";
    for (size_t i = 0; i < nt; i++) {
        if (!tab[i].trainable) continue;
        double num = 0, den = 0;
        for (size_t k = 0; k < tab[i].count; k++) {
            const double r = g0[tab[i].offset + k], d = (double)g1[tab[i].offset + k] - r;
            num += d * d, den += r * r;
        }
        anum += num, aden += den;
        const double e = den > 0 ? sqrt(num / den) : sqrt(num);
        if (e > worst) worst = e, wn = tab[i].name;
    }
    const double le = fabs((double)l1 - l0) / fabs((double)l0);
    const double all = aden > 0 ? sqrt(anum / aden) : sqrt(anum);
    const double hs = c.precision == TF_PREC_FP16 ? 0.125 : 1.0;
    const int ok = c.precision == TF_PREC_FP32 ? le <= 1e-4 && worst <= 1e-4
                                               : le <= 1e-2 * hs && all <= 3e-2 * hs;
    printf("%s model v%d %s B%d N%d S%d outer %d chunk %d: loss rel %.2e, all gradients %.2e, "
           "worst gradient tensor %.2e (%s)\n",
           ok ? "PASS" : "FAIL", level, prec, B, N, S, c.outer_dim, g.chunk_size, le, all, worst,
           wn);
    free(w), free(b.tokens), free(b.pair), free(b.target), free(g0), free(g1), free(tab);
    return ok ? 0 : 1;
}
