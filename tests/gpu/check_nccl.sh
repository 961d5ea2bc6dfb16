#!/usr/bin/env bash
# The CUDA backend's gradients through NCCL, on one GPU: one rank under a
# launcher (mpirun -np 1 when tinyfold has MPI, else the one-rank environment
# Open MPI gives its ranks) reduces through NCCL every step; with one rank the
# average is the gradient itself, so the losses must equal a plain run's bit
# for bit, in buckets of 64 KiB issued inside the backward (on the
# communication stream, after the lane's GEMMs that write them) and in one
# all-reduce after it, and the run JSON must report the communication time
# and its exposed part.
# Usage: tests/gpu/check_nccl.sh path/to/tinyfold   (a CUDA build with NCCL)
# Prints "PASS: ..." and exits 0, or "FAIL: ..." and exits 1.
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ldd "$BIN" | grep -q libnccl || { echo "FAIL: $BIN is not linked with NCCL"; exit 1; }
ARGS=(--backend cuda --batch-size 4 --num-steps 20 --warmup-steps 2 --quiet --no-progress)
losses() { tr -d ' \t\n' <"$1" | grep -o '"step":[0-9]*,"warmup":[a-z]*,"loss":[^,]*'; }
"$BIN" train "${ARGS[@]}" --json "$TMP/plain.json" >"$TMP/plain.out" 2>&1 ||
    { cat "$TMP/plain.out"; echo "FAIL: plain run"; exit 1; }
if command -v mpirun >/dev/null && ldd "$BIN" | grep -q libmpi; then
    L=(mpirun -np 1); [ "$(id -u)" = 0 ] && L=(mpirun --allow-run-as-root -np 1)
else
    L=(env OMPI_COMM_WORLD_SIZE=1)
fi
for kb in 64 0; do
    "${L[@]}" "$BIN" train "${ARGS[@]}" --dist-bucket-kb $kb --json "$TMP/nccl$kb.json" \
        >"$TMP/nccl.out" 2>&1 ||
        { cat "$TMP/nccl.out"; echo "FAIL: one rank through NCCL (${L[*]}), --dist-bucket-kb $kb"; exit 1; }
    grep 'communication' "$TMP/nccl.out"
    tr -d ' \t\n' <"$TMP/nccl$kb.json" | grep -q '"comm_ms":[^,]*,"exposed_comm_ms":' ||
        { echo "FAIL: no comm_ms and exposed_comm_ms in the run JSON: NCCL did not run"; exit 1; }
    [ "$(losses "$TMP/plain.json")" = "$(losses "$TMP/nccl$kb.json")" ] ||
        { echo "FAIL: losses differ from the plain run (--dist-bucket-kb $kb)"
          diff <(losses "$TMP/plain.json" | tr '{' '\n') \
            <(losses "$TMP/nccl$kb.json" | tr '{' '\n') | head; exit 1; }
done
echo "PASS: 22 steps through NCCL, in buckets and in one all-reduce, equal the plain run bit for bit"
