#!/usr/bin/env bash
# PyTorch on the GPU, the peer tinyfold is compared with: the reference
# TinyOpenFold of tests/reference/ trained by bench/peer_gpu.py for every
# problem x precision x mode, each run its own python process killed after
# TIMEOUT seconds. Every run's JSON line (a failed one as {"error": ...}) goes
# to OUT/peer_gpu.jsonl; a table follows, the fastest mode of each problem and
# precision marked. Exits 1 when a run failed, after the table.
#
#   [PROBLEMS="small large"] [PRECS="fp32 tf32 bf16"] [MODES="eager compile graphs"]
#   [STEPS=20] [WARMUP=5] [TIMEOUT=300] [DEVICE=cuda] [PYTHON=python3]
#   [OUT=out/peer_gpu] bench/peer_gpu.sh
#
# MODES may also name sdpa, compile-sdpa and graphs-sdpa; precisions and modes
# are described in `bench/peer_gpu.py --help`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
py=${PYTHON:-python3}
out=${OUT:-$root/out/peer_gpu}
timeout=${TIMEOUT:-300}
jsonl=$out/peer_gpu.jsonl
mkdir -p "$out"
: >"$jsonl"
echo "PyTorch $("$py" -c 'import torch; print(torch.__version__)') peer on ${DEVICE:-cuda}: ${STEPS:-20} timed steps after ${WARMUP:-5} warm-up, $(date -u '+%Y-%m-%d %H:%M UTC')"
command -v nvidia-smi >/dev/null && { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true; }

failed=0
for p in ${PROBLEMS:-small large}; do
    for prec in ${PRECS:-fp32 tf32 bf16}; do
        for m in ${MODES:-eager compile graphs}; do
            run=$out/$p.$prec.$m
            rc=0
            # -k: a process that ignores the TERM (a compile worker stuck) is killed 10 s later
            timeout -k 10 "$timeout" "$py" "$here/peer_gpu.py" --device "${DEVICE:-cuda}" \
                --problem "$p" --precision "$prec" --mode "$m" \
                --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" >"$run.json" 2>"$run.log" || rc=$?
            line=$(grep '^{' "$run.json" | tail -n 1 || true)
            if [ "$rc" != 0 ]; then
                failed=$((failed + 1))
                tail -n 5 "$run.log" >&2
                case $rc in 124 | 137) why="timed out after $timeout s" ;; *) why="exit $rc" ;; esac
                echo "bench/peer_gpu.sh: $p $prec $m failed ($why), log: $run.log" >&2
                # peer_gpu.py's own error line where it printed one, else one made here
                [[ $line == *'"error"'* ]] ||
                    line="{\"problem\": \"$p\", \"precision\": \"$prec\", \"mode\": \"$m\", \"error\": \"$why\"}"
            fi
            echo "$line" >>"$jsonl"
            echo "$line"
        done
    done
done

echo
"$py" - "$jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in rows:
    k = (r["problem"], r["precision"])
    if "error" not in r and (k not in best or r["median_ms"] < best[k]["median_ms"]):
        best[k] = r
ok = [r for r in rows if "error" not in r]
if ok:
    print(f'{ok[0]["device"]}, torch {ok[0]["torch"]}; peak MiB: {ok[0]["peak_of"]}')
print(f'{"problem":8s} {"prec":5s} {"mode":13s} {"adamw":6s} {"median ms":>10s} {"samples/s":>10s} {"peak MiB":>9s}')
for r in rows:
    head = f'{r["problem"]:8s} {r["precision"]:5s} {r["mode"]:13s}'
    if "error" in r:
        print(f'{head} failed: {r["error"][:100]}')
        continue
    mark = "  <- fastest" if best[(r["problem"], r["precision"])] is r else ""
    skips = "  (cudagraph skipped)" if r.get("cudagraph_skips") and r["mode"].startswith("graphs") else ""
    print(f'{head} {r["adamw"]:6s} {r["median_ms"]:10.3f} {r["samples_per_s"]:10.1f} '
          f'{r["peak_mib"]:9.1f}{mark}{skips}')
PY
[ "$failed" = 0 ] || { echo "bench/peer_gpu.sh: $failed run(s) failed" >&2; exit 1; }
