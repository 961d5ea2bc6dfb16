#!/usr/bin/env python3
"""Prints the GPU benchmark table from the run JSON files bench/gpu.sh wrote.

Usage: gpu_table.py OUT_DIR   (reads run_<prob>_<level>_<mode>_<prec>.json and,
for the eager fp32 rows' kernel launches per step, prof_<prob>_<level>/summary.json;
graph rows give their graph's kernel nodes)."""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def launches(out, prob, level, graph):
    s = load(os.path.join(out, f"prof{'g' if graph else ''}_{prob}_{level}", "summary.json"))
    if not s:
        return None
    v = s.get("launches_per_step")
    return v if v is not None else s.get("run", {}).get("summary", {}).get("launches_per_step")


def main():
    out = sys.argv[1]
    hdr = ("problem", "level", "mode", "prec", "samples/s", "ms/step", "fwd ms", "bwd ms",
           "opt ms", "launches", "peak MiB", "TFLOP/s")
    rows = []
    for prob in ("small", "large"):
        for level in ("v1", "v2", "v3"):
            for mode in ("eager", "graph"):
                for prec in ("fp32", "tf32"):
                    r = load(os.path.join(out, f"run_{prob}_{level}_{mode}_{prec}.json"))
                    if not r:
                        rows.append((prob, level, mode, prec) + ("-",) * 8)
                        continue
                    s = r["summary"]
                    # graph runs count their kernel nodes themselves; eager ones
                    # take the (fp32) profile's launches per step, else the graph
                    # run's nodes (a graph captures the eager step's launches
                    # one for one: 768 = 768 in bench/RESULTS.md at 9df359e), marked *
                    n = s.get("graph_kernel_nodes") if mode == "graph" else None
                    mark = ""
                    if not n and prec == "fp32":
                        n = launches(out, prob, level, mode == "graph")
                    if not n and mode == "eager":
                        g = load(os.path.join(out, f"run_{prob}_{level}_graph_{prec}.json"))
                        n = g and g["summary"].get("graph_kernel_nodes")
                        mark = "*" if n else ""
                    rows.append((prob, level, mode, prec, f"{s['samples_per_sec']:.1f}",
                                 f"{s['step_ms']:.2f}", f"{s['forward_ms']:.2f}",
                                 f"{s['backward_ms']:.2f}", f"{s['optimizer_ms']:.2f}",
                                 f"{n:.0f}{mark}" if n else "",
                                 f"{s['peak_memory_bytes'] / 2**20:.0f}",
                                 f"{s['gflops'] / 1000:.1f}"))
    w = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    line = lambda r: " | ".join(str(x).rjust(w[i]) for i, x in enumerate(r))
    print(line(hdr))
    print("-+-".join("-" * x for x in w))
    for r in rows:
        print(line(r))
    if any(str(r[9]).endswith("*") for r in rows):
        print("* the graph run's kernel nodes (no profile run at that precision)")


if __name__ == "__main__":
    main()
