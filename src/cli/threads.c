/* The CPU thread count a run may use: --threads (or OpenMP's default) capped
 * at what the BLAS build supports (OpenBLAS's compile-time MAX_THREADS: past
 * it OpenBLAS warns and has crashed) and at the processors this process may
 * run on (more threads than processors only queue behind one another, and
 * every barrier then waits for the last of them to be scheduled). */
#include "cli.h"
#include "ompwait/tf_omp_wait.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tf_cli_blas_max_threads(void)
{
    const char *cfg = openblas_get_config();
    const char *p = cfg ? strstr(cfg, "MAX_THREADS=") : NULL;
    if (!p)
        return 0;
    long v = strtol(p + strlen("MAX_THREADS="), NULL, 10);
    return v > 0 && v < 1 << 20 ? (int)v : 0;
}

int tf_cli_cap_threads(int *threads, char *note, size_t n)
{
    int want = *threads, blas = tf_cli_blas_max_threads(), procs = omp_get_num_procs();
    int cap = want;
    const char *why = NULL;
    if (blas > 0 && cap > blas) {
        cap = blas;
        why = "the OpenBLAS build's MAX_THREADS";
    }
    if (procs > 0 && cap > procs) {
        cap = procs;
        why = "the processors available";
    }
    if (cap == want)
        return 0;
    *threads = cap;
    if (n)
        snprintf(note, n, "%d threads capped at %d, %s", want, cap, why);
    return 1;
}

const char *tf_cli_omp_wait_info(void)
{
    static char info[192];
    if (!info[0])
        tf_omp_wait_describe(info, sizeof info);
    return info;
}

const char *tf_cli_omp_wait_setting(void)
{
    int applied;
    static const char *const names[] = {"auto", "active", "passive"};
    tf_omp_wait w = tf_omp_wait_requested(&applied);
    return w >= TF_OMP_WAIT_AUTO && w <= TF_OMP_WAIT_PASSIVE ? names[w] : "auto";
}
