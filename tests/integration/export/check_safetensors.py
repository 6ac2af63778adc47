#!/usr/bin/python3
"""Checks a .safetensors file against the dtrain .params file it was made from.

Usage: check_safetensors.py FILE.safetensors FILE.params [EXPECTED_NAME ...]

Debian bookworm packages no python3-safetensors, so the file is read here with numpy
and json exactly as safetensors.numpy.load_file does: an 8-byte little-endian header
length, a JSON header (dtype, shape, data_offsets relative to the end of the header,
optional __metadata__), then the raw little-endian tensors. The stricter checks of
safetensors' Rust reader are applied too: the header is 8-byte aligned (space
padded), the offsets are contiguous and cover the data buffer exactly.
The .params file is parsed independently (dtrain's format: magic, u32 version, u64
count, records of u32 name length, name, u32 ndim, u64 dims, float32s; a CRC-32 last).
Exit 0 when names (in order), shapes and every value match bit for bit.
"""
import json
import struct
import sys
import zlib

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0, f"header length {n}: data not 8-byte aligned"
    header_text = raw[8:8 + n].decode("utf-8")
    header = json.loads(header_text, object_pairs_hook=lambda kv: dict(kv))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()), metadata
    tensors = {}
    spans = []
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        shape = info["shape"]
        count = int(np.prod(shape)) if shape else 1
        assert end - begin == 4 * count, (name, begin, end, shape)
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(shape)
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        assert begin == pos, f"hole or overlap at {begin} (expected {pos})"
        pos = end
    assert pos == len(data), f"data buffer is {len(data)} bytes, tensors cover {pos}"
    return list(header.keys()), tensors, metadata


def load_params(path):
    with open(path, "rb") as f:
        raw = f.read()
    body, (crc,) = raw[:-4], struct.unpack("<I", raw[-4:])
    assert zlib.crc32(body) == crc, "params CRC mismatch"
    pos = 12  # magic + version
    (count,) = struct.unpack_from("<Q", body, pos)
    pos += 8
    names, tensors = [], {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", body, pos)
        pos += 4
        name = body[pos:pos + name_len].decode("utf-8")
        pos += name_len
        (ndim,) = struct.unpack_from("<I", body, pos)
        pos += 4
        shape = list(struct.unpack_from(f"<{ndim}Q", body, pos))
        pos += 8 * ndim
        count_values = int(np.prod(shape)) if shape else 1
        tensors[name] = np.frombuffer(body, dtype="<f4", count=count_values, offset=pos).reshape(shape)
        pos += 4 * count_values
        names.append(name)
    assert pos == len(body), "params file has trailing bytes"
    return names, tensors


def main():
    st_path, params_path, expected = sys.argv[1], sys.argv[2], sys.argv[3:]
    st_names, st, metadata = load_safetensors(st_path)
    p_names, p = load_params(params_path)
    assert st_names == p_names, f"names differ: {st_names} vs {p_names}"
    for name in expected:
        assert name in st, f"{name} missing from {st_names}"
    for name in p_names:
        assert st[name].shape == p[name].shape, (name, st[name].shape, p[name].shape)
        assert st[name].tobytes() == p[name].tobytes(), f"{name}: values differ"
    print(f"OK {len(st_names)} tensors, {sum(t.size for t in st.values())} values, "
          f"names {','.join(st_names)}, metadata {json.dumps(metadata, sort_keys=True)}")


if __name__ == "__main__":
    main()
