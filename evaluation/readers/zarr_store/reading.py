"""Reading a zarr array: which chunks are stored (listed once), region reads that decode
only those, on a few threads with the memory in flight bounded."""

import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits, regions, untrusted
from evaluation.readers.regions import Region
from evaluation.readers.zarr_store.base import CANONICAL_INT, THREADS, Corrupt, native
from evaluation.readers.zarr_store.hierarchy import lstat_mode
from evaluation.readers.zarr_store.metadata import Metadata
from evaluation.readers.zarr_store.pipeline import Pipeline
from evaluation.readers.zarr_store.sharding import Selection
from evaluation.readers.zarr_store.stages import Data
from evaluation.readers.zarr_store.threads import run_tasks
from evaluation.readers.zarr_store.zero_chunks import ZeroChunks


class Array(regions.RegionArrayBase):
    """A zarr array on the local file system, read-only. ``shape``, ``dtype`` (native byte
    order), ``chunks`` (inner chunks for sharded arrays; ``shards`` the shards), ``fill_value``,
    ``attrs`` come from the metadata; ``array[region]`` / ``read(region)`` decode.

    Its pipeline's partial array -> bytes stage (``sharding.Sharding``) reads through a small
    interface: ``path``, ``grid`` (the chunk or shard shape), ``key`` (a chunk's file),
    ``workers``, ``decode``, ``place`` and ``refuse``."""

    def __init__(self, path: Path, display: str, meta: Metadata):
        self.path, self.display, self._meta = path, display, meta
        self.grid = meta.grid
        self.shape = meta.shape
        self.dtype = native(meta.dtype)
        self.fill_value = meta.fill
        self.attrs = meta.attrs
        self.zarr_format = meta.version
        self.shards = meta.grid if meta.sharding else None
        self.chunks = meta.sharding.inner.shape if meta.sharding else meta.grid
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._grid_shape = tuple(-(-s // c) for s, c in zip(self.shape, meta.grid))
        self._stored: tuple[np.ndarray, np.ndarray] | None = None  # see _listing
        self._lock = threading.Lock()
        self._zeros = ZeroChunks(path, display, meta, self.key)

    def __repr__(self) -> str:
        return f"<zarr array {self.display} shape={self.shape} dtype={self.dtype} chunks={self.chunks}>"

    def read(self, region: Region = Ellipsis, out: np.ndarray | None = None, display: str | None = None) -> np.ndarray:
        """The region (Ellipsis, ints, step-1 slices and tuples of them) as a native-order
        numpy array; absent chunks read as the fill value. ``out``: an array of exactly the
        region's shape and the array's dtype (C-contiguous, writeable) to decode into, reused
        across reads of same-sized regions (a large fresh array costs its page faults).
        ``display`` names the array in refusals (default: its own)."""
        display = display or self.display
        selection, dropped = regions.select(region, self.shape)
        out_shape = tuple(stop - start for start, stop in selection)
        final_shape = tuple(n for axis, n in enumerate(out_shape) if axis not in dropped)
        if out is not None and (
            not isinstance(out, np.ndarray)
            or out.shape != out_shape
            or out.dtype != self.dtype
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(f"out must be a writeable C-contiguous {self.dtype} array of shape {out_shape}")
        if 0 in out_shape:
            return np.full(final_shape, self.fill_value, dtype=self.dtype)
        coords, count = self._chunks_in(selection, display)
        complete = len(coords) == count and self._meta.sharding is None
        if out is None:
            out = np.empty(out_shape, dtype=self.dtype)
        if not complete:
            self._fill_absent(selection, coords, count, out)
        if self._meta.sharding is None:
            pipeline = self._meta.pipeline
            tasks = [self._chunk_task(c, selection, out, display) for c in coords]
            run_tasks(tasks, self.workers(pipeline))
        else:
            self._meta.sharding.read(self, coords, selection, out, display)
        return out.reshape(final_shape)

    def stored_regions(self, region: Region = Ellipsis) -> list[tuple[slice, ...]] | None:
        """The parts of ``region`` (a tuple of step-1 slices, one per axis) that meet a stored
        chunk (or shard), one box per chunk in raster order; everything else in the region is
        the fill value 0. None when the fill value is not 0 (then any part may hold data)."""
        if self.fill_value != 0:
            return None
        selection, dropped = regions.select(region, self.shape)
        if dropped:
            raise IndexError("stored_regions takes slices, not integer indices")
        coords, _ = self._chunks_in(selection, self.display)
        grid = self._meta.grid
        return [
            tuple(slice(max(int(c) * g, start), min((int(c) + 1) * g, stop)) for c, g, (start, stop) in zip(row, grid, selection))
            for row in sorted(coords.tolist())
        ]

    def stored(self, region: Region = Ellipsis) -> bool:
        """False only when the region holds no stored chunk and the fill value is 0, i.e.
        when it is certainly all zeros."""
        if self.fill_value != 0:
            return True
        selection, _ = regions.select(region, self.shape)
        return len(self._chunks_in(selection, self.display)[0]) > 0

    # -- the interface of the sharding stage (and of the chunk tasks)

    def workers(self, pipeline: Pipeline) -> int:
        """Threads for decoding: one for tiny chunks (their cost is Python's, under the GIL),
        else as many as the in-flight memory bound allows."""
        if pipeline.nbytes < 16 << 10:
            return 1
        per_task = 2 * pipeline.nbytes + pipeline.stored_limit
        return max(1, min(THREADS, limits.MAX_IN_FLIGHT_BYTES // max(1, per_task)))

    # -- which chunks are stored

    def key(self, coords: Sequence[int]) -> str:
        """The file name of the chunk (or shard) at ``coords``, relative to ``path``."""
        parts = self._meta.prefix + tuple(str(int(c)) for c in coords)
        if not parts:
            parts = ("0",)
        return self._meta.separator.join(parts)

    def _listing(self, display: str) -> tuple[np.ndarray, np.ndarray]:
        """Linear indices (sorted) and coordinates of the stored chunk files, listed once."""
        with self._lock:
            if self._stored is None:
                try:
                    linear = self._list(display)
                except OSError as exc:  # a chunk folder that cannot be listed
                    raise Unusable(f"{display}: its chunk files cannot be listed ({type(exc).__name__})") from None
                stored = np.unique(linear)
                if self.ndim:
                    coords = np.stack(np.unravel_index(stored, self._grid_shape), axis=1).astype(np.int64)
                else:
                    coords = np.zeros((len(stored), 0), dtype=np.int64)
                self._stored = stored, coords
            return self._stored

    def _list(self, display: str) -> np.ndarray:
        """Linear indices of the chunk files present, from one walk of the array's folder
        that follows no link and refuses links and special files named like chunks."""
        meta = self._meta
        prefix, grid, ndim = meta.prefix, self._grid_shape, self.ndim
        levels = len(prefix) + ndim
        if 0 in grid or (levels == 0 and lstat_mode(self.path / "0") is None):
            return np.zeros(0, dtype=np.int64)
        if levels == 0:  # a 0-d array of format 2: its only chunk is "0"
            return np.zeros(1, dtype=np.int64)
        scanned = 0

        def part(name: str, level: int) -> int | None:
            if level < len(prefix):
                return 0 if name == prefix[level] else None
            if not CANONICAL_INT.fullmatch(name):
                return None
            value = int(name)
            return value if value < grid[level - len(prefix)] else None

        def refuse_special(entry: os.DirEntry[str], relative: str) -> None:
            if entry.is_file(follow_symlinks=False):  # from the folder entry: no system call
                return
            what = untrusted.kind_of(entry.stat(follow_symlinks=False).st_mode)
            if what is not None:
                raise Unusable(f"{display}/{relative}: is {what}; upload plain files and folders only")

        found: list[list[int]] = []
        if meta.separator == "." or levels == 1:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    scanned += 1
                    if scanned > limits.ZARR_MAX_STORED_ENTRIES:
                        raise Unusable(f"{display}: holds more than {limits.ZARR_MAX_STORED_ENTRIES} files; use larger chunks")
                    names = entry.name.split(".") if meta.separator == "." else [entry.name]
                    if len(names) != levels:
                        continue
                    parsed = [part(n, i) for i, n in enumerate(names)]
                    if None in parsed or entry.is_dir(follow_symlinks=False):
                        continue
                    refuse_special(entry, entry.name)
                    found.append(cast(list[int], parsed[len(prefix) :]))
        else:
            pending: list[tuple[Path, int, list[int]]] = [(self.path, 0, [])]
            while pending:
                folder, level, values = pending.pop()
                with os.scandir(folder) as entries:
                    for entry in entries:
                        scanned += 1
                        if scanned > limits.ZARR_MAX_STORED_ENTRIES:
                            raise Unusable(
                                f"{display}: holds more than {limits.ZARR_MAX_STORED_ENTRIES} files; use larger chunks"
                            )
                        value = part(entry.name, level)
                        if value is None:
                            continue
                        if level + 1 < levels:
                            if entry.is_dir(follow_symlinks=False):
                                pending.append((Path(entry.path), level + 1, values + [value]))
                            else:
                                refuse_special(entry, os.path.relpath(entry.path, self.path))
                        elif not entry.is_dir(follow_symlinks=False):
                            refuse_special(entry, os.path.relpath(entry.path, self.path))
                            found.append((values + [value])[len(prefix) :])
        if not found or not ndim:
            return np.zeros(len(found[:1]), dtype=np.int64)
        coords = np.asarray(found, dtype=np.int64).reshape(len(found), ndim)
        return np.asarray(np.ravel_multi_index(coords.T, grid), dtype=np.int64)

    def _chunks_in(self, selection: Selection, display: str) -> tuple[np.ndarray, int]:
        """Coordinates (rows) of the stored chunks (shards) that intersect ``selection``, but
        those stored as chunks of zeros (``zero_chunks``), and the number of chunk coordinates
        it spans. Work: min(span, stored chunks)."""
        coords, count = self._stored_chunks_in(selection, display)
        return coords[~self._zeros.among(coords)], count

    def _stored_chunks_in(self, selection: Selection, display: str) -> tuple[np.ndarray, int]:
        """Coordinates (rows) of the stored chunks (shards) that intersect ``selection``, and
        the number of chunk coordinates it spans. Work: min(span, stored chunks)."""
        grid = self._meta.grid
        low = np.array([start // c for (start, _), c in zip(selection, grid)], dtype=np.int64)
        high = np.array([-(-stop // c) for (_, stop), c in zip(selection, grid)], dtype=np.int64)
        count = int(np.prod(high - low)) if self.ndim else 1
        stored, coords = self._listing(display)
        if count == 0 or len(stored) == 0:
            return np.zeros((0, self.ndim), dtype=np.int64), count
        if not self.ndim:
            return coords[:1], count
        if count <= len(stored):
            box = np.indices(tuple(high - low), dtype=np.int64).reshape(self.ndim, -1) + low[:, None]
            linear = np.ravel_multi_index(box, self._grid_shape)
            position = np.minimum(np.searchsorted(stored, linear), len(stored) - 1)
            return box.T[stored[position] == linear], count
        inside = np.all((coords >= low) & (coords < high), axis=1)
        return coords[inside], count

    def _fill_absent(self, selection: Selection, coords: np.ndarray, count: int, out: np.ndarray) -> None:
        """The fill value where ``selection`` meets no stored chunk: chunk by chunk when the
        selection spans few chunks (touching only what no chunk will overwrite), else all of it."""
        if self._meta.sharding is not None or count > 4096 or not self.ndim:
            out.fill(self.fill_value)
            return
        grid = self._meta.grid
        low = [start // c for (start, _), c in zip(selection, grid)]
        high = [-(-stop // c) for (_, stop), c in zip(selection, grid)]
        present = {tuple(int(i) for i in row) for row in coords}
        for offset in np.ndindex(*[h - lo for lo, h in zip(low, high)]):
            chunk = tuple(lo + o for lo, o in zip(low, offset))
            if chunk in present:
                continue
            out[
                tuple(
                    slice(max(c * g, start) - start, min((c + 1) * g, stop) - start)
                    for c, g, (start, stop) in zip(chunk, grid, selection)
                )
            ] = self.fill_value

    # -- decoding

    def refuse(self, display: str, key: str, reason: str) -> Unusable:
        """The refusal of a chunk that cannot be read (raised by the caller)."""
        return Unusable(
            f"{display}: chunk {key} cannot be read: {reason}; the chunk is corrupt or crafted, write the array again with zarr"
        )

    def place(self, chunk: np.ndarray, origin: Sequence[int], selection: Selection, out: np.ndarray) -> None:
        """Copy the part of ``chunk`` (at ``origin``) that lies in ``selection`` into ``out``."""
        source: list[slice] = []
        target: list[slice] = []
        for o, n, (start, stop) in zip(origin, chunk.shape, selection):
            low, high = max(o, start), min(o + n, stop)
            source.append(slice(low - o, high - o))
            target.append(slice(low - start, high - start))
        part = chunk[tuple(source)]
        out[tuple(target)] = part != 0 if self.dtype.kind == "b" else part

    def decode(self, pipeline: Pipeline, data: Data, key: str, display: str) -> np.ndarray:
        """``data`` decoded through ``pipeline``; a corrupt chunk refused, named by ``key``."""
        try:
            return pipeline.decode(data)
        except Corrupt as exc:
            raise self.refuse(display, key, str(exc)) from None

    def _chunk_task(self, coords: Sequence[int], selection: Selection, out: np.ndarray, display: str) -> Callable[[], None]:
        pipeline, key = self._meta.pipeline, self.key(coords)
        origin = [int(c) * g for c, g in zip(coords, self._meta.grid)]
        place = None  # the chunk's place in ``out``, when all of it lies there in one block of memory
        if pipeline.in_place and pipeline.dtype == out.dtype and 0 < len(origin) == out.ndim:
            grid = self._meta.grid
            if all(start <= o and o + g <= stop for o, g, (start, stop) in zip(origin, grid, selection)):
                region = out[tuple(slice(o - start, o - start + g) for o, g, (start, _) in zip(origin, grid, selection))]
                place = region if region.flags.c_contiguous else None

        def task() -> None:
            data = untrusted.read_bytes(
                self.path / key, f"{display}/{key}", pipeline.stored_limit, what="a compressed chunk of this array"
            )
            if place is None:
                self.place(self.decode(pipeline, data, key, display), origin, selection, out)
                return
            try:
                pipeline.decode_into(data, place)
            except Corrupt as exc:
                raise self.refuse(display, key, str(exc)) from None

        return task
