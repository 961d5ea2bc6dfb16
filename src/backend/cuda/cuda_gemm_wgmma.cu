/* Level-3 fp32 GEMM on Hopper's warpgroup MMA (wgmma), 3xTF32: the
 * mma.sync kernel's contract and split K (cuda_gemm_mma.h), with the tensor
 * work on wgmma.mma_async m64n128k8, which mma.sync cannot reach on sm_90
 * (its TF32 rate is well below wgmma's; our mma.sync 3xTF32 kernel ran the
 * large problem's pair GEMMs at about cuBLAS' FFMA speed).
 *
 * Block: 128 x 128 tile of C, two warpgroups (256 threads), each 64 rows x
 * 128 columns, accumulators in registers (64 per thread, wgmma's layout is
 * mma.sync's C layout over 16 column groups of 8). K in slices of BK = 32,
 * copied by cp.async into a 3-stage pipeline (2 for short K, below) in the
 * operands' global layouts
 * (mma_load), so transposed operands cost nothing extra. Per slice:
 *   - A (each warp's 16 rows x 32 k) goes to registers and is split there
 *     into big + small TF32 parts (mma_split, rounded), the A fragment of
 *     wgmma with A in registers (the mma.sync m16n8k8 layout per warp);
 *   - B is split by all 256 threads into two copies, big and small, written
 *     in wgmma's K-major "core matrix" layout without swizzle (8 rows of n x
 *     16 bytes = 4 k each, 128 contiguous bytes; core matrices adjacent in k
 *     CM_K bytes apart, in n 128 bytes apart) and fenced for the async proxy;
 *   - 12 wgmmas: per k8 step a_small b_big, a_big b_small, a_big b_big.
 * The k order inside each group of 8 is the mma.sync kernel's (logical k t
 * is slice k 2t, t + 4 is 2t + 1): A's two values per row are one 8-byte
 * load, and B's conversion puts each k at its logical place.
 *
 * Speed (bench/cuda_kernels.sh gemm; figures in bench/RESULTS.md): faster
 * than cuBLAS' fp32 kernels on the shapes tf_gpu_route_gemm sends here (full
 * tiles, K >= 128, no split K), under half of the tensor cores' TF32 peak
 * over 3. Two groups of MMAs in flight with one barrier per slice (MODE 2)
 * is the schedule; what limits it is one block per SM (up to 224 registers a
 * thread) and B converted per slice by the whole block (NOTES.md). The tile
 * ends through shared memory (mma_stage_finish, cuda_gemm_mma.h): faster than
 * mma_finish's unrolled fragment stores, whose code missed in the
 * instruction cache.
 *
 * Needs sm_90a code (wgmma does not exist in plain sm_90): CMake compiles
 * this file for sm_90a when the build targets 90 (CMakeLists.txt), and
 * tf_cu_wg_probe checks once per backend that the running code has it;
 * elsewhere (other GPUs) the probe says 0 and the mma.sync kernel or cuBLAS
 * run instead. hostemu emulates the wgmma primitives (below), so the
 * kernel's logic (layouts, pipeline, schedules, split K, epilogue) is
 * checked without a GPU; the asynchrony and its register hazards are not. */
#include "cuda_gemm_mma.h"
#include "cuda_wgtile.h"

#define WG_BM 128
#define WG_BN 128
#define WG_NT 256
/* bytes between core matrices adjacent in k: a k4 column of BN / 8 of them */
#define WG_CM_K (WG_BN / 8 * 128)
#define WG_BC (MMA_BK * WG_BN) /* floats per converted copy of B (big or small) */

/* The landing tiles of a pipeline stage (mma_load's layout contract): A as
 * the mma.sync kernel keeps it (+8 floats per row where k is contiguous: the
 * fragment loads below are the same), B padded for the conversion's reads:
 * +4 per row either way (16-byte row reads of 8 k conflict-free when k is
 * contiguous, single floats along n otherwise). MODE 0: one converted copy of
 * B, one slice at a time (the two-blocks-an-SM schedule for short K); MODE 2:
 * three copies, so that slice kt + 1's wgmmas are issued before slice kt's
 * have finished (two groups in flight, one barrier per slice). */
template <bool TA, bool TB, int MODE, int ST>
struct wg_cfg {
    static constexpr int NT = WG_NT;
    static constexpr int SA = TA ? WG_BM + 4 : MMA_BK + 8;
    static constexpr int SB = TB ? MMA_BK + 4 : WG_BN + 4;
    static constexpr int A_TILE = TA ? MMA_BK * SA : WG_BM * SA;
    static constexpr int B_TILE = TB ? WG_BN * SB : MMA_BK * SB;
    static constexpr int STAGE = A_TILE + B_TILE;
    static constexpr int NBC = MODE + 1; /* converted copies (big + small each) */
    static constexpr int SMEM = ST * STAGE + NBC * 2 * WG_BC;
};

#if TF_WG_ASM
/* d (64 x 128 per warpgroup) += a (registers, 64 x 8) b (shared, 8 x 128) */
__device__ __forceinline__ void wg_mma(float (*d)[4], const uint32_t *a, uint64_t b)
{
    TF_WG_MMA("m64n128k8", "tf32.tf32", TF_WG_R64, "{%64, %65, %66, %67}", "%68", "%69", "1, 1",
              (TF_WG_D16), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#endif /* TF_WG_ASM */

#if TF_WG_CODE && !TF_WG_ASM
/* hostemu: the same primitives, run when issued (a group is complete at once,
 * so the waits and fences have nothing to do). The descriptor's start is the
 * offset into the emulator's one shared-memory buffer; each warp's 16 rows
 * of the 64 x 128 result come from its own A fragments (wgmma's register-A
 * layout per warp is mma.sync m16n8k8's), gathered in one exchange; B is
 * read through the descriptor (core matrix (k / 4, n / 8) at LBO, SBO apart,
 * row n % 8 16 bytes apart); the tensor cores read the TF32 bits only. */
__device__ __forceinline__ void wg_mma(float (*d)[4], const uint32_t *a, uint64_t desc)
{
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;
    const uint32_t m = 0xffffe000u;
    uint32_t all[32 * 4];
    emu_warp_exchange(a, 4, all);
    const char *b = (const char *)tf_emu_smem() + ((desc & 0x3fffu) << 4);
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3fffu) << 4;
    const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3fffu) << 4;
    for (int k = 0; k < 8; ++k) {
        const int hi = k >> 2, src = k & 3;
        const float a0 = mma_f(all[(g * 4 + src) * 4 + 2 * hi] & m);     /* row g */
        const float a1 = mma_f(all[(g * 4 + src) * 4 + 2 * hi + 1] & m); /* row g + 8 */
        for (int j = 0; j < 16; ++j)
            for (int h = 0; h < 2; ++h) {
                const int n = 8 * j + 2 * t + h;
                uint32_t bb;
                memcpy(&bb, b + (k / 4) * lbo + (n / 8) * sbo + (n % 8) * 16 + (k % 4) * 4, 4);
                const float bv = mma_f(bb & m);
                d[j][h] += a0 * bv;
                d[j][2 + h] += a1 * bv;
            }
    }
}
#endif

#if TF_WG_CODE
/* B's slice (landed in Bs) as big and small TF32 parts in the core-matrix
 * layout: core matrix (kq, n / 8) row n % 8 at float (kq * BN + n) * 4, k
 * column kq holding the k8 step kq / 2's slice k 2c (kq even) or 2c + 1 (odd)
 * at its logical k c */
template <class CF, bool TB, bool X3>
__device__ __forceinline__ void wg_convert(const float *Bs, float *Bhi, float *Blo)
{
    const int tid = (int)threadIdx.x;
    if (TB) { /* rows n, k contiguous: one item = 8 k of a row, both columns of a k8 step */
#pragma unroll
        for (int it = 0; it < MMA_BK / 8 * WG_BN / WG_NT; ++it) {
            const int q = tid + WG_NT * it, n = q % WG_BN, st = q / WG_BN;
            const float4 x0 = *reinterpret_cast<const float4 *>(Bs + n * CF::SB + 8 * st);
            const float4 x1 = *reinterpret_cast<const float4 *>(Bs + n * CF::SB + 8 * st + 4);
            const float ev[4] = {x0.x, x0.z, x1.x, x1.z}, od[4] = {x0.y, x0.w, x1.y, x1.w};
            uint32_t eh[4], el[4], oh[4], ol[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                mma_split<X3>(ev[c], eh[c], el[c]);
                mma_split<X3>(od[c], oh[c], ol[c]);
            }
            const int oe = (2 * st * WG_BN + n) * 4, oo = oe + WG_BN * 4;
            *reinterpret_cast<uint4 *>(Bhi + oe) = make_uint4(eh[0], eh[1], eh[2], eh[3]);
            *reinterpret_cast<uint4 *>(Bhi + oo) = make_uint4(oh[0], oh[1], oh[2], oh[3]);
            if (X3) {
                *reinterpret_cast<uint4 *>(Blo + oe) = make_uint4(el[0], el[1], el[2], el[3]);
                *reinterpret_cast<uint4 *>(Blo + oo) = make_uint4(ol[0], ol[1], ol[2], ol[3]);
            }
        }
    } else { /* rows k, n contiguous: one item = a core-matrix row (4 k of one n) */
#pragma unroll
        for (int it = 0; it < MMA_BK * WG_BN / 4 / WG_NT; ++it) {
            const int q = tid + WG_NT * it, n = q % WG_BN, kq = q / WG_BN;
            const int k0 = 8 * (kq >> 1) + (kq & 1);
            uint32_t hb[4], lb[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) mma_split<X3>(Bs[(k0 + 2 * c) * CF::SB + n], hb[c], lb[c]);
            const int o = (kq * WG_BN + n) * 4;
            *reinterpret_cast<uint4 *>(Bhi + o) = make_uint4(hb[0], hb[1], hb[2], hb[3]);
            if (X3) *reinterpret_cast<uint4 *>(Blo + o) = make_uint4(lb[0], lb[1], lb[2], lb[3]);
        }
    }
}

/* the warp's A fragments of the slice, rows wm + g and + 8: per k8 step s,
 * a0 (g, 2t) a2 (g, 2t + 1), a1 a3 the same at row g + 8, big and small */
template <class CF, bool TA, bool X3>
__device__ __forceinline__ void wg_afrag(const float *As, int wm, uint32_t (*ab)[4],
                                         uint32_t (*as)[4])
{
    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = wm + g + 8 * h, kk = 8 * s;
            float v0, v1;
            if (TA) {
                v0 = As[(kk + 2 * t) * CF::SA + r];
                v1 = As[(kk + 2 * t + 1) * CF::SA + r];
            } else {
                const float2 v = *(const float2 *)(As + r * CF::SA + kk + 2 * t);
                v0 = v.x, v1 = v.y;
            }
            mma_split<X3>(v0, ab[s][h], as[s][h]);
            mma_split<X3>(v1, ab[s][h + 2], as[s][h + 2]);
        }
}

/* the 12 wgmmas of a slice: per k8 step a_small b_big, a_big b_small, a_big b_big
 * (X3), or the 4 of a_big b_big (tf32: one product, the operands rounded) */
template <bool X3>
__device__ __forceinline__ void wg_slice(float (*acc)[4], const uint32_t (*ab)[4],
                                         const uint32_t (*as)[4], const float *Bhi,
                                         const float *Blo)
{
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        const uint64_t dh = tf_wg_desc(Bhi + s * 2 * WG_BN * 4, WG_CM_K, 128u);
        const uint64_t dl = tf_wg_desc(Blo + s * 2 * WG_BN * 4, WG_CM_K, 128u);
        if (X3) {
            wg_mma(acc, as[s], dh);
            wg_mma(acc, ab[s], dl);
        }
        wg_mma(acc, ab[s], dh);
    }
}

/* registers the in-flight wgmmas read or write: live and unmoved up to here */
#if !TF_WG_ASM
__device__ __forceinline__ void wg_keep(float (*)[4], uint32_t (*)[4], uint32_t (*)[4]) {}
__device__ __forceinline__ void wg_keep_a(uint32_t (*)[4], uint32_t (*)[4]) {}
#else
__device__ __forceinline__ void wg_keep(float (*acc)[4], uint32_t (*ab)[4], uint32_t (*as)[4])
{
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[j][e])::"memory");
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(ab[s][e]), "+r"(as[s][e])::"memory");
}

/* the A registers of one slice: live and unmoved up to here */
__device__ __forceinline__ void wg_keep_a(uint32_t (*ab)[4], uint32_t (*as)[4])
{
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(ab[s][e]), "+r"(as[s][e])::"memory");
}
#endif /* TF_WG_ASM */
#endif /* TF_WG_CODE */

template <bool TA, bool TB, int VEC, int MODE, int ST, bool X3, int MINB>
__global__ void __launch_bounds__(WG_NT, MINB) gemm_wg_kernel(mma_args p)
{
#if TF_WG_CODE
    typedef wg_cfg<TA, TB, MODE, ST> CF;
    TF_SMEM(sm);
    float *Bc = sm + ST * CF::STAGE; /* [NBC][big, small][WG_BC] */
    const int tid = (int)threadIdx.x, warp = tid >> 5;
    const int wm = (warp >> 2) * 64 + (warp & 3) * 16; /* this warp's 16 rows */
    const int bz = (int)blockIdx.z, bi = bz / p.splits, sp = bz % p.splits;
    /* the tiles on x, N fastest (y allows only 65535 rows of M tiles) */
    const int ntn = (p.N + WG_BN - 1) / WG_BN;
    const int m0 = (int)(blockIdx.x / ntn) * WG_BM, n0 = (int)(blockIdx.x % ntn) * WG_BN;
    const float *A = p.A + (long)bi * p.sA, *B = p.B + (long)bi * p.sB;
    const int kb = sp * p.kchunk, ke = min(p.K, kb + p.kchunk);
    const int nk = ke > kb ? (ke - kb + MMA_BK - 1) / MMA_BK : 0;
#define WG_LOAD(kt)                                                                              \
    mma_load<CF, WG_BM, WG_BN, TA, TB, VEC>(sm + ((kt) % ST) * CF::STAGE, p, A, B, m0, n0,        \
                                            kb + (kt) * MMA_BK, ke)
#define WG_STAGE_AT(kt) (sm + ((kt) % ST) * CF::STAGE)

    float acc[1][16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][j][e] = 0.f;
    uint32_t ab[4][4], as[4][4];

    /* slices 0 .. ST-2 in flight; one commit group per slice (empty past the
     * end), so "slice kt has landed" is "at most ST-2 newer groups pending" */
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) {
        if (s < nk) WG_LOAD(s);
        tf_cp_commit();
    }
    if (MODE == 0) {
        for (int kt = 0; kt < nk; ++kt) {
            tf_cp_wait<ST - 2>(); /* slice kt has landed (this thread's copies) */
            __syncthreads();    /* ... everyone's; slice kt-1's stage and B copies are free */
            if (kt + ST - 1 < nk) WG_LOAD(kt + ST - 1);
            tf_cp_commit();
            const float *As = WG_STAGE_AT(kt);
            wg_convert<CF, TB, X3>(As + CF::A_TILE, Bc, Bc + WG_BC);
            wg_proxy_fence();
            wg_afrag<CF, TA, X3>(As, wm, ab, as);
            __syncthreads(); /* the B copies are complete */
            wg_fence();
            wg_slice<X3>(acc[0], ab, as, Bc, Bc + WG_BC);
            wg_commit();
            wg_wait0();
            wg_keep(acc[0], ab, as);
        }
    } else if (MODE == 2 && nk > 0) {
        /* iteration kt: the load of slice kt + ST (its stage held slice kt,
         * converted last iteration), slice kt's wgmmas, then, once slice
         * kt - 1's are done (wait_group 1), slice kt + 1 converted into copy
         * (kt + 1) % 3 (last read by slice kt - 2's wgmmas, finished before
         * the last barrier) and its A fragments into the register set slice
         * kt - 1 used; one barrier. Register sets alternate: the loop runs
         * two slices per pass. */
        uint32_t b0[4][4], s0[4][4], b1[4][4], s1[4][4];
        tf_cp_wait<ST - 2>(); /* slice 0 */
        __syncthreads();
        if (ST - 1 < nk) WG_LOAD(ST - 1);
        tf_cp_commit();
        wg_convert<CF, TB, X3>(WG_STAGE_AT(0) + CF::A_TILE, Bc, Bc + WG_BC);
        wg_proxy_fence();
        wg_afrag<CF, TA, X3>(WG_STAGE_AT(0), wm, b0, s0);
        tf_cp_wait<ST - 2>(); /* slice 1 */
        __syncthreads();
#define WG_STEP2(KT, CB, CS, NB, NS)                                                         \
    do {                                                                                     \
        const int kt_ = (KT);                                                                \
        if (kt_ + ST < nk) WG_LOAD(kt_ + ST);                                                \
        tf_cp_commit();                                                                        \
        const float *bh_ = Bc + (kt_ % 3) * 2 * WG_BC;                                       \
        wg_fence();                                                                          \
        wg_slice<X3>(acc[0], CB, CS, bh_, bh_ + WG_BC);                                          \
        wg_commit();                                                                         \
        if (kt_ + 1 < nk) {                                                                  \
            wg_wait1();                 /* slice kt - 1's wgmmas: NB, NS are free */         \
            wg_keep_a(NB, NS);                                                               \
            float *nh_ = Bc + ((kt_ + 1) % 3) * 2 * WG_BC;                                   \
            wg_convert<CF, TB, X3>(WG_STAGE_AT(kt_ + 1) + CF::A_TILE, nh_, nh_ + WG_BC);         \
            wg_proxy_fence();                                                                \
            wg_afrag<CF, TA, X3>(WG_STAGE_AT(kt_ + 1), wm, NB, NS);                              \
            tf_cp_wait<ST - 2>(); /* slice kt + 2 has landed */                                \
            __syncthreads();                                                                 \
        }                                                                                    \
    } while (0)
        for (int kt = 0; kt < nk; kt += 2) {
            WG_STEP2(kt, b0, s0, b1, s1);
            if (kt + 1 < nk) WG_STEP2(kt + 1, b1, s1, b0, s0);
        }
#undef WG_STEP2
        wg_wait0();
        wg_keep(acc[0], b0, s0);
        wg_keep_a(b1, s1);
    }
#undef WG_LOAD
#undef WG_STAGE_AT
    static_assert(CF::SMEM >= WG_BM * MMA_LDT(WG_BN), "the staged tile fits the pipeline's memory");
    if (p.splits > 1 && !p.sep) /* the last split adds (gemm=wgmma, gpu_plan.h) */
        mma_finish<1, 16, WG_NT>(p, acc, m0, n0, wm, 0, bi, sp);
    else
        mma_stage_finish<1, 16, WG_NT, WG_BM, WG_BN>(p, acc, sm, m0, n0, wm, 0, bi, sp);
#else
    (void)p; /* no sm_90a code here: the probe reports 0, no GEMM is sent */
#endif
}

__global__ void wg_probe_kernel(int *flag) { *flag = TF_WG_CODE; }

template <bool TA, bool TB, int VEC, int MODE, int ST, bool X3, int MINB = 1>
static void wg_launch(tf_backend *be, const mma_args &p, int batch)
{
    const dim3 grid((unsigned)((p.N + WG_BN - 1) / WG_BN) * (unsigned)((p.M + WG_BM - 1) / WG_BM),
                    1, (unsigned)(batch * p.splits));
    const size_t smem = sizeof(float) * wg_cfg<TA, TB, MODE, ST>::SMEM;
    TF_LAUNCH_SMEM((gemm_wg_kernel<TA, TB, VEC, MODE, ST, X3, MINB>), grid, WG_NT, smem, be, p);
}

/* The schedules: MODE 2 with 3 stages, one block an SM; and, for short K
 * with tiles for at least 3 waves of one block an SM (the route's wg_short),
 * two blocks an SM (MODE 0, 2 stages: 108-111 KB of shared memory;
 * __launch_bounds__ caps the registers at 128, a few spill): one block's
 * loads, conversion and epilogue then overlap the other's MMAs (faster on
 * the large problem's fp32 pair GEMMs: bench/RESULTS.md). */
template <bool TA, bool TB, int VEC>
static void wg_pick(tf_backend *be, const mma_args &p, int batch, int wg_short)
{
    if (wg_short) wg_launch<TA, TB, VEC, 0, 2, true, 2>(be, p, batch);
    else wg_launch<TA, TB, VEC, 2, 3, true>(be, p, batch);
}

extern "C" void tf_cu_gemm_wg(tf_backend *be, const mma_args *p, int batch, int ta, int tb,
                              int vec, int wg_short)
{
#define WG_GO(TA, TB)                                                                    \
    do {                                                                                 \
        if (vec == 4) wg_pick<TA, TB, 4>(be, *p, batch, wg_short);                       \
        else wg_pick<TA, TB, 1>(be, *p, batch, wg_short);                                \
    } while (0)
    if (!ta && !tb) WG_GO(false, false);
    else if (!ta && tb) WG_GO(false, true);
    else if (ta && !tb) WG_GO(true, false);
    else WG_GO(true, true);
#undef WG_GO
}

extern "C" int tf_cu_wg_probe(tf_backend *be)
{
#ifdef TF_CUDA_HOSTEMU
    (void)be;
    return 1; /* the primitives are emulated (above) */
#else
    int major = 0, minor = 0, flag = 0, *d = NULL;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, be->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, be->device) != cudaSuccess ||
        major != 9 || minor != 0)
        return 0;
    if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) return (void)cudaGetLastError(), 0;
    wg_probe_kernel<<<1, 1, 0, be->stream>>>(d);
    cudaError_t e = cudaGetLastError(); /* e.g. no kernel image for this GPU */
    if (e == cudaSuccess) e = cudaMemcpyAsync(&flag, d, sizeof(int), cudaMemcpyDeviceToHost, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    (void)cudaGetLastError();
    cudaFree(d);
    return e == cudaSuccess && flag == 1;
#endif
}
