#!/usr/bin/env bash
# Data parallel over MPI: two ranks against one at the same global batch (the
# loss of every step and the weights after 3 steps, within the bound derived
# below), the gradients in buckets overlapping the backward against one
# all-reduce after it (bit for bit, see below; also with a late weight-gradient
# lane, tests/mpi/dist_lane.c), the communication times in
# the JSON and the trace, the start-up refusals, and a dead or stopped rank
# ending the job.
# Skipped (77) without mpirun or with a tinyfold built without MPI.
# Usage: test_mpi.sh path/to/tinyfold   (st_diff is built next to it)
#
# The bound (NOTES.md, Tolerances). Two ranks compute the same samples as one
# process (each draws its slice of the global batch, tf_data_batch_slice);
# what changes is the order of the sums over the batch: the loss's mean and
# the weight gradients' sums over rows (GEMMs, bias and LayerNorm sums), then
# one exact halving. n = B*N*N = 1024 rows, u = 2^-24, gamma_n = n u / (1 - n u).
# - Step-1 loss (before any update), a mean of positive terms: |dL| <= 2 gamma_n L.
# - A gradient element's relative error: rho <= gamma_n * kappa, with kappa =
#   sum|a_i| / |sum a_i| its cancellation; we take kappa <= 100 (an element
#   cancelling worse can flip AdamW's update sign: the test would then fail and
#   say so rather than widen the bound).
# - AdamW's step lr * m^/(sqrt(v^)+eps): m^ is linear and sqrt(v^) half-power in
#   the gradients, so its relative change is <= 2 rho, and |m^/sqrt(v^)| <=
#   sqrt(t) at step t (Cauchy-Schwarz): over S steps the weights move apart by
#   <= 2 lr rho sum_{t<=S} sqrt(t), plus one rounding of w per step once the
#   updates differ at all: S ulp(max|w|). tau_w = S ulp + 2 lr rho sum sqrt(t).
# - Later losses: the weights differ by tau_w, tau_w / lr of one update, so
#   |dL_t| <= 2 gamma_n L_t + (tau_w / lr) max_k |L_k - L_{k-1}|.
# A run that reduced nothing (each rank its own half) is ~1e-3 apart in the
# weights after 3 steps, ~100 tau_w.
#
# Buckets against one all-reduce: each gradient element is reduced once
# either way, and with two ranks its sum is a + b whichever algorithm MPI
# picks for the message's size (IEEE addition is commutative, the halving
# exact), so the weights must agree bit for bit. A bucket issued one stage
# before its gradients were final measured 9.5e-4 apart. (With P > 2 the order
# of the P terms may change with the message size: within 2 gamma_(P-1)
# sum_r |g_r| per element, not tested here.)
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
DIFF=$(dirname "$BIN")/st_diff
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
ldd "$BIN" 2>/dev/null | grep -q libmpi || { echo "SKIP: tinyfold built without MPI"; exit 77; }
[ -x "$DIFF" ] || { echo "FAIL: no $DIFF"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*"
    cat "$TMP/err" 2>/dev/null
    exit 1
}
# containers often forbid the cross-process memory copy Open MPI tries first
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)
LR=3e-4
S=3
TINY=(--batch-size 4 --seq-len 16 --num-seqs 4 --num-blocks 1 --msa-dim 32 --pair-dim 16
      --backend cpu --threads 1 --warmup-steps 0 --learning-rate $LR --quiet --no-progress)
run() { timeout 300 "$@" >"$TMP/out" 2>"$TMP/err" </dev/null; }
losses() { # FILE -> "step loss" lines
    tr -d ' \t\n' <"$1" | grep -o '"step":[0-9]*,"warmup":[a-z]*,"loss":[^,]*' |
        sed 's/"step":\([0-9]*\),"warmup":[a-z]*,"loss":\(.*\)/\1 \2/'
}

# ---- equivalence: P=2 against P=1 at the same global batch
run "$BIN" train "${TINY[@]}" --num-steps $S --json "$TMP/p1.json" --save "$TMP/p1.st" ||
    fail "one process"
run "${MPI[@]}" "$BIN" train "${TINY[@]}" --num-steps $S --json "$TMP/p2.json" \
    --save "$TMP/p2.st" --dist-check-every 1 --dist-bucket-kb 1 ||
    fail "two ranks (the ranks' weights are compared each step)"
[ "$(grep -c 'Performance summary' "$TMP/out")" -eq 1 ] || fail "the summary should be printed once (rank 0)"
tr -d ' \t\n' <"$TMP/p2.json" | grep -q '"ranks":2' || fail "the JSON should say ranks 2"
tr -d ' \t\n' <"$TMP/p2.json" | grep -q '"batch":4' || fail "the JSON should hold the global batch"
# every step has its communication time and the exposed part of it, <= it
comm=$(tr -d ' \t\n' <"$TMP/p2.json" | grep -o '"comm_ms":[^,]*,"exposed_comm_ms":[^,}]*' |
       sed 's/"comm_ms":\([^,]*\),"exposed_comm_ms":\(.*\)/\1 \2/')
[ "$(echo "$comm" | grep -c .)" -eq $((S + 1)) ] ||
    fail "expected comm_ms and exposed_comm_ms in the summary and in each of the $S steps: [$comm]"
echo "$comm" | awk '{ if (!($1 > 0 && $2 >= 0 && $2 <= $1 + 1e-3)) exit 1 }' ||
    fail "comm_ms > 0 and 0 <= exposed_comm_ms <= comm_ms expected: [$comm]"
# the same run with one all-reduce after the backward: the same bits
run "${MPI[@]}" "$BIN" train "${TINY[@]}" --num-steps $S --json "$TMP/p2one.json" \
    --save "$TMP/p2one.st" --dist-bucket-kb 0 || fail "two ranks, one all-reduce"
w=$("$DIFF" "$TMP/p2.st" "$TMP/p2one.st") || fail "st_diff: $w"
case "$w" in "max_abs_diff 0 "*) ;; *) fail "buckets and one all-reduce differ: $w (expected 0)" ;; esac
[ "$(losses "$TMP/p2.json")" = "$(losses "$TMP/p2one.json")" ] ||
    fail "buckets and one all-reduce: the losses differ"
echo "buckets against one all-reduce: $w"
# the same with a weight-gradient lane that runs as late as it may
LANE=$(dirname "$BIN")/dist_lane
[ -x "$LANE" ] || fail "no $LANE"
run "${MPI[@]}" "$LANE" || fail "buckets against a late lane: $(cat "$TMP/out")"
cat "$TMP/out"
w=$("$DIFF" "$TMP/p1.st" "$TMP/p2.st") || fail "st_diff: $w"
l1=$(losses "$TMP/p1.json"); l2=$(losses "$TMP/p2.json")
[ "$(echo "$l2" | wc -l)" -eq $S ] || fail "two ranks: expected $S steps, got [$l2]"
paste <(echo "$l1") <(echo "$l2") | awk -v lr=$LR -v S=$S -v w="$w" '
    BEGIN { u = 2^-24; n = 4 * 16 * 16; g = n * u / (1 - n * u); rho = 100 * g
            st = 0; for (t = 1; t <= S; t++) st += sqrt(t)
            split(w, f, " "); d = f[2]; wmax = f[4]; ulp = 2^(int(log(wmax) / log(2)) - 23)
            tau = S * ulp + 2 * lr * rho * st; bad = 0 }
    { L[NR] = $2; dl = $2 - $4; if (dl < 0) dl = -dl; DL[NR] = dl }
    END {
        jump = 0; for (k = 2; k <= NR; k++) { j = L[k] - L[k-1]; if (j < 0) j = -j; if (j > jump) jump = j }
        for (k = 1; k <= NR; k++) {
            b = 2 * g * L[k] + (k > 1 ? tau / lr * jump : 0)
            printf "step %d: |dL| %.3g bound %.3g\n", k, DL[k], b
            if (!(DL[k] <= b)) bad = 1
        }
        printf "weights: max |dw| %.3g bound %.3g\n", d, tau
        if (!(d <= tau)) bad = 1
        exit bad }' >"$TMP/bound" || { cat "$TMP/bound"; fail "P=2 and P=1 differ beyond the bound"; }
cat "$TMP/bound"

# ---- --resume with another rank count: 2 ranks resume what 1 process saved
run "$BIN" train "${TINY[@]}" --num-steps 2 --save "$TMP/half.st" || fail "first part"
run "${MPI[@]}" "$BIN" train "${TINY[@]}" --resume "$TMP/half.st" --num-steps 1 \
    --save "$TMP/resumed.st" || fail "resume on two ranks"
w=$("$DIFF" "$TMP/p1.st" "$TMP/resumed.st") || fail "st_diff: $w"
awk -v w="$w" -v lr=$LR 'BEGIN { split(w, f, " "); exit !(f[2] <= 2e-5) }' ||
    fail "resumed on two ranks: $w (expected within the bound above)"

# ---- profile on two ranks: one trace, a process per rank
run "${MPI[@]}" "$BIN" profile "${TINY[@]}" --num-steps 2 --out "$TMP/prof" --dist-bucket-kb 1 ||
    fail "profile on two ranks"
grep -q '"name":"rank 1 host"' "$TMP/prof/trace.json" || fail "the trace has no process for rank 1"
grep -q '"pid":101,' "$TMP/prof/trace.json" || fail "rank 1's events are not in the merged trace"
grep -q '"name":"allreduce"' "$TMP/prof/trace.json" || fail "no allreduce region in the trace"
grep -q '"thread_name","ph":"M","pid":101,"tid":4,"args":{"name":"allreduce"}' "$TMP/prof/trace.json" ||
    fail "no all-reduce track for rank 1 in the trace"
grep -q '"name":"allreduce","ph":"X","pid":1,"tid":4,.*"args":{"bytes":[1-9]' "$TMP/prof/trace.json" ||
    fail "no all-reduce span with its bytes on rank 0's track"
tr -d ' \t\n' <"$TMP/prof/summary.json" | grep -q '"exposed_comm_ms":' ||
    fail "the profile's summary.json has no exposed_comm_ms"
tail -c 4 "$TMP/prof/trace.json" | grep -q ']}' || fail "the merged trace is not closed"

# ---- refusals at start-up, one line on rank 0, exit 2
run "${MPI[@]}" "$BIN" train "${TINY[@]}" --batch-size 3 --num-steps 1
rc=$?
[ $rc -ne 0 ] || fail "--batch-size 3 on two ranks should be refused"
[ "$(grep -c '^tinyfold: --batch-size' "$TMP/err")" -eq 1 ] || fail "one line expected for --batch-size 3"
run mpirun $( [ "$(id -u)" = 0 ] && echo --allow-run-as-root ) --oversubscribe \
    -np 1 "$BIN" train "${TINY[@]}" --num-steps 1 --seed 1 : \
    -np 1 "$BIN" train "${TINY[@]}" --num-steps 1 --seed 2
[ $? -ne 0 ] || fail "different seeds on the two ranks should be refused"
grep -q '^tinyfold: the 2 ranks were started with different configurations' "$TMP/err" ||
    fail "no line naming the different configurations"

# ---- a killed rank ends the job; a stopped one is caught by --dist-timeout
start=$SECONDS
run mpirun $( [ "$(id -u)" = 0 ] && echo --allow-run-as-root ) --oversubscribe \
    -np 1 "$BIN" train "${TINY[@]}" --num-steps 100000 : \
    -np 1 bash -c 'timeout -s KILL 3 "$0" "$@"' "$BIN" train "${TINY[@]}" --num-steps 100000
[ $? -ne 0 ] || fail "a killed rank should end the job non-zero"
[ $((SECONDS - start)) -lt 120 ] || fail "the job outlived its killed rank by minutes"
start=$SECONDS
run mpirun $( [ "$(id -u)" = 0 ] && echo --allow-run-as-root ) --oversubscribe \
    -np 1 "$BIN" train "${TINY[@]}" --num-steps 100000 --dist-timeout 2 : \
    -np 1 bash -c '"$0" "$@" & p=$!; sleep 3; kill -STOP $p; wait $p' "$BIN" train "${TINY[@]}" \
    --num-steps 100000 --dist-timeout 2
[ $? -ne 0 ] || fail "a stopped rank should end the job non-zero"
[ $((SECONDS - start)) -lt 120 ] || fail "the job outlived its stopped rank by minutes"
grep -q '^tinyfold: rank 0 of 2: .*no answer from the other ranks within 2 s' "$TMP/err" ||
    fail "no line saying the rank timed out"
echo "PASS"
