"""SimpleITK formats (MetaImage, NRRD, NIfTI, PNG) read so that a file can only ever be read
by itself, with its size known before any pixel is decoded.

Three things make a naive ``sitk.ReadImage`` of an uploaded file unsafe:

- **Headers name other files.** A MetaImage header's ``ElementDataFile`` and a NRRD header's
  ``data file`` make ITK read the pixels from any path (relative to the header, or absolute),
  from a ``LIST`` of paths or from a ``%d`` pattern; NRRD even opens its data file while only
  the header is being read (``ReadImageInformation``). A ``.nii.gz`` makes the NIfTI library
  read a ``.nii`` of the same name beside it, if there is one, instead of the file itself.
- **Content chooses the reader.** Left to its factory, SimpleITK picks the ImageIO by what the
  file looks like, so a ``.nii`` holding a DICOM, HDF5, Bruker or Stimulate header is read as
  such, with those formats' own ways of naming other files. Here the ImageIO is always the
  one of the file's suffix (``IMAGE_IOS``).
- **A regular expression is not the library's parser.** ITK accepts separators, spellings,
  line ends and header lengths a simple pattern does not see. Each header is therefore parsed
  here the way the library parses it, and whatever that parse cannot be sure of is refused
  rather than guessed:

  * MetaImage (MetaIO ``MET_Read`` in ``metaUtils.cxx``, fields from ``metaObject.cxx`` and
    ``metaImage.cxx``): a character-level emulation of the stream parse. Keys end at ``=``
    or ``:``, match exactly (case matters), the first ``ElementDataFile`` ends the header,
    which must then be ``LOCAL`` (or ``Local``/``local``, the spellings MetaIO reads as
    local). Refused besides: NUL or non-ASCII bytes, carriage returns alone, lines over
    ``META_MAX_LINE`` characters, any other line that names the data file in another
    spelling (below the header too), malformed numbers, ``NDims`` outside 1..10.
  * NRRD (teem/NrrdIO ``airOneLine``, ``_nrrdFormatNRRD_read``, ``_nrrdReadNrrdParseField``
    and the ``nrrdField`` enum with its equivalent spellings): lines end at LF, CR or CRLF,
    the header at the first empty line; a line is a comment (``#``), a field (``name: ``,
    names case-insensitive, ``data file`` also spelled ``datafile``) or a key/value
    (``key:=value``). Any ``data file`` field is refused, as are lines teem rejects,
    duplicate fields, NUL or non-ASCII bytes, a header without its empty line, and encodings
    other than raw, ascii, hex and gzip.
  * NIfTI (``nifti1_io.c``: ``nifti_image_read``, ``is_nifti_file``, ``need_nhdr_swap``,
    ``nifti_findhdrname``, ``nifti_findimgname``): NIfTI-1 single-file magic ``n+1`` only, in
    either byte order (header pairs ``ni1``, Analyze files without magic and the NIfTI-2
    header, which this ITK cannot read, are refused), sane sizes and ``vox_offset``; the
    header of a ``.nii.gz`` is read through a bounded gzip read, and a ``.nii`` beside a
    ``.nii.gz`` of the same name is refused because the library would read it instead.
    Extensions must be all lower or all upper case, as the library requires.
  * PNG: the PNG signature and ``IHDR`` chunk; PNG cannot name other files.

Only then does SimpleITK see the file, with the ImageIO forced: ``ReadImageInformation``
gives shape, pixel type and components (``info``), the pixel bytes this implies are checked
against what the file can hold (raw data must fit in the file, compressed data cannot expand
more than deflate's 1032:1), callers compare the shape with their own bound, and only then
``read`` decodes the pixels.

Work is bounded before ITK sees a file: a gzip-encoded NRRD may skip at most
``limits.MAX_COMPRESSED_SKIP`` bytes (teem's skip of compressed data reads them one by one:
``byte skip: 1000000000`` took minutes), and NIfTI header extensions are refused (label maps
carry none; a 1 GiB extension is decompressed and allocated), as are pixels that start past
``limits.NIFTI_MAX_VOX_OFFSET``.

Problems raise ``errors.Unusable``. The file must not change between the check and the read:
the grader reads uploads that nothing else writes to.
"""

import functools
import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs, limits
from evaluation.readers.untrusted import check_regular, open_regular
from evaluation.readers.volume import Volume, reason

IMAGE_IOS = {
    ".mha": "MetaImageIO",
    ".nrrd": "NrrdImageIO",
    ".nii": "NiftiImageIO",
    ".nii.gz": "NiftiImageIO",
    ".png": "PNGImageIO",
}
SUFFIXES = tuple(IMAGE_IOS)

HEADER_READS = (1 << 16, 1 << 20)  # bytes read for a text header: first try, then the most ever parsed
META_MAX_LINE = 400  # MetaIO keeps 499 characters of a value and overflows a 255-byte buffer on long keys
META_MAX_NAME = 200
META_MAX_DIMS = 10
NRRD_MAX_LINE = 1 << 16
LOCAL_NAMES = ("LOCAL", "Local", "local")  # the ElementDataFile values MetaIO reads as "in this file"


def kind_of(path: Path) -> str | None:
    """The format suffix of ``path`` (lower case), or None if it is not a SimpleITK format."""
    name = path.name.lower()
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if name.endswith(s)), None)


def image_io(path: Path) -> str:
    """The ITK ImageIO that reads ``path``, chosen by its suffix alone."""
    kind = kind_of(path)
    if kind is None:
        raise ValueError(f"not a SimpleITK format: {path.name}")
    return IMAGE_IOS[kind]


@dataclass(frozen=True)
class Header:
    """What the byte-level check learned: where the pixel data is and how it is stored."""

    kind: str
    file_size: int
    data_offset: int  # where the pixel data starts (MetaImage/NRRD: end of the text header)
    encoding: str  # "raw", "deflate" (zlib or gzip), "ascii" or "hex"
    fields: dict = field(default_factory=dict)  # the header's values that the size bound uses


@dataclass(frozen=True)
class Info:
    """Image facts from the header, in array axis order (z, y, x), before any pixel is read."""

    shape: tuple[int, ...]
    dtype: np.dtype
    components: int
    header: Header

    @property
    def voxels(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.voxels * self.components * self.dtype.itemsize


class _Doubt(Exception):
    """The file is refused: the message says why, in the participant's terms."""


class _NeedMore(Exception):
    """The header runs past the bytes read so far."""


# --------------------------------------------------------------------------------------------
# Public API


def check(path: Path, display: str | None = None) -> Header:
    """Refuse ``path`` unless SimpleITK, with the ImageIO of its suffix, reads it from itself
    alone; returns what the header says about the pixel data. Reads the header only."""
    display = display or path.name
    kind = kind_of(path)
    if kind is None:
        raise Unusable(f"{display}: is not a MetaImage, NRRD, NIfTI or PNG file")
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise Unusable(f"{display}: the file name is not valid UTF-8; rename it with plain characters") from None
    check_regular(path, display)  # names links and special files; open_regular checks again
    try:
        with open_regular(path, display) as f:
            size = os.fstat(f.fileno()).st_size
            return _CHECKS[kind](f, size, path)
    except _Doubt as doubt:
        raise Unusable(f"{display}: {doubt}") from None


def info(path: Path, display: str | None = None) -> Info:
    """``check``, then shape, pixel type and components from ``ReadImageInformation`` with the
    forced ImageIO; refuses a header that declares more pixel bytes than the file can hold."""
    display = display or path.name
    header = check(path, display)
    reader = _reader(path)
    _itk(reader.ReadImageInformation, header.kind, display)
    dtype = _dtypes().get(reader.GetPixelID())
    if dtype is None:
        raise Unusable(f"{display}: has pixel type {reader.GetPixelIDTypeAsString()}, which is not a plain number type")
    found = Info(tuple(int(n) for n in reader.GetSize())[::-1], np.dtype(dtype), int(reader.GetNumberOfComponents()), header)
    _check_extent(found, display)
    return found


def read(path: Path, display: str | None = None, max_voxels: int | None = None):
    """The image as ``images.Volume`` (array in (z, y, x) order, geometry reversed to match),
    after ``info``; refuses multi-component pixels and, with ``max_voxels``, larger images
    before their pixels are decoded."""
    display = display or path.name
    found = info(path, display)
    if max_voxels is not None and found.voxels > max_voxels:
        raise Unusable(f"{display}: has shape {found.shape}, more voxels than the {max_voxels} of the image it predicts")
    if found.components != 1:
        raise Unusable(f"{display}: has {found.components} components per pixel; labels must be scalar")
    image = _itk(_reader(path).Execute, found.header.kind, display)
    if image.GetNumberOfComponentsPerPixel() != 1:
        raise Unusable(f"{display}: has {image.GetNumberOfComponentsPerPixel()} components per pixel; labels must be scalar")
    import SimpleITK as sitk

    dimension = image.GetDimension()
    direction = np.asarray(image.GetDirection()).reshape(dimension, dimension)[::-1, ::-1]
    return Volume(
        array=sitk.GetArrayFromImage(image),
        spacing=tuple(image.GetSpacing())[::-1],
        origin=tuple(image.GetOrigin())[::-1],
        direction=tuple(direction.ravel()),
    )


def _reader(path: Path):
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetImageIO(image_io(path))
    reader.SetFileName(str(path))
    return reader


def _itk(action, kind: str, display: str):
    try:
        return action()
    except RuntimeError as exc:  # SimpleITK raises RuntimeError for everything ITK throws
        raise Unusable(f"{display}: cannot be read as {kind} ({reason(exc)}); the file may be truncated or corrupt") from None


@functools.cache
def _dtypes() -> dict:
    """SimpleITK pixel ID -> numpy type of one component (scalar, vector and label images)."""
    import SimpleITK as sitk

    names = {
        "UInt8": np.uint8,
        "Int8": np.int8,
        "UInt16": np.uint16,
        "Int16": np.int16,
        "UInt32": np.uint32,
        "Int32": np.int32,
        "UInt64": np.uint64,
        "Int64": np.int64,
        "Float32": np.float32,
        "Float64": np.float64,
    }
    found = {}
    for name, dtype in names.items():
        for prefix in ("sitk", "sitkVector", "sitkLabel"):
            value = getattr(sitk, prefix + name, None)
            if isinstance(value, int) and value >= 0:
                found[value] = dtype
    return found


def _check_extent(found: Info, display: str) -> None:
    """Refuse a header that declares more pixel data than the file can hold, before ITK
    allocates a buffer for it (a few bytes must not claim terabytes)."""
    header = found.header
    available = header.file_size - header.data_offset
    count = found.voxels * found.components
    nbytes = header.fields.get("nbytes", found.nbytes)  # as stored (NIfTI may be rescaled to float)
    if header.encoding == "raw":
        needed = nbytes + max(0, header.fields.get("skip", 0))
        if header.fields.get("from_end"):
            needed, available = nbytes, header.file_size
        if needed > available:
            raise Unusable(
                f"{display}: is truncated: its header declares {nbytes} bytes of pixel data, "
                f"but only {max(available, 0)} follow the header"
            )
    elif header.encoding == "deflate":  # what is skipped is decompressed too
        skipped = max(0, header.fields.get("skip", 0))
        if nbytes + skipped > limits.DEFLATE_MAX_RATIO * max(available, 0) + limits.SIZE_SLACK:
            raise Unusable(
                f"{display}: its header declares {nbytes + skipped} bytes of compressed data, more than its "
                f"{max(available, 0)} compressed bytes can hold"
            )
    elif header.encoding == "hex":
        if 2 * nbytes > available:
            raise Unusable(f"{display}: is truncated: its header declares more pixel data than the file holds")
    elif count > available:  # ascii: at least one character per value
        raise Unusable(f"{display}: is truncated: its header declares more pixel values than the file holds")


def _read_header(f, size: int, parse):
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


# --------------------------------------------------------------------------------------------
# MetaImage: an emulation of MetaIO's MET_Read (metaUtils.cxx) over the fields MetaImage reads

_SPACE = frozenset(b" \t\n\v\f\r")  # isspace() in the C locale
_BLANK = frozenset(b" \t")  # isblank()
_EQUALS, _COLON, _CR, _LF = ord("="), ord(":"), ord("\r"), ord("\n")
_NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_META_NAME = 500  # MET_Read stops a key after this many characters (and gives up)
_META_GETLINE = 500  # getline() buffer of known fields
_META_GETLINE_OTHER = 8 * 4096  # getline() buffer of unknown fields (sizeof value)

# name -> (type, required, length): length is an int, "ndims", "ndims2" (matrix) or None (scalar)
_META_FIELDS = {}
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


def _normal_key(name: bytes) -> bytes:
    """A key folded for spotting other spellings of the same key: lower case, letters only."""
    return re.sub(rb"[^a-z0-9]", b"", name.lower())


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
    records: list = field(default_factory=list)
    values: dict = field(default_factory=dict)


def parse_metaimage(data: bytes, complete: bool = True) -> MetaHeader:
    """Emulate MetaIO's MET_Read (MetaImage fields, separator '=' and ':') over ``data``.
    Raises _Doubt where the emulation cannot be sure what MetaIO does, _NeedMore when the
    header runs past ``data`` and more of the file exists (``complete`` False)."""
    s = _IStream(data, complete)
    records, values = [], {}

    def result(done: bool, data_file=None) -> MetaHeader:
        return MetaHeader(done, data_file, s.pos, records, values)

    while not s.eof:
        c = s.get()
        while not s.eof and c != _EQUALS and c != _COLON and c in _SPACE:
            c = s.get()
        name = bytearray()
        while not s.eof and c not in (_EQUALS, _COLON, _CR, _LF) and len(name) < _META_NAME:
            name.append(c & 0xFF)
            c = s.get()
        if s.eof or len(name) >= _META_NAME:
            break
        s.putback()
        end = len(name) - 1
        while end > 0 and name[end] in _BLANK:
            end -= 1
        name = bytes(name[: end + 1])
        if len(name) > META_MAX_NAME:
            raise _Doubt(f"its MetaImage header has a key longer than {META_MAX_NAME} characters")
        key = name.split(b"\0", 1)[0]
        spec = _META_FIELDS.get(key)
        if spec is None:  # MET_Read keeps unknown keys as extra string fields
            if not _skip_to_value(s):
                break
            records.append((key, _strip_end(s.getline(_META_GETLINE_OTHER)), False))
            continue
        kind, _, length = spec
        if length in ("ndims", "ndims2"):
            if b"NDims" not in values:
                return result(False)  # "defined prior to defining NDims": MET_Read fails
            ndims = values[b"NDims"]
            length = ndims * ndims if length == "ndims2" else ndims
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


def _check_metaimage(f, size: int, path: Path) -> Header:
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
    flag = lambda key: values.get(key, b"")[:1] in (b"T", b"t", b"1")  # noqa: E731 - MetaObject::M_Read
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


def _read_span(f, limit: int) -> bytes:
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


# --------------------------------------------------------------------------------------------
# NRRD: teem's header parse (airOneLine, _nrrdFormatNRRD_read, _nrrdReadNrrdParseField)

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
    lines: list
    end: int | None


def parse_nrrd(data: bytes, complete: bool = True) -> NrrdHeader:
    """teem's header parse over ``data``: lines end at LF, CR or CRLF (airOneLine), the header
    at the first empty line; each line classified as _nrrdReadNrrdParseField does."""
    pos, lines, magic = 0, [], None
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


def _nrrd_line(line: bytes) -> tuple:
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


def _check_nrrd(f, size: int, path: Path) -> Header:
    header = _read_header(f, size, parse_nrrd)
    if header.magic not in _NRRD_MAGICS:
        raise _Doubt("is not a NRRD file (its first line must be NRRD0001 to NRRD0005)")
    seen, fields = set(), {}
    detached = "a detached NRRD header is not accepted; save the data inside the .nrrd file"
    for kind, name, value in header.lines:
        key = value.split(b":", 1)[0] if kind != "field" else name.encode()
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


def _excerpt(value: bytes) -> str:
    text = value.decode("ascii", "backslashreplace")
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------------------------
# NIfTI (nifti1_io.c)

_NIFTI1_SIZE = 348
_NIFTI2_SIZE = 540
# datatype code -> bytes per voxel, for the scalar number types (nifti_datatype_sizes)
_NIFTI_TYPES = {2: 1, 4: 2, 8: 4, 16: 4, 64: 8, 256: 1, 512: 2, 768: 4, 1024: 8, 1280: 8}


@dataclass(frozen=True)
class NiftiHeader:
    byte_order: str  # "<" or ">"
    dims: tuple[int, ...]  # dim[1..dim[0]], x first
    datatype: int
    vox_offset: int  # where the library starts reading pixels (max(348, int(vox_offset)))

    @property
    def nbytes(self) -> int:
        return math.prod(self.dims) * _NIFTI_TYPES[self.datatype]


def parse_nifti(head: bytes) -> NiftiHeader:
    """The NIfTI-1 header in ``head`` (its first 348 bytes or more; the extender after them is
    checked by the caller), as nifti1_io reads it;
    refuses anything but a single-file NIfTI-1 image of scalar numbers."""
    if len(head) < _NIFTI1_SIZE:
        raise _Doubt("is too short for a NIfTI header; the file is truncated or not NIfTI")
    for order in "<>":
        sizeof_hdr = struct.unpack_from(order + "i", head, 0)[0]
        if sizeof_hdr == _NIFTI2_SIZE and head[4:7] in (b"n+2", b"ni2"):
            raise _Doubt("is a NIfTI-2 file, which this reader cannot read; save it as NIfTI-1 (.nii or .nii.gz)")
        if sizeof_hdr == _NIFTI1_SIZE:
            break
    else:
        raise _Doubt("is not a NIfTI-1 file (its header size field is not 348)")
    magic = head[344:348]
    if magic != b"n+1\0":
        if magic[:1] == b"n" and magic[1:2] in (b"i", b"+"):
            raise _Doubt(
                f"has NIfTI magic {magic.rstrip(bytes(1)).decode('ascii', 'replace')!r}; only single-file NIfTI-1 ('n+1', header and pixels in one .nii) is accepted"
            )
        raise _Doubt("is an Analyze file or has no NIfTI magic; only single-file NIfTI-1 ('n+1') is accepted")
    dim = struct.unpack_from(order + "8h", head, 40)
    if not 1 <= dim[0] <= 7:  # need_nhdr_swap decides by dim[0]: it must agree with sizeof_hdr
        raise _Doubt(f"has dim[0] = {dim[0]} in its NIfTI header; expected 1 to 7")
    dims = dim[1 : dim[0] + 1]
    if min(dims) < 1:
        raise _Doubt(f"has image size {dims} in its NIfTI header; every size must be at least 1")
    datatype = struct.unpack_from(order + "h", head, 70)[0]
    if datatype not in _NIFTI_TYPES:
        raise _Doubt(f"has NIfTI datatype code {datatype}; expected a scalar number type")
    vox_offset = struct.unpack_from(order + "f", head, 108)[0]
    if not math.isfinite(vox_offset) or vox_offset >= 2**31:
        raise _Doubt(f"has vox_offset = {vox_offset} in its NIfTI header")
    return NiftiHeader(order, tuple(dims), datatype, max(_NIFTI1_SIZE, int(vox_offset)))


def _nifti_extension(name: str) -> tuple[str, str]:
    """(base name, extension) as nifti_find_file_extension splits them: the extension must be
    all lower or all upper case, or the library looks for other files."""
    ext = name[-7:] if name.lower().endswith(".nii.gz") else name[-4:]
    letters = ext.replace(".", "")
    if letters != letters.lower() and letters != letters.upper():
        raise _Doubt(f"has the mixed-case extension {ext!r}; rename it to {ext.lower()!r}")
    return name[: -len(ext)], ext


def _check_nifti(f, size: int, path: Path) -> Header:
    base, ext = _nifti_extension(path.name)
    compressed = ext.lower() == ".nii.gz"
    if compressed:
        sibling = base + (".nii" if ext.islower() else ".NII")
        if os.path.lexists(path.with_name(sibling)):  # nifti_findimgname tries it before the file itself
            raise _Doubt(f"the NIfTI library would read the file {sibling} beside it instead; remove one of the two")
        try:
            head = codecs.prefix(codecs.GZIP, f.read, _NIFTI1_SIZE + 4)
        except Unusable as exc:
            raise _Doubt(f"is not a gzip-compressed NIfTI file ({exc}); name an uncompressed file .nii") from None
    else:
        head = f.read(_NIFTI1_SIZE + 4)
    nifti = parse_nifti(head)
    if len(head) > _NIFTI1_SIZE and head[_NIFTI1_SIZE] != 0:
        raise _Doubt("has NIfTI header extensions, which are not accepted (label maps carry none); save it without them")
    if compressed:  # the library decompresses what comes before the pixels, byte by byte
        if nifti.vox_offset > limits.NIFTI_MAX_VOX_OFFSET:
            raise _Doubt(
                f"has vox_offset = {nifti.vox_offset} in its NIfTI header: its pixels would start after more than "
                f"{limits.NIFTI_MAX_VOX_OFFSET} bytes; save it with its pixels right after the header"
            )
        return Header(ext.lower(), size, 0, "deflate", {"nifti": nifti, "nbytes": nifti.nbytes, "skip": nifti.vox_offset})
    if nifti.vox_offset + nifti.nbytes > size:
        raise _Doubt(
            f"is truncated: its NIfTI header declares {nifti.nbytes} bytes of pixel data from byte "
            f"{nifti.vox_offset}, but the file has {size} bytes"
        )
    return Header(ext.lower(), size, nifti.vox_offset, "raw", {"nifti": nifti, "nbytes": nifti.nbytes})


# --------------------------------------------------------------------------------------------
# PNG

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _check_png(f, size: int, path: Path) -> Header:
    head = f.read(33)
    if head[:8] != _PNG_SIGNATURE:
        raise _Doubt("is not a PNG file (its PNG signature is missing)")
    if len(head) < 33 or head[12:16] != b"IHDR" or struct.unpack(">I", head[8:12])[0] != 13:
        raise _Doubt("is not a valid PNG file (its IHDR chunk is missing)")
    width, height = struct.unpack(">II", head[16:24])
    if not (1 <= width < 2**31 and 1 <= height < 2**31):
        raise _Doubt(f"has PNG size {width} x {height}")
    return Header(".png", size, 8, "deflate")


_CHECKS = {".mha": _check_metaimage, ".nrrd": _check_nrrd, ".nii": _check_nifti, ".nii.gz": _check_nifti, ".png": _check_png}
