"""HDF5 datasets from untrusted files: only the file itself is read, sizes are bounded first.

What a crafted file could do, and what stops it here:

- **Read another file.** External links (at any level of a key path), soft links, virtual
  datasets and external raw storage all name other files or objects. Keys are resolved one
  component at a time with ``H5Lexists``/``H5Lget_info`` on a single name (neither follows the
  link it looks at) and only hard links are entered; ``name in group`` and ``group[path]``
  are never used on a path before that walk, because they follow links. "The only dataset"
  is looked for with ``H5Ovisit``, which follows hard links only. A dataset's layout is read
  from its creation property list before its dataspace: asking a virtual dataset with an
  unlimited mapping for its shape opens its source files.
- **Exhaust memory or time while decoding.** Chunks no larger than the dataset (the rule
  zarr arrays follow, ``regions.padding_problem``: a 384-voxel dataset in one 256 MiB chunk
  is refused from its metadata). Chunks filtered with deflate, shuffle and fletcher32 are
  read raw (positioned reads of the file) and decoded here, each bounded to its expected
  size (``readers.codecs``: one zlib stream, nothing after it); HDF5's own deflate filter
  keeps growing its buffer, so a 1.5 MB chunk can decode to gigabytes. LZF
  chunks (decoded by h5py's filter) are accepted only when their stored size times LZF's
  largest possible ratio stays within ``limits.HDF5_MAX_FILTER_OUTPUT``; every other filter is refused.
  The stored chunks are listed once (``chunk_iter``): there may be at most ``limits.HDF5_MAX_CHUNKS``,
  each inside the file, none overlapping another, so decoding work is bounded by the file's
  size; regions without stored chunks are never decoded (``stored``) and read as the fill
  value. Declared shapes larger than the caller's ``max_voxels`` are refused from metadata.
- **Claim data that is not there.** Contiguous data and every stored chunk must lie inside
  the file (a truncated upload is refused rather than read as zeros).

Numbers come back in native byte order (big-endian datasets are legitimate). Problems raise
``errors.Unusable`` with a one-line message naming the file by its ``display`` name; what
h5py raises for a malformed file (``objects.H5PY_ERRORS``) is such a problem, anything else a bug.

The package: ``objects`` (finding a dataset through hard links, its number type, h5py's
errors), ``filters`` (the accepted filters and their bounded decoders) and ``array``
(``Hdf5Array``: the checks of a dataset's metadata and its region reads).
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.readers.hdf5.array import ATTRIBUTES, Hdf5Array
from evaluation.readers.hdf5.filters import LZF_MAX_RATIO
from evaluation.readers.hdf5.objects import find_key, guard, h5, only_dataset
from evaluation.readers.untrusted import check_regular

__all__ = ["ATTRIBUTES", "LZF_MAX_RATIO", "Hdf5Array", "dataset_key", "find_key", "only_dataset", "open_array", "probe", "read"]


def open_array(
    path: Path,
    key: str | None = None,
    display: str | None = None,
    max_voxels: int | None = None,
    keys: Sequence[str] = (),
) -> Hdf5Array:
    """The dataset ``key`` of ``path``, else the first of ``keys`` that exists, else the
    file's only dataset; checked from its metadata and ready to be read by region."""
    return Hdf5Array(path, key, display, max_voxels, keys)


def probe(
    path: Path, key: str | None = None, display: str | None = None, keys: Sequence[str] = ()
) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and (native) dtype from the file's metadata alone."""
    with Hdf5Array(path, key, display, keys=keys) as array:
        return array.shape, array.dtype


def read(
    path: Path, key: str | None = None, display: str | None = None, max_voxels: int | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """The whole dataset and its ``attrs``."""
    with Hdf5Array(path, key, display, max_voxels) as array:
        return array.read(), array.attrs


def dataset_key(path: Path, keys: Sequence[str], display: str | None = None) -> str | None:
    """The first of ``keys`` naming a dataset of ``path`` through hard links, else None."""
    display = display or Path(path).name
    check_regular(Path(path), display)

    def look() -> str | None:
        with h5().File(path, "r") as handle:
            found: str | None = find_key(handle, keys, display)
        return found

    return guard(display, look)
