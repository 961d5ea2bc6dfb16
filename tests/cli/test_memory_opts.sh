#!/usr/bin/env bash
# The memory options: --recompute, --chunk-size, --memory-budget and bench
# --scaling. Bad values exit 2 with one stderr line naming the flag; a budget
# picks the cheapest --recompute (and --chunk-size) that the plan says fits,
# or says what the least is;
# bench --scaling writes the JSON another tool reads (points, fit).
# Usage: test_memory_opts.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
cases=0
fail() { fails=$((fails + 1)); printf 'FAIL: %s\n' "$*"; }

bad() {
    local expect=$1
    shift
    cases=$((cases + 1))
    timeout 60 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne 2 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ] || ! grep -qF -- "$expect" "$TMP/err" ||
        ! grep -q '^tinyfold: ' "$TMP/err" || [ -s "$TMP/out" ]; then
        fail "tinyfold $* (exit $rc): $(head -c 300 "$TMP/err")"
    fi
}

TINY=(--backend cpu --threads 1 --batch-size 1 --seq-len 12 --num-seqs 3 --num-blocks 1
      --msa-dim 8 --pair-dim 8 --num-steps 1 --warmup-steps 0 --quiet)
bad --recompute train --recompute all
bad --recompute train --recompute
bad --recompute bench --recompute BLOCKS
bad --memory-budget train --memory-budget 0
bad --memory-budget train --memory-budget -5G
bad --memory-budget train --memory-budget 5X
bad --memory-budget train --memory-budget G
# a byte count that overflows 64 bits is refused, as integer flags' are
bad "the value overflows" train --memory-budget 18446744073709551616
bad "the value overflows" train --memory-budget 20000000T
# the budget chooses --recompute: both given contradict each other
bad "--recompute: not accepted with --memory-budget" train "${TINY[@]}" --recompute modules --memory-budget 1G
bad "--recompute: not accepted with --memory-budget" train "${TINY[@]}" --memory-budget 1G --recompute none
bad --scaling bench --scaling 0
bad --scaling bench --scaling 64,,128
bad --scaling bench --scaling 64,5000
bad --scaling bench --scaling x
bad --chunk-size train --chunk-size 0
bad --chunk-size train --chunk-size -4
bad --chunk-size train --chunk-size 4x
bad --chunk-size train --chunk-size
bad "--chunk-size: '13' is not accepted: expected 1..12" train "${TINY[@]}" --chunk-size 13
bad "--chunk-size: '65' is not accepted: expected 1..64" bench --backend cpu --chunk-size 65 --problems small
# a budget below the least plan: one line with the least and its setting
bad "the least is" train "${TINY[@]}" --memory-budget 1K
# a given chunk size stays
bad "--chunk-size 5); reduce" train "${TINY[@]}" --chunk-size 5 --memory-budget 1K

# a budget that fits everything: none; then one just below none's plan: another
cases=$((cases + 1))
if ! "$BIN" train "${TINY[@]}" --memory-budget 100G 2>"$TMP/err" >/dev/null ||
    ! grep -q -- "--recompute none (planned" "$TMP/err"; then
    fail "--memory-budget 100G does not choose none: $(cat "$TMP/err")"
fi
cases=$((cases + 1))
none_mb=$(sed -n 's/.*--recompute none (planned \([0-9.]*\) MB).*/\1/p' "$TMP/err")
below=$(awk -v m="$none_mb" 'BEGIN { printf "%.0f", m * 1e6 * 0.97 }')
if ! "$BIN" train "${TINY[@]}" --memory-budget "$below" 2>"$TMP/err" >/dev/null ||
    grep -q -- "--recompute none" "$TMP/err" || ! grep -q -- "--recompute" "$TMP/err"; then
    fail "--memory-budget $below (below none's $none_mb MB) did not choose a recompute: $(cat "$TMP/err")"
fi

# training with each setting runs; bench --scaling's JSON has points and fit
for m in none blocks modules; do
    cases=$((cases + 1))
    "$BIN" train "${TINY[@]}" --recompute "$m" >/dev/null 2>"$TMP/err" || fail "--recompute $m: $(cat "$TMP/err")"
    cases=$((cases + 1))
    "$BIN" train "${TINY[@]}" --recompute "$m" --chunk-size 5 >/dev/null 2>"$TMP/err" ||
        fail "--recompute $m --chunk-size 5: $(cat "$TMP/err")"
done
# the run's header and JSON carry the chunk size
cases=$((cases + 1))
if ! "$BIN" train "${TINY[@]/--quiet/--no-progress}" --chunk-size 5 --json "$TMP/r.json" >"$TMP/out" 2>"$TMP/err" ||
    ! grep -q "Chunk size: 5 pair rows at a time" "$TMP/out" ||
    ! python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["config"]["chunk_size"] == 5' "$TMP/r.json"; then
    fail "--chunk-size 5 not in the header or the JSON: $(head -c 300 "$TMP/err")"
fi
cases=$((cases + 1))
if ! "$BIN" bench --backend cpu --threads 1 --batch-size 1 --num-seqs 3 --num-blocks 1 \
    --steps 1 --no-progress --scaling 8,12 --recompute modules --json "$TMP/s.json" >"$TMP/out" 2>"$TMP/err"; then
    fail "bench --scaling: $(cat "$TMP/err")"
elif ! python3 - "$TMP/s.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
pts = j["points"]
assert [p["N"] for p in pts] == [8, 12], pts
for p in pts:
    for k in ("peak_bytes", "step_ms", "flops", "gflops"):
        assert p[k] > 0, (k, p)
assert pts[1]["peak_bytes"] > pts[0]["peak_bytes"]
assert j["fit"]["memory_exponent"] > 0 and "time_exponent" in j["fit"]
assert j["batch"] == 1 and j["num_seqs"] == 3 and j["recompute"] == "modules"
PY
then
    fail "bench --scaling JSON: $(cat "$TMP/s.json")"
fi

echo "test_memory_opts: $cases cases, $fails failed"
[ "$fails" -eq 0 ]
