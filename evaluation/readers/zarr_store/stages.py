"""The stages a chunk's codecs become, by the kind zarr format 3 gives every codec
(zarr-specs, v3.0 "Codecs"): array -> array (``Transpose``), array -> bytes (``Bytes``, or
``sharding.Sharding``, which reads only the parts of a shard a region needs) and
bytes -> bytes (``Compressor``, ``Checksum``, ``Shuffle``; format 2's numcodecs filters,
``Filter``, run there too: zarr 2 hands numcodecs a chunk's buffer).

A bytes -> bytes stage knows the size it encodes to (``None``: unknown, a compressor) and
decodes to a size it is told, exactly (or at most, below a stacked compressor), raising
``Corrupt`` for anything else: ``pipeline.Pipeline`` chains them. Compressors decode through
``readers.codecs`` (bounded in output and work); checksums and numcodecs' filters work on data
whose size is already known.
"""

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers.codecs import as_u1
from evaluation.readers.zarr_store.base import Corrupt, Invalid

ARRAY_ARRAY, ARRAY_BYTES, BYTES_BYTES = "array -> array", "array -> bytes", "bytes -> bytes"

Data = bytes | np.ndarray  # a chunk's bytes between stages (a decoder's buffer or an array of uint8)
# a compressor's bounded decoder: (data, size, exact, settings) -> at most ``size`` bytes
Decoder = Callable[[Data, int, bool, dict[str, Any]], Data]
# a compressor's decoder from the size its frame states: (data, size, exact, into) -> the bytes,
# in ``into`` (flat uint8) when given and of that size
SizedDecoder = Callable[[Data, int, bool, "np.ndarray | None"], np.ndarray]

# what numcodecs' filters and checksums raise for data they cannot decode
FILTER_ERRORS = (ValueError, TypeError, RuntimeError)


def reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


class Stage:
    name = ""

    def encoded_size(self, size: int) -> int | None:
        return size

    def decode(self, data: Data, size: int, exact: bool) -> Data:
        raise NotImplementedError


class ArrayBytes(Stage):
    """How a chunk's array becomes bytes. ``partial``: the stage reads only parts of a stored
    chunk (sharding), so chunks are never decoded whole through the pipeline."""

    partial = False


class Bytes(ArrayBytes):
    """The array's bytes in C order (format 2: the ``.zarray``'s ``order``), in ``endian``
    byte order (format 2: the data type's)."""

    name = "bytes"

    def __init__(self, endian: str | None = None):
        self.endian = endian


class Transpose(Stage):
    """Format 3's ``transpose``: the chunk is stored as ``decoded.transpose(order)``."""

    name = "transpose"

    def __init__(self, order: tuple[int, ...]):
        self.order = order


def crc32c(payload: np.ndarray) -> int:
    import google_crc32c

    value: int = google_crc32c.value(payload.tobytes() if not payload.flags.c_contiguous else payload)
    return value


class Checksum(Stage):
    """Four bytes of checksum (little-endian) at the ``location`` of the payload."""

    def __init__(self, name: str, location: str, value: Callable[[np.ndarray], int]):
        self.name, self.location, self.value = name, location, value

    def encoded_size(self, size: int) -> int:
        return size + 4

    def decode(self, data: Data, size: int, exact: bool) -> np.ndarray:
        array = as_u1(data)
        if array.nbytes < 4:
            raise Corrupt(f"it is too short to hold its {self.name} checksum")
        return self.verify(array)

    def verify(self, data: np.ndarray) -> np.ndarray:
        payload, stored = (data[4:], data[:4]) if self.location == "start" else (data[:-4], data[-4:])
        if struct.unpack("<I", stored.tobytes())[0] != self.value(payload) & 0xFFFFFFFF:
            raise Corrupt(f"its {self.name} checksum does not match")
        return payload


class Fletcher32(Checksum):
    """numcodecs' Fletcher-32 (its own layout), verified by numcodecs."""

    def __init__(self) -> None:
        super().__init__("fletcher32", "end", lambda payload: 0)

    def verify(self, data: np.ndarray) -> np.ndarray:
        import numcodecs  # type: ignore[import-untyped]

        try:
            return as_u1(numcodecs.Fletcher32().decode(data))
        except FILTER_ERRORS as exc:  # mismatch: RuntimeError
            raise Corrupt(f"its fletcher32 checksum does not match ({reason(exc)})") from None


class Compressor(Stage):
    """A compressor, decoded by its row's bounded decoder (``registry``) into the chunk's
    size: blosc, lz4 and zstd from the size their header states, the streams (zlib, gzip, bz2,
    lzma) with an output limit, a bound on concatenated streams and nothing after them."""

    def __init__(self, name: str, settings: dict[str, Any], decoder: Decoder):
        self.name, self.settings, self.decoder = name, settings, decoder

    def encoded_size(self, size: int) -> int | None:
        return None

    def decode(self, data: Data, size: int, exact: bool) -> Data:
        try:
            return self.decoder(data, size, exact, self.settings)
        except Unusable as exc:
            raise Corrupt(str(exc)) from None


class SizedCompressor(Compressor):
    """A compressor whose frame states its decoded size (blosc, lz4, zstd): it may decode
    straight into the caller's buffer (``Pipeline.decode_into``), and ``writer`` makes the
    numcodecs codec that wrote it, from its settings, for the bytes of a chunk of zeros."""

    def __init__(self, name: str, settings: dict[str, Any], decoder: SizedDecoder, writer: Callable[[dict[str, Any]], Any]):
        super().__init__(name, settings, lambda data, size, exact, config: decoder(data, size, exact, None))
        self.sized_decoder, self.writer = decoder, writer

    def decode(self, data: Data, size: int, exact: bool, into: np.ndarray | None = None) -> np.ndarray:
        """``into``: flat uint8 of exactly ``size`` bytes, or None for a fresh array."""
        try:
            return self.sized_decoder(data, size, exact, into)
        except Unusable as exc:
            raise Corrupt(str(exc)) from None

    def zeros_frame(self, shape: tuple[int, ...], dtype: np.dtype) -> bytes | None:
        """The bytes the codec, with these settings, writes for a chunk of zeros; None when
        numcodecs refuses the settings (nothing is recognised then; any other error is ours and
        raised)."""
        try:
            return bytes(self.writer(self.settings).encode(np.zeros(shape, dtype)))
        except FILTER_ERRORS:  # numcodecs' refusal of settings it does not know
            return None


class Shuffle(Stage):
    name = "shuffle"

    def __init__(self, elementsize: int):
        self.elementsize = elementsize

    def decode(self, data: Data, size: int, exact: bool) -> np.ndarray:
        import numcodecs

        try:
            return as_u1(numcodecs.Shuffle(elementsize=self.elementsize).decode(as_u1(data)))
        except FILTER_ERRORS as exc:
            raise Corrupt(f"its shuffle data is invalid ({reason(exc)})") from None


class Filter(Stage):
    """A numcodecs array filter of format 2 (delta, quantize, ...): sizes from its dtypes."""

    def __init__(self, name: str, codec: Any, encoded: np.dtype | None, decoded: np.dtype | None):
        self.name, self.codec, self.encoded, self.decoded = name, codec, encoded, decoded

    def encoded_size(self, size: int) -> int:
        if self.name == "packbits":
            return 1 + -(-size // 8)
        if self.decoded is None or self.encoded is None:  # set together (``registry``)
            return size
        if size % self.decoded.itemsize:
            raise Invalid(f"the filter {self.name} works on {self.decoded} values, which do not divide the chunk's bytes")
        return size // self.decoded.itemsize * self.encoded.itemsize

    def decode(self, data: Data, size: int, exact: bool) -> np.ndarray:
        try:
            return as_u1(self.codec.decode(as_u1(data)))
        except FILTER_ERRORS as exc:
            raise Corrupt(f"its {self.name} data is invalid ({reason(exc)})") from None
