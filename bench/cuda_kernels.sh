#!/usr/bin/env bash
# Builds and runs the CUDA kernel micro-benchmark (bench/cuda_kernels.cu) on a
# machine with an NVIDIA GPU: kernel1 (level 1) vs kernel2 (level 3) per op.
#   bench/cuda_kernels.sh [attn] [permute] [ln] [ew] [gemm]     (default: all)
#   bench/cuda_kernels.sh --build-only                           (just build it)
#   TF_BENCH_GEMM="large outer_to_pair" ...: only the GEMM shapes naming it
# Also prints the registers / spills of the level-3 kernels (ptxas -v).
# Built for sm_90a (the H200's arch-specific code: the wgmma GEMM needs it).
# Attention with L > 32 gets rows for kernel1 (L1), kernel2 and kernel3 (L3),
# and with L <= 128 one for kernel4 (L3, one block per (b, o, h)).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
# one object per source, in parallel (one nvcc for all took minutes), then link
obj="$out/cuda_kernels_obj"
mkdir -p "$obj"
: > "$out/cuda_kernels_ptxas.log"
pids=()
for f in bench/cuda_kernels.cu src/backend/cuda/cuda_*.cu src/backend/gpu_plan.c; do
  "$nvcc" -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Xptxas -v -Iinclude -Isrc \
      -c "$f" -o "$obj/$(basename "$f").o" > "$obj/$(basename "$f").log" 2>&1 & pids+=($!)
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
cat "$obj"/*.log >> "$out/cuda_kernels_ptxas.log"
[ $ok = 1 ] && "$nvcc" -gencode arch=compute_90a,code=sm_90a -o "$out/cuda_kernels" "$obj"/*.o \
    -lcublas -lcublasLt >> "$out/cuda_kernels_ptxas.log" 2>&1 \
    || { grep -E "error" "$out/cuda_kernels_ptxas.log" | head -30; exit 1; }
echo "# ptxas: kernel2/kernel3/kernel4 registers and spills"
awk '/Compiling entry function/ { k = $7; gsub(/[\x27]/, "", k) }
     /spill stores/ { sp = $5 " B spill stores" }
     /Used [0-9]+ registers/ && k ~ /kernel[234]/ { print "#   " k ": " $5 " registers, " sp; k = "" }' \
    "$out/cuda_kernels_ptxas.log" | sort -u
[ "${1:-}" = "--build-only" ] && exit 0 # (then run $out/cuda_kernels [groups] yourself)
"$out/cuda_kernels" "$@" | tee "$out/cuda_kernels.txt"
