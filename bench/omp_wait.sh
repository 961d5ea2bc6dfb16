#!/usr/bin/env bash
# OpenMP wait policy, quiet and loaded: one problem on 2 threads under several
# policies, on idle cores and with LOADERS busy loops on them, alternated
# policy by policy and round by round. Prints each run and the median step
# time per policy and condition, with the load average.
#
#   bench/omp_wait.sh [--rounds R] [--steps N] [--loaders K] [--problem P]
#                     [--policies "own passive spin=1000 t1"]
#
#   --loaders  busy loops of the loaded condition (default 2); 0: quiet only
#   --problem  micro: `tinyfold validate`'s problem (B1 N8 S4, 1 block, c_m 16,
#              c_z 32) trained for --steps steps, the mean step time;
#              tiny or small: `tinyfold bench`'s problems at v3, the median step
#   --policies what each run varies, among
#              own      the binary as it is: no option, neither OMP_WAIT_POLICY
#                       nor GOMP_SPINCOUNT set
#              base     $BASE_BIN likewise (a build of an earlier revision)
#              active, passive, auto   --omp-wait with that value
#              spin=N   GOMP_SPINCOUNT=N in the environment (libgomp's
#                       default, with nothing set, is 300000; 0 is passive)
#              t1       --threads 1
#   NICE=-20   run tinyfold and the loaders at that nice value (root), e.g. to
#              keep a busy machine's other jobs out of the figures.
#   TINYFOLD=path/to/tinyfold (default build/tinyfold); BASE_BIN for `base`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TINYFOLD:-$here/../build/tinyfold}
rounds=3 steps=5 loaders=2 problem=tiny policies="own passive spin=300000"
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --loaders) loaders=$2; shift 2 ;;
    --problem) problem=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    *) echo "bench/omp_wait.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
case $problem in
micro | tiny | small) ;;
*) echo "bench/omp_wait.sh: --problem '$problem': expected micro, tiny or small" >&2; exit 2 ;;
esac
for b in "$bin" ${BASE_BIN:+"$BASE_BIN"}; do
    if [ ! -x "$b" ]; then
        echo "bench/omp_wait.sh: no tinyfold binary at $b (run make, or set TINYFOLD / BASE_BIN)" >&2
        exit 2
    fi
done
for p in $policies; do
    case $p in
    own | active | passive | auto | t1 | spin=[0-9]*) ;;
    base) [ -n "${BASE_BIN:-}" ] || { echo "bench/omp_wait.sh: policy 'base' needs BASE_BIN" >&2; exit 2; } ;;
    *) echo "bench/omp_wait.sh: policy '$p': expected own, base, active, passive, auto, spin=N or t1" >&2; exit 2 ;;
    esac
done
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

# one POLICY: the step ms of one run
one() {
    local policy=$1 b=$bin threads=2 env=() opt=() out
    case $policy in
    base) b=$BASE_BIN ;;
    active | passive | auto) opt=(--omp-wait "$policy") ;;
    spin=*) env=(GOMP_SPINCOUNT="${policy#spin=}") ;;
    t1) threads=1 ;;
    esac
    if [ "$problem" = micro ]; then
        out=$(env "${env[@]}" "${nice_cmd[@]}" "$b" train --backend cpu --threads "$threads" "${opt[@]}" \
              --batch-size 1 --seq-len 8 --num-seqs 4 --num-blocks 1 --msa-dim 16 --pair-dim 32 \
              --warmup-steps 2 --num-steps "$steps" --no-progress --log-every 1000000)
        awk '/Average step time:/ { printf "%s", $4 }' <<<"$out"
    else
        out=$(env "${env[@]}" "${nice_cmd[@]}" "$b" bench --backend cpu --threads "$threads" "${opt[@]}" \
              --problems "$problem" --impls v3 --steps "$steps")
        awk -v p="$problem" '$1 == p && $2 == "v3" { printf "%s", $3 }' <<<"$out"
    fi
    # what the binary says of its wait policy (an earlier build says nothing)
    printf '|%s\n' "$(sed -n 's/.*OpenMP wait: \([^|]*\).*/\1/p' <<<"$out" | head -1)"
}

echo "tinyfold $problem problem, 2 threads, $steps steps per run, $rounds rounds; loaded: $loaders busy loops"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), ${NICE:+nice $NICE, }$(date -u '+%Y-%m-%d %H:%M UTC')"
conds="quiet loaded"
[ "$loaders" -gt 0 ] || conds=quiet
for r in $(seq "$rounds"); do
    for cond in $conds; do
        if [ "$cond" = loaded ]; then
            for _ in $(seq "$loaders"); do
                "${nice_cmd[@]}" bash -c 'while :; do :; done' &
                pids+=($!)
            done
        fi
        for p in $policies; do
            res=$(one "$p")
            ms=${res%%|*} wait=${res#*|}
            echo "$ms" >>"$tmp/$cond.$p"
            printf 'round %d %-6s %-12s %9s ms  (load %s)%s\n' "$r" "$cond" "$p" "$ms" \
                "$(cut -d' ' -f1 /proc/loadavg)" "${wait:+  $wait}"
        done
        stop_loaders
    done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %12s %12s\n' "policy" "quiet ms" "loaded ms"
for p in $policies; do
    printf '%-12s %12s %12s\n' "$p" "$(median "$tmp/quiet.$p")" \
        "$([ -f "$tmp/loaded.$p" ] && median "$tmp/loaded.$p" || echo -)"
done
