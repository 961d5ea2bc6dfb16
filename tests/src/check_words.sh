#!/usr/bin/env bash
# The repository's words describe today's code: no comment, doc, test or
# message speaks of development sessions, cites a benchmark log entry by its
# number ("RESULTS entry 12": cite the commit), refers to the tracker ("the
# issue asks"), or says "as before"; and no struct field's comment carries a
# percentage (a measured gain belongs in bench/RESULTS.md, by commit).
# Usage: check_words.sh ROOT. Prints FILE:LINE: why for each hit and exits 1
# if there is one. A hit that is legitimate (the word meaning something
# else) goes in tests/src/check_words.allow as PATH:ERE (the line's text);
# an allow entry that matches nothing is reported too, so the list stays
# true. The check first proves on made-up files that it catches each kind.
set -u
export LC_ALL=C

# the line patterns (ERE, matched case-insensitively) and what each means
PATTERNS=(
    '\bsessions?\b'
    'RESULTS(\.md)?[^0-9a-z]{0,3}(entr(y|ies)[^0-9a-z]{1,3})?\(?[0-9]{1,2}([^0-9a-z]|$)'
    '\bentr(y|ies) [0-9]{1,2}\b'
    '\b(the|this) issue\b|\bissue ?#?[0-9]|\bissue'"'"'s\b'
    '\bas before\b'
)
WHY=(
    "mentions a session"
    "cites a RESULTS entry by number (cite the commit)"
    "cites an entry by number (cite the commit)"
    "refers to the tracker's issue"
    "says 'as before' (say what it is)"
)

scan_lines() { # files...: FILE:LINE: why, for each pattern
    local i
    for i in "${!PATTERNS[@]}"; do
        grep -HnIiE -- "${PATTERNS[$i]}" "$@" 2>/dev/null |
            awk -v why="${WHY[$i]}" '{ split($0, f, ":"); print f[1] ":" f[2] ": " why "\t" substr($0, length(f[1]) + length(f[2]) + 3) }'
    done
}

scan_structs() { # C/CUDA files...: a percentage in a comment inside a struct body
    awk '
        FNR == 1 { depth = 0; incomment = 0 }
        {
            line = $0
            if (depth == 0 && line ~ /(^|[^A-Za-z0-9_])(struct|union)([ \t]+[A-Za-z_][A-Za-z0-9_]*)?[ \t]*\{/) {
                depth = 0; started = 1
            } else started = 0
            # the comment part of the line
            c = ""
            if (incomment) {
                c = line
                if (index(line, "*/")) incomment = 0
            } else {
                p = index(line, "/*"); q = index(line, "//")
                if (p && (!q || p < q)) {
                    c = substr(line, p)
                    if (!index(substr(line, p + 2), "*/")) incomment = 1
                } else if (q) c = substr(line, q)
            }
            if ((depth > 0 || started) && c ~ /[0-9](\.[0-9]+)?%/)
                print FILENAME ":" FNR ": a struct field comment carries a percentage\t" line
            if (depth > 0 || started) {
                code = line
                sub(/\/\/.*/, "", code)
                gsub(/\/\*([^*]|\*[^\/])*\*\//, "", code)
                n = gsub(/\{/, "{", code); m = gsub(/\}/, "}", code)
                depth += n - m
                if (depth < 0) depth = 0
            }
        }' "$@"
}

root=${1:?usage: check_words.sh ROOT}
allow="$root/tests/src/check_words.allow"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# self-check: each kind of hit is found, and the legitimate lines are not
cat > "$tmp/probe.c" <<'EOF'
/* measured in session 9 (RESULTS entry 12; bench/RESULTS.md (11); the issue asks) */
typedef struct {
    int a; /* on the H200: 2.3% faster */
    /* the lane (see bench/RESULTS.md at 838612c) issues loads ahead */
    int b;
} probe;
/* 5% of the time is outside any struct, as it was before the call */
EOF
n=$( { scan_lines "$tmp/probe.c"; scan_structs "$tmp/probe.c"; } | wc -l)
if [ "$n" != 5 ]; then
    echo "check_words: the self-check found $n hits in the probe, expected 5:"
    scan_lines "$tmp/probe.c"; scan_structs "$tmp/probe.c"
    exit 1
fi

cd "$root" || exit 1
files=$(find src include tests bench docs README.md NOTES.md CMakeLists.txt Makefile .ci \
            -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
            -o -name '*.sh' -o -name '*.py' -o -name '*.md' -o -name '*.txt' -o -name '*.json' \
            -o -name 'Makefile' -o -name 'run' -o -name '*.cmake' \) 2>/dev/null |
        grep -v -e '^tests/src/check_words\.' | sort)
[ -n "$files" ] || { echo "check_words: no files under $root"; exit 1; }
cfiles=$(printf '%s\n' $files | grep -E '\.(c|h|cu|cuh)$')
# bench/RESULTS.md is a dated log: "as before" there is the entry's own comparison
# one line per FILE:LINE, its reasons joined
hits=$( { scan_lines $files | grep -v -E '^bench/RESULTS\.md:[0-9]+: says .as before.'; scan_structs $cfiles; } |
        sort -t: -k1,1 -k2,2n -s |
        awk -F'\t' '{ split($1, f, ": "); k = f[1]; w = substr($1, length(k) + 3)
                      if (k == pk) { pw = pw "; " w; next }
                      if (pk != "") print pk ": " pw "\t" pt
                      pk = k; pw = w; pt = $2 }
                    END { if (pk != "") print pk ": " pw "\t" pt }')

# the allow-list: PATH:ERE lines, '#' comments
bad=""
used=""
while IFS= read -r h; do
    [ -n "$h" ] || continue
    path=${h%%:*}; text=${h#*$'\t'}
    ok=0
    if [ -f "$allow" ]; then
        while IFS= read -r a; do
            case "$a" in ''|'#'*) continue ;; esac
            ap=${a%%:*}; are=${a#*:}
            if [ "$ap" = "$path" ] && printf '%s\n' "$text" | grep -qiE -- "$are"; then ok=1; used+="$a"$'\n'; break; fi
        done < "$allow"
    fi
    [ "$ok" = 1 ] || bad+="${h%%$'\t'*}: ${text#"${text%%[![:space:]]*}"}"$'\n'
done <<< "$hits"
if [ -f "$allow" ]; then
    while IFS= read -r a; do
        case "$a" in ''|'#'*) continue ;; esac
        printf '%s' "$used" | grep -qxF -- "$a" || bad+="tests/src/check_words.allow: '$a' matches nothing: remove it"$'\n'
    done < "$allow"
fi
if [ -n "$bad" ]; then
    printf '%s' "$bad"
    echo "check_words: $(printf '%s' "$bad" | wc -l) lines to fix (describe the code as it is; cite commits)"
    exit 1
fi
echo "check_words: $(printf '%s\n' $files | wc -l) files, no session, entry number, tracker or percentage field"
