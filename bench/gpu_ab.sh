#!/usr/bin/env bash
# A/B of one option (or environment variable) on the GPU, runs alternated so drift hits both
# sides alike: v3 --graph, small and large problems, fp32 and tf32, REPS
# rounds of (A, B). Prints the median step time of each side and B/A.
#   bench/gpu_ab.sh VAR A B [steps] [reps]
# VAR starting with -- is an option of `tinyfold train` (VAR A against VAR B),
# else an environment variable (VAR=A against VAR=B):
# e.g. bench/gpu_ab.sh --gpu-plan default gemm=cublas   (per-shape GEMMs vs the library)
# Needs build-gpu/ (bench/gpu.sh STAGES=build); JSON of every run in $GPU_OUT/ab.
# A run is killed after RUN_TIMEOUT seconds (default 300) and counts as failed.
# IMPL (default v3) and GRAPH (default --graph; empty for eager) set the runs;
# PRECS the precisions (default "fp32 tf32").
set -uo pipefail
cd "$(dirname "$0")/.."
VAR=${1:?variable}
A=${2:?value A}
B=${3:?value B}
STEPS=${4:-20}
REPS=${5:-3}
OUT=${GPU_OUT:-$PWD/out/gpu}/ab
TF=${BUILD:-build-gpu}/tinyfold
IMPL=${IMPL:-v3}
GRAPH=${GRAPH---graph}
mkdir -p "$OUT"
for rep in $(seq "$REPS"); do
  for prob in small large; do
    if [ $prob = small ]; then N=64; S=16; else N=128; S=32; fi
    for p in ${PRECS:-fp32 tf32}; do
      for side in A B; do
        val=$A; [ $side = B ] && val=$B
        if [ "${VAR#--}" != "$VAR" ]; then envs=(); opt=("$VAR" "$val"); else envs=("$VAR=$val"); opt=(); fi
        timeout "${RUN_TIMEOUT:-300}" env "${envs[@]}" "$TF" train "${opt[@]}" --backend cuda --impl "$IMPL" $GRAPH --precision $p --batch-size 4 \
          --seq-len $N --num-seqs $S --num-blocks 4 --num-steps "$STEPS" --quiet \
          --json "$OUT/${prob}_${p}_${side}_$rep.json" > /dev/null 2>&1 || echo "run $prob $p $side failed"
      done
    done
  done
done
python3 - "$OUT" "$VAR" "$A" "$B" "${PRECS:-fp32 tf32}" <<'PY'
import glob, json, statistics as st, sys
O, var, a, b, precs = sys.argv[1:6]
print(f"{'problem':8} {'prec':5} {var}={a:>3} ms  {var}={b:>3} ms  B/A    samples/s A -> B"
      f"    peak MiB A -> B (B/A)")
for prob in ("small", "large"):
    for p in precs.split():
        med, peak = {}, {}
        for side in ("A", "B"):
            xs, pk = [], []
            for f in glob.glob(f"{O}/{prob}_{p}_{side}_*.json"):
                j = json.load(open(f))
                xs += [s["step_ms"] for s in j["steps"] if not s["warmup"]]
                pk.append(j.get("summary", {}).get("peak_memory_bytes", float("nan")) / 2**20)
            med[side] = st.median(xs) if xs else float("nan")
            peak[side] = max(pk) if pk else float("nan")
        print(f"{prob:8} {p:5} {med['A']:12.3f} {med['B']:12.3f}  {med['B']/med['A']:.3f}  "
              f"{4e3/med['A']:.1f} -> {4e3/med['B']:.1f}    "
              f"{peak['A']:.1f} -> {peak['B']:.1f} ({peak['B']/peak['A']:.3f})")
PY
