"""MetaImage: an emulation of MetaIO's MET_Read (metaUtils.cxx) over the fields MetaImage
reads, and the check that a .mha holds its own pixel data (``itk_formats`` explains why)."""

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evaluation.readers.itk_formats.header import (
    Header,
    _check_text,
    _Doubt,
    _NeedMore,
    _normal_key,
    _read_header,
    _read_span,
    _text_problem,
)

META_MAX_LINE = 400  # MetaIO keeps 499 characters of a value and overflows a 255-byte buffer on long keys
META_MAX_NAME = 200
META_MAX_DIMS = 10
LOCAL_NAMES = ("LOCAL", "Local", "local")  # the ElementDataFile values MetaIO reads as "in this file"

_SPACE = frozenset(b" \t\n\v\f\r")  # isspace() in the C locale
_BLANK = frozenset(b" \t")  # isblank()
_EQUALS, _COLON, _CR, _LF = ord("="), ord(":"), ord("\r"), ord("\n")
_NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_META_NAME = 500  # MET_Read stops a key after this many characters (and gives up)
_META_GETLINE = 500  # getline() buffer of known fields
_META_GETLINE_OTHER = 8 * 4096  # getline() buffer of unknown fields (sizeof value)

# name -> (type, required, length): length is an int, "ndims", "ndims2" (matrix) or None (scalar)
_META_FIELDS: dict[bytes, tuple[str, bool, int | str | None]] = {}
for _name, _type, _required, _length in (
    # MetaObject::M_SetupReadFields
    ("Comment", "string", False, None),
    ("AcquisitionDate", "string", False, None),
    ("ObjectType", "string", False, None),
    ("ObjectSubType", "string", False, None),
    ("NDims", "int", True, None),
    ("Name", "string", False, None),
    ("ID", "int", False, None),
    ("ParentID", "int", False, None),
    ("CompressedData", "string", False, None),
    ("CompressedDataSize", "int", False, None),
    ("BinaryData", "string", False, None),
    ("ElementByteOrderMSB", "string", False, None),
    ("BinaryDataByteOrderMSB", "string", False, None),
    ("Color", "float", False, 4),
    ("Position", "float", False, "ndims"),
    ("Origin", "float", False, "ndims"),
    ("Offset", "float", False, "ndims"),
    ("TransformMatrix", "float", False, "ndims2"),
    ("Rotation", "float", False, "ndims2"),
    ("Orientation", "float", False, "ndims2"),
    ("CenterOfRotation", "float", False, "ndims"),
    ("DistanceUnits", "string", False, None),
    ("AnatomicalOrientation", "string", False, None),
    ("ElementSpacing", "float", False, "ndims"),
    # MetaImage::M_SetupReadFields
    ("DimSize", "int", True, "ndims"),
    ("HeaderSize", "int", False, None),
    ("Modality", "string", False, None),
    ("ImagePosition", "float", False, "ndims"),
    ("SequenceID", "int", False, "ndims"),
    ("ElementMin", "float", False, None),
    ("ElementMax", "float", False, None),
    ("ElementNumberOfChannels", "int", False, None),
    ("ElementSize", "float", False, "ndims"),
    ("ElementNBits", "int", False, None),
    ("ElementToIntensityFunctionSlope", "float", False, None),
    ("ElementToIntensityFunctionOffset", "float", False, None),
    ("ElementType", "string", True, None),
    ("ElementDataFile", "string", True, None),
):
    _META_FIELDS.setdefault(_name.encode(), (_type, _required, _length))
_META_TERMINATOR = b"ElementDataFile"


class _IStream:
    """The parts of a libstdc++ ``std::istream`` that MET_Read uses, over the bytes read."""

    def __init__(self, data: bytes, complete: bool):
        self.data, self.complete, self.pos = data, complete, 0
        self.eof = self.fail = False

    def _at_end(self) -> None:
        if not self.complete:
            raise _NeedMore

    def get(self) -> int:
        if self.eof or self.fail:
            self.fail = True
            return -1
        if self.pos >= len(self.data):
            self._at_end()
            self.eof = self.fail = True
            return -1
        self.pos += 1
        return self.data[self.pos - 1]

    def putback(self) -> None:
        self.eof = False  # C++11: putback clears eofbit first
        if self.fail:
            return
        self.pos -= 1

    def getline(self, size: int) -> bytes:
        """getline(buffer, size): at most size-1 characters, up to and without the newline."""
        if self.eof or self.fail:
            self.fail = True
            return b""
        data, start = self.data, self.pos
        newline = data.find(b"\n", start, start + size - 1)
        if newline >= 0:
            self.pos = newline + 1
            return data[start:newline]
        end = min(start + size - 1, len(data))
        self.pos = end
        if end >= len(data):
            self._at_end()
            self.eof = True
            self.fail = end == start
        elif data[end] == _LF:
            self.pos = end + 1
        else:
            self.fail = True  # size-1 characters stored and no newline: failbit
        return data[start:end]

    def number(self, what: str) -> float:
        """operator>>(double&), for well-formed numbers only (anything else is refused)."""
        data, pos = self.data, self.pos
        while pos < len(data) and data[pos] in _SPACE:
            pos += 1
        if pos >= len(data):
            self._at_end()
            raise _Doubt(f"its MetaImage header ends inside the numbers of {what}")
        match = _NUMBER.match(data, pos)
        if match is None:
            raise _Doubt(f"its MetaImage header has a missing or malformed number in {what}")
        if match.end() >= len(data):
            self._at_end()
            raise _Doubt(f"its MetaImage header ends inside the numbers of {what}")
        if data[match.end()] not in _SPACE:
            raise _Doubt(f"its MetaImage header has a malformed number in {what}")
        value = float(match.group())
        if not math.isfinite(value):
            raise _Doubt(f"its MetaImage header has a number out of range in {what}")
        self.pos = match.end()
        return value


def _strip_end(value: bytes) -> bytes:
    """MET_StringStripEnd of a C string: cut at NUL, drop trailing spaces and unprintables."""
    value = value.split(b"\0", 1)[0]
    end = len(value)
    while end > 0 and not (0x21 <= value[end - 1] <= 0x7E):
        end -= 1
    return value[:end]


def _skip_to_value(s: _IStream) -> bool:
    """MET_SkipToVal: past the next '=' or ':' (across lines), then separators and blanks."""
    if s.eof:
        return False
    c = s.get()
    while not s.eof and c != _EQUALS and c != _COLON:
        if s.fail:
            raise _Doubt("its MetaImage header cannot be parsed")  # unreachable in MET_Read
        c = s.get()
    while not s.eof and (c in (_EQUALS, _COLON) or c in _BLANK):
        c = s.get()
    if s.eof:
        return False
    s.putback()
    return True


@dataclass
class MetaHeader:
    """The outcome of MET_Read as MetaImage runs it: ``complete`` when the header parsed and
    ended at ``ElementDataFile`` (then ``data_file`` is its value as ITK uses it), ``end`` the
    offset where the parse stopped, ``records`` every key read with its value."""

    complete: bool
    data_file: bytes | None
    end: int
    records: list[tuple[bytes, Any, bool]] = field(default_factory=list)  # (key, value, known field)
    values: dict[bytes, Any] = field(default_factory=dict)  # bytes, a number or a list of numbers


def parse_metaimage(data: bytes, complete: bool = True) -> MetaHeader:
    """Emulate MetaIO's MET_Read (MetaImage fields, separator '=' and ':') over ``data``.
    Raises _Doubt where the emulation cannot be sure what MetaIO does, _NeedMore when the
    header runs past ``data`` and more of the file exists (``complete`` False)."""
    s = _IStream(data, complete)
    records: list[tuple[bytes, Any, bool]] = []
    values: dict[bytes, Any] = {}

    def result(done: bool, data_file: bytes | None = None) -> MetaHeader:
        return MetaHeader(done, data_file, s.pos, records, values)

    while not s.eof:
        c = s.get()
        while not s.eof and c != _EQUALS and c != _COLON and c in _SPACE:
            c = s.get()
        read = bytearray()
        while not s.eof and c not in (_EQUALS, _COLON, _CR, _LF) and len(read) < _META_NAME:
            read.append(c & 0xFF)
            c = s.get()
        if s.eof or len(read) >= _META_NAME:
            break
        s.putback()
        end = len(read) - 1
        while end > 0 and read[end] in _BLANK:
            end -= 1
        name = bytes(read[: end + 1])
        if len(name) > META_MAX_NAME:
            raise _Doubt(f"its MetaImage header has a key longer than {META_MAX_NAME} characters")
        key = name.split(b"\0", 1)[0]
        spec = _META_FIELDS.get(key)
        if spec is None:  # MET_Read keeps unknown keys as extra string fields
            if not _skip_to_value(s):
                break
            records.append((key, _strip_end(s.getline(_META_GETLINE_OTHER)), False))
            continue
        kind, _, declared = spec
        length: int | None
        if isinstance(declared, str):  # "ndims" or "ndims2": a vector or matrix of NDims
            if b"NDims" not in values:
                return result(False)  # "defined prior to defining NDims": MET_Read fails
            ndims = values[b"NDims"]
            length = ndims * ndims if declared == "ndims2" else ndims
        else:
            length = declared
        value = values.get(key)
        if _skip_to_value(s):
            what = key.decode()
            if kind == "string":
                value = _strip_end(s.getline(_META_GETLINE))
            elif length is None:
                value = s.number(what)
                s.getline(_META_GETLINE)
            else:
                value = [s.number(what) for _ in range(length)]
                s.getline(_META_GETLINE)
        elif kind == "string" and value is None:
            value = b""
        if kind == "int" and value is not None:  # MetaIO casts these to int: keep to exact integers
            value = [_whole(v, key) for v in value] if isinstance(value, list) else _whole(value, key)
        values[key] = value
        records.append((key, value, True))
        if key == b"NDims" and not (isinstance(value, int) and 1 <= value <= META_MAX_DIMS):
            raise _Doubt(f"its MetaImage header has NDims = {value}; expected 1 to {META_MAX_DIMS}")
        if key == b"DimSize" and isinstance(value, list) and min(value) < 1:
            raise _Doubt(f"its MetaImage header has DimSize = {' '.join(map(str, value))}; every size must be at least 1")
        if key == _META_TERMINATOR:
            required = [k for k, (_, req, _) in _META_FIELDS.items() if req]
            return result(all(k in values for k in required), value)
        if s.fail:
            break  # a failed stream never defines ElementDataFile: MetaIO's parse fails
    return result(False)


def _whole(value: float, key: bytes) -> int:
    """A value MetaIO casts to int (unsigned long long for CompressedDataSize): exact only."""
    if value != int(value) or abs(value) >= (2**63 if key == b"CompressedDataSize" else 2**31):
        raise _Doubt(f"its MetaImage header has {key.decode()} = {value:g}; expected a whole number")
    return int(value)


_META_DATA_KEY = re.compile(rb"(?:^|(?<=[\r\n]))[ \t\v\f]*element[ \t_-]*data[ \t_-]*file[ \t\v\f]*[=:]", re.I)
_META_LOOKAHEAD = 4096


def _check_metaimage(f: BinaryIO, size: int, path: Path) -> Header:
    header = _read_header(f, size, parse_metaimage)
    data = _read_span(f, header.end + _META_LOOKAHEAD)
    region = data[: header.end]
    if header.complete and header.data_file not in [n.encode() for n in LOCAL_NAMES]:
        raise _Doubt("a .mha file must hold its own pixel data (ElementDataFile = LOCAL)")
    if not header.complete:  # MetaIO's parse fails too; say why where a line shows it
        problem = _text_problem(region[: region.find(b"\0") if b"\0" in region else None], META_MAX_LINE)
        raise _Doubt(
            "its MetaImage header is incomplete ("
            + (problem or "it needs NDims, DimSize, ElementType and, last, ElementDataFile = LOCAL")
            + ")"
        )
    _check_text(region, "MetaImage", max_line=META_MAX_LINE)
    spellings = [r for r in header.records if _normal_key(r[0]) == _normal_key(_META_TERMINATOR)]
    if len(spellings) != 1 or len(_META_DATA_KEY.findall(region)) != 1 or _META_DATA_KEY.search(data, header.end):
        raise _Doubt("its MetaImage header must name its data file once, on one line: ElementDataFile = LOCAL")
    values = header.values

    def flag(key: bytes) -> bool:  # MetaObject::M_Read
        return bool(values.get(key, b"")[:1] in (b"T", b"t", b"1"))

    compressed = flag(b"CompressedData")
    binary = flag(b"BinaryData") if b"BinaryData" in values else True
    header_size = int(values.get(b"HeaderSize") or 0)
    fields = {"from_end": header_size == -1}
    offset = header.end
    if header_size > 0:
        offset = header_size
    elif header_size < -1:
        raise _Doubt(f"its MetaImage header has HeaderSize = {header_size}")
    if compressed:
        declared = int(values.get(b"CompressedDataSize") or 0)
        if declared < 0 or declared > size - offset:
            raise _Doubt(f"its MetaImage header declares {declared} compressed bytes, more than the file holds")
        encoding = "deflate"
    else:
        encoding = "raw" if binary else "ascii"
    return Header(".mha", size, min(offset, size), encoding, fields)
