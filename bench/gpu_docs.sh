#!/usr/bin/env bash
# The profiling loop of docs/profiling.md on the GPU machine, small problem:
# baseline, phase regions, selected regions, kernel summaries, counters,
# v1 -> v2 -> v3 -> graph, and the side-by-side comparison. Writes logs and
# profile directories under $GPU_OUT/docs (default out/gpu/docs).
# Usage: bench/gpu_docs.sh [build-dir]
set -u
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
TF=$B/tinyfold
D=${GPU_OUT:-out/gpu}/docs
mkdir -p "$D"
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
run() { local name=$1; shift; echo "\$ tinyfold $*" > "$D/$name.txt"; timeout "${RUN_TIMEOUT:-300}" "$TF" "$@" >> "$D/$name.txt" 2>&1; echo "$name: exit $? (124: timed out)"; }
run train_v1 train --backend cuda --impl v1 --num-steps 30
run prof_v1 profile --backend cuda --impl v1 --num-steps 10 --out "$D/prof_v1"
run prof_v1_sel profile --backend cuda --impl v1 --num-steps 3 --selected-regions forward_pass,backward_pass --out "$D/prof_v1_sel"
run prof_v2 profile --backend cuda --impl v2 --num-steps 10 --out "$D/prof_v2"
run prof_v3 profile --backend cuda --impl v3 --num-steps 10 --out "$D/prof_v3"
run prof_v3g profile --backend cuda --impl v3 --graph --num-steps 10 --out "$D/prof_v3g"
run mem_v1 train --backend cuda --impl v1 --num-steps 10 --enable-memory-profiling --quiet
run mem_v2 train --backend cuda --impl v2 --num-steps 10 --enable-memory-profiling --quiet
run mem_v2_off train --backend cuda --impl v2 --disable-all-fusion --num-steps 10 --enable-memory-profiling --quiet
run compare compare "$D/prof_v1/summary.json" "$D/prof_v2/summary.json" "$D/prof_v3/summary.json" "$D/prof_v3g/summary.json"
run compare_md compare "$D/prof_v1/summary.json" "$D/prof_v3g/summary.json" --format markdown
ls -la "$D"/*/trace.json | awk '{print $5, $9}'
