#!/usr/bin/env bash
# What `make run` and `make test` build.
#  - The Makefile's entry points, read from `make -n` (nothing is built):
#    `make run` builds the tinyfold target, and the GPU module's target
#    (tinyfold_gpu) only where a GPU is usable (HAVE_GPU=1, or found on this
#    machine), its output to a log, and runs no test; `make test` builds
#    every target (the test programs and the GPU module included) and runs
#    ctest. Installing missing packages keeps apt-get's output in a log
#    unless it fails (an apt-get stand-in on PATH; nothing is installed).
#  - The targets, read from a configured build directory's dependency graph
#    (BUILD_DIR, a Makefile generator's: CMakeFiles/Makefile2): the tinyfold
#    target does not reach the GPU module (else `make run` would compile it
#    on a machine without a GPU), tinyfold_gpu exists and, where the build
#    has a GPU module, reaches it, and so does `all`.
# Usage: check_make_targets.sh REPO_ROOT [BUILD_DIR]
set -u
ROOT=${1:?usage: $0 REPO_ROOT [BUILD_DIR]}
BUILD_DIR=${2:-}
command -v make >/dev/null 2>&1 || { echo "check_make_targets: skipped (no make)"; exit 77; }
B=/nonexistent/tf-build-check
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
# the `cmake --build` lines of a make -n output
builds() { grep -E -- "cmake --build $B( |$)" <<<"$1"; }

# make run, told there is no GPU, and told there is one
for gpu in 0 1; do
    run=$(make -s -n -C "$ROOT" run BUILD=$B HAVE_GPU=$gpu 2>&1) || fail "make -n run HAVE_GPU=$gpu: $run"
    b=$(builds "$run")
    [ "$(wc -l <<<"$b")" -eq 1 ] || fail "make run HAVE_GPU=$gpu: not one cmake --build: $b"
    if [ $gpu = 0 ]; then
        grep -Eq -- "--target tinyfold( |$)" <<<"$b" && ! grep -q "tinyfold_gpu" <<<"$b" ||
            fail "make run without a GPU does not build the tinyfold target alone: $b"
    else
        grep -Eq -- "--target tinyfold tinyfold_gpu( |$)" <<<"$b" ||
            fail "make run with a GPU does not build tinyfold and tinyfold_gpu: $b"
    fi
    grep -q -- "--target" <<<"$b" || fail "make run HAVE_GPU=$gpu builds everything"
    grep -q -- "make-run.log" <<<"$run" || fail "make run does not send the build's output to its log"
    grep -q "ctest" <<<"$run" && fail "make run runs tests"
    grep -q -- "$B/tinyfold train" <<<"$run" || fail "make run does not train"
done

# make run as it finds this machine: the module only where a GPU is usable
unset HAVE_GPU
here=0
{ [ -e /dev/nvidiactl ] || [ -e /dev/kfd ] || nvidia-smi -L >/dev/null 2>&1; } && here=1
run=$(make -s -n -C "$ROOT" run BUILD=$B 2>&1) || fail "make -n run: $run"
if [ $here = 0 ]; then
    builds "$run" | grep -q "tinyfold_gpu" && fail "make run builds the GPU module on a machine without a GPU"
else
    builds "$run" | grep -q "tinyfold_gpu" || fail "make run does not build the GPU module on a machine with a GPU"
fi

tst=$(make -s -n -C "$ROOT" test BUILD=$B 2>&1) || fail "make -n test: $tst"
grep -E -- "cmake --build $B -j" <<<"$tst" | grep -qv -- "--target" || fail "make test does not build every target"
grep -q -- "ctest --test-dir $B" <<<"$tst" || fail "make test does not run ctest"

# Installing what is missing is quiet: apt-get's output (a stand-in printing
# 75 lines here) goes to a log, shown only when it fails.
if command -v dpkg-query >/dev/null 2>&1; then
    fake=$(mktemp -d)
    printf '#!/bin/sh\nfor i in $(seq 75); do echo "Get:$i progress"; done\n[ -z "$TF_FAKE_APT_FAIL" ]\n' \
        >"$fake/apt-get"
    printf '#!/bin/sh\nexec "$@"\n' >"$fake/sudo"
    chmod +x "$fake/apt-get" "$fake/sudo"
    out=$(PATH=$fake:$PATH make -s -C "$ROOT" deps EXTRA_PKGS=tf-no-such-package TMPDIR="$fake" 2>&1) ||
        fail "make deps with a missing package: $(tail -3 <<<"$out")"
    [ "$(wc -l <<<"$out")" -eq 1 ] || fail "make deps is not one line: $(head -3 <<<"$out")"
    grep -q "Get:" <<<"$out" && fail "make deps shows apt-get's progress"
    out=$(PATH=$fake:$PATH TF_FAKE_APT_FAIL=1 make -s -C "$ROOT" deps EXTRA_PKGS=tf-no-such-package \
        TMPDIR="$fake" 2>&1) && fail "make deps passed a failed apt-get"
    grep -q "Get:75" <<<"$out" && grep -q "apt-get failed (its output: $fake/tinyfold-apt" <<<"$out" ||
        fail "a failed apt-get: its output's end and its log not shown: $(tail -2 <<<"$out")"
    rm -rf "$fake"
fi

# The targets' dependencies, from a configured build directory.
M=$BUILD_DIR/CMakeFiles/Makefile2
if [ -n "$BUILD_DIR" ] && [ -f "$M" ]; then
    # every target NAME reaches, from the lines "CMakeFiles/NAME.dir/all: CMakeFiles/DEP.dir/all"
    # (and "all: CMakeFiles/DEP.dir/all"): one name a line, NAME included
    reach() {
        awk -v start="$1" '
            function name(s) { sub(/\/all:?$/, "", s); sub(/^.*CMakeFiles\//, "", s); sub(/\.dir$/, "", s); return s }
            $1 ~ /(^|\/)all:$/ && $2 ~ /\.dir\/all$/ { from = ($1 == "all:") ? "all" : name($1); edge[from] = edge[from] " " name($2) }
            END {
                todo[start] = 1; seen[start] = 1; n = 1
                while (n > 0) {
                    for (t in todo) { delete todo[t]; n--; break }
                    k = split(edge[t], ds, " ")
                    for (i = 1; i <= k; i++) if (!(ds[i] in seen)) { seen[ds[i]] = 1; todo[ds[i]] = 1; n++ }
                }
                for (t in seen) print t
            }' "$M"
    }
    grep -q "CMakeFiles/tinyfold_gpu.dir/all:" "$M" || fail "no tinyfold_gpu target in $BUILD_DIR"
    bin=$(reach tinyfold)
    grep -q "^tinyfold_core$" <<<"$bin" || fail "the dependency graph was not read: tinyfold reaches $(tr '\n' ' ' <<<"$bin")"
    mods=$(grep -oE "CMakeFiles/tinyfold_(cuda|hip)\.dir/all:" "$M" | sed 's|CMakeFiles/||; s|\.dir/all:||' | sort -u)
    for bad in tinyfold_gpu tinyfold_cuda tinyfold_hip tinyfold_wgmma; do
        grep -qx "$bad" <<<"$bin" && fail "the tinyfold target depends on $bad: make run would build the GPU module"
    done
    for m in $mods; do
        reach tinyfold_gpu | grep -qx "$m" || fail "tinyfold_gpu does not build $m"
        reach all | grep -qx "$m" || fail "the default target (make build, make test) does not build $m"
    done
    echo "check_make_targets: targets of $BUILD_DIR read (GPU module: ${mods:-none})"
elif [ -n "$BUILD_DIR" ]; then
    echo "check_make_targets: $BUILD_DIR has no CMakeFiles/Makefile2 (another generator): its targets not read"
fi
[ $fails -eq 0 ] || exit 1
echo "check_make_targets: ok"
