"""Finding a dataset of an HDF5 file without following links, checking its number type from
its metadata, and what h5py raises for a malformed file (``hdf5`` explains the rules)."""

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits

T = TypeVar("T")
FIX = "save the labels as one plain numeric dataset (gzip or lzf compression) inside the file"


def reason(exc: BaseException) -> str:
    """A library's explanation on one line, without the paths it may quote."""
    text = re.sub(r"(?:[A-Za-z]:)?[/\\](?:[^\s/\\:'\"]+[/\\])+([^\s/\\:'\"]*)", r"\1", str(exc))
    text = " ".join(text.split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


# what h5py raises for a file HDF5 cannot parse (it maps the HDF5 error stack to these)
H5PY_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError, NotImplementedError)


def guard(display: str, action: Callable[[], T]) -> T:
    """Run ``action``; what h5py raises for a malformed file becomes ``Unusable`` naming it,
    running out of memory a refusal too; anything else is a bug and propagates."""
    try:
        return action()
    except MemoryError:
        raise Unusable(f"{display}: is too large to read in the memory available") from None
    except H5PY_ERRORS as exc:
        raise Unusable(f"{display}: cannot be read as HDF5 ({reason(exc)}); the file may be truncated or corrupt") from None


# --------------------------------------------------------------------------------------------
# Finding a dataset without following links


def h5() -> Any:  # h5py, imported on first use (it has no type information)
    import h5py  # type: ignore[import-untyped]

    return h5py


def _root(handle: Any) -> Any:
    h5py = h5()
    return h5py.h5o.open(handle.id, b"/")


def _parts(key: str, display: str) -> list[str]:
    parts = [p for p in str(key).split("/") if p]
    if not parts or len(parts) > limits.HDF5_MAX_KEY_DEPTH or any(p in (".", "..") for p in parts):
        raise Unusable(f"{display}: '{key}' is not a valid dataset name")
    return parts


_LINK_KINDS = {1: "a soft link", 64: "an external link"}


def walk(handle: Any, key: str, display: str) -> Any:
    """The object at ``key`` reached through hard links only, or None when a component does
    not exist. A soft or external link anywhere on the path is refused."""
    h5py = h5()
    parts = _parts(key, display)
    node = _root(handle)
    for depth, part in enumerate(parts):
        name = part.encode("utf-8", "surrogateescape")
        if not isinstance(node, h5py.h5g.GroupID):
            return None
        if not node.links.exists(name):
            return None
        kind = node.links.get_info(name).type
        if kind != h5py.h5l.TYPE_HARD:
            where = "/".join(parts[: depth + 1])
            what = _LINK_KINDS.get(kind, "a user-defined link")
            raise Unusable(
                f"{display}: '{where}' is {what} to other data; store the array itself in the file, "
                "as one plain numeric dataset (gzip or lzf compression)"
            )
        node = h5py.h5o.open(node, name)
    return node


def find_key(handle: Any, keys: Sequence[str], display: str) -> str | None:
    """The first of ``keys`` that names a dataset (through hard links), else None."""
    h5py = h5()
    for key in keys:
        found = walk(handle, key, display)
        if isinstance(found, h5py.h5d.DatasetID):
            return key
    return None


def only_dataset(handle: Any, display: str) -> str:
    """The path of the file's only dataset. ``H5Ovisit`` enters hard links only: datasets
    behind soft or external links are neither counted nor opened."""
    h5py = h5()
    found: list[str] = []
    seen = [0]

    def visit(name: bytes, info: Any) -> bool | None:
        seen[0] += 1
        if seen[0] > limits.HDF5_MAX_OBJECTS:
            return True  # stops the visit
        if info.type == h5py.h5o.TYPE_DATASET:
            found.append(name.decode("utf-8", "surrogateescape"))
        return None

    h5py.h5o.visit(_root(handle), visit, info=True)
    if seen[0] > limits.HDF5_MAX_OBJECTS:
        raise Unusable(f"{display}: holds more than {limits.HDF5_MAX_OBJECTS} groups and datasets; {FIX}")
    if len(found) != 1:
        raise Unusable(f"{display}: holds {len(found)} datasets; expected exactly one (or name it in the phase options)")
    return found[0]


def number_type(tid: Any, display: str, key: str) -> tuple[np.dtype, bool]:
    """The dataset's on-disk numpy dtype and whether h5py reads it as bool; anything but
    plain IEEE floats and whole-byte integers (or enums of them) is refused."""
    h5py = h5()
    h5t = h5py.h5t
    cls = tid.get_class()
    as_bool = False
    if cls == h5t.ENUM:
        as_bool = np.dtype(tid.dtype) == np.bool_
        tid = tid.get_super()
        cls = tid.get_class()
    size = tid.get_size()
    order = ">" if cls in (h5t.INTEGER, h5t.FLOAT) and tid.get_order() == h5t.ORDER_BE else "<"
    if cls == h5t.INTEGER and size in (1, 2, 4, 8) and tid.get_precision() == 8 * size and tid.get_offset() == 0:
        kind = "i" if tid.get_sign() == h5t.SGN_2 else "u"
        return np.dtype(f"{order}{kind}{size}"), as_bool
    if cls == h5t.FLOAT and size in (2, 4, 8):
        expected = {2: (15, 10, 5, 0, 10, 15), 4: (31, 23, 8, 0, 23, 127), 8: (63, 52, 11, 0, 52, 1023)}[size]
        if (
            tuple(tid.get_fields()) + (tid.get_ebias(),) == expected
            and tid.get_precision() == 8 * size
            and tid.get_offset() == 0
            and tid.get_norm() == h5t.NORM_IMPLIED
        ):
            return np.dtype(f"{order}f{size}"), False
    try:
        shown = str(tid.dtype)
    except H5PY_ERRORS:  # types numpy cannot represent
        shown = "a non-numeric type"
    raise Unusable(f"{display}: '{key}' has data type {shown}; expected plain integers or floats")
