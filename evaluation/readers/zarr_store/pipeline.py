"""A chunk's pipeline: its stages by kind (``stages``), in encoding order, and the sizes each
bytes -> bytes stage must decode to, planned once from the metadata (``plan``) so that every
decoder is given its budget before a byte is read; and what each codec of it is made for
(``Chunk``), which the registry's rows and the sharding stage build from."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evaluation.readers import limits
from evaluation.readers.codecs import as_u1
from evaluation.readers.zarr_store.base import Corrupt, Invalid
from evaluation.readers.zarr_store.stages import ArrayBytes, Bytes, Data, SizedCompressor, Stage


def bound(size: int) -> int:
    """At most how many bytes a compressor may make of ``size`` bytes (worst cases are a few
    bytes per 16-128 KiB block plus headers)."""
    return size + size // 8 + 65536


@dataclass(frozen=True)
class Chunk:
    """What a codec is made for: the chunk's shape, the array's format 3 data type name
    ("" in format 2), whether the codec list is a shard's inner one, how many codecs the
    list holds, and how a nested codec list (a shard's) becomes a pipeline."""

    shape: tuple[int, ...]
    dtype_name: str = ""
    nested: bool = False
    count: int = 1
    parse: "Callable[[object, tuple[int, ...], str, str, bool], Pipeline] | None" = None

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass
class Pipeline:
    """How one chunk (or inner chunk, or shard) is stored: the array -> array stages (format
    3's transposes, composed into ``permutation``: stored = decoded.transpose(permutation)),
    the array -> bytes stage (``Bytes``, or the ``Sharding`` of a sharded array, which
    reads its shards in parts) and the bytes -> bytes stages."""

    shape: tuple[int, ...]
    dtype: np.dtype  # as stored (byte order of the bytes)
    order: Literal["C", "F"] = "C"
    permutation: tuple[int, ...] | None = None
    stages: list[Stage] = field(default_factory=list)  # bytes -> bytes
    array_bytes: ArrayBytes = field(default_factory=Bytes)
    sizes: list[tuple[int, bool]] = field(default_factory=list)  # (size, exact) entering each stage, then stored

    def plan(self) -> None:
        size, exact = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize, True
        self.sizes = [(size, True)]
        for stage in self.stages:
            encoded = stage.encoded_size(size)
            if encoded is None:
                size, exact = bound(size), False
            else:
                size = encoded
            if size > 2 * limits.ZARR_MAX_CHUNK_BYTES:
                raise Invalid(f"its codec {stage.name} makes chunks larger than {limits.ZARR_MAX_CHUNK_BYTES >> 20} MiB")
            self.sizes.append((size, exact))

    @property
    def nbytes(self) -> int:
        return self.sizes[0][0]

    @property
    def stored_limit(self) -> int:
        return self.sizes[-1][0]

    @property
    def in_place(self) -> bool:
        """Whether a chunk decodes straight into its place in a C-ordered array of native byte
        order (``decode_into``): one compressor that states its decoded size, nothing else."""
        return (
            len(self.stages) == 1
            and isinstance(self.stages[0], SizedCompressor)
            and self.order == "C"
            and self.permutation is None
            and self.dtype.isnative
            and self.dtype.kind != "b"
        )

    def zeros_frame(self) -> bytes | None:
        """The bytes this pipeline's codec writes for a chunk of zeros (``zero_chunks``), for
        ``in_place`` pipelines; None when they cannot be made."""
        stage = self.stages[0] if self.in_place else None
        return stage.zeros_frame(self.shape, self.dtype) if isinstance(stage, SizedCompressor) else None

    def decode_into(self, data: Data, into: np.ndarray) -> None:
        """``decode`` into ``into`` (C-contiguous, the chunk's shape, the stored dtype), for an
        ``in_place`` pipeline: no array allocated, nothing copied (a 16 MB chunk in fresh
        memory costs its page faults, and the copy doubles the memory traffic of reading)."""
        stage = self.stages[0]
        assert isinstance(stage, SizedCompressor) and self.in_place
        size, exact = self.sizes[0]
        flat = into.reshape(-1).view(np.uint8)
        got = stage.decode(data, size, exact, flat)
        if got.nbytes != self.nbytes:
            more = "more" if got.nbytes > self.nbytes else "less"
            raise Corrupt(f"it holds {more} data ({got.nbytes} bytes) than its chunk ({self.nbytes} bytes)")
        if not np.shares_memory(got, flat):
            flat[...] = got

    def decode(self, data: Data) -> np.ndarray:
        """The chunk as an array of ``shape`` (stored dtype), or ``Corrupt``."""
        for index in range(len(self.stages) - 1, -1, -1):
            size, exact = self.sizes[index]
            stage = self.stages[index]
            data = stage.decode(data, size, exact)
            got = data.nbytes if isinstance(data, np.ndarray) else len(data)
            if got > size:
                raise Corrupt(f"it decodes to more data than its chunk holds ({size} bytes)")
            if exact and got < size:
                raise Corrupt(f"it decodes to less data ({got} bytes) than its chunk holds ({size} bytes)")
        got = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if got != self.nbytes:
            more = "more" if got > self.nbytes else "less"
            raise Corrupt(f"it holds {more} data ({got} bytes) than its chunk ({self.nbytes} bytes)")
        dtype = np.dtype(np.uint8) if self.dtype.kind == "b" else self.dtype
        flat = np.frombuffer(data, dtype=dtype) if not isinstance(data, np.ndarray) else as_u1(data).view(dtype)
        if self.permutation is None:
            chunk: np.ndarray = flat.reshape(self.shape, order=self.order)
            return chunk
        stored = flat.reshape(tuple(self.shape[p] for p in self.permutation))
        return stored.transpose(np.argsort(self.permutation))
