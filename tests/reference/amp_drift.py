"""How far PyTorch's own mixed precision moves the loss and the gradients of
the reference model, to judge tinyfold's bf16/fp16 drift against:

    python tests/reference/amp_drift.py [--tinyfold build/tinyfold] [--init fixture|spec]

For each shape, from the same fp32 weights and the same batch, loss and every
parameter gradient are computed in fp32 and under torch.autocast("cpu") with
bf16 (and fp16 where this torch's CPU autocast takes it); printed:
    loss_rel = |L_amp - L_fp32| / |L_fp32|
    grad_rel = ||g_amp - g_fp32|| / ||g_fp32||  (all gradients as one vector)
The fp32 row is fp32 against float64: the floor fp32 itself sits on.
With --tinyfold, the same weights and batch go through `tinyfold grad
--precision fp32|bf16|fp16` and its precisions are compared with its fp32
the same way (a precision it refuses is reported, not fatal).
Autocast is PyTorch's policy (matmuls in the low type, most pointwise ops in
their input's type), not tinyfold's contract (fp32 compute, one rounding per
store): the figures are a scale, not a bound.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import safetensors_io as st
import reference_run as rr
from tinyopenfold_ref import Config, TinyOpenFold, init_spec

# (name, B, N, S): tinyfold's default batch (tf_config_default) and an odd one.
SHAPES = [("small", 4, 64, 16), ("odd", 3, 23, 5)]


def flat(g, names):
    return torch.cat([g[n].double().reshape(-1) for n in names])


def rel(a, b):
    """|a - b| / |b| for scalars, ||a - b|| / ||b|| for vectors (b the baseline)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return (torch.linalg.norm(a - b) / torch.linalg.norm(b)).item()


def run_torch(model, batch, autocast_dtype=None):
    """(loss, {name: grad}) in the model's dtype, under CPU autocast if given."""
    model.zero_grad(set_to_none=True)
    if autocast_dtype is None:
        loss, _ = rr.forward_loss(model, batch)
    else:
        with torch.autocast("cpu", dtype=autocast_dtype):
            # an unsupported dtype only warns and runs unchanged (torch 1.13, fp16)
            if (torch.ones(1, 1) @ torch.ones(1, 1)).dtype != autocast_dtype:
                raise RuntimeError(f"autocast to {autocast_dtype} is not applied")
            loss, _ = rr.forward_loss(model, batch)
    loss.backward()
    g = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach().double().item(), g


def make_problem(B, N, S, init, seed):
    """fp32-rounded weights (float64 model) and an fp32 batch, seeded."""
    cfg = Config()  # tinyfold's default dims
    model = TinyOpenFold(cfg).double()
    gen = torch.Generator().manual_seed(seed)
    if init == "fixture":
        rr.init_fixture(model, gen)
    else:
        init_spec(model, gen)
    rr.round_params_fp32(model)
    batch = rr.make_batch(gen, B, S, N)
    return cfg, model, batch


def tinyfold_grads(exe, cfg, model, batch, precisions, threads):
    """{precision: (loss, grads) or error string} from `tinyfold grad`."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        w, data = os.path.join(d, "w.safetensors"), os.path.join(d, "batch.safetensors")
        meta = rr.config_metadata(cfg)
        meta.update({"format": "tinyopenfold-reference-checkpoint", "version": "1"})
        st.save(w, {n: t.detach().float() for n, t in model.state_dict().items()}, meta)
        st.save(data, batch, {})
        for p in precisions:
            g = os.path.join(d, f"g_{p}.safetensors")
            cmd = [exe, "grad", "--load", w, "--data", data, "--out", g, "--backend", "cpu",
                   "--precision", p, "--quiet"]
            if threads:
                cmd += ["--threads", str(threads)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
                out[p] = msg[-1] if msg else f"exit status {r.returncode}"
                continue
            t, _ = st.load(g)
            out[p] = (float(t["loss"][0]),
                      {k[5:]: torch.from_numpy(v) for k, v in t.items() if k.startswith("grad.")})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--init", choices=["fixture", "spec"], default="fixture",
                    help="fixture: O(1) activations (default); spec: docs/model.md N(0, 0.02)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tinyfold", default=None, help="tinyfold executable to compare too")
    ap.add_argument("--threads", type=int, default=0, help="torch and tinyfold threads (0: default)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, numpy {np.__version__}, init {a.init}, seed {a.seed}")

    amp = [("bf16", torch.bfloat16), ("fp16", torch.float16)]
    for name, B, N, S in SHAPES:
        cfg, m64, batch = make_problem(B, N, S, a.init, a.seed)
        m32 = TinyOpenFold(cfg).float()
        m32.load_state_dict(m64.state_dict())
        L64, g64 = run_torch(m64, rr.to_device(batch, torch.float64, "cpu"))
        b32 = rr.to_device(batch, torch.float32, "cpu")
        L32, g32 = run_torch(m32, b32)
        names = list(g32)
        G32 = flat(g32, names)
        print(f"\n{name}: B {B} N {N} S {S}, msa_dim {cfg.msa_dim} pair_dim {cfg.pair_dim} "
              f"blocks {cfg.n_blocks}; loss fp32 {L32:.9g}, |g| fp32 {G32.norm().item():.6g}")
        print(f"  {'':<22}{'loss_rel':>12}{'grad_rel':>12}")
        print(f"  {'torch fp32 vs fp64':<22}{rel(L32, L64):12.3e}{rel(G32, flat(g64, names)):12.3e}")
        for label, dt in amp:
            try:
                L, g = run_torch(m32, b32, dt)
            except RuntimeError as e:
                print(f"  torch autocast {label:<7} not supported on the CPU: {str(e).splitlines()[0]}")
                continue
            print(f"  {'torch autocast ' + label:<22}{rel(L, L32):12.3e}{rel(flat(g, names), G32):12.3e}")
        if a.tinyfold:
            tf = tinyfold_grads(a.tinyfold, cfg, m64, batch, ["fp32", "bf16", "fp16"], a.threads)
            if isinstance(tf["fp32"], str):
                print(f"  tinyfold fp32 failed: {tf['fp32']}")
                continue
            Lt, gt = tf["fp32"]
            Gt = flat(gt, names)
            print(f"  {'tinyfold fp32 vs fp64':<22}{rel(Lt, L64):12.3e}{rel(Gt, flat(g64, names)):12.3e}")
            for p in ("bf16", "fp16"):
                if isinstance(tf[p], str):
                    print(f"  tinyfold {p} refused: {tf[p]}")
                    continue
                L, g = tf[p]
                print(f"  {'tinyfold ' + p:<22}{rel(L, Lt):12.3e}{rel(flat(g, names), Gt):12.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
