#!/usr/bin/env bash
# N steps + --save + --resume M steps == N+M steps straight, bit for bit (the
# losses as written in the run JSON, which round-trip floats exactly), and a
# resumed run takes no warm-up.
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
echo "test_resume: ok"
