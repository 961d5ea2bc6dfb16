"""A small safetensors reader/writer (Debian 12 ships no `safetensors` package).

Format (https://huggingface.co/docs/safetensors, restated):
  bytes 0..7   little-endian uint64 n = length of the JSON header
  bytes 8..8+n UTF-8 JSON object: {name: {"dtype": D, "shape": [...],
               "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
               (the writer pads it with spaces to a multiple of 8 bytes)
  the rest     the data section; offsets are relative to its start, tensors are
               row-major little-endian, and together they cover the section
               exactly (no overlaps, no holes).

Only the dtypes tinyfold uses are supported: F32, F64, I32, I64.
Tensors are numpy arrays here; callers convert to torch themselves.
"""
import json
import struct
from collections import OrderedDict

import numpy as np

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"),
          "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}
_NP_TO_ST = {np.dtype("float32"): "F32", np.dtype("float64"): "F64",
             np.dtype("int32"): "I32", np.dtype("int64"): "I64"}

# A header larger than this is treated as corrupt (the official library uses 100 MB).
MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    pass


def _no_duplicates(pairs):
    d = OrderedDict()
    for k, v in pairs:
        if k in d:
            raise SafetensorsError(f"duplicate key {k!r} in header")
        d[k] = v
    return d


def parse(buf):
    """Parse a whole file's bytes. Returns (OrderedDict name -> ndarray, metadata dict)."""
    buf = memoryview(buf)
    if len(buf) < 8:
        raise SafetensorsError(f"file too short ({len(buf)} bytes) for the 8-byte header length")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > MAX_HEADER or 8 + n > len(buf):
        raise SafetensorsError(f"header length {n} exceeds the file ({len(buf)} bytes) or {MAX_HEADER}")
    raw = bytes(buf[8:8 + n])
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    data = buf[8 + n:]
    meta = header.pop("__metadata__", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise SafetensorsError("__metadata__ must map strings to strings")
    spans = []
    out = OrderedDict()
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{name}: entry must have exactly dtype, shape, data_offsets")
        dt = info["dtype"]
        if dt not in DTYPES:
            raise SafetensorsError(f"{name}: unsupported dtype {dt!r} (supported: {', '.join(DTYPES)})")
        shape = info["shape"]
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool)
                                                  and s >= 0 for s in shape):
            raise SafetensorsError(f"{name}: shape {shape!r} is not a list of non-negative integers")
        offs = info["data_offsets"]
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise SafetensorsError(f"{name}: data_offsets {offs!r} is not [begin, end]")
        b, e = offs
        if not 0 <= b <= e <= len(data):
            raise SafetensorsError(f"{name}: data_offsets [{b}, {e}] outside the data section "
                                   f"of {len(data)} bytes")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if e - b != count * DTYPES[dt].itemsize:
            raise SafetensorsError(f"{name}: {e - b} bytes for shape {shape} of {dt} "
                                   f"(expected {count * DTYPES[dt].itemsize})")
        spans.append((b, e, name))
        arr = np.frombuffer(data[b:e], dtype=DTYPES[dt]).reshape(shape)
        out[name] = arr.astype(arr.dtype.newbyteorder("="), copy=True)
    # Overlaps and holes: sorted spans must tile [0, len(data)) exactly.
    pos = 0
    for b, e, name in sorted(spans):
        if b < pos:
            raise SafetensorsError(f"{name}: data_offsets [{b}, {e}] overlap the previous tensor")
        if b > pos:
            raise SafetensorsError(f"{name}: hole of {b - pos} bytes before this tensor")
        pos = e
    if pos != len(data):
        raise SafetensorsError(f"{len(data) - pos} trailing bytes after the last tensor")
    return out, dict(meta)


def load(path):
    """Read `path`. Returns (OrderedDict name -> ndarray, metadata dict)."""
    with open(path, "rb") as f:
        buf = f.read()
    try:
        return parse(buf)
    except SafetensorsError as e:
        raise SafetensorsError(f"{path}: {e}") from None


def serialize(tensors, metadata=None):
    """Bytes of a safetensors file holding `tensors` (name -> array-like) in the
    given order, with string `metadata`."""
    header = OrderedDict()
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"metadata {k!r}: keys and values must be strings")
        header["__metadata__"] = OrderedDict(metadata)
    blobs = []
    pos = 0
    for name, t in tensors.items():
        if name == "__metadata__":
            raise SafetensorsError("a tensor cannot be named __metadata__")
        a = _as_numpy(t)
        if a.dtype not in _NP_TO_ST:
            raise SafetensorsError(f"{name}: unsupported dtype {a.dtype}")
        raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _NP_TO_ST[a.dtype], "shape": list(a.shape),
                        "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def save(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(serialize(tensors, metadata))


def _as_numpy(t):
    if isinstance(t, np.ndarray):
        return t
    if hasattr(t, "detach"):  # torch tensor, without importing torch here
        return t.detach().cpu().numpy()
    return np.asarray(t)
