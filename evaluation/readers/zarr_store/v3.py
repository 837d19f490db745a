"""Format 3 metadata: ``zarr.json`` with its codec list (sharding included)."""

import math

import numpy as np

from evaluation.readers import limits
from evaluation.readers.zarr_store.base import Invalid, is_int
from evaluation.readers.zarr_store.metadata import _V3_DTYPES, _fill_value, _Metadata, _shape
from evaluation.readers.zarr_store.pipeline import (
    _BLOSC_NAMES,
    _CHECKSUMS,
    _COMPRESSORS,
    _byte_stage,
    _Checksum,
    _Compressor,
    _int_in,
    _Pipeline,
    _settings,
    _unaccepted,
)
from evaluation.readers.zarr_store.sharding import _Sharding

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
        raise Invalid(f"every entry of '{what}' must be an object with a 'name'")
    extra = set(entry) - {"name", "configuration", "must_understand"}
    if extra:
        raise Invalid(f"an entry of '{what}' has the unknown field {sorted(extra)[0][:40]!r}")
    configuration = entry.get("configuration", {})
    if not isinstance(configuration, dict):
        raise Invalid(f"the configuration of '{entry['name'][:40]}' must be a JSON object")
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
        raise Invalid(f"'{what}' must be a non-empty list of codecs")
    if len(codecs) > limits.ZARR_MAX_CODECS:
        raise Invalid(f"'{what}' has more than {limits.ZARR_MAX_CODECS} codecs")
    permutation, array_bytes, stages, sharding = None, None, [], None
    ndim = len(shape)
    for entry in codecs:
        name, config = _named(entry, what)
        if name == "transpose":
            if array_bytes is not None:
                raise Invalid("the codec transpose must come before the bytes codec")
            order = _settings(
                config,
                name,
                {
                    "order": (
                        lambda v: isinstance(v, list) and all(is_int(i) for i in v) and sorted(v) == list(range(ndim)),
                        f"a permutation of 0..{ndim - 1}",
                    )
                },
            ).get("order")
            if order is None:
                raise Invalid("the codec transpose needs its 'order'")
            permutation = tuple(order) if permutation is None else tuple(permutation[i] for i in order)
        elif name in ("bytes", "endian"):
            if array_bytes is not None:
                raise Invalid(f"'{what}' has more than one array-to-bytes codec")
            endian = _settings(config, name, {"endian": (lambda v: v in ("little", "big"), "'little' or 'big'")}).get(
                "endian", "little"
            )
            array_bytes = endian
        elif name == "sharding_indexed":
            if nested:
                raise Invalid("sharding inside a shard is not accepted; shard once")
            if array_bytes is not None or permutation is not None or len(codecs) != 1:
                raise Invalid("sharding_indexed must be the only codec of the array (put compressors in its own 'codecs')")
            sharding = _sharding(config, shape, dtype_name)
            array_bytes = "shard"
        else:
            if array_bytes is None:
                raise Invalid(f"the codec {str(name)[:40]} must come after the bytes codec")
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
        raise Invalid(f"'{what}' has no bytes codec")
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
            raise Invalid(f"the codec sharding_indexed needs its '{key}'")
    inner_shape = _shape(settings["chunk_shape"], "chunk_shape", 1)
    if len(inner_shape) != len(shard) or any(s % c for s, c in zip(shard, inner_shape)):
        raise Invalid("the shard shape must be a multiple of the sharding 'chunk_shape' along every axis")
    per_shard = tuple(s // c for s, c in zip(shard, inner_shape))
    if math.prod(per_shard) > limits.ZARR_MAX_SHARD_CHUNKS:
        raise Invalid(f"a shard holds {math.prod(per_shard)} inner chunks; at most {limits.ZARR_MAX_SHARD_CHUNKS} are accepted")
    inner, _ = _v3_pipeline(settings["codecs"], inner_shape, dtype_name, "codecs", nested=True)
    index_codecs = settings["index_codecs"]
    names = [_named(e, "index_codecs") for e in index_codecs]
    if not names or names[0][0] not in ("bytes", "endian") or any(n != "crc32c" for n, _ in names[1:]) or len(names) > 2:
        raise Invalid("'index_codecs' must be the bytes codec, optionally followed by crc32c")
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
        raise Invalid("its zarr.json is not a JSON object")
    unknown = [n for n in _all_names(metadata.get("codecs")) if not _v3_known(n)]
    if unknown:
        raise _unaccepted(unknown)
    if metadata.get("zarr_format") != 3 or isinstance(metadata.get("zarr_format"), bool):
        raise Invalid('its zarr.json must have "zarr_format": 3')
    if metadata.get("node_type") != "array":
        raise Invalid("its zarr.json describes a group, not an array")
    for key, value in metadata.items():
        if key not in _V3_KEYS and not (isinstance(value, dict) and value.get("must_understand") is False):
            raise Invalid(f"its zarr.json has the unknown field {str(key)[:40]!r}")
    if metadata.get("storage_transformers") not in (None, []):
        raise Invalid("storage transformers are not accepted; write the array without them", readable=False)
    for key in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if key not in metadata:
            raise Invalid(f"its zarr.json has no '{key}'")
    shape = _shape(metadata["shape"], "shape", 0)
    dtype_name = metadata["data_type"]
    if not isinstance(dtype_name, str) or dtype_name not in _V3_DTYPES:
        shown = dtype_name if isinstance(dtype_name, str) else type(dtype_name).__name__
        raise Invalid(
            f"has data type {str(shown)[:40]!r}; label arrays must be integer, boolean or float "
            "(e.g. uint8, uint32, int64, float32, bool)",
            readable=False,
        )
    grid_name, grid_config = _named(metadata["chunk_grid"], "chunk_grid")
    if grid_name != "regular" or "chunk_shape" not in grid_config or set(grid_config) != {"chunk_shape"}:
        raise Invalid('\'chunk_grid\' must be {"name": "regular", "configuration": {"chunk_shape": [...]}}')
    grid = _shape(grid_config["chunk_shape"], "chunk_shape", 1)
    if len(grid) != len(shape):
        raise Invalid(f"'chunk_shape' has {len(grid)} dimensions but 'shape' has {len(shape)}")
    key_name, key_config = _named(metadata["chunk_key_encoding"], "chunk_key_encoding")
    if key_name not in ("default", "v2"):
        raise Invalid('\'chunk_key_encoding\' must be "default" or "v2"')
    separator = _settings(key_config, "chunk_key_encoding", {"separator": (lambda v: v in (".", "/"), '"." or "/"')}).get(
        "separator", "/" if key_name == "default" else "."
    )
    dtype = np.dtype(_V3_DTYPES[dtype_name])
    fill = _fill_value(metadata["fill_value"], dtype, 3)
    names = metadata.get("dimension_names")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(shape) or not all(n is None or isinstance(n, str) for n in names)
    ):
        raise Invalid("'dimension_names' must list one name (or null) per dimension")
    attrs = metadata.get("attributes", {})
    pipeline, sharding = _v3_pipeline(metadata["codecs"], grid, dtype_name, "codecs", nested=False)
    stored = pipeline.dtype if pipeline is not None else sharding.inner.dtype
    prefix = ("c",) if key_name == "default" else ()
    return _Metadata(
        3, shape, grid, stored, fill, pipeline, sharding, prefix, separator, attrs if isinstance(attrs, dict) else {}
    )
