"""Self-test of the PyTorch reference. Run from anywhere:

    /usr/bin/python3 tests/reference/selftest.py

Checks, each against something independent of the code it tests:
  1. state_dict names/shapes/order against the docs/model.md table, and the counts at
     the defaults (255 tensors, 2,653,760 parameters);
  2. the vectorised forward against a naive loop-by-loop float64 numpy
     transcription of docs/model.md (written separately, below);
  3. autograd gradients against finite differences (torch.autograd.gradcheck,
     float64) for every parameter and the pair features, on a tiny config;
  4. torch's AdamW against docs/model.md's update rule written out by hand,
     including that pair_norm_outer (no gradient) is left untouched;
  5. the safetensors reader/writer: round trips and rejection of corrupt files;
  6. check_checkpoint.py / grads.py: save, strict load, ignored extras, rejects;
  7. the committed fixtures (when present) against a fresh float64 recompute.
Exit status 0 when all pass.
"""
import io
import json
import math
import os
import struct
import sys
import tempfile
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as st  # noqa: E402
import reference_run as rr  # noqa: E402
from tinyopenfold_ref import (Config, TinyOpenFold, self_check, mse_loss,  # noqa: E402
                              expected_state_dict, DEFAULT_PARAM_COUNT,
                              DEFAULT_PARAM_TENSORS)

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures")
TINY = Config(msa_dim=8, pair_dim=8, n_blocks=1, n_heads_msa=4, n_heads_pair=4, outer_dim=3)


def fixture_model(cfg, seed):
    model = TinyOpenFold(cfg).double()
    rr.init_fixture(model, torch.Generator().manual_seed(seed))
    return model


def batch64(seed, B, S, N):
    b = rr.make_batch(torch.Generator().manual_seed(seed), B, S, N)
    return rr.to_device(b, torch.float64, "cpu")


# ---------------------------------------------------------------- 1. parameters
def test_state_dict():
    n_t, n_p = self_check(Config())
    assert (n_t, n_p) == (DEFAULT_PARAM_TENSORS, DEFAULT_PARAM_COUNT) == (255, 2653760), (n_t, n_p)
    for cfg in (TINY, Config(msa_dim=12, pair_dim=20, n_blocks=3)):
        self_check(cfg)


# ---------------------------------------------------------------- 2. naive forward
def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def naive_forward(P, cfg, tokens, pair):
    """docs/model.md's forward pass, one scalar/vector at a time (float64 numpy)."""
    B, S, N = tokens.shape
    cm, cz, co = cfg.msa_dim, cfg.pair_dim, cfg.outer_dim
    Hm, Hz = cfg.n_heads_msa, cfg.n_heads_pair
    dm, dz = cm // Hm, cz // Hz
    W = lambda n: P[n]
    m = np.zeros((B, S, N, cm))
    for b in range(B):
        for s in range(S):
            for i in range(N):
                m[b, s, i] = W("msa_embedding.weight")[tokens[b, s, i]]
    z = np.zeros((B, N, N, cz))
    for b in range(B):
        for i in range(N):
            for j in range(N):
                z[b, i, j] = W("pair_embedding.weight") @ pair[b, i, j]
    for blk in range(cfg.n_blocks):
        p = f"evoformer_blocks.{blk}."
        # MSA row attention with pair bias
        x = _ln(m, W(p + "msa_norm_row.weight"), W(p + "msa_norm_row.bias"))
        a = p + "msa_row_attention."
        q, k, v = (x @ W(a + f"{t}_proj.weight").T for t in "qkv")
        o = np.zeros_like(x)
        for b in range(B):
            for s in range(S):
                for h in range(Hm):
                    c = slice(h * dm, (h + 1) * dm)
                    for i in range(N):
                        sc = np.array([q[b, s, i, c] @ k[b, s, j, c] / math.sqrt(dm)
                                       + z[b, i, j] @ W(a + "pair_bias_proj.weight")[h]
                                       for j in range(N)])
                        pr = _softmax(sc)
                        o[b, s, i, c] = sum(pr[j] * v[b, s, j, c] for j in range(N))
        m = m + o @ W(a + "o_proj.weight").T
        # MSA column attention
        x = _ln(m, W(p + "msa_norm_col.weight"), W(p + "msa_norm_col.bias"))
        a = p + "msa_column_attention."
        q, k, v = (x @ W(a + f"{t}_proj.weight").T for t in "qkv")
        o = np.zeros_like(x)
        for b in range(B):
            for i in range(N):
                for h in range(Hm):
                    c = slice(h * dm, (h + 1) * dm)
                    for s in range(S):
                        pr = _softmax(np.array([q[b, s, i, c] @ k[b, t, i, c] / math.sqrt(dm)
                                                for t in range(S)]))
                        o[b, s, i, c] = sum(pr[t] * v[b, t, i, c] for t in range(S))
        m = m + o @ W(a + "o_proj.weight").T
        # MSA transition
        x = _ln(m, W(p + "msa_norm_trans.weight"), W(p + "msa_norm_trans.bias"))
        m = m + np.maximum(x @ W(p + "msa_transition.linear1.weight").T, 0) @ W(p + "msa_transition.linear2.weight").T
        # outer product mean (no pair_norm_outer)
        a = p + "outer_product_mean."
        A = _ln(m, W(a + "layer_norm.weight"), W(a + "layer_norm.bias")) @ W(a + "msa_to_outer.weight").T
        upd = np.zeros_like(z)
        for b in range(B):
            for i in range(N):
                for j in range(N):
                    op = np.zeros((co, co))
                    for s in range(S):
                        op += np.outer(A[b, s, i], A[b, s, j])
                    upd[b, i, j] = W(a + "outer_to_pair.weight") @ (op / S).reshape(-1)
        z = z + upd
        # triangle multiplications
        for name, norm, outgoing in (("triangle_mult_outgoing", "tri_out", True),
                                     ("triangle_mult_incoming", "tri_in", False)):
            a = p + name + "."
            y = _ln(z, W(p + f"pair_norm_{norm}.weight"), W(p + f"pair_norm_{norm}.bias"))
            y = _ln(y, W(a + "layer_norm.weight"), W(a + "layer_norm.bias"))
            L = (y @ W(a + "left_proj.weight").T) * _sig(y @ W(a + "left_gate.weight").T)
            R = (y @ W(a + "right_proj.weight").T) * _sig(y @ W(a + "right_gate.weight").T)
            u = np.zeros_like(z)
            for b in range(B):
                for i in range(N):
                    for j in range(N):
                        for c in range(cz):
                            if outgoing:
                                u[b, i, j, c] = sum(L[b, i, kk, c] * R[b, j, kk, c] for kk in range(N))
                            else:
                                u[b, i, j, c] = sum(L[b, kk, i, c] * R[b, kk, j, c] for kk in range(N))
            z = z + (u @ W(a + "output_proj.weight").T) * _sig(y @ W(a + "output_gate.weight").T)
        # triangle attentions
        for name, norm, ending in (("triangle_attn_starting", "attn_start", False),
                                   ("triangle_attn_ending", "attn_end", True)):
            a = p + name + "."
            y = _ln(z, W(p + f"pair_norm_{norm}.weight"), W(p + f"pair_norm_{norm}.bias"))
            y = _ln(y, W(a + "layer_norm.weight"), W(a + "layer_norm.bias"))
            q, k, v = (y @ W(a + f"{t}_proj.weight").T for t in "qkv")
            o = np.zeros_like(z)
            for b in range(B):
                for h in range(Hz):
                    c = slice(h * dz, (h + 1) * dz)
                    for i in range(N):
                        for j in range(N):
                            if not ending:   # row i: position j attends over l along the row
                                pr = _softmax(np.array([q[b, i, j, c] @ k[b, i, l, c] / math.sqrt(dz)
                                                        for l in range(N)]))
                                o[b, i, j, c] = sum(pr[l] * v[b, i, l, c] for l in range(N))
                            else:            # column j: position i attends over l along the column
                                pr = _softmax(np.array([q[b, i, j, c] @ k[b, l, j, c] / math.sqrt(dz)
                                                        for l in range(N)]))
                                o[b, i, j, c] = sum(pr[l] * v[b, l, j, c] for l in range(N))
            z = z + o @ W(a + "o_proj.weight").T
        # pair transition
        x = _ln(z, W(p + "pair_norm_trans.weight"), W(p + "pair_norm_trans.bias"))
        z = z + np.maximum(x @ W(p + "pair_transition.linear1.weight").T, 0) @ W(p + "pair_transition.linear2.weight").T
    return 20.0 * _sig(z @ W("structure_module.distance_pred.weight").T)


def test_naive_forward():
    for cfg, (B, S, N), seed in ((Config(msa_dim=8, pair_dim=12, n_blocks=2, outer_dim=3), (2, 3, 4), 5),
                                 (Config(msa_dim=12, pair_dim=20, n_blocks=1, outer_dim=5), (1, 5, 3), 6)):
        model = fixture_model(cfg, seed)
        b = batch64(seed + 100, B, S, N)
        with torch.no_grad():
            pred = model(b["msa_tokens"], b["pair_features"]).numpy()
            loss = mse_loss(torch.from_numpy(pred), b["target_distances"]).item()
        P = {n: t.detach().numpy() for n, t in model.state_dict().items()}
        ref = naive_forward(P, cfg, b["msa_tokens"].numpy(), b["pair_features"].numpy())
        ref_loss = float(((ref - b["target_distances"].numpy()) ** 2).mean())
        err = np.abs(pred - ref).max() / np.abs(ref).max()
        assert err < 1e-12, f"forward differs from the naive transcription: {err:.3e}"
        assert abs(loss - ref_loss) <= 1e-12 * ref_loss, (loss, ref_loss)
        assert np.ptp(ref) > 1.0, "degenerate predictions: the test would be weak"


# ---------------------------------------------------------------- 3. gradcheck
def _functional_call(model, params, args):
    try:
        from torch.func import functional_call  # torch >= 2.0
    except ImportError:
        from torch.nn.utils.stateless import functional_call  # torch 1.12/1.13
    return functional_call(model, params, args)


def test_gradcheck():
    model = fixture_model(TINY, 11)
    b = batch64(12, 1, 2, 3)
    names = [n for n, _ in model.named_parameters() if ".pair_norm_outer." not in n]
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    pair = b["pair_features"].clone().requires_grad_(True)

    def f(pair_in, *ps):
        params = dict(base)
        params.update(zip(names, ps))
        pred = _functional_call(model, params, (b["msa_tokens"], pair_in))
        return mse_loss(pred, b["target_distances"])

    inputs = (pair,) + tuple(base[n].clone().requires_grad_(True) for n in names)
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    # and the hand-off used by the fixtures: grads() == autograd of f
    loss, _, g = rr.grads(model, b)
    assert set(g) == set(names), "pair_norm_outer must be the only parameters without a gradient"


# ---------------------------------------------------------------- 4. AdamW
def test_adamw():
    lr, wd, b1, b2, eps, steps = 1e-3, 0.01, 0.9, 0.999, 1e-8, 3
    model = fixture_model(TINY, 21)
    b = batch64(22, 2, 2, 3)
    p0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    # by hand, from docs/model.md's rule
    hand = {n: t.clone() for n, t in p0.items()}
    mom = {n: torch.zeros_like(t) for n, t in p0.items()}
    vel = {n: torch.zeros_like(t) for n, t in p0.items()}
    probe = fixture_model(TINY, 21)
    hand_losses = []
    for t in range(1, steps + 1):
        probe.load_state_dict(hand)
        loss, _, g = rr.grads(probe, b)
        hand_losses.append(loss.item())
        for n in hand:
            if n not in g:
                continue  # PyTorch skips params without grad: no decay either
            hand[n] = hand[n] * (1 - lr * wd)
            mom[n] = b1 * mom[n] + (1 - b1) * g[n]
            vel[n] = b2 * vel[n] + (1 - b2) * g[n] ** 2
            mhat, vhat = mom[n] / (1 - b1 ** t), vel[n] / (1 - b2 ** t)
            hand[n] = hand[n] - lr * mhat / (vhat.sqrt() + eps)
    losses, after = rr.adam_run(model, b, lr, steps)
    assert np.allclose(losses.numpy(), hand_losses, rtol=1e-13, atol=0)
    for n in hand:
        d = (after[n] - hand[n]).abs().max().item()
        assert d <= 1e-12 * lr, f"{n}: AdamW differs from the docs/model.md rule by {d:.3e}"
        if ".pair_norm_outer." in n:
            assert torch.equal(after[n], p0[n]), n
        else:
            assert (after[n] - p0[n]).abs().max().item() > 0.5 * lr, f"{n} did not move"


# ---------------------------------------------------------------- 5. safetensors
def test_safetensors_roundtrip():
    rng = np.random.default_rng(3)
    t = {"f32": rng.standard_normal((3, 4)).astype(np.float32),
         "f64": rng.standard_normal((2, 1, 5)),
         "i32": rng.integers(-2**31, 2**31 - 1, (7,), dtype=np.int32),
         "i64": rng.integers(-2**62, 2**62, (2, 2), dtype=np.int64),
         "scalar": np.array(1.5, dtype=np.float32),
         "empty": np.zeros((0, 3), dtype=np.float32),
         "odd.name/with:chars": np.arange(3, dtype=np.float32)}
    meta = {"a": "1", "command": "x y", "unicode": "\u00e9"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        st.save(path, t, meta)
        raw = open(path, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        assert n % 8 == 0 and raw[8:9] == b"{"
        back, m2 = st.load(path)
    assert m2 == meta and list(back) == list(t)
    for k in t:
        assert back[k].dtype == t[k].dtype and back[k].shape == t[k].shape, k
        assert np.array_equal(back[k], t[k]), k
    # torch tensors go in as well
    blob = st.serialize({"x": torch.arange(4, dtype=torch.float64)})
    assert np.array_equal(st.parse(blob)[0]["x"], np.arange(4.0))


def _file(header, data=b"", pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def _raw(header_bytes, data=b""):
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def test_safetensors_rejects():
    ok = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]}}
    st.parse(_file(ok, b"\0" * 12))  # the baseline is valid
    bad = {
        "short file": b"\x01\x02",
        "header past end": struct.pack("<Q", 1000) + b"{}",
        "not json": struct.pack("<Q", 4) + b"{{{{",
        "not object": _file([1, 2]),
        "bad dtype": _file({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4),
        "size mismatch": _file({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
        "out of bounds": _file({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
        "overlap": _file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
        "hole": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
        "trailing": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
        "negative shape": _file({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}),
        "bad offsets": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}}, b"\0" * 4),
        "reversed offsets": _file({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}, b"\0" * 4),
        "extra key": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}}, b"\0" * 4),
        "metadata not str": _file({"__metadata__": {"a": 1}}),
        "duplicate name": _raw(b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
                               b'"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'),
    }
    for what, blob in bad.items():
        try:
            st.parse(blob)
        except st.SafetensorsError:
            continue
        raise AssertionError(f"accepted a corrupt file: {what}")
    for meta in ({"a": 1}, {1: "a"}):
        try:
            st.serialize({}, meta)
        except st.SafetensorsError:
            continue
        raise AssertionError(f"wrote non-string metadata {meta}")


# ---------------------------------------------------------------- 6. scripts
def test_scripts():
    import contextlib
    import check_checkpoint
    import grads as grads_script
    with tempfile.TemporaryDirectory() as d:
        ck, data, gout = (os.path.join(d, x) for x in ("ck.safetensors", "b.safetensors", "g.safetensors"))
        st.save(data, rr.make_batch(torch.Generator().manual_seed(31), 2, 3, 4))
        flags = ["--msa-dim", "8", "--pair-dim", "12", "--num-blocks", "2", "--outer-dim", "3"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert check_checkpoint.main(["--save-checkpoint", ck, "--data", data] + flags) == 0
            assert check_checkpoint.main(["--checkpoint", ck, "--data", data]) == 0
            assert grads_script.main(["--weights", ck, "--data", data, "--out", gout]) == 0
        l1, l2, l3 = (float(x.split()[1]) for x in out.getvalue().split("\n") if x.startswith("loss "))
        assert l1 == l2 == l3, (l1, l2, l3)
        t, meta = st.load(ck)
        cfg = rr.infer_config(t, meta)
        assert (cfg.msa_dim, cfg.pair_dim, cfg.n_blocks, cfg.outer_dim) == (8, 12, 2, 3)
        assert [(n, v.shape) for n, v in t.items()] == expected_state_dict(cfg)  # names and order
        model = rr.build_model(t, cfg)
        b = rr.to_device(rr.load_batch(data), torch.float64, "cpu")
        loss, _, g = rr.grads(model, b)
        assert abs(loss.item() - l1) <= 1e-8 * loss.item()
        gt, gmeta = st.load(gout)
        for n, v in g.items():
            assert np.array_equal(gt["grad." + n], v.float().numpy()), n
        assert "grad." + "evoformer_blocks.0.pair_norm_outer.weight" not in gt
        # a checkpoint with a missing tensor, an extra one, or optimizer.* extras
        del t["structure_module.distance_pred.weight"]
        st.save(ck, t, meta)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert check_checkpoint.main(["--checkpoint", ck, "--data", data]) == 1
        t["structure_module.distance_pred.weight"] = np.zeros((1, 12), np.float32)
        t["optimizer.m.x"] = np.zeros(3, np.float32)
        st.save(ck, t, meta)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert check_checkpoint.main(["--checkpoint", ck, "--data", data]) == 0
        t["evoformer_blocks.1.bogus.weight"] = np.zeros(3, np.float32)
        st.save(ck, t, meta)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert check_checkpoint.main(["--checkpoint", ck, "--data", data]) == 1


# ---------------------------------------------------------------- 7. fixtures
def test_fixtures():
    names = sorted(f for f in os.listdir(FIXTURE_DIR) if f.endswith(".safetensors")) \
        if os.path.isdir(FIXTURE_DIR) else []
    if not names:
        print("    (no fixtures yet: skipped)")
        return
    for f in names:
        t, meta = st.load(os.path.join(FIXTURE_DIR, f))
        assert meta["format"] == "tinyfold-fixture" and meta["version"] == "1", f
        state, _ = rr.split_state(t, "param.")
        cfg = rr.infer_config(state, meta)
        B, S, N = (int(meta[k]) for k in ("batch", "n_seqs", "seq_len"))
        assert t["msa_tokens"].shape == (B, S, N) and t["msa_tokens"].dtype == np.int32, f
        assert t["pair_features"].shape == (B, N, N, 65) and t["target_distances"].shape == (B, N, N, 1), f
        model = rr.build_model(state, cfg)
        b = rr.to_device(rr.load_batch(os.path.join(FIXTURE_DIR, f)), torch.float64, "cpu")
        loss, pred, g = rr.grads(model, b)
        # stored = float64 truth rounded once to float32: within half an ulp
        # (+1e-12 relative: another torch/BLAS computes float64 results a few
        # ulp64 apart, which can move a value across a float32 rounding midpoint)
        tol = lambda x: (np.spacing(np.abs(x.astype(np.float32))).astype(np.float64) * 0.5
                         + 1e-12 * np.abs(x))
        for name, ref in [("loss", loss.reshape(1)), ("pred", pred)] + [("grad." + n, v) for n, v in g.items()]:
            got = t[name].astype(np.float64)
            r = ref.numpy()
            assert got.shape == r.shape, (f, name)
            assert np.all(np.abs(got - r) <= tol(r)), f"{f}: {name} is not the float64 result rounded"
        assert sorted(set(state) - set(g)) == sorted(meta["no_grad"].split(",")), f
        assert not any(("grad." + n) in t for n in meta["no_grad"].split(",")), f
        steps = int(meta["adam_steps"])
        if steps:
            losses, after = rr.adam_run(model, b, float(meta["lr"]), steps)
            assert np.all(np.abs(t["losses"] - losses.numpy()) <= tol(losses.numpy())), f
            for n, v in after.items():
                assert np.all(np.abs(t["after." + n] - v.numpy()) <= tol(v.numpy())), (f, n)
            for n in meta["no_grad"].split(","):
                assert np.array_equal(t["after." + n], t["param." + n]), (f, n)
        print(f"    {f}: {len(t)} tensors match a fresh float64 recompute")


def main():
    tests = [test_state_dict, test_naive_forward, test_gradcheck, test_adamw,
             test_safetensors_roundtrip, test_safetensors_rejects, test_scripts, test_fixtures]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"PASS {t.__name__}")
        except Exception:  # report every failure, not just the first
            failed += 1
            print(f"FAIL {t.__name__}")
            traceback.print_exc(file=sys.stdout)
    print(f"{len(tests) - failed}/{len(tests)} passed (torch {torch.__version__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
