#!/usr/bin/env bash
# Checks that need the GPU machine (CI has no GPU): run after bench/gpu.sh has
# built build-gpu/. Prints one line per check; exits non-zero if any failed.
#   1. CUDA backend vs the float64 PyTorch fixtures (tinyfold grad, every level)
#   2. the PyTorch reference on the machine's PyTorch (2.11, CUDA): self-test,
#      its fp32 CUDA gradients vs tinyfold's CUDA gradients, and checkpoints both
#      ways (tinyfold -> strict load in PyTorch, PyTorch -> tinyfold)
#   3. profiler on CUDA: graph replays traced per node, launches per step
#      stable, hardware counters through the CLI (eager and --graph), overhead
#      of tracing and of the hooks with profiling off
# Usage: tests/gpu/check_gpu.sh [build-dir]
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
TF=$B/tinyfold
T=${GPU_OUT:-out/gpu}/check
mkdir -p "$T"
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# 1. CUDA vs float64 fixtures
TF_GRAD_BACKEND=cuda TF_GRAD_FIXTURES="tiny odd defaults" TF_GRAD_IMPLS="v1 v2 v3" \
  bash tests/cli/test_grad.sh "$TF" > "$T/grad_cuda.log" 2>&1 && ok "cuda grad vs float64 fixtures" || bad "cuda grad vs fixtures"
grep "test_grad" "$T/grad_cuda.log"

# 2. PyTorch reference on this machine
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
timeout 300 python3 tests/reference/selftest.py > "$T/ref_selftest.log" 2>&1 && ok "reference self-test on this torch" || bad "reference self-test"
tail -2 "$T/ref_selftest.log"
FIX=tests/fixtures/tiny.safetensors
python3 - "$FIX" "$T/w.safetensors" <<'PY'
import sys; sys.path.insert(0, "tests/reference")
import safetensors_io as st
t, _ = st.load(sys.argv[1])
st.save(sys.argv[2], {k[6:]: v for k, v in t.items() if k.startswith("param.")})
PY
# reference fp32 CUDA gradients vs tinyfold CUDA gradients, same weights and batch
python3 tests/reference/grads.py --weights "$T/w.safetensors" --data "$FIX" --out "$T/ref_cuda.safetensors" \
  --device cuda --dtype float32 > "$T/ref_grads.log" 2>&1 || python3 tests/reference/grads.py \
  --weights "$T/w.safetensors" --data "$FIX" --out "$T/ref_cuda.safetensors" > "$T/ref_grads.log" 2>&1
for impl in v1 v3; do
  "$TF" grad --backend cuda --impl $impl --load "$T/w.safetensors" --data "$FIX" --out "$T/tf_$impl.safetensors" > /dev/null 2>&1
done
python3 - "$T" <<'PY' && ok "tinyfold cuda vs torch cuda (same fp32 weights)" || bad "tinyfold cuda vs torch cuda"
import sys, numpy as np
sys.path.insert(0, "tests/reference")
import safetensors_io as st
T = sys.argv[1]
ref, m = st.load(f"{T}/ref_cuda.safetensors")
worst = 0
for impl in ("v1", "v3"):
    got, _ = st.load(f"{T}/tf_{impl}.safetensors")
    for k in ref:
        if k.startswith("grad.") or k in ("loss", "pred"):
            a, b = np.asarray(got[k], np.float64).ravel(), np.asarray(ref[k], np.float64).ravel()
            worst = max(worst, np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
print(f"  torch({m.get('torch_version', '?')}, {m.get('device', '?')}) vs tinyfold cuda: worst rel_l2 {worst:.2e}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
# checkpoints both ways
"$TF" train --backend cuda --impl v3 --batch-size 2 --seq-len 8 --num-seqs 3 --num-blocks 2 --msa-dim 16 \
  --pair-dim 32 --num-steps 3 --warmup-steps 1 --quiet --save "$T/ck.safetensors" > /dev/null 2>&1
tl=$("$TF" grad --backend cuda --load "$T/ck.safetensors" --data "$FIX" --out "$T/ckg.safetensors" 2>&1 | grep -oE "loss[^0-9]*[0-9.]+" | grep -oE "[0-9.]+$")
pl=$(python3 tests/reference/check_checkpoint.py --checkpoint "$T/ck.safetensors" --data "$FIX" 2>&1 | grep -oE "^loss [0-9.]+" | cut -d' ' -f2)
echo "  tinyfold checkpoint: tinyfold loss $tl, PyTorch strict load loss $pl"
python3 -c "import sys; a,b=float('$tl' or 'nan'),float('$pl' or 'nan'); sys.exit(0 if abs(a-b)<=1e-5*abs(b) else 1)" \
  && ok "tinyfold checkpoint loads strictly into PyTorch, same loss" || bad "checkpoint tinyfold -> PyTorch"
python3 tests/reference/check_checkpoint.py --save-checkpoint "$T/ref_ck.safetensors" --checkpoint "$T/w.safetensors" > "$T/ref_ck.log" 2>&1
"$TF" grad --backend cuda --load "$T/ref_ck.safetensors" --data "$FIX" --out "$T/refckg.safetensors" > "$T/refck_tf.log" 2>&1 \
  && ok "PyTorch checkpoint loads into tinyfold (cuda)" || { bad "checkpoint PyTorch -> tinyfold"; tail -3 "$T/refck_tf.log"; }

# 3. profiler on CUDA
P=$T/prof
"$TF" profile --backend cuda --impl v3 --num-steps 3 --out "$P/eager" > "$P.eager.log" 2>&1
"$TF" profile --backend cuda --impl v3 --graph --num-steps 3 --out "$P/graph" > "$P.graph.log" 2>&1
python3 - "$P" <<'PY' && ok "graph replays traced per node, same launches as eager" || bad "graph tracing"
import json, sys, csv, collections
P = sys.argv[1]
e = json.load(open(f"{P}/eager/summary.json")); g = json.load(open(f"{P}/graph/summary.json"))
le, lg = e["launches_per_step"], g["launches_per_step"]
rows = list(csv.DictReader(open(f"{P}/graph/kernel_trace.csv")))
per_step = collections.Counter(r["Step"] for r in rows)
print(f"  launches/step eager {le}, graph {lg}; graph trace rows per step {dict(per_step)}")
sys.exit(0 if le == lg and len(set(per_step.values())) == 1 else 1)
PY
# counters through the CLI on a model kernel, eager and --graph (the
# known-kernel DRAM check is test_cuda_prof)
for g in "" "--graph"; do
  d=$P/counters$g
  /usr/bin/time -f "%e s, %M KB max RSS" -o "$d.time" "$TF" profile --backend cuda --impl v3 $g --num-steps 3 \
    --counters layernorm_fwd --out "$d" > "$d.log" 2>&1
  echo "  counters$g: $(cat "$d.time" 2>/dev/null | tail -1)"
  grep -A12 "^Counters" "$d.log" | head -14
  python3 - "$d" <<'PY' && ok "counters$g on layernorm_fwd: values, no error, replay step left out" || bad "counters$g"
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
c = s.get("counters") or {}
ks = c.get("kernels", [])
ok = not c.get("error") and ks and all(k["metrics"].get("dram__bytes_read.sum", -1) >= 0 for k in ks)
ok = ok and s["steps_collected"] == 2 and c.get("windows", 0) > 0
print("  ", {k: c.get(k) for k in ("step", "windows", "windows_skipped", "ranges", "ranges_dropped", "error")})
sys.exit(0 if ok else 1)
PY
done
# overhead: the same run without and with kernel tracing (medians of the step time)
for mode in train profile; do
  extra=""; [ $mode = profile ] && extra="--out $P/ovh"
  "$TF" $mode --backend cuda --impl v3 --num-steps 30 --quiet --json "$P/ovh_$mode.json" $extra > /dev/null 2>&1
done
python3 - "$P" <<'PY'
import json, sys, statistics as st
P = sys.argv[1]
m = {}
for mode in ("train", "profile"):
    try:
        r = json.load(open(f"{P}/ovh_{mode}.json"))
        m[mode] = st.median(s["step_ms"] for s in r["steps"] if not s["warmup"])
    except Exception as ex:
        print("  overhead: no", mode, ex)
if len(m) == 2:
    print(f"  overhead: median step {m['train']:.3f} ms plain, {m['profile']:.3f} ms with kernel tracing ({100*(m['profile']/m['train']-1):+.1f}%)")
PY
echo "check_gpu: $fails failed"
exit $fails
