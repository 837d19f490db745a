"""Volumes read a z-slab at a time, and work mapped over slabs on a few threads.

Full-size tomography volumes (1080 x 1280 x 1280 voxels, 7 GB as float32) do not fit a
scoring container next to their ground truth, so they are never loaded whole: ``open_slabs``
gives an object whose ``read(z0, z1)`` returns slices ``z0 <= z < z1`` of the first axis.

- NumPy ``.npy``: the header is parsed (never unpickled), slabs come from positioned reads of
  the file (no memory map, so resident memory stays bounded by the slabs in flight);
- HDF5: region reads of one dataset (``readers.hdf5``: links, external storage and virtual
  datasets refused, chunks decoded with bounds);
- zarr: region reads of one array (codec whitelist of ``zarr_store``);
- TIFF: region reads of the first series, page by page (``readers.tiff``);
- other formats (MetaImage, NIfTI, NRRD): read whole by ``images.read`` and sliced.
"""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import images, untrusted
from evaluation.readers.volume import native

_NUMERIC_KINDS = "biuf"


class Slabs:
    """A 3-D array read slab by slab. ``display`` names it in messages."""

    shape: tuple[int, ...]
    dtype: np.dtype
    display: str
    attrs: dict

    def read(self, z0: int, z1: int) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Npy(Slabs):
    def __init__(self, path: Path, display: str):
        self.display, self.attrs, self._path = display, {}, path
        self._file = untrusted.open_regular(path, display)
        try:
            version = np.lib.format.read_magic(self._file)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if reader is None:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, fortran, dtype = reader(self._file)
        except images.NUMPY_ERRORS as exc:
            self._file.close()
            raise Unusable(f"{display}: not a readable .npy file ({exc})") from None
        if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS:
            self._file.close()
            raise Unusable(f"{display}: holds {dtype} values; save a plain numeric array (never pickled objects)")
        self.shape, self.dtype, self._fortran = tuple(shape), dtype, fortran
        self._offset = self._file.tell()
        expected = self._offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if os.fstat(self._file.fileno()).st_size < expected:
            self._file.close()
            raise Unusable(f"{display}: the file is shorter than its header says; it may be truncated")
        self._whole = None

    def read(self, z0: int, z1: int) -> np.ndarray:
        if self._fortran:  # column-major: a slab is scattered over the file, read it once
            if self._whole is None:
                self._whole = np.load(self._path, allow_pickle=False, mmap_mode="r")
            return native(np.ascontiguousarray(self._whole[z0:z1]))
        plane = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        out = np.empty((z1 - z0, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        done, start = 0, self._offset + z0 * plane
        while done < view.nbytes:
            got = os.preadv(self._file.fileno(), [view[done:]], start + done)
            if got <= 0:
                raise Unusable(f"{self.display}: the file ended early; it may be truncated")
            done += got
        return native(out)

    def close(self) -> None:
        self._file.close()


class _Hdf5(Slabs):
    def __init__(self, path: Path, key: str | None, display: str):
        from evaluation.readers import hdf5

        self.display = display
        self._array = hdf5.open_array(path, key, display)
        self.shape, self.dtype, self.attrs = self._array.shape, self._array.dtype, dict(self._array.attrs)

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self._array[z0:z1]

    def close(self) -> None:
        self._array.close()


class _Zarr(Slabs):
    def __init__(self, path: Path, key: str | None, display: str):
        from evaluation.readers import zarr_store

        self.display = display
        self._array = images.open_zarr(path, key, display)
        self.shape, self.dtype = tuple(self._array.shape), np.dtype(self._array.dtype)
        self.attrs = zarr_store.attributes(self._array)

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self._array.read(slice(z0, z1))


class _Tiff(Slabs):
    def __init__(self, path: Path, display: str):
        from evaluation.readers import tiff

        self.display, self.attrs = display, {}
        self._array = tiff.open_array(path, display)
        self.shape, self.dtype = self._array.shape, self._array.dtype

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self._array[z0:z1]  # decodes only the pages of slices z0..z1

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
    kind = images.suffix(path)
    if kind in images.NUMPY_SUFFIXES:
        slabs = _Npy(path, display)
    elif kind in images.HDF5_SUFFIXES:
        slabs = _Hdf5(path, key, display)
    elif kind in images.ZARR_SUFFIXES:
        slabs = _Zarr(path, key, display)
    elif kind in images.TIFF_SUFFIXES:
        slabs = _Tiff(path, display)
    elif kind in images.SUFFIXES:
        slabs = _Whole(images.read(path, key, display, max_voxels=max_voxels), display)
    else:
        raise Unusable(f"{display}: unsupported file type {kind!r}; use one of {', '.join(images.SUFFIXES)}")
    if slabs.dtype.kind not in _NUMERIC_KINDS:
        slabs.close()
        raise Unusable(f"{display}: has data type {slabs.dtype}; expected numbers")
    return slabs


def slab_bounds(n: int, size: int, align: int = 1) -> list[tuple[int, int]]:
    """``[(z0, z1), ...]`` covering ``0 <= z < n`` in slabs of ``size`` slices (rounded up to a
    multiple of ``align``, so that 2 x 2 x 2 packed blocks are never split)."""
    size = max(align, -(-max(1, size) // align) * align)
    return [(z, min(z + size, n)) for z in range(0, n, size)]


def map_slabs(function, bounds: list[tuple[int, int]], threads: int) -> list:
    """``[function(z0, z1) for each slab]`` on ``threads`` threads (numpy releases the GIL in
    its kernels, so slabs overlap I/O and compute); results in slab order."""
    if threads <= 1 or len(bounds) <= 1:
        return [function(z0, z1) for z0, z1 in bounds]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda b: function(*b), bounds))


def slices_per_slab(plane_voxels: int, voxel_budget: int = SLAB_VOXELS) -> int:
    """Slices per slab so that a slab holds about ``voxel_budget`` voxels (at least one)."""
    return max(1, voxel_budget // max(1, plane_voxels))
