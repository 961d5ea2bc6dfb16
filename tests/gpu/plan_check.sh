#!/usr/bin/env bash
# The GPU plan on the GPU machine (CI has no GPU), in stages:
#   build  bench/gpu.sh's build (cJSON / cmocka from .deps/ when missing)
#   tests  test_gpu_plan, then test_cuda_ops_* and test_cuda_model on the default
#          plan and on --gpu-plan portable (test_cuda_model: its CUDA bounds,
#          eager and graph, every level, fp32 and tf32)
#   ab     bench/ab_rev.sh BASE for v1, v2, v3, eager and --graph: every
#          default configuration's median step against BASE's, and the same
#          loss at every step (exit 1 from ab_rev if any differ)
# Usage: tests/gpu/plan_check.sh [BASE]   (STAGES="build tests ab"; BASE, a
#        directory holding the tree to compare with, is needed by "ab").
#        To fit a time limit per call: PLANS="default portable" and
#        TESTS="ops model" pick the tests' part, AB_IMPLS="v3 v2 v1" and
#        AB_GRAPHS="graph eager" the A/B's.
# Prints one line per check (PASS / FAIL); exits non-zero if any failed.
set -u
cd "$(dirname "$0")/../.."
BASE=${1:-}
STAGES=${STAGES:-"build tests ab"}
BUILD=${BUILD:-build-gpu}
OUT=${GPU_OUT:-$PWD/out/gpu}/plan
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
mkdir -p "$OUT"
has() { [[ " $STAGES " == *" $1 "* ]]; }
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

if ! pkg-config --exists libcjson 2>/dev/null && [ -d .deps/root ]; then
  D=$PWD/.deps/root/usr # the same unpacked packages bench/gpu.sh uses
  export PKG_CONFIG_PATH=$D/lib/x86_64-linux-gnu/pkgconfig
  export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}

if has build; then
  STAGES=build BUILD=$BUILD bench/gpu.sh || { bad "build"; exit 1; }
fi

run_test() { # name, log, command...
  local name=$1 log=$2
  shift 2
  timeout "$TEST_TIMEOUT" "$@" > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then ok "$name ($(grep -c '^PASS' "$log") PASS lines)"; else
    bad "$name: exit $rc"
    grep -E "FAIL|ERROR|error" "$log" | head -10
  fi
}

if has tests; then
  run_test "test_gpu_plan" "$OUT/test_gpu_plan.log" "$BUILD/test_gpu_plan"
  for plan in ${PLANS:-default portable}; do
    if [[ " ${TESTS:-ops model} " == *" ops "* ]]; then
      for t in "$BUILD"/test_cuda_ops_*; do
        run_test "$(basename "$t") --gpu-plan $plan" "$OUT/$(basename "$t")_$plan.log" \
          "$t" --gpu-plan "$plan"
      done
    fi
    if [[ " ${TESTS:-ops model} " == *" model "* ]]; then
      run_test "test_cuda_model --gpu-plan $plan" "$OUT/test_cuda_model_$plan.log" \
        "$BUILD/test_cuda_model" --gpu-plan "$plan"
    fi
  done
fi

if has ab; then
  [ -n "$BASE" ] && [ -d "$BASE" ] || { bad "ab: BASE must be a directory with the tree to compare"; exit 1; }
  for impl in ${AB_IMPLS:-v3 v2 v1}; do
    for gm in ${AB_GRAPHS:-graph eager}; do
      g=""; [ "$gm" = graph ] && g=--graph
      tag="$impl${g:+ graph}"
      if IMPL=$impl GRAPH="$g" BUILD=$BUILD-ab OUT="$OUT/ab" \
        bench/ab_rev.sh "$BASE" 15 2 > "$OUT/ab_$impl${g:+_graph}.log" 2>&1; then
        ok "ab $tag: the same losses"
      else
        bad "ab $tag"
      fi
      cat "$OUT/ab_$impl${g:+_graph}.log"
    done
  done
fi
echo "plan_check: $fails failed"
exit $((fails > 0))
