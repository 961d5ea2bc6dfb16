/* The machine's own cblas_sgemm rate, which `bench` reads each step's
 * GFLOP/s against ("% sgemm"). */
#ifndef TF_PROF_SGEMM_REF_H
#define TF_PROF_SGEMM_REF_H

#include <stddef.h>

typedef struct {
    double big;    /* GFLOP/s at 1024x1024x1024 */
    double skinny; /* GFLOP/s at 16384x128x128, the model's pair-linear shape */
} tf_sgemm_ref;

/* Calls each shape (after one untimed call) until min_ms have passed and at
 * least 5 times, on the threads BLAS is set to, keeping each shape's
 * fastest call. */
void tf_sgemm_ref_measure(tf_sgemm_ref *r, double min_ms);

/* The rate of the fastest of n calls taking ms[i] each, of `flops` each, in
 * GFLOP/s: another process sharing the cores only ever slows a call, so the
 * fastest is the machine's rate (0 when no call took time). */
double tf_sgemm_best_rate(const double *ms, int n, double flops);

/* The reference a row is read against: the best rate of either shape in the
 * measurements just before and just after the row ran. */
double tf_sgemm_ref_for_row(const tf_sgemm_ref *before, const tf_sgemm_ref *after);

/* A row's "% sgemm" cell: "52%", or "147%!" where the model ran faster than
 * the reference (which then measured low: other work held the processors
 * through both of its measurements, not the model's steps); "" without a
 * reference. Returns 1 when flagged, else 0. */
int tf_sgemm_pct_cell(char *out, size_t n, double gflops, double ref);

#endif
