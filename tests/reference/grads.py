"""Reference gradients for given weights and batch, laid out like the fixtures
(to compare with `tinyfold grad`):

    grads.py --weights W --data D --out G [--adam-steps K --lr LR]

W: safetensors with the model's tensors under their state_dict names (or
under `param.`, e.g. a fixture file); other tensors are ignored. D: a batch
(msa_tokens, pair_features, target_distances), e.g. a fixture file too.
G gets `loss` [1], `pred` [B,N,N,1], `grad.<name>` for every parameter that
gets a gradient (metadata no_grad lists the others), and with --adam-steps K
also `losses` [K] and `after.<name>`. Computed in float64 (--dtype) from the
weights as stored, written as float32.
"""
import argparse
import sys

import torch

import safetensors_io as st
import reference_run as rr
from check_checkpoint import load_checkpoint


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prefix", default=None, help="prefix of the model tensors in --weights")
    ap.add_argument("--heads-pair", type=int, default=None)
    ap.add_argument("--adam-steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    dtype = getattr(torch, a.dtype)
    try:
        model, cfg = load_checkpoint(a.weights, a.prefix, a.heads_pair, dtype, a.device)
        batch = rr.load_batch(a.data)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"error: weights do not match the model: {e}", file=sys.stderr)
        return 1
    b = rr.to_device(batch, dtype, a.device)
    loss, pred, g = rr.grads(model, b)
    out = {"loss": loss.reshape(1).float(), "pred": pred.float()}
    out.update({"grad." + n: t.float() for n, t in g.items()})
    B, S, N = batch["msa_tokens"].shape
    meta = rr.config_metadata(cfg, B, S, N)
    meta.update({"format": "tinyfold-reference-grads", "version": "1",
                 "no_grad": ",".join(n for n, _ in model.named_parameters() if n not in g),
                 "computed_in": a.dtype, "torch_version": torch.__version__,
                 "adam_steps": str(a.adam_steps), "lr": repr(a.lr)})
    if a.adam_steps > 0:
        losses, after = rr.adam_run(model, b, a.lr, a.adam_steps)
        out["losses"] = losses.float()
        out.update({"after." + n: t.float() for n, t in after.items()})
    try:
        st.save(a.out, out, meta)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"loss {loss.item():.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
