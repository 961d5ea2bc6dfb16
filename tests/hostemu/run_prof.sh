#!/usr/bin/env bash
# Builds hostemu/prof_check (the model and trainer on the CUDA backend
# compiled for the host emulation, with the profiler's GPU event timer,
# src/prof/gpu/gpu_events.cu, on the emulated events) and runs it: a short
# profiled run with the weight-gradient lane, checked for what the event
# timer must give (prof_check.c says what). No GPU needed; a few minutes.
#   tests/hostemu/run_prof.sh [build dir]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tinyfold-hostemu-prof}
mkdir -p "$out"
rm -f "$out"/*.o # every object there is linked: none of a file since moved
cd "$top"
flags="-O1 -g -Wall -Wextra -Werror -Iinclude -Isrc -Itests/hostemu"
pids=()
for f in src/backend/cuda/*.cu src/prof/gpu/*.cu tests/hostemu/emu.cpp; do
    g++ -x c++ -std=c++17 $flags -Wno-unknown-pragmas -DTF_CUDA_HOSTEMU -c "$f" \
        -o "$out/$(basename "$f").o" & pids+=($!)
    while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done
# CUPTI is not emulated: the profiler's CPU-only stub for it (no TF_HAVE_CUDA),
# the event clock compiled in (TF_HAVE_GPU_EVENTS)
for f in src/model/*.c src/train/*.c src/config/*.c src/backend/cpu/*.c src/backend/gpu_plan.c src/backend/backend.c \
         src/backend/registry.c \
         src/prof/*.c src/io/*.c src/fileio/*.c src/dist/dist_env.c src/dist/reduce.c src/dist/bucket.c \
         src/dist/trace_merge.c src/dist/dist_single.c src/report/prof_table.c tests/hostemu/prof_check.c; do
    def=-DTF_HAVE_CUDA=1
    case $f in src/prof/*) def=-DTF_HAVE_GPU_EVENTS=1 ;; esac
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L $flags $def -fopenmp -Itests/unit \
        $(pkg-config --cflags libcjson) -c "$f" -o "$out/$(basename "$f").o" & pids+=($!)
    while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -fopenmp -o "$out/prof_check" "$out"/*.o -lopenblas -lcjson -lm -ldl
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$out/profile"
"$out/prof_check" "$out/profile"
