/* The half types' warpgroup tile on Hopper: wgmma.mma_async m64nNk16 with
 * bf16 or fp16 operands and fp32 accumulation, B from shared memory, A from
 * registers (the mma.sync m16n8k16 A fragment per warp, cuda_tile.h; N 64
 * or 128) or from shared memory (N 64 or 128, K-major or, TA, M-major);
 * the descriptors, fences and waits. A
 * warpgroup is 4 consecutive warps (128 threads); warp w of it holds rows
 * 16w.. of the 64-row result in cuda_tile.h's C layout, one tile per 8
 * columns: d[n][0..3] = (g, 8n + 2t), (g, 8n + 2t + 1), (g + 8, ..), so two
 * adjacent tiles pack into the A fragment of the next product
 * (tf_tile_c2a), as with mma.sync.
 *
 * Shared-memory operands are K-major "core matrix" tiles without swizzle:
 * a core matrix is 8 rows x 8 elements (16 contiguous bytes a row, 128 a
 * matrix); a tile of R rows keeps the 8-element column group q of row r at
 * halves ((q R) + r) 8 (tf_wg_off), so core matrices adjacent in k are 16 R
 * bytes apart (the descriptor's leading offset) and in rows 128 bytes apart
 * (its stride offset). A k16 step at k0 starts 2 k0 R bytes into the tile;
 * warpgroup rows m0.. start 16 m0 bytes in. B may also be N-major (TB: the
 * instruction's transpose of B, for the half types only): a core matrix is
 * then 8 k x 8 n, its 16-byte rows 8 adjacent n of one k (tf_wg_off_mn), so
 * a stored matrix whose rows run along n copies in 16 bytes at a time; the
 * offsets keep their roles (k groups 16 N bytes apart, n groups 128).
 *
 * wgmma exists only in arch-specific sm_90a code: TF_WG_CODE says whether
 * this compilation has it (sm_90a, or hostemu, which runs the primitives
 * synchronously: a group is complete when issued, so the waits and fences
 * have nothing to do), TF_WG_ASM whether it is the real instructions. Files
 * that use it are built for sm_90a where the build targets 90
 * (CMakeLists.txt TF_WG_SRC); caps.has_wgmma says whether the running code
 * has it (tf_cu_wg_probe). An MFMA version replaces this header's calls. */
#ifndef TF_CUDA_WGTILE_H
#define TF_CUDA_WGTILE_H

#include "cuda_tile.h"

#if defined(TF_CUDA_HOSTEMU)
#define TF_WG_CODE 1
#define TF_WG_ASM 0
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TF_WG_CODE 1
#define TF_WG_ASM 1
#else
#define TF_WG_CODE 0
#define TF_WG_ASM 0
#endif

/* halves offset of element (r, k) in a K-major tile of R rows */
__host__ __device__ __forceinline__ int tf_wg_off(int r, int k, int R)
{
    return (((k >> 3) * R + r) << 3) + (k & 7);
}

/* halves offset of element (n, k) in an N-major tile of N columns */
__host__ __device__ __forceinline__ int tf_wg_off_mn(int n, int k, int N)
{
    return (((k >> 3) * N + (n & ~7)) << 3) + ((k & 7) << 3) + (n & 7);
}

#if TF_WG_CODE
/* shared-memory matrix descriptor: start, leading (k) and stride (rows)
 * byte offsets, all >> 4; base offset 0, no swizzle. Under hostemu the
 * start is the offset into the emulator's one shared-memory buffer. */
__device__ __forceinline__ uint64_t tf_wg_desc(const void *s, uint32_t lbo, uint32_t sbo)
{
#if TF_WG_ASM
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(s);
#else
    const uint32_t a = (uint32_t)((const char *)s - (const char *)tf_emu_smem());
#endif
    return (uint64_t)((a & 0x3ffffu) >> 4) | ((uint64_t)((lbo & 0x3ffffu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3ffffu) >> 4) << 32);
}
#endif

#if TF_WG_ASM
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_wait0()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
__device__ __forceinline__ void wg_wait1()
{
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
/* generic-proxy shared stores (and cp.async) visible to wgmma's reads */
__device__ __forceinline__ void wg_proxy_fence()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* The accumulator operands of an m64nN wgmma: N / 8 tiles of 4 (d[8][4] or
 * d[16][4]), and their register lists in the instruction */
#define TF_WG_D8 \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), \
    "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
    "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
    "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
    "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), \
    "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
    "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
    "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define TF_WG_D16 \
    TF_WG_D8, \
    "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), \
    "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
    "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), \
    "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
    "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), \
    "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
    "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), \
    "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define TF_WG_R32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TF_WG_R64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
/* one wgmma with scale-d from the predicate P's operand (1: accumulate):
 * SHAPE ("m64n64k16"), the operand types AB ("bf16.bf16", "tf32.tf32"), R
 * the accumulator list, A and B the operands' text, TAIL the immediate
 * scales and transposes, DO the accumulator operands in parentheses, then
 * the inputs */
#define TF_WG_MMA(SHAPE, AB, R, A, B, P, TAIL, DO, ...)                                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                               \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." AB " " R ", " A ", " B ", p, " \
                 TAIL ";\n}\n"                                                                \
                 : TF_WG_UNPAREN DO                                                           \
                 : __VA_ARGS__)
#define TF_WG_UNPAREN(...) __VA_ARGS__

/* d (64 x N a warpgroup) += a b: a the warp's A fragment (registers) or a
 * K-major tile of 64 rows (descriptor; with TA an M-major tile, the
 * instruction's transpose of A, as TB's of B), b a K-major tile of N rows
 * (B^T), or with TB an N-major tile of N columns */
template <class E, int N, bool TB = false>
__device__ __forceinline__ void tf_wg_mma_rs(float (*d)[4], const uint32_t *a, uint64_t b)
{
    static_assert(N == 64 || N == 128, "wgmma tile: N 64 or 128");
#define TF_WG_RS(SHAPE, AB, R, A, B, P, T, DO) \
    TF_WG_MMA(SHAPE, AB, R, A, B, P, "1, 1, " T, DO, "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TB ? 1 : 0))
    if constexpr (N == 64) {
        if (tf_tile_is_bf16<E>::value)
            TF_WG_RS("m64n64k16", "bf16.bf16", TF_WG_R32, "{%32, %33, %34, %35}", "%36", "%37", "%38", (TF_WG_D8));
        else
            TF_WG_RS("m64n64k16", "f16.f16", TF_WG_R32, "{%32, %33, %34, %35}", "%36", "%37", "%38", (TF_WG_D8));
    } else {
        if (tf_tile_is_bf16<E>::value)
            TF_WG_RS("m64n128k16", "bf16.bf16", TF_WG_R64, "{%64, %65, %66, %67}", "%68", "%69", "%70", (TF_WG_D16));
        else
            TF_WG_RS("m64n128k16", "f16.f16", TF_WG_R64, "{%64, %65, %66, %67}", "%68", "%69", "%70", (TF_WG_D16));
    }
#undef TF_WG_RS
}
template <class E, int N, bool TB = false, bool TA = false>
__device__ __forceinline__ void tf_wg_mma_ss(float (*d)[4], uint64_t a, uint64_t b)
{
    static_assert(N == 64 || N == 128, "wgmma tile, A from shared memory: N 64 or 128");
#define TF_WG_SS(SHAPE, AB, R, A, B, P, T, DO) \
    TF_WG_MMA(SHAPE, AB, R, A, B, P, "1, 1, " T, DO, "l"(a), "l"(b), "r"(1), "n"(TA ? 1 : 0), "n"(TB ? 1 : 0))
    if constexpr (N == 64) {
        if (tf_tile_is_bf16<E>::value)
            TF_WG_SS("m64n64k16", "bf16.bf16", TF_WG_R32, "%32", "%33", "%34", "%35, %36", (TF_WG_D8));
        else
            TF_WG_SS("m64n64k16", "f16.f16", TF_WG_R32, "%32", "%33", "%34", "%35, %36", (TF_WG_D8));
    } else {
        if (tf_tile_is_bf16<E>::value)
            TF_WG_SS("m64n128k16", "bf16.bf16", TF_WG_R64, "%64", "%65", "%66", "%67, %68", (TF_WG_D16));
        else
            TF_WG_SS("m64n128k16", "f16.f16", TF_WG_R64, "%64", "%65", "%66", "%67, %68", (TF_WG_D16));
    }
#undef TF_WG_SS
}
#else
/* no asynchrony to fence or wait for: hostemu runs each wgmma when issued */
__device__ __forceinline__ void wg_fence() {}
__device__ __forceinline__ void wg_commit() {}
__device__ __forceinline__ void wg_wait0() {}
__device__ __forceinline__ void wg_wait1() {}
__device__ __forceinline__ void wg_proxy_fence() {}
#endif

#if TF_WG_CODE && !TF_WG_ASM
/* element (r, k) of the K-major tile a descriptor names (MN: the N-major
 * tile's element (n = r, k)) */
template <class E, bool MN = false>
static inline float tf_wg_emu_at(uint64_t desc, int r, int k)
{
    const char *base = (const char *)tf_emu_smem() + ((desc & 0x3fffu) << 4);
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3fffu) << 4;
    const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3fffu) << 4;
    const int in = MN ? (k & 7) * 16 + (r & 7) * 2 : (r & 7) * 16 + (k & 7) * 2;
    uint16_t u;
    memcpy(&u, base + (k >> 3) * lbo + (r >> 3) * sbo + in, 2);
    return tf_tile_widen<E>(u);
}
/* the warp's rows g and g + 8 (of its 16) times B, summed in k order; A's
 * element (row i, k) in av(i, k) */
template <class E, int N, bool TB, class AV>
static inline void tf_wg_emu_mma(float (*d)[4], uint64_t b, AV av)
{
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;
    for (int k = 0; k < 16; ++k) {
        const float a0 = av(g, k), a1 = av(g + 8, k);
        for (int n = 0; n < N / 8; ++n)
            for (int h = 0; h < 2; ++h) {
                const float bv = tf_wg_emu_at<E, TB>(b, 8 * n + 2 * t + h, k);
                d[n][h] += a0 * bv;
                d[n][2 + h] += a1 * bv;
            }
    }
}
template <class E, int N, bool TB = false>
static inline void tf_wg_mma_rs(float (*d)[4], const uint32_t *a, uint64_t b)
{
    static_assert(N == 64 || N == 128, "wgmma tile: N 64 or 128");
    uint32_t all[32 * 4];
    emu_warp_exchange(a, 4, all);
    tf_wg_emu_mma<E, N, TB>(d, b, [&](int i, int k) {
        /* row i, k: lane (i % 8) 4 + (k % 8) / 2, register (i / 8) + 2 (k / 8) */
        const uint32_t w = all[((i & 7) * 4 + ((k & 7) >> 1)) * 4 + (i >> 3) + 2 * (k >> 3)];
        return tf_tile_widen<E>((uint16_t)(w >> (16 * (k & 1))));
    });
}
template <class E, int N, bool TB = false, bool TA = false>
static inline void tf_wg_mma_ss(float (*d)[4], uint64_t a, uint64_t b)
{
    static_assert(N == 64 || N == 128, "wgmma tile, A from shared memory: N 64 or 128");
    const int r0 = 16 * (((int)threadIdx.x >> 5) & 3); /* the warp's rows of the 64 */
    tf_wg_emu_mma<E, N, TB>(d, b, [&](int i, int k) { return tf_wg_emu_at<E, TA>(a, r0 + i, k); });
}
#endif

/* keeps the compiler from moving reads or writes of an accumulator across
 * the wgmma issue and wait (its registers change asynchronously) */
template <int N>
__device__ __forceinline__ void tf_wg_reg_fence(float (*d)[4])
{
#if TF_WG_ASM
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
#else
    (void)d;
#endif
}

#endif
