#!/usr/bin/env bash
# The error lines README.md quotes are what the binary prints: for every
# "$ ./build/tinyfold ARGS" line of README.md followed by "tinyfold: ..."
# lines, runs ARGS and compares stderr with those lines exactly, except the
# machine's free memory in "at most 90% of the N GB available" (docs/regen.sh
# readme_errors rewrites the block from the binary).
# Usage: test_readme_errors.sh path/to/tinyfold   (from the repository root)
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
README=${README:-README.md}
fails=0 cases=0
mask() { sed -E 's/but only [0-9.]+ GB is available/but only N GB is available/; s/at most 90% of the [0-9.]+ GB available/at most 90% of the N GB available/'; }
args=""
quoted=""
flush() {
    if [ -n "$args" ] && [ -n "$quoted" ]; then
        cases=$((cases + 1))
        local got
        # shellcheck disable=SC2086 # the quoted command's words, as a shell would split them
        got=$(timeout 60 "$BIN" $args 2>&1 >/dev/null </dev/null | mask)
        if [ "$got" != "$(printf '%s' "$quoted" | mask)" ]; then
            fails=$((fails + 1))
            printf 'FAIL: tinyfold %s\n  README: %s\n  binary: %s\n' "$args" "$quoted" "$got"
        fi
    fi
    args="" quoted=""
}
while IFS= read -r line; do
    case $line in
    '$ ./build/tinyfold '*) flush; args=${line#'$ ./build/tinyfold '} ;;
    'tinyfold: '*) [ -n "$args" ] && quoted=${quoted:+$quoted$'\n'}$line ;;
    *) flush ;;
    esac
done <"$README"
flush
if [ "$cases" -eq 0 ]; then
    echo "FAIL: no quoted error line found in $README"
    fails=1
fi
echo "$((cases - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
