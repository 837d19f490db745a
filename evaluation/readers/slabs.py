"""Volumes read a z-slab at a time, and work mapped over slabs on a few threads.

Full-size tomography volumes (1080 x 1280 x 1280 voxels, 7 GB as float32) do not fit a
scoring container next to their ground truth, so they are never loaded whole: ``open_slabs``
gives an object whose ``read(z0, z1)`` returns slices ``z0 <= z < z1`` of the first axis.

- formats that read by region (``Format.open`` in ``readers.formats``): a slab is one region
  read. NumPy ``.npy``: positioned reads of the file, its header parsed, never unpickled (no
  memory map, so resident memory stays bounded by the slabs in flight: ``readers.npy``);
  HDF5: one dataset (``readers.hdf5``: links, external storage and virtual datasets refused,
  chunks decoded with bounds); zarr: one array (codec whitelist of ``zarr_store``); TIFF: the
  first series, page by page (``readers.tiff``);
- the others (MetaImage, NIfTI, NRRD, PNG): read whole by ``images.read`` and sliced.
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, TypeVar

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import formats, images
from evaluation.readers.npy import NUMERIC_KINDS as _NUMERIC_KINDS
from evaluation.readers.regions import RegionArrayBase

T = TypeVar("T")


class Slabs:
    """A 3-D array read slab by slab. ``display`` names it in messages."""

    shape: tuple[int, ...]
    dtype: np.dtype
    display: str
    attrs: dict[str, Any]

    def read(self, z0: int, z1: int) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Regions(Slabs):
    """A format read region by region (``Format.open``): a slab is the region ``z0:z1``,
    decoded alone (only the chunks, pages or rows it needs)."""

    def __init__(self, array: RegionArrayBase, display: str):
        self.display, self._array = display, array
        self.shape, self.dtype = tuple(array.shape), np.dtype(array.dtype)
        self.attrs = dict(getattr(array, "attrs", None) or {})

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self._array.read(slice(z0, z1))

    def close(self) -> None:
        self._array.close()


class _Whole(Slabs):
    def __init__(self, volume: images.Volume, display: str):
        self._array, self.display, self.attrs = volume.array, display, volume.attrs or {}
        self.shape, self.dtype = tuple(self._array.shape), self._array.dtype

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self._array[z0:z1]


# Voxels per slab when a volume is processed in slabs: ~16 M, a few hundred MB of temporaries
# per thread. The one slab size of every suite.
SLAB_VOXELS = 1 << 24


def open_slabs(path: Path, key: str | None = None, display: str | None = None, max_voxels: int | None = None) -> Slabs:
    """A slab reader for ``path``; ``key`` selects the HDF5 dataset or zarr array. Problems
    raise ``errors.Unusable``. Formats that can only be read whole are refused from their
    header beyond ``max_voxels``; the others are read slab by slab, so the caller checks
    ``shape`` before reading."""
    display = display or path.name
    if not path.exists():
        raise Unusable(f"{display}: file not found")
    found = formats.of(path, display)
    slabs: Slabs
    if found.open is not None:
        slabs = _Regions(found.open(path, display, key=key), display)
    else:
        slabs = _Whole(images.read(path, key, display, max_voxels=max_voxels), display)
    if slabs.dtype.kind not in _NUMERIC_KINDS:
        slabs.close()
        raise Unusable(f"{display}: has data type {slabs.dtype}; expected numbers")
    return slabs


def slab_bounds(n: int, size: int, align: int = 1) -> list[tuple[int, int]]:
    """``[(z0, z1), ...]`` covering ``0 <= z < n`` in slabs of ``size`` slices (rounded up to a
    multiple of ``align``, so that 2 x 2 x 2 packed blocks are never split)."""
    size = max(align, -(-max(1, size) // align) * align)
    return [(z, min(z + size, n)) for z in range(0, n, size)]


def map_slabs(function: Callable[[int, int], T], bounds: list[tuple[int, int]], threads: int) -> list[T]:
    """``[function(z0, z1) for each slab]`` on ``threads`` threads (numpy releases the GIL in
    its kernels, so slabs overlap I/O and compute); results in slab order."""
    if threads <= 1 or len(bounds) <= 1:
        return [function(z0, z1) for z0, z1 in bounds]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda b: function(*b), bounds))


def slices_per_slab(plane_voxels: int, voxel_budget: int = SLAB_VOXELS) -> int:
    """Slices per slab so that a slab holds about ``voxel_budget`` voxels (at least one)."""
    return max(1, voxel_budget // max(1, plane_voxels))
