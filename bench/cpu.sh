#!/usr/bin/env bash
# The CPU benchmark: tiny and small problems at every level, on 2 threads,
# next to the machine's own sgemm rate. Extra arguments go to `tinyfold bench`
# (e.g. --steps 10 --json bench.json).
#   TINYFOLD=path/to/tinyfold bench/cpu.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${TINYFOLD:-$here/../build/tinyfold}
if [ ! -x "$bin" ]; then
    echo "bench/cpu.sh: no tinyfold binary at $bin (run make, or set TINYFOLD)" >&2
    exit 2
fi
# The OpenMP build of OpenBLAS reads OMP_NUM_THREADS (not OPENBLAS_NUM_THREADS).
export OMP_NUM_THREADS=2
exec "$bin" bench --backend cpu --threads 2 --problems tiny,small "$@"
