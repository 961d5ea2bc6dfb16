#!/usr/bin/env bash
# A tiny training run end to end: exit 0, the report's lines, and a run JSON
# that parses, has every step (warm-up included) with finite losses, and
# echoes the configuration.
# Usage: test_train_tiny.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*"
    echo "--- stdout"; cat "$TMP/out"; echo "--- stderr"; cat "$TMP/err"
    exit 1
}

TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --num-steps 3 --warmup-steps 1 --backend cpu --threads 2)
timeout 300 "$BIN" train "${TINY[@]}" --log-every 1 --json "$TMP/run.json" \
    >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc"
[ -s "$TMP/err" ] && fail "stderr is not empty (not a terminal: no progress line expected)"
for want in "Total parameters: " "Warm-up 1/1 | Loss: " "Step   1/3 | Loss: " "Step   3/3 | Loss: " \
    "Average training speed: " "Final loss: " "Peak memory usage: " "Achieved: "; do
    grep -qF -- "$want" "$TMP/out" || fail "stdout lacks '$want'"
done
[ -f "$TMP/run.json" ] || fail "no run JSON"
ls "$TMP" | grep -q tmp && fail "a temporary file was left next to the JSON"

if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/run.json" <<'EOF' || fail "run JSON check"
import json, math, sys
r = json.load(open(sys.argv[1]))
c = r["config"]
want = dict(batch=1, seq_len=8, n_seqs=2, n_blocks=1, msa_dim=16, pair_dim=32, num_steps=3,
            warmup_steps=1, impl="v3", backend="cpu", threads=2, precision="fp32", seed=42)
for k, v in want.items():
    assert c[k] == v, f"config.{k} = {c[k]!r}, expected {v!r}"
assert c["learning_rate"] == 0.0003, c["learning_rate"]
assert r["command"] == "train" and r["tinyfold_version"]
assert "cpu" in r["build"]["backends"]
assert r["parameters"] > 0
steps = r["steps"]
assert [s["step"] for s in steps] == [0, 1, 2, 3], steps
assert [s["warmup"] for s in steps] == [True, False, False, False]
for s in steps:
    assert isinstance(s["loss"], float) and math.isfinite(s["loss"]), s
    assert s["step_ms"] > 0 and s["samples_per_sec"] > 0, s
s = r["summary"]
timed = steps[1:]
assert abs(s["mean_loss"] - sum(t["loss"] for t in timed) / 3) < 1e-4 * abs(s["mean_loss"]), s
assert s["final_loss"] == timed[-1]["loss"], s
assert s["peak_memory_bytes"] > 0 and s["host_peak_rss_bytes"] > 0, s
# average speed = mean of the per-step samples/s of the timed steps (the reference's rule)
mean_sps = sum(t["samples_per_sec"] for t in timed) / 3
assert abs(s["samples_per_sec"] - mean_sps) <= 1e-3 * mean_sps + 1e-3, (s, mean_sps)
EOF
else
    # Without python: the keys and the number of steps, by grep.
    [ "$(grep -c '"warmup":' "$TMP/run.json")" -eq 4 ] || fail "expected 4 steps in the JSON"
    grep -q '"loss":[[:space:]]*null' "$TMP/run.json" && fail "a loss is not finite"
    grep -q '"summary"' "$TMP/run.json" || fail "no summary"
fi

# --quiet: the summary only.
timeout 300 "$BIN" "${TINY[@]}" --quiet >"$TMP/out" 2>"$TMP/err" </dev/null || fail "--quiet run"
grep -q "Step " "$TMP/out" && fail "--quiet printed step lines"
grep -q "Average training speed" "$TMP/out" || fail "--quiet lacks the summary"

# Levels and fusion switches reach the run JSON (applied after --impl, in order).
timeout 300 "$BIN" "${TINY[@]}" --quiet --enable-flash-attention --impl v1 \
    --json "$TMP/v1.json" >"$TMP/out" 2>"$TMP/err" </dev/null || fail "v1 run"
grep -q '"impl":[[:space:]]*"v1"' "$TMP/v1.json" || fail "impl v1 not in the JSON"
grep -q '"flash":[[:space:]]*true' "$TMP/v1.json" || fail "--enable-flash-attention lost"
grep -q '"qkv_msa":[[:space:]]*false' "$TMP/v1.json" || fail "v1 should not fuse qkv_msa"
echo "test_train_tiny: ok"
