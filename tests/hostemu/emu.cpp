/* hostemu: the CPU implementation behind emu.h (see there for what it is for). */
#include "emu.h"

#include "backend/tf_dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <set>
#include <string>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

static void emu_die(const char *what)
{
    fprintf(stderr, "hostemu: %s\n", what);
    abort();
}

/* ================= coroutine threads ================= */
/* The switch between GPU threads. glibc's swapcontext saves and restores the
 * signal mask, a system call per switch, and getcontext another per thread
 * and block: they took most of the emulator's time. On x86-64 a switch here
 * saves what the ABI says a call preserves (rbx, rbp, r12-r15, the MXCSR
 * and the x87 control word) on the stack it leaves and resumes the other:
 * the same threads in the same order, ~20x cheaper. ASan builds (--asan)
 * and other machines keep ucontext, whose stack switches ASan follows. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void **save_sp, void *resume_sp);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch, @function\n"
    "emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size emu_switch, .-emu_switch\n");
#else
#define EMU_FAST_SWITCH 0
#endif

namespace {
const size_t kStack = 256 * 1024;

struct Thr {
#if EMU_FAST_SWITCH
    void *sp; /* where emu_switch left it */
#else
    ucontext_t ctx;
#endif
    bool done;
    unsigned x, y, z;
};
struct Bar {
    int count = 0;
    long gen = 0;
};

std::vector<Thr> g_thr;
std::vector<char *> g_stacks; /* reused by every launch, freed at exit */
struct StackReaper {
    ~StackReaper()
    {
        for (char *p : g_stacks) free(p);
    }
} g_reaper;
#if EMU_FAST_SWITCH
void *g_sched_sp;
#else
ucontext_t g_sched;
#endif
int g_cur = -1;
int g_n = 0;
long g_progress = 0;
const std::function<void()> *g_body = nullptr;
const char *g_kernel = "";
Bar g_block_bar;
std::vector<Bar> g_warp_bar;
std::vector<Bar> g_group_bar; /* one per 32-lane group */
std::vector<uint64_t> g_slot; /* TF_WARP per warp */
std::vector<uint32_t> g_xslot; /* 32 x EMU_XN per warp (emu_warp_exchange) */

int lin_tid() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }
int warp_size_of(int w) { return g_n - TF_WARP * w < TF_WARP ? g_n - TF_WARP * w : TF_WARP; }
int group_size_of(int g) { return g_n - 32 * g < 32 ? g_n - 32 * g : 32; }
unsigned long long full_mask(int ws) { return ws == 64 ? ~0ull : ((1ull << ws) - 1); }

#if EMU_FAST_SWITCH
void yield_() { emu_switch(&g_thr[g_cur].sp, g_sched_sp); }
#else
void yield_() { swapcontext(&g_thr[g_cur].ctx, &g_sched); }
#endif

void bar_wait(Bar &b, int target)
{
    const long gen = b.gen;
    ++g_progress;
    if (++b.count == target) {
        b.count = 0;
        ++b.gen;
        return;
    }
    while (b.gen == gen) yield_();
}

void entry()
{
    (*g_body)();
    g_thr[g_cur].done = true;
    ++g_progress;
#if EMU_FAST_SWITCH
    yield_(); /* never resumed: the scheduler skips a thread that is done */
    emu_die("a finished GPU thread was resumed");
#endif
    /* returning resumes uc_link = the scheduler */
}

#if EMU_FAST_SWITCH
/* A new thread's stack as emu_switch leaves one: the saved registers (zero),
 * the MXCSR and x87 control word of the scheduler's thread, and entry() as
 * the return address, placed so that entry() starts with the stack aligned
 * as after a call (rsp + 8 a multiple of 16). */
void *start_stack(char *stack)
{
    uintptr_t top = ((uintptr_t)stack + kStack) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;          /* entry()'s return address: it never returns */
    *--sp = (void *)&entry;   /* emu_switch's ret */
    for (int r = 0; r < 6; ++r) *--sp = nullptr; /* rbp rbx r12 r13 r14 r15 */
    uint32_t fp[2];
    __asm__ volatile("stmxcsr %0" : "=m"(fp[0]));
    __asm__ volatile("fnstcw %0" : "=m"(fp[1]));
    fp[1] &= 0xffff;
    *--sp = nullptr;
    memcpy(sp, fp, sizeof fp);
    return sp;
}
#endif

void run_block()
{
    g_block_bar = Bar();
    const int nw = (g_n + TF_WARP - 1) / TF_WARP;
    g_warp_bar.assign(nw, Bar());
    g_group_bar.assign((size_t)(g_n + 31) / 32, Bar());
    g_slot.assign((size_t)nw * TF_WARP, 0);
    g_xslot.assign((size_t)nw * 32 * EMU_XN, 0);
    for (int t = 0; t < g_n; ++t) {
        Thr &th = g_thr[t];
#if EMU_FAST_SWITCH
        th.sp = start_stack(g_stacks[t]);
#else
        getcontext(&th.ctx);
        th.ctx.uc_stack.ss_sp = g_stacks[t];
        th.ctx.uc_stack.ss_size = kStack;
        th.ctx.uc_link = &g_sched;
        makecontext(&th.ctx, entry, 0);
#endif
        th.done = false;
        th.x = t % blockDim.x;
        th.y = (t / blockDim.x) % blockDim.y;
        th.z = t / (blockDim.x * blockDim.y);
    }
    /* HOSTEMU_REVERSE=1 runs the threads of a block in reverse order between
     * barriers: a shared-memory read that lacks a barrier after another
     * thread's write then sees the other thread's value in one of the two
     * orders only (run the tests both ways) */
    static const bool reverse = getenv("HOSTEMU_REVERSE") != nullptr;
    int ndone = 0;
    while (ndone < g_n) {
        const long before = g_progress;
        for (int k = 0; k < g_n; ++k) {
            const int t = reverse ? g_n - 1 - k : k;
            Thr &th = g_thr[t];
            if (th.done) continue;
            g_cur = t;
            threadIdx.x = th.x;
            threadIdx.y = th.y;
            threadIdx.z = th.z;
#if EMU_FAST_SWITCH
            emu_switch(&g_sched_sp, th.sp);
#else
            swapcontext(&g_sched, &th.ctx);
#endif
            if (th.done) ++ndone;
        }
        if (ndone < g_n && g_progress == before) {
            fprintf(stderr,
                    "hostemu: deadlock in %s, block (%u,%u,%u): %d of %d threads finished, the "
                    "rest wait at a barrier or shuffle that can never complete\n",
                    g_kernel, blockIdx.x, blockIdx.y, blockIdx.z, ndone, g_n);
            abort();
        }
    }
    g_cur = -1;
}

/* HOSTEMU_KERNELS=1: at exit, how often each kernel ran (which versions a
 * test reached) */
struct LaunchCounts {
    std::map<std::string, long> n;
    ~LaunchCounts()
    {
        if (!getenv("HOSTEMU_KERNELS")) return;
        for (auto &kv : n) fprintf(stderr, "hostemu: kernel %s: %ld launches\n", kv.first.c_str(), kv.second);
    }
} g_counts;

void run_grid(const char *name, dim3 grid, dim3 block, const std::function<void()> &body)
{
    g_counts.n[name]++;
    const long n = (long)block.x * block.y * block.z;
    if (n < 1 || n > 1024 || block.z > 64) emu_die("invalid block size");
    if (grid.y > 65535 || grid.z > 65535) emu_die("grid.y/grid.z over 65535");
    if (g_cur >= 0) emu_die("kernel launched from inside a kernel");
    g_n = (int)n;
    while ((long)g_stacks.size() < n) g_stacks.push_back((char *)malloc(kStack));
    g_thr.resize(n);
    g_body = &body;
    g_kernel = name;
    blockDim = block;
    gridDim = grid;
    /* HOSTEMU_BLOCK_ORDER=reverse|shuffle (read at every launch): the blocks
     * in reverse order, or in a pseudo-random order that differs from launch
     * to launch, instead of x fastest, then y, then z: a GPU runs them in any
     * order, and work split across blocks (split K, reduction trees: the
     * last block to arrive finishes) must give the same bits in every one */
    const char *order = getenv("HOSTEMU_BLOCK_ORDER");
    const int mode = !order ? 0 : !strcmp(order, "reverse") ? 1 : !strcmp(order, "shuffle") ? 2 : 0;
    const long nb = (long)grid.x * grid.y * grid.z;
    std::vector<long> perm;
    if (mode == 2) {
        static unsigned long long seed = 0x9E3779B97F4A7C15ull;
        perm.resize((size_t)nb);
        for (long i = 0; i < nb; ++i) perm[(size_t)i] = i;
        for (long i = nb - 1; i > 0; --i) { /* Fisher-Yates, one LCG draw per step */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const long j = (long)((seed >> 33) % (unsigned long long)(i + 1));
            const long t = perm[(size_t)i];
            perm[(size_t)i] = perm[(size_t)j], perm[(size_t)j] = t;
        }
    }
    for (long k = 0; k < nb; ++k) {
        const long l = mode == 1 ? nb - 1 - k : mode == 2 ? perm[(size_t)k] : k;
        blockIdx.x = (unsigned)(l % grid.x);
        blockIdx.y = (unsigned)(l / grid.x % grid.y);
        blockIdx.z = (unsigned)(l / ((long)grid.x * grid.y));
        run_block();
    }
    g_body = nullptr;
}
} // namespace

void __syncthreads()
{
    if (g_cur < 0) emu_die("__syncthreads outside a kernel");
    bar_wait(g_block_bar, g_n);
}

int emu_lane() { return lin_tid() % TF_WARP; }

void __syncwarp(unsigned long long mask)
{
    const int w = lin_tid() / TF_WARP, ws = warp_size_of(w);
    if (mask != full_mask(ws)) emu_die("__syncwarp: the mask is not the whole (active) warp");
    bar_wait(g_warp_bar[w], ws);
}

uint64_t emu_shfl(unsigned long long mask, uint64_t bits, int src)
{
    if (g_cur < 0) emu_die("shuffle outside a kernel");
    const int t = lin_tid(), w = t / TF_WARP, lane = t % TF_WARP, ws = warp_size_of(w);
    if (mask != full_mask(ws)) emu_die("shuffle mask is not the whole (active) warp");
    g_slot[(size_t)w * TF_WARP + lane] = bits;
    bar_wait(g_warp_bar[w], ws); /* everyone has written */
    if (src < 0 || src >= ws) emu_die("shuffle reads a lane that does not exist");
    const uint64_t r = g_slot[(size_t)w * TF_WARP + src];
    bar_wait(g_warp_bar[w], ws); /* everyone has read before slots are reused */
    return r;
}

/* the participants of a group operation of width w: [first, first + n) of
 * the block's threads, and their barrier */
static Bar &group_of(int w, int *first, int *n)
{
    if (w < 1 || w > TF_WARP || (w & (w - 1)))
        emu_die("group shuffle width is not a power of two up to the warp width");
    const int t = lin_tid();
    if (w <= 32) {
        *first = t / 32 * 32;
        *n = group_size_of(t / 32);
        return g_group_bar[(size_t)(t / 32)];
    }
    *first = t / TF_WARP * TF_WARP;
    *n = warp_size_of(t / TF_WARP);
    return g_warp_bar[(size_t)(t / TF_WARP)];
}

uint64_t emu_shfl_bits_group(uint64_t bits, int src, int w)
{
    if (g_cur < 0) emu_die("shuffle outside a kernel");
    int first = 0, n = 0;
    Bar &b = group_of(w, &first, &n);
    const int t = lin_tid(), base = t / TF_WARP * TF_WARP;
    g_slot[(size_t)t] = bits;
    bar_wait(b, n); /* everyone has written */
    const int s = base + src; /* src is a lane of the warp */
    if (s < first || s >= first + n || (s - first) / w != (t - first) / w)
        emu_die("shuffle reads a lane outside its group (or one that does not exist)");
    const uint64_t r = g_slot[(size_t)s];
    bar_wait(b, n); /* everyone has read before slots are reused */
    return r;
}

void emu_group_sync(int w)
{
    if (g_cur < 0) emu_die("group barrier outside a kernel");
    int first = 0, n = 0;
    Bar &b = group_of(w, &first, &n);
    bar_wait(b, n);
}

void emu_warp_exchange(const uint32_t *mine, int n, uint32_t *all)
{
    if (g_cur < 0) emu_die("warp exchange outside a kernel");
    const int t = lin_tid(), w = t / 32, lane = t % 32, ws = warp_size_of(t / TF_WARP);
    if (TF_WARP != 32 || ws != 32 || n < 1 || n > EMU_XN)
        emu_die("warp exchange (mma.sync) needs a whole 32-lane warp, 1..8 words");
    uint32_t *x = &g_xslot[(size_t)w * 32 * EMU_XN];
    for (int i = 0; i < n; ++i) x[lane * EMU_XN + i] = mine[i];
    bar_wait(g_warp_bar[w], ws); /* everyone has written */
    for (int l = 0; l < 32; ++l)
        for (int i = 0; i < n; ++i) all[l * n + i] = x[l * EMU_XN + i];
    bar_wait(g_warp_bar[w], ws); /* everyone has read before the slots are reused */
}

/* ================= runtime ================= */
struct emu_graph_node {
    cudaGraphNodeType type;
};
struct emu_graph {
    std::vector<std::function<void()>> ops;
    std::vector<emu_graph_node> nodes; /* one per op: what kind of node CUDA would make */
};
struct emu_stream {
    emu_graph *capture = nullptr;
    bool joined = false;                /* joined another stream's capture */
    unsigned long long seq = 0, waited = 0; /* captured work; the last of it waited for */
};

namespace {
int g_devices = 1;
size_t g_mem_limit = (size_t)140 << 30, g_mem_used = 0; /* like an H200 */
std::map<void *, size_t> g_mem;
cudaError_t g_last = cudaSuccess;
int g_capturing = 0; /* number of streams capturing */
std::set<emu_stream *> g_streams;

cudaError_t fail(cudaError_t e)
{
    g_last = e;
    return e;
}
/* runs now, or records into the stream's capture */
void submit(cudaStream_t s, std::function<void()> f,
            cudaGraphNodeType type = cudaGraphNodeTypeKernel)
{
    if (s && s->capture) {
        ++s->seq;
        s->capture->ops.push_back(std::move(f));
        s->capture->nodes.push_back(emu_graph_node{type});
    } else
        f();
}
} // namespace

void emu_set_device_count(int n) { g_devices = n; }
void emu_set_mem_limit(size_t b) { g_mem_limit = b; }

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureUnjoined: return "capture sequence contains a fork that was not joined to the primary stream";
    default: return "unknown error";
    }
}
const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    default: return "cudaErrorUnknown";
    }
}
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 0;
    if (g_devices <= 0) return fail(cudaErrorNoDevice);
    *n = g_devices;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d >= 0 && d < g_devices ? cudaSuccess : fail(cudaErrorInvalidValue); }
/* SMs reported: 4, or HOSTEMU_SMS (e.g. 132, the H200's, so that a test
 * reaches the routing a GPU of that size takes; blocks still run one at a
 * time) */
static int emu_sms()
{
    const char *v = getenv("HOSTEMU_SMS");
    const int n = v ? atoi(v) : 0;
    return n > 0 ? n : 4;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int)
{
    *v = a == cudaDevAttrMultiProcessorCount ? emu_sms() : 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "hostemu (CPU emulation)");
    p->totalGlobalMem = g_mem_limit;
    p->multiProcessorCount = emu_sms();
    p->major = 9;
    p->minor = 0;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = nullptr;
    if (g_capturing) return fail(cudaErrorStreamCaptureUnsupported);
    if (g_mem_limit && g_mem_used + bytes > g_mem_limit) return fail(cudaErrorMemoryAllocation);
    void *q = nullptr; /* exact size: ASan sees overruns */
    if (posix_memalign(&q, 256, bytes ? bytes : 1)) return fail(cudaErrorMemoryAllocation);
    g_mem[q] = bytes;
    g_mem_used += bytes;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = nullptr;
    /* more than any host could lock (and more than ASan's malloc accepts) */
    if (bytes > ((size_t)1 << 40)) return fail(cudaErrorMemoryAllocation);
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    if (g_capturing) return fail(cudaErrorStreamCaptureUnsupported);
    auto it = g_mem.find(p);
    if (it == g_mem.end()) return fail(cudaErrorInvalidValue);
    g_mem_used -= it->second;
    g_mem.erase(it);
    free(p);
    return cudaSuccess;
}
/* device pointers must lie inside an allocation */
static void check_dev(const void *p, size_t bytes, const char *what)
{
    auto it = g_mem.upper_bound((void *)p);
    if (it == g_mem.begin()) goto bad;
    --it;
    if ((const char *)p >= (const char *)it->first &&
        (const char *)p + bytes <= (const char *)it->first + it->second)
        return;
bad:
    fprintf(stderr, "hostemu: %s: %zu bytes at %p are not inside one device allocation\n", what,
            bytes, p);
    abort();
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind k,
                            cudaStream_t s)
{
    if (k != cudaMemcpyDeviceToDevice && s && s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    if (k != cudaMemcpyHostToDevice) check_dev(src, bytes, "cudaMemcpyAsync source");
    if (k != cudaMemcpyDeviceToHost) check_dev(dst, bytes, "cudaMemcpyAsync destination");
    submit(s, [=]() { memmove(dst, src, bytes); }, cudaGraphNodeTypeMemcpy);
    return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind k, cudaStream_t s)
{
    if (k != cudaMemcpyDeviceToDevice) return fail(cudaErrorInvalidValue); /* the backend's only use */
    if (!height || !width) return cudaSuccess;
    check_dev(src, (height - 1) * spitch + width, "cudaMemcpy2DAsync source");
    check_dev(dst, (height - 1) * dpitch + width, "cudaMemcpy2DAsync destination");
    submit(s, [=]() {
        for (size_t r = 0; r < height; r++)
            memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    }, cudaGraphNodeTypeMemcpy);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    check_dev(p, bytes, "cudaMemsetAsync");
    submit(s, [=]() { memset(p, v, bytes); }, cudaGraphNodeTypeMemset);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
    *s = new emu_stream();
    g_streams.insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int)
{
    return cudaStreamCreateWithFlags(s, flags);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    *least = 0, *greatest = -5;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    g_streams.erase(s);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st)
{
    *st = s && s->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode)
{
    if (!s || s->capture) return fail(cudaErrorInvalidValue);
    s->capture = new emu_graph();
    ++g_capturing;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    if (!s || !s->capture) return fail(cudaErrorInvalidValue);
    *g = s->capture;
    bool unjoined = false;
    for (emu_stream *t : g_streams)
        if (t != s && t->joined && t->capture == s->capture) {
            unjoined = unjoined || t->seq > t->waited;
            t->capture = nullptr, t->joined = false;
            t->seq = t->waited = 0;
            --g_capturing;
        }
    s->capture = nullptr;
    s->seq = s->waited = 0;
    --g_capturing;
    return unjoined ? fail(cudaErrorStreamCaptureUnjoined) : cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    if (!g || !n) return fail(cudaErrorInvalidValue);
    if (nodes) {
        const size_t k = *n < g->nodes.size() ? *n : g->nodes.size();
        for (size_t i = 0; i < k; ++i) nodes[i] = &g->nodes[i];
        *n = k;
    } else {
        *n = g->nodes.size();
    }
    return cudaSuccess;
}
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType *t)
{
    if (!node || !t) return fail(cudaErrorInvalidValue);
    *t = node->type;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    *e = new emu_graph(*g);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    if (s && s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    for (auto &f : e->ops) f();
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    delete e;
    return cudaSuccess;
}

struct emu_event {
    double ms = 0;
    bool recorded = false;
    bool timing = true;
    emu_graph *capture = nullptr; /* recorded while capturing: that capture */
    emu_stream *src = nullptr;
    unsigned long long seq = 0;   /* src's captured work at the record */
};
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = new emu_event();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    cudaError_t r = cudaEventCreate(e);
    (*e)->timing = !(flags & cudaEventDisableTiming);
    return r;
}
static bool capture_active(const emu_graph *g)
{
    for (const emu_stream *t : g_streams)
        if (t->capture == g) return true;
    return false;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    if (e->capture && capture_active(e->capture)) {
        if (!s || (s->capture && s->capture != e->capture))
            return fail(cudaErrorStreamCaptureUnsupported);
        if (!s->capture) { /* joins the capture */
            s->capture = e->capture, s->joined = true;
            ++g_capturing;
        }
        if (e->src && e->seq > e->src->waited) e->src->waited = e->seq;
        return cudaSuccess;
    }
    if (s && s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (s && s->capture) {
        /* the backend never times work while capturing: refuse, to catch it */
        if (e->timing) return fail(cudaErrorStreamCaptureUnsupported);
        e->capture = s->capture, e->src = s, e->seq = s->seq;
        return cudaSuccess;
    }
    e->capture = nullptr, e->src = nullptr;
    submit(s, [=]() {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        e->ms = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
        e->recorded = true;
    });
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidValue);
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

void emu_launch(const char *name, dim3 grid, dim3 block, cudaStream_t s,
                std::function<void()> body)
{
    submit(s, [=]() { run_grid(name, grid, block, body); });
}

/* ================= cuBLAS ================= */
struct emu_blas {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    void *ws = nullptr;
};

/* TF32: 10 mantissa bits, round to nearest even */
static float tf32_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u += 0x0fffu + ((u >> 13) & 1u);
        u &= 0xffffe000u;
    }
    memcpy(&x, &u, 4);
    return x;
}

/* column-major C[m,n] = alpha op(A) op(B) + beta Cin (Cin: C when null, with
 * C's ldc; not read when beta == 0).
 * split2: K summed in two halves added at the end (as a split-K algorithm
 * would: other bits, no worse accuracy) */
/* element i of a matrix of type t (fp32, or a half type: tf_dtype.h's exact
 * widening and round-to-nearest-even store, as the libraries do) */
static size_t emu_type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static float emu_ld(const void *p, cudaDataType t, long i)
{
    if (t == CUDA_R_16BF) return tf_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == CUDA_R_16F) return tf_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static void emu_st(void *p, cudaDataType t, long i, float v)
{
    if (t == CUDA_R_16BF)
        ((uint16_t *)p)[i] = tf_f32_to_bf16(v);
    else if (t == CUDA_R_16F)
        ((uint16_t *)p)[i] = tf_f32_to_f16(v);
    else
        ((float *)p)[i] = v;
}
static bool emu_type_ok(cudaDataType t)
{
    return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

static void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, long lda,
                    const void *B, long ldb, float beta, void *C, long ldc, bool tf32,
                    bool relu, bool split2 = false, const void *Cin = nullptr,
                    cudaDataType abt = CUDA_R_32F, cudaDataType ct = CUDA_R_32F)
{
    if (!Cin) Cin = C;
    const int kh = split2 ? k / 2 : k;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            float acc = 0.f, acc2 = 0.f;
            for (int l = 0; l < k; ++l) {
                float a = emu_ld(A, abt, ta ? l + (long)i * lda : i + (long)l * lda);
                float b = emu_ld(B, abt, tb ? j + (long)l * ldb : l + (long)j * ldb);
                if (tf32) {
                    a = tf32_round(a);
                    b = tf32_round(b);
                }
                if (l < kh)
                    acc += a * b;
                else
                    acc2 += a * b;
            }
            acc += acc2;
            float r = alpha * acc;
            if (beta != 0.f) r += beta * emu_ld(Cin, ct, i + (long)j * ldc);
            if (relu && r < 0.f) r = 0.f;
            emu_st(C, ct, i + (long)j * ldc, r);
        }
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}
cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new emu_blas();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    h->ws = nullptr; /* like cuBLAS: back to the default pool */
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (ws) check_dev(ws, bytes, "cublasSetWorkspace");
    h->ws = ws;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetVersion(cublasHandle_t, int *v)
{
    *v = 130000;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sA, const void *B, cudaDataType bt,
                                          int ldb, long long sB, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sC, int batch,
                                          cublasComputeType_t comp, cublasGemmAlgo_t)
{
    /* cuBLAS' pairs with fp32 sums: 32F x 32F -> 32F, a half x the same half -> 32F or it */
    if (!emu_type_ok(at) || at != bt || !emu_type_ok(ct) || (ct != CUDA_R_32F && ct != at) ||
        (at != CUDA_R_32F && comp != CUBLAS_COMPUTE_32F) || (at == CUDA_R_32F && ct != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (lda < (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (h->stream && h->stream->capture && !h->ws)
        emu_die("cuBLAS call captured without a user workspace (cublasSetWorkspace)");
    const float al = *(const float *)alpha, be = *(const float *)beta;
    const bool tf32 = at == CUDA_R_32F &&
                      (comp == CUBLAS_COMPUTE_32F_FAST_TF32 || h->math == CUBLAS_TF32_TENSOR_OP_MATH);
    const char *Af = (const char *)A, *Bf = (const char *)B;
    char *Cf = (char *)C;
    const long ea = (long)emu_type_size(at), ec = (long)emu_type_size(ct);
    if (batch > 0 && m > 0 && n > 0) {
        /* every operand must lie in device memory */
        const long aext = (ta == CUBLAS_OP_N ? (long)(k - 1) * lda + m : (long)(m - 1) * lda + k);
        const long bext = (tb == CUBLAS_OP_N ? (long)(n - 1) * ldb + k : (long)(k - 1) * ldb + n);
        for (int p = 0; p < batch; ++p) {
            if (k > 0) {
                check_dev(Af + p * sA * ea, aext * ea, "cublasGemm A");
                check_dev(Bf + p * sB * ea, bext * ea, "cublasGemm B");
            }
            check_dev(Cf + p * sC * ec, ((long)(n - 1) * ldc + m) * ec, "cublasGemm C");
        }
    }
    submit(h->stream, [=]() {
        for (int p = 0; p < batch; ++p)
            gemm_cm(ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, al, Af + p * sA * ea, lda,
                    Bf + p * sB * ea, ldb, be, Cf + p * sC * ec, ldc, tf32, false, false,
                    nullptr, at, ct);
    });
    return CUBLAS_STATUS_SUCCESS;
}

/* ================= cuBLASLt ================= */
struct emu_lt {};
struct emu_lt_desc {
    cublasComputeType_t comp;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
};
struct emu_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
};
struct emu_lt_pref {
    uint64_t ws = 0;
    uint32_t align[4] = {256, 256, 256, 256};
};

const char *cublasLtGetStatusString(cublasStatus_t s) { return cublasGetStatusString(s); }
size_t cublasLtGetVersion(void) { return 130000; }
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = new emu_lt();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c,
                                        cudaDataType_t)
{
    *d = new emu_lt_desc();
    (*d)->comp = c;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t n)
{
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        if (n != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        d->ta = (cublasOperation_t) * (const int32_t *)buf;
        break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (n != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        d->tb = (cublasOperation_t) * (const int32_t *)buf;
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        d->epi = (cublasLtEpilogue_t) * (const uint32_t *)buf;
        break;
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: /* a heuristic hint: nothing to emulate */
        if (n != sizeof(int32_t) || *(const int32_t *)buf < 0) return CUBLAS_STATUS_INVALID_VALUE;
        break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    if (ld < (int64_t)(rows > 1 ? rows : 1) || !emu_type_ok(t)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new emu_lt_layout{t, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t n)
{
    if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
        if (n != sizeof(int32_t) || *(const int32_t *)buf < 1) return CUBLAS_STATUS_INVALID_VALUE;
        l->batch = *(const int32_t *)buf;
    } else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
        if (n != sizeof(int64_t)) return CUBLAS_STATUS_INVALID_VALUE;
        l->stride = *(const int64_t *)buf;
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = new emu_lt_pref();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t n)
{
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (n != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
        p->ws = *(const uint64_t *)buf;
    } else if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
               a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = *(const uint32_t *)buf;
    } else if (a == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) {
        /* the emulation never splits K: any mask allows its one algorithm */
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
/* Up to three "algorithms": 0 (no workspace), 1 (4 KiB of workspace, sums K
 * in two halves: other bits), 2 (more workspace than allowed: a real
 * heuristic never offers it, the backend must skip it). Each remembers the
 * alignments, epilogue and batch it was chosen for; cublasLtMatmul checks them.
 * HOSTEMU_LT_NONE=all: no algorithm; =relu_batch: none for RELU on a batch. */
enum { ALG_IDX = 4, ALG_WS = 5, ALG_EPI = 6, ALG_BATCH = 7 };
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t p, int req,
                                              cublasLtMatmulHeuristicResult_t *res, int *nres)
{
    if (req < 1) return CUBLAS_STATUS_INVALID_VALUE;
    *nres = 0;
    if (a->batch != dd->batch || b->batch != dd->batch || c->batch != dd->batch)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* cuBLASLt's pairs with fp32 sums, as cuBLAS' (C and D of one type here) */
    if (a->type != b->type || c->type != dd->type ||
        (dd->type != CUDA_R_32F && dd->type != a->type) ||
        (a->type == CUDA_R_32F && dd->type != CUDA_R_32F) ||
        (a->type != CUDA_R_32F && d->comp != CUBLAS_COMPUTE_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const char *none = getenv("HOSTEMU_LT_NONE");
    if (none && (!strcmp(none, "all") ||
                 (!strcmp(none, "relu_batch") && d->epi == CUBLASLT_EPILOGUE_RELU && dd->batch > 1)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const int n = req < 3 ? req : 3;
    for (int k = 0; k < n; ++k) {
        memset(&res[k], 0, sizeof res[k]);
        for (int i = 0; i < 4; ++i) res[k].algo.data[i] = p->align[i];
        res[k].algo.data[ALG_IDX] = (uint64_t)k;
        res[k].workspaceSize = k == 0 ? 0 : k == 1 ? 4096 : (size_t)p->ws + 1;
        res[k].algo.data[ALG_WS] = res[k].workspaceSize;
        res[k].algo.data[ALG_EPI] = (uint64_t)d->epi;
        res[k].algo.data[ALG_BATCH] = (uint64_t)dd->batch;
        res[k].state = CUBLAS_STATUS_SUCCESS;
    }
    *nres = n;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t ad, const void *B,
                              cublasLtMatrixLayout_t bd, const void *beta, const void *C,
                              cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes,
                              cudaStream_t s)
{
    const bool ta = d->ta == CUBLAS_OP_T, tb = d->tb == CUBLAS_OP_T;
    const uint64_t m = dd->rows, n = dd->cols;
    const uint64_t k = ta ? ad->rows : ad->cols;
    const int batch = dd->batch;
    if ((ta ? ad->cols : ad->rows) != m || (tb ? bd->cols : bd->rows) != k ||
        (tb ? bd->rows : bd->cols) != n || cd->rows != m || cd->cols != n ||
        cd->ld != dd->ld || ad->batch != batch || bd->batch != batch || cd->batch != batch ||
        cd->stride != dd->stride)
        emu_die("cublasLtMatmul: operand layouts do not describe one GEMM");
    if (algo->data[ALG_EPI] != (uint64_t)d->epi || algo->data[ALG_BATCH] != (uint64_t)batch)
        emu_die("cublasLtMatmul: algorithm chosen for another epilogue or batch");
    if (algo->data[ALG_WS] > wsbytes)
        emu_die("cublasLtMatmul: algorithm needs more workspace than given");
    if (k == 0) emu_die("cublasLtMatmul: K = 0 (the backend sends it to cuBLAS)");
    const float al = *(const float *)alpha, be = *(const float *)beta;
    const char *Af = (const char *)A, *Bf = (const char *)B, *Cf = (const char *)C;
    char *Df = (char *)D;
    const cudaDataType abt = ad->type, ct = dd->type;
    const long ea = (long)emu_type_size(abt), ec = (long)emu_type_size(ct);
    const long lda = ad->ld, ldb = bd->ld, ldc = cd->ld, ldd = dd->ld;
    /* C (read when beta != 0) and D may be different buffers, as in cuBLASLt */
    for (int p = 0; p < batch; ++p) {
        const void *ptrs[4] = {Af + p * ad->stride * ea, Bf + p * bd->stride * ea,
                               Cf + p * cd->stride * ec, Df + p * dd->stride * ec};
        for (int i = 0; i < 4; ++i)
            if ((uintptr_t)ptrs[i] % algo->data[i])
                emu_die("cublasLtMatmul: operand less aligned than the algorithm was chosen for");
        check_dev(ptrs[0], ((ad->cols - 1) * lda + ad->rows) * ea, "cublasLtMatmul A");
        check_dev(ptrs[1], ((bd->cols - 1) * ldb + bd->rows) * ea, "cublasLtMatmul B");
        if (be != 0.f) check_dev(ptrs[2], ((n - 1) * ldc + m) * ec, "cublasLtMatmul C");
        check_dev(ptrs[3], ((n - 1) * ldd + m) * ec, "cublasLtMatmul D");
    }
    if (ws) check_dev(ws, wsbytes, "cublasLtMatmul workspace");
    if (s && s->capture && !ws) emu_die("cuBLASLt call captured without a workspace");
    const bool tf32 = d->comp == CUBLAS_COMPUTE_32F_FAST_TF32;
    const bool relu = d->epi == CUBLASLT_EPILOGUE_RELU;
    const bool split2 = algo->data[ALG_IDX] == 1;
    const long sa = ad->stride, sb = bd->stride, sd = dd->stride;
    submit(s, [=]() {
        for (int p = 0; p < batch; ++p)
            gemm_cm(ta, tb, (int)m, (int)n, (int)k, al, Af + p * sa * ea, lda, Bf + p * sb * ea,
                    ldb, be, Df + p * sd * ec, ldd, tf32, relu, split2, Cf + p * sd * ec, abt,
                    ct);
    });
    return CUBLAS_STATUS_SUCCESS;
}
