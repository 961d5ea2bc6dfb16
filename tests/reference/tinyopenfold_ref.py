"""PyTorch reference of TinyOpenFold, written from docs/model.md.

The module tree reproduces docs/model.md's state_dict exactly (names, shapes,
order): tinyfold checkpoints load into it with strict=True and back.
Attention is written plainly (scores and softmax materialised): this file is
the ground truth the C code is checked against, not a fast model.

Run as a script for a self-check and a few training steps:
    /usr/bin/python3 tests/reference/tinyopenfold_ref.py [--device cuda] [--dtype float64]
"""
import argparse
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 21
PAIR_INPUT_DIM = 65
LN_EPS = 1e-5
DEFAULT_PARAM_TENSORS = 255
DEFAULT_PARAM_COUNT = 2653760


@dataclass
class Config:
    msa_dim: int = 64
    pair_dim: int = 128
    n_blocks: int = 4
    n_heads_msa: int = 4
    n_heads_pair: int = 4
    outer_dim: int = 32

    def as_dict(self):
        return asdict(self)


def _linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False)


def attend(q, k, v):
    """Plain attention over axis -2: q,k,v [..., L, d] -> [..., L, d] (no bias)."""
    return attend_bias(q, k, v, None)


def attend_bias(q, k, v, bias):
    d = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if bias is not None:
        scores = scores + bias
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v)


def _split_heads(x, H):
    """[..., L, C] -> [..., H, L, C/H] (head h = channels h*d .. h*d+d-1)."""
    *lead, L, C = x.shape
    return x.reshape(*lead, L, H, C // H).transpose(-2, -3)


def _merge_heads(x):
    """[..., H, L, d] -> [..., L, H*d]."""
    x = x.transpose(-2, -3)
    *lead, L, H, d = x.shape
    return x.reshape(*lead, L, H * d)


class MSARowAttention(nn.Module):
    def __init__(self, c_m, c_z, H):
        super().__init__()
        assert c_m % H == 0
        self.H = H
        self.q_proj = _linear(c_m, c_m)
        self.k_proj = _linear(c_m, c_m)
        self.v_proj = _linear(c_m, c_m)
        self.o_proj = _linear(c_m, c_m)
        self.pair_bias_proj = _linear(c_z, H)

    def forward(self, x, z):
        # x [B,S,N,c_m], z [B,N,N,c_z] (not normalised)
        q = _split_heads(self.q_proj(x), self.H)          # [B,S,H,N,d]
        k = _split_heads(self.k_proj(x), self.H)
        v = _split_heads(self.v_proj(x), self.H)
        bias = self.pair_bias_proj(z).permute(0, 3, 1, 2)  # [B,H,N,N]
        o = attend_bias(q, k, v, bias.unsqueeze(1))        # broadcast over S
        return self.o_proj(_merge_heads(o))


class MSAColumnAttention(nn.Module):
    def __init__(self, c_m, H):
        super().__init__()
        assert c_m % H == 0
        self.H = H
        self.q_proj = _linear(c_m, c_m)
        self.k_proj = _linear(c_m, c_m)
        self.v_proj = _linear(c_m, c_m)
        self.o_proj = _linear(c_m, c_m)

    def forward(self, x):
        xt = x.transpose(1, 2)                             # [B,N,S,c_m]: attend over S
        q = _split_heads(self.q_proj(xt), self.H)
        k = _split_heads(self.k_proj(xt), self.H)
        v = _split_heads(self.v_proj(xt), self.H)
        o = _merge_heads(attend(q, k, v)).transpose(1, 2)  # [B,S,N,c_m]
        return self.o_proj(o)


class Transition(nn.Module):
    def __init__(self, c, mult=4):
        super().__init__()
        self.linear1 = _linear(c, mult * c)
        self.linear2 = _linear(mult * c, c)

    def forward(self, x):
        return self.linear2(F.relu(self.linear1(x)))


class OuterProductMean(nn.Module):
    def __init__(self, c_m, c_z, c_o):
        super().__init__()
        self.msa_to_outer = _linear(c_m, c_o)
        self.outer_to_pair = _linear(c_o * c_o, c_z)
        self.layer_norm = nn.LayerNorm(c_m, eps=LN_EPS)

    def forward(self, m):
        B, S, N, _ = m.shape
        a = self.msa_to_outer(self.layer_norm(m))          # [B,S,N,c_o]
        o = torch.einsum("bsip,bsjq->bijpq", a, a) / S     # [B,N,N,c_o,c_o]
        return self.outer_to_pair(o.reshape(B, N, N, -1))  # (p,q) -> p*c_o+q


class TriangleMultiplication(nn.Module):
    def __init__(self, c_z, outgoing):
        super().__init__()
        self.outgoing = outgoing
        self.left_proj = _linear(c_z, c_z)
        self.right_proj = _linear(c_z, c_z)
        self.left_gate = _linear(c_z, c_z)
        self.right_gate = _linear(c_z, c_z)
        self.output_proj = _linear(c_z, c_z)
        self.output_gate = _linear(c_z, c_z)
        self.layer_norm = nn.LayerNorm(c_z, eps=LN_EPS)

    def forward(self, x):
        y = self.layer_norm(x)
        L = self.left_proj(y) * torch.sigmoid(self.left_gate(y))
        R = self.right_proj(y) * torch.sigmoid(self.right_gate(y))
        if self.outgoing:
            u = torch.einsum("bikc,bjkc->bijc", L, R)
        else:
            u = torch.einsum("bkic,bkjc->bijc", L, R)
        return self.output_proj(u) * torch.sigmoid(self.output_gate(y))


class TriangleAttention(nn.Module):
    def __init__(self, c_z, H, ending):
        super().__init__()
        assert c_z % H == 0
        self.H = H
        self.ending = ending
        self.q_proj = _linear(c_z, c_z)
        self.k_proj = _linear(c_z, c_z)
        self.v_proj = _linear(c_z, c_z)
        self.o_proj = _linear(c_z, c_z)
        self.layer_norm = nn.LayerNorm(c_z, eps=LN_EPS)

    def forward(self, x):
        y = self.layer_norm(x)
        if self.ending:
            y = y.transpose(1, 2)
        q = _split_heads(self.q_proj(y), self.H)           # [B,I,H,J,d]: attend along J per row
        k = _split_heads(self.k_proj(y), self.H)
        v = _split_heads(self.v_proj(y), self.H)
        o = _merge_heads(attend(q, k, v))                  # [B,I,J,c_z]
        if self.ending:
            o = o.transpose(1, 2)
        return self.o_proj(o)


class EvoformerBlock(nn.Module):
    # Attribute definition order == state_dict order of docs/model.md.
    def __init__(self, cfg):
        super().__init__()
        c_m, c_z = cfg.msa_dim, cfg.pair_dim
        self.msa_row_attention = MSARowAttention(c_m, c_z, cfg.n_heads_msa)
        self.msa_column_attention = MSAColumnAttention(c_m, cfg.n_heads_msa)
        self.msa_transition = Transition(c_m)
        self.msa_norm_row = nn.LayerNorm(c_m, eps=LN_EPS)
        self.msa_norm_col = nn.LayerNorm(c_m, eps=LN_EPS)
        self.msa_norm_trans = nn.LayerNorm(c_m, eps=LN_EPS)
        self.outer_product_mean = OuterProductMean(c_m, c_z, cfg.outer_dim)
        self.triangle_mult_outgoing = TriangleMultiplication(c_z, outgoing=True)
        self.triangle_mult_incoming = TriangleMultiplication(c_z, outgoing=False)
        self.triangle_attn_starting = TriangleAttention(c_z, cfg.n_heads_pair, ending=False)
        self.triangle_attn_ending = TriangleAttention(c_z, cfg.n_heads_pair, ending=True)
        self.pair_transition = Transition(c_z)
        self.pair_norm_outer = nn.LayerNorm(c_z, eps=LN_EPS)  # exists, never used (docs/model.md)
        self.pair_norm_tri_out = nn.LayerNorm(c_z, eps=LN_EPS)
        self.pair_norm_tri_in = nn.LayerNorm(c_z, eps=LN_EPS)
        self.pair_norm_attn_start = nn.LayerNorm(c_z, eps=LN_EPS)
        self.pair_norm_attn_end = nn.LayerNorm(c_z, eps=LN_EPS)
        self.pair_norm_trans = nn.LayerNorm(c_z, eps=LN_EPS)

    def forward(self, m, z):
        m = m + self.msa_row_attention(self.msa_norm_row(m), z)
        m = m + self.msa_column_attention(self.msa_norm_col(m))
        m = m + self.msa_transition(self.msa_norm_trans(m))
        z = z + self.outer_product_mean(m)
        z = z + self.triangle_mult_outgoing(self.pair_norm_tri_out(z))
        z = z + self.triangle_mult_incoming(self.pair_norm_tri_in(z))
        z = z + self.triangle_attn_starting(self.pair_norm_attn_start(z))
        z = z + self.triangle_attn_ending(self.pair_norm_attn_end(z))
        z = z + self.pair_transition(self.pair_norm_trans(z))
        return m, z


class StructureModule(nn.Module):
    def __init__(self, c_z):
        super().__init__()
        self.distance_pred = _linear(c_z, 1)

    def forward(self, z):
        return 20.0 * torch.sigmoid(self.distance_pred(z))


class TinyOpenFold(nn.Module):
    def __init__(self, cfg=None):
        super().__init__()
        self.cfg = cfg or Config()
        self.msa_embedding = nn.Embedding(VOCAB, self.cfg.msa_dim)
        self.pair_embedding = _linear(PAIR_INPUT_DIM, self.cfg.pair_dim)
        self.evoformer_blocks = nn.ModuleList(EvoformerBlock(self.cfg)
                                              for _ in range(self.cfg.n_blocks))
        self.structure_module = StructureModule(self.cfg.pair_dim)
        init_spec(self)

    def forward(self, msa_tokens, pair_features):
        """msa_tokens [B,S,N] int, pair_features [B,N,N,65] -> distances [B,N,N,1]."""
        m = self.msa_embedding(msa_tokens.long())
        z = self.pair_embedding(pair_features)
        for blk in self.evoformer_blocks:
            m, z = blk(m, z)
        return self.structure_module(z)


def mse_loss(pred, target):
    """Mean over B*N*N of (d - target)^2; target may be [B,N,N] or [B,N,N,1]."""
    return F.mse_loss(pred, target.reshape(pred.shape))


def init_spec(model, generator=None):
    """docs/model.md initialisation: Linear and embedding ~ N(0, 0.02); LayerNorm 1 / 0."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, 0.02, generator=generator)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.fill_(1.0)
                mod.bias.fill_(0.0)


def make_optimizer(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=0.01)


def expected_state_dict(cfg):
    """(name, shape) list written out from docs/model.md's parameter table, independently
    of the module tree above."""
    c_m, c_z, c_o = cfg.msa_dim, cfg.pair_dim, cfg.outer_dim
    H_m = cfg.n_heads_msa
    out = [("msa_embedding.weight", (VOCAB, c_m)), ("pair_embedding.weight", (c_z, PAIR_INPUT_DIM))]
    for b in range(cfg.n_blocks):
        p = f"evoformer_blocks.{b}."
        out += [(p + f"msa_row_attention.{x}_proj.weight", (c_m, c_m)) for x in "qkvo"]
        out += [(p + "msa_row_attention.pair_bias_proj.weight", (H_m, c_z))]
        out += [(p + f"msa_column_attention.{x}_proj.weight", (c_m, c_m)) for x in "qkvo"]
        out += [(p + "msa_transition.linear1.weight", (4 * c_m, c_m)),
                (p + "msa_transition.linear2.weight", (c_m, 4 * c_m))]
        for n in ("row", "col", "trans"):
            out += [(p + f"msa_norm_{n}.weight", (c_m,)), (p + f"msa_norm_{n}.bias", (c_m,))]
        out += [(p + "outer_product_mean.msa_to_outer.weight", (c_o, c_m)),
                (p + "outer_product_mean.outer_to_pair.weight", (c_z, c_o * c_o)),
                (p + "outer_product_mean.layer_norm.weight", (c_m,)),
                (p + "outer_product_mean.layer_norm.bias", (c_m,))]
        for t in ("outgoing", "incoming"):
            for x in ("left_proj", "right_proj", "left_gate", "right_gate", "output_proj",
                      "output_gate"):
                out.append((p + f"triangle_mult_{t}.{x}.weight", (c_z, c_z)))
            out += [(p + f"triangle_mult_{t}.layer_norm.weight", (c_z,)),
                    (p + f"triangle_mult_{t}.layer_norm.bias", (c_z,))]
        for t in ("starting", "ending"):
            out += [(p + f"triangle_attn_{t}.{x}_proj.weight", (c_z, c_z)) for x in "qkvo"]
            out += [(p + f"triangle_attn_{t}.layer_norm.weight", (c_z,)),
                    (p + f"triangle_attn_{t}.layer_norm.bias", (c_z,))]
        out += [(p + "pair_transition.linear1.weight", (4 * c_z, c_z)),
                (p + "pair_transition.linear2.weight", (c_z, 4 * c_z))]
        for n in ("outer", "tri_out", "tri_in", "attn_start", "attn_end", "trans"):
            out += [(p + f"pair_norm_{n}.weight", (c_z,)), (p + f"pair_norm_{n}.bias", (c_z,))]
    out.append(("structure_module.distance_pred.weight", (1, c_z)))
    return out


def unused_params(model):
    """Names of parameters the forward pass never touches (pair_norm_outer)."""
    return [n for n, _ in model.named_parameters() if ".pair_norm_outer." in n]


def self_check(cfg=None):
    """Assert the state_dict matches docs/model.md; at the defaults also the counts."""
    cfg = cfg or Config()
    model = TinyOpenFold(cfg)
    got = [(n, tuple(t.shape)) for n, t in model.state_dict().items()]
    want = expected_state_dict(cfg)
    assert got == want, "state_dict differs from docs/model.md:\n" + "\n".join(
        f"  got {g} want {w}" for g, w in zip(got, want) if g != w)
    n_params = sum(t.numel() for t in model.state_dict().values())
    if cfg == Config():
        assert len(got) == DEFAULT_PARAM_TENSORS, len(got)
        assert n_params == DEFAULT_PARAM_COUNT, n_params
    return len(got), n_params


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--num-seqs", type=int, default=4)
    ap.add_argument("--num-blocks", type=int, default=4)
    ap.add_argument("--msa-dim", type=int, default=64)
    ap.add_argument("--pair-dim", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()

    n_t, n_p = self_check()
    print(f"self-check: defaults have {n_t} tensors, {n_p} parameters (docs/model.md: "
          f"{DEFAULT_PARAM_TENSORS}, {DEFAULT_PARAM_COUNT})")
    cfg = Config(msa_dim=a.msa_dim, pair_dim=a.pair_dim, n_blocks=a.num_blocks)
    self_check(cfg)
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(a.seed)
    model = TinyOpenFold(cfg).to(device=a.device, dtype=dtype)
    g = torch.Generator().manual_seed(a.seed)
    B, N, S = a.batch, a.seq_len, a.num_seqs
    tokens = torch.randint(0, VOCAB, (B, S, N), generator=g).to(a.device)
    pair = torch.randn(B, N, N, PAIR_INPUT_DIM, generator=g, dtype=dtype).to(a.device)
    target = (20 * torch.rand(B, N, N, 1, generator=g, dtype=dtype)).to(a.device)
    opt = make_optimizer(model, a.lr)
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = mse_loss(model(tokens, pair), target)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
