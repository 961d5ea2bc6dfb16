#!/bin/bash
# Build the libFuzzer targets over tinyfold's readers and run each for a
# bounded time:
#   fuzz_safetensors      the safetensors reader (src/io/safetensors.c)
#   fuzz_datafile         the data-file loader (src/io/datafile.c)
#   fuzz_checkpoint_meta  the checkpoint metadata reader (src/io/checkpoint_meta.c)
#   fuzz_compare          compare's JSON and CSV readers and table (src/report/compare*.c)
#   fuzz_report           report's readers and page (src/report/report_*.c)
# Exits non-zero when a fuzzer finds a crash, a leak, a sanitizer report or a
# broken invariant (the input is kept under $FUZZ_DIR/<target>/artifacts/).
#
# usage: tests/fuzz/run.sh [seconds-per-target] [target ...]   (default 30, all)
# env:   FUZZ_DIR  work dir (binaries, corpora, artifacts); default ${TMPDIR:-/tmp}/tinyfold_fuzz
#        FUZZ_CC   compiler (default clang-14; needs libclang-rt-14-dev)
#        FUZZ_ARGS extra libFuzzer flags (e.g. -jobs=2 -workers=2)
#        FUZZ_JOBS targets built and run at once (default: the processors);
#                  each fuzzer is one process, so each still gets its seconds
#                  of a core of its own
set -euo pipefail
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors datafile checkpoint_meta compare report)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${FUZZ_DIR:-${TMPDIR:-/tmp}/tinyfold_fuzz}
cc=${FUZZ_CC:-clang-14}

command -v "$cc" >/dev/null || { echo "run.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
cjson_flags=$(pkg-config --cflags --libs libcjson 2>/dev/null || echo "-I/usr/include/cjson -lcjson")

io="$root/src/io"
fio="$root/src/fileio"
sources() { # target -> the sources it links besides its own file
    case $1 in
    safetensors) echo "$io/safetensors.c $fio/io_util.c" ;;
    datafile) echo "$io/datafile.c $io/safetensors.c $fio/io_util.c" ;;
    checkpoint_meta) echo "$io/checkpoint_meta.c $io/checkpoint_names.c $root/src/model/params.c $io/config_json.c $io/safetensors.c $fio/io_util.c $root/src/config/config.c $root/src/backend/gpu_plan.c $root/src/backend/backend.c $root/src/backend/registry.c $root/src/backend/cuda_stub.c $here/backend_stub.c" ;;
    compare) echo "$root"/src/report/compare*.c "$fio/io_util.c $fio/text_escape.c" ;;
    report) echo "$root"/src/report/report_*.c "$root/src/report/compare_rocprof.c $fio/io_util.c $fio/outcheck.c $fio/text_escape.c" ;;
    *) echo "run.sh: unknown target '$1' (expected safetensors, datafile, checkpoint_meta, compare, report)" >&2; exit 2 ;;
    esac
}
seed_kind() { case $1 in checkpoint_meta) echo checkpoint ;; *) echo "$1" ;; esac; }

# one target: build, seed, fuzz; non-zero when the fuzzer failed
fuzz_one() {
    local t=$1 dir="$work/$1" mask="" rc
    mkdir -p "$dir/corpus" "$dir/seed" "$dir/artifacts"
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c11 -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L \
        -I"$root/include" -I"$root/src" \
        -o "$dir/fuzz_$t" "$here/fuzz_$t.c" $(sources "$t") $cjson_flags -lm
    python3 "$here/make_corpus.py" "$dir/seed" "$(seed_kind "$t")" >&2
    # Seeds are read from seed/; new inputs go to corpus/ (kept between runs).
    # fuzz_compare and fuzz_report print refusals on stderr: -close_fd_mask=2
    # keeps the log small.
    [ "$t" = compare ] || [ "$t" = report ] && mask="-close_fd_mask=2"
    set +e
    # shellcheck disable=SC2086
    "$dir/fuzz_$t" \
        -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
        -dict="$here/safetensors.dict" $mask \
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1 \
        ${FUZZ_ARGS:-} "$dir/corpus" "$dir/seed" 2>"$dir/fuzz.log"
    rc=$?
    set -e
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$dir/fuzz.log" | tail -n 2 |
        sed "s/^/fuzz_$t: /" >&2 || true
    if [ $rc -ne 0 ]; then
        tail -n 60 "$dir/fuzz.log" >&2
        echo "run.sh: fuzz_$t FAILED (libFuzzer exit $rc); reproducer(s): $(ls "$dir/artifacts" | head -5)" >&2
        return 1
    fi
    echo "run.sh: fuzz_$t ok, no crash in ${secs}s; corpus $(ls "$dir/corpus" | wc -l) files; log $dir/fuzz.log" >&2
}

jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
failed=0
pids=()
for t in "${targets[@]}"; do
    sources "$t" >/dev/null # an unknown target fails here, before any runs
    fuzz_one "$t" & pids+=($!)
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
