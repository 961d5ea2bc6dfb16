"""Write the committed fixtures tests/fixtures/*.safetensors and their README.

    /usr/bin/python3 tests/reference/make_fixtures.py

Everything is computed in float64 from float32-rounded weights and inputs and
stored as float32 (the exact function, rounded once). The same computation in
float32 torch is compared with it; that error table goes into the README and,
per tensor, into fp32_errors.csv.
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import torch

import safetensors_io as st
import reference_run as rr
from tinyopenfold_ref import Config, TinyOpenFold, self_check, unused_params

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# name, problem, model, AdamW steps stored (0: no after.*/losses), seed
FIXTURES = [
    dict(name="tiny", B=2, S=3, N=8, cfg=Config(msa_dim=16, pair_dim=32, n_blocks=2),
         adam_steps=3, seed=1001),
    dict(name="odd", B=3, S=5, N=7, cfg=Config(msa_dim=12, pair_dim=20, n_blocks=1),
         adam_steps=3, seed=1002),
    # 670,784 parameters: weights + grads alone are 5.4 MB, so no after.* here.
    dict(name="defaults", B=1, S=2, N=6, cfg=Config(msa_dim=64, pair_dim=128, n_blocks=1),
         adam_steps=0, seed=1003),
]


def rel_l2(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    nb = torch.linalg.norm(b).item()
    nd = torch.linalg.norm(a - b).item()
    return nd / nb if nb > 0 else (0.0 if nd == 0 else float("inf"))


def max_elem(a, b):
    """max |a-b| / (|b| + max|b| * 1e-3): relative, floored at 1e-3 of the scale."""
    a, b = a.double().flatten(), b.double().flatten()
    if b.numel() == 0:
        return 0.0
    floor = b.abs().max().item() * 1e-3
    den = b.abs() + floor
    d = (a - b).abs()
    if floor == 0:
        return 0.0 if d.max().item() == 0 else float("inf")
    return (d / den).max().item()


def run_all(model_fp32_state, cfg, batch, lr, adam_steps, dtype):
    """loss, pred, grads, losses, after at `dtype`, starting from fp32 weights."""
    model = rr.build_model(model_fp32_state, cfg, dtype=dtype)
    b = rr.to_device(batch, dtype, "cpu")
    loss, pred, g = rr.grads(model, b)
    losses, after = rr.adam_run(model, b, lr, adam_steps) if adam_steps else (None, None)
    return dict(loss=loss.reshape(1), pred=pred, grads=g, losses=losses, after=after)


def make_one(fx, lr, command):
    cfg = fx["cfg"]
    self_check(cfg)
    gen = torch.Generator().manual_seed(fx["seed"])
    model = TinyOpenFold(cfg).double()
    rr.init_fixture(model, gen)
    rr.round_params_fp32(model)
    params = {n: p.detach().float() for n, p in model.named_parameters()}
    batch = rr.make_batch(gen, fx["B"], fx["S"], fx["N"])

    ref = run_all(params, cfg, batch, lr, fx["adam_steps"], torch.float64)
    f32 = run_all(params, cfg, batch, lr, fx["adam_steps"], torch.float32)

    no_grad = [n for n in params if n not in ref["grads"]]
    assert no_grad == unused_params(model), no_grad

    meta = rr.config_metadata(cfg, fx["B"], fx["S"], fx["N"])
    meta.update({
        "lr": repr(lr), "adam_steps": str(fx["adam_steps"]), "weight_decay": "0.01",
        "betas": "0.9,0.999", "eps": "1e-08",
        "format": "tinyfold-fixture", "version": "1", "name": fx["name"],
        "seed": str(fx["seed"]), "command": command, "torch_version": torch.__version__,
        "computed_in": "float64 from the stored float32 weights/inputs, rounded once to float32",
        "init": "tests/reference/reference_run.py:init_fixture (not the docs/model.md init)",
        "no_grad": ",".join(no_grad),
    })
    t = dict(batch)
    t["loss"] = ref["loss"].float()
    t["pred"] = ref["pred"].float()
    if fx["adam_steps"]:
        t["losses"] = ref["losses"].float()
    for n, p in params.items():
        t["param." + n] = p
    for n, g in ref["grads"].items():
        t["grad." + n] = g.float()
    if fx["adam_steps"]:
        for n, p in ref["after"].items():
            t["after." + n] = p.float()

    errs = []  # (quantity, tensor, rel_l2, max_elem)
    errs.append(("loss", "loss", rel_l2(f32["loss"], ref["loss"]), max_elem(f32["loss"], ref["loss"])))
    errs.append(("pred", "pred", rel_l2(f32["pred"], ref["pred"]), max_elem(f32["pred"], ref["pred"])))
    for n, g in ref["grads"].items():
        errs.append(("grad", n, rel_l2(f32["grads"][n], g), max_elem(f32["grads"][n], g)))
    if fx["adam_steps"]:
        errs.append(("losses", "losses", rel_l2(f32["losses"], ref["losses"]),
                     max_elem(f32["losses"], ref["losses"])))
        for n, p in ref["after"].items():
            p0 = params[n].double()
            d64, d32 = p - p0, f32["after"][n].double() - p0
            if n in no_grad:
                assert torch.equal(p.float(), params[n]), f"{n} changed without a gradient"
                continue
            errs.append(("after-before", n, rel_l2(d32, d64), max_elem(d32, d64)))
            # In units of lr: the scale of one AdamW step (|step| <= ~lr per element).
            err_lr = (f32["after"][n].double() - p).abs().max().item() / lr
            errs.append(("after", n, rel_l2(f32["after"][n], p), err_lr))
    return t, meta, errs


def summarize(errs):
    rows = []
    for q in ("loss", "pred", "losses", "grad", "after-before", "after"):
        e = [x for x in errs if x[0] == q]
        if not e:
            continue
        w2 = max(e, key=lambda x: x[2])
        we = max(e, key=lambda x: x[3])
        rows.append((q, len(e), w2[2], w2[1], we[3], we[1]))
    return rows


def fmt_row(fx_name, r):
    q, n, l2, l2n, me, men = r
    where = lambda s: "" if s in ("loss", "pred", "losses") else f" ({_short(s)})"
    return f"| {fx_name} | {q} | {n} | {l2:.2e}{where(l2n)} | {me:.2e}{where(men)} |"


def _short(name):
    return name.replace("evoformer_blocks.", "b").replace(".weight", ".w").replace(".bias", ".b")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out-dir", default=os.path.join(REPO, "tests", "fixtures"))
    ap.add_argument("--lr", type=float, default=1e-3,
                    help="AdamW learning rate of after.* (default 1e-3: updates ~3x docs/model.md's)")
    a = ap.parse_args()
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    command = " ".join(["/usr/bin/python3", script] + sys.argv[1:])
    os.makedirs(a.out_dir, exist_ok=True)

    files, table, csv = [], [], ["fixture,quantity,tensor,rel_l2,max_elem"]
    for fx in FIXTURES:
        t, meta, errs = make_one(fx, a.lr, command)
        path = os.path.join(a.out_dir, fx["name"] + ".safetensors")
        st.save(path, t, meta)
        back, meta_back = st.load(path)  # what C will read: round trip check
        assert list(back) == list(t) and meta_back == meta
        n_par = sum(v.numel() for k, v in t.items() if k.startswith("param."))
        files.append((fx, os.path.basename(path), os.path.getsize(path), sha256(path), n_par,
                      len(t), meta["no_grad"], float(t["loss"][0])))
        for r in summarize(errs):
            table.append(fmt_row(fx["name"], r))
        csv += [f"{fx['name']},{q},{n},{l2:.3e},{me:.3e}" for q, n, l2, me in errs]
        print(f"{path}: {os.path.getsize(path)} bytes, {len(t)} tensors, loss {float(t['loss'][0]):.6f}")

    with open(os.path.join(a.out_dir, "fp32_errors.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")
    with open(os.path.join(a.out_dir, "README.md"), "w") as f:
        f.write(readme(files, table, command, a.lr))
    total = sum(x[2] for x in files)
    print(f"total {total} bytes")


def readme(files, table, command, lr):
    lines = []
    w = lines.append
    w("# Reference fixtures (generated: do not edit)")
    w("")
    w("Written by `tests/reference/make_fixtures.py` from the PyTorch reference")
    w("`tests/reference/tinyopenfold_ref.py` (the model of docs/model.md).")
    w("")
    w(f"- command (from the repository root): `{command}`")
    w(f"- torch {torch.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}")
    w("- regenerating with the same torch gives the same bytes (seeded CPU float64 draws).")
    w("")
    w("## Files")
    w("")
    w("| file | B,S,N | msa_dim, pair_dim, blocks, head dims (msa, pair), outer_dim | params | AdamW steps | tensors | bytes | loss |")
    w("|---|---|---|---|---|---|---|---|")
    for fx, name, size, _, n_par, n_t, _, loss in files:
        c = fx["cfg"]
        w(f"| {name} | {fx['B']},{fx['S']},{fx['N']} | {c.msa_dim}, {c.pair_dim}, {c.n_blocks}, "
          f"({c.msa_dim // c.n_heads_msa}, {c.pair_dim // c.n_heads_pair}), {c.outer_dim} | {n_par} | "
          f"{fx['adam_steps']} | {n_t} | {size} | {loss:.6f} |")
    w("")
    w(f"Total {sum(x[2] for x in files)} bytes. sha256:")
    w("")
    w("```")
    for _, name, _, h, *_ in files:
        w(f"{h}  {name}")
    w("```")
    w("")
    w("Heads are 4 (MSA) and 4 (pair) in every file; `odd` has head dims 3 and 5,")
    w("B and S and N all different and odd, so transposed or mis-strided indexing shows.")
    w("")
    w("## Contents of each file (safetensors)")
    w("")
    w("Metadata (all strings): `batch seq_len n_seqs n_blocks msa_dim pair_dim n_heads_msa")
    w("n_heads_pair outer_dim lr adam_steps weight_decay betas eps format(=tinyfold-fixture)")
    w("version(=1) name seed command torch_version computed_in init no_grad`.")
    w("")
    w("| tensor | dtype | shape | meaning |")
    w("|---|---|---|---|")
    w("| `msa_tokens` | I32 | [B,S,N] | tokens in [0,21) |")
    w("| `pair_features` | F32 | [B,N,N,65] | N(0,1) |")
    w("| `target_distances` | F32 | [B,N,N,1] | U[0,20) |")
    w("| `loss` | F32 | [1] | MSE loss at `param.*` |")
    w("| `pred` | F32 | [B,N,N,1] | predicted distances 20·σ(z·w) |")
    w("| `losses` | F32 | [adam_steps] | loss before each AdamW step (losses[0] = loss); absent when adam_steps = 0 |")
    w("| `param.<state_dict name>` | F32 | docs/model.md shape | initial weights, all 63·blocks+3 tensors in state_dict order |")
    w("| `grad.<name>` | F32 | same | dloss/dparam; every parameter except those listed in metadata `no_grad` |")
    w("| `after.<name>` | F32 | same | parameters after adam_steps AdamW steps on this same batch; absent when adam_steps = 0 |")
    w("")
    w("`no_grad` lists the `pair_norm_outer` weight and bias of every block: that")
    w("LayerNorm is never used, gets no gradient (no `grad.` tensor), and AdamW leaves")
    w("it untouched (its `after.` equals its `param.` bit for bit, weight decay included).")
    w("")
    w(f"AdamW: torch.optim.AdamW(lr={lr!r}, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),")
    w("zero_grad(set_to_none=True) before each step, the same batch every step. lr is")
    w("above docs/model.md's 3e-4 so that the updates stand further above fp32 rounding of")
    w("the weights; read it from the metadata.")
    w("")
    w("### How the numbers were computed")
    w("")
    w("Weights and inputs are drawn in float64, rounded to float32 and stored; then")
    w("loss, pred, gradients and the AdamW run are computed in **float64** from those")
    w("float32 values (model.double(), inputs upcast) and rounded once to float32. The")
    w("fixture is therefore the exact function of the stored inputs to within one fp32")
    w("rounding (relative 6e-8): a C implementation's error against it is its own.")
    w("")
    w("### Initialisation (not docs/model.md's, on purpose)")
    w("")
    w("With docs/model.md's N(0, 0.02) for every weight, attention logits are ~1e-3 (the")
    w("softmax is uniform to three digits), gate logits ~0.1 (the sigmoid is linear),")
    w("every module adds ~1e-2 to its residual stream and LayerNorm gamma/beta are 1/0:")
    w("a missing 1/sqrt(d), a swapped gate, a gamma/beta mix-up would hide under any")
    w("tolerance. So (reference_run.py `init_fixture`):")
    w("")
    w("- `msa_embedding`: N(0, 0.02), as docs/model.md (the first LayerNorm then sees a variance")
    w("  of ~4e-4, where eps = 1e-5 matters at the percent level: a wrong eps shows);")
    w("- every Linear: N(0, gain²/fan_in), gain 1 (pair_embedding, q/k/v, pair_bias_proj,")
    w("  gates, left/right projections, msa_to_outer, linear1), gain 0.5 for the")
    w("  residual-output projections (o_proj, linear2, outer_to_pair, output_proj) and")
    w("  distance_pred. Measured: z, q/k, pair-bias and gate logits have std ~1; each")
    w("  module adds std ~0.2-0.5 to its stream; distance logits std ~0.6-0.7, so the")
    w("  predictions spread over (0, 20) without saturating the sigmoid;")
    w("- LayerNorm weight 1 + 0.1·N(0,1), bias 0.1·N(0,1).")
    w("")
    w("## fp32 rounding scale: torch float32 vs float64")
    w("")
    w("The same computation in float32 torch (CPU, its BLAS), compared with the float64")
    w("truth. rel_l2 = ‖a−b‖/‖b‖ of a tensor; max_elem = max |a−b| / (|b| + 1e-3·max|b|).")
    w("Rows give the worst tensor of each kind (named in brackets; `bK.` = block K).")
    w("`after-before` compares the AdamW updates (after − param), not the weights, so")
    w("that the error is measured against the size of the change. Every tensor's")
    w("figures are in `fp32_errors.csv`.")
    w("")
    w("| fixture | quantity | tensors | rel_l2 (worst) | max_elem (worst) |")
    w("|---|---|---|---|---|")
    lines.extend(table)
    w("")
    w("For the `after` rows the last column is not max_elem but max |a−b| / lr, the")
    w("error of the weights after the AdamW steps in units of one step's size.")
    w("")
    w("Reading it: a correct fp32 C implementation should land at about these")
    w("figures (a few times them at most, given a different summation order); being")
    w("10x-100x above them means a bug, not rounding. The max_elem figures are larger")
    w("than rel_l2 because single elements near zero (after the 1e-3 floor) carry")
    w("relative error that the norm averages away. For after-before, elements whose")
    w("gradient is tiny can take a different AdamW step direction in fp32 (the first")
    w("step is lr·g/(|g|+eps) ≈ lr·sign(g)); see fp32_errors.csv before tightening.")
    w("")
    w("What limits `after`: (1) the stored weights are fp32, so each step rounds the")
    w("weight (±0.5 ulp of |p|: 6e-8 at |p| ≈ 1, i.e. 6e-5·lr at lr = 1e-3); that is")
    w("the whole of after-before's error for LayerNorm weights (|p| ≈ 1, update ≈ 3·lr);")
    w("(2) an element whose true gradient is at fp32 noise level (|g| ~ 1e-8 of its")
    w("tensor's max) gets a step of essentially random sign: in `odd` one element of")
    w("outer_to_pair (|g| = 1.3e-7, max |g| = 20) is 0.023·lr off. A C test of after.*")
    w("should therefore allow |a−b| ≤ ~1e-3·lr + a few ulp(|p|) per step, plus up to")
    w("2·lr·steps for elements whose |grad| is below ~1e-6 of their tensor's max.")
    w("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
