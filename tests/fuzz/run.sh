#!/bin/bash
# Build the libFuzzer target over the safetensors reader and run it for a
# bounded time. Exits non-zero when the fuzzer finds a crash, a leak, a
# sanitizer report or a broken invariant (the input is kept under
# $FUZZ_DIR/artifacts/).
#
# usage: tests/fuzz/run.sh [seconds]        (default 60)
# env:   FUZZ_DIR  work dir (binary, corpus, artifacts); default ${TMPDIR:-/tmp}/tinyfold_fuzz
#        FUZZ_CC   compiler (default clang-14; needs libclang-rt-14-dev)
#        FUZZ_ARGS extra libFuzzer flags (e.g. -jobs=2 -workers=2)
set -euo pipefail
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${FUZZ_DIR:-${TMPDIR:-/tmp}/tinyfold_fuzz}
cc=${FUZZ_CC:-clang-14}
mkdir -p "$work/corpus" "$work/seed" "$work/artifacts"

command -v "$cc" >/dev/null || { echo "run.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
cjson_flags=$(pkg-config --cflags --libs libcjson 2>/dev/null || echo "-I/usr/include/cjson -lcjson")

# shellcheck disable=SC2086
"$cc" -std=c11 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
    -I"$root/include" -I"$root/src" \
    -o "$work/fuzz_safetensors" \
    "$here/fuzz_safetensors.c" "$root/src/io/safetensors.c" "$root/src/io/io_util.c" \
    $cjson_flags -lm

python3 "$here/make_corpus.py" "$work/seed"

# Seeds are read from $work/seed; new inputs go to $work/corpus (kept between runs).
# shellcheck disable=SC2086
set +e
"$work/fuzz_safetensors" \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
    -dict="$here/safetensors.dict" \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    ${FUZZ_ARGS:-} "$work/corpus" "$work/seed" 2>"$work/fuzz.log"
rc=$?
set -e
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|INFO: Loaded|DONE|cov:" "$work/fuzz.log" | tail -n 6 >&2 || true
if [ $rc -ne 0 ]; then
    tail -n 60 "$work/fuzz.log" >&2
    echo "run.sh: FAILED (libFuzzer exit $rc); reproducer(s): $(ls "$work/artifacts" | head -5)" >&2
    exit 1
fi
echo "run.sh: ok, no crash in ${secs}s; corpus $(ls "$work/corpus" | wc -l) files; log $work/fuzz.log" >&2
