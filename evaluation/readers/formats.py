"""Every file format the grader reads, in one registry (``FORMATS``): a format is its suffixes
and three ways in, and adding a format is adding one ``Format`` to the tuple.

Each reader is listed once with the file endings it takes, as nnU-Net lists its reader
classes (``nnunetv2/imageio/reader_writer_registry.py``: ``LIST_OF_IO_CLASSES``, each with its
``supported_file_endings``); every choice of a reader by a file's suffix (``images.read``,
``images.probe_shape``, ``images.voxel_count``, ``slabs.open_slabs``,
``label_stacks.open_labels``) goes through ``find``/``of`` here, never through a chain of
``if suffix in ...`` of its own. docs/adding-a-format.md says what a new entry must bound.

The three ways in, each given the file's ``display`` name for its messages:

- ``probe(path, key, display)``: the array's shape from the header alone, nothing decoded:
  the one way the grader learns a file's size before reading it (memory estimates, and
  ``max_voxels`` refusals before decoding);
- ``read(path, key, display)``: the whole array as a ``Volume`` (geometry where the format
  has it);
- ``open(path, display, key=None, keys=(), max_voxels=None)``: a ``regions.RegionArray``
  read region by region, for formats that can (``None`` for those read whole: slab readers
  then read them whole, after a ``probe``). ``key`` names the array of a file holding
  several; ``keys`` are tried in order when it does not, else the file's only array.
  ``max_voxels`` refuses a larger array from the metadata where opening itself does work in
  proportion to the declared size (HDF5's chunk index, TIFF's pages); a zarr array is
  opened from its metadata alone and its shape left to the caller.

Problems raise ``errors.Unusable``, whoever's file it is.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evaluation.errors import Unusable
from evaluation.readers import hdf5, itk_formats, npy, tiff, zarr_store
from evaluation.readers.regions import RegionArrayBase
from evaluation.readers.volume import Volume

Probe = Callable[[Path, str | None, str], tuple[int, ...]]
Read = Callable[[Path, str | None, str], Volume]


class Open(Protocol):
    """How a format opens an array for region reads (module docstring)."""

    def __call__(
        self, path: Path, display: str, key: str | None = None, keys: Sequence[str] = (), max_voxels: int | None = None
    ) -> RegionArrayBase: ...


@dataclass(frozen=True)
class Format:
    """One file format: its suffixes (lower case, as file names end) and how it is probed,
    read whole and, where it can be, opened for region reads (module docstring)."""

    name: str
    suffixes: tuple[str, ...]
    probe: Probe
    read: Read
    open: Open | None = None


# ---- the ways in of each format (the readers' own signatures, adapted to the three above)


def _itk_probe(path: Path, key: str | None, display: str) -> tuple[int, ...]:
    return itk_formats.info(path, display).shape  # checked, ImageIO forced by suffix


def _itk_read(path: Path, key: str | None, display: str) -> Volume:
    return itk_formats.read(path, display)


def _tiff_probe(path: Path, key: str | None, display: str) -> tuple[int, ...]:
    return tiff.probe(path, display)[0]  # the first image series, no other file opened


def _tiff_read(path: Path, key: str | None, display: str) -> Volume:
    return Volume(tiff.read(path, display))


def _tiff_open(
    path: Path, display: str, key: str | None = None, keys: Sequence[str] = (), max_voxels: int | None = None
) -> RegionArrayBase:
    return tiff.open_array(path, display, max_voxels=max_voxels)


def _hdf5_probe(path: Path, key: str | None, display: str) -> tuple[int, ...]:
    return hdf5.probe(path, key, display)[0]  # hard links only


def _hdf5_read(path: Path, key: str | None, display: str) -> Volume:
    array, attrs = hdf5.read(path, key, display)
    return Volume(array, attrs=attrs)


def _hdf5_open(
    path: Path, display: str, key: str | None = None, keys: Sequence[str] = (), max_voxels: int | None = None
) -> RegionArrayBase:
    return hdf5.open_array(path, key, display, max_voxels, keys)


def _npy_probe(path: Path, key: str | None, display: str) -> tuple[int, ...]:
    return npy.probe(path, display)


def _npy_read(path: Path, key: str | None, display: str) -> Volume:
    return Volume(npy.read(path, display))  # never unpickled


def _npy_open(
    path: Path, display: str, key: str | None = None, keys: Sequence[str] = (), max_voxels: int | None = None
) -> RegionArrayBase:
    return npy.NpyArray(path, display)


def _zarr_probe(path: Path, key: str | None, display: str) -> tuple[int, ...]:
    return tuple(_zarr_open(path, display, key).shape)


def _zarr_read(path: Path, key: str | None, display: str) -> Volume:
    array = _zarr_open(path, display, key)
    return Volume(array[...], attrs=array.attrs)


def _zarr_open(
    path: Path, display: str, key: str | None = None, keys: Sequence[str] = (), max_voxels: int | None = None
) -> RegionArrayBase:
    if key is None and keys:
        return zarr_store.open_array(zarr_store.first_array(path, keys, display), display)
    return zarr_store.open_array(zarr_store.the_array(path, key, display), display)


FORMATS: tuple[Format, ...] = (
    Format("SimpleITK (MetaImage, NIfTI, NRRD, PNG)", itk_formats.SUFFIXES, _itk_probe, _itk_read),
    Format("TIFF", (".tif", ".tiff"), _tiff_probe, _tiff_read, _tiff_open),
    Format("HDF5", (".h5", ".hdf5", ".hdf"), _hdf5_probe, _hdf5_read, _hdf5_open),
    Format("NumPy", (".npy",), _npy_probe, _npy_read, _npy_open),
    Format("zarr", (".zarr",), _zarr_probe, _zarr_read, _zarr_open),
)
SUFFIXES = tuple(s for entry in FORMATS for s in entry.suffixes)
_LONGEST_FIRST = sorted(SUFFIXES, key=len, reverse=True)


def suffix(path: Path) -> str:
    """The format suffix, with double suffixes such as '.nii.gz' kept whole."""
    name = path.name.lower()
    for known in _LONGEST_FIRST:
        if name.endswith(known):
            return known
    return path.suffix.lower()


def stem(path: Path) -> str:
    """The file name without its format suffix ('case_01.nii.gz' -> 'case_01')."""
    return path.name[: len(path.name) - len(suffix(path))] if suffix(path) in SUFFIXES else path.stem


def find(path: Path) -> Format | None:
    """The format of ``path`` by its suffix, or None."""
    kind = suffix(path)
    return next((entry for entry in FORMATS if kind in entry.suffixes), None)


def named(name: str) -> Format:
    """The registered format called ``name`` (``"HDF5"``)."""
    return next(entry for entry in FORMATS if entry.name == name)


def of(path: Path, display: str, accepted: Sequence[str] = SUFFIXES) -> Format:
    """The format of ``path``, refused unless its suffix is one of ``accepted`` (by default
    any registered one; a caller taking fewer names its own)."""
    kind = suffix(path)
    found = find(path) if kind in accepted else None
    if found is None:
        raise Unusable(f"{display}: unsupported file type {kind!r}; use one of {', '.join(accepted)}")
    return found
