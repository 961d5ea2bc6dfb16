#!/usr/bin/env bash
# Builds tests/unit/test_cuda_ops_* against the CUDA backend compiled for the
# host emulation (hostemu/emu.h) and runs it: the CUDA kernels, the backend's
# cuBLAS/cuBLASLt argument mapping and graph capture, checked on a machine
# without a GPU. Not part of the CMake build (it needs g++ and the CPU backend).
#
#   src/backend/cuda/hostemu/run_tests.sh [--asan] [build dir]
#   TF_TEST_FILTER='*attention*' src/backend/cuda/hostemu/run_tests.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../../../.." && pwd)
san=""
if [ "${1:-}" = "--asan" ]; then
    san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    shift
fi
out=${1:-/tmp/tinyfold-hostemu}
mkdir -p "$out"
cd "$top"
flags="-O1 -g $san -Wall -Wextra -Werror -Iinclude -Isrc"
pids=()
for f in src/backend/cuda/*.cu src/backend/cuda/hostemu/emu.cpp; do
    g++ -x c++ -std=c++17 $flags -Wno-unknown-pragmas -DTF_CUDA_HOSTEMU -c "$f" \
        -o "$out/$(basename "$f").o" & pids+=($!)
done
for f in src/backend/cpu/*.c src/backend/gpu_plan.c tests/unit/testutil.c tests/unit/cuda_testutil.c; do
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L $flags -fopenmp -Itests/unit -c "$f" \
        -o "$out/$(basename "$f").o" & pids+=($!)
done
mkdir -p "$out/tests"
for f in tests/unit/test_cuda_ops_*.c; do # one binary per op family
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L $flags -fopenmp -Itests/unit -c "$f" \
        -o "$out/tests/$(basename "$f" .c).o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
rc=0
for t in "$out"/tests/test_cuda_ops_*.o; do
    g++ $san -fopenmp -o "${t%.o}_hostemu" "$t" "$out"/*.o -lopenblas -lcmocka -lm
    # ASan cannot follow every swapcontext stack switch; it warns once about it
    TF_TEST_HOSTEMU=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "${t%.o}_hostemu" || rc=1
done
exit $rc
