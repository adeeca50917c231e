"""Minimal safetensors reader/writer (F32 and I32 only): 8-byte little-endian header length,
JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, raw data."""
import json
import struct

import torch

_DT = {torch.float32: "F32", torch.int32: "I32"}
_TD = {v: k for k, v in _DT.items()}


def write(path, tensors, metadata=None):
    hdr, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        b = t.numpy().tobytes()
        hdr[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        hdr["__metadata__"] = metadata
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + hl])
    data = raw[8 + hl:]
    meta = hdr.pop("__metadata__", {})
    out = {}
    for name, v in hdr.items():
        b, e = v["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:e]), dtype=_TD[v["dtype"]]).reshape(v["shape"])
    return out, meta
