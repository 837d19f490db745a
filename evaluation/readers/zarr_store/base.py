"""What every part of the zarr reader shares: the limits, the two ways a zarr is refused
(metadata, chunk) and small value checks."""

import os
import re

import numpy as np

from evaluation.errors import PhaseError, SubmissionError
from evaluation.readers import untrusted

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
_V2_DTYPE = re.compile(r"([<>|])([biuf])([1248])")
_VALID_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}
_CANONICAL_INT = re.compile(r"0|[1-9][0-9]{0,18}")
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


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype
