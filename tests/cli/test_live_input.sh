#!/usr/bin/env bash
# Inputs and stdout that change or fail under a running command:
#  - the --data file truncated, or overwritten with an out-of-range token,
#    while training runs: the run is unaffected (the file was read at open);
#  - stdout a closed pipe or a full device: the run still writes its files,
#    says so on stderr and exits non-zero (never killed by SIGPIPE).
# Usage: test_live_input.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
DRUN=(train --batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1
      --quiet --warmup-steps 0)

for change in truncate token; do
    cp "$ROOT/tests/fixtures/tiny.safetensors" d.st
    rm -f ck j
    timeout 300 "$BIN" "${DRUN[@]}" --num-steps 150 --data d.st --save ck --save-every 1 \
        --json j >out 2>err </dev/null &
    pid=$!
    for _ in $(seq 1 600); do [ -s ck ] && break; sleep 0.1; done
    [ -s ck ] || fail "$change: no step completed within 60 s"
    if [ $change = truncate ]; then
        truncate -s 100 d.st
    else
        # token 0 of sample 0 becomes -3 (I32 little-endian), in place
        st_put_bytes d.st "$(st_data_offset d.st)" '\xfd\xff\xff\xff'
    fi
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "$change mid-run: exit $rc: $(head -c 300 err)"
    tr -d ' \t\n' <j | grep -q '"status":"completed"' || fail "$change: --json status"
done
# The changed file is refused at the next open, with the reason.
timeout 60 "$BIN" "${DRUN[@]}" --num-steps 1 --data d.st >out 2>err </dev/null
[ $? -eq 2 ] && grep -q "msa_tokens.*-3" err || fail "a token of -3 should be refused at open: $(cat err)"

# A closed stdout: files written, one line on stderr, non-zero exit.
VERB=(train --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --warmup-steps 0 --num-steps 30 --log-every 1)
rm -f ck j
timeout 120 "$BIN" "${VERB[@]}" --save ck --json j 2>err </dev/null | head -2 >/dev/null
rc=${PIPESTATUS[0]}
[ "$rc" -ne 0 ] && [ "$rc" -ne 141 ] || fail "closed stdout: exit $rc (expected non-zero, not SIGPIPE)"
[ -s ck ] && [ -s j ] || fail "closed stdout: files not written"
grep -q "^tinyfold: standard output: write failed" err || fail "closed stdout: message: $(cat err)"
if [ -w /dev/full ]; then
    rm -f ck
    timeout 120 "$BIN" "${VERB[@]}" --save ck >/dev/full 2>err </dev/null
    rc=$?
    [ $rc -eq 1 ] || fail "stdout /dev/full: exit $rc, expected 1"
    [ -s ck ] || fail "stdout /dev/full: checkpoint not written"
    [ "$(wc -l <err)" -eq 1 ] || fail "stdout /dev/full: expected one line: $(cat err)"
fi
[ $fails -eq 0 ] || exit 1
echo "test_live_input: ok"
