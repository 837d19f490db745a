"""Format 2 metadata: ``.zarray`` (and ``.zattrs``)."""

from evaluation.readers import limits
from evaluation.readers.zarr_store.base import Invalid
from evaluation.readers.zarr_store.metadata import _fill_value, _Metadata, _shape, _v2_dtype
from evaluation.readers.zarr_store.pipeline import (
    _CHECKSUMS,
    _COMPRESSORS,
    _FILTERS,
    _byte_stage,
    _Filter,
    _Pipeline,
    _unaccepted,
)


def _codec_ids_v2(metadata: dict) -> list[str]:
    """Every codec id named by a .zarray, for a single refusal before anything else."""
    filters = metadata.get("filters")
    entries = [metadata.get("compressor"), *(filters if isinstance(filters, list) else [])]
    return [entry["id"] for entry in entries if isinstance(entry, dict) and entry.get("id") is not None]


def _parse_v2(metadata, attrs: dict) -> _Metadata:
    if not isinstance(metadata, dict):
        raise Invalid("its .zarray is not a JSON object")
    unknown = [
        i for i in _codec_ids_v2(metadata) if not (isinstance(i, str) and (i in _COMPRESSORS or i in _CHECKSUMS or i in _FILTERS))
    ]
    if unknown:
        raise _unaccepted(unknown)
    if metadata.get("zarr_format") != 2 or isinstance(metadata.get("zarr_format"), bool):
        raise Invalid('its .zarray must have "zarr_format": 2')
    for key in ("shape", "chunks", "dtype"):
        if key not in metadata:
            raise Invalid(f"its .zarray has no '{key}'")
    shape = _shape(metadata["shape"], "shape", 0)
    chunks = _shape(metadata["chunks"], "chunks", 1)
    if len(chunks) != len(shape):
        raise Invalid(f"'chunks' has {len(chunks)} dimensions but 'shape' has {len(shape)}")
    dtype = _v2_dtype(metadata["dtype"])
    fill = _fill_value(metadata.get("fill_value"), dtype, 2)
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
    stages = []
    for entry in filters or []:
        if not isinstance(entry, dict) or "id" not in entry:
            raise Invalid("every filter must be a JSON object with an 'id'")
        stages.append(_byte_stage(entry["id"], {k: v for k, v in entry.items() if k != "id"}, filters_allowed=True))
    compressor = metadata.get("compressor")
    if compressor is not None:
        if not isinstance(compressor, dict) or compressor.get("id") not in _COMPRESSORS:
            raise Invalid('\'compressor\' must be null or a compressor such as {"id": "zstd"}')
        stages.append(_byte_stage(compressor["id"], {k: v for k, v in compressor.items() if k != "id"}, filters_allowed=False))
    if len(stages) > limits.ZARR_MAX_CODECS:
        raise Invalid(f"it has more than {limits.ZARR_MAX_CODECS} filters")
    if any(isinstance(s, _Filter) and s.name == "packbits" for s in stages) and dtype.kind != "b":
        raise Invalid("the filter packbits only applies to boolean arrays")
    pipeline = _Pipeline(shape=chunks, dtype=dtype, order=order, stages=stages)
    return _Metadata(2, shape, chunks, dtype, fill, pipeline, None, (), separator, attrs)
