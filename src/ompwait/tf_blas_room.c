/* OpenBLAS's start-up buffers against an address-space limit (ulimit -v).
 *
 * OpenBLAS's constructor gives each of its threads (OMP_NUM_THREADS, else
 * the processors) a buffer of 129 MiB of address space, and when that
 * allocation fails it retries for ever: the process spins before main. This
 * constructor runs before OpenBLAS's (the same shared object as
 * tf_omp_wait.c, linked after it: see there) and reserves that much, never
 * touched; when the limit cannot hold it, one line and exit 2 instead. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, MAP_NORESERVE */
#include "tf_blas_room.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void tf_blas_room_init(void)
{
    long n = 0;
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env)
        n = strtol(env, NULL, 10);
    if (n <= 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    if (n > 1024)
        n = 1024;
    unsigned long long limit = 0;
    if (tf_blas_room_fits((unsigned long long)n * TF_BLAS_BUFFER_BYTES, &limit))
        return;
    char msg[320];
    int len = snprintf(msg, sizeof msg,
                       "tinyfold: the address-space limit of %llu MiB (ulimit -v) cannot hold "
                       "OpenBLAS's start-up buffers (%ld thread%s x 129 MiB): raise ulimit -v "
                       "or set OMP_NUM_THREADS lower\n",
                       limit >> 20, n, n == 1 ? "" : "s");
    if (len > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg);
        (void)w;
    }
    _exit(2);
}
