#!/usr/bin/env python3
"""A tinyfold checkpoint loads into the reference model with
load_state_dict(strict=True) as it is: no tensor dropped, none renamed.

    strict_load.py path/to/tinyfold

Trains a small model for one step with --save, reads the checkpoint with
safetensors_io (every tensor of the file) and loads it strictly into
TinyOpenFold of the config in its metadata; checks the values arrived, and
that the optimizer file beside it holds the moments. Exits 77 (skipped) where
torch is not installed."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("strict_load: skipped (no torch)")
    sys.exit(77)

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from tinyopenfold_ref import Config, TinyOpenFold  # noqa: E402


def main():
    tinyfold = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "ck.safetensors")
        subprocess.run([tinyfold, "train", "--backend", "cpu", "--threads", "2", "--quiet",
                        "--batch-size", "1", "--seq-len", "8", "--num-seqs", "2",
                        "--num-blocks", "2", "--msa-dim", "16", "--pair-dim", "32",
                        "--warmup-steps", "0", "--num-steps", "1", "--save", ck], check=True)
        tensors, meta = st.load(ck)
        c = json.loads(meta["tinyfold_config"])
        cfg = Config(msa_dim=c["msa_dim"], pair_dim=c["pair_dim"], n_blocks=c["n_blocks"],
                     n_heads_msa=c["n_heads_msa"], n_heads_pair=c["n_heads_pair"],
                     outer_dim=c["outer_dim"])
        model = TinyOpenFold(cfg)
        sd = {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}
        model.load_state_dict(sd, strict=True)  # raises on any missing or unexpected name
        for k, v in model.state_dict().items():
            assert torch.equal(v, sd[k]), k
        assert len(sd) == len(model.state_dict()), (len(sd), len(model.state_dict()))
        opt, ometa = st.load(os.path.join(d, "ck.optim.safetensors"))
        assert ometa["format"] == "tinyfold-optimizer", ometa
        assert set(opt) == {p + k for k in sd for p in ("optimizer.exp_avg.",
                                                        "optimizer.exp_avg_sq.")}
        print(f"strict_load: ok ({len(sd)} tensors loaded with strict=True)")


if __name__ == "__main__":
    main()
