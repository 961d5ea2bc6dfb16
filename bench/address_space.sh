#!/usr/bin/env bash
# The smallest address-space limit (ulimit -v, KiB) under which a command
# exits 0, found by bisection to 1 MiB; or, with --maps, what a process of the
# command maps 3 s after it starts, by file, largest first (a run long enough
# to be in its steps then; it is stopped with SIGINT).
#
#   bench/address_space.sh [--lo KIB] [--hi KIB] -- path/to/tinyfold ARGS...
#   bench/address_space.sh --maps -- path/to/tinyfold ARGS...
#
# e.g. bench/address_space.sh -- build/tinyfold --batch-size 1 --seq-len 16 \
#        --num-seqs 4 --num-blocks 1 --num-steps 2 --warmup-steps 0
# A run that does not end within TIMEOUT s (20) counts as failed (OpenBLAS
# spins when an allocation of its fails). The environment is the caller's
# (OMP_NUM_THREADS sets OpenBLAS's buffers: 129 MiB of address space a thread).
set -euo pipefail
lo=1024 hi=16000000 maps=0
while [ $# -gt 0 ]; do
    case $1 in
    --maps) maps=1; shift ;;
    --lo) lo=$2; shift 2 ;;
    --hi) hi=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "bench/address_space.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
[ $# -ge 1 ] || { echo "bench/address_space.sh: no command after --" >&2; exit 2; }
if [ $maps = 1 ]; then
    "$@" >/dev/null 2>&1 </dev/null &
    pid=$!
    sleep 3
    [ -r /proc/$pid/maps ] || { echo "bench/address_space.sh: the command ended within 3 s" >&2; exit 1; }
    declare -A size=()
    total=0
    while read -r range _ _ _ _ file; do
        b=$((16#${range#*-} - 16#${range%-*}))
        file=${file:-[anonymous]}
        size[$file]=$((${size[$file]:-0} + b))
        total=$((total + b))
    done </proc/$pid/maps
    kill -INT $pid
    wait $pid || true
    for f in "${!size[@]}"; do echo "${size[$f]} $f"; done | sort -rn | head -12 |
        while read -r b f; do printf "%8.1f MiB  %s\n" "$(echo "$b / 1048576" | bc -l)" "$f"; done
    printf "%8.1f MiB  total\n" "$(echo "$total / 1048576" | bc -l)"
    exit 0
fi
ok() { local kib=$1; shift; (ulimit -v "$kib" && exec timeout -k 2 "${TIMEOUT:-20}" "$@" >/dev/null 2>&1 </dev/null) 2>/dev/null; }
ok "$hi" "$@" 2>/dev/null || { echo "bench/address_space.sh: the command fails even under ulimit -v $hi" >&2; exit 1; }
if ok "$lo" "$@"; then echo "runs under ulimit -v $lo KiB (the lower end)"; exit 0; fi
while [ $((hi - lo)) -gt 1024 ]; do
    mid=$(((lo + hi) / 2))
    if ok "$mid" "$@"; then hi=$mid; else lo=$mid; fi
done
echo "smallest ulimit -v: $hi KiB ($((hi / 1024)) MiB; fails at $lo KiB)"
