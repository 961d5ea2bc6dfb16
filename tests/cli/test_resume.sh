#!/usr/bin/env bash
# N steps + --save + --resume M steps == N+M steps straight, bit for bit (the
# losses as written in the run JSON, which round-trip floats exactly), and a
# resumed run takes no warm-up. --save writes the model's tensors only, the
# optimizer beside it; a model file without its optimizer file, or with
# another one, is refused by --resume and loads with --load; PyTorch files
# (no metadata, a "module." prefix, the v2 script's fused names) load.
# Usage: test_resume.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*"
    cat "$TMP/err" 2>/dev/null
    exit 1
}
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 2 --quiet)
run() { timeout 300 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null; }

# Straight: global steps 0 (warm-up), 1..4.
run "${TINY[@]}" --warmup-steps 1 --num-steps 4 --json "$TMP/straight.json" || fail "straight run"
# First part: global steps 0 (warm-up), 1, 2; checkpoint at global step 3.
run "${TINY[@]}" --warmup-steps 1 --num-steps 2 --save "$TMP/ck" || fail "first part"
[ -s "$TMP/ck" ] || fail "no checkpoint written"
[ -s "$TMP/ck.optim.safetensors" ] || fail "no optimizer file written beside the checkpoint"
header() { head -c $((8 + $(head -c 8 "$1" | od -An -tu8 | tr -d ' '))) "$1" | tail -c +9; }
header "$TMP/ck" | grep -q 'optimizer\.' && fail "the checkpoint holds optimizer tensors"
header "$TMP/ck.optim.safetensors" | grep -q '"optimizer\.exp_avg_sq\.msa_embedding\.weight"' ||
    fail "the optimizer file lacks the moments"
# Second part: global steps 3, 4.
run "${TINY[@]}" --resume "$TMP/ck" --num-steps 2 --json "$TMP/resumed.json" || fail "resume"

# "step" is the global step; compare the losses of the same global steps.
losses() { # FILE -> "step loss" lines
    tr -d ' \t\n' <"$1" | grep -o '"step":[0-9]*,"warmup":[a-z]*,"loss":[^,]*' |
        sed 's/"step":\([0-9]*\),"warmup":[a-z]*,"loss":\(.*\)/\1 \2/'
}
straight=$(losses "$TMP/straight.json" | awk '$1 >= 3')
resumed=$(losses "$TMP/resumed.json")
[ -n "$resumed" ] || fail "no steps in the resumed run JSON"
[ "$(echo "$resumed" | wc -l)" -eq 2 ] || fail "the resumed run should take exactly 2 steps: $resumed"
tr -d ' \t\n' <"$TMP/resumed.json" | grep -q '"warmup":true' && fail "the resumed run took a warm-up"
[ "$straight" = "$resumed" ] || fail "losses differ: straight [$straight] resumed [$resumed]"

# The checkpoint fixes the problem: a conflicting knob is refused.
run "${TINY[@]}" --resume "$TMP/ck" --seq-len 16
[ $? -eq 2 ] || fail "--resume with a different --seq-len should exit 2"
grep -q -- "--seq-len" "$TMP/err" || fail "the refusal should name --seq-len"
# --load takes the model from the file: no dims needed, a wrong one refused.
run --batch-size 1 --seq-len 8 --num-seqs 2 --backend cpu --quiet --num-steps 1 --warmup-steps 0 \
    --load "$TMP/ck" || fail "--load without model dims"
run "${TINY[@]}" --num-steps 1 --load "$TMP/ck" --msa-dim 32
[ $? -eq 2 ] || fail "--load with a different --msa-dim should exit 2"

# A model file without its optimizer file: --resume refuses in one line,
# naming the missing file and --load; --load takes it.
cp "$TMP/ck" "$TMP/lone"
run "${TINY[@]}" --resume "$TMP/lone" --num-steps 1
[ $? -eq 2 ] || fail "--resume without the optimizer file should exit 2"
[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "lone.optim.safetensors' does not exist.*--load" "$TMP/err" ||
    fail "the refusal should name the optimizer file and --load"
run "${TINY[@]}" --load "$TMP/lone" --num-steps 1 --warmup-steps 0 || fail "--load of a model file"
# Another save's optimizer file beside it: not a pair.
run "${TINY[@]}" --warmup-steps 0 --num-steps 1 --save "$TMP/other" || fail "other save"
cp "$TMP/other.optim.safetensors" "$TMP/lone.optim.safetensors"
run "${TINY[@]}" --resume "$TMP/lone" --num-steps 1
[ $? -eq 2 ] && grep -q "not a pair" "$TMP/err" || fail "a mismatched pair should be refused"

# PyTorch-style files, made from the checkpoint by python3 (no torch needed).
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/ck" "$TMP" <<'EOF' || fail "could not write the PyTorch-style files"
import json, struct, sys
src, d = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = raw[8 + n:]
t = {k: (v, data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()
     if k != "__metadata__"}
def save(path, tensors):
    h, body = {}, b""
    for k, (info, b) in tensors.items():
        h[k] = {"dtype": info["dtype"], "shape": info["shape"],
                "data_offsets": [len(body), len(body) + len(b)]}
        body += b
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + body)
save(d + "/plain.st", t)                                       # no metadata
save(d + "/dp.st", {"module." + k: v for k, v in t.items()})   # nn.DataParallel
groups = {".q_proj.weight": (".qkv_proj.weight", [".q_proj.weight", ".k_proj.weight", ".v_proj.weight"]),
          ".left_proj.weight": (".left_right_proj.weight", [".left_proj.weight", ".right_proj.weight"]),
          ".left_gate.weight": (".left_right_gate.weight", [".left_gate.weight", ".right_gate.weight"])}
parts = {p for _, ps in groups.values() for p in ps}
fused = {}
for k, (info, b) in t.items():
    first = next((g for g in groups if k.endswith(g)), None)
    if first:
        name, ps = groups[first]
        stem = k[:-len(first)]
        shape = [info["shape"][0] * len(ps), info["shape"][1]]
        fused[stem + name] = ({"dtype": info["dtype"], "shape": shape},
                              b"".join(t[stem + p][1] for p in ps))
    elif not any(k.endswith(p) for p in parts):
        fused[k] = (info, b)
save(d + "/v2.st", fused)                                      # the v2 script's fused names
save(d + "/bad.st", dict(list(fused.items()) + [("encoder.layers.0.weight", t["msa_embedding.weight"])]))
EOF
    LOADRUN=(--batch-size 1 --seq-len 8 --num-seqs 2 --backend cpu --threads 2 --quiet
             --num-steps 1 --warmup-steps 0 --json)
    run "${LOADRUN[@]}" "$TMP/ref.json" --load "$TMP/ck" || fail "--load of the checkpoint"
    for f in plain dp v2; do
        run "${LOADRUN[@]}" "$TMP/$f.json" --load "$TMP/$f.st" || fail "--load of $f.st"
        # the same weights: the same first loss, bit for bit
        [ -n "$(losses "$TMP/$f.json")" ] && [ "$(losses "$TMP/$f.json")" = "$(losses "$TMP/ref.json")" ] ||
            fail "$f.st: loss $(losses "$TMP/$f.json") is not the checkpoint's $(losses "$TMP/ref.json")"
    done
    run "${LOADRUN[@]}" "$TMP/bad.json" --load "$TMP/bad.st"
    [ $? -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
        grep -q "bad.st: unknown tensor 'encoder.layers.0.weight'" "$TMP/err" ||
        fail "an unknown tensor should be refused by name"
    # Weights only: no run to resume, and no made-up problem claimed for it.
    run "${TINY[@]}" --resume "$TMP/plain.st" --num-steps 1 --seq-len 16
    [ $? -eq 2 ] && grep -q "plain.st: has no optimizer state.*--load" "$TMP/err" ||
        fail "--resume of a state_dict should be refused"
    grep -q "trained with" "$TMP/err" && fail "a state_dict claims how it was trained"
fi
echo "test_resume: ok"
