"""The region-readable array that the grader's own readers (zarr, HDF5, TIFF, NumPy) and the
CellMap volumes share (``RegionArray``) and the base class of the readers' own
(``RegionArrayBase``); the subset of numpy indexing their regions accept, normalised once;
and the rule on chunk grids that zarr and HDF5 share."""

import math
import operator
from types import EllipsisType
from typing import Any, Protocol, Self, SupportsIndex, runtime_checkable

import numpy as np

from evaluation.readers import limits

Index = SupportsIndex | slice | EllipsisType
Region = Index | tuple[Index, ...]  # what ``select`` accepts (anything else: IndexError)


@runtime_checkable
class RegionArray(Protocol):
    """An array that is never loaded whole unless asked: ``shape`` and ``dtype`` (native byte
    order) come from metadata alone, ``read(region)`` decodes only what ``region`` (``...``,
    integers and step-1 slices, or a tuple of them) needs, and ``stored(region)`` is False
    only when the region certainly holds nothing but zeros (nothing is stored there and the
    fill value is 0), so that callers skip it unread.

    Implemented by ``zarr_store.Array``, ``tiff.TiffArray``, ``hdf5.Hdf5Array``,
    ``npy.NpyArray`` (all ``RegionArrayBase``) and the CellMap volumes (``suites/cellmap/volumes.py``: a ``box`` is a tuple of step-1 slices there)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def read(self, region: Region) -> np.ndarray: ...

    def stored(self, region: Region) -> bool: ...


class RegionArrayBase:
    """What the readers' region arrays share, written once: ``ndim``, ``len``, indexing as
    ``read``, a region as slices (``slices``), ``stored`` (True: a format that cannot tell
    where nothing is stored says that something may be), and ``close`` with use as a context
    manager (a reader that holds a file overrides ``close``). A subclass sets ``shape``,
    ``dtype`` (native byte order), ``attrs`` and ``display``, and defines ``read``."""

    shape: tuple[int, ...]
    dtype: np.dtype
    attrs: dict[str, Any]
    display: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __getitem__(self, region: Region) -> np.ndarray:
        return self.read(region)

    def read(self, region: Region = Ellipsis) -> np.ndarray:
        """``region`` (``...``, integers, step-1 slices, or a tuple of them) as a native-order
        array; the whole array by default."""
        raise NotImplementedError

    def stored(self, region: Region = Ellipsis) -> bool:
        return True

    def slices(self, region: Region) -> tuple[list[slice], list[int]]:
        """``region`` as one step-1 slice per axis, and the axes an integer dropped (``select``)."""
        selection, dropped = select(region, self.shape)
        return [slice(start, stop) for start, stop in selection], dropped

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def select(region: object, shape: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[int]]:
    """``region`` (``...``, integers, step-1 slices, or a tuple of them) as ``[(start, stop)]``
    per axis of ``shape``, and the axes indexed by an integer (dropped from the result)."""
    ndim = len(shape)
    items = region if isinstance(region, tuple) else (region,)
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        at = ellipses[0]
        items = items[:at] + (slice(None),) * (ndim - len(items) + 1) + items[at + 1 :]
    if len(items) > ndim:
        raise IndexError(f"too many indices for an array of {ndim} dimensions")
    items = items + (slice(None),) * (ndim - len(items))
    selection, dropped = [], []
    for axis, (item, size) in enumerate(zip(items, shape)):
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step != 1:
                raise IndexError("only slices with step 1 are supported")
            selection.append((start, max(start, stop)))
        elif not isinstance(item, bool) and hasattr(item, "__index__") and type(item).__name__ != "bool_":
            index = operator.index(item)
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
            index %= size
            selection.append((index, index + 1))
            dropped.append(axis)
        else:
            raise IndexError(f"only integers, slices and ... are valid indices, not {type(item).__name__}")
    return selection, dropped


def padding_problem(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int) -> str | None:
    """Why the chunk grid ``chunks`` of an array of ``shape`` is refused, or None.

    Chunks no larger than the array along any axis overhang it by less than one chunk per
    axis, so their grid covers less than 2^ndim times its bytes (a 140x400x400 crop in the
    usual 128^3 chunks: 3x); a grid beyond that (plus ``limits.PADDING_SLACK`` for arrays
    smaller than one chunk) makes every decoded chunk mostly padding: work and memory that no
    array needs (a 260 KB HDF5 file of 384 voxels in one 256 MiB chunk)."""
    counts = [-(-s // c) for s, c in zip(shape, chunks)]
    covered = math.prod(n * c for n, c in zip(counts, chunks)) * itemsize
    nbytes = math.prod(shape) * itemsize
    if covered > (1 << len(shape)) * nbytes + limits.PADDING_SLACK:
        return f"its chunks {tuple(chunks)} cover {covered} bytes for an array of {nbytes} bytes; use chunks no larger than the array"
    return None
