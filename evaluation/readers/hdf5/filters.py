"""HDF5's built-in filters: which are accepted, and the bounded decoders of those decoded here
(deflate through ``readers.codecs``, shuffle, fletcher32)."""

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs

DEFLATE, SHUFFLE, FLETCHER32, LZF = 1, 2, 3, 32000
LZF_MAX_RATIO = 88  # an LZF back-reference: 3 bytes in, at most 264 bytes out
DECODED_HERE = {DEFLATE, SHUFFLE, FLETCHER32}
FILTER_NAMES = {
    DEFLATE: "gzip",
    SHUFFLE: "shuffle",
    FLETCHER32: "fletcher32",
    LZF: "lzf",
    4: "szip",
    5: "nbit",
    6: "scaleoffset",
    32001: "blosc",
    32004: "lz4",
    32008: "bitshuffle",
    32015: "zstd",
}


def inflate(data: bytes, expected: int, display: str) -> bytes:
    """zlib data that must decode to exactly ``expected`` bytes (one stream, nothing after
    it); never produces more than ``expected + 1`` bytes, however much it would expand."""
    try:
        return codecs.decode(codecs.ZLIB, data, expected, exact=True)
    except Unusable as exc:
        raise Unusable(f"{display}: a gzip-compressed chunk cannot be decoded: {exc}; the file is corrupt") from None


def unshuffle(data: bytes, size: int) -> bytes:
    """HDF5's shuffle filter undone: byte planes back to elements; a remainder of fewer than
    ``size`` bytes stays at the end, as HDF5 leaves it."""
    count = len(data) // size if size > 0 else 0
    if size <= 1 or count <= 1:
        return data
    body = np.frombuffer(data, dtype=np.uint8, count=count * size).reshape(size, count).T.tobytes()
    return body + data[count * size :]


def fletcher_sums(data: bytes) -> tuple[int, int]:
    """HDF5's Fletcher-32 of ``data``: 16-bit big-endian words (an odd last byte is the high
    byte of a word), both sums in ones'-complement form (0 only when every word is 0)."""
    words = np.frombuffer(data, dtype=">u2", count=len(data) // 2).astype(np.uint64)
    if len(data) % 2:
        words = np.append(words, np.uint64(data[-1] << 8))
    n = len(words)
    total1 = total2 = 0
    block = 1 << 20
    for start in range(0, n, block):
        part = words[start : start + block]
        weights = (n - np.arange(start, start + len(part), dtype=np.uint64)) % np.uint64(65535)
        total1 += int(part.sum())
        total2 += int((part * weights).sum())
    nonzero = bool(n) and total1 > 0

    def form(total: int) -> int:
        return ((total - 1) % 65535) + 1 if nonzero else 0

    return form(total1), form(total2)


def check_fletcher32(data: bytes, display: str) -> bytes:
    if len(data) < 4:
        raise Unusable(f"{display}: a chunk is too short for its checksum; the file is corrupt")
    body, stored = data[:-4], int.from_bytes(data[-4:], "little")
    sum1, sum2 = fletcher_sums(body)
    value = (sum2 << 16) | sum1
    b = value.to_bytes(4, "little")
    reversed_value = (b[1] << 24) | (b[0] << 16) | (b[3] << 8) | b[2]  # HDF5 < 1.6.3 wrote it so
    if stored not in (value, reversed_value):
        raise Unusable(f"{display}: a chunk fails its fletcher32 checksum; the file is corrupt")
    return body
