"""NumPy ``.npy`` files: the header parsed, never unpickled; an array read whole (``read``) or
region by region along its first axis with positioned reads (``NpyArray``).

``np.load(allow_pickle=False)`` refuses object arrays, so a ``.npy`` file cannot run code;
what it can still do is declare a shape its bytes do not hold, which ``NpyArray`` checks
against the file's size before a byte of data is read (``read`` is bounded by the caller's
``max_voxels``, compared with ``probe`` first: ``images.read``). No memory map is kept for
C-ordered files, so resident memory stays bounded by the regions read.
"""

import os
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import regions, untrusted
from evaluation.readers.volume import native, reason

# what numpy raises for a .npy file it cannot read: a malformed or truncated header or body
# (a header in the legacy format goes through ``tokenize`` and ``ast``, which raise their own)
NUMPY_ERRORS = (ValueError, EOFError, OSError, SyntaxError, tokenize.TokenError)
NUMERIC_KINDS = "biuf"
T = TypeVar("T")


def guard(action: Callable[[], T], display: str) -> T:
    """Run a read of a .npy file; numpy's refusals become ``Unusable`` naming it (running out
    of memory too), anything else is a bug and propagates."""
    try:
        return action()
    except MemoryError:
        raise Unusable(f"{display}: is too large to read in the memory available") from None
    except NUMPY_ERRORS as exc:
        if "pickle" in str(exc).lower():
            raise Unusable(
                f"{display}: holds pickled Python objects, which are never loaded; save a plain numeric array"
            ) from None
        raise Unusable(f"{display}: cannot be read as .npy ({reason(exc)}); the file may be truncated or corrupt") from None


def read(path: Path, display: str) -> np.ndarray:
    """The whole array (``np.load`` without pickles)."""

    def load() -> np.ndarray:
        with untrusted.open_regular(path, display) as f:
            array: np.ndarray = np.load(f, allow_pickle=False)
        return array

    return guard(load, display)


def probe(path: Path, display: str) -> tuple[int, ...]:
    """The shape from the header alone."""

    def shape() -> tuple[int, ...]:
        with untrusted.open_regular(path, display) as f:
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            found, _, _ = header(f)
        return tuple(int(n) for n in found)

    return guard(shape, display)


class NpyArray(regions.RegionArrayBase):
    """A ``.npy`` array read by region: rows of the first axis from positioned reads of the
    file (a column-major file, whose rows are scattered, is mapped once and copied from).
    Numeric data types only; the header's size is checked against the file's."""

    def __init__(self, path: Path, display: str):
        self.display, self.attrs, self._path = display, {}, path
        self._file = untrusted.open_regular(path, display)
        try:
            version = np.lib.format.read_magic(self._file)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if reader is None:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, fortran, dtype = reader(self._file)
        except NUMPY_ERRORS as exc:
            self._file.close()
            raise Unusable(f"{display}: not a readable .npy file ({exc})") from None
        if dtype.hasobject or dtype.kind not in NUMERIC_KINDS:
            self._file.close()
            raise Unusable(f"{display}: holds {dtype} values; save a plain numeric array (never pickled objects)")
        self.shape, self.dtype, self._fortran = tuple(shape), dtype, fortran
        self._offset = self._file.tell()
        expected = self._offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if os.fstat(self._file.fileno()).st_size < expected:
            self._file.close()
            raise Unusable(f"{display}: the file is shorter than its header says; it may be truncated")
        self._whole: np.ndarray | None = None

    def read(self, region: regions.Region = Ellipsis) -> np.ndarray:
        slices, dropped = self.slices(region)
        if self._fortran or not self.shape:  # rows scattered over the file (or none): map it once
            whole = self._whole
            if whole is None:
                whole = self._whole = np.load(self._path, allow_pickle=False, mmap_mode="r")
            out = native(np.ascontiguousarray(whole[tuple(slices)]))
        else:
            rows = self._rows(slices[0].start, slices[0].stop)
            out = rows if all(s == slice(0, n) for s, n in zip(slices[1:], self.shape[1:])) else rows[(slice(None), *slices[1:])]
            out = native(np.ascontiguousarray(out))
        if dropped:
            out = out.reshape([s.stop - s.start for axis, s in enumerate(slices) if axis not in dropped])
        return out

    def _rows(self, z0: int, z1: int) -> np.ndarray:
        plane = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        out = np.empty((z1 - z0, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8).data)
        done, start = 0, self._offset + z0 * plane
        while done < view.nbytes:
            got = os.preadv(self._file.fileno(), [view[done:]], start + done)
            if got <= 0:
                raise Unusable(f"{self.display}: the file ended early; it may be truncated")
            done += got
        return out

    def close(self) -> None:
        self._file.close()
