"""Bounded decoders: every compressed byte of an upload is decoded here, and nowhere else.

The zarr chunks, TIFF strips and tiles, HDF5 chunks, the NIfTI header of a ``.nii.gz`` and
the archives (zip entries, the compression around a tar) all decode through these functions.
Each decodes into a budget the caller gives, of output and of work:

- **Output.** At most ``limit`` bytes (with ``exact``, exactly that many); the decoder is
  never asked for more than one byte past the limit, so a 2 KB stream that would inflate to
  gigabytes stops there.
- **Work.** At most ``members`` concatenated streams (gzip members, bz2 or xz streams;
  ``limits.MAX_STREAMS`` for a chunk or a strip), and the compressed input is handed to the decoder
  ``limits.DECODE_STEP`` bytes at a time, so that what is left after each stream (the
  decoders' ``unused_data``) is at most that much: hundreds of thousands of empty members
  cost linear time, not the quadratic time of copying the rest of the buffer after each one.
  xz and lzma decoders get a memory limit (``limits.LZMA_MEMORY``) that bounds the dictionary
  a header may declare. PackBits is decoded by a compiled loop, its input bounded by what its
  output can need.
- **Nothing after the data.** Bytes after the last stream are refused (gzip's zero padding
  excepted where the format allows it), as is a stream that ends early.

Every problem raises ``errors.Unusable`` with the reason alone ("it decodes to more than its
4096 bytes"); the caller prefixes the file and the chunk. Codec libraries' own exceptions
for malformed data are caught here and only here, by their types.
"""

import bz2
import functools
import lzma
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits

ZLIB, GZIP, DEFLATE, BZ2, XZ = "zlib", "gzip", "deflate", "bz2", "xz"
BytesLike = bytes | bytearray | memoryview | np.ndarray  # what the decoders take
Read = Callable[[int], bytes | memoryview]  # ``read(n)``: at most n bytes, empty at the end
STREAM_CODECS = (ZLIB, GZIP, DEFLATE, BZ2, XZ)

# what a malformed stream makes the standard decoders raise
_STREAM_ERRORS = (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError)


def _new_decoder(codec: str, lzma_format: int) -> Any:  # zlib's, bz2's or lzma's decompressor object
    if codec == ZLIB:
        return zlib.decompressobj(15)
    if codec == GZIP:
        return zlib.decompressobj(31)
    if codec == DEFLATE:
        return zlib.decompressobj(-15)
    if codec == BZ2:
        return bz2.BZ2Decompressor()
    if codec == XZ:
        return lzma.LZMADecompressor(format=lzma_format, memlimit=limits.LZMA_MEMORY)
    raise ValueError(f"not a stream codec: {codec}")


def stream(
    codec: str,
    read: Read,
    limit: int,
    members: int = 1,
    padding: bool = False,
    piece: int | None = None,
    lzma_format: int = lzma.FORMAT_AUTO,
) -> Iterator[bytes]:
    """The decoded bytes of the compressed data that ``read(n)`` supplies (at most ``n``
    bytes a call, ``b""`` at its end), in pieces of at most ``piece`` bytes (default: as
    large as the remaining budget). At most ``limit`` bytes in all and ``members``
    concatenated streams; with ``padding``, zero bytes between and after streams are
    skipped (gzip files may be padded so). Raises ``Unusable``."""
    step = limits.DECODE_STEP
    produced = count = 0
    pending: bytes | memoryview = b""
    while True:
        if not pending:
            pending = read(step)
        if padding:
            pending = _skip_zeros(pending, read, step)
        if not len(pending):
            if count == 0:
                raise Unusable("it holds no compressed data")
            return
        count += 1
        if count > members:
            if members == 1:
                raise Unusable("it has data after its compressed stream")
            raise Unusable(f"it holds more than {members} concatenated compressed streams")
        decoder = _new_decoder(codec, lzma_format)
        zlib_like = codec in (ZLIB, GZIP, DEFLATE)
        while True:
            room = limit + 1 - produced
            if piece is not None:
                room = min(room, piece)
            try:
                out = decoder.decompress(pending, room)
            except MemoryError:
                raise Unusable("its compressed stream needs more memory to decode than is available") from None
            except _STREAM_ERRORS as exc:
                raise Unusable(_stream_problem(codec, exc)) from None
            produced += len(out)
            if produced > limit:
                raise Unusable(f"it decodes to more than {limit} bytes, more data than it can hold")
            if out:
                yield out
            if decoder.eof:
                pending = decoder.unused_data  # at most one step of input: never the rest of the buffer
                break
            if zlib_like:
                pending = decoder.unconsumed_tail
                wants_input = not pending and len(out) < room
            else:
                pending = b""
                wants_input = decoder.needs_input
            if wants_input:
                pending = read(step)
                if not len(pending):
                    raise Unusable("its compressed stream is truncated")


def prefix(codec: str, read: Read, count: int) -> bytes:
    """The first ``count`` decoded bytes (fewer if the data ends first) of the compressed data
    that ``read(n)`` supplies: a header read without decoding the rest."""
    out = b""
    for piece in stream(codec, read, 2 * count + 1, members=limits.MAX_STREAMS, padding=codec == GZIP, piece=count):
        out += piece
        if len(out) >= count:
            break
    return out[:count]


def _skip_zeros(pending: bytes | memoryview, read: Read, step: int) -> bytes:
    while len(pending):
        rest = bytes(pending).lstrip(b"\x00")
        if rest:
            return rest
        pending = read(step)
    return b""


def _stream_problem(codec: str, exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, lzma.LZMAError) and "memory" in text.lower():
        return f"its {codec} stream declares a dictionary needing more than {limits.LZMA_MEMORY >> 20} MiB of memory to decode"
    detail = " ".join(text.split())[:120]
    return f"its {codec} stream is invalid ({type(exc).__name__}{': ' + detail if detail else ''})"


def _reader(data: BytesLike) -> Callable[[int], memoryview]:
    """``read(n)`` over a bytes-like object, handing out views (no copies)."""
    view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else np.ascontiguousarray(data).data.cast("B")
    position = 0

    def read(n: int) -> memoryview:
        nonlocal position
        chunk = view[position : position + n]
        position += len(chunk)
        return chunk

    return read


def decode(
    codec: str,
    data: BytesLike,
    limit: int,
    exact: bool = False,
    members: int = 1,
    padding: bool = False,
    lzma_format: int = lzma.FORMAT_AUTO,
) -> bytes:
    """``data`` (one compressed chunk, strip or tile) decoded with ``codec`` into at most
    ``limit`` bytes (exactly ``limit`` with ``exact``); see ``stream``."""
    pieces = list(stream(codec, _reader(data), limit, members, padding, lzma_format=lzma_format))
    out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    if exact and len(out) != limit:
        raise Unusable(f"it decodes to {len(out)} bytes instead of {limit}")
    return out


# --------------------------------------------------------------------------------------------
# Codecs whose header states the decoded size (numcodecs decodes into a buffer of that size)


def _check_stated(stated: int, limit: int, exact: bool, where: str) -> None:
    if stated > limit:
        raise Unusable(f"its {where} header states {stated} decoded bytes, more data than its chunk holds ({limit} bytes)")
    if exact and stated < limit:
        raise Unusable(f"its {where} header states {stated} decoded bytes, less data than its chunk holds ({limit} bytes)")


def as_u1(data: BytesLike) -> np.ndarray:
    """``data`` (bytes-like or an array) as a flat contiguous uint8 array, without a copy where it can."""
    array = np.asarray(data) if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _numcodecs(decode_into: Callable[..., object], data: np.ndarray, out: np.ndarray, name: str) -> np.ndarray:
    try:
        decode_into(data, out=out)
    except MemoryError:
        raise
    except (RuntimeError, ValueError, TypeError) as exc:  # numcodecs' errors for bad data
        if "too small" in str(exc):  # the stream goes on beyond ``out``
            raise Unusable(f"it decodes to more data than its chunk holds ({out.nbytes} bytes)") from None
        raise Unusable(f"its {name} data is invalid ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    return out


def _target(into: np.ndarray | None, stated: int) -> np.ndarray:
    """Where a codec decodes ``stated`` bytes: ``into`` (flat uint8, the caller's array) when it
    holds exactly that many, else a new array."""
    return into if into is not None and into.nbytes == stated else np.empty(stated, dtype=np.uint8)


def blosc(buffer: BytesLike, limit: int, exact: bool, into: np.ndarray | None = None) -> np.ndarray:
    """A blosc frame: its header's decoded and compressed sizes checked first (the frame must
    be the whole chunk: nothing after it). ``into``: see ``_target``."""
    import numcodecs  # type: ignore[import-untyped]

    data = as_u1(buffer)
    if data.nbytes < 16:
        raise Unusable("it is too short for a blosc header")
    nbytes, _, cbytes = struct.unpack("<III", data[4:16].tobytes())
    _check_stated(nbytes, limit, exact, "blosc")
    if cbytes != data.nbytes:
        raise Unusable(f"its blosc header states {cbytes} compressed bytes but the chunk holds {data.nbytes}")
    return _numcodecs(numcodecs.Blosc().decode, data, _target(into, nbytes), "blosc")


def lz4(buffer: BytesLike, limit: int, exact: bool, into: np.ndarray | None = None) -> np.ndarray:
    """numcodecs' LZ4 frame: a 4-byte little-endian decoded size, then one LZ4 block."""
    import numcodecs

    data = as_u1(buffer)
    if data.nbytes < 4:
        raise Unusable("it is too short for an lz4 header")
    stated = struct.unpack("<i", data[:4].tobytes())[0]
    if stated < 0:
        raise Unusable("its lz4 header states a negative size")
    _check_stated(stated, limit, exact, "lz4")
    return _numcodecs(numcodecs.LZ4().decode, data, _target(into, stated), "lz4")


def zstd(buffer: BytesLike, limit: int, exact: bool, into: np.ndarray | None = None) -> np.ndarray:
    """One zstd frame; its stated content size checked first (a streamed frame without one
    must fill the chunk exactly)."""
    import numcodecs

    data = as_u1(buffer)
    stated = _zstd_content_size(data)
    if stated is None:
        if not exact:
            raise Unusable("its zstd frame does not state its decoded size")
        stated = limit
    _check_stated(stated, limit, exact, "zstd")
    return _numcodecs(numcodecs.Zstd().decode, data, _target(into, stated), "zstd")


def _zstd_content_size(data: np.ndarray) -> int | None:
    """The decoded size stated by the first zstd frame's header, None when it states none."""
    if data.nbytes < 6 or data[:4].tobytes() != b"\x28\xb5\x2f\xfd":
        raise Unusable("it does not start with a zstd frame")
    descriptor = int(data[4])
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    if descriptor & 0x08:
        raise Unusable("its zstd frame header is invalid (reserved bit set)")
    position = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0:
        return None
    if data.nbytes < position + width:
        raise Unusable("its zstd frame header is truncated")
    value = int.from_bytes(data[position : position + width].tobytes(), "little")
    return value + 256 if width == 2 else value


# --------------------------------------------------------------------------------------------
# PackBits (TIFF): a compiled loop over the run headers


def packbits(data: bytes, limit: int) -> bytes:
    """PackBits as tifffile's decoder reads it (a header of 128 is a no-op, runs cut short by
    the end of the data are kept), into at most ``limit`` bytes. The input may be at most
    ``limits.PACKBITS_OVERHEAD`` times the output plus 64 bytes: even one-byte literal runs
    need only twice their output, so more is padding that would cost one step per byte."""
    if len(data) > limits.PACKBITS_OVERHEAD * limit + 64:
        raise Unusable(f"its PackBits data ({len(data)} bytes) is longer than {limit} decoded bytes can need")
    from evaluation.metrics import jit

    source = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(limit + 1, dtype=np.uint8)
    written = jit.run(_packbits_kernel(), _packbits_python, source, out)
    if written > limit:
        raise Unusable(f"it decodes to more than {limit} bytes, more data than it can hold")
    return out[:written].tobytes()


def _packbits_python(source: np.ndarray, out: np.ndarray) -> int:
    """The loop of ``_packbits_kernel`` in Python (numba compiles the same function)."""
    i, written = 0, 0
    n: int = source.shape[0]
    capacity: int = out.shape[0]
    while i < n:
        header = int(source[i])
        i += 1
        if header < 128:
            count = min(header + 1, n - i)
            if written + count > capacity:
                return capacity + 1
            out[written : written + count] = source[i : i + count]
            written += count
            i += header + 1
        elif header > 128:
            if i >= n:
                break
            count = 257 - header
            if written + count > capacity:
                return capacity + 1
            out[written : written + count] = source[i]
            written += count
            i += 1
    return written


@functools.cache
def _packbits_kernel() -> Callable[[np.ndarray, np.ndarray], int]:
    """``_packbits_python`` compiled (on first use: PackBits is rare, numba's import is not free)."""
    from evaluation.metrics.jit import numba

    return numba.njit(cache=True, nogil=True)(_packbits_python)
