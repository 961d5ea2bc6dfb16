#!/usr/bin/env bash
# Every output option of every subcommand goes through the one output check:
# each is driven at the same hostile targets (the command's own input, a
# FIFO, a symbolic link, a dangling symbolic link, a character device, a
# directory) and must be refused with one line and exit 2, the target left
# exactly as it was, no temporary file left. Then each writes a regular file
# when given one.
# Usage: test_output_targets.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1)
DTINY=(--batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1
       --quiet --warmup-steps 0 --num-steps 1)

timeout 120 "$BIN" train "${TINY[@]}" --save ck --json run.json >/dev/null 2>err </dev/null ||
    { echo "FAIL: setup: $(cat err)"; exit 1; }
cp "$ROOT/tests/fixtures/tiny.safetensors" data.st

# Each case: a name, the command with @ where the output goes, and the input
# of that command that @ may be pointed at (- when it has none).
RES=(--resume ck --backend cpu --threads 1 --quiet --num-steps 1)
CASES=(
    "train --save|train ${RES[*]} --save @|ck"
    "train --json|train ${DTINY[*]} --data data.st --json @|data.st"
    "profile --save|profile ${RES[*]} --out prof --save @|ck"
    "profile --json|profile ${TINY[*]} --load ck --out prof --json @|ck"
    "profile --out|profile ${TINY[*]} --out pdir|-"
    "grad --out|grad --load ck --data data.st --backend cpu --threads 1 --out @|data.st"
    "bench --json|bench --problems tiny --impls v1 --steps 1 --backend cpu --threads 1 --json @|-"
    "report --out|report run.json --out @|run.json"
)

# The device target: as root a private copy of /dev/null's node here (a
# broken check must not rename a file over the machine's /dev/null), else
# /dev/null itself (whose directory a user cannot write).
if mknod devnull c 1 3 2>/dev/null; then DEV=devnull; else DEV=/dev/null; fi
# target KIND: makes "t" (or names the device) and prints its name
make_target() {
    rm -rf t pdir
    case $1 in
    fifo) mkfifo t && echo t ;;
    symlink) echo keep >kept && ln -s kept t && echo t ;;
    dangling) ln -s nowhere t && echo t ;;
    device) if [ $DEV = devnull ]; then mknod t c 1 3 && echo t; else echo $DEV; fi ;;
    directory) mkdir t && echo t ;;
    esac
}
# identity of a target: its type, link text and content
ident() { stat -c '%F %i' "$1" 2>&1; [ -L "$1" ] && readlink "$1"; [ -f "$1" ] && cksum <"$1"; }

check_refused() { # what rc
    local what=$1 rc=$2
    if [ "$rc" -ne 2 ] || [ "$(wc -l <err)" -ne 1 ] || ! grep -q "^tinyfold: .*is not accepted" err; then
        fail "$what: exit $rc, stderr: $(head -c 300 err)"
    fi
    ls -a . pdir 2>/dev/null | grep -q '\.tmp\.' && fail "$what: temporary file left"
}

for c in "${CASES[@]}"; do
    IFS='|' read -r name cmd input <<<"$c"
    for kind in input fifo symlink dangling device directory; do
        if [ "$name" = "profile --out" ]; then
            # the profiler's files under DIR: each is a hostile target in turn
            [ $kind = input ] && continue
            for f in summary.json trace.json kernel_stats.csv kernel_trace.csv; do
                tgt=$(make_target $kind)
                mkdir -p pdir
                if [ "$tgt" = /dev/null ]; then continue; fi # a user cannot make one here
                mv t pdir/$f
                before=$(ident pdir/$f)
                # shellcheck disable=SC2086
                timeout 60 "$BIN" $cmd >out 2>err </dev/null
                check_refused "$name: $f a $kind" $?
                [ "$(ident pdir/$f)" = "$before" ] || fail "$name: $f a $kind was replaced"
            done
            continue
        fi
        if [ $kind = input ]; then
            [ "$input" = - ] && continue
            tgt=$input
        else
            tgt=$(make_target $kind)
        fi
        before=$(ident "$tgt")
        # shellcheck disable=SC2086
        timeout 60 "$BIN" ${cmd//@/$tgt} >out 2>err </dev/null
        check_refused "$name: a $kind ($tgt)" $?
        [ "$(ident "$tgt")" = "$before" ] || fail "$name: the $kind $tgt was replaced"
        [ $kind = symlink ] && { [ "$(cat kept)" = keep ] || fail "$name: the link's target was written"; }
    done
    # an output and an input of the same command, spelt another way
    if [ "$input" != - ]; then
        before=$(ident "$input")
        # shellcheck disable=SC2086
        timeout 60 "$BIN" ${cmd//@/.\/$input} >out 2>err </dev/null
        check_refused "$name: ./$input" $?
        [ "$(ident "$input")" = "$before" ] || fail "$name: ./$input was replaced"
    fi
done
# A writable device (root: a copy of /dev/full's node) is still a device.
if mknod full c 1 7 2>/dev/null; then
    timeout 60 "$BIN" report run.json --out full >out 2>err </dev/null
    check_refused "report --out full (a copy of /dev/full)" $?
    [ -c full ] || fail "the device full was replaced"
fi

# A regular file (absent or present) is written, atomically.
rm -rf t pdir prof
echo old >t
timeout 120 "$BIN" report run.json --out t >out 2>err </dev/null || fail "report --out t: $(cat err)"
grep -q "<html" t || fail "report --out t: no page written"
rm -f t
timeout 120 "$BIN" grad --load ck --data data.st --backend cpu --threads 1 --out t >out 2>err \
    </dev/null || fail "grad --out t: $(cat err)"
[ -s t ] || fail "grad --out t: nothing written"
ls -a | grep -q '\.tmp\.' && fail "temporary files left: $(ls -a | grep '\.tmp\.')"
[ $fails -eq 0 ] || exit 1
echo "test_output_targets: ok"
