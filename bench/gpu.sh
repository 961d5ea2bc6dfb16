#!/usr/bin/env bash
# The GPU benchmark and check, in one run on an NVIDIA machine (H200 here):
#   1. builds tinyfold with CUDA (sm_90),
#   2. checks every CUDA op against the CPU backend (test_cuda_ops_*), the
#      profiler's GPU path (test_cuda_prof: counters on a known kernel, launches
#      vs graph kernel nodes) and the whole model, every level, eager and
#      graph, fp32 and tf32 (test_cuda_model),
#   3. runs compute-sanitizer memcheck on a short run of each level,
#   4. times level x {eager, graph} x {fp32, tf32} x {small, large} and counts
#      kernel launches per step with the built-in CUPTI profiler,
#   5. prints one table (and writes every run's JSON under $OUT),
#   6. (stage "overhead", not in the default set) what profiling costs: the
#      same eager run built with the hooks compiled out (TF_PROF_HOOKS=OFF),
#      with them in and profiling off, and under `tinyfold profile` (kernel
#      tracing), alternated 3 times, medians of the per-step times.
# Usage: bench/gpu.sh [steps]   (STAGES="build check sanitize bench overhead" to pick,
#        LEVELS="v3" to time fewer levels)
# cJSON and cmocka are taken from .deps/ (Debian packages unpacked) when the
# machine has none: see bench/README.md. RUN_TIMEOUT / TEST_TIMEOUT (seconds,
# default 300 / 900) bound each run and each test.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
# Every run and test is killed after this many seconds (exit 124, reported as
# "timed out"), so a hang costs one run, not the machine's whole time.
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
OUT=${GPU_OUT:-$PWD/out/gpu}
BUILD=${BUILD:-build-gpu}
STAGES=${STAGES:-"build check sanitize bench"}
LEVELS=${LEVELS:-"v1 v2 v3"} # bench stage: the levels timed
mkdir -p "$OUT"
has() { [[ " $STAGES " == *" $1 "* ]]; }
to() { timeout "$RUN_TIMEOUT" "$@"; }
why() { if [ "$1" -eq 124 ]; then echo "timed out after $RUN_TIMEOUT s"; else echo "exit $1"; fi; }

if ! pkg-config --exists libcjson 2>/dev/null && [ -d .deps/root ]; then
  D=$PWD/.deps/root/usr
  for pc in "$D"/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    sed -i "s|^prefix=.*|prefix=$D|; s|^libdir=/usr|libdir=$D|; s|^includedir=/usr|includedir=$D|; s|-L/usr/lib|-L$D/lib|; s|-I/usr/include|-I$D/include|" "$pc"
  done
  export PKG_CONFIG_PATH=$D/lib/x86_64-linux-gnu/pkgconfig
  export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}

if has build; then
  nvidia-smi -L
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DTF_CUDA=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
  echo "build: ok"
fi
TF=$BUILD/tinyfold

if has check; then
  for t in "$BUILD"/test_cuda_ops_*; do
    n=$(basename "$t")
    timeout "$TEST_TIMEOUT" "$t" > "$OUT/$n.log" 2>&1; rc=$?
    echo "$n: exit $rc, $(grep -c PASS "$OUT/$n.log") PASS lines, $(grep -c FAIL "$OUT/$n.log") FAIL lines"
    grep FAIL "$OUT/$n.log" | head -20
  done
  timeout "$TEST_TIMEOUT" "$BUILD/test_cuda_prof" > "$OUT/test_cuda_prof.log" 2>&1; rc=$?
  echo "test_cuda_prof: exit $rc"
  grep -E "add_kernel1|launches per step|PASSED|FAILED|ERROR|error" "$OUT/test_cuda_prof.log" | head -20
  timeout "$TEST_TIMEOUT" "$BUILD/test_cuda_model" > "$OUT/test_cuda_model.log" 2>&1; rc=$?
  echo "test_cuda_model: exit $rc"
  grep -E "B[0-9]|FAIL|PASSED|ERROR" "$OUT/test_cuda_model.log" | head -60
fi

if has sanitize; then
  for v in v1 v2 v3; do
    for g in "" "--graph"; do
      timeout "$TEST_TIMEOUT" compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
        "$TF" train --backend cuda --impl $v $g --batch-size 1 --seq-len 12 --num-seqs 3 \
        --num-blocks 1 --num-steps 2 --warmup-steps 1 --quiet > "$OUT/memcheck_$v$g.log" 2>&1
      echo "memcheck $v $g: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$v$g.log" | tail -1))"
    done
  done
fi

if has bench; then
  for prob in small large; do
    if [ $prob = small ]; then N=64; S=16; else N=128; S=32; fi
    for v in $LEVELS; do
      for g in eager graph; do
        for p in fp32 tf32; do
          gf=""; [ $g = graph ] && gf="--graph"
          to "$TF" train --backend cuda --impl $v $gf --precision $p --batch-size 4 --seq-len $N \
            --num-seqs $S --num-blocks 4 --num-steps "$STEPS" --quiet \
            --json "$OUT/run_${prob}_${v}_${g}_${p}.json" > "$OUT/run_${prob}_${v}_${g}_${p}.log" 2>&1 \
            || { echo "run $prob $v $g $p failed ($(why $?)):"; tail -3 "$OUT/run_${prob}_${v}_${g}_${p}.log"; }
        done
      done
      to "$TF" profile --backend cuda --impl $v --batch-size 4 --seq-len $N --num-seqs $S \
        --num-steps 3 --out "$OUT/prof_${prob}_$v" > "$OUT/prof_${prob}_$v.log" 2>&1 \
        || { echo "profile $prob $v failed ($(why $?)):"; tail -3 "$OUT/prof_${prob}_$v.log"; }
      to "$TF" profile --backend cuda --impl $v --graph --batch-size 4 --seq-len $N --num-seqs $S \
        --num-steps 3 --out "$OUT/profg_${prob}_$v" > "$OUT/profg_${prob}_$v.log" 2>&1 \
        || { echo "profile graph $prob $v failed ($(why $?)):"; tail -3 "$OUT/profg_${prob}_$v.log"; }
    done
  done
  python3 bench/gpu_table.py "$OUT"
fi

if has overhead; then
  NB=${BUILD}-nohooks
  cmake -S . -B "$NB" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DTF_CUDA=ON \
        -DTF_PROF_HOOKS=OFF -DTF_TESTS=OFF > "$OUT/cmake_nohooks.log" 2>&1 &&
    cmake --build "$NB" -j "$(nproc)" --target tinyfold tinyfold_gpu > "$OUT/build_nohooks.log" 2>&1 ||
    { echo "overhead: no-hooks build failed"; tail -5 "$OUT/build_nohooks.log"; }
  A="--backend cuda --impl v3 --batch-size 4 --seq-len 64 --num-seqs 16 --num-steps $STEPS --quiet"
  for rep in 1 2 3; do
    to "$NB/tinyfold" train $A --json "$OUT/ovh_nohooks_$rep.json" > /dev/null 2>&1
    to "$TF" train $A --json "$OUT/ovh_off_$rep.json" > /dev/null 2>&1
    to "$TF" profile $A --json "$OUT/ovh_trace_$rep.json" --out "$OUT/ovh_prof_$rep" > /dev/null 2>&1
  done
  python3 - "$OUT" <<'PY'
import json, sys, statistics as st, glob
O = sys.argv[1]
med = {}
for mode in ("nohooks", "off", "trace"):
    xs = []
    for f in sorted(glob.glob(f"{O}/ovh_{mode}_*.json")):
        xs += [s["step_ms"] for s in json.load(open(f))["steps"] if not s["warmup"] and not s.get("counter_replay")]
    med[mode] = st.median(xs) if xs else float("nan")
print(f"overhead (small v3 eager, median step over 3 alternated runs): hooks compiled out {med['nohooks']:.3f} ms, "
      f"profiling off {med['off']:.3f} ms ({100*(med['off']/med['nohooks']-1):+.2f}%), "
      f"kernel tracing {med['trace']:.3f} ms ({100*(med['trace']/med['off']-1):+.2f}% vs off)")
PY
fi
