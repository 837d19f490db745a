"""Volumes and images from files, with their geometry, never trusting the file.

Supported: MetaImage ``.mha``, NIfTI ``.nii``/``.nii.gz``, NRRD ``.nrrd``, PNG (SimpleITK);
TIFF ``.tif``/``.tiff`` (``readers.tiff``); NumPy ``.npy`` (never unpickled); HDF5 ``.h5``/
``.hdf5``/``.hdf`` (``readers.hdf5``, one dataset); zarr folders (see ``zarr_store``).

Geometry is reported in array axis order (z, y, x): SimpleITK's (x, y, z) spacing, origin and
direction are reversed. Formats without geometry report ``None``, which geometry checks treat
as "unknown, compare shape only".

Problems raise ``errors.Unusable``, whoever's file it is (the caller knows: ``errors``).

A submitted file must not make the grader read another file: MetaImage headers may name an
external data file, NRRD a detached one, HDF5 external links, external storage or virtual
datasets, and an OME-TIFF other TIFFs. All of these could point at the ground truth and are
refused, as are pickled NumPy arrays. HDF5 and TIFF are read by ``readers.hdf5`` and
``readers.tiff``, which bound every size before decoding.
"""

import tokenize
from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import untrusted
from evaluation.readers.volume import Volume, reason

SITK_SUFFIXES = (".mha", ".nii", ".nii.gz", ".nrrd", ".png")
TIFF_SUFFIXES = (".tif", ".tiff")
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")
NUMPY_SUFFIXES = (".npy",)
ZARR_SUFFIXES = (".zarr",)
SUFFIXES = SITK_SUFFIXES + TIFF_SUFFIXES + HDF5_SUFFIXES + NUMPY_SUFFIXES + ZARR_SUFFIXES


def suffix(path: Path) -> str:
    """The format suffix, with double suffixes such as '.nii.gz' kept whole."""
    name = path.name.lower()
    for known in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(known):
            return known
    return path.suffix.lower()


def stem(path: Path) -> str:
    """The file name without its format suffix ('case_01.nii.gz' -> 'case_01')."""
    return path.name[: len(path.name) - len(suffix(path))] if suffix(path) in SUFFIXES else path.stem


def read(path: Path, key: str | None = None, display: str | None = None, max_voxels: int | None = None) -> Volume:
    """Load ``path`` whole. ``key`` selects the dataset of an HDF5 file or the array of a zarr
    group. ``display`` names the file in messages (default: its name). With ``max_voxels``, the
    shape is read from the header first and a larger array is refused before it is loaded.
    Problems raise ``errors.Unusable``."""
    display = display or path.name
    kind = suffix(path)
    if max_voxels is not None:
        shape = probe_shape(path, key, display)
        if int(np.prod(shape, dtype=np.float64)) > max_voxels:
            raise Unusable(f"{display}: has shape {tuple(shape)}, more voxels than the {max_voxels} of the image it predicts")
    return _load(path, kind, key, display)


def _load(path: Path, kind: str, key: str | None, display: str) -> Volume:
    from evaluation.readers import hdf5, itk_formats, tiff

    if kind in SITK_SUFFIXES:  # checked, ImageIO forced by suffix, size known before decoding
        return itk_formats.read(path, display)
    if kind in TIFF_SUFFIXES:  # the first image series, no other file opened
        return Volume(tiff.read(path, display))
    if kind in NUMPY_SUFFIXES:
        return Volume(_numpy(lambda: _npy(path, display), display))
    if kind in HDF5_SUFFIXES:  # hard links only, bounded decoding
        array, attrs = hdf5.read(path, key, display)
        return Volume(array, attrs=attrs)
    if kind in ZARR_SUFFIXES:
        array = open_zarr(path, key, display)
        return Volume(array[...], attrs=array.attrs)
    raise Unusable(f"{display}: unsupported file type {kind!r}; use one of {', '.join(SUFFIXES)}")


def _npy(path: Path, display: str) -> np.ndarray:
    with untrusted.open_regular(path, display) as f:
        return np.load(f, allow_pickle=False)


def voxel_count(path: Path, display: str | None = None, key: str | None = None) -> int:
    """Voxels of the file's array from its header (``probe_shape``), for memory estimates."""
    return int(np.prod(probe_shape(path, key, display), dtype=np.int64))


def probe_shape(path: Path, key: str | None = None, display: str | None = None) -> tuple[int, ...]:
    """The array shape from the file's header alone, in array axis order: the one place that
    learns a file's size without decoding it."""
    from evaluation.readers import hdf5, itk_formats, tiff

    display = display or path.name
    kind = suffix(path)
    if kind in SITK_SUFFIXES:
        return itk_formats.info(path, display).shape
    if kind in TIFF_SUFFIXES:
        return tiff.probe(path, display)[0]
    if kind in NUMPY_SUFFIXES:
        return _numpy(lambda: _npy_shape(path, display), display)
    if kind in HDF5_SUFFIXES:
        return hdf5.probe(path, key, display)[0]
    if kind in ZARR_SUFFIXES:
        return tuple(open_zarr(path, key, display).shape)
    raise Unusable(f"{display}: unsupported file type {kind!r}; use one of {', '.join(SUFFIXES)}")


def _npy_shape(path: Path, display: str) -> tuple[int, ...]:
    with untrusted.open_regular(path, display) as f:
        version = np.lib.format.read_magic(f)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, _ = header(f)
    return tuple(shape)


# what numpy raises for a .npy file it cannot read: a malformed or truncated header or body
# (a header in the legacy format goes through ``tokenize`` and ``ast``, which raise their own)
NUMPY_ERRORS = (ValueError, EOFError, OSError, SyntaxError, tokenize.TokenError)


def _numpy(action, display: str):
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


def open_zarr(path: Path, key: str | None, display: str):
    """The zarr array ``key`` of ``path``, else the group's only array."""
    from evaluation.readers import zarr_store

    target = path / key if key else path
    if zarr_store.node_kind(target) != zarr_store.ARRAY:
        arrays = zarr_store.array_names(target)
        if len(arrays) != 1:
            raise Unusable(f"{display}: expected one array in the zarr, found {len(arrays)}")
        target = target / arrays[0]
    return zarr_store.open_array(target, display)


# --------------------------------------------------------------------------------------------
# Geometry


def check_geometry(prediction: Volume, truth: Volume, display: str, tolerance: float = 1e-4) -> None:
    """Refuse a prediction whose grid differs from the truth's, instead of scoring it wrongly.

    Shape must match exactly; spacing, origin and direction are compared where both sides
    know them (relative tolerance for spacing, absolute in spacing units for origin)."""
    if prediction.array.shape != truth.array.shape:
        raise Unusable(
            f"{display}: has shape {tuple(prediction.array.shape)}, but the image it predicts has shape {tuple(truth.array.shape)}"
        )
    checks = (
        ("spacing", prediction.spacing, truth.spacing),
        ("origin", prediction.origin, truth.origin),
        ("direction", prediction.direction, truth.direction),
    )
    for name, got, expected in checks:
        if got is None or expected is None:
            continue
        got, expected = np.asarray(got, float), np.asarray(expected, float)
        scale = np.abs(np.asarray(truth.spacing, float)).max() if name == "origin" and truth.spacing else 1.0
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=tolerance, atol=tolerance * scale):
            raise Unusable(
                f"{display}: its {name} ({_numbers(got)}) differs from the input image's ({_numbers(expected)}); "
                "write the prediction on the input image's grid (copy its spacing, origin and direction)"
            )


def _numbers(values: np.ndarray) -> str:
    return ", ".join(f"{float(v):.6g}" for v in values)
