#!/usr/bin/env bash
# docs/cli.md covers the command line as the binary has it: a section for
# every command `tinyfold help` lists (help itself is in the synopsis), and
# every field of the run JSON (train --json) and of a profile's summary.json
# (its "run" being the run JSON) named in backquotes in its section ("The run
# JSON", "summary.json").
# Fields are read from a CPU run's files (GPU-only ones are not produced
# here). Skipped (77) without python3.
# Usage: test_cli_doc.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
command -v python3 >/dev/null 2>&1 || { echo "test_cli_doc: no python3: skipped"; exit 77; }
DOC=$ROOT/docs/cli.md

cmds=$("$BIN" help | sed -n 's/^  tinyfold \([a-z][a-z]*\) .*/\1/p' | sort -u)
[ "$(wc -w <<<"$cmds")" -ge 7 ] || fail "tinyfold help lists too few commands: $cmds"
for c in $cmds; do
    [ "$c" = help ] && continue
    grep -q "^## $c\$" "$DOC" || fail "docs/cli.md has no section '## $c'"
done
grep -q "^tinyfold help \[command\]" "$DOC" || fail "docs/cli.md's synopsis lacks tinyfold help"

TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 2 --warmup-steps 1 --num-steps 2 --quiet)
timeout 120 "$BIN" train "${TINY[@]}" --json run.json >out 2>err </dev/null || fail "train: $(cat err)"
timeout 120 "$BIN" profile "${TINY[@]}" --out prof >out 2>err </dev/null || fail "profile: $(cat err)"
python3 - "$DOC" run.json prof/summary.json <<'EOF' || fail "fields missing from docs/cli.md (above)"
import json, re, sys
doc = open(sys.argv[1], encoding="utf-8").read()
def section(title):  # from its heading to the next heading of that level or higher
    m = re.search(r"^(#+) " + re.escape(title) + r"\s*$", doc, re.M)
    if not m:
        sys.exit(f"docs/cli.md has no section {title!r}")
    end = re.compile(r"^#{1,%d} " % len(m.group(1)), re.M).search(doc, m.end())
    return doc[m.end():end.start() if end else len(doc)]
def keys(o, acc):
    if isinstance(o, dict):
        for k, v in o.items():
            acc.add(k)
            keys(v, acc)
    elif isinstance(o, list):
        for v in o:
            keys(v, acc)
    return acc
bad = 0
for path, title in ((sys.argv[2], "The run JSON"), (sys.argv[3], "summary.json")):
    text = section(title)
    # a field is named `field`, `field[]`, or in a dotted `a.b.field` / `field.x`
    named = set(re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S)))
    words = {w for n in named for w in re.split(r"[.\[\]]+", n) if w}
    data = json.load(open(path))
    if title == "summary.json":  # its "run" is the run JSON, documented above
        data.pop("run", None)
    for k in sorted(keys(data, set())):
        if k not in words:
            print(f"{title}: field '{k}' of {path} is not in docs/cli.md")
            bad += 1
sys.exit(1 if bad else 0)
EOF
[ $fails -eq 0 ] || exit 1
echo "test_cli_doc: ok"
