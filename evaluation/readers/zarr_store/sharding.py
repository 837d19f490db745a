"""Sharded arrays (zarr v3 ``sharding_indexed``): the shard's index, and the inner chunks of a
shard that a region read needs.

Work is bounded before anything is decoded: a shard holds at most
``limits.ZARR_MAX_SHARD_CHUNKS`` inner chunks and the whole array at most
``limits.ZARR_MAX_INNER_CHUNKS`` (both from the metadata: every inner chunk is decoded on its
own, so their number is the work, whichever reads ask for them), and the index of every
shard is checked whole before any of its inner chunks is decoded: each stored inner chunk
lies inside the shard, outside the index, within the most its codecs can need, and no two
share a byte. Decoding work is then bounded by the shard's size, whatever the index says (a
million entries pointing at the same four bytes are refused, not decoded a million times).
"""

import os
from dataclasses import dataclass

import numpy as np

from evaluation.readers import untrusted
from evaluation.readers.codecs import as_u1
from evaluation.readers.zarr_store.base import MISSING, Corrupt
from evaluation.readers.zarr_store.pipeline import _Checksum, _Pipeline
from evaluation.readers.zarr_store.threads import run_tasks


@dataclass
class _Sharding:
    inner: _Pipeline
    per_shard: tuple[int, ...]  # inner chunks along each axis of a shard
    index_at_start: bool
    index_dtype: np.dtype
    index_checksum: bool

    @property
    def index_bytes(self) -> int:
        return int(np.prod(self.per_shard, dtype=np.int64)) * 16 + (4 if self.index_checksum else 0)


def read_shards(array, shards, selection, out, display: str) -> None:
    """Decode into ``out`` the inner chunks of ``shards`` (coordinates) that meet
    ``selection``: every index read and checked before the first is decoded."""
    sharding = array._meta.sharding
    inner = sharding.inner
    plans = []
    for coords in shards:
        shard = tuple(int(i) for i in coords)
        key = array._key(shard)
        origin = [c * g for c, g in zip(shard, array._meta.grid)]
        with untrusted.open_regular(array.path / key, f"{display}/{key}") as handle:
            size = os.fstat(handle.fileno()).st_size
            index = _index(array, handle.fileno(), size, key, display)
        low = [max(0, (start - o) // c) for (start, _), o, c in zip(selection, origin, inner.shape)]
        high = [min(n, -(-(stop - o) // c)) for (_, stop), o, c, n in zip(selection, origin, inner.shape, sharding.per_shard)]
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
                raise array._fail(display, key, "the shard changed while it was read")
            tasks = []
            for position, offset, length in entries:
                name = f"{key} (inner chunk {'.'.join(map(str, position)) or '0'})"
                inner_origin = [o + p * c for o, p, c in zip(origin, position, inner.shape)]
                tasks.append(_inner_task(array, handle.fileno(), offset, length, name, inner_origin, selection, out, display))
            run_tasks(tasks, array._workers(inner))


def _index(array, fd: int, size: int, key: str, display: str) -> np.ndarray:
    """The shard's index, (*per_shard, 2) of (offset, length), checked whole (see above)."""
    sharding = array._meta.sharding
    index_bytes = sharding.index_bytes
    if size < index_bytes:
        raise array._fail(display, key, f"the shard is shorter ({size} bytes) than its index ({index_bytes} bytes)")
    index_at = 0 if sharding.index_at_start else size - index_bytes
    raw = os.pread(fd, index_bytes, index_at)
    if len(raw) != index_bytes:
        raise array._fail(display, key, "the shard ended while reading its index")
    if sharding.index_checksum:
        try:
            raw = _Checksum("crc32c", "end").decode(raw, index_bytes - 4, True)
        except Corrupt as exc:
            raise array._fail(display, key, f"its shard index is damaged ({exc})") from None
    index = as_u1(raw).view(sharding.index_dtype).reshape(*sharding.per_shard, 2)
    entries = index.reshape(-1, 2).astype(np.uint64)
    stored = entries[(entries[:, 0] != MISSING) | (entries[:, 1] != MISSING)]
    if not len(stored):
        return index
    offsets, lengths = stored[:, 0], stored[:, 1]
    if np.any(offsets == MISSING) | np.any(lengths == MISSING) or np.any(offsets > size) or np.any(lengths > size - offsets):
        raise array._fail(display, key, f"its shard index points past the end of the shard ({size} bytes)")
    if int(lengths.max()) > sharding.inner.stored_limit:
        raise array._fail(
            display,
            key,
            f"an inner chunk is stored in {int(lengths.max())} bytes, more than {sharding.inner.stored_limit} accepted",
        )
    starts = np.append(offsets, np.uint64(index_at)).astype(np.int64)
    ends = starts + np.append(lengths, np.uint64(index_bytes)).astype(np.int64)
    order = np.argsort(starts, kind="stable")
    if np.any(ends[order][:-1] > starts[order][1:]):
        raise array._fail(display, key, "its inner chunks overlap each other or the shard index")
    return index


def _inner_task(array, fd, offset, length, name, origin, selection, out, display):
    inner = array._meta.sharding.inner

    def task():
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise array._fail(display, name, "the shard ended early")
        array._place(array._decode(inner, data, name, display), origin, selection, out)

    return task
