"""Label images and instance stacks read as sparse per-channel voxel lists.

An instance stack (one channel per instance, channels may overlap, as FISBe releases its
ground truth) is many times the size of one label image, and thin instances such as neurons
fill a tiny share of it: a 7 x 385 x 685 x 686 sample is gigabytes as a dense array. So the
array is never read whole: :func:`open_labels` opens it in a zarr, HDF5 or TIFF file with its
size-1 axes dropped (as ``np.squeeze`` does in the FISBe reference, ``evaluate.evaluate_file``),
and :func:`stream_channels` reads a region of it in chunk-aligned slabs, keeping only the flat
indices and ids of the nonzero voxels of each channel (:class:`Channel`).

What the ids mean (relabelling, overlaps between channels) is not decided here; the metrics
hold the result as :class:`evaluation.metrics.sparse_labels.SparseLabels`.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import formats
from evaluation.readers.regions import RegionArray

SUFFIXES = (".hdf", ".h5", ".hdf5", ".zarr", ".tif", ".tiff")  # formats that hold instance stacks (region reads)
SLAB_BYTES = 32 << 20  # bytes of one slab read from a channel group


@dataclass
class Channel:
    """The nonzero voxels of one channel: sorted flat indices and their (original) ids."""

    index: np.ndarray
    values: np.ndarray


class LabelArray:
    """A label array in a file with its size-1 axes dropped (``np.squeeze``), read by region."""

    def __init__(self, array: RegionArray, display: str, attrs: dict[str, Any] | None = None):
        self.array, self.display, self.attrs = array, display, attrs or {}
        full = tuple(int(s) for s in array.shape)
        self.kept = [axis for axis, size in enumerate(full) if size != 1]
        self.shape = tuple(full[a] for a in self.kept)
        chunks = getattr(array, "chunks", None)
        self.chunks = tuple(int(chunks[a]) for a in self.kept) if chunks else None
        if np.dtype(array.dtype).kind not in "biuf":
            raise Unusable(f"{display}: has data type {array.dtype}; labels must be integers")

    def _index(self, region: tuple[slice, ...]) -> tuple[int | slice, ...]:
        index: list[int | slice] = []
        items = iter(region)
        for axis in range(len(self.array.shape)):
            index.append(next(items) if axis in self.kept else 0)
        return tuple(index)

    def stored(self, region: tuple[slice, ...]) -> bool:
        """False when the file stores nothing in ``region`` and it reads as zeros (a stack of
        a million channels with nothing stored is skipped, not read)."""
        return bool(self.array.stored(self._index(region)))

    def read(self, region: tuple[slice, ...]) -> np.ndarray:
        return np.asarray(self.array.read(self._index(region)))


@contextmanager
def open_labels(path: Path, keys: tuple[str, ...], display: str, max_voxels: int | None = None) -> Iterator[LabelArray]:
    """Yields a :class:`LabelArray` for a zarr, HDF5 or TIFF file (``SUFFIXES``); the first of
    ``keys`` that exists is used, else the file's only array (in a zarr, within three levels).
    HDF5 and TIFF arrays declaring more than ``max_voxels`` voxels are refused from their
    metadata; a TIFF is read page by page, never whole. Problems raise ``errors.Unusable``."""
    found = formats.of(path, display, accepted=SUFFIXES)
    assert found.open is not None  # every format of SUFFIXES reads by region
    with found.open(path, display, keys=keys, max_voxels=max_voxels) as array:
        yield LabelArray(array, display, dict(getattr(array, "attrs", None) or {}))


def stream_channels(labels: LabelArray, region: tuple[slice, ...]) -> list[Channel]:
    """The nonzero voxels of every channel inside the spatial ``region``, read in chunk-aligned
    z-slabs of as many channels as one chunk holds (each chunk is decoded once)."""
    spatial = tuple(s.stop - s.start for s in region)
    plane = spatial[1] * spatial[2]
    channels = labels.shape[0] if len(labels.shape) == 4 else 0
    group = min(labels.chunks[0], channels) if channels and labels.chunks else 1
    itemsize = np.dtype(labels.array.dtype).itemsize
    slab = max(1, SLAB_BYTES // max(1, plane * itemsize * group))
    if labels.chunks:
        step = labels.chunks[-3]
        slab = max(step, slab // step * step)
    parts: list[tuple[list[np.ndarray], list[np.ndarray]]] = [([], []) for _ in range(max(channels, 1))]
    for first in range(0, max(channels, 1), group):
        lead = (slice(first, first + group),) if channels else ()
        for z in range(0, spatial[0], slab):
            z_region = slice(region[0].start + z, region[0].start + min(z + slab, spatial[0]))
            where = lead + (z_region, region[1], region[2])
            if not labels.stored(where):
                continue
            block = labels.read(where)
            for offset, image in enumerate(block if channels else [block]):
                flat = np.ascontiguousarray(image).reshape(-1)
                found = nonzero(flat)
                parts[first + offset][0].append(found + z * plane)
                parts[first + offset][1].append(_ids(flat[found], labels.display))
    return [Channel(np.concatenate(index), np.concatenate(values)) for index, values in parts if index]


def nonzero(flat: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` of a contiguous 1-D array, scanning 8-byte words first: labels are
    sparse, so most words are zero and only the few nonzero ones are looked into."""
    itemsize = flat.dtype.itemsize
    if not flat.flags.c_contiguous or itemsize >= 8 or flat.nbytes % 8 or flat.dtype.kind not in "biu":
        return np.flatnonzero(flat)
    per_word = 8 // itemsize
    words = np.flatnonzero(flat.view(np.uint64))
    candidates = (words[:, None] * per_word + np.arange(per_word)).reshape(-1)
    found: np.ndarray = candidates[flat[candidates] != 0]
    return found


def _ids(values: np.ndarray, display: str) -> np.ndarray:
    """Label values as int64. Negative ids are refused, as the FISBe reference asserts
    (``util.check_fix_and_unify_ids``), and so are fractional ones and ids beyond int64."""
    if values.dtype.kind == "f" and (not np.all(np.isfinite(values)) or np.any(values != np.floor(values))):
        raise Unusable(f"{display}: holds fractional or non-finite values; labels must be whole numbers")
    if values.size and values.min() < 0:
        raise Unusable(f"{display}: holds negative ids; instance ids must be >= 0")
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        raise Unusable(f"{display}: holds ids above 2^63")
    return values.astype(np.int64)
