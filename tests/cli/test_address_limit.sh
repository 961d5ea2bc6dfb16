#!/usr/bin/env bash
# Under an address-space limit (ulimit -v) too small for OpenBLAS's buffers
# a run ends at once with one line naming the limit and exit 2, never spins
# in OpenBLAS's allocator (which retries a failed allocation for ever): at
# start-up (its threads' buffers) and when --threads asks for more. A GPU
# build's CPU run fits a limit its GPU libraries alone would exceed.
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
# refusal in one line or a run, never a spin (124) or a crash.
for kib in 100000 250000 300000 400000; do
    limited $kib 1
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q "^tinyfold: .*ulimit -v" err; then
        continue
    fi
    [ $rc -eq 0 ] && [ $kib -gt 100000 ] && continue
    fail "ulimit -v $kib: exit $rc (124: it spun), stderr: $(head -c 300 err)"
done
# A limit with room runs.
limited 4000000 1 || fail "ulimit -v 4000000: $(cat err)"

# A GPU build's CPU run maps no GPU library (they are in the GPU module,
# loaded for a GPU run only), so it starts where the CPU-only build does.
# The limit: what a CPU-only build's run of this problem needs on one thread
# (OpenBLAS's two buffers of 129 MiB, the CPU libraries and the run:
# bench/RESULTS.md has the figure, "GPU libraries loaded on demand"), and
# 1.6 times that for another machine's libraries. The GPU libraries a GPU
# build used to link (CUDA runtime, cuBLAS, cuBLASLt, CUPTI, NCCL) take more
# than the whole limit by themselves.
if "$BIN" validate 2>/dev/null | grep -q "^Build: backends cpu, \(cuda\|hip\)"; then
    (ulimit -v 600000 && OMP_NUM_THREADS=1 timeout 60 "$BIN" train --batch-size 1 --seq-len 16 \
        --num-seqs 4 --num-blocks 1 --num-steps 2 --warmup-steps 0 --threads 1 >out 2>err </dev/null)
    rc=$?
    [ $rc -eq 0 ] || fail "GPU build, CPU run under ulimit -v 600000: exit $rc: $(head -c 300 err)"
    grep -q "Backend: cpu" out || fail "GPU build under ulimit -v 600000: not a CPU run: $(grep Backend out)"
fi
[ $fails -eq 0 ] || exit 1
echo "test_address_limit: ok"
