"""Touching what a participant uploaded: only regular files and folders, JSON within bounds.

Every reader of submitted bytes goes through here before a library opens anything:

- **Only regular files and folders.** A symbolic link can point at the ground truth; a FIFO
  blocks the reader forever (no time limit helps when the parent blocks while planning); a
  device or socket is never data. ``walk`` refuses all of them for a whole upload at once, and
  ``check_regular`` / ``open_regular`` refuse them again where a worker opens a file (opened
  with ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``: nothing blocks, no link is followed).
- **Names a file system and a C library can take.** Names must be UTF-8 (a surrogate-escaped
  name makes ITK abort its process) and folders at most ``MAX_DEPTH`` deep (Python 3.11's
  ``os.walk`` and ``Path.rglob`` recurse and end in ``RecursionError`` at about 1000 levels).
- **JSON with bounds.** Metadata files are size-capped, and their nesting depth and their
  number of elements are counted before ``json.loads``, which recurses (``RecursionError``
  on deep input) and builds a Python object per element (190 MB of ``{},`` is 1.4 GB parsed).

Problems raise ``errors.Unusable``; the caller knows whose file it is (``errors``).
"""

import json
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits

_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device file",
    stat.S_IFBLK: "a device file",
}


def kind_of(mode: int) -> str | None:
    """None for a regular file or folder, else what the entry is, in words."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def _check_name(name: str, relative: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise Unusable(f"the name {relative!r} is not valid UTF-8; rename it with plain characters") from None


def walk(
    root: Path,
    prune: Callable[[Path], bool] | None = None,
    max_depth: int = limits.MAX_DEPTH,
    max_entries: int = limits.MAX_ENTRIES,
) -> Iterator[tuple[Path, bool]]:
    """Every entry below ``root`` as (path, is_folder), breadth first, without following links
    and without recursion; refuses links, special files, non-UTF-8 names, folders nested
    deeper than ``max_depth`` and more than ``max_entries`` entries. Folders for which
    ``prune(path)`` is true are yielded but not entered."""
    pending, count = deque([(Path(root), 0)]), 0
    while pending:
        folder, depth = pending.popleft()
        with os.scandir(folder) as entries:
            found = sorted(entries, key=lambda e: e.name)
        for entry in found:
            path = Path(entry.path)
            relative = path.relative_to(root).as_posix()
            _check_name(entry.name, relative)
            count += 1
            if count > max_entries:
                raise Unusable(f"the submission holds more than {max_entries} files and folders")
            is_folder = entry.is_dir(follow_symlinks=False)  # from the directory entry's type: no stat call
            if not is_folder and not entry.is_file(follow_symlinks=False):
                what = kind_of(entry.stat(follow_symlinks=False).st_mode) or "not a plain file"
                raise Unusable(f"{relative} is {what}; upload plain files and folders only")
            if is_folder and not (prune and prune(path)):
                if depth + 1 >= max_depth:
                    raise Unusable(f"the submission's folders are nested more than {max_depth} levels deep ({relative[:60]}...)")
                pending.append((path, depth + 1))
            yield path, is_folder


def check_tree(root: Path) -> int:
    """Walk all of ``root`` once (see ``walk``); returns the number of entries."""
    return sum(1 for _ in walk(root))


def check_regular(path: Path, display: str, folder: bool = False) -> os.stat_result:
    """``lstat`` of ``path``: a regular file (or, with ``folder``, a folder), never a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise Unusable(f"{display}: file not found") from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, embedded NUL, ...
        raise Unusable(f"{display}: cannot be opened ({type(exc).__name__})") from None
    what = kind_of(info.st_mode)
    if what is not None:
        raise Unusable(f"{display}: is {what}; upload plain files only")
    if stat.S_ISDIR(info.st_mode) and not folder:
        raise Unusable(f"{display}: is a folder, not a file")
    return info


def open_regular(path: Path, display: str) -> BinaryIO:
    """A binary file object for the regular file ``path``: opened without following a link
    and without blocking (a FIFO would block ``open`` itself), checked with ``fstat``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise Unusable(f"{display}: file not found") from None
    except (OSError, ValueError) as exc:
        raise Unusable(f"{display}: cannot be opened ({type(exc).__name__}); upload plain files only") from None
    try:
        what = kind_of(os.fstat(fd).st_mode)
        if what is not None or stat.S_ISDIR(os.fstat(fd).st_mode):
            raise Unusable(f"{display}: is {what or 'a folder'}; upload plain files only")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, display: str, limit: int, what: str = "this kind of file") -> bytes:
    """The whole regular file ``path``, refused when longer than ``limit`` bytes (the most
    ``what`` can need)."""
    with open_regular(path, display) as f:
        data: bytes = f.read(limit + 1)
    if len(data) > limit:
        raise Unusable(f"{display}: is larger than the {limit} bytes {what} can need")
    return data


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)
_SEPARATORS = np.frombuffer(b",:", np.uint8)


def json_shape(data: bytes, block: int = 1 << 20) -> tuple[int, int]:
    """(deepest nesting of arrays and objects, number of elements) of the JSON ``data``,
    strings skipped, in linear time and in blocks, so a large file needs no more than a few
    bytes per input byte. Elements are counted as the arrays and objects plus the commas and
    colons: every value but the first of its container follows one of them, so parsing makes
    at most about twice as many Python objects (three times for objects' keys)."""
    skeleton = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    deepest = level = elements = 0
    for start in range(0, skeleton.size, block):
        part = skeleton[start : start + block]
        opens, closes = np.isin(part, _OPEN), np.isin(part, _CLOSE)
        elements += int(np.count_nonzero(opens)) + int(np.count_nonzero(np.isin(part, _SEPARATORS)))
        levels = np.cumsum(opens.astype(np.int32) - closes.astype(np.int32)) + level
        deepest, level = max(deepest, int(levels.max(initial=level))), int(levels[-1]) if levels.size else level
    return deepest, elements


def parse_json(
    data: bytes, display: str, max_depth: int = limits.MAX_JSON_DEPTH, max_elements: int = limits.MAX_JSON_ELEMENTS
) -> Any:
    """``json.loads`` of ``data`` after checking its nesting depth and its element count."""
    depth, elements = json_shape(data)
    if depth > max_depth:
        raise Unusable(f"{display}: its JSON is nested more than {max_depth} levels deep")
    if elements > max_elements:
        raise Unusable(
            f"{display}: its JSON holds more than {max_elements} elements (values, arrays and objects), "
            "more than any job list or metadata needs"
        )
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise Unusable(f"{display}: is not valid JSON ({reason})") from None


def load_json(path: Path, display: str, limit: int = limits.MAX_JSON_BYTES) -> Any:
    """A metadata file parsed as JSON, within ``limit`` bytes (see ``parse_json``)."""
    return parse_json(read_bytes(path, display, limit), display)
