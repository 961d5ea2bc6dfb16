#!/usr/bin/env bash
# Precisions side by side: `tinyfold train` runs alternated (fp32, then each
# other precision, REPS rounds) so that drift hits every side alike. Prints
# per problem and precision the median step time over all rounds' timed
# steps, samples/s, the ratio to fp32 and the peak memory with its ratio to
# fp32's; with LOSS_STEPS > 0 also a training run of that many steps per
# precision at the first problem and the mean loss over its last 50 steps.
#   bench/precision.sh                          (CPU: tiny and small, fp32 bf16 fp16)
#   BACKEND=cuda PRECS="fp32 tf32 bf16 fp16" PROBLEMS="small large" bench/precision.sh
# Environment: BACKEND (cpu), PRECS, PROBLEMS (tiny small), STEPS (timed steps a run, 5),
# REPS (3), IMPL (v3), GRAPH (--graph on cuda, empty on the CPU), LOSS_STEPS (0),
# TINYFOLD (build/tinyfold), OUT (out/precision: every run's JSON).
set -uo pipefail
cd "$(dirname "$0")/.."
BACKEND=${BACKEND:-cpu}
PRECS=${PRECS:-fp32 bf16 fp16}
PROBLEMS=${PROBLEMS:-tiny small}
STEPS=${STEPS:-5}
REPS=${REPS:-3}
IMPL=${IMPL:-v3}
LOSS_STEPS=${LOSS_STEPS:-0}
TF=${TINYFOLD:-build/tinyfold}
OUT=${OUT:-$PWD/out/precision}
if [ "$BACKEND" = cpu ]; then GRAPH=${GRAPH-}; THREADS="--threads 2"; else GRAPH=${GRAPH---graph}; THREADS=""; fi
[ -x "$TF" ] || { echo "bench/precision.sh: no tinyfold binary at $TF (run make, or set TINYFOLD)" >&2; exit 2; }
mkdir -p "$OUT"
shape() {
  case $1 in
    tiny) echo "--batch-size 2 --seq-len 32 --num-seqs 8 --num-blocks 2" ;;
    small) echo "--batch-size 4 --seq-len 64 --num-seqs 16 --num-blocks 4" ;;
    large) echo "--batch-size 4 --seq-len 128 --num-seqs 32 --num-blocks 4" ;;
    *) echo "bench/precision.sh: unknown problem '$1' (expected tiny, small or large)" >&2; exit 2 ;;
  esac
}
for rep in $(seq "$REPS"); do
  for prob in $PROBLEMS; do
    for p in $PRECS; do
      "$TF" train --backend "$BACKEND" $THREADS --impl "$IMPL" $GRAPH --precision "$p" $(shape "$prob") \
        --num-steps "$STEPS" --warmup-steps 2 --quiet --json "$OUT/${prob}_${p}_$rep.json" \
        > /dev/null 2> "$OUT/${prob}_${p}_$rep.err" || echo "run $prob $p $rep failed: $(head -1 "$OUT/${prob}_${p}_$rep.err")"
    done
  done
done
if [ "$LOSS_STEPS" -gt 0 ]; then
  prob=${PROBLEMS%% *}
  for p in $PRECS; do
    "$TF" train --backend "$BACKEND" $THREADS --impl "$IMPL" $GRAPH --precision "$p" $(shape "$prob") \
      --num-steps "$LOSS_STEPS" --warmup-steps 0 --quiet --json "$OUT/loss_${prob}_$p.json" \
      > /dev/null 2>&1 || echo "loss run $prob $p failed"
  done
fi
python3 - "$OUT" "$PRECS" "$PROBLEMS" "$LOSS_STEPS" <<'PY'
import glob, json, statistics as st, sys
O, precs, probs, loss_steps = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
B = {"tiny": 2, "small": 4, "large": 4}
print(f"{'problem':8} {'prec':5} {'median ms':>10} {'samples/s':>10} {'x fp32':>7} {'peak MiB':>9} {'x fp32':>7}  steps")
for prob in probs:
    ref = None
    for p in precs:
        xs, pk = [], []
        for f in glob.glob(f"{O}/{prob}_{p}_*.json"):
            j = json.load(open(f))
            xs += [s["step_ms"] for s in j["steps"] if not s.get("warmup")]
            pk.append(j.get("summary", {}).get("peak_memory_bytes", float("nan")) / 2**20)
        if not xs:
            print(f"{prob:8} {p:5} (no runs)")
            continue
        m, peak = st.median(xs), max(pk)
        if p == "fp32": ref = (m, peak)
        r = (m / ref[0], peak / ref[1]) if ref else (float("nan"),) * 2
        print(f"{prob:8} {p:5} {m:10.2f} {B[prob] * 1e3 / m:10.2f} {r[0]:7.3f} {peak:9.1f} {r[1]:7.3f}  {len(xs)}")
if loss_steps:
    ref = None
    for p in precs:
        f = glob.glob(f"{O}/loss_*_{p}.json")
        if not f: continue
        L = [s["loss"] for s in json.load(open(f[0]))["steps"]]
        tail = st.mean(L[-50:])
        if p == "fp32": ref = tail
        rel = f"{(tail - ref) / ref:+.4f}" if ref else ""
        print(f"loss {p:5}: mean of the last 50 of {len(L)} steps {tail:.5f} {rel}")
PY
