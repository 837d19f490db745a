"""Zarr hierarchies (format 2 and 3) read from a folder by our own bounded reader.

The hierarchy is walked on the file system rather than through a group API because uploads
are often incomplete zarrs (a crop folder without ``.zgroup``): the CellMap reference writes
the missing metadata into the submission, we treat a plain folder as an implicit group
instead, which reads the same and leaves ``/input`` untouched.

Arrays are read here, not by zarr-python: a participant's upload is hostile, and a general
library decodes whatever the metadata asks for. This reader

- parses ``.zarray`` / ``zarr.json`` with ``untrusted.load_json`` (size and depth bounds) and
  validates all of it before a byte of data is decoded: numeric and boolean data types only,
  codecs from a fixed list with checked settings, chunk grids of bounded size and padding;
  ``shape`` and ``dtype`` come from the metadata alone, so callers can refuse an array that
  is too large before reading it;
- decodes every chunk to exactly the size its metadata implies: blosc, zstd and lz4 headers
  must state that size, zlib/gzip/bz2/lzma streams are inflated with an output limit, and a
  chunk that decodes to more or less is refused (compression bombs stop at the limit);
- does work in proportion to the data present: the chunk files are listed once (lazily, with
  ``os.scandir``) and a region read touches only stored chunks; the rest is the fill value;
- opens chunk files only through ``untrusted.open_regular`` / ``read_bytes`` (no links
  followed, no FIFO blocks), and turns every codec failure into ``SubmissionError`` naming
  the array (``PhaseError`` for the organizer's ``trusted`` ground truth);
- returns data in native byte order, whatever order the array was stored in.

zarr-python remains a dependency only to *write* zarrs (tests, benches, tomography labels).
"""

import bz2
import lzma
import math
import os
import re
import stat
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluation.errors import GraderError, PhaseError, SubmissionError
from evaluation.readers import regions, untrusted

ARRAY, GROUP = "array", "group"

# Limits. A label volume of the challenges is at most a few GB; chunks are MBs.
MAX_DIMENSIONS = 32
MAX_EXTENT = 1 << 40  # voxels along one axis
MAX_VOXELS = 1 << 50  # voxels of a whole array (shape only: callers check what they load)
MAX_CHUNK_BYTES = 512 << 20  # one decoded chunk (an inner chunk of a shard)
MAX_GRID_CHUNKS = 1 << 32  # chunk (or shard) coordinates of one array
MAX_SHARD_CHUNKS = 1 << 20  # inner chunks of one shard (a 16 MiB index)
PADDING_SLACK = 64 << 20  # the chunk grid may cover at most 2^ndim x the array's bytes + this
MAX_STORED_ENTRIES = untrusted.MAX_ENTRIES  # files and folders listed below one array
MAX_CODECS = 16  # codecs (filters) in one pipeline
MAX_IN_FLIGHT_BYTES = 1 << 30  # decoded + encoded bytes of the chunks decoded at once
LZMA_MEMORY = 256 << 20  # lzma decoder memory (dictionary) limit
_THREADS = max(1, min(4, os.cpu_count() or 1))

_ACCEPTED = "store label arrays with blosc, zstd or gzip"
_MISSING = 2**64 - 1  # a shard index entry for an absent inner chunk


class _Invalid(Exception):
    """Metadata refused; ``message`` follows the array's name."""

    def __init__(self, message: str, readable: bool = True):
        super().__init__(message if not readable else f"not a readable zarr array: {message}")


class _Corrupt(Exception):
    """A chunk refused while decoding; ``str`` says why."""


def _error(trusted: bool):
    return PhaseError if trusted else SubmissionError


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# The hierarchy


def _lstat_mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except (OSError, ValueError):
        return None


def node_kind(path: Path) -> str | None:
    """'array', 'group' (explicit or implicit) or None when ``path`` is not a folder (a link
    to a folder is not one). A ``zarr.json`` that cannot be read counts as an array, so that
    opening it reports the problem rather than the node silently not being there."""
    mode = _lstat_mode(Path(path))
    if mode is None or not stat.S_ISDIR(mode):
        return None
    path = Path(path)
    if _lstat_mode(path / ".zarray") is not None:
        return ARRAY
    if _lstat_mode(path / "zarr.json") is not None:
        try:
            metadata = untrusted.load_json(path / "zarr.json", "zarr.json")
        except GraderError:
            return ARRAY
        return GROUP if isinstance(metadata, dict) and metadata.get("node_type") == "group" else ARRAY
    return GROUP


def children(path: Path) -> dict[str, str]:
    """Name -> kind of the nodes directly inside the group folder ``path``."""
    found = {}
    path = Path(path)
    mode = _lstat_mode(path)
    if mode is None or not stat.S_ISDIR(mode):
        return found
    try:
        with os.scandir(path) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith(".") and not e.is_symlink())
    except OSError:
        return found
    for name in names:
        kind = node_kind(path / name)
        if kind is not None:
            found[name] = kind
    return found


def array_names(path: Path) -> list[str]:
    return [name for name, kind in children(path).items() if kind == ARRAY]


# --------------------------------------------------------------------------------------------
# Metadata values

_V2_DTYPE = re.compile(r"([<>|])([biuf])([1248])")
_V3_DTYPES = {
    "bool": "b1",
    "int8": "i1",
    "int16": "i2",
    "int32": "i4",
    "int64": "i8",
    "uint8": "u1",
    "uint16": "u2",
    "uint32": "u4",
    "uint64": "u8",
    "float16": "f2",
    "float32": "f4",
    "float64": "f8",
}
_VALID_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}
_CANONICAL_INT = re.compile(r"0|[1-9][0-9]{0,18}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _v2_dtype(value, what: str = "dtype") -> np.dtype:
    """A numeric or boolean numpy dtype from a zarr v2 type string such as '<u4'."""
    if isinstance(value, list):
        raise _Invalid(f"'{what}' is a structured data type; label arrays must be integer, boolean or float")
    if not isinstance(value, str):
        raise _Invalid(f"'{what}' must be a data type string such as '<u4'")
    match = _V2_DTYPE.fullmatch(value)
    if match is None or int(match.group(3)) not in _VALID_SIZES[match.group(2)]:
        raise _Invalid(
            f"has data type {value[:40]!r}; label arrays must be integer, boolean or float "
            "(e.g. '|u1', '<u4', '<i8', '<f4', '|b1')",
            readable=False,
        )
    order, kind, size = match.groups()
    if order == "|" and size != "1":
        raise _Invalid(f"'{what}' {value!r} has no byte order; write '<{kind}{size}' or '>{kind}{size}'")
    return np.dtype(("|" if size == "1" else order) + kind + size)


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype


def _shape(value, what: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(_is_int(v) and minimum <= v <= MAX_EXTENT for v in value):
        lowest = "non-negative" if minimum == 0 else "positive"
        raise _Invalid(f"'{what}' must be a list of {lowest} integers (at most {MAX_EXTENT} each)")
    if len(value) > MAX_DIMENSIONS:
        raise _Invalid(f"'{what}' has {len(value)} dimensions; at most {MAX_DIMENSIONS} are accepted")
    return tuple(value)


_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _fill_value(value, dtype: np.dtype, version: int):
    """The fill value as a numpy scalar of the native dtype. v2 ``null`` reads as 0."""
    native = _native(dtype)
    if value is None:
        if version == 2:
            return native.type(0)
        raise _Invalid("'fill_value' must not be null")
    if dtype.kind == "b":
        if isinstance(value, bool) or (_is_int(value) and value in (0, 1)):
            return native.type(bool(value))
        raise _Invalid("'fill_value' of a boolean array must be true or false")
    if dtype.kind in "iu":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        info = np.iinfo(dtype)
        if not _is_int(value) or not info.min <= value <= info.max:
            raise _Invalid(f"'fill_value' must be an integer between {info.min} and {info.max}")
        return native.type(value)
    # floats
    if isinstance(value, str):
        if value in _SPECIAL_FLOATS:
            return native.type(_SPECIAL_FLOATS[value])
        if version == 3 and re.fullmatch(r"0x[0-9a-fA-F]+", value) and len(value) == 2 + 2 * dtype.itemsize:
            return np.frombuffer(bytes.fromhex(value[2:]), dtype=dtype.newbyteorder(">"))[0].astype(native)
        raise _Invalid('\'fill_value\' must be a number, "NaN", "Infinity" or "-Infinity"')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid("'fill_value' of a float array must be a number")
    converted = float(value) if _is_int(value) and abs(value) < 2**1023 else value
    if not isinstance(converted, float) or (math.isfinite(converted) and abs(converted) > float(np.finfo(dtype).max)):
        raise _Invalid(f"'fill_value' {value} does not fit the data type {dtype}")
    return native.type(converted)


# --------------------------------------------------------------------------------------------
# Codecs. Each byte stage knows the size it encodes to (``None``: unknown, a compressor) and
# decodes to a size it is told, exactly (or at most, below a stacked compressor).


def _bound(size: int) -> int:
    """At most how many bytes a compressor may make of ``size`` bytes (worst cases are a few
    bytes per 16-128 KiB block plus headers)."""
    return size + size // 8 + 65536


def _as_u1(data) -> np.ndarray:
    array = np.asarray(data) if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class _Stage:
    name = ""

    def encoded_size(self, size: int) -> int | None:
        return size

    def decode(self, data, size: int, exact: bool):
        raise NotImplementedError


class _Checksum(_Stage):
    def __init__(self, name: str, location: str):
        self.name, self.location = name, location

    def encoded_size(self, size):
        return size + 4

    def decode(self, data, size, exact):
        data = _as_u1(data)
        if data.nbytes < 4:
            raise _Corrupt(f"it is too short to hold its {self.name} checksum")
        payload, stored = (data[4:], data[:4]) if self.location == "start" else (data[:-4], data[-4:])
        if self.name == "fletcher32":
            import numcodecs

            try:
                return _as_u1(numcodecs.Fletcher32().decode(data))
            except Exception as exc:  # mismatch: RuntimeError
                raise _Corrupt(f"its fletcher32 checksum does not match ({_reason(exc)})") from None
        if self.name == "crc32":
            value = zlib.crc32(payload)
        elif self.name == "adler32":
            value = zlib.adler32(payload)
        else:
            import google_crc32c

            value = google_crc32c.value(payload.tobytes() if not payload.flags.c_contiguous else payload)
        if struct.unpack("<I", stored.tobytes())[0] != value & 0xFFFFFFFF:
            raise _Corrupt(f"its {self.name} checksum does not match")
        return payload


class _Compressor(_Stage):
    def __init__(self, name: str, settings: dict):
        self.name, self.settings = name, settings

    def encoded_size(self, size):
        return None

    def decode(self, data, size, exact):
        return getattr(self, "_" + self.name)(data, size, exact)

    # -- headers that state the decoded size

    @staticmethod
    def _check_size(stated: int, size: int, exact: bool, where: str) -> None:
        if stated > size:
            raise _Corrupt(f"its {where} header states {stated} decoded bytes, more data than its chunk holds ({size} bytes)")
        if exact and stated < size:
            raise _Corrupt(f"its {where} header states {stated} decoded bytes, less data than its chunk holds ({size} bytes)")

    def _blosc(self, data, size, exact):
        import numcodecs

        data = _as_u1(data)
        if data.nbytes < 16:
            raise _Corrupt("it is too short for a blosc header")
        nbytes, _, cbytes = struct.unpack("<III", data[4:16].tobytes())
        self._check_size(nbytes, size, exact, "blosc")
        if cbytes != data.nbytes:
            raise _Corrupt(f"its blosc header states {cbytes} compressed bytes but the chunk holds {data.nbytes}")
        out = np.empty(nbytes, dtype=np.uint8)
        numcodecs.Blosc().decode(data, out=out)
        return out

    def _lz4(self, data, size, exact):
        import numcodecs

        data = _as_u1(data)
        if data.nbytes < 4:
            raise _Corrupt("it is too short for an lz4 header")
        stated = struct.unpack("<i", data[:4].tobytes())[0]
        if stated < 0:
            raise _Corrupt("its lz4 header states a negative size")
        self._check_size(stated, size, exact, "lz4")
        out = np.empty(stated, dtype=np.uint8)
        numcodecs.LZ4().decode(data, out=out)
        return out

    def _zstd(self, data, size, exact):
        import numcodecs

        data = _as_u1(data)
        stated = _zstd_content_size(data)
        if stated is None:  # a streamed frame: numcodecs requires it to fill ``out`` exactly
            if not exact:
                raise _Corrupt("its zstd frame does not state its decoded size")
            stated = size
        self._check_size(stated, size, exact, "zstd")
        out = np.empty(stated, dtype=np.uint8)
        numcodecs.Zstd().decode(data, out=out)
        return out

    # -- streams inflated with an output limit

    def _zlib(self, data, size, exact):
        return _inflate(lambda: zlib.decompressobj(), data, size, members=False)

    def _gzip(self, data, size, exact):
        return _inflate(lambda: zlib.decompressobj(31), data, size, members=True, padding=True)

    def _bz2(self, data, size, exact):
        return _inflate(bz2.BZ2Decompressor, data, size, members=True)

    def _lzma(self, data, size, exact):
        fmt = self.settings.get("format", lzma.FORMAT_XZ)
        return _inflate(lambda: lzma.LZMADecompressor(format=fmt, memlimit=LZMA_MEMORY), data, size, members=True)


def _zstd_content_size(data: np.ndarray) -> int | None:
    """The decoded size stated by the first zstd frame's header, None when it states none."""
    if data.nbytes < 6 or data[:4].tobytes() != b"\x28\xb5\x2f\xfd":
        raise _Corrupt("it does not start with a zstd frame")
    descriptor = int(data[4])
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    if descriptor & 0x08:
        raise _Corrupt("its zstd frame header is invalid (reserved bit set)")
    position = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0:
        return None
    if data.nbytes < position + width:
        raise _Corrupt("its zstd frame header is truncated")
    value = int.from_bytes(data[position : position + width].tobytes(), "little")
    return value + 256 if width == 2 else value


def _inflate(new, data, size: int, members: bool, padding: bool = False) -> bytes:
    """Decompress a zlib/gzip/bz2/lzma stream (and, with ``members``, streams concatenated
    after it) to at most ``size`` bytes; more raises ``_Corrupt``."""
    data = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    parts, total = [], 0
    while True:
        decompressor = new()
        try:
            piece = decompressor.decompress(data, size - total + 1)
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
            raise _Corrupt(f"its compressed stream is invalid ({_reason(exc)})") from None
        total += len(piece)
        parts.append(piece)
        if total > size:
            raise _Corrupt(f"it decodes to more data than its chunk holds ({size} bytes)")
        if not decompressor.eof:
            raise _Corrupt("its compressed stream is truncated")
        data = decompressor.unused_data
        if padding:
            data = data.lstrip(b"\x00")
        if not members or not data:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Shuffle(_Stage):
    name = "shuffle"

    def __init__(self, elementsize: int):
        self.elementsize = elementsize

    def decode(self, data, size, exact):
        import numcodecs

        return _as_u1(numcodecs.Shuffle(elementsize=self.elementsize).decode(_as_u1(data)))


class _Filter(_Stage):
    """A numcodecs array filter of format 2 (delta, quantize, ...): sizes from its dtypes."""

    def __init__(self, name: str, codec, encoded: np.dtype | None, decoded: np.dtype | None):
        self.name, self.codec, self.encoded, self.decoded = name, codec, encoded, decoded

    def encoded_size(self, size):
        if self.name == "packbits":
            return 1 + -(-size // 8)
        if self.decoded is None:
            return size
        if size % self.decoded.itemsize:
            raise _Invalid(f"the filter {self.name} works on {self.decoded} values, which do not divide the chunk's bytes")
        return size // self.decoded.itemsize * self.encoded.itemsize

    def decode(self, data, size, exact):
        return _as_u1(self.codec.decode(_as_u1(data)))


@dataclass
class _Pipeline:
    """How one chunk (or inner chunk) is stored: its byte stages in encoding order, and how
    the decoded bytes lay out as an array."""

    shape: tuple[int, ...]
    dtype: np.dtype  # as stored (byte order of the bytes)
    order: str = "C"
    permutation: tuple[int, ...] | None = None  # v3 transpose: stored = decoded.transpose(p)
    stages: list = field(default_factory=list)
    sizes: list = field(default_factory=list)  # (size, exact) entering each stage, then stored

    def plan(self) -> None:
        size, exact = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize, True
        self.sizes = [(size, True)]
        for stage in self.stages:
            encoded = stage.encoded_size(size)
            if encoded is None:
                size, exact = _bound(size), False
            else:
                size = encoded
            if size > 2 * MAX_CHUNK_BYTES:
                raise _Invalid(f"its codec {stage.name} makes chunks larger than {MAX_CHUNK_BYTES >> 20} MiB")
            self.sizes.append((size, exact))

    @property
    def nbytes(self) -> int:
        return self.sizes[0][0]

    @property
    def stored_limit(self) -> int:
        return self.sizes[-1][0]

    def decode(self, data) -> np.ndarray:
        """The chunk as an array of ``shape`` (stored dtype), or ``_Corrupt``."""
        for index in range(len(self.stages) - 1, -1, -1):
            size, exact = self.sizes[index]
            stage = self.stages[index]
            try:
                data = stage.decode(data, size, exact)
            except _Corrupt:
                raise
            except Exception as exc:  # codec libraries raise many types for bad data
                if "too small" in str(exc):  # numcodecs: the stream goes on beyond ``out``
                    raise _Corrupt(f"it decodes to more data than its chunk holds ({size} bytes)") from None
                raise _Corrupt(f"its {stage.name} data is invalid ({_reason(exc)})") from None
            got = data.nbytes if isinstance(data, np.ndarray) else len(data)
            if got > size:
                raise _Corrupt(f"it decodes to more data than its chunk holds ({size} bytes)")
            if exact and got < size:
                raise _Corrupt(f"it decodes to less data ({got} bytes) than its chunk holds ({size} bytes)")
        got = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if got != self.nbytes:
            more = "more" if got > self.nbytes else "less"
            raise _Corrupt(f"it holds {more} data ({got} bytes) than its chunk ({self.nbytes} bytes)")
        dtype = np.dtype(np.uint8) if self.dtype.kind == "b" else self.dtype
        flat = np.frombuffer(data, dtype=dtype) if not isinstance(data, np.ndarray) else _as_u1(data).view(dtype)
        if self.permutation is None:
            return flat.reshape(self.shape, order=self.order)
        stored = flat.reshape(tuple(self.shape[p] for p in self.permutation))
        return stored.transpose(np.argsort(self.permutation))


# ---- codec configurations


def _settings(config, name: str, allowed: dict) -> dict:
    """``config`` checked against ``allowed`` (setting -> predicate, description)."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise _Invalid(f"the settings of the codec {name} must be a JSON object")
    for key, value in config.items():
        if key not in allowed:
            raise _Invalid(f"the codec {name} has an unknown setting {str(key)[:40]!r}")
        check, description = allowed[key]
        if not check(value):
            raise _Invalid(f"the setting '{key}' of the codec {name} must be {description}")
    return config


def _int_in(low, high):
    return lambda v: _is_int(v) and low <= v <= high, f"an integer from {low} to {high}"


_ANY_INT = (lambda v: _is_int(v) and abs(v) < 2**31, "an integer")
_BOOL = (lambda v: isinstance(v, bool), "true or false")
_NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number")


def _is_dtype_string(value) -> bool:
    match = _V2_DTYPE.fullmatch(value) if isinstance(value, str) else None
    return match is not None and int(match.group(3)) in _VALID_SIZES[match.group(2)]


_DTYPE = (_is_dtype_string, "a numeric data type string such as '<i4'")
_LOCATION = (lambda v: v in ("start", "end"), "'start' or 'end'")
_BLOSC_NAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")

_COMPRESSORS = {
    "blosc": {
        "cname": (lambda v: v in _BLOSC_NAMES, "a blosc compressor name"),
        "clevel": _int_in(0, 9),
        "shuffle": _int_in(-1, 2),
        "blocksize": _int_in(0, 2**31 - 1),
        "typesize": _int_in(0, 255),
    },
    "zstd": {"level": _int_in(-131072, 22), "checksum": _BOOL},
    "lz4": {"acceleration": _ANY_INT},
    "zlib": {"level": _int_in(-1, 9)},
    "gzip": {"level": _int_in(-1, 9)},
    "bz2": {"level": _int_in(1, 9)},
    "lzma": {
        "format": _int_in(0, 2),
        "check": _int_in(-1, 15),
        "preset": (lambda v: v is None or _is_int(v) and 0 <= v <= 2**32, "an integer or null"),
        "filters": (lambda v: v is None, "null (raw lzma streams are not accepted)"),
    },
}
_CHECKSUMS = {"crc32": "start", "adler32": "start", "crc32c": "end", "fletcher32": "end"}
_FILTERS = {
    "delta": {"dtype": _DTYPE, "astype": _DTYPE},
    "shuffle": {"elementsize": _int_in(1, 1 << 16)},
    "bitround": {"keepbits": _int_in(0, 64)},
    "quantize": {"digits": _int_in(-64, 64), "dtype": _DTYPE, "astype": _DTYPE},
    "fixedscaleoffset": {"offset": _NUMBER, "scale": _NUMBER, "dtype": _DTYPE, "astype": _DTYPE},
    "packbits": {},
    "astype": {"encode_dtype": _DTYPE, "decode_dtype": _DTYPE},
}
_REQUIRED = {
    "delta": ("dtype",),
    "quantize": ("digits", "dtype"),
    "fixedscaleoffset": ("offset", "scale", "dtype"),
    "astype": ("encode_dtype", "decode_dtype"),
    "bitround": ("keepbits",),
}


def _unaccepted(names) -> _Invalid:
    names = sorted({str(n)[:40] for n in names})
    which = "codec " + names[0] if len(names) == 1 else "codecs " + ", ".join(names)
    verb = "is" if len(names) == 1 else "are"
    return _Invalid(f"uses the {which}, which {verb} not accepted; {_ACCEPTED}", readable=False)


def _byte_stage(name: str, config, filters_allowed: bool) -> _Stage:
    """A format 2 compressor or filter (or a v3 ``numcodecs.*`` bytes codec) from its id and
    settings (``config`` without the id)."""
    if name in _COMPRESSORS:
        return _Compressor(name, _settings(config, name, _COMPRESSORS[name]))
    if name in _CHECKSUMS:
        settings = _settings(config, name, {} if name == "fletcher32" else {"location": _LOCATION})
        return _Checksum(name, settings.get("location", _CHECKSUMS[name]))
    if name == "shuffle":
        settings = _settings(config, name, _FILTERS["shuffle"])
        if "elementsize" not in settings:
            raise _Invalid("the codec shuffle needs its 'elementsize'")
        return _Shuffle(settings["elementsize"])
    if filters_allowed and name in _FILTERS:
        settings = _settings(config, name, _FILTERS[name])
        missing = [k for k in _REQUIRED.get(name, ()) if k not in settings]
        if missing:
            raise _Invalid(f"the filter {name} needs its '{missing[0]}'")
        import numcodecs

        try:
            codec = numcodecs.get_codec({"id": name, **settings})
        except Exception as exc:  # the codec's own argument checks
            raise _Invalid(f"the filter {name} has invalid settings ({_reason(exc)})") from None
        if name == "astype":
            encoded, decoded = np.dtype(settings["encode_dtype"]), np.dtype(settings["decode_dtype"])
        elif name in ("delta", "quantize", "fixedscaleoffset"):
            decoded = np.dtype(settings["dtype"])
            encoded = np.dtype(settings.get("astype", settings["dtype"]))
        else:
            encoded = decoded = None
        return _Filter(name, codec, encoded, decoded)
    raise _unaccepted([name])


# --------------------------------------------------------------------------------------------
# Metadata documents


@dataclass
class _Sharding:
    inner: _Pipeline
    per_shard: tuple[int, ...]  # inner chunks along each axis of a shard
    index_at_start: bool
    index_dtype: np.dtype
    index_checksum: bool

    @property
    def index_bytes(self) -> int:
        return int(np.prod(self.per_shard, dtype=np.int64)) * 16 + (4 if self.index_checksum else 0)


@dataclass
class _Metadata:
    version: int
    shape: tuple[int, ...]
    grid: tuple[int, ...]  # chunk (shard) shape
    dtype: np.dtype  # as stored
    fill: object
    pipeline: _Pipeline | None
    sharding: _Sharding | None
    prefix: tuple[str, ...]  # key parts before the chunk coordinates
    separator: str
    attrs: dict


def _codec_ids_v2(metadata: dict) -> list[str]:
    """Every codec id named by a .zarray, for a single refusal before anything else."""
    filters = metadata.get("filters")
    entries = [metadata.get("compressor"), *(filters if isinstance(filters, list) else [])]
    return [entry["id"] for entry in entries if isinstance(entry, dict) and entry.get("id") is not None]


def _parse_v2(metadata, attrs: dict) -> _Metadata:
    if not isinstance(metadata, dict):
        raise _Invalid("its .zarray is not a JSON object")
    unknown = [
        i for i in _codec_ids_v2(metadata) if not (isinstance(i, str) and (i in _COMPRESSORS or i in _CHECKSUMS or i in _FILTERS))
    ]
    if unknown:
        raise _unaccepted(unknown)
    if metadata.get("zarr_format") != 2 or isinstance(metadata.get("zarr_format"), bool):
        raise _Invalid('its .zarray must have "zarr_format": 2')
    for key in ("shape", "chunks", "dtype"):
        if key not in metadata:
            raise _Invalid(f"its .zarray has no '{key}'")
    shape = _shape(metadata["shape"], "shape", 0)
    chunks = _shape(metadata["chunks"], "chunks", 1)
    if len(chunks) != len(shape):
        raise _Invalid(f"'chunks' has {len(chunks)} dimensions but 'shape' has {len(shape)}")
    dtype = _v2_dtype(metadata["dtype"])
    fill = _fill_value(metadata.get("fill_value"), dtype, 2)
    order = metadata.get("order", "C")
    if order not in ("C", "F"):
        raise _Invalid('\'order\' must be "C" or "F"')
    separator = metadata.get("dimension_separator", ".")
    if separator is None:
        separator = "."
    if separator not in (".", "/"):
        raise _Invalid('\'dimension_separator\' must be "." or "/"')
    filters = metadata.get("filters")
    if filters is not None and not isinstance(filters, list):
        raise _Invalid("'filters' must be null or a list of codecs")
    stages = []
    for entry in filters or []:
        if not isinstance(entry, dict) or "id" not in entry:
            raise _Invalid("every filter must be a JSON object with an 'id'")
        stages.append(_byte_stage(entry["id"], {k: v for k, v in entry.items() if k != "id"}, filters_allowed=True))
    compressor = metadata.get("compressor")
    if compressor is not None:
        if not isinstance(compressor, dict) or compressor.get("id") not in _COMPRESSORS:
            raise _Invalid('\'compressor\' must be null or a compressor such as {"id": "zstd"}')
        stages.append(_byte_stage(compressor["id"], {k: v for k, v in compressor.items() if k != "id"}, filters_allowed=False))
    if len(stages) > MAX_CODECS:
        raise _Invalid(f"it has more than {MAX_CODECS} filters")
    if any(isinstance(s, _Filter) and s.name == "packbits" for s in stages) and dtype.kind != "b":
        raise _Invalid("the filter packbits only applies to boolean arrays")
    pipeline = _Pipeline(shape=chunks, dtype=dtype, order=order, stages=stages)
    return _Metadata(2, shape, chunks, dtype, fill, pipeline, None, (), separator, attrs)


_V3_KEYS = {
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
}


def _named(entry, what: str) -> tuple[str, dict]:
    """A v3 ``{"name": ..., "configuration": {...}}`` (or a bare name)."""
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise _Invalid(f"every entry of '{what}' must be an object with a 'name'")
    extra = set(entry) - {"name", "configuration", "must_understand"}
    if extra:
        raise _Invalid(f"an entry of '{what}' has the unknown field {sorted(extra)[0][:40]!r}")
    configuration = entry.get("configuration", {})
    if not isinstance(configuration, dict):
        raise _Invalid(f"the configuration of '{entry['name'][:40]}' must be a JSON object")
    return entry["name"], configuration


_V3_BYTES_CODECS = {"gzip", "zstd", "blosc", "crc32c"}
_NUMCODECS_BYTES = set(_COMPRESSORS) | set(_CHECKSUMS) | {"shuffle"}
_BLOSC_V3 = {
    "cname": (lambda v: v in _BLOSC_NAMES, "a blosc compressor name"),
    "clevel": _int_in(0, 9),
    "shuffle": (lambda v: v in ("noshuffle", "shuffle", "bitshuffle"), "'noshuffle', 'shuffle' or 'bitshuffle'"),
    "typesize": _int_in(0, 255),
    "blocksize": _int_in(0, 2**31 - 1),
}


def _all_names(codecs) -> list[str]:
    """Every codec name in a v3 codec list, sharding's inner lists included."""
    names = []
    for entry in codecs if isinstance(codecs, list) else []:
        name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, dict) else None
        names.append(name)
        if name == "sharding_indexed" and isinstance(entry, dict) and isinstance(entry.get("configuration"), dict):
            names += _all_names(entry["configuration"].get("codecs")) + _all_names(entry["configuration"].get("index_codecs"))
    return names


def _v3_known(name) -> bool:
    if not isinstance(name, str):
        return True  # reported as malformed later
    if name.startswith("numcodecs."):
        return name[len("numcodecs.") :] in _NUMCODECS_BYTES
    return name in ("bytes", "endian", "transpose", "sharding_indexed") or name in _V3_BYTES_CODECS


def _v3_pipeline(codecs, shape: tuple[int, ...], dtype_name: str, what: str, nested: bool):
    """(pipeline, sharding) of a v3 codec list for chunks of ``shape``."""
    if not isinstance(codecs, list) or not codecs:
        raise _Invalid(f"'{what}' must be a non-empty list of codecs")
    if len(codecs) > MAX_CODECS:
        raise _Invalid(f"'{what}' has more than {MAX_CODECS} codecs")
    permutation, array_bytes, stages, sharding = None, None, [], None
    ndim = len(shape)
    for entry in codecs:
        name, config = _named(entry, what)
        if name == "transpose":
            if array_bytes is not None:
                raise _Invalid("the codec transpose must come before the bytes codec")
            order = _settings(
                config,
                name,
                {
                    "order": (
                        lambda v: isinstance(v, list) and all(_is_int(i) for i in v) and sorted(v) == list(range(ndim)),
                        f"a permutation of 0..{ndim - 1}",
                    )
                },
            ).get("order")
            if order is None:
                raise _Invalid("the codec transpose needs its 'order'")
            permutation = tuple(order) if permutation is None else tuple(permutation[i] for i in order)
        elif name in ("bytes", "endian"):
            if array_bytes is not None:
                raise _Invalid(f"'{what}' has more than one array-to-bytes codec")
            endian = _settings(config, name, {"endian": (lambda v: v in ("little", "big"), "'little' or 'big'")}).get(
                "endian", "little"
            )
            array_bytes = endian
        elif name == "sharding_indexed":
            if nested:
                raise _Invalid("sharding inside a shard is not accepted; shard once")
            if array_bytes is not None or permutation is not None or len(codecs) != 1:
                raise _Invalid("sharding_indexed must be the only codec of the array (put compressors in its own 'codecs')")
            sharding = _sharding(config, shape, dtype_name)
            array_bytes = "shard"
        else:
            if array_bytes is None:
                raise _Invalid(f"the codec {str(name)[:40]} must come after the bytes codec")
            if name.startswith("numcodecs."):
                stages.append(_byte_stage(name[len("numcodecs.") :], config, filters_allowed=False))
            elif name == "crc32c":
                _settings(config, name, {})
                stages.append(_Checksum("crc32c", "end"))
            elif name == "blosc":
                stages.append(_Compressor("blosc", _settings(config, name, _BLOSC_V3)))
            elif name in ("gzip", "zstd"):
                stages.append(_Compressor(name, _settings(config, name, _COMPRESSORS[name])))
            else:
                raise _unaccepted([name])
    if array_bytes is None:
        raise _Invalid(f"'{what}' has no bytes codec")
    if sharding is not None:
        return None, sharding
    dtype = np.dtype(_V3_DTYPES[dtype_name])
    dtype = dtype.newbyteorder("<" if array_bytes == "little" else ">") if dtype.itemsize > 1 else dtype
    return _Pipeline(shape=shape, dtype=dtype, permutation=permutation, stages=stages), None


def _sharding(config: dict, shard: tuple[int, ...], dtype_name: str) -> _Sharding:
    settings = _settings(
        config,
        "sharding_indexed",
        {
            "chunk_shape": (lambda v: isinstance(v, list), "a list of integers"),
            "codecs": (lambda v: isinstance(v, list), "a list of codecs"),
            "index_codecs": (lambda v: isinstance(v, list), "a list of codecs"),
            "index_location": (lambda v: v in ("start", "end"), "'start' or 'end'"),
        },
    )
    for key in ("chunk_shape", "codecs", "index_codecs"):
        if key not in settings:
            raise _Invalid(f"the codec sharding_indexed needs its '{key}'")
    inner_shape = _shape(settings["chunk_shape"], "chunk_shape", 1)
    if len(inner_shape) != len(shard) or any(s % c for s, c in zip(shard, inner_shape)):
        raise _Invalid("the shard shape must be a multiple of the sharding 'chunk_shape' along every axis")
    per_shard = tuple(s // c for s, c in zip(shard, inner_shape))
    if math.prod(per_shard) > MAX_SHARD_CHUNKS:
        raise _Invalid(f"a shard holds {math.prod(per_shard)} inner chunks; at most {MAX_SHARD_CHUNKS} are accepted")
    inner, _ = _v3_pipeline(settings["codecs"], inner_shape, dtype_name, "codecs", nested=True)
    index_codecs = settings["index_codecs"]
    names = [_named(e, "index_codecs") for e in index_codecs]
    if not names or names[0][0] not in ("bytes", "endian") or any(n != "crc32c" for n, _ in names[1:]) or len(names) > 2:
        raise _Invalid("'index_codecs' must be the bytes codec, optionally followed by crc32c")
    endian = _settings(names[0][1], "bytes", {"endian": (lambda v: v in ("little", "big"), "'little' or 'big'")}).get(
        "endian", "little"
    )
    if len(names) == 2:
        _settings(names[1][1], "crc32c", {})
    return _Sharding(
        inner,
        per_shard,
        settings.get("index_location", "end") == "start",
        np.dtype("<u8" if endian == "little" else ">u8"),
        len(names) == 2,
    )


def _parse_v3(metadata) -> _Metadata:
    if not isinstance(metadata, dict):
        raise _Invalid("its zarr.json is not a JSON object")
    unknown = [n for n in _all_names(metadata.get("codecs")) if not _v3_known(n)]
    if unknown:
        raise _unaccepted(unknown)
    if metadata.get("zarr_format") != 3 or isinstance(metadata.get("zarr_format"), bool):
        raise _Invalid('its zarr.json must have "zarr_format": 3')
    if metadata.get("node_type") != "array":
        raise _Invalid("its zarr.json describes a group, not an array")
    for key, value in metadata.items():
        if key not in _V3_KEYS and not (isinstance(value, dict) and value.get("must_understand") is False):
            raise _Invalid(f"its zarr.json has the unknown field {str(key)[:40]!r}")
    if metadata.get("storage_transformers") not in (None, []):
        raise _Invalid("storage transformers are not accepted; write the array without them", readable=False)
    for key in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if key not in metadata:
            raise _Invalid(f"its zarr.json has no '{key}'")
    shape = _shape(metadata["shape"], "shape", 0)
    dtype_name = metadata["data_type"]
    if not isinstance(dtype_name, str) or dtype_name not in _V3_DTYPES:
        shown = dtype_name if isinstance(dtype_name, str) else type(dtype_name).__name__
        raise _Invalid(
            f"has data type {str(shown)[:40]!r}; label arrays must be integer, boolean or float "
            "(e.g. uint8, uint32, int64, float32, bool)",
            readable=False,
        )
    grid_name, grid_config = _named(metadata["chunk_grid"], "chunk_grid")
    if grid_name != "regular" or "chunk_shape" not in grid_config or set(grid_config) != {"chunk_shape"}:
        raise _Invalid('\'chunk_grid\' must be {"name": "regular", "configuration": {"chunk_shape": [...]}}')
    grid = _shape(grid_config["chunk_shape"], "chunk_shape", 1)
    if len(grid) != len(shape):
        raise _Invalid(f"'chunk_shape' has {len(grid)} dimensions but 'shape' has {len(shape)}")
    key_name, key_config = _named(metadata["chunk_key_encoding"], "chunk_key_encoding")
    if key_name not in ("default", "v2"):
        raise _Invalid('\'chunk_key_encoding\' must be "default" or "v2"')
    separator = _settings(key_config, "chunk_key_encoding", {"separator": (lambda v: v in (".", "/"), '"." or "/"')}).get(
        "separator", "/" if key_name == "default" else "."
    )
    dtype = np.dtype(_V3_DTYPES[dtype_name])
    fill = _fill_value(metadata["fill_value"], dtype, 3)
    names = metadata.get("dimension_names")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(shape) or not all(n is None or isinstance(n, str) for n in names)
    ):
        raise _Invalid("'dimension_names' must list one name (or null) per dimension")
    attrs = metadata.get("attributes", {})
    pipeline, sharding = _v3_pipeline(metadata["codecs"], grid, dtype_name, "codecs", nested=False)
    stored = pipeline.dtype if pipeline is not None else sharding.inner.dtype
    prefix = ("c",) if key_name == "default" else ()
    return _Metadata(
        3, shape, grid, stored, fill, pipeline, sharding, prefix, separator, attrs if isinstance(attrs, dict) else {}
    )


def _check_sizes(meta: _Metadata) -> None:
    """Bounds on the chunk grid and chunk sizes, before anything is read."""
    itemsize = meta.dtype.itemsize
    voxels = math.prod(meta.shape)
    if voxels > MAX_VOXELS:
        raise _Invalid(f"its shape {meta.shape} has more than {MAX_VOXELS} voxels")
    counts = [-(-s // c) for s, c in zip(meta.shape, meta.grid)]
    if math.prod(counts) > MAX_GRID_CHUNKS:
        raise _Invalid(f"it has {math.prod(counts)} chunks; at most {MAX_GRID_CHUNKS} are accepted: use larger chunks")
    # Chunks no larger than the array along any axis overhang it by less than one chunk per
    # axis, so their grid covers less than 2^ndim times its bytes (a 140x400x400 crop in the usual
    # 128^3 chunks: 3x); a grid beyond that (plus slack for arrays smaller than one chunk) makes
    # every decoded chunk mostly padding, which is work and memory no array needs.
    covered = math.prod(n * c for n, c in zip(counts, meta.grid)) * itemsize
    if covered > (1 << len(meta.shape)) * voxels * itemsize + PADDING_SLACK:
        raise _Invalid(
            f"its chunks {meta.grid} cover {covered} bytes for an array of {voxels * itemsize} bytes; "
            "use chunks no larger than the array"
        )
    for pipeline, what in ((meta.pipeline, "chunk"), (meta.sharding.inner if meta.sharding else None, "inner chunk")):
        if pipeline is None:
            continue
        size = math.prod(pipeline.shape) * itemsize
        if size > MAX_CHUNK_BYTES:
            raise _Invalid(
                f"one {what} of shape {pipeline.shape} holds {size} bytes; at most {MAX_CHUNK_BYTES >> 20} MiB "
                "are accepted: use smaller chunks"
            )
        pipeline.plan()


# --------------------------------------------------------------------------------------------
# Arrays


def _pool_executor():
    """A process-wide thread pool for chunk decoding, made anew after a fork."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or os.getpid() != _POOL_PID:
            _POOL, _POOL_PID = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="zarr-decode"), os.getpid()
        return _POOL


_POOL, _POOL_PID, _POOL_LOCK = None, None, threading.Lock()


def _run(tasks: list, workers: int) -> None:
    """Run the callables ``tasks`` on up to ``workers`` threads (the caller's included); once
    every started task has finished, the exception of the first failing task *in the list's
    order* is raised, as a serial run would raise it (tasks are started in order, so every
    task before a failing one has run): the message names the same chunk on every run."""
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    pending, lock, failures = iter(enumerate(tasks)), threading.Lock(), []

    def drain():
        while not failures:
            with lock:
                item = next(pending, None)
            if item is None:
                return
            try:
                item[1]()
            except BaseException as exc:  # re-raised by the caller
                failures.append((item[0], exc))

    futures = [_pool_executor().submit(drain) for _ in range(min(workers, len(tasks)) - 1)]
    drain()
    for future in futures:
        if not future.cancel():
            future.result()
    if failures:
        raise min(failures, key=lambda failure: failure[0])[1]


class Array:
    """A zarr array on the local file system, read-only. ``shape``, ``dtype`` (native byte
    order), ``chunks`` (inner chunks for sharded arrays; ``shards`` the shards), ``fill_value``,
    ``attrs`` come from the metadata; ``array[region]`` / ``read(region)`` decode."""

    def __init__(self, path: Path, display: str, error, meta: _Metadata):
        self.path, self.display, self._error, self._meta = path, display, error, meta
        self.shape = meta.shape
        self.ndim = len(meta.shape)
        self.dtype = _native(meta.dtype)
        self.fill_value = meta.fill
        self.attrs = meta.attrs
        self.zarr_format = meta.version
        self.shards = meta.grid if meta.sharding else None
        self.chunks = meta.sharding.inner.shape if meta.sharding else meta.grid
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._grid_shape = tuple(-(-s // c) for s, c in zip(self.shape, meta.grid))
        self._stored, self._stored_coords, self._lock = None, None, threading.Lock()

    def __repr__(self) -> str:
        return f"<zarr array {self.display} shape={self.shape} dtype={self.dtype} chunks={self.chunks}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __getitem__(self, region) -> np.ndarray:
        return self.read(region)

    def read(self, region=Ellipsis, out: np.ndarray | None = None) -> np.ndarray:
        """The region (Ellipsis, ints, step-1 slices and tuples of them) as a native-order
        numpy array; absent chunks read as the fill value. ``out``: an array of exactly the
        region's shape and the array's dtype (C-contiguous, writeable) to decode into, reused
        across reads of same-sized regions (a large fresh array costs its page faults)."""
        return self._read(region, self.display, self._error, out)

    def stored_regions(self, region=Ellipsis) -> list[tuple[slice, ...]] | None:
        """The parts of ``region`` (a tuple of step-1 slices, one per axis) that meet a stored
        chunk (or shard), one box per chunk in raster order; everything else in the region is
        the fill value 0. None when the fill value is not 0 (then any part may hold data)."""
        if self.fill_value != 0:
            return None
        selection, dropped = regions.select(region, self.shape)
        if dropped:
            raise IndexError("stored_regions takes slices, not integer indices")
        coords, _ = self._chunks_in(selection, self.display, self._error)
        grid = self._meta.grid
        return [
            tuple(slice(max(int(c) * g, start), min((int(c) + 1) * g, stop)) for c, g, (start, stop) in zip(row, grid, selection))
            for row in sorted(coords.tolist())
        ]

    def stored(self, region=Ellipsis) -> bool:
        """False only when the region holds no stored chunk and the fill value is 0, i.e.
        when it is certainly all zeros."""
        if self.fill_value != 0:
            return True
        selection, _ = regions.select(region, self.shape)
        return len(self._chunks_in(selection, self.display, self._error)[0]) > 0

    # -- regions

    def _read(self, region, display: str, error, out: np.ndarray | None = None) -> np.ndarray:
        selection, dropped = regions.select(region, self.shape)
        out_shape = tuple(stop - start for start, stop in selection)
        final_shape = tuple(n for axis, n in enumerate(out_shape) if axis not in dropped)
        if out is not None and (
            not isinstance(out, np.ndarray)
            or out.shape != out_shape
            or out.dtype != self.dtype
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(f"out must be a writeable C-contiguous {self.dtype} array of shape {out_shape}")
        if 0 in out_shape:
            return np.full(final_shape, self.fill_value, dtype=self.dtype)
        coords, count = self._chunks_in(selection, display, error)
        complete = len(coords) == count and self._meta.sharding is None
        if out is None:
            out = np.empty(out_shape, dtype=self.dtype)
        if not complete:
            self._fill_absent(selection, coords, count, out)
        if self._meta.sharding is None:
            pipeline = self._meta.pipeline
            tasks = [self._chunk_task(c, selection, out, display, error) for c in coords]
            _run(tasks, self._workers(pipeline))
        else:
            for shard in coords:
                self._read_shard(tuple(int(i) for i in shard), selection, out, display, error)
        return out.reshape(final_shape)

    def _workers(self, pipeline: _Pipeline) -> int:
        """Threads for decoding: one for tiny chunks (their cost is Python's, under the GIL),
        else as many as the in-flight memory bound allows."""
        if pipeline.nbytes < 16 << 10:
            return 1
        per_task = 2 * pipeline.nbytes + pipeline.stored_limit
        return max(1, min(_THREADS, MAX_IN_FLIGHT_BYTES // max(1, per_task)))

    # -- which chunks are stored

    def _key(self, coords) -> str:
        parts = self._meta.prefix + tuple(str(int(c)) for c in coords)
        if not parts:
            parts = ("0",)
        return self._meta.separator.join(parts)

    def _listing(self, display: str, error) -> tuple[np.ndarray, np.ndarray]:
        """Linear indices (sorted) and coordinates of the stored chunk files, listed once."""
        with self._lock:
            if self._stored is None:
                try:
                    linear = self._list(display, error)
                except OSError as exc:  # a chunk folder that cannot be listed
                    raise error(f"{display}: its chunk files cannot be listed ({type(exc).__name__})") from None
                self._stored = np.unique(linear)
                if self.ndim:
                    self._stored_coords = np.stack(np.unravel_index(self._stored, self._grid_shape), axis=1).astype(np.int64)
                else:
                    self._stored_coords = np.zeros((len(self._stored), 0), dtype=np.int64)
            return self._stored, self._stored_coords

    def _list(self, display: str, error) -> np.ndarray:
        """Linear indices of the chunk files present, from one walk of the array's folder
        that follows no link and refuses links and special files named like chunks."""
        meta = self._meta
        prefix, grid, ndim = meta.prefix, self._grid_shape, self.ndim
        levels = len(prefix) + ndim
        if 0 in grid or (levels == 0 and _lstat_mode(self.path / "0") is None):
            return np.zeros(0, dtype=np.int64)
        if levels == 0:  # a 0-d array of format 2: its only chunk is "0"
            return np.zeros(1, dtype=np.int64)
        scanned = 0

        def part(name: str, level: int) -> int | None:
            if level < len(prefix):
                return 0 if name == prefix[level] else None
            if not _CANONICAL_INT.fullmatch(name):
                return None
            value = int(name)
            return value if value < grid[level - len(prefix)] else None

        def refuse_special(entry, relative: str) -> None:
            if entry.is_file(follow_symlinks=False):  # from the folder entry: no system call
                return
            what = untrusted.kind_of(entry.stat(follow_symlinks=False).st_mode)
            if what is not None:
                raise error(f"{display}/{relative}: is {what}; upload plain files and folders only")

        found = []
        if meta.separator == "." or levels == 1:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    scanned += 1
                    if scanned > MAX_STORED_ENTRIES:
                        raise error(f"{display}: holds more than {MAX_STORED_ENTRIES} files; use larger chunks")
                    names = entry.name.split(".") if meta.separator == "." else [entry.name]
                    if len(names) != levels:
                        continue
                    values = [part(n, i) for i, n in enumerate(names)]
                    if None in values or entry.is_dir(follow_symlinks=False):
                        continue
                    refuse_special(entry, entry.name)
                    found.append(values[len(prefix) :])
        else:
            pending = [(self.path, 0, [])]
            while pending:
                folder, level, values = pending.pop()
                with os.scandir(folder) as entries:
                    for entry in entries:
                        scanned += 1
                        if scanned > MAX_STORED_ENTRIES:
                            raise error(f"{display}: holds more than {MAX_STORED_ENTRIES} files; use larger chunks")
                        value = part(entry.name, level)
                        if value is None:
                            continue
                        if level + 1 < levels:
                            if entry.is_dir(follow_symlinks=False):
                                pending.append((Path(entry.path), level + 1, values + [value]))
                            else:
                                refuse_special(entry, os.path.relpath(entry.path, self.path))
                        elif not entry.is_dir(follow_symlinks=False):
                            refuse_special(entry, os.path.relpath(entry.path, self.path))
                            found.append((values + [value])[len(prefix) :])
        if not found or not ndim:
            return np.zeros(len(found[:1]), dtype=np.int64)
        coords = np.asarray(found, dtype=np.int64).reshape(len(found), ndim)
        return np.ravel_multi_index(coords.T, grid).astype(np.int64)

    def _chunks_in(self, selection, display: str, error) -> tuple[np.ndarray, int]:
        """Coordinates (rows) of the stored chunks (shards) that intersect ``selection``, and
        the number of chunk coordinates it spans. Work: min(span, stored chunks)."""
        grid = self._meta.grid
        low = np.array([start // c for (start, _), c in zip(selection, grid)], dtype=np.int64)
        high = np.array([-(-stop // c) for (_, stop), c in zip(selection, grid)], dtype=np.int64)
        count = int(np.prod(high - low)) if self.ndim else 1
        stored, coords = self._listing(display, error)
        if count == 0 or len(stored) == 0:
            return np.zeros((0, self.ndim), dtype=np.int64), count
        if not self.ndim:
            return coords[:1], count
        if count <= len(stored):
            box = np.indices(tuple(high - low), dtype=np.int64).reshape(self.ndim, -1) + low[:, None]
            linear = np.ravel_multi_index(box, self._grid_shape)
            position = np.minimum(np.searchsorted(stored, linear), len(stored) - 1)
            return box.T[stored[position] == linear], count
        inside = np.all((coords >= low) & (coords < high), axis=1)
        return coords[inside], count

    def _fill_absent(self, selection, coords, count: int, out: np.ndarray) -> None:
        """The fill value where ``selection`` meets no stored chunk: chunk by chunk when the
        selection spans few chunks (touching only what no chunk will overwrite), else all of it."""
        if self._meta.sharding is not None or count > 4096 or not self.ndim:
            out.fill(self.fill_value)
            return
        grid = self._meta.grid
        low = [start // c for (start, _), c in zip(selection, grid)]
        high = [-(-stop // c) for (_, stop), c in zip(selection, grid)]
        present = {tuple(int(i) for i in row) for row in coords}
        for offset in np.ndindex(*[h - lo for lo, h in zip(low, high)]):
            chunk = tuple(lo + o for lo, o in zip(low, offset))
            if chunk in present:
                continue
            out[
                tuple(
                    slice(max(c * g, start) - start, min((c + 1) * g, stop) - start)
                    for c, g, (start, stop) in zip(chunk, grid, selection)
                )
            ] = self.fill_value

    # -- decoding

    def _fail(self, error, display: str, key: str, reason: str):
        return error(
            f"{display}: chunk {key} cannot be read: {reason}; the chunk is corrupt or crafted, write the array again with zarr"
        )

    def _place(self, chunk: np.ndarray, origin, selection, out) -> None:
        """Copy the part of ``chunk`` (at ``origin``) that lies in ``selection`` into ``out``."""
        source, target = [], []
        for o, n, (start, stop) in zip(origin, chunk.shape, selection):
            low, high = max(o, start), min(o + n, stop)
            source.append(slice(low - o, high - o))
            target.append(slice(low - start, high - start))
        part = chunk[tuple(source)]
        out[tuple(target)] = part != 0 if self.dtype.kind == "b" else part

    def _decode(self, pipeline: _Pipeline, data, key: str, display: str, error) -> np.ndarray:
        try:
            return pipeline.decode(data)
        except _Corrupt as exc:
            raise self._fail(error, display, key, str(exc)) from None

    def _chunk_task(self, coords, selection, out, display: str, error):
        pipeline, key = self._meta.pipeline, self._key(coords)
        origin = [int(c) * g for c, g in zip(coords, self._meta.grid)]

        def task():
            data = untrusted.read_bytes(
                self.path / key, f"{display}/{key}", pipeline.stored_limit, error, what="a compressed chunk of this array"
            )
            self._place(self._decode(pipeline, data, key, display, error), origin, selection, out)

        return task

    def _read_shard(self, shard, selection, out, display: str, error) -> None:
        sharding, key = self._meta.sharding, self._key(shard)
        inner = sharding.inner
        origin = [c * g for c, g in zip(shard, self._meta.grid)]
        with untrusted.open_regular(self.path / key, f"{display}/{key}", error) as handle:
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            index_bytes = sharding.index_bytes
            if size < index_bytes:
                raise self._fail(error, display, key, f"the shard is shorter ({size} bytes) than its index ({index_bytes} bytes)")
            raw = os.pread(fd, index_bytes, 0 if sharding.index_at_start else size - index_bytes)
            if len(raw) != index_bytes:
                raise self._fail(error, display, key, "the shard ended while reading its index")
            if sharding.index_checksum:
                try:
                    raw = _Checksum("crc32c", "end").decode(raw, index_bytes - 4, True)
                except _Corrupt as exc:
                    raise self._fail(error, display, key, f"its shard index is damaged ({exc})") from None
            index = _as_u1(raw).view(sharding.index_dtype).reshape(*sharding.per_shard, 2)
            # inner chunks of this shard inside the selection
            low = [max(0, (start - o) // c) for (start, _), o, c in zip(selection, origin, inner.shape)]
            high = [min(n, -(-(stop - o) // c)) for (_, stop), o, c, n in zip(selection, origin, inner.shape, sharding.per_shard)]
            if any(h <= lo for lo, h in zip(low, high)):
                return
            block = index[tuple(slice(lo, h) for lo, h in zip(low, high))]
            offsets, lengths = block[..., 0].astype(np.uint64), block[..., 1].astype(np.uint64)
            present = (offsets != _MISSING) | (lengths != _MISSING)
            tasks = []
            for local in np.argwhere(present):
                position = tuple(int(lo + i) for lo, i in zip(low, local))
                offset, length = int(offsets[tuple(local)]), int(lengths[tuple(local)])
                name = f"{key} (inner chunk {'.'.join(map(str, position)) or '0'})"
                if offset == _MISSING or length == _MISSING or offset + length > size:
                    raise self._fail(error, display, name, f"its shard index points past the end of the shard ({size} bytes)")
                if length > inner.stored_limit:
                    raise self._fail(
                        error, display, name, f"it is stored in {length} bytes, more than {inner.stored_limit} accepted"
                    )
                inner_origin = [o + p * c for o, p, c in zip(origin, position, inner.shape)]
                tasks.append(self._inner_task(fd, offset, length, name, inner_origin, selection, out, display, error))
            _run(tasks, self._workers(inner))

    def _inner_task(self, fd, offset, length, name, origin, selection, out, display, error):
        inner = self._meta.sharding.inner

        def task():
            data = os.pread(fd, length, offset)
            if len(data) != length:
                raise self._fail(error, display, name, "the shard ended early")
            self._place(self._decode(inner, data, name, display, error), origin, selection, out)

        return task


# --------------------------------------------------------------------------------------------
# Public functions


def _read_attrs(path: Path, display: str, error) -> dict:
    """``.zattrs`` as a dict, ``{}`` when there is none. A file that is there but unreadable is
    refused rather than ignored: it may hold the voxel size the array is scored at."""
    if _lstat_mode(path) is None:
        return {}
    attrs = untrusted.load_json(path, display, error)
    if not isinstance(attrs, dict):
        raise error(f"{display}: must be a JSON object")
    return attrs


def open_array(path: Path, display: str, trusted: bool = False) -> Array:
    """Open an array read-only from its metadata alone (nothing is decoded). ``display``
    names it in messages; problems raise ``SubmissionError`` (``PhaseError`` if ``trusted``)."""
    error = _error(trusted)
    path = Path(path)
    if not stat.S_ISDIR(untrusted.check_regular(path, display, error, folder=True).st_mode):
        raise error(f"{display}: is not a zarr array (a file, not a folder)")
    try:
        if _lstat_mode(path / ".zarray") is not None:
            metadata = untrusted.load_json(path / ".zarray", f"{display}/.zarray", error)
            meta = _parse_v2(metadata, _read_attrs(path / ".zattrs", f"{display}/.zattrs", error))
        elif _lstat_mode(path / "zarr.json") is not None:
            meta = _parse_v3(untrusted.load_json(path / "zarr.json", f"{display}/zarr.json", error))
        else:
            raise error(f"{display}: not a readable zarr array (it has neither .zarray nor zarr.json)")
        _check_sizes(meta)
    except _Invalid as exc:
        raise error(f"{display}: {exc}") from None
    return Array(path, display, error, meta)


def read_array(array: Array, display: str, trusted: bool = False, region=Ellipsis, out: np.ndarray | None = None) -> np.ndarray:
    """``array[region]``, with problems named by ``display``; ``out`` as in ``Array.read``."""
    return array._read(region, display, _error(trusted), out)


def attributes(array) -> dict:
    try:
        return dict(array.attrs)
    except Exception:
        return {}
