#!/usr/bin/env bash
# Outputs are checked before the first step: an output that is an input or
# another output (by path, "./" or "../" spelling, hard link), an existing
# FIFO, device, symlink or directory, a name too long with its temporary
# suffix: exit 2, one line, nothing trained, every file as it was.
# Usage: test_outputs.sh path/to/tinyfold
set -u
BIN=$(cd "$(dirname "${1:?usage: $0 path/to/tinyfold}")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fails=0
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1)
DTINY=(--batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1
       --quiet --warmup-steps 0 --num-steps 1)

# refused WHAT-IN-MESSAGE CMD...: exit 2, one line naming it, no step line.
refused() {
    local want=$1
    shift
    timeout 120 "$BIN" "$@" >out 2>err </dev/null
    local rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <err)" -ne 1 ] || ! grep -q "^tinyfold: .*$want" err ||
        grep -q "Step" out; then
        echo "FAIL: tinyfold $* -> exit $rc, stderr: $(head -c 300 err)"
        fails=$((fails + 1))
    fi
}

timeout 120 "$BIN" train "${TINY[@]}" --save ck >/dev/null 2>&1 || { echo "FAIL: setup run"; exit 1; }
cp "$ROOT/tests/fixtures/tiny.safetensors" data.st
sum_before=$(cksum ck data.st)

# An output equal to an input, however spelt.
refused "the --data file" train "${DTINY[@]}" --data data.st --save data.st
refused "the --data file" train "${DTINY[@]}" --data data.st --json ./data.st
refused "the --resume checkpoint" train "${TINY[@]}" --resume ck --save "../$(basename "$TMP")/ck"
refused "the --load checkpoint" train "${TINY[@]}" --load ck --json "$TMP/ck"
ln ck hard
refused "the --load checkpoint" train "${TINY[@]}" --load ck --save hard
refused "the --data file" grad --load ck --data data.st --out data.st
refused "the --load checkpoint" grad --load ck --data data.st --out ck
# Two outputs of one run.
refused "--save's checkpoint" train "${TINY[@]}" --save x --json x
mkdir -p prof
refused "--json's file" profile "${TINY[@]}" --out prof --json prof/summary.json
[ "$(cksum ck data.st)" = "$sum_before" ] || { echo "FAIL: an input changed"; fails=$((fails + 1)); }
[ ! -e x ] || { echo "FAIL: a refused run wrote x"; fails=$((fails + 1)); }

# Outputs that exist and are not regular files.
mkfifo fifo
refused "a FIFO" train "${TINY[@]}" --json fifo
refused "a FIFO" train "${TINY[@]}" --save fifo
[ -p fifo ] || { echo "FAIL: the FIFO was replaced"; fails=$((fails + 1)); }
# as root a private copy of /dev/null's node: a broken check must not rename
# a file over the machine's /dev/null
dev=/dev/null
mknod devnull c 1 3 2>/dev/null && dev=devnull
refused "a character device" train "${TINY[@]}" --json $dev
[ -c $dev ] || { echo "FAIL: $dev is no longer a device"; fails=$((fails + 1)); }
ln -s ck link
refused "a symbolic link" train "${TINY[@]}" --save link
[ -L link ] || { echo "FAIL: the symlink was replaced"; fails=$((fails + 1)); }
mkdir adir
refused "a directory" train "${TINY[@]}" --json adir
refused "directory does not exist" train "${TINY[@]}" --json nodir/x.json

# Names: a last component that fits alone but not with ".tmp.<pid>", and
# one over the file system's limit: refused before training.
long=$(printf 'a%.0s' $(seq 1 250))
refused "temporary suffix" train "${TINY[@]}" --save "$long"
refused "temporary suffix" train "${TINY[@]}" --json "$(printf 'b%.0s' $(seq 1 300))"
# A long but valid name is saved (with its optimizer file, 18 bytes longer),
# and its message (if any) is not cut.
ok=$(printf 'c%.0s' $(seq 1 212))
timeout 120 "$BIN" train "${TINY[@]}" --save "$ok" >out 2>err </dev/null ||
    { echo "FAIL: a 212-byte name should be saved: $(cat err)"; fails=$((fails + 1)); }
[ -s "$ok" ] && [ -s "$ok.optim.safetensors" ] ||
    { echo "FAIL: no checkpoint pair under the 212-byte name"; fails=$((fails + 1)); }
# 230 bytes fit, but not with the optimizer file's suffix: refused before the run, naming it.
refused "optimizer file" train "${TINY[@]}" --save "$(printf 'd%.0s' $(seq 1 230))"
# The optimizer file is an output like the checkpoint: it must not replace an input.
cp data.st x.optim.safetensors
refused "the --data file" train "${DTINY[@]}" --data x.optim.safetensors --save x.safetensors
refused "the --resume checkpoint's optimizer file" train "${TINY[@]}" --resume ck \
    --save ck.optim.safetensors

# Nothing left behind by the creatability checks.
ls | grep -q '\.tmp\.' && { echo "FAIL: temporary files left: $(ls | grep '\.tmp\.')"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
echo "test_outputs: ok"
