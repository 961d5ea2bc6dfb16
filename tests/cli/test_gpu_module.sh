#!/usr/bin/env bash
# A GPU build's GPU backend is a module next to the binary (libtinyfold_cuda.so,
# libtinyfold_hip.so), loaded only when a GPU is asked for or found:
#  - `validate` loads it: every symbol resolves (RTLD_NOW) and its interface
#    is this build's, whatever the machine's devices;
#  - a CPU run maps none of the GPU libraries;
#  - without the module (a copy of the binary alone), --backend cuda/hip is
#    one line naming the missing file and the command that builds it (its
#    build directory's target tinyfold_gpu), and exit 2, and an auto run trains on
#    the CPU; a file of that name that is not the module is refused in one
#    line too.
# Skipped (77) in a build without a GPU backend.
# Usage: test_gpu_module.sh path/to/tinyfold
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib_st.sh"
cli_test_begin "${1:-}"
gpu=$("$BIN" validate 2>/dev/null | sed -n 's/^Build: backends cpu, \(cuda\|hip\)$/\1/p')
if [ -z "$gpu" ]; then
    echo "test_gpu_module: this build has no GPU backend: skipped"
    exit 77
fi
WORD=$([ "$gpu" = cuda ] && echo CUDA || echo HIP)
MODULE=libtinyfold_$gpu.so
[ -f "$(dirname "$BIN")/$MODULE" ] || fail "no $MODULE next to $BIN"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32 --quiet
      --warmup-steps 0)

# validate loads the module; its line is the device check's, not a load failure
"$BIN" validate >out 2>err
grep -q "^$WORD: " out || fail "validate: no $WORD line: $(cat out err)"
grep -q "cannot load" out && fail "validate: the module does not load: $(grep "^$WORD" out)"

# A CPU run maps no GPU library (nor the module).
"$BIN" train "${TINY[@]}" --backend cpu --num-steps 100000 >out 2>err </dev/null &
pid=$!
sleep 2
maps=$(grep -E "libtinyfold_(cuda|hip)|libcudart|libcublas|libcupti|libnccl|libamdhip64" \
    /proc/$pid/maps 2>/dev/null | awk '{print $6}' | sort -u)
[ -r /proc/$pid/maps ] || fail "the CPU run ended before its mappings were read: $(cat err)"
kill -INT $pid
wait $pid
[ -z "$maps" ] || fail "a CPU run maps GPU libraries: $maps"

# The binary without its module.
mkdir alone
cp "$BIN" alone/tinyfold
alone/tinyfold train "${TINY[@]}" --backend "$gpu" --num-steps 1 >out 2>err </dev/null
rc=$?
[ $rc -eq 2 ] || fail "--backend $gpu without the module: exit $rc, expected 2"
[ "$(wc -l <err)" -eq 1 ] || fail "--backend $gpu without the module: not one line: $(cat err)"
grep -q "^tinyfold: --backend: '$gpu' is not available: cannot load the $WORD backend: .*alone/$MODULE does not exist" err ||
    fail "--backend $gpu without the module: $(cat err)"
# ... and the command that builds it, in this binary's build directory (the
# target exists there: help lists it, nothing is built)
BUILT=$(cd "$(dirname "$BIN")" && pwd -P)
grep -qF "this binary's build makes it with: cmake --build $BUILT --target tinyfold_gpu (then copy $BUILT/$MODULE next to the binary)" err ||
    fail "--backend $gpu without the module does not say how to build it: $(cat err)"
if command -v cmake >/dev/null 2>&1 && [ -f "$BUILT/CMakeCache.txt" ]; then
    cmake --build "$BUILT" --target help 2>/dev/null | grep -qw tinyfold_gpu ||
        fail "the build directory $BUILT has no target tinyfold_gpu"
fi
alone/tinyfold train "${TINY[@]}" --num-steps 1 >out 2>err </dev/null ||
    fail "auto without the module: exit $?: $(cat err)"
alone/tinyfold validate >out 2>err
grep -q "^$WORD: not available: cannot load the $WORD backend: .*$MODULE" out ||
    fail "validate without the module: $(grep "^$WORD" out)"

# A shared object of that name that is not the module.
cp "$(dirname "$BIN")/libtinyfold_ompwait.so" "alone/$MODULE"
alone/tinyfold train "${TINY[@]}" --backend "$gpu" --num-steps 1 >out 2>err </dev/null
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] &&
    grep -q "cannot load the $WORD backend: .*$MODULE is not this build's" err ||
    fail "a foreign $MODULE: exit $rc: $(cat err)"
[ $fails -eq 0 ] || exit 1
echo "test_gpu_module: ok"
