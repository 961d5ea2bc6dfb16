/* OpenMP's wait policy (--omp-wait), applied before the OpenMP runtime
 * starts: see tf_omp_wait.c for why it runs there. */
#ifndef TF_OMP_WAIT_H
#define TF_OMP_WAIT_H

#include <stddef.h>

typedef enum { TF_OMP_WAIT_AUTO, TF_OMP_WAIT_ACTIVE, TF_OMP_WAIT_PASSIVE } tf_omp_wait;

/* The spin count auto gives libgomp when the environment sets neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT and the processors are free at start
 * (0 when they are busy). */
#define TF_OMP_WAIT_AUTO_SPIN 1000

/* What the command line asked for (the last --omp-wait, else auto), and
 * whether it was applied before the OpenMP runtime read its environment
 * (0 where the loader passed no command line to the constructor). */
tf_omp_wait tf_omp_wait_requested(int *applied);

/* One phrase for the run's header: "auto: spin 1000 times, then sleep (...)",
 * "passive (--omp-wait)", "OMP_WAIT_POLICY=passive (from the environment)". */
void tf_omp_wait_describe(char *out, size_t n);

#endif
