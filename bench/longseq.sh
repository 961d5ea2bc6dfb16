#!/usr/bin/env bash
# Long sequences: what --recompute and --chunk-size cost and save, how the
# step's efficiency holds up as N grows, and the longest problems that train.
# Prints figures (medians of every timed step over alternated runs); it is
# not a test.
#   bench/longseq.sh [parts...]      parts: recompute chunk efficiency long (default all)
# Environment: TINYFOLD (binary), BACKEND (cpu | cuda, default cpu), STEPS
# (timed steps per run, default 3), ROUNDS (alternations, default 2),
# LONG_N (default 768 on the CPU, 2048 on CUDA), BASE (a second binary: the
# efficiency part then runs both, alternated, e.g. the revision before),
# PROBE_STEP (the long part then tries N + PROBE_STEP, + 2 PROBE_STEP, ...
# until one does not fit: the longest N that trains), CHUNK (the long part's
# --chunk-size, default off).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TINYFOLD:-$here/../build/tinyfold}
backend=${BACKEND:-cpu}
steps=${STEPS:-3}
rounds=${ROUNDS:-2}
if [ "$backend" = cpu ]; then long_n=${LONG_N:-768}; else long_n=${LONG_N:-2048}; fi
parts=${*:-recompute chunk efficiency long}
chunk=()
if [ -n "${CHUNK:-}" ]; then chunk=(--chunk-size "$CHUNK"); fi
if [ ! -x "$bin" ]; then
    echo "bench/longseq.sh: no tinyfold binary at $bin (run make, or set TINYFOLD)" >&2
    exit 2
fi
extra=()
if [ "$backend" = cpu ]; then export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}; extra=(--threads "$OMP_NUM_THREADS"); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one bench --scaling run: label, binary, then its arguments; JSON kept per run
run() {
    local label=$1 b=$2; shift 2
    local f="$tmp/$label.$(ls "$tmp" | wc -l).json"
    "$b" bench --backend "$backend" "${extra[@]}" --no-progress --steps "$steps" --json "$f" "$@" >/dev/null
    echo "$label $f" >>"$tmp/runs"
}
# per label: planned MB, the median over runs of step ms and GFLOP/s, and the
# ratios to the first label
report() {
    python3 - "$tmp/runs" "$1" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, f = line.split()
    p = json.load(open(f))["points"][0]
    if "step_ms" not in p:
        rows.setdefault(label, []).append(None); continue
    rows.setdefault(label, []).append((p["peak_bytes"], p["step_ms"], p["gflops"]))
# time: the median over rounds of each round's ratio to the first label's
# run of the same round (runs of one round ran back to back)
ref = None
print(f"{'':24} {'planned MB':>11} {'step ms':>10} {'GFLOP/s':>8} {'memory':>7} {'time':>6}  per round")
for label in sys.argv[2].split(","):
    runs = rows.get(label, [])
    r = [x for x in runs if x]
    if not r:
        print(f"{label:24} does not run"); continue
    mem = r[0][0] / 2**20
    ms = statistics.median(x[1] for x in r)
    gf = statistics.median(x[2] for x in r)
    if ref is None: ref = (mem, runs)
    ratios = [x[1] / y[1] for x, y in zip(runs, ref[1]) if x and y]
    rt = statistics.median(ratios) if ratios else float("nan")
    per = " ".join(f"{q:.3f}" for q in ratios)
    print(f"{label:24} {mem:11.1f} {ms:10.1f} {gf:8.1f} {mem/ref[0]:7.3f} {rt:6.3f}  {per}")
PY
    rm -f "$tmp/runs"
}

echo "tinyfold longseq benchmark | $("$bin" --version 2>/dev/null || echo tinyfold) | backend $backend | $steps timed steps, $rounds rounds alternated, medians"
for part in $parts; do
case $part in
recompute)
    echo
    echo "== small problem (B4 N64 S16): --recompute none / blocks / modules (ratios to none)"
    for r in $(seq "$rounds"); do
        for m in none blocks modules; do run "recompute_$m" "$bin" --scaling 64 --batch-size 4 --recompute "$m"; done
    done
    report recompute_none,recompute_blocks,recompute_modules
    ;;
chunk)
    echo
    echo "== B1 N256 S16, --recompute modules: --chunk-size off / 64 / 16 (ratios to off)"
    for r in $(seq "$rounds"); do
        run chunk_off "$bin" --scaling 256 --batch-size 1 --recompute modules
        run chunk_64 "$bin" --scaling 256 --batch-size 1 --recompute modules --chunk-size 64
        run chunk_16 "$bin" --scaling 256 --batch-size 1 --recompute modules --chunk-size 16
    done
    report chunk_off,chunk_64,chunk_16
    ;;
efficiency)
    echo
    echo "== efficiency: B4 N64 S16 against B1 N256 S16 (GFLOP/s ratio is the last row's to the first)"
    labels="new_B4_N64,new_B1_N256"
    for r in $(seq "$rounds"); do
        run new_B4_N64 "$bin" --scaling 64 --batch-size 4
        run new_B1_N256 "$bin" --scaling 256 --batch-size 1
        if [ -n "${BASE:-}" ]; then
            run base_B4_N64 "$BASE" --scaling 64 --batch-size 4
            run base_B1_N256 "$BASE" --scaling 256 --batch-size 1
        fi
    done
    [ -n "${BASE:-}" ] && labels="$labels,base_B4_N64,base_B1_N256"
    report "$labels"
    ;;
long)
    echo
    echo "== B1 N$long_n S16, --recompute modules ${chunk[*]}: one warm-up and one timed step"
    "$bin" bench --backend "$backend" "${extra[@]}" --no-progress --steps 1 --scaling "$long_n" --batch-size 1 --recompute modules "${chunk[@]}"
    if [ -n "${PROBE_STEP:-}" ]; then
        # the longest N that trains: N + PROBE_STEP, + 2 PROBE_STEP, ... until one does not fit
        n=$long_n
        while :; do
            n=$((n + PROBE_STEP))
            [ "$n" -le 4096 ] || break
            out=$("$bin" bench --backend "$backend" "${extra[@]}" --no-progress --steps 1 --scaling "$n" --batch-size 1 --recompute modules "${chunk[@]}")
            echo "$out" | tail -n +4 | head -1
            echo "$out" | grep -qE "^ *$n +[0-9]" || break
        done
    fi
    ;;
*) echo "bench/longseq.sh: unknown part '$part' (expected recompute, chunk, efficiency, long)" >&2; exit 2 ;;
esac
done
