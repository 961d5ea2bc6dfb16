#!/bin/sh
# CUDA compiler launcher (CMake's CUDA_COMPILER_LAUNCHER): runs the compile
# command given as arguments and passes its output on, less ptxas's C7519
# advisory ("warpgroup.arrive is injected ... to allow use of registers in
# GMMA"), an "info" line per wgmma kernel that no ptxas option turns off.
# Every other line, warnings and errors included, and the exit status are
# the compiler's.
dir=$(mktemp -d) || exec "$@"
"$@" >"$dir/out" 2>"$dir/err"
rc=$?
grep -v 'ptxas info *: (C7519)' "$dir/out"
grep -v 'ptxas info *: (C7519)' "$dir/err" >&2
rm -rf "$dir"
exit "$rc"
