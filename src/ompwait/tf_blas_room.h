/* OpenBLAS's per-thread buffers against an address-space limit (ulimit -v):
 * the buffer's size and the probe that start-up (tf_blas_room.c) and the
 * run's thread count (src/cli/blas_memory.c) both make. The includer defines
 * _DEFAULT_SOURCE or _GNU_SOURCE first (MAP_NORESERVE). */
#ifndef TF_BLAS_ROOM_H
#define TF_BLAS_ROOM_H

#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* OpenBLAS's BUFFER_SIZE on x86-64 (0.3.21) with its page and offset
 * margins: the size of the mmap seen failing in blas_memory_alloc */
#define TF_BLAS_BUFFER_BYTES 135266304ull

/* 1 when the address-space limit leaves room for `bytes` more (reserved
 * PROT_NONE, never touched, released at once) or there is no limit; else 0,
 * with the limit in *limit */
static inline int tf_blas_room_fits(unsigned long long bytes, unsigned long long *limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1;
    void *p = mmap(NULL, (size_t)bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, (size_t)bytes);
        return 1;
    }
    *limit = (unsigned long long)rl.rlim_cur;
    return 0;
}

#endif
