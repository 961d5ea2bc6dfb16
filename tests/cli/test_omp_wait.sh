#!/usr/bin/env bash
# OpenMP's wait policy: with neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY set,
# the binary runs with a bounded spin (src/backend/cpu/cpu_backend.c); a value
# the user sets is kept. libgomp prints what it read with OMP_DISPLAY_ENV.
# Usage: test_omp_wait.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
fails=0
spin() { env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$@" "$BIN" help 2>&1 >/dev/null |
         sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p"; }
check() {
    local what=$1 expect=$2 got=$3
    if [ "$got" != "$expect" ]; then
        echo "FAIL: $what: GOMP_SPINCOUNT '$got', expected '$expect'"
        fails=$((fails + 1))
    fi
}
check "nothing set" 10000 "$(spin)"
check "GOMP_SPINCOUNT=300000" 300000 "$(spin GOMP_SPINCOUNT=300000)"
check "OMP_WAIT_POLICY=passive" 0 "$(spin OMP_WAIT_POLICY=passive)"
# the arguments reach the second image unchanged
out=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$BIN" --seq-len 0 2>&1)
[ "$out" = "tinyfold: --seq-len: '0' is not accepted: expected an integer in [1, 4096]" ] ||
    { echo "FAIL: arguments after the re-run: $out"; fails=$((fails + 1)); }
echo "$((4 - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
