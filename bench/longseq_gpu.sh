#!/usr/bin/env bash
# Long sequences on the GPU against PyTorch without compilation: one sample
# (B 1), 16 sequences, 4 blocks, N 256..2048, bf16. tinyfold v3 --graph
# against the reference model of tests/reference/ in eager mode with SDPA
# (bench/peer_gpu.py --mode sdpa), alternated ROUNDS times; medians of the
# timed steps. A run that does not fit or fails prints its reason.
#   [TINYFOLD=build-gpu/tinyfold] [NS="256 512 1024 2048"] [STEPS=5] [ROUNDS=2]
#   [MODE=sdpa] [RUN_TIMEOUT=300] [OUT=out/longseq_gpu] bench/longseq_gpu.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tf=${TINYFOLD:-$here/../build-gpu/tinyfold}
out=${OUT:-$here/../out/longseq_gpu}
steps=${STEPS:-5}
mode=${MODE:-sdpa}
mkdir -p "$out"
for r in $(seq "${ROUNDS:-2}"); do
    for n in ${NS:-256 512 1024 2048}; do
        timeout "${RUN_TIMEOUT:-300}" "$tf" train --backend cuda --precision bf16 --impl v3 --graph --batch-size 1 \
            --seq-len "$n" --num-seqs 16 --num-blocks 4 --num-steps "$steps" --warmup-steps 2 \
            --quiet --json "$out/tf.$n.$r.json" >"$out/tf.$n.$r.log" 2>&1 ||
            echo "tinyfold N$n: exit $? ($(tail -n 1 "$out/tf.$n.$r.log"))"
        timeout "${RUN_TIMEOUT:-300}" python3 "$here/peer_gpu.py" --problem "n$n" --precision bf16 --mode "$mode" \
            --steps "$steps" --warmup 2 >"$out/pt.$n.$r.json" 2>"$out/pt.$n.$r.log" ||
            echo "PyTorch N$n: exit $? ($(tail -n 1 "$out/pt.$n.$r.log"))"
    done
done
python3 - "$out" "${NS:-256 512 1024 2048}" "$mode" <<'PY'
import glob, json, statistics, sys
out, ns, mode = sys.argv[1], sys.argv[2].split(), sys.argv[3]
print(f"| N | tinyfold v3 --graph ms/step | PyTorch {mode} ms/step | tinyfold / PyTorch |")
print("|---|---|---|---|")
for n in ns:
    t, p = [], []
    for f in glob.glob(f"{out}/tf.{n}.*.json"):
        try:
            t += [s["step_ms"] for s in json.load(open(f))["steps"] if not s["warmup"]]
        except Exception:
            pass
    for f in glob.glob(f"{out}/pt.{n}.*.json"):
        for line in open(f):
            if line.startswith("{"):
                d = json.loads(line)
                if d.get("median_ms"): p.append(d["median_ms"])
    mt = statistics.median(t) if t else float("nan")
    mp = statistics.median(p) if p else float("nan")
    print(f"| {n} | {mt:.1f} | {mp:.1f} | {mt / mp:.3f} |")
PY
