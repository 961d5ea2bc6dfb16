/* OpenBLAS's buffers against an address-space limit (ulimit -v).
 *
 * OpenBLAS (0.3.21) gives each of its threads a buffer of 129 MiB of
 * address space, and each call made while others run (the run's own
 * parallel loops call it from every thread) one more from a pool; when the
 * allocation of one fails its blas_memory_alloc retries for ever: the run
 * spins at 100% until a signal's deadline ends it (signals.c). The buffers
 * of the threads it started with are there before main
 * (src/ompwait/tf_blas_room.c checks those); more threads get theirs when the
 * run sets its thread count, and the pool's come with the first calls, after
 * the run's own allocations. So a run makes sure, before it starts, that the
 * limit holds all of those, and takes the pool's buffers at once (allocated
 * and given back to the pool, which keeps them): the run's allocations can
 * then fail, in one line, but OpenBLAS's no longer can. When the limit cannot
 * hold them, one line and exit 2 instead of a spin. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, RTLD_DEFAULT */
#include "cli.h"

#include <cblas.h>
#include <dlfcn.h>

#include "ompwait/tf_blas_room.h"

/* OpenBLAS's pool (exported by libopenblas, not declared by cblas.h) */
typedef void *(*blas_alloc_fn)(int procpos);
typedef void (*blas_free_fn)(void *area);

/* n buffers of the pool taken and given back: they stay allocated for the
 * calls that need them. Nothing where the BLAS has no such pool. */
static void take_pool_buffers(int n)
{
    union {
        void *p;
        blas_alloc_fn f;
    } alloc = {dlsym(RTLD_DEFAULT, "blas_memory_alloc")};
    union {
        void *p;
        blas_free_fn f;
    } release = {dlsym(RTLD_DEFAULT, "blas_memory_free")};
    if (!alloc.p || !release.p) return;
    void *held[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++)
        held[i] = alloc.f(0);
    for (int i = 0; i < n; i++)
        release.f(held[i]);
}

int tf_cli_check_blas_memory(int threads)
{
    int have = openblas_get_num_threads(); /* buffers made at start-up */
    unsigned long long more = threads > have ? (unsigned long long)(threads - have) : 0;
    unsigned long long need = (more + (unsigned long long)threads) * TF_BLAS_BUFFER_BYTES;
    unsigned long long limit = 0;
    if (tf_blas_room_fits(need, &limit)) {
        take_pool_buffers(threads);
        return TF_EXIT_OK;
    }
    tf_cli_error("--threads: OpenBLAS with %d thread%s needs %llu MiB more address space for its "
                 "buffers (129 MiB each: one a thread beyond the %d made at start-up, and one a "
                 "thread for the calls its threads make at once), more than the limit of %llu "
                 "MiB (ulimit -v) leaves: lower --threads or raise ulimit -v",
                 threads, threads == 1 ? "" : "s", need >> 20, have, limit >> 20);
    return TF_EXIT_USAGE;
}
