/* The one option table: parse.c builds getopt_long's table from it and help.c
 * prints it, so every knob that parses is documented with its default and
 * accepted range. Ranges come from limits.h (quoted here as text: keep them
 * in step; test_bad_input.sh checks the bounds). */
#include "cli.h"
#include "backend/registry.h"

#include <getopt.h>
#include <stddef.h>

enum {
    T = TF_CMD_TRAIN | TF_CMD_PROFILE,
    V = TF_CMD_VALIDATE,
    B = TF_CMD_BENCH,
    G = TF_CMD_GRAD,
    P = TF_CMD_PROFILE
};

const tf_cli_optdef tf_cli_optdefs[] = {
    /* problem and model */
    {"batch-size", required_argument, TF_OPT_BATCH, T | G | B, "N",
     "samples per step (default 4; 1..256; grad: all samples of --data)"},
    {"seq-len", required_argument, TF_OPT_SEQ_LEN, T, "N", "residues N (default 64; 1..4096)"},
    {"num-seqs", required_argument, TF_OPT_N_SEQS, T | B, "N", "MSA depth S (default 16; 1..4096)"},
    {"num-blocks", required_argument, TF_OPT_BLOCKS, T | B, "N", "Evoformer blocks (default 4; 1..64)"},
    {"msa-dim", required_argument, TF_OPT_MSA_DIM, T, "N",
     "MSA channels c_m (default 64; 4..4096, a multiple of the 4 MSA heads)"},
    {"pair-dim", required_argument, TF_OPT_PAIR_DIM, T, "N",
     "pair channels c_z (default 128; 4..4096, a multiple of the 4 pair heads)"},
    /* training */
    {"num-steps", required_argument, TF_OPT_STEPS, T, "N",
     "timed steps (default 30; profile: 10; 1..1000000)"},
    {"warmup-steps", required_argument, TF_OPT_WARMUP, T, "N",
     "untimed warm-up steps before them (default 5; 0..100000; none after --resume)"},
    {"learning-rate", required_argument, TF_OPT_LR, T, "X",
     "AdamW learning rate (default 3e-4; (0, 1])"},
    {"seed", required_argument, TF_OPT_SEED, T, "N",
     "seed of the weights and the synthetic data (default 42; 0..2^64-1)"},
    /* implementation */
    {"impl", required_argument, TF_OPT_IMPL, T | V | G | B, "v1|v2|v3",
     "v1 baseline (one op at a time, attention scores stored), v2 fused\n"
     "(QKV and triangle projections, flash attention), v3 v2 + custom kernels\n"
     "(default v3)"},
    {"enable-all-fusion", no_argument, TF_OPT_ALL_FUSION_ON, T | V | G, NULL,
     "turn the four fusions below on"},
    {"disable-all-fusion", no_argument, TF_OPT_ALL_FUSION_OFF, T | V | G, NULL,
     "turn the four fusions below off"},
    {"enable-qkv-fusion-msa", no_argument, TF_OPT_QKV_MSA_ON, T | V | G, NULL,
     "Q,K,V of MSA attention in one GEMM (fusion switches apply after --impl, in order)"},
    {"disable-qkv-fusion-msa", no_argument, TF_OPT_QKV_MSA_OFF, T | V | G, NULL, NULL},
    {"enable-qkv-fusion-triangle", no_argument, TF_OPT_QKV_TRI_ON, T | V | G, NULL,
     "Q,K,V of triangle attention in one GEMM"},
    {"disable-qkv-fusion-triangle", no_argument, TF_OPT_QKV_TRI_OFF, T | V | G, NULL, NULL},
    {"enable-flash-attention", no_argument, TF_OPT_FLASH_ON, T | V | G, NULL,
     "streaming attention that never stores the N x N scores"},
    {"disable-flash-attention", no_argument, TF_OPT_FLASH_OFF, T | V | G, NULL, NULL},
    {"enable-triangle-fusion", no_argument, TF_OPT_TRI_ON, T | V | G, NULL,
     "triangle mult: projections in one GEMM, gates in one"},
    {"disable-triangle-fusion", no_argument, TF_OPT_TRI_OFF, T | V | G, NULL, NULL},
    /* where it runs */
    /* the words: the backend table's (tf_cli_metavar) */
    {"backend", required_argument, TF_OPT_BACKEND, T | V | B | G, NULL,
     "default auto: the GPU when built with CUDA (or HIP, for AMD GPUs) and a\n"
     "device exists, else the CPU (the choice is printed)"},
    {"device", required_argument, TF_OPT_DEVICE, T | V | B | G, "N",
     "CUDA device ordinal (default 0; 0..255)"},
    {"threads", required_argument, TF_OPT_THREADS, T | V | B | G, "N",
     "CPU threads (default 0 = all cores, or OMP_NUM_THREADS when set; 0..1024)"},
    {"omp-wait", required_argument, TF_OPT_OMP_WAIT, T | V | B | G, "active|passive|auto",
     "how an idle CPU thread waits for work: auto (default) sleeps at once when\n"
     "other tasks hold the processors at start, else spins briefly first, and\n"
     "keeps OMP_WAIT_POLICY or GOMP_SPINCOUNT when set; active spins (cores of\n"
     "its own); passive sleeps at once (a machine other jobs keep busy)"},
    {"precision", required_argument, TF_OPT_PRECISION, T | V | B | G, "fp32|tf32|bf16|fp16",
     "what tensors are stored in and how GEMMs compute (default fp32): fp32\n"
     "everywhere; tf32: fp32 tensors, CUDA GEMMs on TF32 tensor cores (GPU\n"
     "only); bf16, fp16: mixed precision, activations stored in the half\n"
     "type, parameters, gradients and AdamW moments fp32 (master weights; a half\n"
     "copy of the weights feeds the GEMMs), residual streams, statistics and the\n"
     "loss fp32, every op computing and accumulating in fp32. fp16 also scales\n"
     "the loss dynamically (PyTorch GradScaler's defaults: 65536, halved and the\n"
     "step skipped on an inf/NaN gradient, doubled after 2000 clean steps)"},
    {"use-amp", no_argument, TF_OPT_USE_AMP, T | V | B | G, NULL,
     "the reference's automatic mixed precision: the same as --precision fp16\n"
     "(fp16 autocast, dynamic loss scaling); not accepted with another --precision"},
    {"graph", no_argument, TF_OPT_GRAPH, T | B, NULL,
     "CUDA: capture the whole step as a CUDA graph (at the last warm-up step) and replay it"},
    {"gpu-plan", required_argument, TF_OPT_GPU_PLAN, T | V | B | G, "SPEC",
     "CUDA: what runs each GEMM and attention (default: the device's default plan).\n"
     "SPEC is default, portable (no wgmma, mma.sync or cp.async: library GEMMs and\n"
     "plain kernels), or key=value pairs over them, comma-separated:\n"
     "gemm=auto|cublas|mma|wgmma, dw=auto|mma|lt|half (weight gradients' wide split),\n"
     "attn=auto|k1|k2|k3|k4|k5|k6, lane=auto|on|off (weight-gradient lane),\n"
     "opm=auto|ffma (bf16/fp16 outer product mean on mma.sync or FFMA),\n"
     "mlp=auto|composed|fused (bf16/fp16 transition as LN + GEMM ops, auto, or one\n"
     "fused kernel each way),\n"
     "wgrad_delay_us=0..100000 (tests); e.g. gemm=cublas,attn=k4"},
    /* memory */
    {"recompute", required_argument, TF_OPT_RECOMPUTE, T | B | G, "none|blocks|modules",
     "what the forward keeps for the backward: every activation (default none),\n"
     "each Evoformer block's inputs (blocks: the block's forward runs again in\n"
     "its backward), or each module's input (modules: each module's forward runs\n"
     "again in its backward; the same extra forward, less memory). Gradients are\n"
     "bit for bit those of none"},
    {"chunk-size", required_argument, TF_OPT_CHUNK_SIZE, T | B | G, "K",
     "the pair modules (triangle multiplication and attention, pair transition,\n"
     "the outer product mean's product where it is formed whole)\n"
     "K rows of the pair at a time (1..--seq-len; default: all): their\n"
     "activations are one chunk's, run again in the backward. Loss and gradients\n"
     "within fp32 rounding of unchunked"},
    {"memory-budget", required_argument, TF_OPT_MEM_BUDGET, TF_CMD_TRAIN | P, "SIZE",
     "choose the cheapest --recompute (and --chunk-size, unless given) whose\n"
     "planned memory fits in SIZE\n"
     "(bytes, or with K, M, G, T: powers of 1000; KiB, MiB, GiB, TiB: of 1024)"},
    /* files */
    {"data", required_argument, TF_OPT_DATA, T | G, "FILE",
     "train on a data file instead of the synthetic data (its N and S apply)"},
    {"load", required_argument, TF_OPT_LOAD, T | G, "FILE",
     "start from the weights of a checkpoint or a PyTorch state_dict (also under\n"
     "module. or with the v2 script's fused projections); a fresh optimizer"},
    {"save", required_argument, TF_OPT_SAVE, T, "FILE",
     "write a checkpoint at the end (atomically): FILE holds the model's tensors\n"
     "only (PyTorch strict-loadable), the optimizer state goes beside it\n"
     "(ck.safetensors -> ck.optim.safetensors; ck -> ck.optim.safetensors)"},
    {"save-every", required_argument, TF_OPT_SAVE_EVERY, T, "K",
     "also write --save every K global steps (1..1000000)"},
    {"resume", required_argument, TF_OPT_RESUME, T, "FILE",
     "continue a checkpoint: its model, problem, optimizer state (the optimizer\n"
     "file --save wrote beside it) and step; no warm-up"},
    {"json", required_argument, TF_OPT_JSON, T | B, "FILE",
     "write the run (every step) as JSON; '-': to stdout, the rest of the output\n"
     "then going to stderr"},
    /* output */
    {"enable-memory-profiling", no_argument, TF_OPT_MEMPROF, T, NULL,
     "print the memory breakdown (parameters, gradients, moments, activations, host)"},
    {"log-every", required_argument, TF_OPT_LOG_EVERY, T, "K",
     "a step line every K timed steps (default 10; 1..1000000)"},
    {"no-progress", no_argument, TF_OPT_NO_PROGRESS, T | B, NULL,
     "no live progress line (it is shown only when stderr is a terminal)"},
    {"quiet", no_argument, TF_OPT_QUIET, T | V | B | G, NULL,
     "print only the summary (errors still go to stderr)"},
    {"dist-timeout", required_argument, TF_OPT_DIST_TIMEOUT, T, "S",
     "mpirun: a rank waiting S seconds for the others in a collective ends\n"
     "the job (default 300; 1..86400)"},
    {"dist-bucket-kb", required_argument, TF_OPT_DIST_BUCKET, T, "K",
     "data parallel: all-reduce the gradients in buckets of K KiB, each\n"
     "issued once final, overlapping the rest of the backward (default\n"
     "2048; 0: one all-reduce after the backward; 0..1048576)"},
    {"dist-check-every", required_argument, TF_OPT_DIST_CHECK, T, "K",
     "mpirun: compare a checksum of the weights across ranks every K\n"
     "steps (a debugging aid; default off; 1..1000000)"},
    {"validate-setup", no_argument, TF_OPT_VALIDATE_SETUP, TF_CMD_TRAIN, NULL,
     "same as `tinyfold validate`"},
    /* profile */
    {"out", required_argument, TF_OPT_OUT, P | G, "DIR|FILE",
     "profile: the output directory (required); grad: the gradient file (required)"},
    {"selected-regions", required_argument, TF_OPT_REGIONS, P, "LIST",
     "collect only inside these regions, e.g. forward_pass,backward_pass"},
    {"profile-regions", required_argument, TF_OPT_PROFILE_REGIONS, T, "LIST",
     "an external profiler collects only inside these regions, e.g. "
     "forward_pass,backward_pass (NVIDIA: cudaProfilerStart/Stop, for ncu "
     "--profile-from-start off or nsys --capture-range=cudaProfilerApi; AMD: "
     "roctxProfilerResume/Pause, for rocprofv3 --selected-regions)"},
    {"include-warmup", no_argument, TF_OPT_INCLUDE_WARMUP, P, NULL,
     "also collect the warm-up steps"},
    {"trace-steps", required_argument, TF_OPT_TRACE_STEPS, P, "K",
     "steps kept in trace.json (default 5; 1..1000)"},
    {"counters", required_argument, TF_OPT_COUNTERS, P, "PATTERN",
     "hardware counters for kernels whose name contains PATTERN (CUDA: CUPTI kernel "
     "replay of up to 64 matching ops in one extra step, left out of the timings)"},
    {"top", required_argument, TF_OPT_TOP, P, "K",
     "kernels in the printed table (default 15; 1..10000)"},
    {"gpu-timer", required_argument, TF_OPT_GPU_TIMER, P, "cupti|events",
     "what times a GPU run's ops: cupti, CUPTI's record of every kernel (CUDA's\n"
     "default), or events, a pair of GPU events around each op (a row per op;\n"
     "the only timer on hip; on CUDA where CUPTI is unavailable)"},
    /* bench */
    {"problems", required_argument, TF_OPT_PROBLEMS, B, "LIST",
     "of tiny (B2 N32 S8, 2 blocks), small (B4 N64 S16), large (B4 N128 S32)\n"
     "(default tiny,small on the CPU, tiny,small,large on CUDA)"},
    {"impls", required_argument, TF_OPT_IMPLS, B, "LIST", "levels to run (default v1,v2,v3)"},
    {"steps", required_argument, TF_OPT_BENCH_STEPS, B, "K",
     "timed steps per run after 2 warm-up steps (default 5; 1..1000)"},
    {"scaling", required_argument, TF_OPT_SCALING, B, "LIST",
     "instead of --problems: one run per N in LIST (e.g. 64,128,256,512; 1..4096),\n"
     "--batch-size, --num-seqs and --num-blocks as given: planned peak memory,\n"
     "median step time, FLOPs, GFLOP/s, and the fitted exponents of memory and time in N"},
    {"help", no_argument, TF_OPT_HELP, T | V | B | G, NULL, "this help"},
};

const int tf_cli_n_optdefs = (int)(sizeof tf_cli_optdefs / sizeof tf_cli_optdefs[0]);

const tf_cli_optdef *tf_cli_optdef_by_id(int id)
{
    for (int i = 0; i < tf_cli_n_optdefs; i++)
        if (tf_cli_optdefs[i].id == id)
            return &tf_cli_optdefs[i];
    return NULL;
}

const char *tf_cli_metavar(const tf_cli_optdef *d)
{
    static char backends[64];
    if (d->id != TF_OPT_BACKEND)
        return d->metavar;
    if (!backends[0])
        tf_backend_words(backends, sizeof backends, "|");
    return backends;
}

const char *tf_cli_cmd_name(int cmd)
{
    switch (cmd) {
    case TF_CMD_TRAIN: return "train";
    case TF_CMD_PROFILE: return "profile";
    case TF_CMD_VALIDATE: return "validate";
    case TF_CMD_BENCH: return "bench";
    case TF_CMD_GRAD: return "grad";
    default: return "?";
    }
}
