#!/usr/bin/env python3
"""Write the seed corpus of a fuzz target: small valid safetensors files (the
layouts tinyfold writes and reads: checkpoints, data and gradient files, every
dtype, scalars, empty tensors, metadata) plus truncations of each and a few
near-miss malformed files; for fuzz_datafile also data files whose values are
in range, for fuzz_checkpoint_meta checkpoints and foreign state_dicts, for
fuzz_compare pairs of run / profile JSON documents and kernel_stats.csv files
split by a NUL byte, for fuzz_report the same and traces and scaling JSON
behind a layout byte.
Standard library only.

usage: make_corpus.py OUT_DIR [safetensors|datafile|checkpoint|compare|report]
"""
import json
import os
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def image(tensors, metadata=None, pad=True, header_override=None, fill=None):
    """tensors: list of (name, dtype, shape); data is a byte pattern, or
    fill(name, dtype, count) -> bytes."""
    header, blobs, pos = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape in tensors:
        count = 1
        for s in shape:
            count *= s
        n = SIZES[dt] * count
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + n]}
        if fill:
            blobs.append(fill(name, dt, count))
        else:
            blobs.append(bytes((i * 37 + len(name)) & 0xFF for i in range(n)))
        pos += n
    h = header_override if header_override is not None else json.dumps(header, separators=(",", ":"))
    h = h.encode("utf-8")
    if pad:
        h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cfg = json.dumps({"msa_dim": 8, "pair_dim": 8, "n_blocks": 1, "n_heads_msa": 2,
                      "n_heads_pair": 2, "outer_dim": 4, "impl": "v2", "seed": 42})
    ck_meta = {"format": "tinyfold-checkpoint", "version": "1", "tinyfold_config": cfg,
               "global_step": "3", "adam_step": "3"}
    valid = {
        "empty": image([]),
        "empty_meta": image([], {"format": "pt"}),
        "one_f32": image([("w", "F32", [2, 3])]),
        "scalar": image([("s", "F64", [])]),
        "zero_size": image([("z", "U8", [0, 4]), ("a", "F32", [1])]),
        "all_dtypes": image([(f"t.{d.lower()}", d, [3]) for d in SIZES]),
        "unpadded": image([("w", "I32", [2])], pad=False),
        "checkpoint": image([("msa_embedding.weight", "F32", [21, 8]),
                             ("optimizer.exp_avg.msa_embedding.weight", "F32", [21, 8]),
                             ("optimizer.exp_avg_sq.msa_embedding.weight", "F32", [21, 8]),
                             ("structure_module.distance_pred.weight", "F32", [1, 8])], ck_meta),
        "datafile": image([("msa_tokens", "I32", [2, 3, 4]),
                           ("pair_features", "F32", [2, 4, 4, 65]),
                           ("target_distances", "F32", [2, 4, 4, 1])], {"format": "data"}),
        "gradfile": image([("loss", "F32", [1]), ("pred", "F32", [1, 2, 2, 1]),
                           ("grad.w", "F32", [4, 4])],
                          {"format": "tinyfold-grads", "version": "1", "tinyfold_config": cfg}),
        "unicode": image([("\u00e9t\u00e9.\u4e2d", "F32", [1])], {"k\u00e9y": "v\u00e2l \"q\""}),
        "high_dims": image([("h", "U8", [1, 1, 1, 1, 1, 1, 1, 2])]),
    }
    malformed = {
        "overlap": image([], header_override='{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                              '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'),
        "gap": image([], header_override='{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'),
        "bad_dtype": image([], header_override='{"a":{"dtype":"F33","shape":[0],"data_offsets":[0,0]}}'),
        "dup": image([], header_override='{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},'
                                          '"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'),
        "meta_int": image([], header_override='{"__metadata__":{"k":1}}'),
        "big_shape": image([], header_override='{"a":{"dtype":"F64","shape":[4294967296,4294967296],'
                                                '"data_offsets":[0,0]}}'),
        "nul_escape": image([], header_override='{"a\\u0000":{"dtype":"U8","shape":[0],'
                                                 '"data_offsets":[0,0]}}'),
    }
    target = sys.argv[2] if len(sys.argv) > 2 else "safetensors"
    if target == "datafile":
        def data_fill(name, dt, count):
            if name == "msa_tokens":
                fmt = "<%d%s" % (count, "i" if dt == "I32" else "q")
                return struct.pack(fmt, *[(i * 7) % 21 for i in range(count)])
            return struct.pack("<%df" % count, *[0.25 * (i % 9) for i in range(count)])
        for tok in ("I32", "I64"):
            for tdims in ([1, 3, 3, 1], [1, 3, 3]):
                valid[f"data_{tok}_{len(tdims)}d"] = image(
                    [("msa_tokens", tok, [1, 2, 3]), ("pair_features", "F32", [1, 3, 3, 65]),
                     ("target_distances", "F32", tdims)], fill=data_fill)
        valid["data_two"] = image([("msa_tokens", "I32", [2, 1, 2]),
                                   ("pair_features", "F32", [2, 2, 2, 65]),
                                   ("target_distances", "F32", [2, 2, 2, 1])], fill=data_fill)
    if target == "checkpoint":
        for k, v in (("global_step", "9007199254740992"), ("adam_step", "18446744073709551615"),
                     ("version", "2")):
            m = dict(ck_meta)
            m[k] = v
            valid[f"ck_{k}"] = image([("msa_embedding.weight", "F32", [21, 8])], m)
        big = json.dumps({"msa_dim": 4096, "pair_dim": 8, "n_blocks": 64, "n_heads_msa": 64,
                          "n_heads_pair": 2, "outer_dim": 4, "learning_rate": 1,
                          "seed": "18446744073709551615"})
        valid["ck_limits"] = image([], dict(ck_meta, tinyfold_config=big))
        foreign = [("msa_embedding.weight", "F32", [21, 8]),
                   ("pair_embedding.weight", "F32", [8, 65]),
                   ("evoformer_blocks.0.msa_row_attention.q_proj.weight", "F32", [8, 8]),
                   ("evoformer_blocks.0.msa_row_attention.pair_bias_proj.weight", "F32", [2, 8]),
                   ("evoformer_blocks.0.outer_product_mean.msa_to_outer.weight", "F32", [4, 8])]
        valid["foreign"] = image(foreign)
        valid["foreign_meta"] = image(foreign, {"msa_dim": "8", "n_heads_pair": "2",
                                                "n_blocks": "1"})
    report = target == "report"
    if target in ("compare", "report"):
        run = {"tinyfold_version": "0.1.0", "command": "train",
               "config": {"batch": 1, "seq_len": 8, "n_seqs": 2, "n_blocks": 1, "msa_dim": 16,
                          "pair_dim": 32, "n_heads_msa": 4, "n_heads_pair": 4, "outer_dim": 32,
                          "precision": "fp32", "num_steps": 2, "impl": "v3", "backend": "cpu",
                          "graph": False, "threads": 2},
               "summary": {"samples_per_sec": 10.5, "step_ms": 95.2, "final_loss": 31.5,
                           "mean_loss": None, "gflops": 0.6},
               "steps": [{"step": 0, "warmup": False, "loss": 31.5}]}
        prof = {"run": run, "launches_per_step": 12,
                "memory": {"peak_backend_bytes": 1048576, "peak_host_rss_bytes": 2097152},
                "kernels": [{"name": f"k{i}", "total_ns": (i * 7919) % 1000, "calls": i}
                            for i in range(14)],
                "counters": {"kernels": [{"name": "k1", "metrics": {"dram_bytes": 1.5,
                                                                    "sm_pct": 80}}]}}
        docs = {"runs": (run, run), "profiles": (prof, prof), "mixed": (run, prof)}
        n = 0
        for name, (a, b) in docs.items():
            blob = json.dumps(a).encode() + b"\0" + json.dumps(b).encode()
            for cut in (len(blob), len(blob) // 2):
                with open(os.path.join(out, f"{name}_{cut}"), "wb") as f:
                    f.write(blob[:cut])
                n += 1
        with open(os.path.join(out, "trailing"), "wb") as f:
            f.write(json.dumps(run).encode() + b"\0" + json.dumps(run).encode() + b" {}")
        csv = (b'"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs",'
               b'"StdDev"\n"k|1",3,3000,1000.0,75.0,900,1100,10.0\n"k2",1,1000,1000.0,25.0,'
               b'1000,1000,0.0\n')
        with open(os.path.join(out, "kernel_stats"), "wb") as f:
            f.write(csv + b"\0" + csv)
        if report:
            # report: the first byte is the layout (fuzz_report.c)
            trace = {"traceEvents": [
                {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "host"}},
                {"name": "forward_pass", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
                {"name": "k1", "ph": "X", "pid": 1, "tid": 3, "ts": 5, "dur": 20,
                 "args": {"region": "forward_pass/block_0/msa_row_attention"}}]}
            scaling = {"points": [{"N": 16, "peak_bytes": 1e7, "step_ms": 5, "flops": 1e9,
                                   "gflops": 200},
                                  {"N": 32, "peak_bytes": 3.5e7, "step_ms": 30, "flops": 7e9,
                                   "gflops": 233}],
                       "fit": {"memory_exponent": 1.8, "time_exponent": 2.6}}
            # ids outside int's range: a track's pid and tid are clamped
            huge = {"traceEvents": trace["traceEvents"] + [
                {"name": "thread_name", "ph": "M", "pid": 0, "tid": 14294967296,
                 "args": {"name": "far"}},
                {"name": "step_1", "ph": "X", "pid": 1, "tid": 2, "ts": 0, "dur": 10},
                {"name": "k2", "ph": "X", "pid": 0, "tid": 1, "ts": 1, "dur": 2},
                {"name": "k3", "ph": "X", "pid": -1e300, "tid": 1e300, "ts": 1, "dur": 2}]}
            layouts = {"profile": (0, prof, trace), "run": (1, run, run),
                       "scaling": (3, run, scaling), "huge_ids": (0, prof, huge)}
            for name, (lay, a, b) in layouts.items():
                blob = json.dumps(a).encode() + b"\0" + json.dumps(b).encode()
                for cut in (len(blob), len(blob) // 2):
                    with open(os.path.join(out, f"report_{name}_{cut}"), "wb") as f:
                        f.write(bytes([lay]) + blob[:cut])
                    n += 1
            with open(os.path.join(out, "report_csv"), "wb") as f:
                f.write(bytes([2]) + csv)
            n += 1
        print(f"make_corpus: {n + 2} files in {out}")
        return
    n = 0
    for name, img in valid.items():
        cuts = sorted({0, 4, 8, 9, len(img) // 2, len(img) - 1})
        with open(os.path.join(out, f"valid_{name}"), "wb") as f:
            f.write(img)
        n += 1
        for c in cuts:
            if 0 <= c < len(img):
                with open(os.path.join(out, f"trunc_{name}_{c}"), "wb") as f:
                    f.write(img[:c])
                n += 1
    for name, img in malformed.items():
        with open(os.path.join(out, f"bad_{name}"), "wb") as f:
            f.write(img)
        n += 1
    print(f"make_corpus: {n} files in {out}")


if __name__ == "__main__":
    main()
