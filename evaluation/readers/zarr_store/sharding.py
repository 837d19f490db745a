"""Sharded arrays (zarr v3 ``sharding_indexed``): the shard's index, and the inner chunks of a
shard that a region read needs."""

import os
from dataclasses import dataclass

import numpy as np

from evaluation.readers import untrusted
from evaluation.readers.zarr_store.base import _MISSING, _Corrupt
from evaluation.readers.zarr_store.pipeline import _as_u1, _Checksum, _Pipeline
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


def read_shard(array, shard, selection, out, display: str, error) -> None:
    sharding, key = array._meta.sharding, array._key(shard)
    inner = sharding.inner
    origin = [c * g for c, g in zip(shard, array._meta.grid)]
    with untrusted.open_regular(array.path / key, f"{display}/{key}", error) as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        index_bytes = sharding.index_bytes
        if size < index_bytes:
            raise array._fail(error, display, key, f"the shard is shorter ({size} bytes) than its index ({index_bytes} bytes)")
        raw = os.pread(fd, index_bytes, 0 if sharding.index_at_start else size - index_bytes)
        if len(raw) != index_bytes:
            raise array._fail(error, display, key, "the shard ended while reading its index")
        if sharding.index_checksum:
            try:
                raw = _Checksum("crc32c", "end").decode(raw, index_bytes - 4, True)
            except _Corrupt as exc:
                raise array._fail(error, display, key, f"its shard index is damaged ({exc})") from None
        index = _as_u1(raw).view(sharding.index_dtype).reshape(*sharding.per_shard, 2)
        # inner chunks of this shard inside the selection
        low = [max(0, (start - o) // c) for (start, _), o, c in zip(selection, origin, inner.shape)]
        high = [min(n, -(-(stop - o) // c)) for (_, stop), o, c, n in zip(selection, origin, inner.shape, sharding.per_shard)]
        if any(h <= lo for lo, h in zip(low, high)):
            return
        block = index[tuple(slice(lo, h) for lo, h in zip(low, high))]
        offsets, lengths = block[..., 0].astype(np.uint64), block[..., 1].astype(np.uint64)
        present = (offsets != _MISSING) | (lengths != _MISSING)
        tasks = []
        for local in np.argwhere(present):
            position = tuple(int(lo + i) for lo, i in zip(low, local))
            offset, length = int(offsets[tuple(local)]), int(lengths[tuple(local)])
            name = f"{key} (inner chunk {'.'.join(map(str, position)) or '0'})"
            if offset == _MISSING or length == _MISSING or offset + length > size:
                raise array._fail(error, display, name, f"its shard index points past the end of the shard ({size} bytes)")
            if length > inner.stored_limit:
                raise array._fail(
                    error, display, name, f"it is stored in {length} bytes, more than {inner.stored_limit} accepted"
                )
            inner_origin = [o + p * c for o, p, c in zip(origin, position, inner.shape)]
            tasks.append(_inner_task(array, fd, offset, length, name, inner_origin, selection, out, display, error))
        run_tasks(tasks, array._workers(inner))


def _inner_task(array, fd, offset, length, name, origin, selection, out, display, error):
    inner = array._meta.sharding.inner

    def task():
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise array._fail(error, display, name, "the shard ended early")
        array._place(array._decode(inner, data, name, display, error), origin, selection, out)

    return task
