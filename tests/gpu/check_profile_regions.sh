#!/usr/bin/env bash
# On an NVIDIA GPU with ncu: `--profile-regions` narrows an external profiler
# to the named regions. tinyfold brackets them with cudaProfilerStart/Stop, so
# `ncu --profile-from-start off` must collect exactly the kernels launched
# inside them, which ncu's own NVTX filter (the "tinyfold" domain's ranges)
# gives independently.
#
#   tests/gpu/check_profile_regions.sh path/to/tinyfold     (a CUDA build)
#
# Checks, one PASS/FAIL line each (exit 1 if any failed):
#  1. forward_pass selected: some kernels, none of them a backward kernel
#     (*_bwd*) or the optimizer (adamw), and the same kernels, in the same
#     order, as ncu --nvtx-include "tinyfold@forward_pass/"
#  2. backward_pass selected: backward kernels present, no forward-only
#     kernel of the attention or LayerNorm (*_fwd*), no adamw
#  3. both selected: as many kernels as the two runs together
#  4. nothing selected (ncu --profile-from-start off): no kernel at all
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
NCU=${NCU:-ncu}
command -v "$NCU" >/dev/null 2>&1 || { echo "SKIP: no ncu"; exit 0; }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not an executable"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
# a small problem, two steps: every region of a step, in seconds under ncu
RUN=(train --backend cuda --impl v3 --batch-size 1 --seq-len 16 --num-seqs 4 --num-blocks 1
     --num-steps 2 --warmup-steps 0 --quiet)

# kernels NAME FILE ncu-args... -- tinyfold-args...: the kernel names ncu
# collected, one a line, in launch order
kernels() {
    local out=$1; shift
    "$NCU" --csv --metrics gpu__time_duration.sum "$@" >"$TMP/raw.csv" 2>"$TMP/ncu.log"
    local rc=$?
    python3 - "$TMP/raw.csv" >"$out" <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
seen = {}
for r in csv.DictReader(rows):
    if r.get("ID") is not None and r.get("Kernel Name"):
        seen.setdefault(int(r["ID"]), r["Kernel Name"])
for i in sorted(seen):
    print(seen[i])
PY
    return $rc
}

kernels "$TMP/fwd" --profile-from-start off "$BIN" "${RUN[@]}" --profile-regions forward_pass \
    || bad "ncu run (forward_pass): $(tail -3 "$TMP/ncu.log")"
kernels "$TMP/fwd_nvtx" --nvtx --nvtx-include "tinyfold@forward_pass/" "$BIN" "${RUN[@]}" \
    || bad "ncu run (NVTX filter): $(tail -3 "$TMP/ncu.log")"
kernels "$TMP/bwd" --profile-from-start off "$BIN" "${RUN[@]}" --profile-regions backward_pass \
    || bad "ncu run (backward_pass): $(tail -3 "$TMP/ncu.log")"
kernels "$TMP/both" --profile-from-start off "$BIN" "${RUN[@]}" \
    --profile-regions forward_pass,backward_pass || bad "ncu run (both)"
kernels "$TMP/none" --profile-from-start off "$BIN" "${RUN[@]}" || bad "ncu run (none)"

nf=$(wc -l <"$TMP/fwd"); nb=$(wc -l <"$TMP/bwd"); nboth=$(wc -l <"$TMP/both")
nnv=$(wc -l <"$TMP/fwd_nvtx"); nnone=$(wc -l <"$TMP/none")
echo "kernels collected: forward_pass $nf, backward_pass $nb, both $nboth, none $nnone; NVTX filter $nnv"

if [ "$nf" -gt 0 ] && ! grep -qiE '_bwd|adamw' "$TMP/fwd"; then
    ok "forward_pass: $nf kernels, no backward kernel, no optimizer"
else
    bad "forward_pass: $nf kernels; backward/optimizer among them: $(grep -iE '_bwd|adamw' "$TMP/fwd" | sort -u | head -3 | tr '\n' ' ')"
fi
if [ "$nnv" -eq 0 ]; then
    bad "the NVTX filter collected nothing (this ncu's --nvtx-include syntax?): compare by hand"
elif cmp -s "$TMP/fwd" "$TMP/fwd_nvtx"; then
    ok "forward_pass: the same $nf kernels, in order, as ncu's NVTX filter on the region"
else
    bad "forward_pass differs from ncu's NVTX filter ($nf vs $nnv kernels): $(diff "$TMP/fwd" "$TMP/fwd_nvtx" | head -4 | tr '\n' ' ')"
fi
if [ "$nb" -gt 0 ] && grep -qi '_bwd' "$TMP/bwd" && ! grep -qiE 'adamw|(layernorm|attn)[a-z0-9]*_fwd' "$TMP/bwd"; then
    ok "backward_pass: $nb kernels, backward ones among them, no forward LayerNorm/attention, no optimizer"
else
    bad "backward_pass: $nb kernels: $(sort -u "$TMP/bwd" | head -5 | tr '\n' ' ')"
fi
if [ "$nboth" -eq $((nf + nb)) ]; then
    ok "forward_pass,backward_pass: $nboth kernels = $nf + $nb"
else
    bad "forward_pass,backward_pass: $nboth kernels, expected $nf + $nb"
fi
if [ "$nnone" -eq 0 ]; then
    ok "no --profile-regions under --profile-from-start off: nothing collected"
else
    bad "no --profile-regions: $nnone kernels collected, expected 0"
fi
[ "$fails" -eq 0 ] && echo "ALL PASS" || echo "$fails FAILED"
exit $((fails > 0))
