#!/usr/bin/env python3
"""Write the seed corpus of fuzz_safetensors: small valid safetensors files
(the layouts tinyfold writes and reads: checkpoints, data and gradient files,
every dtype, scalars, empty tensors, metadata) plus truncations of each and a
few near-miss malformed files. Standard library only.

usage: make_corpus.py OUT_DIR
"""
import json
import os
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def image(tensors, metadata=None, pad=True, header_override=None):
    """tensors: list of (name, dtype, shape); data is a byte pattern."""
    header, blobs, pos = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape in tensors:
        n = SIZES[dt]
        for s in shape:
            n *= s
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + n]}
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
