#!/usr/bin/env bash
# Two tinyfold binaries train the same problem to the same bits: a few steps
# at every level, both precisions, eager and --graph, saving a checkpoint
# (parameters and Adam moments), which must be byte-identical. One line per
# case; exits non-zero if any differs.
#   tests/gpu/same_bits.sh BASE_BIN NEW_BIN [backend]     (backend: cuda, cpu)
set -u
A=${1:?usage: tests/gpu/same_bits.sh BASE_BIN NEW_BIN [backend]}
B=${2:?usage: tests/gpu/same_bits.sh BASE_BIN NEW_BIN [backend]}
BE=${3:-cuda}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
prob="--batch-size 2 --seq-len 32 --num-seqs 8 --num-blocks 2 --msa-dim 32 --pair-dim 64"
for impl in v1 v2 v3; do
    for prec in fp32 tf32; do
        for graph in "" --graph; do
            [ "$BE" = cpu ] && { [ "$prec" = tf32 ] || [ -n "$graph" ]; } && continue
            name="$impl $prec ${graph:-eager}"
            for side in a b; do
                bin=$A
                [ $side = b ] && bin=$B
                "$bin" train --backend "$BE" $prob --impl $impl --precision $prec $graph \
                    --num-steps 4 --warmup-steps 2 --save "$T/$side.ck" > "$T/$side.log" 2>&1 ||
                    { echo "FAIL $name: $side exited $? ($(tail -1 "$T/$side.log"))"; fails=$((fails + 1)); continue 2; }
            done
            if cmp -s "$T/a.ck" "$T/b.ck"; then
                echo "PASS $name: checkpoints identical ($(grep -m1 -o 'Loss: [0-9.]*' "$T/b.log" | tail -1))"
            else
                echo "FAIL $name: checkpoints differ"
                fails=$((fails + 1))
            fi
        done
    done
done
exit $((fails > 0))
