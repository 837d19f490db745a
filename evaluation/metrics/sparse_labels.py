"""Possibly overlapping instance masks held as sorted flat voxel indices.

Thin, long instances (neurons) fill a tiny share of their volume, and instance stacks (one
channel per instance, channels overlapping) are many times the size of one label image. The
reference evaluators compare full-volume masks per instance, which costs one pass over the
whole stack per instance and several gigabytes. Here every instance is the sorted array of the
flat indices of its voxels; "which instances contain these voxels" is a binary search in one
table sorted by voxel index, so every overlap count costs time in proportion to the voxels
queried, not to the volume. Files are read into this form without ever being dense by
``evaluation.readers.label_stacks``.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


@dataclass
class SparseLabels:
    """Instances 1..``count`` on a grid of ``shape``.

    ``index`` (int64) and ``ids`` list every (voxel, instance) membership, sorted by voxel
    index, then id. A voxel appears once per instance that contains it, so overlapping
    instances share voxels. ``channel`` gives each instance's channel (entry 0 unused)."""

    shape: tuple[int, ...]
    index: np.ndarray
    ids: np.ndarray
    count: int
    channel: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    _voxels: list[np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def from_pairs(
        cls, shape: Iterable[int], index: np.ndarray, ids: np.ndarray, count: int, channel: npt.ArrayLike | None = None
    ) -> "SparseLabels":
        """From unordered (voxel, id) pairs; each pair must occur once."""
        index = np.asarray(index, np.int64)
        ids = np.asarray(ids, np.int64)
        order = np.lexsort((ids, index))
        channel = np.zeros(count + 1, np.int64) if channel is None else np.asarray(channel, np.int64)
        return cls(tuple(int(s) for s in shape), index[order], ids[order], int(count), channel)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def voxels(self, label: int) -> np.ndarray:
        """Sorted flat indices of instance ``label`` (1-based)."""
        if self._voxels is None:
            order = np.argsort(self.ids, kind="stable")  # stable: voxel order kept per id
            bounds = np.searchsorted(self.ids[order], np.arange(1, self.count + 2))
            sorted_index = self.index[order]
            self._voxels = [sorted_index[bounds[i] : bounds[i + 1]] for i in range(self.count)]
        return self._voxels[label - 1]

    def voxel_counts(self) -> np.ndarray:
        """Voxels per instance, entry 0 unused."""
        return np.bincount(self.ids, minlength=self.count + 1)

    def shared_voxels(self) -> np.ndarray:
        """Sorted distinct voxels that belong to two or more instances."""
        if self.index.size < 2:
            return np.zeros(0, np.int64)
        repeated = self.index[1:] == self.index[:-1]
        return np.unique(self.index[1:][repeated])

    def overlaps(self) -> bool:
        return bool(self.index.size > 1 and np.any(self.index[1:] == self.index[:-1]))

    def hits(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``query``, id) for every instance containing a queried voxel."""
        query = np.asarray(query, np.int64)
        low = np.searchsorted(self.index, query, side="left")
        high = np.searchsorted(self.index, query, side="right")
        counts = high - low
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        positions = np.repeat(np.arange(query.size, dtype=np.int64), counts)
        starts = np.repeat(low - (np.cumsum(counts) - counts), counts)
        entries = starts + np.arange(total, dtype=np.int64)
        return positions, self.ids[entries]

    def covered(self, query: np.ndarray) -> np.ndarray:
        """Per queried voxel: does any instance contain it?"""
        query = np.asarray(query, np.int64)
        return np.searchsorted(self.index, query, side="right") > np.searchsorted(self.index, query, side="left")

    def subset(self, labels: Iterable[int]) -> "SparseLabels":
        """The instances ``labels`` (in that order, repeats allowed) relabelled 1..k."""
        parts_index, parts_ids = [], []
        for new, label in enumerate(labels, start=1):
            voxels = self.voxels(int(label))
            parts_index.append(voxels)
            parts_ids.append(np.full(voxels.size, new, np.int64))
        if not parts_index:
            return SparseLabels.from_pairs(self.shape, np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
        return SparseLabels.from_pairs(self.shape, np.concatenate(parts_index), np.concatenate(parts_ids), len(parts_index))

    def without(self, voxels: np.ndarray) -> "SparseLabels":
        """The same instances with the voxels ``voxels`` (sorted) removed everywhere."""
        keep = ~np.isin(self.index, voxels, assume_unique=False)
        return SparseLabels(self.shape, self.index[keep], self.ids[keep], self.count, self.channel)
