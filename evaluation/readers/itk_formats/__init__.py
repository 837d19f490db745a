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

The package: ``header`` (what the checks share), ``metaimage``, ``nrrd`` and ``nifti`` (NIfTI
and PNG) for the byte-level checks; here the forced ImageIO, the size bounds and the read.
"""

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits
from evaluation.readers.itk_formats import metaimage, nifti, nrrd
from evaluation.readers.itk_formats.header import Header, _Doubt
from evaluation.readers.itk_formats.metaimage import LOCAL_NAMES, MetaHeader, parse_metaimage
from evaluation.readers.itk_formats.nifti import NiftiHeader, parse_nifti
from evaluation.readers.itk_formats.nrrd import _NRRD_MAGICS, NrrdHeader, parse_nrrd
from evaluation.readers.untrusted import check_regular, open_regular
from evaluation.readers.volume import Volume, reason

T = TypeVar("T")

__all__ = [
    "LOCAL_NAMES",
    "SUFFIXES",
    "Header",
    "Info",
    "MetaHeader",
    "NiftiHeader",
    "NrrdHeader",
    "_NRRD_MAGICS",
    "_Doubt",
    "check",
    "image_io",
    "info",
    "kind_of",
    "parse_metaimage",
    "parse_nifti",
    "parse_nrrd",
    "read",
]

IMAGE_IOS = {
    ".mha": "MetaImageIO",
    ".nii": "NiftiImageIO",
    ".nii.gz": "NiftiImageIO",
    ".nrrd": "NrrdImageIO",
    ".png": "PNGImageIO",
}
SUFFIXES = tuple(IMAGE_IOS)  # the registry's SimpleITK format (``readers.formats``), in this order


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


def read(path: Path, display: str | None = None, max_voxels: int | None = None) -> Volume:
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


def _reader(path: Path) -> Any:  # a SimpleITK ImageFileReader (SimpleITK has no type information)
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetImageIO(image_io(path))
    reader.SetFileName(str(path))
    return reader


def _itk(action: Callable[[], T], kind: str, display: str) -> T:
    try:
        return action()
    except RuntimeError as exc:  # SimpleITK raises RuntimeError for everything ITK throws
        raise Unusable(f"{display}: cannot be read as {kind} ({reason(exc)}); the file may be truncated or corrupt") from None


@functools.cache
def _dtypes() -> dict[int, type[np.generic]]:
    """SimpleITK pixel ID -> numpy type of one component (scalar, vector and label images)."""
    import SimpleITK as sitk

    names: dict[str, type[np.generic]] = {
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
            skip = f" after {skipped} skipped bytes" if skipped else ""
            raise Unusable(
                f"{display}: its header declares {nbytes} bytes of pixel data{skip}, more than its "
                f"{max(available, 0)} compressed bytes can hold"
            )
    elif header.encoding == "hex":
        if 2 * nbytes > available:
            raise Unusable(f"{display}: is truncated: its header declares more pixel data than the file holds")
    elif count > available:  # ascii: at least one character per value
        raise Unusable(f"{display}: is truncated: its header declares more pixel values than the file holds")


_CHECKS = {
    ".mha": metaimage._check_metaimage,
    ".nrrd": nrrd._check_nrrd,
    ".nii": nifti._check_nifti,
    ".nii.gz": nifti._check_nifti,
    ".png": nifti._check_png,
}
