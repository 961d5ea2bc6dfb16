#!/usr/bin/env bash
# --precision and --use-amp end to end on the CPU: what parses, what the
# header, the step lines, the summary and the run JSON say for bf16 and fp16,
# fp16's loss scaler through a checkpoint (resumed bit for bit, and a
# checkpoint whose scale overflows every step: skipped steps, scale halved),
# --backend auto keeping bf16, and compare refusing runs of different
# precision.
# Usage: test_precision.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*"
    echo "--- stdout"; cat "$TMP/out"; echo "--- stderr"; cat "$TMP/err"
    exit 1
}
run() { timeout 300 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null; }
has() { grep -qF -- "$1" "$TMP/out" || fail "stdout lacks '$1'"; }
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 2)

# Parsing: an error in a later knob is the one reported, so the precision
# options before it were accepted.
for args in "--precision bf16" "--precision fp16" "--use-amp" "--precision fp16 --use-amp" \
    "--use-amp --precision fp16" "--precision tf32" "--precision fp32"; do
    # shellcheck disable=SC2086
    run train $args --seq-len 0
    [ $? -eq 2 ] || fail "train $args --seq-len 0: expected exit 2"
    grep -qF -- "--seq-len" "$TMP/err" || fail "train $args: the error should name --seq-len"
done
run train --use-amp --precision bf16
[ $? -eq 2 ] || fail "--use-amp --precision bf16 should exit 2"
[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "--use-amp --precision bf16: one stderr line expected"
grep -qF -- "--use-amp" "$TMP/err" && grep -qF "bf16" "$TMP/err" ||
    fail "the refusal should name --use-amp and bf16"
"$BIN" help train | grep -qF -- "--use-amp" || fail "help train lacks --use-amp"
"$BIN" help train | grep -qF -- "fp32|tf32|bf16|fp16" || fail "help train lacks the precisions"

# fp16 through --use-amp: header, step lines with the scale, summary.
run train "${TINY[@]}" --use-amp --num-steps 2 --warmup-steps 1 --log-every 1 \
    --json "$TMP/fp16.json" --save "$TMP/fp16.ckpt"
[ $? -eq 0 ] || fail "fp16 run"
has "Precision: fp16, from --use-amp"
has "Loss scaled dynamically: from 65536"
has "Warm-up 1/1 | Loss: "
grep -q '^Step   2/2 | Loss: .* | Scale: [0-9]' "$TMP/out" || fail "fp16 step line lacks the scale"
has "Skipped steps: "
# bf16: no loss scale anywhere.
run train "${TINY[@]}" --precision bf16 --num-steps 2 --warmup-steps 0 --log-every 1 \
    --json "$TMP/bf16.json"
[ $? -eq 0 ] || fail "bf16 run"
has "Precision: bf16 (bf16 activations"
grep -qF "Scale:" "$TMP/out" && fail "a bf16 step line shows a loss scale"
grep -qF "Skipped steps" "$TMP/out" && fail "a bf16 summary shows skipped steps"
# --backend auto landing on the CPU keeps bf16 (only tf32 is a GPU matter).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
    run train "${TINY[@]/cpu/auto}" --precision bf16 --num-steps 1 --warmup-steps 0 --quiet \
        --json "$TMP/auto.json"
    [ $? -eq 0 ] || fail "bf16 with --backend auto"
    tr -d ' \t\n' <"$TMP/auto.json" | grep -q '"precision":"bf16"' || fail "auto dropped bf16"
fi
run train "${TINY[@]}" --num-steps 2 --warmup-steps 1 --quiet --json "$TMP/fp32.json"
[ $? -eq 0 ] || fail "fp32 run"

# compare: a different precision is a different problem.
run compare "$TMP/fp32.json" "$TMP/fp16.json"
[ $? -eq 2 ] || fail "compare fp32 vs fp16 should exit 2"
grep -qF "precision" "$TMP/err" && grep -qF "fp16" "$TMP/err" || fail "compare should name precision"
run compare "$TMP/bf16.json" "$TMP/fp16.json"
[ $? -eq 2 ] || fail "compare bf16 vs fp16 should exit 2"
run compare "$TMP/fp32.json" "$TMP/fp16.json" --force
[ $? -eq 0 ] || fail "compare --force"
has "skipped steps"

# fp16 resumed: the scaler continues, losses bit for bit as a straight run.
run train "${TINY[@]}" --use-amp --num-steps 4 --warmup-steps 1 --quiet --json "$TMP/straight.json"
[ $? -eq 0 ] || fail "straight fp16 run"
run train "${TINY[@]}" --use-amp --resume "$TMP/fp16.ckpt" --num-steps 2 --quiet \
    --json "$TMP/resumed.json"
[ $? -eq 0 ] || fail "resumed fp16 run"
# The precision is the command line's, like --impl: without --use-amp the
# fp16 checkpoint continues in fp32, with no loss scale.
run train "${TINY[@]}" --resume "$TMP/fp16.ckpt" --num-steps 1 --log-every 1 \
    --json "$TMP/resumed32.json"
[ $? -eq 0 ] || fail "fp16 checkpoint resumed in fp32"
has "Precision: fp32 (fp32 everywhere)"
grep -qF "Scale:" "$TMP/out" && fail "an fp32 run shows a loss scale"

if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP" <<'EOF' || fail "run JSON check"
import json, math, struct, sys
d = sys.argv[1]
def load(n):
    return json.load(open(f"{d}/{n}.json"))
for name, prec in (("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "fp32")):
    r = load(name)
    assert r["config"]["precision"] == prec, (name, r["config"]["precision"])
    steps, s = r["steps"], r["summary"]
    for st in steps:
        assert isinstance(st["skipped"], bool), st
        assert st["loss_scale"] > 0 and math.isfinite(st["loss_scale"]), st
        if prec != "fp16":
            assert st["loss_scale"] == 1 and not st["skipped"], st
    assert s["skipped_steps"] == sum(st["skipped"] for st in steps), s
    if prec != "fp16":
        assert s["loss_scale"] == 1 and s["skipped_steps"] == 0, s
f16 = load("fp16")
assert f16["steps"][0]["loss_scale"] == 65536.0, f16["steps"][0]
# straight global steps 3, 4 == resumed
a = {st["step"]: (st["loss"], st["loss_scale"], st["skipped"]) for st in load("straight")["steps"]}
b = {st["step"]: (st["loss"], st["loss_scale"], st["skipped"]) for st in load("resumed")["steps"]}
assert sorted(b) == [3, 4], b
for g in b:
    assert a[g] == b[g], (g, a[g], b[g])
assert load("straight")["summary"]["loss_scale"] == load("resumed")["summary"]["loss_scale"]
r32 = load("resumed32")
assert r32["config"]["precision"] == "fp32" and r32["summary"]["loss_scale"] == 1, r32["summary"]

# A checkpoint whose scale overflows fp32 itself: every resumed step skips
# and halves it.
# (the scaler's state is in the optimizer file beside the checkpoint)
open(f"{d}/huge.ckpt", "wb").write(open(f"{d}/fp16.ckpt", "rb").read())
raw = open(f"{d}/fp16.ckpt.optim.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
assert head["__metadata__"]["loss_scale"] == str(int(f16["summary"]["loss_scale"])), head["__metadata__"]
head["__metadata__"]["loss_scale"] = str(2.0 ** 120)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(f"{d}/huge.ckpt.optim.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
EOF
    run train "${TINY[@]}" --use-amp --resume "$TMP/huge.ckpt" --num-steps 5 --log-every 100 \
        --json "$TMP/huge.json"
    [ $? -eq 0 ] || fail "run from the overflowing scale"
    # steps 2..4 are not due a line at --log-every 100: their skip prints one
    [ "$(grep -c '| Scale: .* | skipped (inf/NaN gradient' "$TMP/out")" -eq 5 ] ||
        fail "each skipped step should get a step line saying so"
    has "Skipped steps: 5 of 5"
    python3 - "$TMP/huge.json" <<'EOF' || fail "skipped steps in the run JSON"
import json, struct, sys
# the JSON writes a float in the fewest digits that read back as that float
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
r = json.load(open(sys.argv[1]))
steps = r["steps"]
assert [st["skipped"] for st in steps] == [True] * 5, steps
assert [f32(st["loss_scale"]) for st in steps] == [2.0 ** (120 - k) for k in range(5)], steps
s = r["summary"]
assert s["skipped_steps"] == 5 and f32(s["loss_scale"]) == 2.0 ** 115, s
EOF
fi
echo "test_precision: ok"
