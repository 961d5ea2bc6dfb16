#!/usr/bin/env bash
# `tinyfold CMD --help` and `tinyfold help CMD` print the same text (exit 0);
# a mistyped subcommand is refused in one line with the nearest name.
# Usage: test_help.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"

for c in train profile validate bench grad compare report help; do
    "$BIN" "$c" --help >a 2>ae </dev/null
    ra=$?
    "$BIN" help "$c" >b 2>be </dev/null
    rb=$?
    [ $ra -eq 0 ] && [ $rb -eq 0 ] || fail "$c: exit $ra (--help) and $rb (help $c), expected 0"
    [ -s a ] && [ ! -s ae ] && [ ! -s be ] || fail "$c: the help should be on stdout only"
    cmp -s a b || fail "$c --help and help $c differ: $(diff a b | head -3)"
done
"$BIN" compare x.json --help >a 2>/dev/null || fail "compare FILE --help"
"$BIN" help compare >b
cmp -s a b || fail "compare FILE --help differs from help compare"

# suggest RIGHT WRONG: one line, exit 2, naming the wrong word and the right one
suggest() {
    "$BIN" "$2" --num-steps 1 >out 2>err </dev/null
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && [ ! -s out ] &&
        grep -qF "unknown command '$2' (did you mean $1?)" err ||
        fail "$2: exit $rc: $(cat err)"
}
suggest train trian
suggest train tarin
suggest profile profle
suggest compare comapre
suggest validate valdiate
"$BIN" help trian >out 2>err
[ $? -eq 2 ] && grep -qF "help: unknown command 'trian' (did you mean train?)" err ||
    fail "help trian: $(cat err)"
# nothing near: the list of commands
"$BIN" xyzzy >out 2>err
[ $? -eq 2 ] && grep -qF "unknown command 'xyzzy' (expected train, validate" err ||
    fail "xyzzy: $(cat err)"
[ $fails -eq 0 ] || exit 1
echo "test_help: ok"
