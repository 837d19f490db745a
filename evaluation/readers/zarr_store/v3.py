"""Format 3 metadata: ``zarr.json`` with its codec list (zarr-specs, v3.0 "Codecs"): the
codecs looked up in ``registry``, in the order their kinds allow (array -> array codecs,
one array -> bytes codec, bytes -> bytes codecs; sharding alone, with its own list)."""

import numpy as np

from evaluation.readers import limits
from evaluation.readers.zarr_store.base import Invalid, shape_of
from evaluation.readers.zarr_store.metadata import V3_DTYPES, Metadata, fill_value
from evaluation.readers.zarr_store.pipeline import Chunk, Pipeline
from evaluation.readers.zarr_store.registry import v3_codec
from evaluation.readers.zarr_store.settings import check, named, unaccepted
from evaluation.readers.zarr_store.sharding import Sharding
from evaluation.readers.zarr_store.stages import ARRAY_ARRAY, ARRAY_BYTES, BYTES_BYTES, ArrayBytes, Bytes, Stage, Transpose

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


def _all_names(codecs: object) -> list[object]:
    """Every codec name in a v3 codec list, sharding's inner lists included."""
    names: list[object] = []
    for entry in codecs if isinstance(codecs, list) else []:
        name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, dict) else None
        names.append(name)
        if name == "sharding_indexed" and isinstance(entry, dict) and isinstance(entry.get("configuration"), dict):
            names += _all_names(entry["configuration"].get("codecs")) + _all_names(entry["configuration"].get("index_codecs"))
    return names


def _known(name: object) -> bool:
    return not isinstance(name, str) or v3_codec(name) is not None  # not a string: reported as malformed later


def pipeline(codecs: object, shape: tuple[int, ...], dtype_name: str, what: str, nested: bool) -> Pipeline:
    """The pipeline of a v3 codec list for chunks (or shards) of ``shape``."""
    if not isinstance(codecs, list) or not codecs:
        raise Invalid(f"'{what}' must be a non-empty list of codecs")
    if len(codecs) > limits.ZARR_MAX_CODECS:
        raise Invalid(f"'{what}' has more than {limits.ZARR_MAX_CODECS} codecs")
    chunk = Chunk(shape, dtype_name, nested, len(codecs), pipeline)
    permutation: tuple[int, ...] | None = None
    array_bytes: ArrayBytes | None = None
    stages: list[Stage] = []
    for entry in codecs:
        name, config = named(entry, what)
        found = v3_codec(name)
        if found is None:  # listed by _all_names, refused before: never reached
            raise unaccepted([name])
        codec, called, own_name = found
        if codec.place is not None:
            codec.place(chunk)
        elif codec.stage == ARRAY_ARRAY and array_bytes is not None:
            raise Invalid(f"the codec {name} must come before the bytes codec")
        elif codec.stage == ARRAY_BYTES and array_bytes is not None:
            raise Invalid(f"'{what}' has more than one array-to-bytes codec")
        elif codec.stage == BYTES_BYTES and array_bytes is None:
            raise Invalid(f"the codec {str(name)[:40]} must come after the bytes codec")
        stage = codec.make(called, config, chunk, own_name)
        if isinstance(stage, Transpose):  # array -> array: transposes compose (stored = decoded.transpose(permutation))
            order = stage.order
            permutation = order if permutation is None else tuple(permutation[i] for i in order)
        elif isinstance(stage, ArrayBytes):
            array_bytes = stage
        else:
            stages.append(stage)
    if array_bytes is None:
        raise Invalid(f"'{what}' has no bytes codec")
    if isinstance(array_bytes, Sharding):  # the only codec; its inner chunks have the pipeline
        return Pipeline(shape=shape, dtype=array_bytes.inner.dtype, array_bytes=array_bytes)
    assert isinstance(array_bytes, Bytes)
    dtype = np.dtype(V3_DTYPES[dtype_name])
    dtype = dtype.newbyteorder("<" if array_bytes.endian == "little" else ">") if dtype.itemsize > 1 else dtype
    return Pipeline(shape=shape, dtype=dtype, permutation=permutation, stages=stages, array_bytes=array_bytes)


def parse_v3(metadata: object) -> Metadata:
    if not isinstance(metadata, dict):
        raise Invalid("its zarr.json is not a JSON object")
    unknown = [n for n in _all_names(metadata.get("codecs")) if not _known(n)]
    if unknown:
        raise unaccepted(unknown)
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
    shape = shape_of(metadata["shape"], "shape", 0)
    dtype_name = metadata["data_type"]
    if not isinstance(dtype_name, str) or dtype_name not in V3_DTYPES:
        shown = dtype_name if isinstance(dtype_name, str) else type(dtype_name).__name__
        raise Invalid(
            f"has data type {str(shown)[:40]!r}; label arrays must be integer, boolean or float "
            "(e.g. uint8, uint32, int64, float32, bool)",
            readable=False,
        )
    grid_name, grid_config = named(metadata["chunk_grid"], "chunk_grid")
    if grid_name != "regular" or "chunk_shape" not in grid_config or set(grid_config) != {"chunk_shape"}:
        raise Invalid('\'chunk_grid\' must be {"name": "regular", "configuration": {"chunk_shape": [...]}}')
    grid = shape_of(grid_config["chunk_shape"], "chunk_shape", 1)
    if len(grid) != len(shape):
        raise Invalid(f"'chunk_shape' has {len(grid)} dimensions but 'shape' has {len(shape)}")
    key_name, key_config = named(metadata["chunk_key_encoding"], "chunk_key_encoding")
    if key_name not in ("default", "v2"):
        raise Invalid('\'chunk_key_encoding\' must be "default" or "v2"')
    separator = check(key_config, "chunk_key_encoding", {"separator": (lambda v: v in (".", "/"), '"." or "/"')}).get(
        "separator", "/" if key_name == "default" else "."
    )
    dtype = np.dtype(V3_DTYPES[dtype_name])
    fill = fill_value(metadata["fill_value"], dtype, 3)
    names = metadata.get("dimension_names")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(shape) or not all(n is None or isinstance(n, str) for n in names)
    ):
        raise Invalid("'dimension_names' must list one name (or null) per dimension")
    attrs = metadata.get("attributes", {})
    chunks = pipeline(metadata["codecs"], grid, dtype_name, "codecs", nested=False)
    prefix = ("c",) if key_name == "default" else ()
    return Metadata(3, shape, grid, chunks.dtype, fill, chunks, prefix, separator, attrs if isinstance(attrs, dict) else {})
