#!/usr/bin/env bash
# `tinyfold grad` end to end on a reference fixture: the fixture's weights (as
# a plain PyTorch state_dict in safetensors) with --load, the fixture itself
# as the --data batch, and the written loss, predictions and gradients
# compared with the fixture's float64 truth.
#
# This checks the command's plumbing (which weights, which batch, which
# outputs), not the numerics (test_parity.c does those): the tolerances are
# test_parity's (1e-6 relative for loss and pred, 1e-5 rel_l2 per gradient,
# 10x the fixture's own fp32 rounding, tests/fixtures/README.md), and a
# plumbing mistake moves the results by O(1).
# Usage: test_grad.sh path/to/tinyfold
# Environment: TF_GRAD_BACKEND (cpu), TF_GRAD_FIXTURES (tiny), TF_GRAD_IMPLS
# ("v1 v3"): the GPU machine runs it with cuda, every fixture and level.
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BACKEND=${TF_GRAD_BACKEND:-cpu}
IMPLS=${TF_GRAD_IMPLS:-v1 v3}
for name in ${TF_GRAD_FIXTURES:-tiny}; do
FIX=$ROOT/tests/fixtures/$name.safetensors
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*"
    cat "$TMP/err" 2>/dev/null
    exit 1
}

PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ] || [ ! -f "$FIX" ]; then
    echo "test_grad: skipped (needs python3 with numpy and $FIX)"
    exit 0
fi

# The fixture's param.<name> tensors as a state_dict file.
"$PY" - "$FIX" "$TMP/weights.safetensors" <<'EOF' || fail "could not write the weights"
import sys
sys.path.insert(0, sys.argv[1].rsplit("/tests/", 1)[0] + "/tests/reference")
import safetensors_io as st
t, _ = st.load(sys.argv[1])
st.save(sys.argv[2], {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")})
EOF

for impl in $IMPLS; do
    timeout 300 "$BIN" grad --load "$TMP/weights.safetensors" --data "$FIX" \
        --out "$TMP/grads_$impl.safetensors" --impl "$impl" --backend "$BACKEND" --threads 2 \
        >"$TMP/out" 2>"$TMP/err" </dev/null || fail "grad --impl $impl exited $?"
    [ -s "$TMP/err" ] && fail "grad --impl $impl wrote to stderr"
    "$PY" - "$FIX" "$TMP/grads_$impl.safetensors" "$name $BACKEND $impl" <<'EOF' || fail "grad --impl $impl results"
import sys
import numpy as np
sys.path.insert(0, sys.argv[1].rsplit("/tests/", 1)[0] + "/tests/reference")
import safetensors_io as st
ref, meta = st.load(sys.argv[1])
got, gmeta = st.load(sys.argv[2])
impl = sys.argv[3]
assert gmeta.get("format") == "tinyfold-grads", gmeta

def rel(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)

worst = {}
e = rel(got["loss"], ref["loss"])
assert e <= 1e-6, f"{impl}: loss {got['loss']} vs {ref['loss']} (rel {e:.2e})"
worst["loss"] = e
e = rel(got["pred"], ref["pred"])
assert e <= 1e-6, f"{impl}: pred rel_l2 {e:.2e}"
worst["pred"] = e
grads = [k for k in ref if k.startswith("grad.")]
assert grads, "the fixture has no gradients"
g = 0.0
for k in grads:
    assert k in got, f"{impl}: {k} missing from the gradient file"
    e = rel(got[k], ref[k])
    assert e <= 1e-5, f"{impl}: {k} rel_l2 {e:.2e}"
    g = max(g, e)
worst["grad"] = g
print(f"test_grad {impl}: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
EOF
done
done

# Bad input stays one line, exit 2.
timeout 60 "$BIN" grad --load "$TMP/weights.safetensors" --data "$TMP/nope" --out "$TMP/g" \
    >"$TMP/out" 2>"$TMP/err" </dev/null
[ $? -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "grad with a missing --data"
echo "test_grad: ok"
