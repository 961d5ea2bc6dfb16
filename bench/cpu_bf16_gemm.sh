#!/usr/bin/env bash
# The CPU's GEMM for bf16 activations: OpenBLAS fp32, bf16 widened in
# software then OpenBLAS, and oneDNN's bf16 matmul, at the model's shapes
# (bench/cpu_bf16_gemm.c). Needs libdnnl-dev (Debian 12: oneDNN 2.6).
#   bench/cpu_bf16_gemm.sh [reps]       (OMP_NUM_THREADS defaults to 2)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f /usr/include/oneapi/dnnl/dnnl.h ]; then
  echo "bench/cpu_bf16_gemm.sh: oneDNN is not installed (apt-get install libdnnl-dev)" >&2
  exit 2
fi
mkdir -p out
cc -O2 -std=c11 -Wall -Wextra -fopenmp bench/cpu_bf16_gemm.c -o out/cpu_bf16_gemm \
   -lopenblas -ldnnl -lm
grep -o -w -m1 avx512_bf16 /proc/cpuinfo >/dev/null && echo "CPU: avx512_bf16" || echo "CPU: no avx512_bf16"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} out/cpu_bf16_gemm "${1:-21}"
