#!/usr/bin/env bash
# Renders `tinyfold report` of two small CPU profiles in a real browser
# (headless Chromium) and checks the picture: not blank (png_check.py), and
# a blank page is told apart (so the check can fail). Every section must be
# in the rendered DOM. The panels that draw (step time and loss, the kernel
# difference, memory over time, the timelines, the roofline, and the rank
# panel of a 2-rank profile where mpirun and an MPI build are there) are
# each rendered alone (section_pngs.py) and their pictures checked for
# drawing in colour beyond the heading's rule, which a text-only panel is
# shown to fail. With OUT given, the report and the PNGs stay there.
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

# Each drawing panel in a picture of its own: not blank, and coloured beyond
# its heading's rule (a blue rule 2 px high, ~2,300 pixels at this width): a
# chart's bars and lines, the kernel table's coloured changes.
panels="steps kdiff memtime timeline roofline"
python3 "$HERE/section_pngs.py" "$CHROME" "$OUT/report.html" "$OUT" panel $panels runs >"$TMP/panels.log" ||
    { echo "render: the panels could not be rendered"; exit 1; }
for id in $panels; do
    python3 "$HERE/png_check.py" "$OUT/panel-$id.png" 64 0.03 3000 ||
        { echo "render: the $id panel draws nothing"; exit 1; }
done
# the check tells a text-only panel (the runs table) apart
if python3 "$HERE/png_check.py" "$OUT/panel-runs.png" 64 0.03 3000 >/dev/null; then
    echo "render: the text-only runs panel passed the drawing check"
    exit 1
fi

# The rank panel, from a profile of 2 ranks (where mpirun and an MPI build are).
if command -v mpirun >/dev/null 2>&1 && grep -q libmpi <<<"$(ldd "$BIN" 2>/dev/null)"; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe -np 2)
    [ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)
    timeout 300 "${MPI[@]}" "$BIN" profile "${tiny[@]}" --batch-size 2 --out "$TMP/rk" >"$TMP/log" 2>&1 </dev/null ||
        { cat "$TMP/log"; exit 1; }
    "$BIN" report "$TMP/rk" --out "$OUT/ranks.html" >/dev/null
    python3 "$HERE/section_pngs.py" "$CHROME" "$OUT/ranks.html" "$OUT" panel ranks >"$TMP/panels.log" ||
        { echo "render: the rank panel could not be rendered"; exit 1; }
    [ -f "$OUT/panel-ranks.png" ] || { echo "render: no rank panel for 2 ranks"; exit 1; }
    python3 "$HERE/png_check.py" "$OUT/panel-ranks.png" 64 0.03 3000 ||
        { echo "render: the ranks panel draws nothing"; exit 1; }
else
    echo "render: no mpirun or no MPI build: the rank panel is not rendered"
fi
echo "render: report rendered and checked"
