#!/usr/bin/env bash
# `--json -`: the run JSON alone on stdout (one document), the human output
# on stderr, no file named "-" (/dev/stdout, which the rename would replace,
# is refused naming `--json -`); the run JSON and summary.json carry
# "schema_version"; config.omp_wait is the setting, not what auto found.
# Usage: test_json_stdout.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 2 --warmup-steps 1 --num-steps 2)
flat() { tr -d ' \t\n' <"$1"; }

timeout 120 "$BIN" train "${TINY[@]}" --json - >out 2>err </dev/null || fail "train --json - exited $?"
[ -e ./- ] && fail "a file named '-' was written"
grep -q "Performance summary" err || fail "the summary should go to stderr"
grep -q "Step" out && fail "step lines on stdout"
case "$(head -c 1 out)$(tail -c 2 out | head -c 1)" in
    "{}") ;;
    *) fail "stdout is not one JSON object: $(head -c 80 out)" ;;
esac
flat out | grep -q '^{"schema_version":1,' || fail "the run JSON should start with schema_version 1"
flat out | grep -q '"status":"completed"' || fail "no status in the JSON"
flat out | grep -Eq '"omp_wait":"(auto|active|passive)"' || fail "config.omp_wait is not the setting"
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open("out")); assert d["steps_completed"] == 3, d' ||
        fail "stdout does not parse as the run JSON"
fi
# --omp-wait passive: the JSON says so, whatever the machine's load
timeout 120 "$BIN" train "${TINY[@]}" --omp-wait passive --quiet --json - >out 2>err </dev/null ||
    fail "--omp-wait passive"
flat out | grep -q '"omp_wait":"passive"' || fail "config.omp_wait should be passive"
# a closed stdout: the run ends, one line says the JSON could not be written, exit 1
timeout 120 "$BIN" train "${TINY[@]}" --quiet --json - 2>err </dev/null | true
rc=${PIPESTATUS[0]}
[ "$rc" -eq 1 ] && [ "$(wc -l <err)" -ge 1 ] && grep -q "^tinyfold: .*standard output" err ||
    fail "a closed stdout: exit $rc, stderr: $(cat err)"
# /dev/stdout would be replaced by the rename: refused in one line that names `--json -`
timeout 120 "$BIN" train "${TINY[@]}" --quiet --json /dev/stdout >out 2>err </dev/null
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && [ ! -s out ] &&
    grep -q "^tinyfold: --json: '/dev/stdout' is not accepted: .*(--json - writes the JSON to standard output)$" err ||
    fail "--json /dev/stdout: exit $rc, stderr: $(cat err)"
# bench too
timeout 300 "$BIN" bench --problems tiny --impls v1 --steps 1 --threads 2 --backend cpu --json - \
    >out 2>err </dev/null || fail "bench --json - exited $?"
[ "$(head -c 1 out)" = "{" ] && grep -q "problem" err || fail "bench: JSON on stdout, table on stderr"
# profile: summary.json has a schema version of its own
timeout 120 "$BIN" profile "${TINY[@]}" --out prof --quiet >out 2>err </dev/null || fail "profile: $(cat err)"
flat prof/summary.json | grep -q '^{"schema_version":1,' || fail "summary.json lacks schema_version"
flat prof/summary.json | grep -q '"run":{"schema_version":1,' || fail "summary.json's run lacks it"
[ $fails -eq 0 ] || exit 1
echo "test_json_stdout: ok"
