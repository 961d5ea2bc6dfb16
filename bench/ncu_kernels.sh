#!/usr/bin/env bash
# Each kernel's roof in one table, under Nsight Compute: one training step of
# `tinyfold train` (v3, the large problem unless PROBLEM=small), every launch
# of the kernels whose demangled names match REGEX (template arguments
# included: 'tr_bwd_kernel<tf_cu_bf16, 128>'; ncu itself is given the part
# before the first '<', as it matched no kernel with one, and the rest is
# filtered here). Per kernel: calls, time a call, SM
# and DRAM throughput (% of peak), the tensor pipe's active share, achieved
# occupancy, registers, static shared memory and grid. Then, per kernel, the
# warp stall reasons (cycles per issued instruction) of one launch (of each
# function name: the first instantiation launched after --skip); with
# --source also the SASS lines where the warps stalled most (share of the
# stall samples), the place to look first.
#
#   bench/ncu_kernels.sh [--plan P] [--precision T] [--source] [--skip N] REGEX
#
#   --plan P       the run's --gpu-plan (default: default)
#   --precision T  fp32, tf32, bf16 (default) or fp16
#   --source       add the SASS hot spots of one launch of each kernel
#   --skip N       launches of each kernel skipped before the one examined
#                  for stalls and hot spots (default 1: the first is cold)
# Environment: BUILD (default build-gpu), OUT (default out/ncu),
# PROBLEM=small|large, NCU (default ncu), RUN_TIMEOUT (seconds an ncu run
# may take, default 300). Needs a GPU whose counters ncu can read (the
# clocks are left as they are: --clock-control none).
set -uo pipefail
cd "$(dirname "$0")/.."; [ -f bench/ab_rev.sh ] || exit 2
plan=default prec=bf16 source=0 skip=1
while [ $# -gt 0 ]; do
  case "$1" in
  --plan) plan=${2:?--plan takes a plan, e.g. mlp=fused}; shift 2 ;;
  --precision) prec=${2:?--precision takes fp32, tf32, bf16 or fp16}; shift 2 ;;
  --source) source=1; shift ;;
  --skip) skip=${2:?--skip takes a count}; shift 2 ;;
  -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "ncu_kernels: unknown option $1 (--plan, --precision, --source, --skip)" >&2; exit 2 ;;
  *) break ;;
  esac
done
regex=${1:-}
[ -n "$regex" ] || { echo "usage: bench/ncu_kernels.sh [--plan P] [--precision T] [--source] [--skip N] REGEX" >&2; exit 2; }
case "$prec" in fp32 | tf32 | bf16 | fp16) ;; *) echo "ncu_kernels: --precision takes fp32, tf32, bf16 or fp16, not $prec" >&2; exit 2 ;; esac
case "$skip" in '' | *[!0-9]*) echo "ncu_kernels: --skip takes a count, not $skip" >&2; exit 2 ;; esac
TF=${BUILD:-build-gpu}/tinyfold
NCU=${NCU:-ncu}
OUT=${OUT:-$PWD/out/ncu}
[ -x "$TF" ] || { echo "ncu_kernels: no $TF (build it: bench/gpu.sh with STAGES=build, or BUILD=dir)" >&2; exit 2; }
command -v "$NCU" >/dev/null || { echo "ncu_kernels: $NCU not found (Nsight Compute)" >&2; exit 2; }
mkdir -p "$OUT"
if [ "${PROBLEM:-large}" = small ]; then shape="--batch-size 4 --seq-len 64 --num-seqs 16"; else shape="--batch-size 4 --seq-len 128 --num-seqs 32"; fi
run=("$TF" train --backend cuda --precision "$prec" --impl v3 --gpu-plan "$plan" $shape --num-blocks 4
  --num-steps 1 --warmup-steps 0 --quiet)
to=${RUN_TIMEOUT:-300}
metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
metrics+=,launch__shared_mem_per_block_static,launch__grid_size
timeout "$to" "$NCU" --clock-control none --kernel-name-base demangled --kernel-name regex:"${regex%%<*}" --metrics "$metrics" --csv \
  "${run[@]}" > "$OUT/table.csv" 2> "$OUT/table.log" ||
  { echo "ncu_kernels: the ncu run failed ($OUT/table.log):" >&2; tail -3 "$OUT/table.log" >&2; exit 1; }
python3 - "$OUT/table.csv" "$regex" <<'PY' > "$OUT/kernels.txt"
import collections, csv, io, re, sys
txt = open(sys.argv[1], errors="replace").read()
i = txt.find('"ID"')
rows = list(csv.DictReader(io.StringIO(txt[i:]))) if i >= 0 else []
rows = [r for r in rows if re.search(sys.argv[2], r["Kernel Name"])]
agg = collections.OrderedDict()
for r in rows:
    k = r["Kernel Name"]
    try:
        v = float(r["Metric Value"].replace(",", ""))
    except ValueError:
        continue
    agg.setdefault(k, collections.defaultdict(list))[r["Metric Name"]].append(v)
if not agg:
    print("no kernel matched")
    sys.exit()
print("kernel | calls | us a call | sm % | dram % | tensor % | warps % | regs | smem B | grid")
for k, m in agg.items():
    g = lambda n: sum(m[n]) / len(m[n]) if m[n] else float("nan")
    print(f"{k.split('(')[0][:70]} | {len(m['gpu__time_duration.sum'])} | {g('gpu__time_duration.sum') / 1e3:.1f} | "
          f"{g('sm__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} | "
          f"{g('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} | "
          f"{g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):.0f} | "
          f"{g('sm__warps_active.avg.pct_of_peak_sustained_active'):.0f} | "
          f"{g('launch__registers_per_thread'):.0f} | {g('launch__shared_mem_per_block_static'):.0f} | "
          f"{g('launch__grid_size'):.0f}")
PY
cat "$OUT/kernels.txt"
# one launch of each kernel: its stall reasons (and hot spots)
names=$(python3 - "$OUT/table.csv" "$regex" <<'PY'
import csv, io, re, sys
txt = open(sys.argv[1], errors="replace").read()
i = txt.find('"ID"')
seen = []
for r in (csv.DictReader(io.StringIO(txt[i:])) if i >= 0 else []):
    if not re.search(sys.argv[2], r["Kernel Name"]):
        continue
    n = r["Kernel Name"].split("(")[0].strip()
    n = n[len("void "):] if n.startswith("void ") else n
    n = n.split("<")[0]  # one examined launch a function name
    if n not in seen:
        seen.append(n)
print("\n".join(seen))
PY
)
n=0
while IFS= read -r name; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  base=$name
  sections=(--metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active")
  [ "$source" = 1 ] && sections+=(--section SourceCounters)
  timeout "$to" "$NCU" --clock-control none --kernel-name-base function --kernel-name "$base" \
    --launch-skip "$skip" --launch-count 1 "${sections[@]}" -f -o "$OUT/k$n" "${run[@]}" > "$OUT/k$n.log" 2>&1 ||
    { echo "== $base: the ncu run failed ($OUT/k$n.log)"; continue; }
  "$NCU" --import "$OUT/k$n.ncu-rep" --page raw --csv > "$OUT/k$n.raw.csv" 2>/dev/null
  [ "$source" = 1 ] && "$NCU" --import "$OUT/k$n.ncu-rep" --page source --csv --print-source sass > "$OUT/k$n.src.csv" 2>/dev/null
  python3 - "$OUT/k$n.raw.csv" "$OUT/k$n.src.csv" "$base" "$source" <<'PY'
import csv, io, os, sys
raw, src, name, want_src = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
rows = list(csv.reader(open(raw, errors="replace"))) if os.path.exists(raw) else []
stalls, issue = [], None
if len(rows) >= 3:
    h, v = rows[0], rows[2]
    if "Kernel Name" in h and h.index("Kernel Name") < len(v):
        name = v[h.index("Kernel Name")].split("(")[0]  # the instantiation examined
    for k, c in enumerate(h):
        if k >= len(v):
            break
        try:
            x = float(v[k].replace(",", ""))
        except ValueError:
            continue
        if c.startswith("smsp__average_warps_issue_stalled_") and c.endswith("_per_issue_active.ratio"):
            stalls.append((x, c[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]))
        if c == "smsp__issue_active.avg.pct_of_peak_sustained_active":
            issue = x
stalls.sort(reverse=True)
head = f"== {name[:70]}: issue slots busy {issue:.0f}%; " if issue is not None else f"== {name[:70]}: "
print(head + "stalls (cycles an instruction): " + ", ".join(f"{n} {x:.2f}" for x, n in stalls[:7] if x >= 0.05))
if not want_src:
    sys.exit()
rows = list(csv.reader(open(src, errors="replace"))) if os.path.exists(src) else []
hi = next((i for i, r in enumerate(rows) if any(c.startswith("Warp Stall Sampling (All") for c in r)), None)
if hi is None:
    print("   no source counters in the report")
    sys.exit()
h = rows[hi]
k = next(j for j, c in enumerate(h) if c.startswith("Warp Stall Sampling (All"))
s = next((j for j, c in enumerate(h) if c == "Source"), 1)
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
data = [r for r in rows[hi + 1:] if len(r) > max(k, s)]
tot = sum(num(r[k]) for r in data) or 1.0
print(f"   SASS lines by stall samples ({len(data)} lines, {tot:.0f} samples):")
for r in sorted(data, key=lambda r: -num(r[k]))[:20]:
    print(f"   {100 * num(r[k]) / tot:5.1f}%  {r[s].strip()[:100]}")
PY
done <<<"$names"
echo "ncu reports and CSV in $OUT"
