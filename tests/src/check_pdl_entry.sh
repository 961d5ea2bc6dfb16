#!/usr/bin/env bash
# Every CUDA kernel must begin with TF_PDL_ENTRY() (cuda_common.h): kernels are
# launched with programmatic dependent launch, and one that did not wait for
# its predecessor first could run beside it. Usage: check_pdl_entry.sh DIR
# (the CUDA sources); prints each kernel that lacks it, exits 1 if any does.
# The check first proves on a made-up file that it catches a missing entry.
set -u
scan() { # files...: prints FILE:LINE of each __global__ body not opened by the entry
    awk '
        FNR == 1 { pending = 0; expect = 0 }
        expect && NF {
            if ($0 !~ /TF_PDL_ENTRY\(\);/) print FILENAME ":" kline ": kernel does not start with TF_PDL_ENTRY();"
            expect = 0
            next
        }
        /__global__/ && $0 !~ /^[ \t]*(\*|\/\/|\/\*)/ { pending = 1; kline = FNR }
        pending && /\{/ {
            pending = 0
            rest = substr($0, index($0, "{") + 1)
            if (rest ~ /[^ \t\\]/) { # body on the same line
                if (rest !~ /^[ \t]*TF_PDL_ENTRY\(\);/) print FILENAME ":" kline ": kernel does not start with TF_PDL_ENTRY();"
            } else expect = 1
        }' "$@"
}
dir=${1:?usage: check_pdl_entry.sh DIR}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '__global__ void good(int *p)\n{\n    TF_PDL_ENTRY();\n    *p = 1;\n}\n__global__ void bad(int *p)\n{\n    *p = 1;\n}\n' > "$tmp/probe.cu"
if [ "$(scan "$tmp/probe.cu" | wc -l)" != 1 ]; then
    echo "check_pdl_entry: the self-check did not find exactly the one bad kernel"; exit 1
fi
files=$(ls "$dir"/*.cu "$dir"/*.h 2>/dev/null)
[ -n "$files" ] || { echo "check_pdl_entry: no CUDA sources in $dir"; exit 1; }
kernels=$(cat $files | grep -v '^[[:space:]]*\(\*\|//\)' | grep -c '__global__')
bad=$(scan $files)
if [ -n "$bad" ]; then echo "$bad"; exit 1; fi
echo "check_pdl_entry: $kernels kernels, each starts with TF_PDL_ENTRY()"
