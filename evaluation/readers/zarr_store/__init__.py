"""Zarr hierarchies (format 2 and 3) read from a folder by our own bounded reader.

The hierarchy is walked on the file system rather than through a group API because uploads
are often incomplete zarrs (a crop folder without ``.zgroup``): the CellMap reference writes
the missing metadata into the submission, we treat a plain folder as an implicit group
instead, which reads the same and leaves ``/input`` untouched.

Arrays are read here, not by zarr-python: a participant's upload is hostile, and a general
library decodes whatever the metadata asks for. This reader

- parses ``.zarray`` / ``zarr.json`` with ``untrusted.load_json`` (size and depth bounds) and
  validates all of it before a byte of data is decoded: numeric and boolean data types only,
  codecs from a fixed list with checked settings, chunk grids of bounded size and padding;
  ``shape`` and ``dtype`` come from the metadata alone, so callers can refuse an array that
  is too large before reading it;
- decodes every chunk to exactly the size its metadata implies, through ``readers.codecs``:
  blosc, zstd and lz4 headers must state that size, zlib/gzip/bz2/lzma streams are inflated
  with an output limit, at most ``limits.MAX_STREAMS`` concatenated streams and nothing after
  them, and a chunk that decodes to more or less is refused (compression bombs stop at the
  limit); the codecs accepted are exactly those docs/participants.md lists;
- does work in proportion to the data present: the chunk files are listed once (lazily, with
  ``os.scandir``) and a region read touches only stored chunks; the rest is the fill value;
  a shard's inner chunks are counted and their index checked before any is decoded
  (``sharding``);
- opens chunk files only through ``untrusted.open_regular`` / ``read_bytes`` (no links
  followed, no FIFO blocks), and turns every codec failure into ``errors.Unusable`` naming
  the array and the chunk;
- returns data in native byte order, whatever order the array was stored in.

zarr-python remains a dependency only to *write* zarrs (tests, benches, tomography labels).

The package: ``hierarchy`` (groups and arrays on the file system), ``v2`` and ``v3`` (the two
metadata formats), ``metadata`` (values both share, and the size bounds), ``registry`` (one
row per accepted codec: its names, kind, settings and decoder), ``settings`` (how codec
settings are checked), ``stages`` (what codecs become, by kind), ``pipeline`` (a chunk's
stages and the size each decodes to), ``sharding`` (the array -> bytes stage of sharded
arrays: shard indexes and inner chunks) and ``reading`` (the array and its region reads).
"""

import stat
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import untrusted
from evaluation.readers.regions import Region
from evaluation.readers.zarr_store.base import ARRAY, GROUP, Invalid
from evaluation.readers.zarr_store.hierarchy import array_names, children, first_array, lstat_mode, node_kind, the_array
from evaluation.readers.zarr_store.metadata import check_sizes
from evaluation.readers.zarr_store.reading import Array
from evaluation.readers.zarr_store.v2 import parse_v2
from evaluation.readers.zarr_store.v3 import parse_v3

__all__ = [
    "ARRAY",
    "GROUP",
    "Array",
    "array_names",
    "attributes",
    "children",
    "first_array",
    "node_kind",
    "open_array",
    "read_array",
    "the_array",
]


def _read_attrs(path: Path, display: str) -> dict[str, Any]:
    """``.zattrs`` as a dict, ``{}`` when there is none. A file that is there but unreadable is
    refused rather than ignored: it may hold the voxel size the array is scored at."""
    if lstat_mode(path) is None:
        return {}
    attrs = untrusted.load_json(path, display)
    if not isinstance(attrs, dict):
        raise Unusable(f"{display}: must be a JSON object")
    return attrs


def open_array(path: Path, display: str) -> Array:
    """Open an array read-only from its metadata alone (nothing is decoded). ``display``
    names it in messages; problems raise ``errors.Unusable``."""
    path = Path(path)
    if not stat.S_ISDIR(untrusted.check_regular(path, display, folder=True).st_mode):
        raise Unusable(f"{display}: is not a zarr array (a file, not a folder)")
    try:
        if lstat_mode(path / ".zarray") is not None:
            metadata = untrusted.load_json(path / ".zarray", f"{display}/.zarray")
            meta = parse_v2(metadata, _read_attrs(path / ".zattrs", f"{display}/.zattrs"))
        elif lstat_mode(path / "zarr.json") is not None:
            meta = parse_v3(untrusted.load_json(path / "zarr.json", f"{display}/zarr.json"))
        else:
            raise Unusable(f"{display}: not a readable zarr array (it has neither .zarray nor zarr.json)")
        check_sizes(meta)
    except Invalid as exc:
        raise Unusable(f"{display}: {exc}") from None
    return Array(path, display, meta)


def read_array(array: Array, display: str, region: Region = Ellipsis, out: np.ndarray | None = None) -> np.ndarray:
    """``array[region]``, with problems named by ``display``; ``out`` as in ``Array.read``."""
    return array.read(region, out, display)


def attributes(array: object) -> dict[str, Any]:
    """The array's attributes (``.zattrs`` or zarr.json's ``attributes``) as a dict."""
    return dict(getattr(array, "attrs", None) or {})
