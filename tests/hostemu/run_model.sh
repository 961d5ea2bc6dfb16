#!/usr/bin/env bash
# Builds hostemu/model_check (the whole model, trainer included, against the
# CUDA backend compiled for the host emulation) and runs it at shapes that
# reach every attention tile class of kernel2 (level 3) and the level-3
# LayerNorm and permute kernels: one step's loss and gradients vs the CPU.
#   tests/hostemu/run_model.sh [build dir]     (about 10 minutes)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tinyfold-hostemu-model}
mkdir -p "$out"
rm -f "$out"/*.o # every object there is linked: none of a file since moved
cd "$top"
flags="-O1 -g -Wall -Wextra -Werror -Iinclude -Isrc -Itests/hostemu"
pids=()
for f in src/backend/cuda/*.cu tests/hostemu/emu.cpp; do
    g++ -x c++ -std=c++17 $flags -Wno-unknown-pragmas -DTF_CUDA_HOSTEMU -c "$f" \
        -o "$out/$(basename "$f").o" & pids+=($!)
done
# the profiler's GPU side is not emulated: its CPU-only stub (no TF_HAVE_CUDA)
for f in src/model/*.c src/train/*.c src/config/*.c src/backend/cpu/*.c src/prof/*.c src/io/*.c src/fileio/*.c \
         src/backend/backend.c src/backend/registry.c src/backend/gpu_plan.c \
         src/dist/dist_env.c src/dist/reduce.c \
         src/dist/bucket.c src/dist/trace_merge.c src/dist/dist_single.c \
         tests/unit/testutil.c tests/hostemu/model_check.c; do
    def=-DTF_HAVE_CUDA=1
    case $f in src/prof/*) def= ;; esac
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L $flags $def -fopenmp -Itests/unit \
        $(pkg-config --cflags libcjson) -c "$f" -o "$out/$(basename "$f").o" & pids+=($!)
    while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -fopenmp -o "$out/model_check" "$out"/*.o -lopenblas -lcjson -lm -ldl
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
rc=0
# N S outer_dim: L 20/5 (t32, t16), 64/16 (t64 one key tile, t16; OPM rows
# kernel), 70/33 (t64 two key tiles with the dQ pass; MSA column at t64)
# The check is for the attention, LayerNorm, permute and elementwise kernels,
# so the GEMMs run on (emulated) cuBLAS: the plan gemm=cublas. With the default
# routing the emulator's 4 SMs send more GEMMs to the 3xTF32 mma.sync kernel
# than an H200 does, and 3xTF32's rounding (every one of those calls within
# 5.6e-7 of sum |a b|, no write outside C: checked per call) is amplified by
# the cancelling LayerNorm weight sums past 1e-4 (pair_norm_trans.weight
# 1.1e-3 at N64): printed below for information, not failed (NOTES.md).
for shape in "20 5 8" "64 16 32" "70 33 32"; do
    "$out/model_check" $shape 3 gemm=cublas || rc=1
done
# bf16 on both backends: the CUDA one runs the half types' own kernels (the
# fused transition on the emulated wgmma; at outer_dim 32 with every
# fused kernel named: the outer product mean's, the triangle multiplication's,
# kernel6; then with --chunk-size 8 on the CUDA side, the chunked modules on
# the same kernels); test_mixed's bounds
fused=gemm=cublas,attn=k6,mlp=fused,opm=fused,trimul=fused
"$out/model_check" 20 5 8 3 gemm=cublas bf16 || rc=1
"$out/model_check" 20 5 32 3 $fused bf16 || rc=1
"$out/model_check" 20 5 32 3 $fused bf16 8 || rc=1
echo "default GEMM routing (3xTF32 mma.sync where it runs; information only):"
"$out/model_check" 64 16 32 3 || true
exit $rc
