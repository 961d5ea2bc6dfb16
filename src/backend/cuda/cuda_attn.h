/* Shared by the flash-style attention kernels (cuda_attn_fwd.cu, cuda_attn_bwd.cu).
 *
 * Every kernel is compiled for a padded head size DM in {4, 8, 16, 32, 64}
 * (the smallest >= d): shared tiles and registers hold DM channels, channels
 * d..DM-1 are zero, so the unrolled dot products need no bounds checks and
 * the zeros add nothing (x + 0*0 == x exactly). Kernel names carry DM
 * (attn_fwd_kernel1_d16, ...) so that traces say which variant ran.
 *
 * Scores are always S = scale * (q . k) + bias with the dot product summed over
 * c = 0..DM-1 in order, identically in every kernel, so the backward's
 * recomputed P = exp(S - lse) matches the forward's. */
#ifndef TF_CUDA_ATTN_H
#define TF_CUDA_ATTN_H

#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.h"

/* padded head size for d, or 0 when d is unsupported */
static inline int tf_attn_dm(int d)
{
    if (d < 1) return 0;
    if (d <= 4) return 4;
    if (d <= 8) return 8;
    if (d <= 16) return 16;
    if (d <= 32) return 32;
    if (d <= 64) return 64;
    return 0;
}

static inline int tf_attn_check(const tf_attn_args *a)
{
    if (a->nb <= 0 || a->no <= 0 || a->nh <= 0 || a->L <= 0) return 0; /* nothing to do */
    if (!tf_attn_dm(a->d)) {
        fprintf(stderr, "tinyfold: internal error: CUDA attention supports head sizes 1..64, "
                        "got d=%d (%s:%d)\n", a->d, __FILE__, __LINE__);
        abort();
    }
    return 1;
}

/* Base pointer of head h of item (b, o) in a view; element (l, c) is base[l*sl + c]. */
__device__ __forceinline__ float *tf_attn_base(const tf_attn_view v, int b, int o, int h, int d)
{
    return (float *)v.p + (long)b * v.sb + (long)o * v.so + (long)h * d;
}

/* The block's (b, o, h) and tile, from blockIdx.x = ((b*no + o)*nh + h)*ntile +
 * tile (ntile 1: one block per (b, o, h), tile 0). */
__device__ __forceinline__ void tf_attn_decode(const tf_attn_args &a, int ntile, int *b, int *o,
                                               int *h, int *tile)
{
    long idx = blockIdx.x;
    *tile = (int)(idx % ntile);
    idx /= ntile;
    *h = (int)(idx % a.nh);
    idx /= a.nh;
    *o = (int)(idx % a.no);
    *b = (int)(idx / a.no);
}
__device__ __forceinline__ void tf_attn_decode(const tf_attn_args &a, int *b, int *o, int *h)
{
    int tile;
    tf_attn_decode(a, 1, b, o, h, &tile);
}

/* Stamps out one extern "C" kernel per padded head size from a body template. */
#define TF_ATTN_KERNELS(name, body, threads)                                             \
    extern "C" __global__ void __launch_bounds__(threads) name##_d4(tf_attn_args a)       \
    {                                                                                    \
        body<4>(a);                                                                      \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(threads) name##_d8(tf_attn_args a)       \
    {                                                                                    \
        body<8>(a);                                                                      \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(threads) name##_d16(tf_attn_args a)      \
    {                                                                                    \
        body<16>(a);                                                                     \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(threads) name##_d32(tf_attn_args a)      \
    {                                                                                    \
        body<32>(a);                                                                     \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(threads) name##_d64(tf_attn_args a)      \
    {                                                                                    \
        body<64>(a);                                                                     \
    }

/* Launches the variant of `name` for padded head size dm. */
#define TF_ATTN_LAUNCH(name, dm, grid, block, stream, args)                              \
    do {                                                                                 \
        switch (dm) {                                                                    \
        case 4: TF_LAUNCH(name##_d4, grid, block, stream, args); break;                  \
        case 8: TF_LAUNCH(name##_d8, grid, block, stream, args); break;                  \
        case 16: TF_LAUNCH(name##_d16, grid, block, stream, args); break;                \
        case 32: TF_LAUNCH(name##_d32, grid, block, stream, args); break;                \
        default: TF_LAUNCH(name##_d64, grid, block, stream, args); break;                \
        }                                                                                \
    } while (0)

#endif
