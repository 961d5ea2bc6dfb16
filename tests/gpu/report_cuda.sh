#!/usr/bin/env bash
# On a CUDA machine: profiles v1 and v3 (eager and --graph) at the small
# problem, prints the measured roofline ceilings and the op-cost totals of
# each, and writes report.html (plus per-section PNGs when chromium is
# installed) into OUT. Expected on an H200: compute ceiling tens of
# TFLOP/s (fp32 cublasSgemm), memory ceiling a few TB/s (read + write),
# op_costs flops_per_step within a few percent of 3x the forward estimate
# at v1, every section written.
# Usage: tests/gpu/report_cuda.sh path/to/tinyfold OUT
set -euo pipefail
BIN=$(realpath "${1:?usage: $0 path/to/tinyfold OUT}")
OUT=${2:?usage: $0 path/to/tinyfold OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
runs=()
for spec in "v1:" "v3:" "v3g:--graph"; do
    name=${spec%%:*}
    extra=${spec#*:}
    impl=${name%g}
    # shellcheck disable=SC2086
    "$BIN" profile --backend cuda --impl "$impl" $extra --num-steps 10 --out "$OUT/prof_$name" \
        >"$OUT/prof_$name.log" 2>&1
    runs+=("$OUT/prof_$name")
    python3 - "$OUT/prof_$name/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c, o = d.get("ceilings"), d.get("op_costs")
if not c or not o:
    sys.exit("missing ceilings or op_costs in " + sys.argv[1])
timed = [x for x in o["ops"] if x["kernel_ns"] > 0]
costed = [x for x in timed if x["flops"] is not None]
print("%s: compute %.1f TFLOP/s (%s), memory %.2f TB/s (%s), ridge %.1f FLOP/B; "
      "%.2f GFLOP and %.1f MB per step over %d ops, %d of %d timed ops costed"
      % (sys.argv[1], c["compute_flops_per_s"] / 1e12, c["compute_kernel"],
         c["memory_bytes_per_s"] / 1e12, c["memory_kernel"], c["ridge_flops_per_byte"],
         o["flops_per_step"] / 1e9, o["bytes_per_step"] / 1e6, len(o["ops"]), len(costed), len(timed)))
PY
done
"$BIN" report "${runs[@]}" --out "$OUT/report.html"
if command -v chromium >/dev/null; then
    python3 "$HERE/../report/section_pngs.py" "$(command -v chromium)" "$OUT/report.html" "$OUT" h200
fi
