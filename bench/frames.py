"""Reading the frame files the benchmarks share: updates, each prefixed by its length as
a little-endian uint32 (bench_test.go's frames)."""

import struct


def frames(path):
    """Return the updates of the frame file at path, in order."""
    with open(path, "rb") as f:
        buf = f.read()
    out, i = [], 0
    while i + 4 <= len(buf):
        (n,) = struct.unpack_from("<I", buf, i)
        out.append(buf[i + 4 : i + 4 + n])
        i += 4 + n
    return out
