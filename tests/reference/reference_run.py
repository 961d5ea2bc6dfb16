"""Shared helpers of the reference scripts: the fixture initialisation, loading
weights and batches from safetensors, and the forward/backward/AdamW runs
whose results the fixtures and grads.py store."""
import math
import re

import numpy as np
import torch
import torch.nn as nn

import safetensors_io as st
from tinyopenfold_ref import (Config, TinyOpenFold, PAIR_INPUT_DIM, VOCAB, make_optimizer,
                              mse_loss)

# Linear weights whose output is added to the residual stream (or is the
# distance logit) get half the gain of the others; see init_fixture.
_OUT_LEAVES = ("o_proj", "linear2", "outer_to_pair", "output_proj", "distance_pred")


def init_fixture(model, generator):
    """The fixtures' initialisation (not docs/model.md's, on purpose).

    With docs/model.md's N(0, 0.02) everywhere, attention logits are ~1e-3 (softmax
    is uniform to 3 digits), gate logits ~0.1 (sigmoid is linear), and each
    module adds ~1e-2 to the residual streams: bugs in softmax scaling, gating
    or LayerNorm affine terms would hide under the tolerances. So:
      - embedding: N(0, 0.02) as docs/model.md (m starts small; its first LayerNorm
        then sees variance ~4e-4, where eps = 1e-5 matters at the 1% level);
      - every Linear: N(0, gain^2 / fan_in), gain 1, or 0.5 for the
        residual-output projections (o_proj, linear2, outer_to_pair,
        output_proj) and distance_pred: z and every q/k/gate/bias logit are
        O(1), each module adds O(0.3) to its stream, predicted distances
        spread over (0, 20) without saturating the sigmoid;
      - LayerNorm: weight 1 + 0.1 N(0,1), bias 0.1 N(0,1), so gamma/beta
        mix-ups (or a missing affine) change the result.
    Draws are float64 from `generator` in state_dict order."""
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Embedding):
                w = torch.randn(mod.weight.shape, generator=generator, dtype=torch.float64)
                mod.weight.copy_(0.02 * w)
            elif isinstance(mod, nn.Linear):
                w = torch.randn(mod.weight.shape, generator=generator, dtype=torch.float64)
                gain = 0.5 if name.split(".")[-1] in _OUT_LEAVES else 1.0
                mod.weight.copy_(gain / math.sqrt(mod.weight.shape[1]) * w)
            elif isinstance(mod, nn.LayerNorm):
                gw = torch.randn(mod.weight.shape, generator=generator, dtype=torch.float64)
                gb = torch.randn(mod.bias.shape, generator=generator, dtype=torch.float64)
                mod.weight.copy_(1.0 + 0.1 * gw)
                mod.bias.copy_(0.1 * gb)


def round_params_fp32(model):
    """Round every parameter to float32 in place (values the fixture stores)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.float().to(p.dtype))


def make_batch(generator, B, S, N):
    """Fixture inputs, already rounded to float32: tokens int32 [B,S,N] in [0,21),
    pair features N(0,1) [B,N,N,65], targets U[0,20) [B,N,N,1]."""
    tokens = torch.randint(0, VOCAB, (B, S, N), generator=generator).to(torch.int32)
    pair = torch.randn(B, N, N, PAIR_INPUT_DIM, generator=generator, dtype=torch.float64).float()
    target = (20.0 * torch.rand(B, N, N, 1, generator=generator, dtype=torch.float64)).float()
    # fp32 rounding could lift 19.9999999 to 20.0: keep the half-open range.
    target = torch.clamp(target, max=float(np.nextafter(np.float32(20.0), np.float32(0.0))))
    return {"msa_tokens": tokens, "pair_features": pair, "target_distances": target}


def load_batch(path):
    """A batch from a safetensors file with msa_tokens, pair_features, target_distances."""
    t, _ = st.load(path)
    for k in ("msa_tokens", "pair_features", "target_distances"):
        if k not in t:
            raise ValueError(f"{path}: no tensor {k!r} (has: {', '.join(t)})")
    tokens = torch.from_numpy(t["msa_tokens"].astype(np.int64))
    pair = torch.from_numpy(t["pair_features"])
    target = torch.from_numpy(t["target_distances"])
    if tokens.dim() != 3 or pair.dim() != 4:
        raise ValueError(f"{path}: msa_tokens must be [B,S,N] and pair_features [B,N,N,65]")
    B, S, N = tokens.shape
    if tuple(pair.shape) != (B, N, N, PAIR_INPUT_DIM):
        raise ValueError(f"{path}: pair_features {tuple(pair.shape)} does not match tokens "
                         f"[{B},{S},{N}]")
    if target.numel() != B * N * N:
        raise ValueError(f"{path}: target_distances {tuple(target.shape)} is not [B,N,N(,1)]")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= VOCAB):
        raise ValueError(f"{path}: msa_tokens outside [0, {VOCAB})")
    return {"msa_tokens": tokens, "pair_features": pair,
            "target_distances": target.reshape(B, N, N, 1)}


_ROOTS = ("msa_embedding.", "pair_embedding.", "evoformer_blocks.", "structure_module.")


def split_state(tensors, prefix=None):
    """From a file's tensors, the model's ones (names without `prefix`) and the
    names of the others (e.g. optimizer.*). prefix None: "" if any tensor has a
    model name, else "param." (the fixtures' layout)."""
    if prefix is None:
        prefix = "" if any(k.startswith(_ROOTS) for k in tensors) else "param."
    model_t, other = {}, []
    for k, v in tensors.items():
        if k.startswith(prefix) and k[len(prefix):].startswith(_ROOTS):
            model_t[k[len(prefix):]] = v
        else:
            other.append(k)
    return model_t, other


def infer_config(state, metadata=None, n_heads_pair=None):
    """Config from the shapes of a state dict. Only n_heads_pair is not visible
    in any shape: taken from the argument, then metadata, then the default 4."""
    def shape(n):
        if n not in state:
            raise ValueError(f"missing tensor {n}")
        return tuple(state[n].shape)
    blocks = {int(m.group(1)) for k in state for m in [re.match(r"evoformer_blocks\.(\d+)\.", k)] if m}
    cfg = Config(msa_dim=shape("msa_embedding.weight")[1],
                 pair_dim=shape("pair_embedding.weight")[0],
                 n_blocks=len(blocks))
    if blocks:
        cfg.n_heads_msa = shape("evoformer_blocks.0.msa_row_attention.pair_bias_proj.weight")[0]
        cfg.outer_dim = shape("evoformer_blocks.0.outer_product_mean.msa_to_outer.weight")[0]
    meta = metadata or {}
    if n_heads_pair is not None:
        cfg.n_heads_pair = n_heads_pair
    elif "n_heads_pair" in meta:
        cfg.n_heads_pair = int(meta["n_heads_pair"])
    for k in ("msa_dim", "pair_dim", "n_blocks", "n_heads_msa", "outer_dim"):
        if k in meta and int(meta[k]) != getattr(cfg, k):
            raise ValueError(f"metadata {k}={meta[k]} but the tensors say {getattr(cfg, k)}")
    return cfg


def build_model(state, cfg, dtype=torch.float64, device="cpu"):
    """A model holding exactly `state` (load_state_dict strict=True)."""
    model = TinyOpenFold(cfg).to(device=device, dtype=dtype)
    sd = {k: torch.as_tensor(np.asarray(v)) for k, v in state.items()}
    model.load_state_dict(sd, strict=True)  # copies, converting to the model's dtype
    return model


def to_device(batch, dtype, device):
    return {"msa_tokens": batch["msa_tokens"].to(device),
            "pair_features": batch["pair_features"].to(device=device, dtype=dtype),
            "target_distances": batch["target_distances"].to(device=device, dtype=dtype)}


def forward_loss(model, batch):
    pred = model(batch["msa_tokens"], batch["pair_features"])
    return mse_loss(pred, batch["target_distances"]), pred


def grads(model, batch):
    """loss (float), pred [B,N,N,1], {name: grad} for parameters that get one."""
    model.zero_grad(set_to_none=True)
    loss, pred = forward_loss(model, batch)
    loss.backward()
    g = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach(), pred.detach(), g


def adam_run(model, batch, lr, steps):
    """`steps` AdamW steps on the same batch. Returns (losses before each step,
    {name: parameter after}). Modifies the model."""
    opt = make_optimizer(model, lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss, _ = forward_loss(model, batch)
        losses.append(loss.detach())
        loss.backward()
        opt.step()
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    return torch.stack(losses) if losses else torch.zeros(0), after


def config_metadata(cfg, B=None, S=None, N=None):
    m = {k: str(v) for k, v in cfg.as_dict().items()}
    if B is not None:
        m.update(batch=str(B), n_seqs=str(S), seq_len=str(N))
    return m
