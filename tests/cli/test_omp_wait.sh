#!/usr/bin/env bash
# --omp-wait: the OpenMP wait policy is set before libgomp reads its
# environment (src/ompwait/tf_omp_wait.c). libgomp prints what it read with
# OMP_DISPLAY_ENV: auto spins briefly on free processors and sleeps at once
# on busy ones unless the environment chose, active and passive replace the
# environment's choice, the header names the policy, and a bad value exits 2
# with one line.
# Usage: test_omp_wait.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
cases=0
fail() { fails=$((fails + 1)); printf 'FAIL: %s\n' "$*"; }

# the auto spin count, from the one place that defines it
AUTO=$(sed -n 's/^#define TF_OMP_WAIT_AUTO_SPIN \([0-9]*\).*/\1/p' src/ompwait/tf_omp_wait.h)
[ -n "$AUTO" ] || fail "no TF_OMP_WAIT_AUTO_SPIN in src/ompwait/tf_omp_wait.h"

TINY=(--backend cpu --threads 2 --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1
      --msa-dim 8 --pair-dim 8 --num-steps 1 --warmup-steps 0)
# ENV... -- ARGS...: libgomp's GOMP_SPINCOUNT and tinyfold's header line
run() {
    local env=()
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "${env[@]}" OMP_DISPLAY_ENV=verbose \
        timeout 60 "$BIN" train "${TINY[@]}" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
}
# EXPECT_SPIN EXPECT_HEADER ENV... -- ARGS...
check() {
    local spin=$1 header=$2
    shift 2
    cases=$((cases + 1))
    run "$@"
    local rc=$? got
    got=$(sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" "$TMP/err")
    [ "$rc" -eq 0 ] || fail "$* (exit $rc): $(head -c 300 "$TMP/err")"
    [ "$got" = "$spin" ] || fail "$*: libgomp read GOMP_SPINCOUNT '$got', expected '$spin'"
    grep -qF -- "OpenMP wait: $header" "$TMP/out" ||
        fail "$*: no 'OpenMP wait: $header' in the header: $(grep -i 'wait' "$TMP/out")"
}
# auto on this machine as it is: either choice, and libgomp read what the header says
auto_case() {
    cases=$((cases + 1))
    run -- "$@"
    local got
    got=$(sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" "$TMP/err")
    if grep -qF "OpenMP wait: auto: spin $AUTO times, then sleep (the processors were free" "$TMP/out"; then
        [ "$got" = "$AUTO" ] || fail "auto $*: spins, but libgomp read GOMP_SPINCOUNT '$got'"
    elif grep -qE "OpenMP wait: auto: sleep at once \([0-9]+ other tasks? (was|were) running on the [0-9]+ processors? at start\)" "$TMP/out"; then
        [ "$got" = 0 ] || fail "auto $*: sleeps, but libgomp read GOMP_SPINCOUNT '$got'"
    else
        fail "auto $*: header: $(grep -i 'wait' "$TMP/out")"
    fi
}
auto_case
auto_case --omp-wait auto
# auto with half the processors or more held by busy loops: it sleeps at once
procs=$(nproc)
loops=()
for _ in $(seq $(((procs + 1) / 2))); do
    bash -c 'while :; do :; done' &
    loops+=($!)
done
sleep 0.2
check 0 "auto: sleep at once" --
for p in "${loops[@]}"; do kill "$p"; wait "$p" 2>/dev/null; done
check 0 "passive" -- --omp-wait passive
check 0 "passive" -- --omp-wait=passive
check 30000000000 "active" -- --omp-wait active
# the last one given applies, as for every option
check 0 "passive" -- --omp-wait active --omp-wait passive
# auto keeps the environment's choice; an explicit policy replaces it
check 300000 "GOMP_SPINCOUNT=300000 (the environment's" GOMP_SPINCOUNT=300000 --
check 0 "OMP_WAIT_POLICY=passive (the environment's" OMP_WAIT_POLICY=passive --
check 0 "passive: sleep at once (--omp-wait; replaces GOMP_SPINCOUNT=300000)" \
    GOMP_SPINCOUNT=300000 -- --omp-wait passive

# validate and bench say it too
cases=$((cases + 1))
env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY timeout 60 "$BIN" validate --backend cpu --omp-wait passive \
    >"$TMP/out" 2>&1 </dev/null
grep -q '^OpenMP wait: passive' "$TMP/out" || fail "validate: $(grep -i wait "$TMP/out")"
cases=$((cases + 1))
env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY timeout 120 "$BIN" bench --backend cpu --threads 1 \
    --problems tiny --impls v1 --steps 1 >"$TMP/out" 2>&1 </dev/null
grep -q "^OpenMP wait: auto: " "$TMP/out" || fail "bench: $(grep -i wait "$TMP/out")"

# bad values: one line, exit 2, nothing on stdout
bad() {
    local expect=$1
    shift
    cases=$((cases + 1))
    timeout 60 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne 2 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ] || ! grep -qF -- "$expect" "$TMP/err" ||
        [ -s "$TMP/out" ]; then
        fail "tinyfold $* (exit $rc): $(head -c 300 "$TMP/err")"
    fi
}
bad "tinyfold: --omp-wait: 'spin' is not accepted: expected active, passive or auto" \
    train --omp-wait spin
bad "tinyfold: --omp-wait: '' is not accepted: expected active, passive or auto" \
    validate --omp-wait=
bad "--omp-wait" bench --omp-wait
bad "--omp-wait" train --omp-wait --num-steps 1

echo "$((cases - fails)) of $cases passed"
[ "$fails" -eq 0 ]
