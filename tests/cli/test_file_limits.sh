#!/usr/bin/env bash
# Values read from files are range-checked and reported by file and field:
# checkpoint step counters near 2^63, a stored learning rate out of range;
# --threads above what the BLAS build and the machine support is capped and
# said once; a non-finite loss before any update names what overflowed (fp32's
# or fp16's range), not the learning rate, and leaves mean_loss null; compare refuses
# trailing data with one line.
# Usage: test_file_limits.sh path/to/tinyfold
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/cli/lib_st.sh"
cli_test_begin "${1:-}"
TINY=(--batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32
      --backend cpu --threads 1 --quiet --warmup-steps 0 --num-steps 1)
run() { timeout 120 "$BIN" "$@" >out 2>err </dev/null; }
# refused_file WANT ARGS...: exit 2, one line naming the file and WANT.
refused_file() {
    local want=$1 file=$2
    shift 2
    run "$@"
    local rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <err)" -ne 1 ] || ! grep -q "$file.*$want" err ||
        grep -q -- "--learning-rate:" err; then
        echo "FAIL: tinyfold $* -> exit $rc: $(cat err)"
        fails=$((fails + 1))
    fi
}

run train "${TINY[@]}" --save ck || { echo "FAIL: setup: $(cat err)"; exit 1; }
for v in 9223372036854775807 9223372036854775806 9007199254740993; do
    st_set_meta ck gs.ck "s/\"global_step\":\"1\"/\"global_step\":\"$v\"/"
    refused_file "metadata 'global_step' is '$v'" gs.ck train --resume gs.ck --backend cpu \
        --threads 1 --quiet --num-steps 2
    cp ck as.ck # the optimizer's counters are in the optimizer file beside it
    st_set_meta ck.optim.safetensors as.ck.optim.safetensors \
        "s/\"adam_step\":\"1\"/\"adam_step\":\"$v\"/"
    refused_file "metadata 'adam_step' is '$v'" as.ck train --resume as.ck --backend cpu \
        --threads 1 --quiet --num-steps 2
done
# A run may take a checkpoint up to 2^53 and no further: the checkpoint it
# saves is one its own --resume reads, and the JSON holds the exact step.
st_set_meta ck big.ck 's/"global_step":"1"/"global_step":"9007199254740991"/'
st_set_meta ck.optim.safetensors big.ck.optim.safetensors \
    's/"global_step":"1"/"global_step":"9007199254740991"/'
run train --resume big.ck --backend cpu --threads 1 --quiet --num-steps 1 --json big.json \
    --save top.ck || fail "global_step 2^53 - 1 should resume: $(cat err)"
tr -d ' \t\n' <big.json | grep -q '"step":9007199254740991,' ||
    fail "the JSON's step is not exact: $(tr -d ' \t\n' <big.json | grep -o '"step":[^,]*')"
grep -aq '"global_step":"9007199254740992"' top.ck || fail "the saved checkpoint's step"
run train --load top.ck --backend cpu --threads 1 --quiet --num-steps 1 ||
    fail "a checkpoint at 2^53 should load: $(cat err)"
refused_file "at global step 9007199254740992.*at most 0 more steps" top.ck train --resume top.ck \
    --backend cpu --threads 1 --quiet --num-steps 1
st_set_meta ck big.ck 's/"global_step":"1"/"global_step":"9007199254740990"/'
st_set_meta ck.optim.safetensors big.ck.optim.safetensors \
    's/"global_step":"1"/"global_step":"9007199254740990"/'
refused_file "at most 2 more steps" big.ck train --resume big.ck --backend cpu --threads 1 \
    --quiet --num-steps 3
cp ck as.ck
st_set_meta ck.optim.safetensors as.ck.optim.safetensors 's/"adam_step":"1"/"adam_step":"2"/'
refused_file "'adam_step' is '2', expected at most global_step (1)" as.ck train --resume as.ck \
    --backend cpu --threads 1 --quiet --num-steps 1
# A stored learning rate out of range names the file and the field.
st_set_meta ck lr.ck 's/learning_rate\\":[0-9.e-]*/learning_rate\\":5/'
refused_file "learning_rate.*expected a number in (0, 1\]" lr.ck train --resume lr.ck \
    --backend cpu --threads 1 --quiet --num-steps 1
st_set_meta ck nb.ck 's/n_blocks\\":1/n_blocks\\":100000/'
refused_file "n_blocks.*expected an integer in \[0, 64\]" nb.ck train --load nb.ck \
    --batch-size 1 --seq-len 8 --num-seqs 2 --backend cpu --threads 1 --quiet --num-steps 1

# --threads above the machine: capped, said once in the header.
run train --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --msa-dim 16 --pair-dim 32 \
    --backend cpu --warmup-steps 0 --num-steps 1 --threads 1024 || fail "--threads 1024: $(cat err)"
[ "$(grep -c "1024 threads capped at" out)" -eq 1 ] || fail "--threads 1024: not said once: $(grep -i thread out)"

# A non-finite loss at the run's first step: the data or weights, not the rate.
cp "$ROOT/tests/fixtures/tiny.safetensors" huge.st
off=$(($(st_data_offset huge.st) + 192)) # pair_features follows 48 I32 tokens
for i in $(seq 0 63); do st_put_bytes huge.st $((off + 4 * i)) '\xff\xff\x7f\x7f'; done
run train --batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1 \
    --quiet --warmup-steps 1 --num-steps 1 --data huge.st --json huge.json
rc=$?
if [ $rc -eq 1 ]; then
    grep -q "before any update" err || fail "non-finite first step: message: $(cat err)"
    grep -q "learning-rate" err && fail "non-finite first step: blames the learning rate: $(cat err)"
    grep -q "overflows fp32's range: the batch's pair features reach 3.40282e+38" err ||
        fail "FLT_MAX pair features: the overflow is not named: $(cat err)"
    tr -d ' \t\n' <huge.json | grep -q '"mean_loss":null' || fail "mean_loss should be null"
    tr -d ' \t\n' <huge.json | grep -q '"status":"failed"' || fail "status should be failed"
else
    fail "FLT_MAX pair features: expected a non-finite loss (exit 1), got $rc: $(cat err)"
fi

# Pair features of 1e8 overflow fp16's range in the forward, not fp32's:
# found by the same forward in fp32, and bf16 named.
cp "$ROOT/tests/fixtures/tiny.safetensors" big.st
for i in $(seq 0 63); do st_put_bytes big.st $((off + 4 * i)) '\x20\xbc\xbe\x4c'; done
run train --batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1 \
    --quiet --warmup-steps 1 --num-steps 1 --data big.st --precision fp16
[ $? -eq 1 ] || fail "1e8 pair features in fp16: expected exit 1: $(cat err)"
[ "$(wc -l <err)" -eq 1 ] || fail "1e8 pair features in fp16: not one line: $(cat err)"
grep -q "same forward in fp32 gives loss [0-9.]*: the forward leaves fp16's range" err &&
    grep -q "pair features reach 1e+08" err && grep -q "bf16" err ||
    fail "1e8 pair features in fp16: the overflow is not named: $(cat err)"
grep -q "learning-rate\|initial weights" err && fail "1e8 pair features in fp16: wrong cause: $(cat err)"
run train --batch-size 1 --num-blocks 1 --msa-dim 16 --pair-dim 32 --backend cpu --threads 1 \
    --quiet --warmup-steps 1 --num-steps 1 --data big.st --precision bf16 ||
    fail "1e8 pair features in bf16: $(cat err)"

# The memory check counts saving: a model whose parameters alone exceed the
# machine is refused before anything is allocated, naming the rule, saving
# and the knobs that size the parameters.
run train --backend cpu --threads 1 --msa-dim 4096 --pair-dim 64 --num-blocks 64 --num-steps 1 \
    --quiet --save huge.ck
[ $? -eq 2 ] && grep -q "90%.*--msa-dim" err && grep -q "saving the checkpoint" err ||
    fail "memory check with --save: $(cat err)"
[ ! -e huge.ck ] || fail "memory check: a checkpoint was written"

# compare: trailing data, one line.
run train "${TINY[@]}" --json a.json || fail "setup a.json"
cp a.json b.json
echo '{}' >>b.json
run compare a.json b.json
[ $? -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q "^tinyfold: compare: .*data after" err ||
    fail "compare with trailing data: $(cat err)"
run compare a.json
[ $? -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q "^tinyfold: " err ||
    fail "compare with one file: $(cat err)"
run compare a.json a.json || fail "compare of a file with itself: $(cat err)"
[ $fails -eq 0 ] || exit 1
echo "test_file_limits: ok"
