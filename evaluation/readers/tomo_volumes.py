"""TomoChallenge segmentations: bit-packed or plain volumes, binarised, read slab by slab.

A submission is either the challenge's own bit-packed file (tomochallenge/tomochallenge_utils
@fab535f ``prepare_submission``: HDF5 dataset ``vol``, one uint8 per 2 x 2 x 2 voxels) or a
plain volume of the scored grid in any supported format. A voxel counts as set iff its value
is ``> 0.5`` (NaN is not), as the reference decides when packing. Which of the two a file is
follows from its shape: a uint8 array of half the grid size in every axis (rounded up) is
packed, an array of the grid size is plain; anything else is refused.

A plain volume may also cover a longer stack of which only a window of slices is scored (the
fuel cell's reconstructed slices 240-840 of 1100): ``window`` says which.

Both tracks score one such volume per case (a phantom, a time step), named after the case:
``match_files`` pairs them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation import log
from evaluation.errors import Unusable
from evaluation.readers import bitpack, formats
from evaluation.readers.slabs import Slabs, open_slabs

PACKED_DATASET = "vol"

_log = log.get(__name__)


@dataclass(frozen=True)
class Window:
    """Slices ``start <= z < stop`` of a ``total``-slice stack are scored; a volume may hold
    the whole stack or just the window."""

    start: int
    stop: int
    total: int

    @property
    def length(self) -> int:
        return self.stop - self.start


def binarize(values: np.ndarray) -> np.ndarray:
    """``values > 0.5`` as a 0/1 uint8 array without widening integers to float64
    (for integers ``> 0.5`` is ``> 0``; NaN compares false)."""
    if values.dtype == bool:
        return values.view(np.uint8)
    above: np.ndarray = np.greater(values, 0) if values.dtype.kind in "ui" else np.greater(values, values.dtype.type(0.5))
    return above.view(np.uint8)


def packed_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-n // bitpack.BLOCK) for n in shape)


class BinaryVolume:
    """A 0/1 volume on the scored grid; ``slab(z0, z1)`` returns contiguous uint8 slices."""

    shape: tuple[int, int, int]
    description: str | None = None
    packed: bool = False

    def slab(self, z0: int, z1: int) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Packed(BinaryVolume):
    packed = True

    def __init__(self, planes: np.ndarray, shape: tuple[int, int, int], description: str | None):
        self._planes, self.description = planes, description
        self.shape = (shape[0], shape[1], shape[2])

    def slab(self, z0: int, z1: int) -> np.ndarray:
        return np.ascontiguousarray(bitpack.unpack(self._planes, z0, z1, self.shape[1:]))


class _Plain(BinaryVolume):
    def __init__(self, slabs: Slabs, shape: tuple[int, int, int], offset: int):
        self._slabs, self._offset = slabs, offset
        self.shape = (shape[0], shape[1], shape[2])

    def slab(self, z0: int, z1: int) -> np.ndarray:
        return binarize(self._slabs.read(self._offset + z0, self._offset + z1))

    def close(self) -> None:
        self._slabs.close()


def _dataset_key(path: Path, display: str) -> str | None:
    """The packed file's dataset name when it is present, else None (the single dataset).
    Looked up through hard links only: a ``vol`` link to another file is refused."""
    if formats.find(path) is not formats.named("HDF5"):  # the challenge's packed file is HDF5
        return None
    from evaluation.readers import hdf5

    return hdf5.dataset_key(path, (PACKED_DATASET,), display)


def _description(attrs: dict[str, Any]) -> str | None:
    value = attrs.get("description")
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value)[:500] if value is not None else None


def open_binary(path: Path, shape: tuple[int, int, int], display: str, window: Window | None = None) -> BinaryVolume:
    """The 0/1 volume of ``shape`` (the scored grid) held in ``path``, packed or plain.
    Problems raise ``errors.Unusable``."""
    largest = max(int(np.prod(shape)), window.total * int(np.prod(shape[1:])) if window is not None else 0)
    slabs = open_slabs(path, key=_dataset_key(path, display), display=display, max_voxels=largest)
    found = slabs.shape
    if found == packed_shape(shape) and slabs.dtype == np.uint8 and found != tuple(shape):
        planes = slabs.read(0, found[0])
        description = _description(slabs.attrs)
        slabs.close()
        return _Packed(planes, shape, description)
    if found == tuple(shape):
        return _Plain(slabs, shape, 0)
    if window is not None and found == (window.total, *shape[1:]):
        return _Plain(slabs, shape, window.start)
    slabs.close()
    accepted = [tuple(shape), packed_shape(shape)]
    if window is not None:
        accepted.insert(0, (window.total, *shape[1:]))
    listed = ", ".join(str(s) for s in accepted[:-1]) + f" or {accepted[-1]} (bit-packed uint8)"
    raise Unusable(f"{display}: has shape {found}; expected {listed}")


def match_files(files: dict[str, Path], names: list[str]) -> dict[str, Path]:
    """Case -> submitted file, from the submission's files by case name (``Submission.
    case_files``): each case by its file's stem; a single-case phase takes the submission's
    only file whatever its name, as the reference scores one file per case."""
    if len(names) == 1 and len(files) == 1:
        return {names[0]: next(iter(files.values()))}
    missing = [name for name in names if name not in files]
    if missing:
        if not files:
            raise Unusable(
                "the submission holds no volume file: upload the segmentation as a bit-packed .h5 "
                "(the challenge's prepare_submission) or a .tif/.h5/.npy/.zarr volume"
            )
        raise Unusable(
            f"no file for phantom(s) {', '.join(missing)}: name each file after its phantom "
            f"(e.g. {missing[0]}.h5); found {', '.join(sorted(files)[:5])}"
        )
    extra = sorted(set(files) - set(names))
    if extra:
        _log.warning("unused_files", files=extra[:10])
    return {name: files[name] for name in names}
