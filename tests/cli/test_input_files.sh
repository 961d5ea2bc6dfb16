#!/usr/bin/env bash
# Every reader of a user file refuses what is not a regular file (a FIFO,
# /dev/zero, a directory) and a file above its stated size with one line and
# exit 2, at once: no wait on a FIFO, no read of an endless device.
# Readers: compare's and report's JSON and CSV (a profile directory's
# summary.json and trace.json included), train's --data, --load and
# --resume, grad's --load and --data.
# Usage: test_input_files.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1)
timeout 120 "$BIN" train "${TINY[@]}" --save ck --json a.json >/dev/null 2>err </dev/null ||
    { echo "FAIL: setup: $(cat err)"; exit 1; }
cp "$ROOT/tests/fixtures/tiny.safetensors" data.st
mkfifo fifo fifo.csv
mkdir emptydir
truncate -s $((1024 * 1024 * 1024 + 1)) big.json
truncate -s $((1024 * 1024 * 1024 + 1)) big.csv
truncate -s $((64 * 1024 * 1024 * 1024 + 1)) big.st
# a profile directory whose summary.json, then trace.json, is a FIFO
mkdir -p pf/prof pt
timeout 120 "$BIN" profile "${TINY[@]}" --out pt >/dev/null 2>err </dev/null ||
    { echo "FAIL: setup profile: $(cat err)"; exit 1; }
mkfifo pf/prof/summary.json
mkfifo pt/trace.json.new && mv pt/trace.json.new pt/trace.json

# refused WANT CMD...: exit 2 within 20 s (a hang is 124), one line with WANT
refused() {
    local want=$1
    shift
    timeout 20 "$BIN" "$@" >out 2>err </dev/null
    local rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <err)" -ne 1 ] || ! grep -q "^tinyfold: .*$want" err; then
        fail "tinyfold $* -> exit $rc, stderr: $(head -c 300 err)"
    fi
}
NREG="not a regular file"
for bad in fifo /dev/zero emptydir; do
    want=$NREG
    [ $bad = emptydir ] && want="summary.json\|$NREG"
    refused "$want" compare a.json $bad
    refused "$want" compare $bad a.json
    refused "$want" report $bad --out r.html
    [ $bad = emptydir ] && continue
    refused "$NREG" train "${TINY[@]}" --data $bad
    refused "$NREG" train "${TINY[@]}" --load $bad
    refused "$NREG" train --resume $bad --num-steps 1
    refused "$NREG" grad --load $bad --data data.st --out g.st
    refused "$NREG" grad --load ck --data $bad --out g.st
done
refused "$NREG" report fifo.csv --out r.html
refused "$NREG" compare a.json fifo.csv
refused "$NREG" report pf/prof --out r.html
refused "$NREG" compare a.json pf/prof
refused "$NREG" report pt --out r.html
# above the stated sizes (sparse files: nothing is read)
refused "more than the 1 GiB" compare a.json big.json
refused "more than the 1 GiB" compare a.json big.csv
refused "more than the 1 GiB" report big.json --out r.html
refused "more than the 1 GiB" report big.csv --out r.html
refused "more than the 64 GiB" train "${TINY[@]}" --load big.st
refused "more than the 64 GiB" train "${TINY[@]}" --data big.st
refused "more than the 64 GiB" grad --load big.st --data data.st --out g.st
[ ! -e r.html ] && [ ! -e g.st ] || fail "a refused command wrote its output"
[ $fails -eq 0 ] || exit 1
echo "test_input_files: ok"
