"""Format 2 metadata: ``.zarray`` (and ``.zattrs``), its codecs looked up in ``registry``."""

from typing import Any

from evaluation.readers import limits
from evaluation.readers.zarr_store.base import Invalid, shape_of
from evaluation.readers.zarr_store.metadata import Metadata, fill_value, v2_dtype
from evaluation.readers.zarr_store.pipeline import Chunk, Pipeline
from evaluation.readers.zarr_store.registry import COMPRESSOR, v2_codec
from evaluation.readers.zarr_store.settings import unaccepted
from evaluation.readers.zarr_store.stages import Filter


def _codec_ids(metadata: dict[str, Any]) -> list[object]:
    """Every codec id named by a .zarray, for a single refusal before anything else."""
    filters = metadata.get("filters")
    entries = [metadata.get("compressor"), *(filters if isinstance(filters, list) else [])]
    return [entry["id"] for entry in entries if isinstance(entry, dict) and entry.get("id") is not None]


def parse_v2(metadata: object, attrs: dict[str, Any]) -> Metadata:
    if not isinstance(metadata, dict):
        raise Invalid("its .zarray is not a JSON object")
    unknown = [i for i in _codec_ids(metadata) if v2_codec(i) is None]
    if unknown:
        raise unaccepted(unknown)
    if metadata.get("zarr_format") != 2 or isinstance(metadata.get("zarr_format"), bool):
        raise Invalid('its .zarray must have "zarr_format": 2')
    for key in ("shape", "chunks", "dtype"):
        if key not in metadata:
            raise Invalid(f"its .zarray has no '{key}'")
    shape = shape_of(metadata["shape"], "shape", 0)
    chunks = shape_of(metadata["chunks"], "chunks", 1)
    if len(chunks) != len(shape):
        raise Invalid(f"'chunks' has {len(chunks)} dimensions but 'shape' has {len(shape)}")
    dtype = v2_dtype(metadata["dtype"])
    fill = fill_value(metadata.get("fill_value"), dtype, 2)
    order = metadata.get("order", "C")
    if order not in ("C", "F"):
        raise Invalid('\'order\' must be "C" or "F"')
    separator = metadata.get("dimension_separator", ".")
    if separator is None:
        separator = "."
    if separator not in (".", "/"):
        raise Invalid('\'dimension_separator\' must be "." or "/"')
    filters = metadata.get("filters")
    if filters is not None and not isinstance(filters, list):
        raise Invalid("'filters' must be null or a list of codecs")
    chunk = Chunk(chunks)
    stages = []
    for entry in filters or []:
        if not isinstance(entry, dict) or "id" not in entry:
            raise Invalid("every filter must be a JSON object with an 'id'")
        codec = v2_codec(entry["id"])
        if codec is None:  # an id of null
            raise unaccepted([entry["id"]])
        stages.append(codec.make(codec.name, {k: v for k, v in entry.items() if k != "id"}, chunk))
    compressor = metadata.get("compressor")
    if compressor is not None:
        codec = v2_codec(compressor.get("id")) if isinstance(compressor, dict) else None
        if codec is None or codec.v2 != COMPRESSOR:
            raise Invalid('\'compressor\' must be null or a compressor such as {"id": "zstd"}')
        stages.append(codec.make(codec.name, {k: v for k, v in compressor.items() if k != "id"}, chunk))
    if len(stages) > limits.ZARR_MAX_CODECS:
        raise Invalid(f"it has more than {limits.ZARR_MAX_CODECS} filters")
    if any(isinstance(s, Filter) and s.name == "packbits" for s in stages) and dtype.kind != "b":
        raise Invalid("the filter packbits only applies to boolean arrays")
    pipeline = Pipeline(shape=chunks, dtype=dtype, order=order, stages=stages)
    return Metadata(2, shape, chunks, dtype, fill, pipeline, (), separator, attrs)
