"""What every part of the zarr reader shares: the two ways a zarr is refused (its metadata,
one of its chunks) and small value checks (shapes among them). The limits are in
``readers.limits``."""

import os
import re
from typing import TypeGuard

import numpy as np

from evaluation.readers import limits

ARRAY, GROUP = "array", "group"

THREADS = max(1, min(4, os.cpu_count() or 1))  # chunk-decoding threads of one read
ACCEPTED = "store label arrays with blosc, zstd or gzip (the accepted codecs are listed in the participants' guide)"
V2_DTYPE = re.compile(r"([<>|])([biuf])([1248])")
VALID_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}
CANONICAL_INT = re.compile(r"0|[1-9][0-9]{0,18}")
MISSING = 2**64 - 1  # a shard index entry for an absent inner chunk


class Invalid(Exception):
    """Metadata refused; the message follows the array's name (``open_array`` makes it an
    ``errors.Unusable`` naming the array)."""

    def __init__(self, message: str, readable: bool = True):
        super().__init__(message if not readable else f"not a readable zarr array: {message}")


class Corrupt(Exception):
    """A chunk refused while decoding; ``str`` says why (the reader names the chunk)."""


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype


def shape_of(value: object, what: str, minimum: int) -> tuple[int, ...]:
    """A shape (or chunk shape) of the metadata: a list of integers, each at least ``minimum``."""
    if not isinstance(value, list) or not all(is_int(v) and minimum <= v <= limits.ZARR_MAX_EXTENT for v in value):
        lowest = "non-negative" if minimum == 0 else "positive"
        raise Invalid(f"'{what}' must be a list of {lowest} integers (at most {limits.ZARR_MAX_EXTENT} each)")
    if len(value) > limits.ZARR_MAX_DIMENSIONS:
        raise Invalid(f"'{what}' has {len(value)} dimensions; at most {limits.ZARR_MAX_DIMENSIONS} are accepted")
    return tuple(int(v) for v in value)
