"""Volumes and images from files, with their geometry, never trusting the file.

Supported: MetaImage ``.mha``, NIfTI ``.nii``/``.nii.gz``, NRRD ``.nrrd``, PNG (SimpleITK);
TIFF ``.tif``/``.tiff`` (``readers.tiff``); NumPy ``.npy`` (never unpickled); HDF5 ``.h5``/
``.hdf5``/``.hdf`` (``readers.hdf5``, one dataset); zarr folders (see ``zarr_store``).

Geometry is reported in array axis order (z, y, x): SimpleITK's (x, y, z) spacing, origin and
direction are reversed. Formats without geometry report ``None``, which geometry checks treat
as "unknown, compare shape only".

A submitted file must not make the grader read another file: MetaImage headers may name an
external data file, NRRD a detached one, HDF5 external links, external storage or virtual
datasets, and an OME-TIFF other TIFFs. All of these could point at the ground truth and are
refused, as are pickled NumPy arrays. HDF5 and TIFF are read by ``readers.hdf5`` and
``readers.tiff``, which bound every size before decoding.
"""

from pathlib import Path

import numpy as np

from evaluation.errors import GraderError, PhaseError, SubmissionError
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


def read(
    path: Path, key: str | None = None, display: str | None = None, max_voxels: int | None = None, trusted: bool = False
) -> Volume:
    """Load ``path`` whole. ``key`` selects the dataset of an HDF5 file or the array of a zarr
    group. ``display`` names the file in messages (default: its name). With ``max_voxels``, the
    shape is read from the header first and a larger array is refused before it is loaded.
    Problems raise ``SubmissionError`` (``PhaseError`` for ``trusted`` ground-truth files)."""
    display = display or path.name
    error = PhaseError if trusted else SubmissionError
    kind = suffix(path)
    if max_voxels is not None:
        shape = probe_shape(path, key, display, trusted)
        if int(np.prod(shape, dtype=np.float64)) > max_voxels:
            raise error(f"{display}: has shape {tuple(shape)}, more voxels than the {max_voxels} of the image it predicts")
    return _guarded(lambda: _load(path, kind, key, display, trusted), kind, display, error)


def _load(path: Path, kind: str, key: str | None, display: str, trusted: bool) -> Volume:
    from evaluation.readers import hdf5, itk_formats, tiff

    error = PhaseError if trusted else SubmissionError
    if kind in SITK_SUFFIXES:  # checked, ImageIO forced by suffix, size known before decoding
        return itk_formats.read(path, display, error)
    if kind in TIFF_SUFFIXES:  # the first image series, no other file opened
        return Volume(tiff.read(path, display, trusted))
    if kind in NUMPY_SUFFIXES:
        with untrusted.open_regular(path, display, error) as f:
            return Volume(np.load(f, allow_pickle=False))
    if kind in HDF5_SUFFIXES:  # hard links only, bounded decoding
        array, attrs = hdf5.read(path, key, display, trusted)
        return Volume(array, attrs=attrs)
    if kind in ZARR_SUFFIXES:
        array = _open_zarr(path, key, display, trusted)
        return Volume(array[...], attrs=array.attrs)
    raise error(f"{display}: unsupported file type {kind!r}; use one of {', '.join(SUFFIXES)}")


def voxel_count(path: Path, display: str | None = None, trusted: bool = False, key: str | None = None) -> int:
    """Voxels of the file's array from its header (``probe_shape``), for memory estimates."""
    return int(np.prod(probe_shape(path, key, display, trusted), dtype=np.int64))


def probe_shape(path: Path, key: str | None = None, display: str | None = None, trusted: bool = False) -> tuple[int, ...]:
    """The array shape from the file's header alone, in array axis order: the one place that
    learns a file's size without decoding it."""
    from evaluation.readers import hdf5, itk_formats, tiff

    display = display or path.name
    error = PhaseError if trusted else SubmissionError
    kind = suffix(path)
    if kind in SITK_SUFFIXES:
        return itk_formats.info(path, display, error).shape
    if kind in TIFF_SUFFIXES:
        return tiff.probe(path, display, trusted)[0]
    if kind in NUMPY_SUFFIXES:
        return _guarded(lambda: _npy_shape(path, display, error), kind, display, error)
    if kind in HDF5_SUFFIXES:
        return hdf5.probe(path, key, display, trusted)[0]
    if kind in ZARR_SUFFIXES:
        return tuple(_open_zarr(path, key, display, trusted).shape)
    raise error(f"{display}: unsupported file type {kind!r}; use one of {', '.join(SUFFIXES)}")


def _npy_shape(path: Path, display: str, error) -> tuple[int, ...]:
    with untrusted.open_regular(path, display, error) as f:
        version = np.lib.format.read_magic(f)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, _ = header(f)
    return tuple(shape)


def _guarded(action, kind: str, display: str, error=SubmissionError):
    """Run a reader, turning whatever a malformed file raises into ``error``."""
    try:
        return action()
    except GraderError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise error(f"{display}: holds pickled Python objects, which are never loaded; save a plain numeric array") from None
        raise error(f"{display}: cannot be read as {kind} ({exc})") from None
    except Exception as exc:  # readers raise many types for truncated or malformed files
        raise error(f"{display}: cannot be read as {kind} ({reason(exc)}); the file may be truncated or corrupt") from None


def _open_zarr(path: Path, key: str | None, display: str, trusted: bool = False):
    """The zarr array ``key`` of ``path``, else the group's only array."""
    from evaluation.readers import zarr_store

    target = path / key if key else path
    if zarr_store.node_kind(target) != zarr_store.ARRAY:
        arrays = zarr_store.array_names(target)
        if len(arrays) != 1:
            raise (PhaseError if trusted else SubmissionError)(f"{display}: expected one array in the zarr, found {len(arrays)}")
        target = target / arrays[0]
    return zarr_store.open_array(target, display, trusted)


# --------------------------------------------------------------------------------------------
# Geometry


def check_geometry(prediction: Volume, truth: Volume, display: str, tolerance: float = 1e-4) -> None:
    """Refuse a prediction whose grid differs from the truth's, instead of scoring it wrongly.

    Shape must match exactly; spacing, origin and direction are compared where both sides
    know them (relative tolerance for spacing, absolute in spacing units for origin)."""
    if prediction.array.shape != truth.array.shape:
        raise SubmissionError(
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
            raise SubmissionError(
                f"{display}: its {name} ({_numbers(got)}) differs from the input image's ({_numbers(expected)}); "
                "write the prediction on the input image's grid (copy its spacing, origin and direction)"
            )


def _numbers(values: np.ndarray) -> str:
    return ", ".join(f"{float(v):.6g}" for v in values)
