"""NRRD: teem's header parse (airOneLine, _nrrdFormatNRRD_read, _nrrdReadNrrdParseField), and
the check that a .nrrd holds its own data (``itk_formats`` explains why)."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from evaluation.readers import limits
from evaluation.readers.itk_formats.header import (
    Header,
    _check_text,
    _Doubt,
    _excerpt,
    _NeedMore,
    _normal_key,
    _read_header,
    _read_span,
)

NRRD_MAX_LINE = 1 << 16

_NRRD_MAGICS = (b"NRRD00.01", b"NRRD0001", b"NRRD0002", b"NRRD0003", b"NRRD0004", b"NRRD0005")
# nrrdField's equivalent spellings (compared after lower-casing the key)
_NRRD_FIELDS = {
    b"content": "content",
    b"number": "number",
    b"type": "type",
    b"block size": "block size",
    b"blocksize": "block size",
    b"dimension": "dimension",
    b"space": "space",
    b"space dimension": "space dimension",
    b"spacedimension": "space dimension",
    b"sizes": "sizes",
    b"spacings": "spacings",
    b"thicknesses": "thicknesses",
    b"axis mins": "axis mins",
    b"axismins": "axis mins",
    b"axis maxs": "axis maxs",
    b"axismaxs": "axis maxs",
    b"space directions": "space directions",
    b"spacedirections": "space directions",
    b"centers": "centers",
    b"centerings": "centers",
    b"kinds": "kinds",
    b"labels": "labels",
    b"units": "units",
    b"min": "min",
    b"max": "max",
    b"old min": "old min",
    b"oldmin": "old min",
    b"old max": "old max",
    b"oldmax": "old max",
    b"endian": "endian",
    b"encoding": "encoding",
    b"line skip": "line skip",
    b"lineskip": "line skip",
    b"byte skip": "byte skip",
    b"byteskip": "byte skip",
    b"key/value": "key/value",
    b"sample units": "sample units",
    b"sampleunits": "sample units",
    b"space units": "space units",
    b"spaceunits": "space units",
    b"space origin": "space origin",
    b"spaceorigin": "space origin",
    b"measurement frame": "measurement frame",
    b"measurementframe": "measurement frame",
    b"data file": "data file",
    b"datafile": "data file",
}
_NRRD_ENCODINGS = {
    b"raw": "raw",
    b"txt": "ascii",
    b"text": "ascii",
    b"ascii": "ascii",
    b"hex": "hex",
    b"gz": "deflate",
    b"gzip": "deflate",
}
_NRRD_LINE = re.compile(rb"\r\n|\r|\n")


@dataclass
class NrrdHeader:
    """teem's view of a NRRD header: ``lines`` as (kind, field, value) with kind "comment",
    "field", "keyvalue" or "error"; ``end`` the offset just past the empty line (None if the
    header ran to the end of the file)."""

    magic: bytes
    lines: list[tuple[str, str | None, bytes]]
    end: int | None


def parse_nrrd(data: bytes, complete: bool = True) -> NrrdHeader:
    """teem's header parse over ``data``: lines end at LF, CR or CRLF (airOneLine), the header
    at the first empty line; each line classified as _nrrdReadNrrdParseField does."""
    pos, magic = 0, None
    lines: list[tuple[str, str | None, bytes]] = []
    while True:
        match = _NRRD_LINE.search(data, pos)
        if match is None or (match.group() == b"\r" and match.end() == len(data) and not complete):
            if not complete:
                raise _NeedMore
            end = None
            break
        line, pos = data[pos : match.start()], match.end()
        if len(line) > NRRD_MAX_LINE:
            raise _Doubt(f"its NRRD header has a line longer than {NRRD_MAX_LINE} characters")
        if magic is None:
            magic = line
            continue
        if not line:
            end = pos
            break
        lines.append(_nrrd_line(line))
    return NrrdHeader(magic or b"", lines, end)


def _nrrd_line(line: bytes) -> tuple[str, str | None, bytes]:
    if line[:1] == b"#":
        return ("comment", None, line)
    colon = line.find(b": ")
    if colon >= 0:
        name = _NRRD_FIELDS.get(line[:colon].lower())
        if name is not None:
            return ("field", name, line[colon + 2 :].lstrip(b" \t"))
    if b":=" in line:
        return ("keyvalue", None, line)
    return ("error", None, line)


def _check_nrrd(f: BinaryIO, size: int, path: Path) -> Header:
    header = _read_header(f, size, parse_nrrd)
    if header.magic not in _NRRD_MAGICS:
        raise _Doubt("is not a NRRD file (its first line must be NRRD0001 to NRRD0005)")
    seen, fields = set(), {}
    detached = "a detached NRRD header is not accepted; save the data inside the .nrrd file"
    for kind, name, value in header.lines:
        key = value.split(b":", 1)[0] if kind != "field" or name is None else name.encode()  # a field has its name
        if kind != "comment" and _normal_key(key) == b"datafile":
            raise _Doubt(detached)
        if kind == "error":
            raise _Doubt(f"its NRRD header has a line that is not a field, a key:=value or a # comment ({_excerpt(value)})")
        if kind == "field":
            if name in seen:
                raise _Doubt(f"its NRRD header sets the field '{name}' twice")
            if name == "key/value":
                raise _Doubt("its NRRD header has a 'key/value:' field; write key:=value")
            seen.add(name)
            fields[name] = value
    if header.end is None:
        raise _Doubt("its NRRD header does not end with an empty line before the data; " + detached)
    _check_text(_read_span(f, header.end), "NRRD", lone_cr=True)
    encoding = _NRRD_ENCODINGS.get(fields.get("encoding", b"").lower())
    if encoding is None:
        raise _Doubt(f"its NRRD encoding {_excerpt(fields.get('encoding', b''))!r} is not raw, ascii, hex or gzip")
    skips = {}
    for name in ("byte skip", "line skip"):
        if name in fields:
            if not re.fullmatch(rb"-?\d{1,18}", fields[name].strip()):
                raise _Doubt(f"its NRRD '{name}' is not a whole number")
            skips[name] = int(fields[name])
    if skips.get("line skip", 0) < 0:
        raise _Doubt("its NRRD 'line skip' is negative")
    byte_skip = skips.get("byte skip", 0)
    if byte_skip < -1 or (byte_skip < 0 and encoding != "raw"):
        raise _Doubt(f"its NRRD 'byte skip' of {byte_skip} is not supported")
    if encoding == "deflate" and byte_skip > limits.MAX_COMPRESSED_SKIP:
        raise _Doubt(
            f"its NRRD 'byte skip' of {byte_skip} bytes of compressed data is more than the "
            f"{limits.MAX_COMPRESSED_SKIP} accepted; save the data without a byte skip"
        )
    return Header(".nrrd", size, header.end, encoding, {"skip": max(byte_skip, 0), "from_end": byte_skip == -1})
