#!/usr/bin/env bash
# Strings read from files reach the terminal and markdown tables escaped:
# an impl, a kernel name or a precision holding escape sequences, a carriage
# return, a line break or '|' neither colours the terminal nor adds a line
# or a table cell, in compare's table, markdown and CSV and in the one-line
# errors of compare and report.
# Usage: test_file_text.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1)
timeout 120 "$BIN" profile "${TINY[@]}" --out p >/dev/null 2>err </dev/null ||
    { echo "FAIL: setup: $(cat err)"; exit 1; }
EVIL='\\u001b[31mRED\\u001b[0m\\r\\nFAKE|x\\u009b2J\\u0007'
plant() { # TEXT DIR: p's summary with TEXT in the impl and the first kernel's name
    mkdir -p "$2"
    sed -e "s/\"impl\":\([[:space:]]*\)\"v3\"/\"impl\":\1\"v3$1\"/" \
        -e "0,/\"name\":\([[:space:]]*\)\"/s//\"name\":\1\"k$1/" p/summary.json >"$2/summary.json"
}
plant "$EVIL" q
plant PLAIN plain
grep -q 'FAKE|x' q/summary.json && grep -q PLAIN plain/summary.json ||
    { echo "FAIL: setup: no string planted"; exit 1; }

clean() { # FILE WHAT: no ESC, BEL, CR, C1 CSI, no line from the input
    ! LC_ALL=C grep -q $'[\x1b\x07\r]\|\xc2\x9b\|^FAKE' "$1" || fail "$2: raw control text: $(head -c 400 "$1" | od -c | head -5)"
}
for fmt in table markdown csv; do
    timeout 60 "$BIN" compare p q --format $fmt >same.$fmt 2>err </dev/null || fail "compare $fmt: $(cat err)"
    timeout 60 "$BIN" compare p plain --format $fmt >base.$fmt 2>err </dev/null || fail "compare $fmt: $(cat err)"
    clean same.$fmt "compare --format $fmt"
    [ "$(wc -l <same.$fmt)" -eq "$(wc -l <base.$fmt)" ] || fail "compare --format $fmt: lines added"
    grep -q 'FAKE' same.$fmt || fail "compare --format $fmt: the text is not shown at all"
done
# markdown: every table line has as many cell separators as its header
awk -F'|' '/^\|/ { n = 0; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1)
                   if (c == "\\") i++; else if (c == "|") n++ }
                   if (!want) want = n; else if (n != want) { print "row: " $0; bad = 1 } }
           /^$/ { want = 0 } END { exit bad }' same.markdown || fail "markdown: a '|' from a file split a cell"
grep -q 'FAKE\\|x' same.markdown || fail "markdown: '|' not escaped"

# errors: a precision that differs, holding the same text
sed -e "s/\"precision\":\([[:space:]]*\)\"fp32\"/\"precision\":\1\"fp32$EVIL\"/" p/summary.json >r.json
grep -q 'FAKE|x' r.json || { echo "FAIL: setup: no precision planted"; exit 1; }
timeout 60 "$BIN" compare p/summary.json r.json >out 2>err </dev/null
[ $? -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] || fail "compare, differing precision: $(cat err)"
clean err "compare's error"
timeout 60 "$BIN" report p/summary.json r.json --out rep.html >out 2>err </dev/null
[ $? -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] || fail "report, differing precision: $(cat err)"
clean err "report's error"
[ $fails -eq 0 ] || exit 1
echo "test_file_text: ok"
