#!/usr/bin/env bash
# Under an address-space limit (ulimit -v) too small for OpenBLAS's buffers
# a run ends at once with one line naming the limit and exit 2, never spins
# in OpenBLAS's allocator (which retries a failed allocation for ever): at
# start-up (its threads' buffers) and when --threads asks for more.
# Usage: test_address_limit.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --quiet --warmup-steps 0 --num-steps 1)
# limited KIB THREADS: the run under ulimit -v KIB with OMP_NUM_THREADS THREADS
limited() {
    (ulimit -v "$1" && OMP_NUM_THREADS=$2 timeout 30 "$BIN" train "${TINY[@]}" --threads "$2" \
        >out 2>err </dev/null)
}
# 97 MiB: not even the start-up buffers; then limits where the start-up
# passes and the run's spare buffer may not fit (by the binary's size): a
# refusal in one line or a run, never a spin (124) or a crash. A GPU build
# needs more at start (cuBLAS is linked, not loaded on demand): there the
# dynamic loader may be the one to refuse, also in one line.
for kib in 100000 250000 300000 400000; do
    limited $kib 1
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q "^tinyfold: .*ulimit -v" err; then
        continue
    fi
    [ $rc -eq 0 ] && [ $kib -gt 100000 ] && continue
    # a GPU build links its libraries: the loader may refuse first, in one line
    if [ $rc -eq 127 ] && [ "$(wc -l <err)" -eq 1 ] &&
        grep -q "error while loading shared libraries: .*failed to map segment" err; then
        continue
    fi
    fail "ulimit -v $kib: exit $rc (124: it spun), stderr: $(head -c 300 err)"
done
# A limit with room runs.
limited 4000000 1 || fail "ulimit -v 4000000: $(cat err)"
[ $fails -eq 0 ] || exit 1
echo "test_address_limit: ok"
