#!/usr/bin/python3
"""A checkpoint with checksums, as the first build that recorded them writes it, built by hand
from the format (autograd/io/safetensors.h): tests/test_serialization_format.cpp loads it, checks
its values, and checks that today's save_safetensors writes the same bytes, so a change of the
format (the checksum's text, the header's order or padding) is seen the day it is made, and a file
written before it still loads. Run from the repository root with Debian's python3 (no torch):

    /usr/bin/python3 tests/reference/make_checksummed_v1.py

which writes tests/reference/checksummed_v1.safetensors (deterministic: the same bytes each run):
  w (2, 3)  F32  0.5, -1.25, 2, 3, -0.125 and the first k / 8 (k = 1, 2, ...) whose checksum text
                 starts with a 0: "0..." must stay eight digits, as the format defines
  ids (3,)  I64  7, -1, 2^40 + 3
  flags (5,) U8  0, 1, 2, 254, 255
  empty (2, 0) F32  no values: its checksum is that of no bytes, "00000000"
  metadata: {"step": "7", "note": "checksummed_v1"}, and "crc32c", each tensor's CRC-32C (the
            Castagnoli polynomial) as eight lowercase hex digits, in the tensors' order.
"""
import json
import os
import struct


def crc32c(data, crc=0):
    """CRC-32C of `data` (bytes), bit by bit: the reflected polynomial 0x82F63B78."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def crc_text(data):
    return "%08x" % crc32c(data)


assert crc32c(b"123456789") == 0xE3069283   # the standard's check value

# w: the first k whose checksum text starts with a zero
k = 1
while True:
    w = struct.pack("<6f", 0.5, -1.25, 2.0, 3.0, -0.125, k / 8)
    if crc_text(w).startswith("0"):
        break
    k += 1
tensors = [("w", "F32", [2, 3], w),
           ("ids", "I64", [3], struct.pack("<3q", 7, -1, 2**40 + 3)),
           ("flags", "U8", [5], bytes([0, 1, 2, 254, 255])),
           ("empty", "F32", [2, 0], b"")]

# The header as save_safetensors writes it: compact JSON, "__metadata__" first with its keys in
# sorted order (a std::map), then the tensors in the order of their data; spaces to a multiple of 8.
checksums = json.dumps({name: crc_text(data) for name, _, _, data in tensors}, separators=(",", ":"))
metadata = {"crc32c": checksums, "note": "checksummed_v1", "step": "7"}
header = {"__metadata__": dict(sorted(metadata.items()))}
offset = 0
for name, dtype, shape, data in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
    offset += len(data)
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)

path = os.path.join(os.path.dirname(__file__), "checksummed_v1.safetensors")
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(data for _, _, _, data in tensors))
print("wrote %s: k = %d, checksums %s" % (path, k, checksums))
