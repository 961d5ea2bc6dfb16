#!/usr/bin/env bash
# Renders `tinyfold report` of two small CPU profiles in a real browser
# (headless Chromium) and checks the picture: not blank (png_check.py), and
# a blank page is told apart (so the check can fail). Every section must be
# in the rendered DOM. With OUT given, the report and the PNG stay there.
# Usage: render.sh path/to/tinyfold [OUT]
set -euo pipefail
BIN=$(realpath "${1:?usage: $0 path/to/tinyfold [OUT]}")
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=${2:-$TMP}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "render: no chromium (make report-check installs it)"; exit 1; }

tiny=(--backend cpu --batch-size 1 --seq-len 16 --num-seqs 4 --num-blocks 1 --num-steps 2
      --warmup-steps 1)
for v in 1 3; do
    "$BIN" profile "${tiny[@]}" --impl v$v --out "$TMP/v$v" >"$TMP/log" 2>&1 ||
        { cat "$TMP/log"; exit 1; }
done
"$BIN" report "$TMP/v1" "$TMP/v3" --out "$OUT/report.html" >/dev/null

shot() { # shot HTML PNG: a headless screenshot, 1240 px wide
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
        --screenshot="$2" --window-size=1240,1800 "file://$1" >"$TMP/chrome.log" 2>&1 ||
        { cat "$TMP/chrome.log"; exit 1; }
}
shot "$OUT/report.html" "$OUT/report.png"
python3 "$HERE/png_check.py" "$OUT/report.png" 64 0.05

# the check tells a blank page apart
printf '<!DOCTYPE html><html><body></body></html>\n' >"$TMP/blank.html"
shot "$TMP/blank.html" "$TMP/blank.png"
if python3 "$HERE/png_check.py" "$TMP/blank.png" 64 0.05; then
    echo "render: the blank page passed the check"
    exit 1
fi

# every section made it into the rendered document
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --dump-dom \
    "file://$OUT/report.html" >"$TMP/dom.html" 2>/dev/null
for id in runs throughput steps phases kernels kdiff memory memtime timeline roofline; do
    grep -q "<section id=\"$id\">" "$TMP/dom.html" || { echo "render: section $id missing"; exit 1; }
done
echo "render: report rendered and checked"
