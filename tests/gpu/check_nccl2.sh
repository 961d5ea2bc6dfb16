#!/usr/bin/env bash
# The CUDA backend's gradients through NCCL on two GPUs of one node (two
# ranks under mpirun):
#  - buckets issued inside the backward against one all-reduce after it: the
#    same weights bit for bit (with two ranks each element's sum is a + b
#    whichever way NCCL splits the message, and ncclAvg then halves it; a
#    bucket issued before its gradients, the lane's included, were final
#    would differ);
#  - with --graph the 64 KiB buckets captured into the backward's graph and
#    replayed: the same weights again, bit for bit (the same plan, the same
#    ncclAvg);
#  - comm_ms and exposed_comm_ms in the run JSON, exposed <= comm, eager
#    and replayed;
#  - a rank stopped (SIGSTOP) mid-run: the other ends within --dist-timeout
#    and a margin, non-zero, with one line naming itself and the timeout,
#    eager and while replaying graphs (the host's wait for a replayed step
#    polls the reduction with the deadline).
# Usage: tests/gpu/check_nccl2.sh path/to/tinyfold   (a CUDA build with NCCL and MPI)
# Prints "PASS: ..." and exits 0, or "FAIL: ..." and exits 1.
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
DIFF=$(dirname "$BIN")/st_diff
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; tail -5 "$TMP/out" 2>/dev/null; exit 1; }
ldd "$BIN" | grep -q libnccl || fail "$BIN is not linked with NCCL"
ldd "$BIN" | grep -q libmpi || fail "$BIN is not linked with MPI"
[ -x "$DIFF" ] || fail "no $DIFF"
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || fail "fewer than 2 GPUs"
L=(mpirun); [ "$(id -u)" = 0 ] && L=(mpirun --allow-run-as-root)
MPI=("${L[@]}" -np 2)
ARGS=(--backend cuda --batch-size 8 --num-steps 10 --warmup-steps 2 --quiet --no-progress)
losses() { tr -d ' \t\n' <"$1" | grep -o '"step":[0-9]*,"warmup":[a-z]*,"loss":[^,]*'; }
for run in 64 0 64g; do
    kb=${run%g}; extra=(); [ "$run" = "$kb" ] || extra=(--graph)
    "${MPI[@]}" "$BIN" train "${ARGS[@]}" "${extra[@]}" --dist-bucket-kb $kb \
        --json "$TMP/b$run.json" --save "$TMP/b$run.st" >"$TMP/out" 2>&1 ||
        fail "two ranks, --dist-bucket-kb $kb ${extra[*]}"
    grep 'communication' "$TMP/out"
done
for run in 0 64g; do
    w=$("$DIFF" "$TMP/b64.st" "$TMP/b$run.st") || fail "st_diff: $w"
    case "$w" in "max_abs_diff 0 "*) ;; *) fail "buckets and run $run differ: $w" ;; esac
    [ "$(losses "$TMP/b64.json")" = "$(losses "$TMP/b$run.json")" ] || fail "the losses differ ($run)"
done
for run in 64 64g; do
    tr -d ' \t\n' <"$TMP/b$run.json" | grep -o '"comm_ms":[^,]*,"exposed_comm_ms":[^,}]*' |
        sed 's/"comm_ms":\([^,]*\),"exposed_comm_ms":\(.*\)/\1 \2/' >"$TMP/comm"
    [ -s "$TMP/comm" ] || fail "no comm_ms and exposed_comm_ms in the run JSON ($run)"
    awk '{ if (!($1 > 0 && $2 >= 0 && $2 <= $1 + 1e-3)) exit 1 }' "$TMP/comm" ||
        fail "comm_ms > 0 and 0 <= exposed_comm_ms <= comm_ms expected ($run): $(tr '\n' ' ' <"$TMP/comm")"
done
# a stopped rank: rank 0 must give up after --dist-timeout 5, eager and replaying
took=""
for extra in "" --graph; do
    start=$SECONDS
    "${L[@]}" -np 1 "$BIN" train "${ARGS[@]}" $extra --num-steps 100000 --dist-timeout 5 : \
        -np 1 bash -c '"$0" "$@" & p=$!; sleep 20; kill -STOP $p; wait $p' "$BIN" train \
        "${ARGS[@]}" $extra --num-steps 100000 --dist-timeout 5 >"$TMP/out" 2>&1
    rc=$?
    [ $rc -ne 0 ] || fail "a stopped rank should end the job non-zero ($extra)"
    [ $((SECONDS - start)) -lt 120 ] || fail "the job outlived its stopped rank by $((SECONDS - start)) s ($extra)"
    grep -q '^tinyfold: rank 0 of 2: .*no answer from the other ranks within 5 s' "$TMP/out" ||
        fail "no line saying rank 0 timed out ($extra)"
    took="$took $((SECONDS - start)) s"
done
echo "PASS: buckets = one all-reduce = buckets replayed from the graph, bit for bit ($w); a stopped rank ends the job in$took (eager, --graph)"
