"""What the three text-header checks share: the outcome of a check (``Header``), the two ways a
parse stops (``_Doubt``: refused; ``_NeedMore``: read further) and the plain-text rules."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

HEADER_READS = (1 << 16, 1 << 20)  # bytes read for a text header: first try, then the most ever parsed

T = TypeVar("T")


@dataclass(frozen=True)
class Header:
    """What the byte-level check learned: where the pixel data is and how it is stored."""

    kind: str
    file_size: int
    data_offset: int  # where the pixel data starts (MetaImage/NRRD: end of the text header)
    encoding: str  # "raw", "deflate" (zlib or gzip), "ascii" or "hex"
    fields: dict[str, Any] = field(default_factory=dict)  # the header's values that the size bound uses


class _Doubt(Exception):
    """The file is refused: the message says why, in the participant's terms."""


class _NeedMore(Exception):
    """The header runs past the bytes read so far."""


def _read_header(f: BinaryIO, size: int, parse: Callable[[bytes, bool], T]) -> T:
    """``parse(data, complete)`` on the file's first bytes, reading more (up to the last of
    ``HEADER_READS``) while the header runs past what was read."""
    for limit in HEADER_READS:
        f.seek(0)
        data = f.read(limit)
        try:
            return parse(data, len(data) >= size)
        except _NeedMore:
            continue
    raise _Doubt(f"its header is longer than {HEADER_READS[-1]} bytes; write a plain header")


def _normal_key(name: bytes) -> bytes:
    """A key folded for spotting other spellings of the same key: lower case, letters only."""
    return re.sub(rb"[^a-z0-9]", b"", name.lower())


def _read_span(f: BinaryIO, limit: int) -> bytes:
    f.seek(0)
    return f.read(limit)


def _check_text(region: bytes, what: str, max_line: int | None = None, lone_cr: bool = False) -> None:
    """A text header must be plain: no NUL, ASCII only, (unless ``lone_cr``) no CR without LF,
    and (with ``max_line``) no line longer than that."""
    problem = _text_problem(region, max_line, lone_cr)
    if problem:
        raise _Doubt(f"its {what} header {problem}")


def _text_problem(region: bytes, max_line: int | None = None, lone_cr: bool = False) -> str | None:
    if b"\0" in region:
        return "contains NUL bytes"
    if re.search(rb"[^\t\n\r\x20-\x7e]", region):
        return "has characters other than plain ASCII text"
    if not lone_cr and re.search(rb"\r(?!\n)", region):
        return "ends lines with a carriage return alone; use LF or CRLF line ends"
    if max_line is not None and max(map(len, region.split(b"\n")), default=0) > max_line:
        return f"has a line longer than {max_line} characters"
    return None


def _excerpt(value: bytes) -> str:
    text = value.decode("ascii", "backslashreplace")
    return text if len(text) <= 40 else text[:37] + "..."
