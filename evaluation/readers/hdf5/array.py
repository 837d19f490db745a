"""One dataset of an HDF5 file, checked from its metadata and read region by region, every
chunk decoded here within its size (``hdf5`` explains the rules)."""

import itertools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits, regions
from evaluation.readers.hdf5.filters import (
    DECODED_HERE,
    DEFLATE,
    FILTER_NAMES,
    FLETCHER32,
    LZF,
    LZF_MAX_RATIO,
    SHUFFLE,
    check_fletcher32,
    inflate,
    unshuffle,
)
from evaluation.readers.hdf5.objects import FIX, H5PY_ERRORS, find_key, guard, h5, number_type, only_dataset, walk
from evaluation.readers.untrusted import check_regular, open_regular

ATTRIBUTES = ("description",)  # the only attributes callers use


class Hdf5Array(regions.RegionArrayBase):
    """One dataset of an HDF5 file, checked from its metadata, read region by region.

    ``shape``, ``dtype`` (native byte order), ``chunks`` (None unless chunked), ``attrs``
    (the ``ATTRIBUTES`` present, bounded), ``array[region]`` (ints and step-1 slices),
    ``stored(region)`` (whether anything but the fill value can be inside ``region``) and
    ``read()`` (the whole array). Use as a context manager or call ``close()``."""

    def __init__(
        self,
        path: Path,
        key: str | None = None,
        display: str | None = None,
        max_voxels: int | None = None,
        keys: Sequence[str] = (),
    ):
        self.display = display or Path(path).name
        self._lock = threading.Lock()
        self._handle: Any = None  # an h5py.File
        self._file: BinaryIO | None = None
        check_regular(Path(path), self.display)
        try:
            guard(self.display, lambda: self._open(Path(path), key, tuple(keys), max_voxels))
        except BaseException:
            self.close()
            raise

    # -- opening ---------------------------------------------------------------------------

    def _open(self, path: Path, key: str | None, keys: tuple[str, ...], max_voxels: int | None) -> None:
        h5py = h5()
        file = self._file = open_regular(path, self.display)
        self._file_size = os.fstat(file.fileno()).st_size
        self._handle = h5py.File(path, "r")
        name: str | None
        if key is not None:
            name = key
            if walk(self._handle, key, self.display) is None:
                raise Unusable(f"{self.display}: has no dataset '{key}'")
        else:
            name = find_key(self._handle, keys, self.display) if keys else None
            if name is None:
                name = only_dataset(self._handle, self.display)
        self.key = name
        dsid = walk(self._handle, name, self.display)
        if not isinstance(dsid, h5py.h5d.DatasetID):
            raise Unusable(f"{self.display}: '{name}' is a group, not an array")
        self._dsid = dsid
        self._check_layout(dsid, name)
        self._file_dtype, self._as_bool = number_type(dsid.get_type(), self.display, name)
        self.dtype = np.dtype(bool) if self._as_bool else self._file_dtype.newbyteorder("=")
        space = dsid.get_space()
        kind = space.get_simple_extent_type()
        if kind == h5py.h5s.NULL:
            raise Unusable(f"{self.display}: '{name}' holds no values (a null dataspace)")
        self.shape = tuple(int(n) for n in space.shape) if kind == h5py.h5s.SIMPLE else ()
        voxels = int(np.prod(self.shape, dtype=object)) if self.shape else 1
        if voxels > limits.MAX_VOXELS or (max_voxels is not None and voxels > max_voxels):
            limit = max_voxels if max_voxels is not None and max_voxels < limits.MAX_VOXELS else limits.MAX_VOXELS
            raise Unusable(
                f"{self.display}: '{name}' has shape {self.shape}, more voxels than the {limit} accepted for it; "
                "write it on the image's grid"
            )
        self._fill = self._fill_value()
        self.chunks: tuple[int, ...] | None = None
        self._lzf, self._allocated = False, True
        if self._layout == h5py.h5d.CHUNKED:
            self._check_chunked(name)
        elif self._layout == h5py.h5d.CONTIGUOUS:
            self._check_contiguous(name)
        self.attrs = self._attributes()

    def _check_layout(self, dsid: Any, name: str) -> None:
        h5py = h5()
        dcpl = dsid.get_create_plist()
        layout = dcpl.get_layout()
        if layout == h5py.h5d.VIRTUAL:
            raise Unusable(f"{self.display}: '{name}' is a virtual dataset (it maps data of other files); {FIX}")
        if dcpl.get_external_count():
            raise Unusable(f"{self.display}: '{name}' keeps its data in external files; {FIX}")
        if layout not in (h5py.h5d.CONTIGUOUS, h5py.h5d.CHUNKED, h5py.h5d.COMPACT):
            raise Unusable(f"{self.display}: '{name}' has an unknown storage layout; {FIX}")
        self._layout, self._dcpl = layout, dcpl
        self._filters: list[tuple[int, tuple[int, ...]]] = []
        for index in range(dcpl.get_nfilters()):
            code, _flags, values, _name = dcpl.get_filter(index)
            if code not in DECODED_HERE and code != LZF:
                shown = FILTER_NAMES.get(code, f"filter {code}")
                raise Unusable(f"{self.display}: '{name}' is compressed with {shown}, which is not accepted; {FIX}")
            self._filters.append((int(code), tuple(int(v) for v in values)))
        if self._filters and layout != h5py.h5d.CHUNKED:
            raise Unusable(f"{self.display}: '{name}' has filters on unchunked storage; the file is corrupt")
        codes = [code for code, _ in self._filters]
        if codes.count(DEFLATE) > 1:
            raise Unusable(f"{self.display}: '{name}' is compressed twice with gzip, which is not accepted; {FIX}")
        if LZF in codes and DEFLATE in codes:
            raise Unusable(f"{self.display}: '{name}' combines lzf with gzip, which is not accepted; {FIX}")

    def _fill_value(self) -> int | np.generic:
        h5py = h5()
        if self._dcpl.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED:
            return 0
        value = np.zeros(1, dtype=self._file_dtype)
        self._dcpl.get_fill_value(value)
        fill: np.generic = value.astype(self.dtype)[0]
        return fill

    def _check_contiguous(self, name: str) -> None:
        offset = self._dsid.get_offset()
        self._allocated = offset is not None
        if offset is not None:
            nbytes = int(np.prod(self.shape, dtype=np.int64)) * self._file_dtype.itemsize
            if offset < 0 or offset + nbytes > self._file_size:
                raise Unusable(f"{self.display}: '{name}' runs past the end of the file; the file is truncated")

    def _check_chunked(self, name: str) -> None:
        chunks = tuple(int(c) for c in self._dcpl.get_chunk())
        if len(chunks) != len(self.shape) or min(chunks, default=1) < 1:
            raise Unusable(f"{self.display}: '{name}' has invalid chunk sizes {chunks}")
        self._chunk_bytes = int(np.prod(chunks, dtype=object)) * self._file_dtype.itemsize
        if self._chunk_bytes > limits.HDF5_MAX_CHUNK_BYTES:
            raise Unusable(
                f"{self.display}: '{name}' has chunks of {self._chunk_bytes} bytes, more than the "
                f"{limits.HDF5_MAX_CHUNK_BYTES} accepted; write it with smaller chunks"
            )
        problem = regions.padding_problem(self.shape, chunks, self._file_dtype.itemsize)
        if problem:
            raise Unusable(f"{self.display}: '{name}' {problem.removeprefix('its ')}")
        self.chunks = chunks
        self._grid = tuple(-(-n // c) for n, c in zip(self.shape, chunks))
        if int(np.prod(self._grid, dtype=object)) >= 1 << 62:
            raise Unusable(f"{self.display}: '{name}' declares an impossibly large chunk grid")
        codes = [code for code, _ in self._filters]
        self._lzf = LZF in codes  # decoded by h5py's filter, through HDF5
        if self._lzf:
            self._lzf_bit = 1 << codes.index(LZF)
            values = self._filters[codes.index(LZF)][1]
            # h5py's filter allocates cd_values[2] bytes first: it must be the chunk's size
            if len(values) < 3 or not 0 < values[2] <= self._chunk_bytes + 4 * codes.count(FLETCHER32):
                raise Unusable(f"{self.display}: '{name}' has lzf settings that do not match its chunks; the file is corrupt")
        self._index_chunks(name)

    def _index_chunks(self, name: str) -> None:
        count = int(self._dsid.get_num_chunks())
        if count > limits.HDF5_MAX_CHUNKS:
            raise Unusable(
                f"{self.display}: '{name}' stores {count} chunks, more than the {limits.HDF5_MAX_CHUNKS} accepted; "
                "write it with larger chunks"
            )
        chunks = self.chunks
        assert chunks is not None  # chunked storage
        entries: list[Any] = []  # h5py's StoreInfo of each chunk
        self._dsid.chunk_iter(lambda info: entries.append(info) if len(entries) <= count else True)
        ndim = len(self.shape)
        coords = np.zeros((len(entries), ndim), dtype=np.int64)
        offsets = np.zeros(len(entries), dtype=np.int64)
        sizes = np.zeros(len(entries), dtype=np.int64)
        masks = np.zeros(len(entries), dtype=np.int64)
        keep = np.zeros(len(entries), dtype=bool)
        all_filters = (1 << len(self._filters)) - 1
        for row, info in enumerate(entries):
            origin = tuple(int(v) for v in info.chunk_offset)
            if len(origin) != ndim or any(o < 0 or o % c for o, c in zip(origin, chunks)):
                raise Unusable(f"{self.display}: '{name}' has a chunk at an invalid position; the file is corrupt")
            coords[row] = [o // c for o, c in zip(origin, chunks)]
            keep[row] = all(o < n for o, n in zip(origin, self.shape))  # chunks outside the extent are never read
            offsets[row], sizes[row], masks[row] = int(info.byte_offset), int(info.size), int(info.filter_mask)
        if len(entries):
            if int(masks.min()) < 0 or int(masks.max()) & ~all_filters:
                raise Unusable(f"{self.display}: '{name}' has a chunk with an invalid filter mask; the file is corrupt")
            if int(sizes.min()) <= 0 or int(offsets.min()) < 0 or int((offsets + sizes).max()) > self._file_size:
                raise Unusable(f"{self.display}: '{name}' has chunks that run past the end of the file; the file is truncated")
            order = np.argsort(offsets, kind="stable")
            if np.any((offsets + sizes)[order][:-1] > offsets[order][1:]):
                raise Unusable(f"{self.display}: '{name}' has chunks that overlap in the file; the file is corrupt")
            if self._lzf:
                compressed = (masks & self._lzf_bit) == 0
                limit = max(self._chunk_bytes, limits.HDF5_MAX_FILTER_OUTPUT)
                if np.any(sizes[compressed] * LZF_MAX_RATIO > limit):
                    raise Unusable(
                        f"{self.display}: '{name}' has an lzf chunk that could decode to more than {limit} bytes; "
                        "save it with gzip compression"
                    )
        coords, offsets, sizes, masks = coords[keep], offsets[keep], sizes[keep], masks[keep]
        strides = np.cumprod((self._grid[1:] + (1,))[::-1], dtype=np.int64)[::-1] if ndim else np.zeros(0, np.int64)
        linear = coords @ strides if ndim else np.zeros(len(coords), np.int64)
        order = np.argsort(linear, kind="stable")
        linear = linear[order]
        if len(linear) > 1 and np.any(linear[1:] == linear[:-1]):
            raise Unusable(f"{self.display}: '{name}' lists a chunk twice; the file is corrupt")
        self._strides = strides
        self._linear, self._coords = linear, coords[order]
        self._offsets, self._sizes, self._masks = offsets[order], sizes[order], masks[order]

    def _attributes(self) -> dict[str, Any]:
        h5py = h5()
        found: dict[str, Any] = {}
        for name in ATTRIBUTES:
            try:
                if not h5py.h5a.exists(self._dsid, name.encode()):
                    continue
                attr = h5py.h5a.open(self._dsid, name.encode())
                space = attr.get_space()
                points = space.get_simple_extent_npoints() if space.get_simple_extent_type() == h5py.h5s.SIMPLE else 1
                kind = attr.get_type().get_class()
                if (
                    points > 16
                    or attr.get_storage_size() > limits.HDF5_MAX_ATTRIBUTE_BYTES
                    or kind not in (h5py.h5t.STRING, h5py.h5t.INTEGER, h5py.h5t.FLOAT)
                ):
                    continue
                with self._lock:
                    value = h5py.Dataset(self._dsid).attrs[name]
                if isinstance(value, bytes | str) and len(value) > limits.HDF5_MAX_ATTRIBUTE_BYTES:
                    continue
                found[name] = value
            except H5PY_ERRORS:  # attributes are informational; a broken one is left out
                continue
        return found

    # -- reading ---------------------------------------------------------------------------

    def _chunk_rows(self, slices: list[slice], first_only: bool = False) -> list[int]:
        """Rows of the stored-chunk index whose chunks intersect the region."""
        if any(s.stop <= s.start for s in slices) or not len(self._linear):
            return []
        chunks = self.chunks
        assert chunks is not None  # chunked storage
        low = [s.start // c for s, c in zip(slices, chunks)]
        high = [(s.stop - 1) // c + 1 for s, c in zip(slices, chunks)]
        cells = int(np.prod([h - lo for h, lo in zip(high, low)], dtype=object))
        rows = []
        if cells <= len(self._linear):
            for cell in itertools.product(*(range(lo, h) for lo, h in zip(low, high))):
                target = int(np.dot(cell, self._strides)) if cell else 0
                row = int(np.searchsorted(self._linear, target))
                if row < len(self._linear) and self._linear[row] == target:
                    rows.append(row)
                    if first_only:
                        break
        else:
            inside = np.all((self._coords >= np.asarray(low)) & (self._coords < np.asarray(high)), axis=1)
            rows = [int(r) for r in np.flatnonzero(inside)[: 1 if first_only else None]]
        return rows

    def stored(self, key: regions.Region = ()) -> bool:
        """Whether the region can hold anything but zeros: a stored chunk intersects it, or
        the fill value (what unstored regions read as) is nonzero."""
        slices, _ = guard(self.display, lambda: self.slices(key))
        if any(s.stop <= s.start for s in slices):
            return False
        if self._fill != 0 or self._layout == h5().h5d.COMPACT:
            return True
        if self.chunks is None:
            return self._allocated
        return bool(self._chunk_rows(slices, first_only=True))

    def read(self, region: regions.Region = ()) -> np.ndarray:
        """``region`` of the dataset (``self[region]``); the whole dataset by default."""
        slices, dropped = self.slices(region)
        out = guard(self.display, lambda: self._read(slices))
        if dropped:
            out = out.reshape([s.stop - s.start for axis, s in enumerate(slices) if axis not in dropped])
        return out

    def _read(self, slices: list[slice]) -> np.ndarray:
        shape = tuple(s.stop - s.start for s in slices)
        if self.chunks is not None and not self._lzf:
            out = np.full(shape, self._fill, dtype=self.dtype)
            for row in self._chunk_rows(slices):
                self._place(row, slices, out)
            return out
        if self._lzf and not self._chunk_rows(slices, first_only=True):
            return np.full(shape, self._fill, dtype=self.dtype)
        return self._read_library(slices, shape)

    def _read_library(self, slices: list[slice], shape: tuple[int, ...]) -> np.ndarray:
        """Contiguous, compact and LZF data through HDF5 (nothing unbounded can happen there:
        the extent and every LZF chunk were checked when the dataset was opened)."""
        h5py = h5()
        out = np.empty(shape, dtype=self._file_dtype)  # read as stored (no HDF5 conversion), converted below
        if 0 not in shape:
            with self._lock:
                if self.shape:
                    space = self._dsid.get_space()
                    space.select_hyperslab(tuple(s.start for s in slices), shape)
                    memory = h5py.h5s.create_simple(shape)
                else:
                    space = memory = h5py.h5s.ALL
                self._dsid.read(memory, space, out, self._dsid.get_type())
        return out != 0 if self._as_bool else out.astype(self.dtype, copy=False)

    def _place(self, row: int, slices: list[slice], out: np.ndarray) -> None:
        chunks = self.chunks
        assert chunks is not None  # chunked storage
        origin = [int(c) * n for c, n in zip(self._coords[row], chunks)]
        data = self._decode(row)
        chunk = np.frombuffer(data, dtype=self._file_dtype, count=int(np.prod(chunks))).reshape(chunks)
        source: list[slice] = []
        target: list[slice] = []
        for s, o, c in zip(slices, origin, chunks):
            lo, hi = max(s.start, o), min(s.stop, o + c)
            source.append(slice(lo - o, hi - o))
            target.append(slice(lo - s.start, hi - s.start))
        part = chunk[tuple(source)]
        out[tuple(target)] = part != 0 if self._as_bool else part

    def _decode(self, row: int) -> bytes:
        """The raw bytes of one stored chunk, through the filter pipeline in reverse, every
        stage bounded by the size it must produce."""
        offset, size, mask = int(self._offsets[row]), int(self._sizes[row]), int(self._masks[row])
        if self._file is None:
            raise ValueError(f"{self.display}: read after close()")
        data = os.pread(self._file.fileno(), size, offset)
        if len(data) != size:
            raise Unusable(f"{self.display}: a chunk runs past the end of the file; the file is truncated")
        applied = [i for i in range(len(self._filters)) if not mask & (1 << i)]
        # the size each applied filter was given when the chunk was written: known up to the
        # (single) deflate filter, fletcher32 adding 4 bytes; past it, shuffle and fletcher32
        # only keep or shrink what they are given
        sizes: dict[int, int | None] = {}
        current: int | None = self._chunk_bytes
        for index in applied:
            sizes[index] = current
            code = self._filters[index][0]
            if current is not None and code == FLETCHER32:
                current += 4
            elif code == DEFLATE:
                current = None
        for index in reversed(applied):
            code, values = self._filters[index]
            expected = sizes[index]
            if code == FLETCHER32:
                data = check_fletcher32(data, self.display)
            elif code == DEFLATE:
                assert expected is not None  # sizes are known up to the (single) deflate filter
                data = inflate(data, expected, self.display)
            elif code == SHUFFLE:
                data = unshuffle(data, values[0] if values else self._file_dtype.itemsize)
            if expected is not None and len(data) != expected:
                raise Unusable(f"{self.display}: a chunk decodes to {len(data)} bytes instead of {expected}; the file is corrupt")
        if len(data) != self._chunk_bytes:
            raise Unusable(f"{self.display}: a chunk holds {len(data)} bytes instead of {self._chunk_bytes}; the file is corrupt")
        return data

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        for thing in (self._handle, self._file):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001 - closing a half-opened file
                    pass
        self._handle = self._file = None
