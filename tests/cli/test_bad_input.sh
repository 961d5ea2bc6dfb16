#!/usr/bin/env bash
# Bad input never trains: every mistake exits with status 2 (never a signal),
# prints exactly one line on stderr naming the flag, and nothing on stdout.
# Usage: test_bad_input.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
cases=0

# bad EXPECT ARGS...: EXPECT must appear in the one stderr line.
bad() {
    local expect=$1
    shift
    cases=$((cases + 1))
    # A case that wrongly starts training is stopped (and fails) by the timeout.
    timeout 60 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$? lines
    lines=$(wc -l <"$TMP/err")
    local why=""
    if [ "$rc" -ge 124 ]; then
        why="exit $rc (signal or timeout)"
    elif [ "$rc" -ne 2 ]; then
        why="exit $rc, expected 2"
    elif [ "$lines" -ne 1 ]; then
        why="$lines stderr lines, expected 1"
    elif ! grep -qF -- "$expect" "$TMP/err"; then
        why="stderr does not mention '$expect'"
    elif ! grep -q '^tinyfold: ' "$TMP/err"; then
        why="stderr line does not start with 'tinyfold: '"
    elif [ -s "$TMP/out" ]; then
        why="stdout is not empty"
    fi
    if [ -n "$why" ]; then
        fails=$((fails + 1))
        printf 'FAIL: tinyfold %s\n  %s\n  stderr: %s\n' "$*" "$why" "$(head -c 400 "$TMP/err")"
    fi
}

# good ARGS...: exit 0, something on stdout, nothing on stderr.
good() {
    cases=$((cases + 1))
    timeout 60 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne 0 ] || [ ! -s "$TMP/out" ] || [ -s "$TMP/err" ]; then
        fails=$((fails + 1))
        printf 'FAIL: tinyfold %s\n  exit %s, stdout %s bytes, stderr: %s\n' "$*" "$rc" \
            "$(wc -c <"$TMP/out")" "$(head -c 400 "$TMP/err")"
    fi
}

# Values no integer knob accepts.
junk=("abc" "12abc" "99999999999999999999" "" "1.5" " 5" "0x10" "5 " "--")

# int_knob FLAG LO HI [extra args]: junk, LO-1 and HI+1 are refused.
int_knob() {
    local flag=$1 lo=$2 hi=$3
    shift 3
    local v
    for v in "${junk[@]}" "$((lo - 1))" "$((hi + 1))" "-2147483649"; do
        bad "$flag" "$@" "$flag" "$v"
        bad "$flag" "$@" "$flag=$v"
    done
}

int_knob --batch-size 1 256
int_knob --seq-len 1 4096
int_knob --num-seqs 1 4096
int_knob --num-blocks 1 64
int_knob --msa-dim 1 4096
int_knob --pair-dim 1 4096
int_knob --num-steps 1 1000000
int_knob --warmup-steps 0 100000
int_knob --device 0 255
int_knob --threads 0 1024
int_knob --log-every 1 1000000
int_knob --save-every 1 1000000 --save "$TMP/ck"
int_knob --trace-steps 1 1000 profile --out "$TMP/p"
int_knob --top 1 10000 profile --out "$TMP/p"
int_knob --steps 1 1000 bench
int_knob --batch-size 1 256 grad --load "$TMP/w" --data "$TMP/d" --out "$TMP/g"

# The exact message of the brief.
"$BIN" --seq-len 0 2>"$TMP/err" >/dev/null
if [ "$(cat "$TMP/err")" != "tinyfold: --seq-len: '0' is not accepted: expected an integer in [1, 4096]" ]; then
    fails=$((fails + 1))
    echo "FAIL: --seq-len 0 message: $(cat "$TMP/err")"
fi

for v in -1 abc 18446744073709551616 1.5 "" " 1" 0x1; do bad --seed --seed "$v"; done
for v in 0 -1 -0.0003 abc nan inf 2 1.0001 1e-60 3e-4x "" 0x1p-3 " 1e-3"; do
    bad --learning-rate --learning-rate "$v"
done

# Enumerations.
for v in gpu CPU "" rocm 1; do bad --backend --backend "$v"; done
for v in v4 v0 3 V1 ""; do bad --impl --impl "$v"; done
for v in fp8 FP32 BF16 half fp16x ""; do bad --precision --precision "$v"; done
# --use-amp is --precision fp16: any other explicit precision is refused
for v in fp32 tf32 bf16; do bad --use-amp --use-amp --precision "$v"; done
bad --use-amp --precision bf16 --use-amp
bad --use-amp --use-amp=1
bad --use-amp bench --use-amp --precision fp32
for v in fast gemm=tensor attn=k7,gemm=auto "lane=" tile=64 wgrad_delay_us=-5 ""; do
    bad --gpu-plan --gpu-plan "$v"
done
bad --gpu-plan bench --gpu-plan gemm=fast
bad --gpu-plan validate --gpu-plan portable,dw=wg
bad --gpu-plan train --gpu-plan lane=on --recompute modules
bad --problems bench --problems huge
bad --problems bench --problems tiny,,small
bad --problems bench --problems ""
bad --impls bench --impls v1,v9

# Shapes the model cannot take.
bad --msa-dim --msa-dim 66
bad --msa-dim --msa-dim 2
bad --pair-dim --pair-dim 130
bad --pair-dim --pair-dim 3
bad --seq-len --seq-len 4096 --batch-size 256   # batch * N^2 rows overflow 32 bits
bad --precision --backend cpu --precision tf32
bad --graph --backend cpu --graph
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
    bad --backend --backend cuda
fi
# no AMD GPU here: without a HIP build, a ROCm runtime or a device, one line naming which
if [ ! -e /dev/kfd ]; then
    bad --backend --backend hip
fi
bad --profile-regions --profile-regions ""
bad --profile-regions --profile-regions "forward_pass,,backward_pass"
# A region no run opens would collect nothing: refused, naming the valid ones.
bad "'nonexistent' is not a region" --profile-regions nonexistent
bad "block_0..block_11" train --profile-regions forward_pass,bogus
bad "did you mean forward_pass?" profile --out "$TMP/prof" --selected-regions forwrd_pass
bad "'bogus' is not a region" profile --out "$TMP/prof" --selected-regions bogus
[ -e "$TMP/prof" ] && { echo "FAIL: a refused profile created its --out"; fails=$((fails + 1)); }
timeout 120 "$BIN" profile --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 \
    --pair-dim 32 --backend cpu --threads 1 --warmup-steps 0 --num-steps 1 --quiet \
    --out "$TMP/prof_ok" --selected-regions "forward_pass, block_0" >/dev/null 2>&1 </dev/null ||
    { echo "FAIL: valid --selected-regions refused"; fails=$((fails + 1)); }

# Missing values, unknown and misspelt options, stray arguments.
bad --seq-len --seq-len
bad --seq-len --seq-len --batch-size 4
bad --json --json
bad --foo --foo
bad "--seq" --seq 64                    # abbreviations are refused
bad "did you mean --seq-len" --seq-lenn 64
bad "did you mean --batch-size?" --bacth-size 4   # a swap is one edit, not two
bad "did you mean --backend?" --bakend cpu
bad "did you mean --batch-size?" --batch 4
bad "'-x'" -x
bad "'foo'" --seq-len 8 foo
bad --quiet --quiet=1
bad --problems train --problems tiny    # another command's option
bad --out train --out x
bad "'frobnicate'" frobnicate
bad "'frobnicate'" help frobnicate
bad --version --version extra

# Rules between options; files that cannot be used.
bad --out profile
bad --load grad --data "$TMP/d" --out "$TMP/g"
bad --data grad --load "$TMP/w" --out "$TMP/g"
bad --out grad --load "$TMP/w" --data "$TMP/d"
bad --save-every --save-every 5
# the profiler's GPU timers: CUPTI is NVIDIA's, the CPU has the host clock
bad "cupti or events" profile --out "$TMP/p" --gpu-timer cuda
bad --gpu-timer profile --out "$TMP/p" --backend cpu --gpu-timer events
bad --gpu-timer profile --out "$TMP/p" --backend hip --gpu-timer cupti
bad "rocprofv3" profile --out "$TMP/p" --backend hip --counters layernorm
bad --counters profile --out "$TMP/p" --backend cuda --gpu-timer events --counters layernorm
bad --load --resume "$TMP/ck" --load "$TMP/ck"
bad --resume --resume "$TMP/does-not-exist"
bad --load --load "$TMP/does-not-exist"
bad --data --data "$TMP/does-not-exist"
bad --json --json "$TMP/no-such-dir/run.json"
bad --json --json "$TMP"
bad --save --save "$TMP/no-such-dir/ck"
bad --load --load ""

# Too large for memory: the trainer's plan refuses it (one line, exit 2).
cases=$((cases + 1))
timeout 120 "$BIN" --seq-len 4096 --batch-size 64 --num-steps 1 >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
if [ "$rc" -ne 2 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ]; then
    fails=$((fails + 1))
    echo "FAIL: too-large problem: exit $rc, stderr: $(head -c 400 "$TMP/err")"
fi

# Help is not an error.
good --help
good -h
good help
good help train
good help profile
good help bench
good help validate
good help grad
good help compare
good train --help
good profile --help
good bench --help
good --version
for knob in --batch-size --seq-len --num-seqs --num-blocks --num-steps --warmup-steps --msa-dim \
    --pair-dim --learning-rate --seed --device --backend --threads --impl --precision --use-amp --graph --gpu-plan \
    --enable-all-fusion --disable-all-fusion --enable-qkv-fusion-msa --disable-qkv-fusion-msa \
    --enable-qkv-fusion-triangle --disable-qkv-fusion-triangle --enable-flash-attention \
    --disable-flash-attention --enable-triangle-fusion --disable-triangle-fusion \
    --enable-memory-profiling --json --save --save-every --load --resume --data --quiet \
    --log-every --no-progress; do
    cases=$((cases + 1))
    if ! "$BIN" help train | grep -qF -- "$knob"; then
        fails=$((fails + 1))
        echo "FAIL: help train does not document $knob"
    fi
done

echo "test_bad_input: $cases cases, $fails failed"
[ "$fails" -eq 0 ]
