/* OpenBLAS's buffers against an address-space limit (ulimit -v).
 *
 * OpenBLAS (0.3.21) gives each of its threads a buffer of 129 MiB of
 * address space and when that allocation fails its blas_memory_alloc
 * retries for ever: the run spins at 100% and never reaches the check of a
 * signal's flag. The buffers of the threads it started with are there
 * before main (src/ompwait/tf_blas_room.c checks those); more threads get
 * theirs when the run sets its thread count. So a run reserves (PROT_NONE,
 * never touched) what those will take, and one more buffer's worth, before
 * it starts; when the limit cannot hold it, one line and exit 2 instead of a
 * spin. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "cli.h"

#include <cblas.h>

#include "ompwait/tf_blas_room.h"

int tf_cli_check_blas_memory(int threads)
{
    int have = openblas_get_num_threads(); /* buffers made at start-up */
    unsigned long long more = threads > have ? (unsigned long long)(threads - have) : 0;
    unsigned long long need = (more + 1) * TF_BLAS_BUFFER_BYTES, limit = 0;
    if (tf_blas_room_fits(need, &limit)) return TF_EXIT_OK;
    tf_cli_error("--threads: OpenBLAS with %d thread%s needs %llu MiB more address space for its "
                 "buffers (129 MiB a thread, %d made at start-up, and one spare), more than the "
                 "limit of %llu MiB (ulimit -v) leaves: lower --threads or raise ulimit -v",
                 threads, threads == 1 ? "" : "s", need >> 20, have,
                 limit >> 20);
    return TF_EXIT_USAGE;
}
