#!/usr/bin/env bash
# OpenMP wait policy, quiet and loaded: the tiny problem (v3, 2 threads) with
# the binary's own wait policy next to other GOMP_SPINCOUNT values, on an idle
# machine and with LOADERS busy loops on the cores, alternated round by round.
# Prints the median step time per policy and condition.
#
#   bench/omp_wait.sh [--rounds R] [--steps N] [--loaders K] [--spins "300000 0"]
#
#   --spins   GOMP_SPINCOUNT values to compare with the binary's own choice
#             ("own": neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY set);
#             300000 is libgomp's default when nothing is set (spins before
#             sleeping at a barrier), 0 is OMP_WAIT_POLICY=passive's.
#   NICE=-20  run tinyfold and the loaders at that nice value (root), e.g. to
#             keep a busy machine's other jobs out of the figures.
#   TINYFOLD=path/to/tinyfold (default build/tinyfold)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TINYFOLD:-$here/../build/tinyfold}
rounds=3 steps=5 loaders=2 spins="300000 0"
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --loaders) loaders=$2; shift 2 ;;
    --spins) spins=$2; shift 2 ;;
    *) echo "bench/omp_wait.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
if [ ! -x "$bin" ]; then
    echo "bench/omp_wait.sh: no tinyfold binary at $bin (run make, or set TINYFOLD)" >&2
    exit 2
fi
nice_cmd=()
[ -n "${NICE:-}" ] && nice_cmd=(nice -n "$NICE")
export OMP_NUM_THREADS=2
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
tmp=$(mktemp -d)
pids=()
stop_loaders() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'stop_loaders; rm -rf "$tmp"' EXIT

# one POLICY: the median step ms of one `tinyfold bench` run
one() {
    local policy=$1 out
    if [ "$policy" = own ]; then
        out=$("${nice_cmd[@]}" "$bin" bench --backend cpu --threads 2 --problems tiny --impls v3 --steps "$steps")
    else
        out=$(GOMP_SPINCOUNT=$policy "${nice_cmd[@]}" "$bin" bench --backend cpu --threads 2 \
              --problems tiny --impls v3 --steps "$steps")
    fi
    awk '$1 == "tiny" && $2 == "v3" { print $3 }' <<<"$out"
}

policies="own $spins"
echo "tinyfold bench tiny v3, 2 threads, $steps steps per run, $rounds rounds; loaded: $loaders busy loops"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), ${NICE:+nice $NICE, }$(date -u '+%Y-%m-%d %H:%M UTC')"
for r in $(seq "$rounds"); do
    for cond in quiet loaded; do
        if [ "$cond" = loaded ]; then
            for _ in $(seq "$loaders"); do
                "${nice_cmd[@]}" bash -c 'while :; do :; done' &
                pids+=($!)
            done
        fi
        for p in $policies; do
            ms=$(one "$p")
            echo "$ms" >>"$tmp/$cond.$p"
            printf 'round %d %-6s %-8s %8s ms\n' "$r" "$cond" "$p" "$ms"
        done
        stop_loaders
    done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
printf '%-10s %12s %12s\n' "policy" "quiet ms" "loaded ms"
for p in $policies; do
    printf '%-10s %12s %12s\n' "$p" "$(median "$tmp/quiet.$p")" "$(median "$tmp/loaded.$p")"
done
