"""One PyTorch training run of the reference TinyOpenFold (tests/reference/) on
the CPU, for bench/peer_cpu.sh: float32, AdamW, a fixed synthetic batch; prints
one JSON line with the median step time and the process's peak RSS.

Modes: eager (the reference as written), sdpa (its attention replaced by
torch.nn.functional.scaled_dot_product_attention), compile and compile-sdpa
(the same under torch.compile; the first steps compile, so they are warm-up)."""
import argparse
import json
import math
import os
import resource
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "reference"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tinyopenfold_ref as ref  # noqa: E402

PROBLEMS = {  # B, N, S, blocks: the same as `tinyfold bench` (src/cli/bench.c)
    "tiny": (2, 32, 8, 2),
    "small": (4, 64, 16, 4),
    "large": (4, 128, 32, 4),
    # long sequences (bench/longseq_gpu.sh): one sample, 16 sequences
    "n256": (1, 256, 16, 4),
    "n512": (1, 512, 16, 4),
    "n1024": (1, 1024, 16, 4),
    "n2048": (1, 2048, 16, 4),
}


def sdpa_attend_bias(q, k, v, bias):
    if bias is not None:
        bias = bias.expand(*q.shape[:-1], k.shape[-2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problem", choices=sorted(PROBLEMS), default="tiny")
    ap.add_argument("--mode", choices=["eager", "sdpa", "compile", "compile-sdpa"], default="eager")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16), "
                         "fp32 weights and optimizer (the reference's mixed precision)")
    a = ap.parse_args()

    B, N, S, blocks = PROBLEMS[a.problem]
    if "sdpa" in a.mode:
        ref.attend_bias = sdpa_attend_bias  # looked up at call time by attend and the modules
    torch.manual_seed(a.seed)
    model = ref.TinyOpenFold(ref.Config(n_blocks=blocks))
    g = torch.Generator().manual_seed(a.seed)
    tokens = torch.randint(0, ref.VOCAB, (B, S, N), generator=g)
    pair = torch.randn(B, N, N, ref.PAIR_INPUT_DIM, generator=g)
    target = 20 * torch.rand(B, N, N, 1, generator=g)
    opt = ref.make_optimizer(model, 3e-4)
    fwd = torch.compile(model) if a.mode.startswith("compile") else model

    amp = a.precision == "bf16"
    if amp:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if (torch.ones(1, 1) @ torch.ones(1, 1)).dtype != torch.bfloat16:
                sys.exit("peer_cpu.py: this torch's CPU autocast does not apply bf16")
    times = []
    loss = None
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = ref.mse_loss(fwd(tokens, pair), target)
        loss.backward()
        opt.step()
        dt = (time.perf_counter() - t0) * 1e3
        if step >= a.warmup:
            times.append(dt)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"problem": a.problem, "mode": a.mode, "precision": a.precision,
                      "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "steps": n,
                      "median_ms": round(median, 2), "peak_rss_mib": round(rss_kib / 1024, 1),
                      "final_loss": None if loss is None or math.isnan(loss.item())
                      else round(loss.item(), 5)}))


if __name__ == "__main__":
    main()
