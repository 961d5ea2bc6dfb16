#!/usr/bin/env bash
# tinyfold against PyTorch on the CPU, side by side: the tiny and small
# problems of `tinyfold bench`, tinyfold v3 against the reference TinyOpenFold
# of tests/reference/ (float32, AdamW) in each PyTorch mode (bench/peer_cpu.py:
# eager, sdpa, compile, compile-sdpa), 2 threads, runs alternated round by
# round; with --precision bf16, tinyfold --precision bf16 against the same
# modes under torch.autocast("cpu", bfloat16). Prints each run, then per
# problem the median step time over rounds, the peak RSS, and tinyfold
# against the fastest PyTorch mode.
#
#   bench/peer_cpu.sh [--install] [--rounds R] [--steps N] [--warmup W]
#                     [--problems tiny,small] [--modes eager,sdpa,compile,compile-sdpa]
#                     [--precision fp32|bf16]
#
#   --install  create the virtual environment PEER_VENV (default out/peer/venv)
#              and install PyTorch and numpy into it from PyPI (the default
#              wheel; it runs on the CPU), then run
#   PEER_VENV=DIR     an environment that has torch already
#   TINYFOLD=path/to/tinyfold (default build/tinyfold)
#   OUT=DIR           where the per-run JSON goes (default out/peer)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${TINYFOLD:-$root/build/tinyfold}
venv=${PEER_VENV:-$root/out/peer/venv}
out=${OUT:-$root/out/peer}
install=0 rounds=3 steps=10 warmup=3 problems=tiny,small modes=eager,sdpa,compile,compile-sdpa
prec=fp32
while [ $# -gt 0 ]; do
    case $1 in
    --install) install=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --problems) problems=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --precision) prec=$2; shift 2 ;;
    *) echo "bench/peer_cpu.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
case $prec in fp32|bf16) ;; *) echo "bench/peer_cpu.sh: --precision: '$prec' is not accepted: expected fp32 or bf16" >&2; exit 2 ;; esac
if [ ! -x "$bin" ]; then
    echo "bench/peer_cpu.sh: no tinyfold binary at $bin (run make, or set TINYFOLD)" >&2
    exit 2
fi
py=$venv/bin/python
if [ "$install" = 1 ]; then
    [ -x "$py" ] || python3 -m venv "$venv"
    "$py" -m pip install --quiet --upgrade pip
    "$py" -m pip install --quiet torch numpy
fi
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "bench/peer_cpu.sh: no torch in $venv (run with --install, or set PEER_VENV)" >&2
    exit 2
fi
mkdir -p "$out"
# The OpenMP runtimes (tinyfold's OpenBLAS and libgomp, PyTorch's) read
# OMP_NUM_THREADS. Each side keeps its own OpenMP wait policy (tinyfold's
# --omp-wait auto, PyTorch's libgomp as it is by default).
export OMP_NUM_THREADS=2

declare -A dims=([tiny]="2 32 8 2" [small]="4 64 16 4") # B N S blocks, as src/cli/bench.c
run_tinyfold() {  # PROBLEM ROUND -> "median_ms peak_rss_mib"
    local p=$1 r=$2 B N S K
    read -r B N S K <<<"${dims[$p]}"
    "$bin" train --backend cpu --threads 2 --impl v3 --precision "$prec" --batch-size "$B" --seq-len "$N" \
        --num-seqs "$S" --num-blocks "$K" --num-steps "$steps" --warmup-steps "$warmup" \
        --quiet --json "$out/tinyfold.$p.$r.json" >/dev/null
    "$py" - "$out/tinyfold.$p.$r.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
t = [s["step_ms"] for s in d["steps"] if not s["warmup"]]
print(f'{statistics.median(t):.2f} {d["summary"]["host_peak_rss_bytes"] / 2**20:.1f}')
PY
}
run_torch() {  # PROBLEM MODE ROUND -> "median_ms peak_rss_mib"
    local p=$1 m=$2 r=$3
    # torch.compile logs what it retries on stderr: kept in a file, shown on failure
    if ! "$py" "$here/peer_cpu.py" --problem "$p" --mode "$m" --precision "$prec" --steps "$steps" --warmup "$warmup" \
        >"$out/torch.$p.$m.$r.json" 2>"$out/torch.$p.$m.$r.log"; then
        tail -20 "$out/torch.$p.$m.$r.log" >&2
        echo "bench/peer_cpu.sh: PyTorch $m on $p failed (log: $out/torch.$p.$m.$r.log)" >&2
        exit 1
    fi
    "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["median_ms"], d["peak_rss_mib"])' \
        "$out/torch.$p.$m.$r.json"
}

torch_ver=$("$py" -c 'import torch; print(torch.__version__)')
echo "$("$bin" --version 2>/dev/null | head -1) v3 against PyTorch $torch_ver (tests/reference), $prec, OMP_NUM_THREADS=2"
echo "$steps timed steps after $warmup warm-up per run, $rounds rounds; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
IFS=, read -ra plist <<<"$problems"
IFS=, read -ra mlist <<<"$modes"
tab=$out/runs.txt
: >"$tab"
for r in $(seq "$rounds"); do
    for p in "${plist[@]}"; do
        [ -n "${dims[$p]:-}" ] || { echo "bench/peer_cpu.sh: --problems: '$p' is not accepted: expected tiny, small" >&2; exit 2; }
        # tinyfold first in odd rounds, last in even ones: neither side always runs first
        order=(tinyfold "${mlist[@]}")
        [ $((r % 2)) = 0 ] && order=("${mlist[@]}" tinyfold)
        for who in "${order[@]}"; do
            if [ "$who" = tinyfold ]; then res=$(run_tinyfold "$p" "$r"); else res=$(run_torch "$p" "$who" "$r"); fi
            echo "$p $who $res" >>"$tab"
            printf 'round %d %-6s %-13s %10s ms  peak RSS %8s MiB\n' "$r" "$p" "$who" $res
        done
    done
done

echo
"$py" - "$tab" "${plist[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for p in sys.argv[2:]:
    who = sorted({w for q, w, *_ in rows if q == p}, key=lambda w: (w != "tinyfold", w))
    med = {w: statistics.median(float(ms) for q, x, ms, _ in rows if q == p and x == w) for w in who}
    rss = {w: max(float(m) for q, x, _, m in rows if q == p and x == w) for w in who}
    peers = [w for w in who if w != "tinyfold"]
    best = min(peers, key=med.get) if peers else None
    print(f"{p}: median step ms (over rounds), peak RSS MiB (largest)")
    for w in who:
        note = ""
        if w != "tinyfold" and "tinyfold" in med:
            note = f"  tinyfold {med[w] / med['tinyfold']:.2f}x faster, {rss[w] / rss['tinyfold']:.2f}x less memory"
        print(f"  {w:13s} {med[w]:10.1f} {rss[w]:9.1f}{note}{'  (fastest PyTorch)' if w == best else ''}")
PY
