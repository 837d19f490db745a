"""Sharded arrays (zarr v3 ``sharding_indexed``): the array -> bytes stage of their pipeline
(``Sharding``), which reads the shard's index and the inner chunks of a shard that a region
read needs, and the registry row's checks of where it stands and of its settings.

Work is bounded before anything is decoded: a shard holds at most
``limits.ZARR_MAX_SHARD_CHUNKS`` inner chunks and the whole array at most
``limits.ZARR_MAX_INNER_CHUNKS`` (both from the metadata: every inner chunk is decoded on its
own, so their number is the work, whichever reads ask for them), and the index of every
shard is checked whole before any of its inner chunks is decoded: each stored inner chunk
lies inside the shard, outside the index, within the most its codecs can need, and no two
share a byte. Decoding work is then bounded by the shard's size, whatever the index says (a
million entries pointing at the same four bytes are refused, not decoded a million times).
"""

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import limits, untrusted
from evaluation.readers.codecs import as_u1
from evaluation.readers.zarr_store import settings
from evaluation.readers.zarr_store.base import MISSING, Corrupt, Invalid, shape_of
from evaluation.readers.zarr_store.pipeline import Chunk, Pipeline
from evaluation.readers.zarr_store.stages import ArrayBytes, Checksum, Data, crc32c
from evaluation.readers.zarr_store.threads import run_tasks

Selection = list[tuple[int, int]]  # (start, stop) per axis (``regions.select``)


class ChunkStore(Protocol):
    """What the sharding stage uses of its array (``reading.Array``): where its files are,
    its shard shape, a shard's file name, and decoding and placing an inner chunk."""

    path: Path
    grid: tuple[int, ...]

    def key(self, coords: Sequence[int]) -> str: ...

    def refuse(self, display: str, key: str, reason: str) -> Unusable: ...

    def workers(self, pipeline: Pipeline) -> int: ...

    def decode(self, pipeline: Pipeline, data: Data, key: str, display: str) -> np.ndarray: ...

    def place(self, chunk: np.ndarray, origin: Sequence[int], selection: Selection, out: np.ndarray) -> None: ...


@dataclass
class Sharding(ArrayBytes):
    """The array -> bytes stage of a sharded array (zarr-specs, v3.0 "Sharding codec"): a
    shard holds ``per_shard`` inner chunks, each stored through ``inner``, and an index of
    (offset, length) pairs. It reads a shard in parts (``read``), never whole, through the
    array's interface for its stages (``reading.Array``: ``path``, ``grid``, ``key``,
    ``refuse``, ``workers``, ``decode``, ``place``)."""

    inner: Pipeline
    per_shard: tuple[int, ...]  # inner chunks along each axis of a shard
    index_at_start: bool
    index_dtype: np.dtype
    index_checksum: bool

    name = "sharding_indexed"
    partial = True

    @property
    def index_bytes(self) -> int:
        return int(np.prod(self.per_shard, dtype=np.int64)) * 16 + (4 if self.index_checksum else 0)

    def read(
        self, array: ChunkStore, shards: Iterable[Sequence[int]], selection: Selection, out: np.ndarray, display: str
    ) -> None:
        """Decode into ``out`` the inner chunks of ``shards`` (coordinates) that meet
        ``selection``: every index read and checked before the first is decoded."""
        inner = self.inner
        plans = []
        for coords in shards:
            shard = tuple(int(i) for i in coords)
            key = array.key(shard)
            origin = [c * g for c, g in zip(shard, array.grid)]
            with untrusted.open_regular(array.path / key, f"{display}/{key}") as handle:
                size = os.fstat(handle.fileno()).st_size
                index = self._index(array, handle.fileno(), size, key, display)
            low = [max(0, (start - o) // c) for (start, _), o, c in zip(selection, origin, inner.shape)]
            high = [min(n, -(-(stop - o) // c)) for (_, stop), o, c, n in zip(selection, origin, inner.shape, self.per_shard)]
            if any(h <= lo for lo, h in zip(low, high)):
                continue
            block = index[tuple(slice(lo, h) for lo, h in zip(low, high))]
            present = np.argwhere((block[..., 0] != MISSING) | (block[..., 1] != MISSING))
            stored = block[tuple(present.T)].astype(np.int64)
            positions = present + np.asarray(low, dtype=np.int64)
            plans.append((key, origin, size, zip(map(tuple, positions.tolist()), stored[:, 0].tolist(), stored[:, 1].tolist())))
        for key, origin, size, entries in plans:
            with untrusted.open_regular(array.path / key, f"{display}/{key}") as handle:
                if os.fstat(handle.fileno()).st_size != size:
                    raise array.refuse(display, key, "the shard changed while it was read")
                tasks = []
                for position, offset, length in entries:
                    name = f"{key} (inner chunk {'.'.join(map(str, position)) or '0'})"
                    inner_origin = [o + p * c for o, p, c in zip(origin, position, inner.shape)]
                    tasks.append(
                        self._inner_task(array, handle.fileno(), offset, length, name, inner_origin, selection, out, display)
                    )
                run_tasks(tasks, array.workers(inner))

    def _index(self, array: ChunkStore, fd: int, size: int, key: str, display: str) -> np.ndarray:
        """The shard's index, (*per_shard, 2) of (offset, length), checked whole (see above)."""
        index_bytes = self.index_bytes
        if size < index_bytes:
            raise array.refuse(display, key, f"the shard is shorter ({size} bytes) than its index ({index_bytes} bytes)")
        index_at = 0 if self.index_at_start else size - index_bytes
        raw: Data = os.pread(fd, index_bytes, index_at)
        if len(raw) != index_bytes:
            raise array.refuse(display, key, "the shard ended while reading its index")
        if self.index_checksum:
            try:
                raw = Checksum("crc32c", "end", crc32c).decode(raw, index_bytes - 4, True)
            except Corrupt as exc:
                raise array.refuse(display, key, f"its shard index is damaged ({exc})") from None
        index = as_u1(raw).view(self.index_dtype).reshape(*self.per_shard, 2)
        entries = index.reshape(-1, 2).astype(np.uint64)
        stored = entries[(entries[:, 0] != MISSING) | (entries[:, 1] != MISSING)]
        if not len(stored):
            return index
        offsets, lengths = stored[:, 0], stored[:, 1]
        if np.any(offsets == MISSING) | np.any(lengths == MISSING) or np.any(offsets > size) or np.any(lengths > size - offsets):
            raise array.refuse(display, key, f"its shard index points past the end of the shard ({size} bytes)")
        if int(lengths.max()) > self.inner.stored_limit:
            raise array.refuse(
                display,
                key,
                f"an inner chunk is stored in {int(lengths.max())} bytes, more than {self.inner.stored_limit} accepted",
            )
        starts = np.append(offsets, np.uint64(index_at)).astype(np.int64)
        ends = starts + np.append(lengths, np.uint64(index_bytes)).astype(np.int64)
        order = np.argsort(starts, kind="stable")
        if np.any(ends[order][:-1] > starts[order][1:]):
            raise array.refuse(display, key, "its inner chunks overlap each other or the shard index")
        return index

    def _inner_task(
        self,
        array: ChunkStore,
        fd: int,
        offset: int,
        length: int,
        name: str,
        origin: Sequence[int],
        selection: Selection,
        out: np.ndarray,
        display: str,
    ) -> Callable[[], None]:
        inner = self.inner

        def task() -> None:
            data = os.pread(fd, length, offset)
            if len(data) != length:
                raise array.refuse(display, name, "the shard ended early")
            array.place(array.decode(inner, data, name, display), origin, selection, out)

        return task


# ---- the registry's sharding_indexed row (``registry``): where it may stand, how it is made

SETTINGS: settings.Settings = {
    "chunk_shape": (lambda v: isinstance(v, list), "a list of integers"),
    "codecs": (lambda v: isinstance(v, list), "a list of codecs"),
    "index_codecs": (lambda v: isinstance(v, list), "a list of codecs"),
    "index_location": (lambda v: v in ("start", "end"), "'start' or 'end'"),
}
REQUIRED = ("chunk_shape", "codecs", "index_codecs")


def place(chunk: Chunk) -> None:
    """Sharding is accepted once, as the only codec of the array's list."""
    if chunk.nested:
        raise Invalid("sharding inside a shard is not accepted; shard once")
    if chunk.count != 1:
        raise Invalid("sharding_indexed must be the only codec of the array (put compressors in its own 'codecs')")


def build(name: str, config: dict[str, Any], chunk: Chunk) -> Sharding:
    """The stage from its checked settings, for shards of ``chunk.shape``; the inner codec
    list becomes the inner chunks' pipeline (``chunk.parse``)."""
    shard = chunk.shape
    inner_shape = shape_of(config["chunk_shape"], "chunk_shape", 1)
    if len(inner_shape) != len(shard) or any(s % c for s, c in zip(shard, inner_shape)):
        raise Invalid("the shard shape must be a multiple of the sharding 'chunk_shape' along every axis")
    per_shard = tuple(s // c for s, c in zip(shard, inner_shape))
    if math.prod(per_shard) > limits.ZARR_MAX_SHARD_CHUNKS:
        raise Invalid(f"a shard holds {math.prod(per_shard)} inner chunks; at most {limits.ZARR_MAX_SHARD_CHUNKS} are accepted")
    assert chunk.parse is not None  # set by the format 3 parser, the only one that names sharding
    inner = chunk.parse(config["codecs"], inner_shape, chunk.dtype_name, "codecs", True)
    names = [settings.named(e, "index_codecs") for e in config["index_codecs"]]
    if not names or names[0][0] not in ("bytes", "endian") or any(n != "crc32c" for n, _ in names[1:]) or len(names) > 2:
        raise Invalid("'index_codecs' must be the bytes codec, optionally followed by crc32c")
    endian = settings.check(names[0][1], "bytes", {"endian": settings.ENDIAN}).get("endian", "little")
    if len(names) == 2:
        settings.check(names[1][1], "crc32c", {})
    return Sharding(
        inner,
        per_shard,
        config.get("index_location", "end") == "start",
        np.dtype("<u8" if endian == "little" else ">u8"),
        len(names) == 2,
    )
