"""Stored chunks of zeros: zarr-python 2 wrote every chunk, empty ones too, so a sparse label
volume written by it stores thousands of chunks that hold nothing. A chunk whose file holds
exactly the bytes the array's codec writes for a chunk of zeros (``Pipeline.zeros_frame``)
reads as an absent one when the fill value is 0, and the passes skip it unread.

Decoding is a function of the bytes, so recognising the frame is exact; a writer that encodes
zeros otherwise is simply not recognised, and its chunks are read as any other."""

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import untrusted
from evaluation.readers.zarr_store.metadata import Metadata

# A chunk file at most this share of its decoded size (or this many bytes) may be a chunk of
# zeros (they shrink some 250-fold; compressed data chunks are larger), and is compared with one.
ZEROS_SHARE, ZEROS_BYTES = 1 / 64, 1024


class ZeroChunks:
    """Which stored chunks of one array are chunks of zeros; each chunk is looked at once (one
    ``stat``, and the bytes only of the few small enough), from any of the reading threads."""

    def __init__(self, path: Path, display: str, meta: Metadata, key: Callable[[Sequence[int]], str]):
        self._path, self._display, self._meta, self._key = path, display, meta, key
        self._grid_shape = tuple(-(-s // c) for s, c in zip(meta.shape, meta.grid))
        self._known: dict[int, bool] = {}  # linear chunk index -> stored as a chunk of zeros
        self._frame: bytes | None = None
        self._frame_made = False
        self._lock = threading.Lock()

    def among(self, coords: np.ndarray) -> np.ndarray:
        """A mask over the stored chunks ``coords`` (rows): which hold a chunk of zeros."""
        found, meta = np.zeros(len(coords), bool), self._meta
        if meta.fill != 0 or meta.sharding is not None or not meta.shape or not len(coords):
            return found
        if not meta.pipeline.in_place:
            return found
        linear = np.ravel_multi_index(coords.T, self._grid_shape)
        for i, (key, row) in enumerate(zip(linear.tolist(), coords.tolist())):
            known = self._known.get(key)
            if known is None:
                known = self._holds_zeros(row)
                with self._lock:
                    self._known[key] = known
            found[i] = known
        return found

    def _holds_zeros(self, row: list[int]) -> bool:
        pipeline, path = self._meta.pipeline, self._path / self._key(row)
        try:
            size = os.lstat(path).st_size
        except OSError:
            return False  # read (and refused) as any chunk
        if size > max(pipeline.nbytes * ZEROS_SHARE, ZEROS_BYTES):
            return False
        with self._lock:
            if not self._frame_made:
                self._frame, self._frame_made = pipeline.zeros_frame(), True
        if self._frame is None or size != len(self._frame):
            return False
        try:
            return untrusted.read_bytes(path, self._display, len(self._frame)) == self._frame
        except (Unusable, OSError):
            return False  # read (and refused) as any chunk
