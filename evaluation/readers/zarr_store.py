"""Zarr hierarchies (format 2 and 3) read from a folder, without ever writing to it.

The hierarchy is walked on the file system rather than through zarr's group API because
uploads are often incomplete zarrs (a crop folder without ``.zgroup``): the CellMap reference
writes the missing metadata into the submission, we treat a plain folder as an implicit group
instead, which reads the same and leaves ``/input`` untouched.

Submitted arrays are untrusted: before zarr decodes a single chunk, their metadata must name a
numeric dtype and only codecs from a known-safe list. numcodecs also ships codecs that
unpickle (``pickle``) or build objects; a crafted ``.zarray`` must never reach them.
"""

import json
from pathlib import Path

import numpy as np
import zarr

from evaluation.errors import PhaseError, SubmissionError

ARRAY, GROUP = "array", "group"
SAFE_CODECS = frozenset(
    {
        # format 2 compressors and filters
        "blosc", "zstd", "lz4", "gzip", "zlib", "bz2", "lzma", "crc32", "adler32", "fletcher32",
        "delta", "shuffle", "bitround", "quantize", "fixedscaleoffset", "packbits", "astype",
        # format 3 codecs
        "bytes", "endian", "transpose", "crc32c", "sharding_indexed",
    }
)
_NUMERIC_KINDS = "biuf"


def node_kind(path: Path) -> str | None:
    """'array', 'group' (explicit or implicit) or None when ``path`` is not a folder."""
    if not path.is_dir():
        return None
    if (path / ".zarray").is_file():
        return ARRAY
    v3 = path / "zarr.json"
    if v3.is_file():
        try:
            return ARRAY if json.loads(v3.read_text()).get("node_type") == "array" else GROUP
        except (ValueError, OSError, AttributeError):
            return None
    return GROUP


def children(path: Path) -> dict[str, str]:
    """Name -> kind of the nodes directly inside the group folder ``path``."""
    found = {}
    if not path.is_dir():
        return found
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        kind = node_kind(entry)
        if kind is not None:
            found[entry.name] = kind
    return found


def array_names(path: Path) -> list[str]:
    return [name for name, kind in children(path).items() if kind == ARRAY]


def _codec_ids(metadata) -> list[str]:
    """Every codec identifier named anywhere in array metadata (v2 ``id``, v3 ``name``)."""
    found = []
    if isinstance(metadata, dict):
        for key in ("id", "name"):
            if isinstance(metadata.get(key), str) and key in metadata:
                found.append(metadata[key])
        for key in ("compressor", "filters", "codecs", "index_codecs", "configuration"):
            found += _codec_ids(metadata.get(key))
    elif isinstance(metadata, list):
        for item in metadata:
            found += _codec_ids(item)
    return found


def _check_metadata(path: Path, display: str) -> None:
    meta_file = path / ".zarray" if (path / ".zarray").is_file() else path / "zarr.json"
    try:
        metadata = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise SubmissionError(f"{display}: its zarr metadata is not valid JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise SubmissionError(f"{display}: its zarr metadata is not a JSON object")
    codec_source = {k: metadata.get(k) for k in ("compressor", "filters", "codecs")}
    unsafe = sorted(set(_codec_ids(codec_source)) - SAFE_CODECS)
    if unsafe:
        raise SubmissionError(
            f"{display}: uses the codec(s) {', '.join(unsafe)}, which are not accepted; "
            "store label arrays with a standard compressor such as blosc, zstd or gzip"
        )


def open_array(path: Path, display: str, trusted: bool = False) -> zarr.Array:
    """Open an array read-only. ``display`` names it in messages; untrusted (submitted)
    arrays are checked for safe codecs and a numeric dtype before anything is decoded."""
    error = PhaseError if trusted else SubmissionError
    if not trusted:
        _check_metadata(path, display)
    try:
        array = zarr.open_array(store=str(path), mode="r")
    except Exception as exc:  # zarr raises many types for malformed metadata
        raise error(f"{display}: not a readable zarr array ({type(exc).__name__}: {exc})") from None
    if np.dtype(array.dtype).kind not in _NUMERIC_KINDS:
        raise error(f"{display}: has data type {array.dtype}; label arrays must be integer, boolean or float")
    return array


def read_array(array: zarr.Array, display: str, trusted: bool = False, region=Ellipsis) -> np.ndarray:
    error = PhaseError if trusted else SubmissionError
    try:
        return np.asarray(array[region])
    except Exception as exc:  # corrupt or truncated chunks surface as codec errors
        raise error(f"{display}: its data cannot be read ({type(exc).__name__}: {exc}); a chunk may be corrupt") from None


def attributes(array: zarr.Array) -> dict:
    try:
        return dict(array.attrs)
    except Exception:
        return {}
