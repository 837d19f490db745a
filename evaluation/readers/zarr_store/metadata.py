"""Metadata values shared by formats 2 and 3 (data types, shapes, fill values), the parsed
document, and the bounds on chunk grids and chunk sizes checked before anything is read."""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from evaluation.readers import limits, regions
from evaluation.readers.zarr_store.base import V2_DTYPE, VALID_SIZES, Invalid, is_int, native
from evaluation.readers.zarr_store.pipeline import Pipeline

if TYPE_CHECKING:
    from evaluation.readers.zarr_store.sharding import Sharding

V3_DTYPES = {
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


def v2_dtype(value: object, what: str = "dtype") -> np.dtype:
    """A numeric or boolean numpy dtype from a zarr v2 type string such as '<u4'."""
    if isinstance(value, list):
        raise Invalid(f"'{what}' is a structured data type; label arrays must be integer, boolean or float")
    if not isinstance(value, str):
        raise Invalid(f"'{what}' must be a data type string such as '<u4'")
    match = V2_DTYPE.fullmatch(value)
    if match is None or int(match.group(3)) not in VALID_SIZES[match.group(2)]:
        raise Invalid(
            f"has data type {value[:40]!r}; label arrays must be integer, boolean or float "
            "(e.g. '|u1', '<u4', '<i8', '<f4', '|b1')",
            readable=False,
        )
    order, kind, size = match.groups()
    if order == "|" and size != "1":
        raise Invalid(f"'{what}' {value!r} has no byte order; write '<{kind}{size}' or '>{kind}{size}'")
    return np.dtype(("|" if size == "1" else order) + kind + size)


_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def fill_value(value: object, dtype: np.dtype, version: int) -> np.generic:
    """The fill value as a numpy scalar of the native dtype. v2 ``null`` reads as 0."""
    target = native(dtype)
    scalar: Callable[[object], np.generic] = target.type
    if value is None:
        if version == 2:
            return scalar(0)
        raise Invalid("'fill_value' must not be null")
    if dtype.kind == "b":
        if isinstance(value, bool) or (is_int(value) and value in (0, 1)):
            return scalar(bool(value))
        raise Invalid("'fill_value' of a boolean array must be true or false")
    if dtype.kind in "iu":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        info = np.iinfo(dtype)
        if not is_int(value) or not info.min <= value <= info.max:
            raise Invalid(f"'fill_value' must be an integer between {info.min} and {info.max}")
        return scalar(value)
    # floats
    if isinstance(value, str):
        if value in _SPECIAL_FLOATS:
            return scalar(_SPECIAL_FLOATS[value])
        if version == 3 and re.fullmatch(r"0x[0-9a-fA-F]+", value) and len(value) == 2 + 2 * dtype.itemsize:
            found: np.generic = np.frombuffer(bytes.fromhex(value[2:]), dtype=dtype.newbyteorder(">"))[0].astype(target)
            return found
        raise Invalid('\'fill_value\' must be a number, "NaN", "Infinity" or "-Infinity"')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid("'fill_value' of a float array must be a number")
    converted = float(value) if is_int(value) and abs(value) < 2**1023 else value
    if not isinstance(converted, float) or (math.isfinite(converted) and abs(converted) > float(np.finfo(dtype).max)):
        raise Invalid(f"'fill_value' {value} does not fit the data type {dtype}")
    return scalar(converted)


@dataclass
class Metadata:
    version: int
    shape: tuple[int, ...]
    grid: tuple[int, ...]  # chunk (shard) shape
    dtype: np.dtype  # as stored
    fill: object
    pipeline: Pipeline  # of a chunk, or of a shard (then its array -> bytes stage is the sharding)
    prefix: tuple[str, ...]  # key parts before the chunk coordinates
    separator: str
    attrs: dict[str, Any]

    @property
    def sharding(self) -> "Sharding | None":
        """The sharding stage of a sharded array, else None."""
        stage = self.pipeline.array_bytes
        return cast("Sharding", stage) if stage.partial else None


def check_sizes(meta: Metadata) -> None:
    """Bounds on the chunk grid and chunk sizes, before anything is read."""
    itemsize = meta.dtype.itemsize
    voxels = math.prod(meta.shape)
    if voxels > limits.ZARR_MAX_VOXELS:
        raise Invalid(f"its shape {meta.shape} has more than {limits.ZARR_MAX_VOXELS} voxels")
    counts = [-(-s // c) for s, c in zip(meta.shape, meta.grid)]
    if math.prod(counts) > limits.ZARR_MAX_GRID_CHUNKS:
        raise Invalid(f"it has {math.prod(counts)} chunks; at most {limits.ZARR_MAX_GRID_CHUNKS} are accepted: use larger chunks")
    problem = regions.padding_problem(meta.shape, meta.grid, itemsize)
    if problem:
        raise Invalid(problem)
    if meta.sharding is not None:
        inner = math.prod(-(-s // c) for s, c in zip(meta.shape, meta.sharding.inner.shape))
        if inner > limits.ZARR_MAX_INNER_CHUNKS:
            raise Invalid(
                f"its shards hold {inner} inner chunks of shape {meta.sharding.inner.shape}; at most "
                f"{limits.ZARR_MAX_INNER_CHUNKS} are accepted: use larger inner chunks"
            )
    chunk = meta.pipeline if meta.sharding is None else None  # a shard is never decoded whole
    for pipeline, what in ((chunk, "chunk"), (meta.sharding.inner if meta.sharding else None, "inner chunk")):
        if pipeline is None:
            continue
        size = math.prod(pipeline.shape) * itemsize
        if size > limits.ZARR_MAX_CHUNK_BYTES:
            raise Invalid(
                f"one {what} of shape {pipeline.shape} holds {size} bytes; at most {limits.ZARR_MAX_CHUNK_BYTES >> 20} MiB "
                "are accepted: use smaller chunks"
            )
        pipeline.plan()
