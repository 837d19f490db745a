"""The structure of a TIFF file: the IFD chain walked once with every count bounded, and the
tags of each page that a label image needs (``tiff`` explains what is read and why)."""

import math
import os
import struct
from typing import BinaryIO

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits

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
Entry = tuple[int, int, bytes]  # an IFD entry: field type, value count, value (or where the values are)
Tags = dict[int, list[Entry]]  # the entries of one page by tag code
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
    offset: int
    subfiletype: int
    width: int
    length: int
    compression: int
    photometric: int
    fillorder: int
    samples: int
    rowsperstrip: int
    planar: int
    predictor: int
    tilewidth: int
    tilelength: int
    depth: int
    tiledepth: int
    bits: int
    sampleformat: int
    extrasamples: tuple[int, ...]
    offsets: np.ndarray
    counts: np.ndarray
    nodata: bool
    subifds: bool
    descriptions: list[str | None]
    dtype: np.dtype
    shaped: tuple[int, int, int, int, int]  # separate samples, depth, length, width, contiguous samples
    shape: tuple[int, ...]
    axes: str
    segment: tuple[int, int, int, int]  # depth, length, width, samples of one strip or tile
    expected: int  # strips or tiles

    @property
    def tiled(self) -> bool:
        return self.tilewidth > 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def key(self) -> tuple[object, ...]:
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

    def __init__(self, file: BinaryIO, display: str):
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
            return int(struct.unpack(order + "I", head[4:8])[0])
        if version == 43:
            size, zero = struct.unpack(order + "HH", head[4:8])
            if size != 8 or zero != 0:
                raise Unusable(f"{self.display}: is not a valid BigTIFF file")
            self.big = True
            return int(struct.unpack(order + "Q", self.read(8, 8))[0])
        raise Unusable(f"{self.display}: is not a TIFF file (version {version})")

    def count(self, first: int) -> int:
        """The number of IFDs in the chain, counted from their sizes and links alone (two
        small reads each) and bounded before any of them is parsed."""
        number, link = (("Q", 8), ("Q", 8)) if self.big else (("H", 2), ("I", 4))
        entry_size = 20 if self.big else 12
        seen: set[int] = set()
        offset = first
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
        pages: list[_Page] = []
        offset = first
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
        tags: Tags = {}
        for code, kind, number, value in entry.iter_unpack(raw[: count * entry_size]):
            if code in _NEEDED:
                tags.setdefault(code, []).append((kind, number, value))
        following = struct.unpack(self.order + ("Q" if self.big else "I"), raw[count * entry_size :])[0]
        return self.build(offset, tags, first), following

    # -- tag values ------------------------------------------------------------------------

    def scalar(self, entry: Entry, code: int) -> int | None:
        """A one-value integer tag (None when it holds several values)."""
        kind, count, value = entry
        if count == 1 and kind in _INTEGER_TYPES:
            number: int = struct.unpack_from(self.order + _STRUCT_CODES[kind], value)[0]
            if number < 0 or number >= 2**63:
                raise Unusable(f"{self.display}: tag {code} holds an invalid value; the TIFF file is corrupt")
            return number
        values = self.values(entry, code, 1 << 16)
        if len(values) == 1:
            return int(values[0])
        return None

    def values(self, entry: Entry, code: int, limit: int, take: int | None = None) -> np.ndarray:
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

    def text(self, entry: Entry) -> str | None:
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

    def build(self, offset: int, tags: Tags, first: bool) -> _Page:
        page = _Page()
        page.offset = offset
        for code, name in _SCALARS.items():
            value: int | None = _DEFAULTS[name]
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
        rows: int | None = page.rowsperstrip  # None: several values (``scalar``)
        if 322 in tags:  # as tifffile: a TileWidth tag makes the page tiled
            rows = 0
            if page.tilewidth < 1:
                raise Unusable(f"{self.display}: has tiles of width 0; the TIFF file is corrupt")
        elif 257 in tags:
            rows = min(page.length if rows is None else rows, page.length)
        elif rows is None:
            rows = _DEFAULTS["rowsperstrip"]
        page.rowsperstrip = rows
        self.shape_of(page)
        self.check(page, subsampling)
        self.segments_of(page, tags)
        return page

    def per_sample(self, tags: Tags, code: int, samples: int, default: int) -> int:
        if code not in tags:
            return default
        if tags[code][0][1] == 1:
            value = self.scalar(tags[code][0], code)
            if value is not None:  # always: one value of another type is refused by ``values``
                return value
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

    def check(self, page: _Page, subsampling: tuple[int, ...] | None) -> None:
        """Refuse what this reader does not decode, with what to do instead; the page's data
        type once it has one."""
        name = _REFUSED_NAMES.get(page.compression, f"compression {page.compression}")
        if page.compression not in ACCEPTED:
            fix = (
                " (decoding it needs the imagecodecs package, which the grader does not install)" if page.compression == 5 else ""
            )
            raise Unusable(f"{self.display}: is compressed with {name}{fix}; {_COMPRESSION_FIX}")
        kind = _DTYPES.get((page.sampleformat, page.bits))
        if kind is None:
            raise Unusable(
                f"{self.display}: has {page.bits}-bit samples of format {page.sampleformat}; "
                "save 8, 16, 32 or 64-bit integers or floats (or 1-bit masks)"
            )
        page.dtype = np.dtype(bool) if kind == "?" else np.dtype(self.order + kind)
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

    def segments_of(self, page: _Page, tags: Tags) -> None:
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
            stored = (page.offsets > 0) & (page.counts > 0)
            if np.any(page.offsets[stored] + page.counts[stored] > self.size):
                raise Unusable(f"{self.display}: the TIFF file is truncated (its image data runs past the end of the file)")
            complete = bool(stored.all())
        if page.nodata and not complete:
            raise Unusable(f"{self.display}: has missing strips or tiles with a GDAL no-data value; write every strip")
