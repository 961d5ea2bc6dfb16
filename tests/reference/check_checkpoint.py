"""Cross-check tinyfold checkpoints with the PyTorch reference, both directions.

  tinyfold -> reference:
    check_checkpoint.py --checkpoint CKPT --data BATCH
  loads CKPT (safetensors; the model's tensors under their state_dict names,
  anything else, e.g. optimizer.*, is ignored and listed on stderr) STRICTLY
  into the reference model, runs the forward pass on the batch of BATCH
  (safetensors with msa_tokens, pair_features, target_distances) and prints
      loss <value>

  reference -> tinyfold:
    check_checkpoint.py --save-checkpoint OUT [--checkpoint CKPT | model flags]
  writes the reference's weights (F32, state_dict names and order, config in
  the metadata): those of CKPT when given (a round trip), else a freshly
  initialised model (--init spec|fixture, --seed). With --data it also prints
  the loss of the saved weights on that batch.

Compute is float64 by default (the exact function of the fp32 weights).
Exit status: 0 ok, 1 the checkpoint does not match the model, 2 usage/IO.
"""
import argparse
import sys

import torch

import safetensors_io as st
import reference_run as rr
from tinyopenfold_ref import Config, TinyOpenFold


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--checkpoint", help="tinyfold checkpoint to load (safetensors)")
    ap.add_argument("--data", help="batch file (safetensors: msa_tokens, pair_features, target_distances)")
    ap.add_argument("--save-checkpoint", metavar="FILE", help="write the reference's weights here")
    ap.add_argument("--prefix", default=None,
                    help="name prefix of the model tensors in the checkpoint "
                         "(default: none, or 'param.' for fixture files)")
    ap.add_argument("--heads-pair", type=int, default=None,
                    help="n_heads_pair (not visible in any shape; default: metadata, else 4)")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--device", default="cpu")
    g = ap.add_argument_group("model for --save-checkpoint without --checkpoint")
    g.add_argument("--msa-dim", type=int, default=64)
    g.add_argument("--pair-dim", type=int, default=128)
    g.add_argument("--num-blocks", type=int, default=4)
    g.add_argument("--outer-dim", type=int, default=32)
    g.add_argument("--init", choices=["spec", "fixture"], default="fixture",
                   help="fixture (default): O(1) activations, LayerNorm affine != 1/0; spec: docs/model.md init")
    g.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    if not a.checkpoint and not a.save_checkpoint:
        ap.error("give --checkpoint and/or --save-checkpoint")
    if a.checkpoint and not a.save_checkpoint and not a.data:
        ap.error("--checkpoint needs --data (or --save-checkpoint)")
    return a


def load_checkpoint(path, prefix, heads_pair, dtype, device):
    tensors, meta = st.load(path)
    state, other = rr.split_state(tensors, prefix)
    if not state:
        raise ValueError(f"{path}: no model tensors (names starting with msa_embedding., "
                         f"pair_embedding., evoformer_blocks., structure_module.)")
    for k, v in state.items():
        if v.dtype.kind != "f":
            raise ValueError(f"{path}: {k} has integer dtype {v.dtype}")
    if other:
        print(f"ignored {len(other)} non-model tensors ({', '.join(sorted({o.split('.')[0] for o in other}))})",
              file=sys.stderr)
    try:
        cfg = rr.infer_config(state, meta, heads_pair)
    except ValueError as e:  # a missing tensor or metadata that contradicts the shapes
        raise RuntimeError(f"{path}: {e}") from None
    model = rr.build_model(state, cfg, dtype=dtype, device=device)  # strict=True
    return model, cfg


def main(argv=None):
    a = parse_args(argv)
    dtype = getattr(torch, a.dtype)
    try:
        if a.checkpoint:
            model, cfg = load_checkpoint(a.checkpoint, a.prefix, a.heads_pair, dtype, a.device)
        else:
            cfg = Config(msa_dim=a.msa_dim, pair_dim=a.pair_dim, n_blocks=a.num_blocks,
                         outer_dim=a.outer_dim)
            if a.heads_pair:
                cfg.n_heads_pair = a.heads_pair
            model = TinyOpenFold(cfg).double()
            gen = torch.Generator().manual_seed(a.seed)
            if a.init == "fixture":
                rr.init_fixture(model, gen)
            else:
                from tinyopenfold_ref import init_spec
                init_spec(model, gen)
            rr.round_params_fp32(model)
            model = model.to(device=a.device, dtype=dtype)
        batch = rr.load_batch(a.data) if a.data else None
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # load_state_dict: missing/unexpected keys, shape mismatch
        print(f"error: checkpoint does not match the model: {e}", file=sys.stderr)
        return 1

    if a.save_checkpoint:
        meta = rr.config_metadata(cfg)
        meta.update({"format": "tinyopenfold-reference-checkpoint", "version": "1",
                     "torch_version": torch.__version__})
        tensors = {n: t.detach().float().cpu() for n, t in model.state_dict().items()}
        try:
            st.save(a.save_checkpoint, tensors, meta)
        except OSError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {a.save_checkpoint}: {len(tensors)} tensors, "
              f"{sum(t.numel() for t in tensors.values())} parameters", file=sys.stderr)

    if batch is not None:
        b = rr.to_device(batch, dtype, a.device)
        with torch.no_grad():
            loss, _ = rr.forward_loss(model, b)
        print(f"loss {loss.item():.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
