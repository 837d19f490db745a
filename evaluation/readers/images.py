"""Volumes and images from files, with their geometry, never trusting the file.

Supported: MetaImage ``.mha``, NIfTI ``.nii``/``.nii.gz``, NRRD ``.nrrd``, PNG (SimpleITK);
TIFF ``.tif``/``.tiff`` (``readers.tiff``); NumPy ``.npy`` (never unpickled: ``readers.npy``);
HDF5 ``.h5``/``.hdf5``/``.hdf`` (``readers.hdf5``, one dataset); zarr folders (see
``zarr_store``). Which reader reads a file is decided by its suffix, once, in the registry
``readers.formats``.

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

from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import formats
from evaluation.readers.formats import SUFFIXES, stem, suffix
from evaluation.readers.volume import Volume

__all__ = ["SUFFIXES", "Volume", "check_geometry", "probe_shape", "read", "stem", "suffix", "voxel_count"]


def read(path: Path, key: str | None = None, display: str | None = None, max_voxels: int | None = None) -> Volume:
    """Load ``path`` whole. ``key`` selects the dataset of an HDF5 file or the array of a zarr
    group. ``display`` names the file in messages (default: its name). With ``max_voxels``, the
    shape is read from the header first and a larger array is refused before it is loaded.
    Problems raise ``errors.Unusable``."""
    display = display or path.name
    found = formats.of(path, display)
    if max_voxels is not None:
        shape = found.probe(path, key, display)
        if int(np.prod(shape, dtype=np.float64)) > max_voxels:
            raise Unusable(f"{display}: has shape {tuple(shape)}, more voxels than the {max_voxels} of the image it predicts")
    return found.read(path, key, display)


def voxel_count(path: Path, display: str | None = None, key: str | None = None) -> int:
    """Voxels of the file's array from its header (``probe_shape``), for memory estimates."""
    return int(np.prod(probe_shape(path, key, display), dtype=np.int64))


def probe_shape(path: Path, key: str | None = None, display: str | None = None) -> tuple[int, ...]:
    """The array shape from the file's header alone, in array axis order: the one place that
    learns a file's size without decoding it (each format's ``probe``)."""
    display = display or path.name
    return formats.of(path, display).probe(path, key, display)


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
    for name, got_values, expected_values in checks:
        if got_values is None or expected_values is None:
            continue
        got, expected = np.asarray(got_values, float), np.asarray(expected_values, float)
        scale = np.abs(np.asarray(truth.spacing, float)).max() if name == "origin" and truth.spacing else 1.0
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=tolerance, atol=tolerance * scale):
            raise Unusable(
                f"{display}: its {name} ({_numbers(got)}) differs from the input image's ({_numbers(expected)}); "
                "write the prediction on the input image's grid (copy its spacing, origin and direction)"
            )


def _numbers(values: np.ndarray) -> str:
    return ", ".join(f"{float(v):.6g}" for v in values)
