#!/usr/bin/env bash
# Proves that tinyfold's profiling regions are emitted as NVTX ranges (what
# Nsight Systems shows) without nsys: builds tests/gpu/nvtx_probe.c, an NVTX3
# injection library that logs every range push/pop, loads it through
# NVTX_INJECTION64_PATH into a tiny CPU-backend training run (a CUDA build's
# markers fire on every region even with --backend cpu and profiling off), and
# checks the ranges: domain "tinyfold", balanced and nested, the expected
# region names, forward_pass once per step. Needs no GPU.
# Prints one PASS/FAIL line per check; exits non-zero if any failed. SKIPs
# (exit 0) without NVTX3 headers, a C compiler, or a CUDA build of tinyfold.
# Usage: tests/gpu/check_nvtx.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
HERE=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}

inc=""
for d in ${CUDA_INCLUDE:-} ${CUDA_HOME:+$CUDA_HOME/include} /usr/local/cuda/include \
         $(command -v nvcc >/dev/null 2>&1 && echo "$(dirname "$(command -v nvcc)")/../include"); do
    if [ -f "$d/nvtx3/nvToolsExt.h" ]; then inc=$d; break; fi
done
[ -n "$inc" ] || { echo "SKIP: no NVTX3 headers"; exit 0; }
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 0; }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not an executable"; exit 1; }
# NVTX3 is header-only: a binary with NVTX calls in it carries the name of the
# injection variable it reads. A CPU-only build (markers compile to nothing)
# does not.
if ! grep -aqF NVTX_INJECTION64_PATH "$BIN"; then
    echo "SKIP: $BIN has no NVTX (built without CUDA)"
    exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

if ! "$CC" -shared -fPIC -O2 -Wall -Wextra -I"$inc" "$HERE/nvtx_probe.c" -o "$TMP/nvtx_probe.so" \
    2>"$TMP/cc.log"; then
    cat "$TMP/cc.log"
    bad "build the NVTX probe"
    exit 1
fi
[ -s "$TMP/cc.log" ] && { cat "$TMP/cc.log"; bad "probe builds without warnings"; }

EV=$TMP/nvtx.txt
NVTX_INJECTION64_PATH=$TMP/nvtx_probe.so NVTX_PROBE_OUT=$EV OMP_NUM_THREADS=2 \
    timeout 300 "$BIN" train --backend cpu --impl v3 --batch-size 1 --seq-len 8 --num-seqs 4 \
    --num-blocks 1 --msa-dim 16 --pair-dim 32 --num-steps 2 --warmup-steps 1 --quiet \
    >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
if [ "$rc" -eq 0 ]; then ok "training run with the probe (exit 0)"; else
    bad "training run with the probe: exit $rc"; cat "$TMP/err"; fi
if [ ! -s "$EV" ]; then
    bad "probe recorded no NVTX events (injection not loaded, or no ranges)"
    echo "$fails check(s) failed"
    exit 1
fi

# domain: every push/pop in the "tinyfold" domain (other domains: none expected)
other=$(awk '$2 != "tinyfold"' "$EV" | wc -l)
ntf=$(awk '$1 == "push" && $2 == "tinyfold"' "$EV" | wc -l)
if [ "$ntf" -gt 0 ] && [ "$other" -eq 0 ]; then ok "domain: $ntf ranges in domain \"tinyfold\", none elsewhere"
else bad "domain: $ntf in \"tinyfold\", $other events in other domains"; fi

# balance and nesting: replay the stack; report anything inconsistent
nest=$(awk '
    $1 == "push" { stack[++d] = $3; path = ""
                   for (i = 1; i <= d; i++) path = path "/" stack[i]
                   if ($3 == "forward_pass" && d != 1) print "forward_pass at depth " d
                   if ($3 == "block_0" && stack[d-1] != "forward_pass" && stack[d-1] != "backward_pass")
                       print "block_0 under " path
                   if ($3 ~ /^(msa_(row|column)_attention|triangle_(mult|attn)_[a-z]+|pair_transition|outer_product_mean)$/ \
                       && stack[d-1] != "block_0")
                       print $3 " under " path
                   next }
    $1 == "pop"  { if (d == 0) { print "pop with nothing pushed (line " NR ")"; next } d--; next }
                 { print "unparsable line " NR ": " $0 }
    END { if (d != 0) print d " range(s) left open" }' "$EV")
npush=$(awk '$1 == "push"' "$EV" | wc -l)
npop=$(awk '$1 == "pop"' "$EV" | wc -l)
if [ "$npush" -eq "$npop" ]; then ok "balance: $npush pushes, $npop pops"
else bad "balance: $npush pushes, $npop pops"; fi
if [ -z "$nest" ]; then ok "nesting: stack consistent, regions under their parents"
else bad "nesting:"; echo "$nest" | head -10; fi

# the region names
missing=""
for n in forward_pass backward_pass optimizer_step data_loading block_0 msa_row_attention \
    msa_column_attention triangle_mult_outgoing triangle_attn_starting pair_transition \
    outer_product_mean; do
    awk -v n="$n" '$1 == "push" && $3 == n { f = 1 } END { exit !f }' "$EV" || missing="$missing $n"
done
if [ -z "$missing" ]; then ok "names: all 11 expected regions present"
else bad "names: missing$missing"; fi

# one forward_pass per step: 2 timed + 1 warm-up
nfwd=$(awk '$1 == "push" && $3 == "forward_pass"' "$EV" | wc -l)
if [ "$nfwd" -eq 3 ]; then ok "forward_pass pushed 3 times (1 warm-up + 2 steps)"
else bad "forward_pass pushed $nfwd times, expected 3"; fi

nnames=$(awk '$1 == "push" { print $3 }' "$EV" | sort -u | wc -l)
echo "summary: $npush NVTX ranges, $nnames distinct names; top:" \
    "$(awk '$1 == "push" { c[$3]++ } END { for (k in c) print c[k], k }' "$EV" | sort -rn | head -5 |
       awk '{ printf "%s%s=%s", (NR > 1 ? ", " : ""), $2, $1 }')"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
