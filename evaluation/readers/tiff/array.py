"""The image of a TIFF file read page by page, each strip or tile decoded through
``readers.codecs`` into at most its own size (``tiff`` explains the rules)."""

import itertools
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs, limits, regions
from evaluation.readers.tiff.series import _series
from evaluation.readers.tiff.structure import DEFLATE, LZMA, NONE, OLD_DEFLATE, PACKBITS, _Page, _Reader
from evaluation.readers.untrusted import check_regular, open_regular

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


class TiffArray(regions.RegionArrayBase):
    """The first image series of a TIFF file, read page by page.

    ``shape``, ``dtype`` (native byte order), ``chunks`` (one page per chunk), ``attrs``
    (always empty), ``array[region]`` (ints and step-1 slices), ``stored(region)`` (whether
    any data is stored there) and ``read()``. Thread-safe (positioned reads only)."""

    def __init__(self, path: Path, display: str | None = None, max_voxels: int | None = None):
        self.display = display or Path(path).name
        self.attrs = {}
        check_regular(Path(path), self.display)
        file = open_regular(Path(path), self.display)
        self._file: BinaryIO | None = file
        try:
            self._open(file, max_voxels)
        except BaseException:
            self.close()
            raise

    def _open(self, file: BinaryIO, max_voxels: int | None) -> None:
        reader = _Reader(file, self.display)
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
            self._pages: list[_Page] | None = None
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
        self._last: tuple[int, np.ndarray] | None = (
            None  # (index, page) of a series read whole, so that slabs do not decode it again
        )

    # -- regions ---------------------------------------------------------------------------

    def _page_indices(self, slices: list[slice]) -> Iterator[tuple[tuple[int, ...], int]]:
        lead = self.shape[: self._lead]
        strides = [math.prod(lead[k + 1 :]) for k in range(len(lead))]
        for cell in itertools.product(*(range(s.start, s.stop) for s in slices[: self._lead])):
            yield cell, sum(c * st for c, st in zip(cell, strides))

    def stored(self, key: regions.Region = ()) -> bool:
        """Whether any strip or tile is stored inside the region (missing ones read as 0)."""
        slices, _ = self.slices(key)
        if any(s.stop <= s.start for s in slices):
            return False
        if self._pages is None or self._whole_only:
            return True
        for _, index in self._page_indices(slices):
            page = self._pages[index]
            if np.any((page.offsets > 0) & (page.counts > 0)):
                return True
        return False

    def read(self, region: regions.Region = ()) -> np.ndarray:
        """``region`` of the series (``self[region]``); the whole series by default."""
        slices, dropped = self.slices(region)
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

    # -- decoding one page -----------------------------------------------------------------

    def _pread(self, offset: int, count: int) -> bytes:
        if self._file is None:
            raise ValueError(f"{self.display}: read after close()")
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
            assert self._pages is not None  # not contiguous: the series' pages are kept
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
