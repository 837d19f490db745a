"""Every codec a zarr array may use, one row each (``CODECS``), as zarr-python keeps its codecs
in one registry (``zarr/registry.py``: ``register_codec``, ``get_codec_class``): a codec
is accepted if and only if it has a row here, and docs/participants.md lists the same.

A row says what the codec is called in each format (format 2: a numcodecs id in the
``.zarray``'s ``compressor`` or ``filters``; format 3: its names in ``zarr.json``, and
``numcodecs.<id>`` for the bytes -> bytes ones), its kind of stage (``stages``: array ->
array, array -> bytes, bytes -> bytes), its settings with what each must be (checked before
the codec is made), the settings it cannot do without, where it may stand in a list (only
sharding says), and how its stage is made: compressors with their bounded decoder from
``readers.codecs``, checksums with the function that computes them.

``v2_codec``/``v3_codec`` look a codec up by the name the metadata gives; ``Codec.make``
checks a configuration and makes the stage. The order of a format 3 codec list and the rest
of each format's rules are the parsers' (``v2``, ``v3``).
"""

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.readers import codecs, limits
from evaluation.readers.zarr_store import settings, sharding
from evaluation.readers.zarr_store.base import Invalid, is_int
from evaluation.readers.zarr_store.pipeline import Chunk
from evaluation.readers.zarr_store.settings import ANY_INT, BOOL, DTYPE, ENDIAN, LOCATION, NUMBER, Settings, int_in
from evaluation.readers.zarr_store.stages import (
    ARRAY_ARRAY,
    ARRAY_BYTES,
    BYTES_BYTES,
    Bytes,
    Checksum,
    Compressor,
    Data,
    Decoder,
    Filter,
    Fletcher32,
    Shuffle,
    SizedCompressor,
    SizedDecoder,
    Stage,
    Transpose,
    crc32c,
    reason,
)

COMPRESSOR, FILTER = "compressor", "filter"  # where a .zarray may name a codec (a compressor: either)
Build = Callable[[str, dict[str, Any], Chunk], Stage]  # (name, checked settings, chunk) -> stage


@dataclass(frozen=True)
class Codec:
    """One accepted codec (module docstring). ``settings`` may depend on the chunk (a
    transpose's order is a permutation of its axes)."""

    name: str  # the numcodecs id (format 2), else the format 3 name; what refusals call it
    stage: str  # ARRAY_ARRAY, ARRAY_BYTES or BYTES_BYTES
    settings: Settings | Callable[[Chunk], Settings]
    build: Build
    v2: str | None = None  # COMPRESSOR, FILTER, or None: not in format 2
    v3: tuple[str, ...] = ()  # its own names in zarr.json (bytes -> bytes rows of format 2 are also numcodecs.<id>)
    v3_settings: Settings | None = None  # the settings under those names, where they differ
    required: tuple[str, ...] = ()
    noun: str = "codec"  # how a missing setting names it ("the filter delta needs its 'dtype'")
    place: Callable[[Chunk], None] | None = None  # refuses a place in its list (before its settings)

    def make(self, name: str, config: object, chunk: Chunk, own_name: bool = False) -> Stage:
        """The stage from ``config`` (checked first); ``name`` as the metadata spells it
        (without ``numcodecs.``), ``own_name`` when it is one of the row's format 3 names."""
        allowed = self.v3_settings if own_name and self.v3_settings is not None else self.settings
        checked = settings.check(config, name, allowed(chunk) if callable(allowed) else allowed)
        settings.required(checked, self.required, self.noun, name)
        return self.build(name, checked, chunk)


# ---- how each stage is made


def _compressor(decoder: Decoder) -> Build:
    return lambda name, config, chunk: Compressor(name, config, decoder)


def _sized(decoder: SizedDecoder, writer: Callable[[dict[str, Any]], Any]) -> Build:
    return lambda name, config, chunk: SizedCompressor(name, config, decoder, writer)


def _checksum(location: str, value: Callable[[np.ndarray], int]) -> Build:
    return lambda name, config, chunk: Checksum(name, config.get("location", location), value)


def _filter(name: str, config: dict[str, Any], chunk: Chunk) -> Stage:
    """A numcodecs filter of format 2, made by numcodecs from its checked settings; its
    encoded and decoded data types give the sizes each side of it."""
    import numcodecs  # type: ignore[import-untyped]

    try:
        codec = numcodecs.get_codec({"id": name, **config})
    except (ValueError, TypeError) as exc:  # the codec's own argument checks
        raise Invalid(f"the filter {name} has invalid settings ({reason(exc)})") from None
    if name == "astype":
        encoded, decoded = np.dtype(config["encode_dtype"]), np.dtype(config["decode_dtype"])
    elif name in ("delta", "quantize", "fixedscaleoffset"):
        decoded = np.dtype(config["dtype"])
        encoded = np.dtype(config.get("astype", config["dtype"]))
    else:
        encoded = decoded = None
    return Filter(name, codec, encoded, decoded)


def _permutation(chunk: Chunk) -> Settings:
    return {
        "order": (
            lambda v: isinstance(v, list) and all(is_int(i) for i in v) and sorted(v) == list(range(chunk.ndim)),
            f"a permutation of 0..{chunk.ndim - 1}",
        )
    }


# ---- the bounded decoders of the compressors (``readers.codecs``)


def _streams(codec: str, **options: Any) -> Decoder:
    """A zlib-family stream decoder with an output limit (numcodecs reads concatenated gzip
    members and zero padding, as gzip does; bz2 and xz streams may be concatenated too)."""
    return lambda data, size, exact, config: codecs.decode(codec, data, size, **options)


def _lzma(data: Data, size: int, exact: bool, config: dict[str, Any]) -> Data:
    fmt = config.get("format", 1)  # numcodecs' LZMA: FORMAT_XZ unless told
    return codecs.decode(codecs.XZ, data, size, members=limits.MAX_STREAMS, lzma_format=fmt)


# ---- the numcodecs codecs that write them (for the bytes of a chunk of zeros: ``zero_chunks``)


def _numcodecs() -> Any:
    import numcodecs

    return numcodecs


def _blosc_writer(config: dict[str, Any]) -> Any:
    shuffle = config.get("shuffle", 1)  # format 3 names it, format 2 numbers it
    return _numcodecs().Blosc(
        cname=config.get("cname", "lz4"),
        clevel=config.get("clevel", 5),
        shuffle={"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}.get(shuffle, shuffle),
        blocksize=config.get("blocksize", 0),
    )


BLOSC_NAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")

CODECS: tuple[Codec, ...] = (
    # compressors (format 2: compressor or filter; format 3: bytes -> bytes)
    Codec(
        "blosc",
        BYTES_BYTES,
        {
            "cname": (lambda v: v in BLOSC_NAMES, "a blosc compressor name"),
            "clevel": int_in(0, 9),
            "shuffle": int_in(-1, 2),
            "blocksize": int_in(0, 2**31 - 1),
            "typesize": int_in(0, 255),
        },
        _sized(codecs.blosc, _blosc_writer),
        COMPRESSOR,
        ("blosc",),
        {
            "cname": (lambda v: v in BLOSC_NAMES, "a blosc compressor name"),
            "clevel": int_in(0, 9),
            "shuffle": (lambda v: v in ("noshuffle", "shuffle", "bitshuffle"), "'noshuffle', 'shuffle' or 'bitshuffle'"),
            "typesize": int_in(0, 255),
            "blocksize": int_in(0, 2**31 - 1),
        },
    ),
    Codec(
        "zstd",
        BYTES_BYTES,
        {"level": int_in(-131072, 22), "checksum": BOOL},
        _sized(
            codecs.zstd, lambda config: _numcodecs().Zstd(level=config.get("level", 0), checksum=config.get("checksum", False))
        ),
        COMPRESSOR,
        ("zstd",),
    ),
    Codec(
        "lz4",
        BYTES_BYTES,
        {"acceleration": ANY_INT},
        _sized(codecs.lz4, lambda config: _numcodecs().LZ4(acceleration=config.get("acceleration", 1))),
        COMPRESSOR,
    ),
    Codec("zlib", BYTES_BYTES, {"level": int_in(-1, 9)}, _compressor(_streams(codecs.ZLIB)), COMPRESSOR),
    Codec(
        "gzip",
        BYTES_BYTES,
        {"level": int_in(-1, 9)},
        _compressor(_streams(codecs.GZIP, members=limits.MAX_STREAMS, padding=True)),
        COMPRESSOR,
        ("gzip",),
    ),
    Codec("bz2", BYTES_BYTES, {"level": int_in(1, 9)}, _compressor(_streams(codecs.BZ2, members=limits.MAX_STREAMS)), COMPRESSOR),
    Codec(
        "lzma",
        BYTES_BYTES,
        {
            "format": int_in(0, 2),
            "check": int_in(-1, 15),
            "preset": (lambda v: v is None or (is_int(v) and 0 <= v <= 2**32), "an integer or null"),
            "filters": (lambda v: v is None, "null (raw lzma streams are not accepted)"),
        },
        _compressor(_lzma),
        COMPRESSOR,
    ),
    # checksums (format 2 filters; format 3 bytes -> bytes)
    Codec("crc32", BYTES_BYTES, {"location": LOCATION}, _checksum("start", lambda payload: zlib.crc32(payload.data)), FILTER),
    Codec("adler32", BYTES_BYTES, {"location": LOCATION}, _checksum("start", lambda payload: zlib.adler32(payload.data)), FILTER),
    Codec("crc32c", BYTES_BYTES, {"location": LOCATION}, _checksum("end", crc32c), FILTER, ("crc32c",), {}),
    Codec("fletcher32", BYTES_BYTES, {}, lambda name, config, chunk: Fletcher32(), FILTER),
    # byte shuffle (format 2 filter; format 3 numcodecs.shuffle)
    Codec(
        "shuffle",
        BYTES_BYTES,
        {"elementsize": int_in(1, 1 << 16)},
        lambda name, config, chunk: Shuffle(config["elementsize"]),
        FILTER,
        required=("elementsize",),
    ),
    # numcodecs' array filters (format 2 only)
    Codec("delta", ARRAY_ARRAY, {"dtype": DTYPE, "astype": DTYPE}, _filter, FILTER, required=("dtype",), noun="filter"),
    Codec("bitround", ARRAY_ARRAY, {"keepbits": int_in(0, 64)}, _filter, FILTER, required=("keepbits",), noun="filter"),
    Codec(
        "quantize",
        ARRAY_ARRAY,
        {"digits": int_in(-64, 64), "dtype": DTYPE, "astype": DTYPE},
        _filter,
        FILTER,
        required=("digits", "dtype"),
        noun="filter",
    ),
    Codec(
        "fixedscaleoffset",
        ARRAY_ARRAY,
        {"offset": NUMBER, "scale": NUMBER, "dtype": DTYPE, "astype": DTYPE},
        _filter,
        FILTER,
        required=("offset", "scale", "dtype"),
        noun="filter",
    ),
    Codec("packbits", ARRAY_ARRAY, {}, _filter, FILTER, noun="filter"),
    Codec(
        "astype",
        ARRAY_ARRAY,
        {"encode_dtype": DTYPE, "decode_dtype": DTYPE},
        _filter,
        FILTER,
        required=("encode_dtype", "decode_dtype"),
        noun="filter",
    ),
    # format 3's own
    Codec(
        "transpose",
        ARRAY_ARRAY,
        _permutation,
        lambda name, config, chunk: Transpose(tuple(config["order"])),
        v3=("transpose",),
        required=("order",),
    ),
    Codec(
        "bytes",
        ARRAY_BYTES,
        {"endian": ENDIAN},
        lambda name, config, chunk: Bytes(config.get("endian", "little")),
        v3=("bytes", "endian"),
    ),
    Codec(
        "sharding_indexed",
        ARRAY_BYTES,
        sharding.SETTINGS,
        sharding.build,
        v3=("sharding_indexed",),
        required=sharding.REQUIRED,
        place=sharding.place,
    ),
)

_V2 = {codec.name: codec for codec in CODECS if codec.v2 is not None}
_V3 = {name: codec for codec in CODECS for name in codec.v3}
NUMCODECS = "numcodecs."


def v2_codec(codec_id: object) -> Codec | None:
    """The row of a format 2 codec id (compressor or filter), or None."""
    return _V2.get(codec_id) if isinstance(codec_id, str) else None


def v3_codec(name: object) -> tuple[Codec, str, bool] | None:
    """The row of a format 3 codec name, the name refusals call it by (``numcodecs.`` left
    off) and whether it is one of the row's own format 3 names; None if not accepted."""
    if not isinstance(name, str):
        return None
    if name.startswith(NUMCODECS):
        codec = _V2.get(name[len(NUMCODECS) :])
        return (codec, codec.name, False) if codec is not None and codec.stage == BYTES_BYTES else None
    codec = _V3.get(name)
    return (codec, name, True) if codec is not None else None
