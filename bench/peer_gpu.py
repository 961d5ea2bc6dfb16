"""One PyTorch training run of the reference TinyOpenFold (tests/reference/) on
a GPU, for bench/peer_gpu.sh: AdamW with the reference's hyper-parameters, a
fixed synthetic batch; prints one JSON line with the median step time,
samples/s and the peak memory. The strongest PyTorch configuration is one of
--precision x --mode; peer_gpu.sh runs them all and marks the fastest.

Precisions:
  fp32  TF32 off for cuBLAS and cuDNN, float32 matmul precision "highest"
  tf32  TF32 on for both, float32 matmul precision "high"
  bf16  torch.autocast(dtype=torch.bfloat16) around forward and loss, float32
        master weights, gradients and optimizer state (autocast's own rule:
        matmuls in bf16, softmax, layer norm and the loss in float32); TF32 as
        for tf32 for whatever float32 matmul autocast leaves

Modes (each step is: zero_grad(set_to_none), forward + loss, backward, AdamW):
  eager         the reference as written
  sdpa          its attention through F.scaled_dot_product_attention (flattened
                to 4-D, the only shape the fused kernels take)
  compile       torch.compile of forward + loss, default mode (inductor)
  compile-sdpa  the same with sdpa attention
  graphs        torch.compile(mode="reduce-overhead"): inductor plus CUDA graphs
                (cudagraph trees, forward and backward each one graph);
                torch.compiler.cudagraph_mark_step_begin() before each step
  graphs-sdpa   the same with sdpa attention
The compiled modes compile in the warm-up steps (graphs records its CUDA graphs
there too: keep --warmup >= 3). On the CPU, graphs runs as compile (inductor
skips CUDA graphs there and says so in cudagraph_skips).

AdamW (--adamw): "ref" is ref.make_optimizer (torch's default implementation,
foreach on CUDA); "fused" is torch.optim.AdamW(fused=True) with the same
hyper-parameters, read from the reference's optimizer (the same AdamW math in
one fused kernel per tensor group). "auto", the default, takes fused for the
graphs modes on CUDA and ref otherwise.

Peak memory: torch.cuda.max_memory_allocated() over the whole run (warm-up and
compilation included, never reset), on the CPU the process's peak RSS."""
import argparse
import json
import math
import os
import resource
import sys
import time
import traceback

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "reference"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tinyopenfold_ref as ref  # noqa: E402

from peer_cpu import PROBLEMS  # noqa: E402  (the CPU peer's shapes: `tinyfold bench`'s)
MODES = ["eager", "sdpa", "compile", "compile-sdpa", "graphs", "graphs-sdpa"]


def sdpa_attend_bias(q, k, v, bias):
    # The reference's q, k, v are 5-D ([B, S|N, H, L, d]); the fused SDPA kernels
    # (flash, memory-efficient, cuDNN) take 4-D only and fall back to the math one
    # otherwise, so the leading dims are merged. The row attention's bias
    # [B, 1, H, N, N] (broadcast over S) becomes [B*S, H, N, N], a copy the size
    # of the scores that eager materialises anyway.
    lead, (H, L, d) = q.shape[:-3], q.shape[-3:]
    if bias is not None:
        bias = bias.expand(*q.shape[:-1], k.shape[-2]).reshape(-1, H, L, k.shape[-2])
    o = F.scaled_dot_product_attention(q.reshape(-1, H, L, d), k.reshape(-1, *k.shape[-3:]),
                                       v.reshape(-1, *v.shape[-3:]), attn_mask=bias)
    return o.reshape(*lead, H, L, v.shape[-1])


class WithLoss(torch.nn.Module):
    """forward + loss in one module, so that torch.compile takes both."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, pair, target):
        return ref.mse_loss(self.model(tokens, pair), target)


def set_precision(precision):
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def make_adamw(model, which):
    opt = ref.make_optimizer(model, 3e-4)
    if which == "fused":
        hp = {k: opt.defaults[k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad")}
        opt = torch.optim.AdamW(model.parameters(), fused=True, **hp)
    return opt


def run(a):
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    B, N, S, blocks = PROBLEMS[a.problem]
    set_precision(a.precision)
    if "sdpa" in a.mode:
        ref.attend_bias = sdpa_attend_bias  # looked up at call time by attend and the modules
    graphs = a.mode.startswith("graphs")
    adamw = a.adamw if a.adamw != "auto" else ("fused" if graphs and cuda else "ref")

    torch.manual_seed(a.seed)
    model = ref.TinyOpenFold(ref.Config(n_blocks=blocks)).to(dev)
    g = torch.Generator().manual_seed(a.seed)
    tokens = torch.randint(0, ref.VOCAB, (B, S, N), generator=g).to(dev)
    pair = torch.randn(B, N, N, ref.PAIR_INPUT_DIM, generator=g).to(dev)
    target = (20 * torch.rand(B, N, N, 1, generator=g)).to(dev)
    opt = make_adamw(model, adamw)
    step_fn = WithLoss(model)
    if a.mode.startswith("compile"):
        step_fn = torch.compile(step_fn)
    elif graphs:
        step_fn = torch.compile(step_fn, mode="reduce-overhead")
    amp = a.precision == "bf16"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    times = []
    loss = None
    t_start = time.perf_counter()
    t_warm = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t_warm = time.perf_counter() - t_start
        sync()
        t0 = time.perf_counter()
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = step_fn(tokens, pair, target)
        loss.backward()
        opt.step()
        sync()
        dt = (time.perf_counter() - t0) * 1e3
        if step >= a.warmup:
            times.append(dt)
    if t_warm is None:
        t_warm = time.perf_counter() - t_start
    final = loss.item() if loss is not None else float("nan")

    times.sort()
    n = len(times)
    median = (times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])) if n else float("nan")
    if cuda:
        peak = torch.cuda.max_memory_allocated(dev) / 2**20
        peak_of = "cuda max_memory_allocated, whole run"
        name = torch.cuda.get_device_name(dev)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak_of = "process peak RSS"
        name = dev.type
    out = {"problem": a.problem, "precision": a.precision, "mode": a.mode, "adamw": adamw,
           "torch": torch.__version__, "device": name, "B": B, "N": N, "S": S, "blocks": blocks,
           "steps": n, "warmup": a.warmup, "warmup_s": round(t_warm, 2),
           "median_ms": round(median, 3), "min_ms": round(times[0], 3) if n else None,
           "samples_per_s": round(B * 1e3 / median, 1) if n else None,
           "peak_mib": round(peak, 1), "peak_of": peak_of,
           "final_loss": None if math.isnan(final) else round(final, 5)}
    if not cuda:
        out["threads"] = torch.get_num_threads()
    if a.mode not in ("eager", "sdpa"):
        from torch._dynamo.utils import counters
        out["graph_breaks"] = sum(counters["graph_break"].values())
        out["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--problem", choices=sorted(PROBLEMS), default="small")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    ap.add_argument("--mode", choices=MODES, default="eager")
    ap.add_argument("--adamw", choices=["auto", "ref", "fused"], default="auto")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    try:
        out = run(a)
    except Exception as e:  # one JSON line that says why, the traceback on stderr
        traceback.print_exc()
        msg = " ".join(str(e).split())[:400]
        print(json.dumps({"problem": a.problem, "precision": a.precision, "mode": a.mode,
                          "torch": torch.__version__, "error": f"{type(e).__name__}: {msg}"}),
              flush=True)
        sys.exit(1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
