"""TIFF images from untrusted files: parsed and decoded here, every size bounded first.

tifffile is not used to read submitted TIFFs. Its structure parsing has more surface than a
label image needs (dozens of vendor flavours, several of which open other files: OME,
Micro-Manager, NDTiff) and costs grow faster than linearly with the number of pages (65,536
one-pixel pages took minutes); without imagecodecs its decoders ignore the expected size
(an LZMA strip of 393 KB decoded to 5.3 GB). This module reads the subset that label images
use, and reads it the way tifffile does (the shape of tifffile's first series, the same
values; the tests compare the two on files tifffile writes):

- **Structure.** Classic TIFF and BigTIFF, either byte order. The IFD chain is walked once
  with its length bounded (``limits.TIFF_MAX_PAGES``), loops refused, at most ``limits.TIFF_MAX_SEGMENTS`` strips
  or tiles over all pages, out-of-line values inside the file (``readers.limits``). Only the
  tags a label image needs are read; vendor metadata is never parsed and no other file is
  ever opened.
- **Shape.** As tifffile's first series: the shape in a tifffile "shaped" description, an
  ImageJ hyperstack's images/channels/slices/frames, else a stack of identical pages. The
  pages of the series must agree in size, type and storage (else the file is refused).
- **Data.** Uncompressed, deflate (zlib), LZMA or PackBits; predictor none or horizontal
  differencing; 1-bit, 8, 16, 32, 64-bit integers and 16, 32, 64-bit floats. Every strip or
  tile lies inside the file and decodes through ``readers.codecs`` to at most its own size
  (deflate and LZMA with an output limit, one stream, a dictionary limit; PackBits compiled,
  its stored size bounded by what its output can need, before it is read). LZW and JPEG
  need codecs that are not installed here and are refused with a message saying what to
  use instead.
- **Size.** Shape and dtype come from the IFDs alone (``probe``); ``max_voxels`` refuses a
  larger declared image before any data is read. ``TiffArray`` reads regions page by page.

Problems raise ``errors.Unusable`` with a one-line message naming the file by its
``display`` name; anything else a bug of this module is, and is reported as one.
"""

import itertools
import json
import math
import os
import struct
from pathlib import Path

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs, limits, regions
from evaluation.readers.untrusted import check_regular, open_regular

NONE, DEFLATE, OLD_DEFLATE, LZMA, PACKBITS = 1, 8, 32946, 34925, 32773
ACCEPTED = {NONE: "none", DEFLATE: "deflate", OLD_DEFLATE: "deflate", LZMA: "lzma", PACKBITS: "packbits"}
_REFUSED_NAMES = {
    2: "CCITT RLE",
    3: "CCITT G3",
    4: "CCITT G4",
    5: "LZW",
    6: "old-style JPEG",
    7: "JPEG",
    34712: "JPEG 2000",
    33003: "JPEG 2000",
    33005: "JPEG 2000",
    34887: "LERC",
    34933: "PNG",
    50000: "Zstandard",
    50001: "WebP",
    50002: "JPEG XL",
    22610: "JPEG XR",
    34892: "lossy JPEG",
}
_COMPRESSION_FIX = "save it uncompressed or with deflate (zlib), LZMA or PackBits compression"
_DTYPES = {
    (1, 1): "?",
    (1, 8): "u1",
    (1, 16): "u2",
    (1, 32): "u4",
    (1, 64): "u8",
    (2, 8): "i1",
    (2, 16): "i2",
    (2, 32): "i4",
    (2, 64): "i8",
    (3, 16): "f2",
    (3, 32): "f4",
    (3, 64): "f8",
}
_DTYPES.update({(4, bits): kind for (sf, bits), kind in list(_DTYPES.items()) if sf == 1})  # "void" reads as unsigned

# TIFF field types: integer ones (the only ones accepted for the tags read here), and sizes
_INTEGER_TYPES = {1: "u1", 3: "u2", 4: "u4", 6: "i1", 8: "i2", 9: "i4", 13: "u4", 16: "u8", 17: "i8", 18: "u8"}
_STRUCT_CODES = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i", 13: "I", 16: "Q", 17: "q", 18: "Q"}
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}
_SCALARS = {
    254: "subfiletype",
    256: "width",
    257: "length",
    259: "compression",
    262: "photometric",
    266: "fillorder",
    277: "samples",
    278: "rowsperstrip",
    284: "planar",
    317: "predictor",
    322: "tilewidth",
    323: "tilelength",
    32997: "depth",
    32998: "tiledepth",
}
_DEFAULTS = {
    "subfiletype": 0,
    "width": 0,
    "length": 0,
    "compression": 1,
    "photometric": 0,
    "fillorder": 1,
    "samples": 1,
    "rowsperstrip": 2**32 - 1,
    "planar": 1,
    "predictor": 1,
    "tilewidth": 0,
    "tilelength": 0,
    "depth": 1,
    "tiledepth": 1,
}
_NEEDED = set(_SCALARS) | {258, 270, 273, 279, 324, 325, 330, 338, 339, 530, 42113}
_ENTRY = {False: ("u2", "u4", 12, 4), True: ("u2", "u8", 20, 8)}  # BigTIFF?: type of count, value bytes


class _Page:
    """One IFD: the tags a label image needs, and what follows from them."""

    __slots__ = (
        "offset",
        "subfiletype",
        "width",
        "length",
        "compression",
        "photometric",
        "fillorder",
        "samples",
        "rowsperstrip",
        "planar",
        "predictor",
        "tilewidth",
        "tilelength",
        "depth",
        "tiledepth",
        "bits",
        "sampleformat",
        "extrasamples",
        "offsets",
        "counts",
        "nodata",
        "subifds",
        "descriptions",
        "dtype",
        "shaped",
        "shape",
        "axes",
        "segment",
        "expected",
    )

    @property
    def tiled(self) -> bool:
        return self.tilewidth > 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def key(self) -> tuple:
        """What tifffile hashes to decide that pages belong to one series."""
        return (
            self.shaped,
            self.rowsperstrip,
            self.tilewidth,
            self.tilelength,
            self.tiledepth,
            self.sampleformat,
            self.bits,
            self.fillorder,
            self.predictor,
            self.compression,
            self.extrasamples,
            self.photometric,
        )

    @property
    def contiguous(self) -> bool:
        """tifffile's ``is_contiguous``: uncompressed whole-byte data in one run of the file."""
        if self.compression != NONE or self.bits not in (8, 16, 32, 64):
            return False
        if self.tiled and (
            self.width != self.tilewidth or self.length % self.tilelength or self.tilewidth % 16 or self.tilelength % 16
        ):
            return False
        if self.tiled and self.tiledepth > 1 and (self.length != self.tilelength or self.depth % self.tiledepth):
            return False
        offsets, counts = self.offsets, self.counts
        if len(offsets) == 1:
            return True
        if int(counts.sum()) != self.nbytes:
            return False
        return bool(np.all(counts[:-1] != 0) and np.all(offsets[:-1] + counts[:-1] == offsets[1:]))

    @property
    def final(self) -> bool:
        return self.contiguous and self.fillorder == 1 and self.predictor == 1


class _Reader:
    """The IFD chain of one file, walked once with every count bounded."""

    def __init__(self, file, display: str):
        self.file, self.display = file, display
        self.size = os.fstat(file.fileno()).st_size
        self.entries = self.segments = 0

    def read(self, offset: int, count: int) -> bytes:
        if offset < 0 or count < 0 or offset + count > self.size:
            raise Unusable(f"{self.display}: the TIFF file is truncated (its structure points past the end of the file)")
        data = os.pread(self.file.fileno(), count, offset)
        if len(data) != count:
            raise Unusable(f"{self.display}: the TIFF file is truncated")
        return data

    def header(self) -> int:
        head = self.read(0, 8) if self.size >= 8 else b""
        order = {b"II": "<", b"MM": ">"}.get(head[:2])
        if order is None:
            raise Unusable(f"{self.display}: is not a TIFF file")
        self.order = order
        version = struct.unpack(order + "H", head[2:4])[0]
        if version == 42:
            self.big = False
            return struct.unpack(order + "I", head[4:8])[0]
        if version == 43:
            size, zero = struct.unpack(order + "HH", head[4:8])
            if size != 8 or zero != 0:
                raise Unusable(f"{self.display}: is not a valid BigTIFF file")
            self.big = True
            return struct.unpack(order + "Q", self.read(8, 8))[0]
        raise Unusable(f"{self.display}: is not a TIFF file (version {version})")

    def count(self, first: int) -> int:
        """The number of IFDs in the chain, counted from their sizes and links alone (two
        small reads each) and bounded before any of them is parsed."""
        number, link = (("Q", 8), ("Q", 8)) if self.big else (("H", 2), ("I", 4))
        entry_size = 20 if self.big else 12
        seen, offset = set(), first
        while offset:
            if offset in seen:
                raise Unusable(f"{self.display}: its pages form a loop; the TIFF file is corrupt")
            if len(seen) >= limits.TIFF_MAX_PAGES:
                raise Unusable(
                    f"{self.display}: holds more than {limits.TIFF_MAX_PAGES} pages; save the image as one stack of fewer pages"
                )
            seen.add(offset)
            entries = struct.unpack(self.order + number[0], self.read(offset, number[1]))[0]
            if entries > limits.TIFF_MAX_TAGS_PER_PAGE:
                raise Unusable(f"{self.display}: a page has {entries} tags; the TIFF file is corrupt")
            where = offset + number[1] + entries * entry_size
            offset = struct.unpack(self.order + link[0], self.read(where, link[1]))[0]
        return len(seen)

    def pages(self) -> list[_Page]:
        first = self.header()
        if not self.count(first):
            raise Unusable(f"{self.display}: the TIFF file holds no image")
        pages, offset = [], first
        while offset:
            page, offset = self.page(offset, first=not pages)
            pages.append(page)
        return pages

    def page(self, offset: int, first: bool) -> tuple[_Page, int]:
        entry_size, value_size = (20, 8) if self.big else (12, 4)
        number_size = 8 if self.big else 2
        count = struct.unpack(self.order + ("Q" if self.big else "H"), self.read(offset, number_size))[0]
        if count > limits.TIFF_MAX_TAGS_PER_PAGE:
            raise Unusable(f"{self.display}: a page has {count} tags; the TIFF file is corrupt")
        self.entries += count
        if self.entries > limits.TIFF_MAX_TAGS:
            raise Unusable(f"{self.display}: holds more than {limits.TIFF_MAX_TAGS} tags in all; the TIFF file is not accepted")
        raw = self.read(offset + number_size, count * entry_size + value_size)
        entry = struct.Struct(self.order + ("HHQ8s" if self.big else "HHI4s"))
        tags: dict[int, list] = {}
        for code, kind, number, value in entry.iter_unpack(raw[: count * entry_size]):
            if code in _NEEDED:
                tags.setdefault(code, []).append((kind, number, value))
        following = struct.unpack(self.order + ("Q" if self.big else "I"), raw[count * entry_size :])[0]
        return self.build(offset, tags, first), following

    # -- tag values ------------------------------------------------------------------------

    def scalar(self, entry, code: int) -> int | None:
        """A one-value integer tag (None when it holds several values)."""
        kind, count, value = entry
        if count == 1 and kind in _INTEGER_TYPES:
            number = struct.unpack_from(self.order + _STRUCT_CODES[kind], value)[0]
            if number < 0 or number >= 2**63:
                raise Unusable(f"{self.display}: tag {code} holds an invalid value; the TIFF file is corrupt")
            return number
        values = self.values(entry, code, 1 << 16)
        if len(values) == 1:
            return int(values[0])
        return None

    def values(self, entry, code: int, limit: int, take: int | None = None) -> np.ndarray:
        """The integer values of a tag (the first ``take`` of them), at most ``limit``."""
        kind, count, value = entry
        if kind not in _INTEGER_TYPES:
            raise Unusable(f"{self.display}: tag {code} has an unexpected type; the TIFF file is corrupt")
        take = count if take is None else min(take, count)
        if take > limit:
            raise Unusable(f"{self.display}: tag {code} holds {count} values, more than accepted")
        itemsize = _TYPE_SIZES[kind]
        if count * itemsize <= len(value):
            data = value[: take * itemsize]
        else:
            where = struct.unpack(self.order + ("Q" if self.big else "I"), value)[0]
            if where < 8 or where + count * itemsize > self.size:
                raise Unusable(f"{self.display}: tag {code} points past the end of the file; the TIFF file is corrupt")
            data = self.read(where, take * itemsize)
        values = np.frombuffer(data, dtype=self.order + _INTEGER_TYPES[kind], count=take)
        if values.dtype.kind == "u" and values.dtype.itemsize == 8 and take and int(values.max()) >= 2**63:
            raise Unusable(f"{self.display}: tag {code} holds an impossibly large value; the TIFF file is corrupt")
        return values.astype(np.int64)

    def text(self, entry) -> str | None:
        kind, count, value = entry
        if kind != 2:
            return None
        if count > limits.TIFF_MAX_DESCRIPTION_BYTES:
            raise Unusable(f"{self.display}: its image description is larger than {limits.TIFF_MAX_DESCRIPTION_BYTES} bytes")
        if count <= len(value):
            data = value[:count]
        else:
            where = struct.unpack(self.order + ("Q" if self.big else "I"), value)[0]
            data = self.read(where, count) if where >= 8 else b""
        data = data.rstrip(b"\x00")
        for encoding in ("utf-8", "cp1252"):
            try:
                return data.decode(encoding).strip()
            except UnicodeDecodeError:
                continue
        return None

    # -- one page --------------------------------------------------------------------------

    def build(self, offset: int, tags: dict, first: bool) -> _Page:
        page = _Page()
        page.offset = offset
        for code, name in _SCALARS.items():
            value = _DEFAULTS[name]
            if code in tags:
                value = self.scalar(tags[code][0], code)
                if value is None and code != 278:  # tifffile reads several RowsPerStrip values as "one strip"
                    raise Unusable(f"{self.display}: tag {code} holds several values instead of one; the TIFF file is corrupt")
                if value is not None and value < 0:
                    raise Unusable(f"{self.display}: tag {code} is negative; the TIFF file is corrupt")
            setattr(page, name, value)
        page.bits = self.per_sample(tags, 258, page.samples, 1)
        page.sampleformat = self.per_sample(tags, 339, page.samples, 1)
        page.extrasamples = tuple(int(v) for v in self.values(tags[338][0], 338, 1 << 16)) if 338 in tags else ()
        page.subifds = 330 in tags
        page.nodata = 42113 in tags
        page.descriptions = [self.text(entry) for entry in tags.get(270, [])[:2]] if first else []
        subsampling = tuple(int(v) for v in self.values(tags[530][0], 530, 2)) if 530 in tags else None
        if 322 in tags:  # as tifffile: a TileWidth tag makes the page tiled
            page.rowsperstrip = 0
            if page.tilewidth < 1:
                raise Unusable(f"{self.display}: has tiles of width 0; the TIFF file is corrupt")
        elif 257 in tags:
            if page.rowsperstrip is None:
                page.rowsperstrip = page.length
            page.rowsperstrip = min(page.rowsperstrip, page.length)
        elif page.rowsperstrip is None:
            page.rowsperstrip = _DEFAULTS["rowsperstrip"]
        self.shape_of(page)
        self.check(page, subsampling)
        self.segments_of(page, tags)
        return page

    def per_sample(self, tags: dict, code: int, samples: int, default: int) -> int:
        if code not in tags:
            return default
        if tags[code][0][1] == 1:
            return self.scalar(tags[code][0], code)
        values = self.values(tags[code][0], code, 1 << 16)
        if len(values) == 0:
            raise Unusable(f"{self.display}: tag {code} is empty; the TIFF file is corrupt")
        used = values[: max(1, samples)] if len(values) > 1 else values
        if np.any(used != used[0]):
            raise Unusable(f"{self.display}: its samples differ in type or size; save a single-channel label image")
        return int(used[0])

    def shape_of(self, page: _Page) -> None:
        """tifffile's ``shaped`` (separate samples, depth, length, width, contiguous samples)
        and squeezed page ``shape`` with its axes."""
        d, length, w, s = page.depth, page.length, page.width, page.samples
        if page.photometric == 2 or s > 1:
            if page.planar == 1:
                page.shaped = (1, d, length, w, s)
                page.shape, page.axes = ((length, w, s), "YXS") if d == 1 else ((d, length, w, s), "ZYXS")
            else:
                page.shaped = (s, d, length, w, 1)
                page.shape, page.axes = ((s, length, w), "SYX") if d == 1 else ((s, d, length, w), "SZYX")
        else:
            page.shaped = (1, d, length, w, 1)
            page.shape, page.axes = ((length, w), "YX") if d == 1 else ((d, length, w), "ZYX")
        kind = _DTYPES.get((page.sampleformat, page.bits))
        page.dtype = (
            np.dtype(self.order + kind) if kind is not None and kind != "?" else (np.dtype(bool) if kind == "?" else None)
        )

    def check(self, page: _Page, subsampling) -> None:
        """Refuse what this reader does not decode, with what to do instead."""
        name = _REFUSED_NAMES.get(page.compression, f"compression {page.compression}")
        if page.compression not in ACCEPTED:
            fix = (
                " (decoding it needs the imagecodecs package, which the grader does not install)" if page.compression == 5 else ""
            )
            raise Unusable(f"{self.display}: is compressed with {name}{fix}; {_COMPRESSION_FIX}")
        if page.dtype is None:
            raise Unusable(
                f"{self.display}: has {page.bits}-bit samples of format {page.sampleformat}; "
                "save 8, 16, 32 or 64-bit integers or floats (or 1-bit masks)"
            )
        if page.photometric == 6 or (subsampling is not None and subsampling != (1, 1)):
            raise Unusable(f"{self.display}: holds YCbCr colour data; save a single-channel label image")
        if page.fillorder != 1:
            raise Unusable(f"{self.display}: uses bit fill order {page.fillorder}; save it with the default fill order")
        if page.predictor not in (1, 2) or (page.predictor == 2 and page.bits == 1):
            raise Unusable(
                f"{self.display}: uses TIFF predictor {page.predictor}; save it without a predictor "
                "or with horizontal differencing"
            )
        if page.planar not in (1, 2):
            raise Unusable(f"{self.display}: has an invalid planar configuration; the TIFF file is corrupt")
        dims = (page.width, page.length, page.depth, page.samples)
        if min(dims) < 1 or page.tiled and min(page.tilelength, page.tiledepth) < 1 or not page.tiled and page.rowsperstrip < 1:
            raise Unusable(f"{self.display}: has an empty or invalid image size; the TIFF file is corrupt")
        if math.prod(page.shaped) > limits.MAX_VOXELS:
            raise Unusable(f"{self.display}: declares an impossibly large image")

    def segments_of(self, page: _Page, tags: dict) -> None:
        """Strip or tile geometry, and the offsets and byte counts of every segment."""
        sep = page.samples if page.planar == 2 else 1
        contig = page.samples if page.planar == 1 else 1
        if page.tiled:
            page.segment = (page.tiledepth, page.tilelength, page.tilewidth, contig)
            expected = (
                sep
                * math.ceil(page.depth / page.tiledepth)
                * math.ceil(page.length / page.tilelength)
                * math.ceil(page.width / page.tilewidth)
            )
            codes = (324, 325)
        else:
            page.segment = (1, page.rowsperstrip, page.width, contig)
            expected = sep * page.depth * math.ceil(page.length / page.rowsperstrip)
            codes = (273, 279)
        page.expected = expected
        self.segments += expected
        if self.segments > limits.TIFF_MAX_SEGMENTS:
            raise Unusable(
                f"{self.display}: holds more than {limits.TIFF_MAX_SEGMENTS} strips and tiles; save it with larger strips or tiles"
            )
        if codes[0] not in tags or codes[1] not in tags:
            raise Unusable(f"{self.display}: a page lacks its data offsets or byte counts; the TIFF file is corrupt")
        found = []
        for code in codes:
            kind, count, value = tags[code][0]
            if count < expected:
                raise Unusable(
                    f"{self.display}: a page lists {count} of its {expected} strips or tiles; the TIFF file is corrupt"
                )
            values = self.values((kind, count, value), code, limits.TIFF_MAX_SEGMENTS, take=expected)
            if expected > 1 and np.any(values < 0) or expected == 1 and values[0] < 0:
                raise Unusable(f"{self.display}: tag {code} holds negative values; the TIFF file is corrupt")
            found.append(values)
        page.offsets, page.counts = found
        if expected == 1:  # the common case, without numpy's per-call overhead
            offset, count = int(page.offsets[0]), int(page.counts[0])
            present = offset > 0 and count > 0
            if present and offset + count > self.size:
                raise Unusable(f"{self.display}: the TIFF file is truncated (its image data runs past the end of the file)")
            complete = present
        else:
            present = (page.offsets > 0) & (page.counts > 0)
            if np.any(page.offsets[present] + page.counts[present] > self.size):
                raise Unusable(f"{self.display}: the TIFF file is truncated (its image data runs past the end of the file)")
            complete = bool(present.all())
        if page.nodata and not complete:
            raise Unusable(f"{self.display}: has missing strips or tiles with a GDAL no-data value; write every strip")


# --------------------------------------------------------------------------------------------
# The first series, as tifffile defines it


def _squeeze(shape: tuple, axes: str) -> tuple:
    """tifffile's ``squeeze_axes``: length-1 dimensions dropped, except X and Y (and at
    least one dimension kept)."""
    kept = [n for n, a in zip(shape, axes) if n > 1 or a in "XY"]
    return tuple(kept) if kept else (shape[-1],)


def _fits(page_shape: tuple, series_shape: tuple) -> bool:
    """Whether pages tile a "shaped" series as tifffile requires: read from the last
    dimension backwards, every page dimension is met by an equal series dimension (series
    dimensions of size 1 may come in between) or by a run of series dimensions whose running
    product reaches the page's running product."""
    page_total, series_total = math.prod(page_shape), math.prod(series_shape)
    if page_total == 0 or series_total == 0:
        return page_total == series_total
    if series_total % page_total:
        return False
    left = list(series_shape)
    page_product = series_product = 1
    for size in reversed(page_shape):
        page_product *= size
        while left:
            other = left.pop()
            series_product *= other
            if other == size or series_product == page_product:
                break
            if other != 1:
                return False
    return True


def _shaped_metadata(description: str) -> dict:
    if description[:6] == "shape=":
        return {"shape": tuple(int(i) for i in description[7:-1].split(","))}
    return json.loads(description)


def _imagej_metadata(description: str) -> dict:
    result = {}
    for line in description.splitlines():
        if "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        for convert in (int, float, lambda v: {"true": True, "false": False}[v.lower()]):
            try:
                value = convert(value)
                break
            except (ValueError, KeyError, OverflowError):
                continue
        result[key] = value
    return result


class _Series:
    """Which pages (or one contiguous run of the file) make up the image, and its shape.
    ``span``: the IFDs that describe the image, which must all agree with the first one
    (even where the data is read as one run from the first page's offset)."""

    def __init__(self, shape: tuple, pages: list[_Page], contiguous: int | None, span: list[_Page]):
        self.shape, self.pages, self.contiguous = tuple(int(n) for n in shape), pages, contiguous
        self.span = span


def _dataoffset(pages: list[_Page], shape: tuple, single_shaped: bool) -> int | None:
    """tifffile's ``TiffPageSeries.dataoffset``: where the series' data lies in one run."""
    position = 0
    for page in pages:
        if not page.final:
            return None
        if not position:
            position = int(page.offsets[0]) + page.nbytes
            continue
        if position != int(page.offsets[0]):
            return None
        position += page.nbytes
    offset = int(pages[0].offsets[0])
    if len(pages) == 1 and single_shaped:
        return offset
    if position == offset + math.prod(shape) * pages[0].dtype.itemsize:
        return offset
    return None


def _series_shaped(pages: list[_Page], description: str, display: str) -> _Series | None:
    """tifffile's ``_series_shaped`` for the first series."""
    try:
        metadata = _shaped_metadata(description)
        reshape = tuple(metadata["shape"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise Unusable(f"{display}: its tifffile shape description is invalid") from None
    if (
        not isinstance(metadata, dict)
        or len(reshape) > limits.TIFF_MAX_DIMENSIONS
        or not all(isinstance(n, int) and n >= 0 for n in reshape)
    ):
        raise Unusable(f"{display}: its tifffile shape description is invalid")
    keyframe = pages[0]
    size = math.prod(reshape)
    if keyframe.size == 0:
        raise Unusable(f"{display}: has an empty page")
    npages, mod = divmod(size, keyframe.size) if size > 0 else (1, 0)
    if mod:
        return None
    truncated = metadata.get("truncated", False if keyframe.subifds else None)
    given = None
    if "axes" in metadata:
        axes = metadata["axes"]
        given = reshape if isinstance(axes, str) and len(axes) == len(reshape) else None
    chosen = [keyframe]
    if 1 < npages <= len(pages):
        if truncated:
            npages = 1
        elif keyframe.final and keyframe.offset + size * keyframe.dtype.itemsize < pages[1].offset and not keyframe.subifds:
            pass
        else:
            chosen = pages[:npages]
    failed = not _fits(keyframe.shape, reshape)
    if failed or given is None:
        shape = keyframe.shape if len(chosen) == 1 else (len(chosen), *keyframe.shape)
        if failed:
            reshape = shape
    else:
        shape = given
    if keyframe.contiguous and math.prod(reshape) > math.prod(shape) and math.prod(reshape) % math.prod(shape) == 0:
        shape = (math.prod(reshape) // math.prod(shape), *shape)
    if math.prod(shape) == math.prod(reshape):
        shape = reshape
    return _Series(shape, chosen, _dataoffset(chosen, shape, single_shaped=True), pages[: max(1, npages)])


def _series_imagej(pages: list[_Page], description: str, file_size: int, display: str) -> _Series | None:
    """tifffile's ``_series_imagej``."""
    meta = _imagej_metadata(description)
    page = pages[0]
    order = meta.get("order", "czt")
    counts = [meta.get(name, 1) for name in ("frames", "slices", "channels", "images")]
    if not isinstance(order, str) or not all(isinstance(n, int) for n in counts):
        raise Unusable(f"{display}: its ImageJ description is invalid")
    frames, slices, channels, images = counts
    if images < 1 or frames < 1 or slices < 1 or channels < 1:
        return None
    if channels == 1 or (page.shaped[0] > 1 and page.shaped[0] == channels):
        images = frames * slices
    elif images == frames * slices and page.shaped[4] == channels:
        channels = 1
    else:
        images = frames * slices * channels
    if images == 1 and len(pages) > 1:
        images = len(pages)
    if images > limits.MAX_VOXELS:
        raise Unusable(f"{display}: its ImageJ description declares an impossibly large image")
    nbytes = images * page.nbytes
    if not page.final:
        virtual = False
    elif int(page.offsets[0]) + nbytes > file_size:
        return None
    elif images <= 1:
        virtual = True
    elif len(pages) > 1 and int(page.offsets[0]) + nbytes > pages[1].offset:
        virtual = False
    else:
        virtual = True
    chosen = [page] if virtual else pages
    axes, shape = {
        "czt": ("TZC", (frames, slices, channels)),
        "default": ("TZC", (frames, slices, channels)),
        "ctz": ("ZTC", (slices, frames, channels)),
        "zct": ("TCZ", (frames, channels, slices)),
        "ztc": ("CTZ", (channels, frames, slices)),
        "tcz": ("ZCT", (slices, channels, frames)),
        "tzc": ("CZT", (channels, slices, frames)),
    }.get(order.lower(), ("TZC", (frames, slices, channels)))
    remain = images // math.prod(shape)
    if remain > 1:
        shape, axes = (remain, *shape), "I" + axes
    if page.shaped[0] > 1:
        shape, axes = shape[:-1] + page.shape, axes + page.axes[1:]
    else:
        shape, axes = shape + page.shape, axes + page.axes
    if "S" not in axes:
        shape, axes = shape + (1,), axes + "S"
    if len(shape) > limits.TIFF_MAX_DIMENSIONS:
        raise Unusable(f"{display}: its ImageJ description declares too many dimensions")
    return _Series(_squeeze(shape, axes), chosen, _dataoffset(chosen, shape, single_shaped=True), pages)


def _series(pages: list[_Page], file_size: int, display: str) -> _Series:
    first = pages[0]
    descriptions = [d for d in first.descriptions if d]
    shaped = next(
        (d for d in descriptions if '"mibi.' not in d and (d[:1] == "{" and '"shape":' in d or d[:6] == "shape=")), None
    )
    imagej = next((d for d in descriptions if d[:7] in ("ImageJ=", "SCIFIO=")), None)
    series = None
    if shaped is not None:
        series = _series_shaped(pages, shaped, display)
    elif imagej is not None:
        series = _series_imagej(pages, imagej, file_size, display)
    if series is None:  # a stack of the file's pages
        shape = first.shape if len(pages) == 1 else (len(pages), *first.shape)
        axes = first.axes if len(pages) == 1 else "I" + first.axes
        if "S" not in axes:
            shape, axes = shape + (1,), axes + "S"
        described = shaped is not None or imagej is not None
        series = _Series(_squeeze(shape, axes), pages, _dataoffset(pages, shape, single_shaped=described), pages)
    # every page used must be stored like the first (tifffile would split a plain stack there,
    # or decode later pages with the first page's settings)
    key, final = first.key(), first.final
    if any(page.key() != key or page.final != final for page in series.span[1:]):
        raise Unusable(f"{display}: its pages differ in size, type or storage; save the image as one stack of equal pages")
    return series


# --------------------------------------------------------------------------------------------
# Decoders: one stream each, into at most the strip's or tile's own size (``readers.codecs``)


def _inflate(data: bytes, cap: int) -> bytes:
    return codecs.decode(codecs.ZLIB, data, cap)


def _unxz(data: bytes, cap: int) -> bytes:
    """LZMA/xz data as tifffile reads it with ``lzma.decompress``: concatenated streams (a few)."""
    return codecs.decode(codecs.XZ, data, cap, members=limits.MAX_STREAMS)


_DECODERS = {DEFLATE: _inflate, OLD_DEFLATE: _inflate, LZMA: _unxz, PACKBITS: codecs.packbits}
_NAMES = {DEFLATE: "a deflate", OLD_DEFLATE: "a deflate", LZMA: "an LZMA", PACKBITS: "a PackBits"}


# --------------------------------------------------------------------------------------------
# The image


class TiffArray:
    """The first image series of a TIFF file, read page by page.

    ``shape``, ``dtype`` (native byte order), ``chunks`` (one page per chunk), ``attrs``
    (always empty), ``array[region]`` (ints and step-1 slices), ``stored(region)`` (whether
    any data is stored there) and ``read()``. Thread-safe (positioned reads only)."""

    def __init__(self, path: Path, display: str | None = None, max_voxels: int | None = None):
        self.display = display or Path(path).name
        self.attrs = {}
        check_regular(Path(path), self.display)
        self._file = open_regular(Path(path), self.display)
        try:
            self._open(max_voxels)
        except BaseException:
            self.close()
            raise

    def _open(self, max_voxels: int | None) -> None:
        reader = _Reader(self._file, self.display)
        pages = reader.pages()
        series = _series(pages, reader.size, self.display)
        self.shape = series.shape
        voxels = math.prod(self.shape)
        if voxels > limits.MAX_VOXELS or (max_voxels is not None and voxels > max_voxels):
            limit = max_voxels if max_voxels is not None and max_voxels < limits.MAX_VOXELS else limits.MAX_VOXELS
            raise Unusable(
                f"{self.display}: has shape {self.shape}, more voxels than the {limit} accepted for it; "
                "write it on the image's grid"
            )
        keyframe = series.pages[0]
        if keyframe.nbytes > limits.TIFF_MAX_PAGE_BYTES:
            raise Unusable(
                f"{self.display}: has pages of {keyframe.nbytes} bytes, more than the {limits.TIFF_MAX_PAGE_BYTES} accepted; "
                "save the image as a stack of smaller pages"
            )
        self._keyframe, self._file_size = keyframe, reader.size
        self._file_dtype = keyframe.dtype
        self.dtype = keyframe.dtype.newbyteorder("=")
        self._page_size = keyframe.size
        self._count = voxels // self._page_size if self._page_size else 0
        self._contiguous = series.contiguous
        if self._contiguous is not None:
            if self._contiguous + voxels * self.dtype.itemsize > reader.size:
                raise Unusable(f"{self.display}: the TIFF file is truncated (its image data runs past the end of the file)")
            self._pages = None
        else:
            if len(series.pages) * self._page_size != voxels:
                raise Unusable(
                    f"{self.display}: its shape {self.shape} does not match its {len(series.pages)} pages; "
                    "the TIFF file is corrupt"
                )
            self._pages = series.pages
        # leading axes that index pages, trailing axes that hold one page; shapes where pages
        # do not tile the trailing axes (allowed in "shaped" descriptions) are read whole
        lead = next((k for k in range(len(self.shape) + 1) if math.prod(self.shape[k:]) == self._page_size), None)
        self._whole_only = lead is None
        self._lead = 0 if lead is None else lead
        self.chunks = tuple(self.shape) if self._whole_only else (1,) * self._lead + tuple(self.shape[self._lead :])
        self._last = None  # (index, page) of a series read whole, so that slabs do not decode it again

    @property
    def ndim(self) -> int:
        return len(self.shape)

    # -- regions ---------------------------------------------------------------------------

    def _region(self, key) -> tuple[list[slice], list[int]]:
        selection, dropped = regions.select(key, self.shape)
        return [slice(start, stop) for start, stop in selection], dropped

    def _page_indices(self, slices: list[slice]):
        lead = self.shape[: self._lead]
        strides = [math.prod(lead[k + 1 :]) for k in range(len(lead))]
        for cell in itertools.product(*(range(s.start, s.stop) for s in slices[: self._lead])):
            yield cell, sum(c * st for c, st in zip(cell, strides))

    def stored(self, key=()) -> bool:
        """Whether any strip or tile is stored inside the region (missing ones read as 0)."""
        slices, _ = self._region(key)
        if any(s.stop <= s.start for s in slices):
            return False
        if self._pages is None or self._whole_only:
            return True
        for _, index in self._page_indices(slices):
            page = self._pages[index]
            if np.any((page.offsets > 0) & (page.counts > 0)):
                return True
        return False

    def __getitem__(self, key) -> np.ndarray:
        slices, dropped = self._region(key)
        try:
            return self._read(slices, dropped)
        except MemoryError:
            raise Unusable(f"{self.display}: is too large to read in the memory available") from None

    def _read(self, slices: list[slice], dropped: list[int]) -> np.ndarray:
        shape = tuple(s.stop - s.start for s in slices)
        if self._whole_only:
            whole = np.concatenate([self._page(i) for i in range(self._count)]).reshape(self.shape)
            out = whole[tuple(slices)].copy()
        else:
            out = np.empty(shape, dtype=self.dtype)
            if 0 not in shape:
                inner = tuple(slices[self._lead :])
                for cell, index in self._page_indices(slices):
                    page = self._page(index).reshape(self.shape[self._lead :])
                    out[tuple(c - s.start for c, s in zip(cell, slices))] = page[inner]
        if dropped:
            out = out.reshape([n for axis, n in enumerate(shape) if axis not in dropped])
        return out

    def read(self, region=()) -> np.ndarray:
        """``self[region]``; the whole series by default (``regions.RegionArray``)."""
        return self[region]

    # -- decoding one page -----------------------------------------------------------------

    def _pread(self, offset: int, count: int) -> bytes:
        data = os.pread(self._file.fileno(), count, offset)
        if len(data) != count:
            raise Unusable(f"{self.display}: the TIFF file is truncated (its image data runs past the end of the file)")
        return data

    def _page(self, index: int) -> np.ndarray:
        """Page ``index`` of the series as a flat native array (read-only when cached)."""
        last = self._last
        if last is not None and last[0] == index:
            return last[1]
        size = self._page_size
        if self._contiguous is not None:
            itemsize = self._file_dtype.itemsize
            data = self._pread(self._contiguous + index * self._page_size * itemsize, size * itemsize)
            page = np.frombuffer(data, dtype=self._file_dtype).astype(self.dtype)
        else:
            page = self._decode(self._pages[index]).reshape(-1)
        if self._lead == 0 or self._whole_only:  # one page holds many slices: keep it
            page.flags.writeable = False
            self._last = (index, page)
        return page

    def _decode(self, page: _Page) -> np.ndarray:
        key = self._keyframe
        if page.final:
            data = self._pread(int(page.offsets[0]), key.nbytes)
            return np.frombuffer(data, dtype=self._file_dtype).astype(self.dtype).reshape(key.shaped)
        out = np.zeros(key.shaped, dtype=self.dtype)
        sd, sl, sw, ss = key.segment
        _, depth, length, width, _ = key.shaped
        if key.tiled:
            across, down, deep = math.ceil(width / sw), math.ceil(length / sl), math.ceil(depth / sd)
        for index in range(key.expected):
            offset, count = int(page.offsets[index]), int(page.counts[index])
            if key.tiled:
                plane, rest = divmod(index, across * down * deep)
                z, y, x = rest // (across * down) * sd, rest // across % down * sl, rest % across * sw
                rows = sl
            else:
                strips = math.ceil(length / sl)
                plane, rest = divmod(index, strips * depth)
                z, y, x = rest // strips, rest % strips * sl, 0
                rows = min(sl, length - y)
            if offset <= 0 or count <= 0:
                continue  # missing segments read as 0, as tifffile reads them
            segment = self._segment(offset, count, rows)
            d, h, w = min(sd, depth - z), min(rows, length - y), min(sw, width - x)
            out[plane, z : z + d, y : y + h, x : x + w, :] = segment[:d, :h, :w, :]
        return out

    def _segment(self, offset: int, count: int, rows: int) -> np.ndarray:
        """One strip or tile, decoded and bounded: shape (depth, rows, width, samples)."""
        key = self._keyframe
        sd, sl, sw, ss = key.segment
        if key.bits == 1:
            row_bytes = -(-sw * ss // 8)
            expected, cap = sd * rows * row_bytes, sd * sl * row_bytes
        else:
            row_bytes = sw * ss * self._file_dtype.itemsize
            expected, cap = sd * rows * row_bytes, sd * sl * row_bytes
        if key.compression == NONE:
            if count < expected:
                raise Unusable(f"{self.display}: a strip or tile is shorter than its image data; the TIFF file is corrupt")
            data = self._pread(offset, expected)
        else:
            if cap > limits.TIFF_MAX_SEGMENT_BYTES:
                raise Unusable(
                    f"{self.display}: has compressed strips or tiles of more than {limits.TIFF_MAX_SEGMENT_BYTES} bytes; "
                    "save it with smaller strips or tiles"
                )
            if key.compression == PACKBITS and count > limits.PACKBITS_OVERHEAD * cap + 64:
                raise Unusable(
                    f"{self.display}: a PackBits strip or tile is stored in {count} bytes, more than its {cap} "
                    "decoded bytes can need; the TIFF file is corrupt or crafted"
                )
            try:
                data = _DECODERS[key.compression](self._pread(offset, count), cap)
            except Unusable as exc:
                raise Unusable(f"{self.display}: {_NAMES[key.compression]} strip or tile cannot be decoded: {exc}") from None
            if len(data) < expected:
                raise Unusable(
                    f"{self.display}: a strip or tile decodes to fewer bytes than its image data; the TIFF file is corrupt"
                )
            if key.bits == 1 and (sw * ss) % 8 and len(data) % row_bytes:
                raise Unusable(f"{self.display}: a 1-bit strip or tile has a partial row; the TIFF file is corrupt")
            data = data[:expected]
        if key.bits == 1:
            bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8).reshape(-1, row_bytes), axis=1)[:, : sw * ss]
            return bits.astype(bool).reshape(sd, rows, sw, ss)
        values = np.frombuffer(data, dtype=self._file_dtype).reshape(sd, rows, sw, ss).astype(self.dtype)
        if key.predictor == 2:
            if values.dtype.kind == "f":
                view = values.view(f"u{values.dtype.itemsize}")
                values = np.cumsum(view, axis=-2, dtype=view.dtype).view(values.dtype)
            else:
                values = np.cumsum(values, axis=-2, dtype=values.dtype)
        return values

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Module-level helpers


def open_array(path: Path, display: str | None = None, max_voxels: int | None = None) -> TiffArray:
    """The first image series of ``path``, checked from its IFDs and read page by page."""
    return TiffArray(path, display, max_voxels)


def probe(path: Path, display: str | None = None) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and (native) dtype from the IFDs alone; no image data is read."""
    with TiffArray(path, display) as array:
        return array.shape, array.dtype


def read(path: Path, display: str | None = None, max_voxels: int | None = None) -> np.ndarray:
    """The whole first image series."""
    with TiffArray(path, display, max_voxels) as array:
        return array.read()
