#!/usr/bin/env bash
# The Makefile's entry points, read from `make -n` (nothing is built): `make
# run` builds the tinyfold target alone, its output to a log, and runs no
# test; `make test` builds every target (the test programs included) and runs
# ctest.
# Usage: check_make_targets.sh REPO_ROOT
set -u
ROOT=${1:?usage: $0 REPO_ROOT}
command -v make >/dev/null 2>&1 || { echo "check_make_targets: skipped (no make)"; exit 77; }
B=/nonexistent/tf-build-check
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
run=$(make -s -n -C "$ROOT" run BUILD=$B 2>&1) || fail "make -n run: $run"
tst=$(make -s -n -C "$ROOT" test BUILD=$B 2>&1) || fail "make -n test: $tst"
grep -q -- "cmake --build $B --target tinyfold " <<<"$run" || fail "make run does not build the tinyfold target alone"
grep -E -- "cmake --build $B( |$)" <<<"$run" | grep -qv -- "--target tinyfold" &&
    fail "make run also builds everything"
grep -q -- "make-run.log" <<<"$run" || fail "make run does not send the build's output to its log"
grep -q "ctest" <<<"$run" && fail "make run runs tests"
grep -q -- "$B/tinyfold train" <<<"$run" || fail "make run does not train"
grep -E -- "cmake --build $B -j" <<<"$tst" | grep -qv -- "--target" || fail "make test does not build every target"
grep -q -- "ctest --test-dir $B" <<<"$tst" || fail "make test does not run ctest"
[ $fails -eq 0 ] || exit 1
echo "check_make_targets: ok"
