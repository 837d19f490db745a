"""The codecs of a chunk. Each byte stage knows the size it encodes to (``None``: unknown, a
compressor) and decodes to a size it is told, exactly (or at most, below a stacked
compressor); a pipeline is the stages of one chunk in encoding order. Compressors decode
through ``readers.codecs`` (bounded in output and work); checksums and numcodecs' filters work
on data whose size is already known. Codec configurations are checked here, against the list
in docs/participants.md."""

import math
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs, limits
from evaluation.readers.codecs import as_u1
from evaluation.readers.zarr_store.base import ACCEPTED, V2_DTYPE, VALID_SIZES, Corrupt, Invalid, is_int

# what numcodecs' filters and checksums raise for data they cannot decode
_FILTER_ERRORS = (ValueError, TypeError, RuntimeError)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def _bound(size: int) -> int:
    """At most how many bytes a compressor may make of ``size`` bytes (worst cases are a few
    bytes per 16-128 KiB block plus headers)."""
    return size + size // 8 + 65536


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
        data = as_u1(data)
        if data.nbytes < 4:
            raise Corrupt(f"it is too short to hold its {self.name} checksum")
        payload, stored = (data[4:], data[:4]) if self.location == "start" else (data[:-4], data[-4:])
        if self.name == "fletcher32":
            import numcodecs

            try:
                return as_u1(numcodecs.Fletcher32().decode(data))
            except _FILTER_ERRORS as exc:  # mismatch: RuntimeError
                raise Corrupt(f"its fletcher32 checksum does not match ({_reason(exc)})") from None
        if self.name == "crc32":
            value = zlib.crc32(payload)
        elif self.name == "adler32":
            value = zlib.adler32(payload)
        else:
            import google_crc32c

            value = google_crc32c.value(payload.tobytes() if not payload.flags.c_contiguous else payload)
        if struct.unpack("<I", stored.tobytes())[0] != value & 0xFFFFFFFF:
            raise Corrupt(f"its {self.name} checksum does not match")
        return payload


class _Compressor(_Stage):
    """A compressor, decoded by ``readers.codecs`` into the chunk's size: blosc, lz4 and zstd
    from the size their header states, the streams (zlib, gzip, bz2, lzma) with an output
    limit, a bound on concatenated streams and nothing after them."""

    def __init__(self, name: str, settings: dict):
        self.name, self.settings = name, settings

    def encoded_size(self, size):
        return None

    def decode(self, data, size, exact, into=None):
        try:
            if self.name in ("blosc", "lz4", "zstd"):
                return getattr(codecs, self.name)(data, size, exact, into)
            if self.name == "zlib":
                return codecs.decode(codecs.ZLIB, data, size)
            if self.name == "gzip":  # numcodecs reads concatenated members and zero padding, as gzip does
                return codecs.decode(codecs.GZIP, data, size, members=limits.MAX_STREAMS, padding=True)
            if self.name == "bz2":
                return codecs.decode(codecs.BZ2, data, size, members=limits.MAX_STREAMS)
            fmt = self.settings.get("format", 1)  # numcodecs' LZMA: FORMAT_XZ unless told
            return codecs.decode(codecs.XZ, data, size, members=limits.MAX_STREAMS, lzma_format=fmt)
        except Unusable as exc:
            raise Corrupt(str(exc)) from None


class _Shuffle(_Stage):
    name = "shuffle"

    def __init__(self, elementsize: int):
        self.elementsize = elementsize

    def decode(self, data, size, exact):
        import numcodecs

        try:
            return as_u1(numcodecs.Shuffle(elementsize=self.elementsize).decode(as_u1(data)))
        except _FILTER_ERRORS as exc:
            raise Corrupt(f"its shuffle data is invalid ({_reason(exc)})") from None


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
            raise Invalid(f"the filter {self.name} works on {self.decoded} values, which do not divide the chunk's bytes")
        return size // self.decoded.itemsize * self.encoded.itemsize

    def decode(self, data, size, exact):
        try:
            return as_u1(self.codec.decode(as_u1(data)))
        except _FILTER_ERRORS as exc:
            raise Corrupt(f"its {self.name} data is invalid ({_reason(exc)})") from None


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
            if size > 2 * limits.ZARR_MAX_CHUNK_BYTES:
                raise Invalid(f"its codec {stage.name} makes chunks larger than {limits.ZARR_MAX_CHUNK_BYTES >> 20} MiB")
            self.sizes.append((size, exact))

    @property
    def nbytes(self) -> int:
        return self.sizes[0][0]

    @property
    def stored_limit(self) -> int:
        return self.sizes[-1][0]

    @property
    def in_place(self) -> bool:
        """Whether a chunk decodes straight into its place in a C-ordered array of native byte
        order (``decode_into``): one compressor that states its decoded size, nothing else."""
        stage = self.stages[0] if len(self.stages) == 1 else None
        return (
            isinstance(stage, _Compressor)
            and stage.name in ("blosc", "lz4", "zstd")
            and self.order == "C"
            and self.permutation is None
            and self.dtype.isnative
            and self.dtype.kind != "b"
        )

    def zeros_frame(self) -> bytes | None:
        """The bytes a chunk of zeros is stored as when this pipeline's codec (numcodecs, with
        the metadata's settings) writes it, for ``in_place`` pipelines; None when it cannot be
        made. Stored bytes equal to these decode to zeros (decoding is a function of the bytes);
        a writer that encodes zeros otherwise is simply not recognised."""
        if not self.in_place:
            return None
        import numcodecs

        stage, settings = self.stages[0], dict(self.stages[0].settings)
        try:
            if stage.name == "blosc":
                shuffle = settings.get("shuffle", 1)
                shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}.get(shuffle, shuffle)
                codec = numcodecs.Blosc(
                    cname=settings.get("cname", "lz4"),
                    clevel=settings.get("clevel", 5),
                    shuffle=shuffle,
                    blocksize=settings.get("blocksize", 0),
                )
            elif stage.name == "zstd":
                codec = numcodecs.Zstd(level=settings.get("level", 0), checksum=settings.get("checksum", False))
            else:
                codec = numcodecs.LZ4(acceleration=settings.get("acceleration", 1))
            return bytes(codec.encode(np.zeros(self.shape, self.dtype)))
        except Exception:  # numcodecs' refusal of settings it does not know: nothing recognised
            return None

    def decode_into(self, data, into: np.ndarray) -> None:
        """``decode`` into ``into`` (C-contiguous, the chunk's shape, the stored dtype), for an
        ``in_place`` pipeline: no array allocated, nothing copied (a 16 MB chunk in fresh
        memory costs its page faults, and the copy doubles the memory traffic of reading)."""
        size, exact = self.sizes[0]
        flat = into.reshape(-1).view(np.uint8)
        got = self.stages[0].decode(data, size, exact, flat)
        if got.nbytes != self.nbytes:
            more = "more" if got.nbytes > self.nbytes else "less"
            raise Corrupt(f"it holds {more} data ({got.nbytes} bytes) than its chunk ({self.nbytes} bytes)")
        if not np.shares_memory(got, flat):
            flat[...] = got

    def decode(self, data) -> np.ndarray:
        """The chunk as an array of ``shape`` (stored dtype), or ``Corrupt``."""
        for index in range(len(self.stages) - 1, -1, -1):
            size, exact = self.sizes[index]
            stage = self.stages[index]
            data = stage.decode(data, size, exact)
            got = data.nbytes if isinstance(data, np.ndarray) else len(data)
            if got > size:
                raise Corrupt(f"it decodes to more data than its chunk holds ({size} bytes)")
            if exact and got < size:
                raise Corrupt(f"it decodes to less data ({got} bytes) than its chunk holds ({size} bytes)")
        got = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if got != self.nbytes:
            more = "more" if got > self.nbytes else "less"
            raise Corrupt(f"it holds {more} data ({got} bytes) than its chunk ({self.nbytes} bytes)")
        dtype = np.dtype(np.uint8) if self.dtype.kind == "b" else self.dtype
        flat = np.frombuffer(data, dtype=dtype) if not isinstance(data, np.ndarray) else as_u1(data).view(dtype)
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
        raise Invalid(f"the settings of the codec {name} must be a JSON object")
    for key, value in config.items():
        if key not in allowed:
            raise Invalid(f"the codec {name} has an unknown setting {str(key)[:40]!r}")
        check, description = allowed[key]
        if not check(value):
            raise Invalid(f"the setting '{key}' of the codec {name} must be {description}")
    return config


def _int_in(low, high):
    return lambda v: is_int(v) and low <= v <= high, f"an integer from {low} to {high}"


_ANY_INT = (lambda v: is_int(v) and abs(v) < 2**31, "an integer")
_BOOL = (lambda v: isinstance(v, bool), "true or false")
_NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number")


def _is_dtype_string(value) -> bool:
    match = V2_DTYPE.fullmatch(value) if isinstance(value, str) else None
    return match is not None and int(match.group(3)) in VALID_SIZES[match.group(2)]


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
        "preset": (lambda v: v is None or is_int(v) and 0 <= v <= 2**32, "an integer or null"),
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


def _unaccepted(names) -> Invalid:
    names = sorted({str(n)[:40] for n in names})
    which = "codec " + names[0] if len(names) == 1 else "codecs " + ", ".join(names)
    verb = "is" if len(names) == 1 else "are"
    return Invalid(f"uses the {which}, which {verb} not accepted; {ACCEPTED}", readable=False)


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
            raise Invalid("the codec shuffle needs its 'elementsize'")
        return _Shuffle(settings["elementsize"])
    if filters_allowed and name in _FILTERS:
        settings = _settings(config, name, _FILTERS[name])
        missing = [k for k in _REQUIRED.get(name, ()) if k not in settings]
        if missing:
            raise Invalid(f"the filter {name} needs its '{missing[0]}'")
        import numcodecs

        try:
            codec = numcodecs.get_codec({"id": name, **settings})
        except (ValueError, TypeError) as exc:  # the codec's own argument checks
            raise Invalid(f"the filter {name} has invalid settings ({_reason(exc)})") from None
        if name == "astype":
            encoded, decoded = np.dtype(settings["encode_dtype"]), np.dtype(settings["decode_dtype"])
        elif name in ("delta", "quantize", "fixedscaleoffset"):
            decoded = np.dtype(settings["dtype"])
            encoded = np.dtype(settings.get("astype", settings["dtype"]))
        else:
            encoded = decoded = None
        return _Filter(name, codec, encoded, decoded)
    raise _unaccepted([name])
