"""False splits and false merges: the FlyLight preset's many-to-many matching on clRecall.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``match.get_m2m_matches``
and ``match.greedy_many_to_many_matching`` (pairs consumed greedily from ``util.LazyHeap``
when instances overlap, plain thresholding otherwise) and ``compute.compute_m2m_stats``. The
heap's invalidation and revival rules decide the counts when instances share voxels, so they
are reproduced exactly; priorities keep the reference's float32 and float64 values.
"""

import heapq
from itertools import count

import numpy as np

from evaluation.suites.fisbe.coverage import SkeletonHits


class LazyHeap:
    """Min-heap of keyed entries with lazy invalidation (``util.LazyHeap``): a key's entries
    are live only while their version is the key's current one; popping a live entry
    forgets the key, invalidating a forgotten key does nothing, and pushing an invalidated
    key revives it. Equal priorities pop in push order."""

    def __init__(self):
        self._heap, self._version, self._counter = [], {}, count()

    def push(self, key, priority: float) -> None:
        version = self._version.get(key, 0) + 1
        self._version[key] = version
        heapq.heappush(self._heap, (priority, next(self._counter), version, key))

    def invalidate(self, key) -> None:
        if key in self._version:
            self._version[key] = -1

    def pop_live(self):
        """The key of the smallest live entry, or None when none is left."""
        while self._heap:
            _, _, version, key = heapq.heappop(self._heap)
            if self._version.get(key) == version:
                del self._version[key]
                return key
        return None


def many_to_many(recall: np.ndarray, threshold: float, overlaps: bool, hits: list[SkeletonHits]) -> dict[int, list[int]]:
    """GT index -> prediction indices (0-based) accepted for it (``get_m2m_matches``).

    Without overlapping instances every pair with clRecall > threshold is a match. With
    overlaps, pairs are consumed greedily by descending clRecall: after (g, p) is accepted,
    g's skeleton loses p's voxels and p loses g's voxels, and the pairs sharing g or p are
    re-scored (against the full mask of the other side, as the reference does) and re-queued
    or dropped."""
    fg = recall[1:, 1:]
    rows, cols = np.nonzero(fg > threshold)
    if not overlaps:
        matches: dict[int, list[int]] = {}
        for g, p in zip(rows.tolist(), cols.tolist()):
            matches.setdefault(g, []).append(p)
        return matches
    if rows.size == 0:
        return {}
    heap = LazyHeap()
    for g, p in zip(rows.tolist(), cols.tolist()):
        heap.push((g, p), float(-fg[g, p]))  # float32 priority, exact
    candidates_of_gt = {g: np.flatnonzero(fg[g] > threshold).tolist() for g in set(rows.tolist())}
    candidates_of_pred = {p: np.flatnonzero(fg[:, p] > threshold).tolist() for p in set(cols.tolist())}
    available = {g: np.ones(hits[g].size, bool) for g in candidates_of_gt}
    consumed_gts: dict[int, list[int]] = {p: [] for p in candidates_of_pred}
    matches = {}
    while (key := heap.pop_live()) is not None:
        g, p = key
        matches.setdefault(g, []).append(p)
        available[g] &= ~hits[g].in_pred(p + 1)
        consumed_gts[p].append(g)
        denominator = float(hits[g].size) or 1.0
        for other_p in candidates_of_gt[g]:
            value = np.count_nonzero(available[g] & hits[g].in_pred(other_p + 1)) / denominator
            _requeue(heap, (g, other_p), value, threshold)
        for other_g in candidates_of_pred[p]:
            h = hits[other_g]
            remaining = h.in_pred(p + 1).copy()
            for gone in consumed_gts[p]:
                remaining &= ~h.in_gt(gone + 1)
            value = np.count_nonzero(remaining) / (float(h.size) or 1.0)
            _requeue(heap, (other_g, p), value, threshold)
    return matches


def _requeue(heap: LazyHeap, key, value: float, threshold: float) -> None:
    if value > threshold:
        heap.push(key, -value)
    else:
        heap.invalidate(key)


def split_merge_counts(matches: dict[int, list[int]], n_pred: int) -> tuple[int, int]:
    """(false merges, false splits) of a many-to-many matching (``compute_m2m_stats``)."""
    splits = sum(max(0, len(v) - 1) for v in matches.values())
    per_pred = np.zeros(max(n_pred, 0), np.int64)
    for v in matches.values():
        for p in v:
            per_pred[p] += 1
    merges = int(np.maximum(per_pred - 1, 0).sum()) if n_pred > 0 else 0
    return merges, splits
