#!/usr/bin/env bash
# Builds and runs the CUDA kernel micro-benchmark (bench/cuda_kernels.cu) on a
# machine with an NVIDIA GPU: kernel1 (level 1) vs kernel2 (level 3) per op.
#   bench/cuda_kernels.sh [attn] [permute] [ln] [ew] [gemm]     (default: all)
# Also prints the registers / spills of the level-3 kernels (ptxas -v).
# Attention with L > 32 gets rows for kernel1 (L1), kernel2 and kernel3 (L3),
# and with L <= 128 one for kernel4 (L3, one block per (b, o, h)).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
"$nvcc" -O3 -arch=sm_90 -std=c++17 -Xptxas -v -Iinclude -Isrc -o "$out/cuda_kernels" \
    bench/cuda_kernels.cu src/backend/cuda/cuda_*.cu -lcublas -lcublasLt \
    > "$out/cuda_kernels_ptxas.log" 2>&1 || { cat "$out/cuda_kernels_ptxas.log"; exit 1; }
echo "# ptxas: kernel2/kernel3/kernel4 registers and spills"
awk '/Compiling entry function/ { k = $7; gsub(/[\x27]/, "", k) }
     /spill stores/ { sp = $5 " B spill stores" }
     /Used [0-9]+ registers/ && k ~ /kernel[234]/ { print "#   " k ": " $5 " registers, " sp; k = "" }' \
    "$out/cuda_kernels_ptxas.log" | sort -u
"$out/cuda_kernels" "$@" | tee "$out/cuda_kernels.txt"
