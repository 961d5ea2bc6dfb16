#!/usr/bin/env bash
# SIGINT / SIGTERM during training: the run stops after the current step,
# writes --json (status "interrupted", the steps done) and a checkpoint that
# resumes, prints one line and exits 130 / 143, with no temporary file left.
# A step that does not end within the first signal's deadline: the run exits
# then, writing nothing and leaving the outputs as they were. A second signal
# exits at once and still removes the temporary files. A stale
# "<out>.tmp.<pid>" of a dead process is removed at the next save.
# Usage: test_signals.sh path/to/tinyfold
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib_st.sh"
cli_test_begin "${1:-}"
# Steps long enough that the signal lands mid-run, short enough for CI.
RUN=(train --batch-size 1 --seq-len 16 --num-seqs 4 --num-blocks 1 --msa-dim 16 --pair-dim 32
     --backend cpu --threads 1 --quiet --warmup-steps 1 --num-steps 100000)

for sig in INT TERM; do
    want=$([ $sig = INT ] && echo 130 || echo 143)
    rm -f ck j ck.started
    # --save-every 1 makes a checkpoint after each step: its presence says
    # training is under way.
    timeout --foreground 300 "$BIN" "${RUN[@]}" --save ck --save-every 1 --json j >out 2>err </dev/null &
    pid=$!
    for _ in $(seq 1 600); do [ -s ck ] && break; sleep 0.1; done
    [ -s ck ] || fail "SIG$sig: no step completed within 60 s"
    kill -$sig $pid
    wait $pid
    rc=$?
    [ $rc -eq "$want" ] || fail "SIG$sig: exit $rc, expected $want (stderr: $(cat err))"
    [ "$(wc -l <err)" -eq 1 ] || fail "SIG$sig: expected one line on stderr: $(cat err)"
    grep -q "^tinyfold: .*SIG$sig after [0-9]* of 100001 steps.*wrote --save and --json" err ||
        fail "SIG$sig: message: $(cat err)"
    tr -d ' \t\n' <j | grep -q '"status":"interrupted"' || fail "SIG$sig: --json status"
    done_steps=$(tr -d ' \t\n' <j | grep -o '"steps_completed":[0-9]*' | cut -d: -f2)
    [ -n "$done_steps" ] && [ "$done_steps" -ge 1 ] || fail "SIG$sig: steps_completed '$done_steps'"
    ls | grep -q '\.tmp\.' && fail "SIG$sig: temporary files left: $(ls | grep '\.tmp\.')"
    # The checkpoint is the last completed step's: it resumes there.
    timeout 120 "$BIN" train --resume ck --backend cpu --threads 1 --quiet --num-steps 1 \
        --json r.json >out 2>err </dev/null || fail "SIG$sig: the checkpoint does not resume: $(cat err)"
    first=$(tr -d ' \t\n' <r.json | grep -o '"step":[0-9]*' | head -1 | cut -d: -f2)
    [ "$first" = "$done_steps" ] || fail "SIG$sig: resumed at step $first, expected $done_steps"
done

# A signal during a step that --save-every saves: that checkpoint is the
# run's, written once (every rename onto ck is one step's). strace counts the
# renames; without it the check is skipped.
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
    rm -f ck j trace.log
    strace -f -o trace.log -e trace=rename,renameat,renameat2 \
        "$BIN" "${RUN[@]}" --save ck --save-every 1 --json j >out 2>err </dev/null &
    spid=$!
    for _ in $(seq 1 600); do [ -s ck ] && break; sleep 0.1; done
    tpid=$(pgrep -P $spid | head -1)
    [ -n "$tpid" ] && kill -INT "$tpid"
    wait $spid
    done_steps=$(tr -d ' \t\n' <j | grep -o '"steps_completed":[0-9]*' | cut -d: -f2)
    saves=$(grep -c 'rename.*, "ck") *= 0' trace.log)
    [ -n "$done_steps" ] && [ "$saves" -eq "$done_steps" ] ||
        fail "--save-every and SIGINT: $saves checkpoint renames for $done_steps steps: $(grep '"ck"' trace.log | tail -3)"
else
    echo "test_signals: strace unavailable: the count of saves is not checked"
fi

# A second signal: exit at once (128 + signal), temporary files removed. The
# steps are made long so that the second one lands inside a step.
RUN=(train --batch-size 4 --seq-len 64 --num-seqs 16 --num-blocks 2 --backend cpu --threads 1
     --quiet --warmup-steps 1 --num-steps 100000)
rm -f ck j
timeout --foreground 300 "$BIN" "${RUN[@]}" --save ck --save-every 1 --json j >out 2>err </dev/null &
pid=$!
for _ in $(seq 1 600); do [ -s ck ] && break; sleep 0.1; done
# ck appears when the save renames it, before the save returns (its directory's
# fsync) and the loop looks for a signal: a signal in that window stops the run
# before the next step. 0.5 s later the run is inside the next step (~3 s).
sleep 0.5
kill -INT $pid
sleep 0.5 # a repeat within 250 ms is taken as the same signal forwarded twice
kill -INT $pid 2>/dev/null || fail "second SIGINT: the run had already stopped (steps too short)"
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "second SIGINT: exit $rc, expected 130 (stderr: $(cat err))"
[ "$(wc -l <err)" -le 1 ] || fail "second SIGINT: more than one line: $(cat err)"
ls | grep -q '\.tmp\.' && fail "second SIGINT: temporary files left: $(ls | grep '\.tmp\.')"

# A step that does not end: SIGTERM inside the run's first step, then the
# process is stopped (SIGSTOP) so that the step cannot end, and continued
# after the deadline (10 s when no step has completed yet) has passed. The
# run exits 143 at once, in one line, writing nothing: --json keeps its
# previous contents, --save was never written, no temporary file is left.
rm -f w.safetensors w.optim.safetensors w.json out err
echo previous >w.json
"$BIN" train --batch-size 4 --seq-len 64 --num-seqs 16 --num-blocks 2 --backend cpu --threads 1 \
    --warmup-steps 1 --num-steps 3 --save w.safetensors --json w.json >out 2>err </dev/null &
pid=$!
# the header's last lines are printed just before the first step starts
for _ in $(seq 1 600); do grep -q "^   Memory planned" out 2>/dev/null && break; sleep 0.1; done
grep -q "^   Memory planned" out || fail "deadline: the run printed no header: $(cat err)"
sleep 0.3
kill -TERM $pid
sleep 0.3 # the handler has run and set the deadline
kill -STOP $pid
sleep 11
kill -CONT $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "deadline: exit $rc, expected 143 (stderr: $(cat err))"
[ "$(wc -l <err)" -eq 1 ] || fail "deadline: expected one line on stderr: $(cat err)"
grep -q "^tinyfold: terminated by SIGTERM and the step under way did not end within 10 s of it: exiting now; outputs not yet written are left as they were$" err ||
    fail "deadline: message: $(cat err)"
[ "$(cat w.json)" = previous ] || fail "deadline: --json was replaced: $(head -c 200 w.json)"
[ ! -e w.safetensors ] && [ ! -e w.optim.safetensors ] || fail "deadline: --save was written"
ls | grep -q '\.tmp\.' && fail "deadline: temporary files left: $(ls | grep '\.tmp\.')"

# A stale temporary file of a dead process is removed at the next save; a
# live process's is not.
sh -c 'exit 0' &
dead=$!
wait $dead
echo junk >"ck.tmp.$dead"
echo junk >"j.tmp.$dead"
echo live >"ck.tmp.$$"
timeout 120 "$BIN" train --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 \
    --pair-dim 32 --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1 \
    --save ck --json j >out 2>err </dev/null || fail "stale: run failed: $(cat err)"
[ ! -e "ck.tmp.$dead" ] || fail "stale: ck.tmp.$dead was not removed"
[ ! -e "j.tmp.$dead" ] || fail "stale: j.tmp.$dead was not removed"
[ -e "ck.tmp.$$" ] || fail "stale: a live process's temporary file was removed"
[ $fails -eq 0 ] || exit 1
echo "test_signals: ok"
