/* What the CUDA op tests (test_cuda_ops_*.c, one file per op family)
 * share: the backends they compare, buffers on a backend, the checks and the
 * tolerances, and the main that runs a family's tests. Conventions, in
 * cuda_testutil.c's header comment. */
#ifndef TF_CUDA_TESTUTIL_H
#define TF_CUDA_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/gpu_plan.h"
#include "testutil.h"

#define U TF_TEST_U

typedef struct {
    tf_backend *be;
    const tf_ops *ops;
} bk;

/* the backends (cuda_testutil.c: what each runs) */
extern bk g_cpu, g_cu1, g_cu3, g_cu3k2, g_cu3k3, g_cu3k4, g_cu3k5, g_cu3lt, g_tf32, g_tf32mma,
    g_tf32k5, g_cu3wg, g_cu3wgs;
extern int g_fail;
extern tf_gpu_plan g_plan; /* the default backends' plan (--gpu-plan SPEC) */

double tol_sum(double K);
double tol_x3(double K);
void *b_alloc(bk b, size_t n);
float *b_put(bk b, const float *h, size_t n);
float *b_nan(bk b, size_t n);
void b_get(bk b, float *h, const float *d, size_t n);
void b_free(bk b, void *p);
float *rnd(size_t n, float sd, uint64_t seed);
void check(const char *op, const char *shape, const float *got, const float *ref, size_t n,
           double tol);
void check_scaled(const char *op, const char *shape, const float *got, const float *ref,
                  size_t n, double tol, double scale);
void check_same(const char *op, const char *shape, const float *a, const float *b, size_t n);
void done(void);
tf_gpu_plan plan_of(tf_gpu_gemm_policy gemm, tf_gpu_dw_policy dw, tf_gpu_attn_policy attn);
int bk_create_rc(bk *b, int level, int tf32, const tf_gpu_plan *plan, const char *sms, char *err,
                 size_t errlen);
bk bk_create(int level, int tf32, const tf_gpu_plan *plan, const char *sms);
/* main of a family's test binary: `[--gpu-plan SPEC]`, exit 77 without a device */
int tf_cuda_test_main(int argc, char **argv, const char *prog, const struct CMUnitTest *tests,
                      size_t n);

#endif
