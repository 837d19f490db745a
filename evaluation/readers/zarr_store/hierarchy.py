"""The zarr hierarchy on the file system: groups (explicit or implicit) and arrays."""

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from evaluation.errors import Unusable
from evaluation.readers import untrusted
from evaluation.readers.zarr_store.base import ARRAY, GROUP


def lstat_mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except (OSError, ValueError):
        return None


def node_kind(path: Path) -> str | None:
    """'array', 'group' (explicit or implicit) or None when ``path`` is not a folder (a link
    to a folder is not one). A ``zarr.json`` that cannot be read counts as an array, so that
    opening it reports the problem rather than the node silently not being there."""
    mode = lstat_mode(Path(path))
    if mode is None or not stat.S_ISDIR(mode):
        return None
    path = Path(path)
    if lstat_mode(path / ".zarray") is not None:
        return ARRAY
    if lstat_mode(path / "zarr.json") is not None:
        try:
            metadata = untrusted.load_json(path / "zarr.json", "zarr.json")
        except Unusable:
            return ARRAY
        return GROUP if isinstance(metadata, dict) and metadata.get("node_type") == "group" else ARRAY
    return GROUP


def children(path: Path) -> dict[str, str]:
    """Name -> kind of the nodes directly inside the group folder ``path``."""
    found: dict[str, str] = {}
    path = Path(path)
    mode = lstat_mode(path)
    if mode is None or not stat.S_ISDIR(mode):
        return found
    try:
        with os.scandir(path) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith(".") and not e.is_symlink())
    except OSError:
        return found
    for name in names:
        kind = node_kind(path / name)
        if kind is not None:
            found[name] = kind
    return found


def array_names(path: Path) -> list[str]:
    return [name for name, kind in children(path).items() if kind == ARRAY]


def the_array(path: Path, key: str | None, display: str) -> Path:
    """The array ``key`` of the zarr ``path``, else the group's only array (directly in it)."""
    target = path / key if key else path
    if node_kind(target) != ARRAY:
        arrays = array_names(target)
        if len(arrays) != 1:
            raise Unusable(f"{display}: expected one array in the zarr, found {len(arrays)}")
        target = target / arrays[0]
    return target


def first_array(path: Path, keys: Sequence[str], display: str) -> Path:
    """The first of ``keys`` that names an array of the zarr ``path``, else its only array
    within three levels (instance stacks are kept in nested groups: FISBe's layout)."""
    target = next((path / k for k in keys if node_kind(path / k) == ARRAY), None)
    if target is None:
        found = _arrays_below(path)
        if len(found) != 1:
            wanted = " or ".join(f"'{k}'" for k in keys)
            raise Unusable(f"{display}: has no array {wanted} and {len(found)} other arrays; store the labels as {keys[0]}")
        target = found[0]
    return target


def _arrays_below(root: Path, depth: int = 3) -> list[Path]:
    kind = node_kind(root)
    if kind == ARRAY:
        return [root]
    if kind != GROUP or depth == 0:
        return []
    return [a for name in children(root) for a in _arrays_below(root / name, depth - 1)]
