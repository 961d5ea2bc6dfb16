#!/usr/bin/env python3
"""PyTorch state_dicts in the layouts users bring load into tinyfold and give
the reference's loss.

    upstream_load.py path/to/tinyfold

The reference TinyOpenFold (tinyopenfold_ref.py, fixture initialisation,
weights rounded to float32) is saved four ways, no metadata, as PyTorch
writes them:
  - plain: model.state_dict();
  - dp: nn.DataParallel(model).state_dict() (torch's own "module." prefix);
  - v2: the upstream v2 script's default fusions, each fused weight the
    reference's parts stacked along the output rows (torch.cat): q|k|v as
    qkv_proj, left|right as left_right_proj and left_right_gate;
  - dp_v2: both.
Each loads with `tinyfold grad --load FILE --data BATCH` (CPU, fp32) and its
loss is the reference's float64 loss of the same weights on the same batch
within 1e-5 relative (fp32 against float64: test_parity's bound on the loss),
and the four losses are one value bit for bit. A fused tensor with a row too
few is refused, exit 2, in one line naming the file and the tensor. Exits 77
(skipped) where torch is not installed."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("upstream_load: skipped (no torch)")
    sys.exit(77)

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_run as rr  # noqa: E402
import safetensors_io as st  # noqa: E402
from tinyopenfold_ref import Config, TinyOpenFold  # noqa: E402

# the upstream v2 script's fused weights: (name, parts in the order stacked)
FUSED = [("qkv_proj", ("q_proj", "k_proj", "v_proj")),
         ("left_right_proj", ("left_proj", "right_proj")),
         ("left_right_gate", ("left_gate", "right_gate"))]


def fuse(sd):
    """The v2 layout of a state_dict: every group of parts replaced by one
    tensor named as the v2 script names it, in the place of its first part."""
    out = {}
    for k, v in sd.items():
        stem, _, leaf = k.rpartition(".")  # leaf: "weight"
        stem, _, mod = stem.rpartition(".")
        group = next((g for g in FUSED if mod in g[1]), None)
        if group is None:
            out[k] = v
        elif mod == group[1][0]:
            out[f"{stem}.{group[0]}.{leaf}"] = torch.cat([sd[f"{stem}.{p}.{leaf}"] for p in group[1]])
    return out


def save(path, sd):
    st.save(path, {k: v.detach().float().contiguous() for k, v in sd.items()})


def tinyfold_loss(tinyfold, weights, batch, out):
    r = subprocess.run([tinyfold, "grad", "--backend", "cpu", "--threads", "2", "--load", weights,
                        "--data", batch, "--out", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: tinyfold grad --load {weights}: exit {r.returncode}: {r.stderr}")
    g, _ = st.load(out)
    return float(np.asarray(g["loss"]).reshape(-1)[0])


def main():
    tinyfold = sys.argv[1]
    cfg = Config(msa_dim=16, pair_dim=32, n_blocks=2, n_heads_msa=4, n_heads_pair=4, outer_dim=8)
    gen = torch.Generator().manual_seed(11)
    model = TinyOpenFold(cfg).double()
    rr.init_fixture(model, gen)
    rr.round_params_fp32(model)
    batch = rr.make_batch(gen, 2, 3, 12)
    with torch.no_grad():
        ref, _ = rr.forward_loss(model, rr.to_device(batch, torch.float64, "cpu"))
    ref = ref.item()

    sd = model.state_dict()
    dp = torch.nn.DataParallel(model).state_dict()
    assert all(k.startswith("module.") for k in dp), list(dp)[:3]
    v2 = fuse(sd)
    fused_names = [k for k in v2 if k not in sd]
    assert {g[0] for g in FUSED} <= {k.rsplit(".", 2)[-2] for k in fused_names}, fused_names
    layouts = {"plain": sd, "dp": dp, "v2": v2, "dp_v2": {"module." + k: v for k, v in v2.items()}}

    fails = 0
    with tempfile.TemporaryDirectory() as d:
        bpath = os.path.join(d, "batch.safetensors")
        st.save(bpath, batch)
        losses = {}
        for name, layout in layouts.items():
            w = os.path.join(d, name + ".safetensors")
            save(w, layout)
            losses[name] = tinyfold_loss(tinyfold, w, bpath, os.path.join(d, name + ".grad"))
            rel = abs(losses[name] - ref) / abs(ref)
            print(f"{name}: {len(layout)} tensors, loss {losses[name]!r} (reference {ref!r}, "
                  f"rel {rel:.2e})")
            if rel > 1e-5:
                print(f"FAIL: {name}: the loss is {rel:.2e} from the reference's")
                fails += 1
        if len(set(losses.values())) != 1:
            print(f"FAIL: the layouts' losses differ: {losses}")
            fails += 1

        # a fused tensor a row short: refused naming the file and the tensor
        bad = dict(v2)
        name = next(k for k in fused_names if ".qkv_proj." in k)
        bad[name] = bad[name][:-1]
        w = os.path.join(d, "short.safetensors")
        save(w, bad)
        r = subprocess.run([tinyfold, "grad", "--backend", "cpu", "--load", w, "--data", bpath,
                            "--out", os.path.join(d, "short.grad")], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or "short.safetensors" not in lines[0] \
                or name not in lines[0]:
            print(f"FAIL: a short {name}: exit {r.returncode}, stderr {r.stderr!r}")
            fails += 1
        else:
            print(f"short {name}: refused: {lines[0]}")
    if fails:
        sys.exit(1)
    print("upstream_load: ok")


if __name__ == "__main__":
    main()
