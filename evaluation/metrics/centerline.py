"""Skeleton-based instance scores: clRecall, clPrecision, clDice, greedy matching, coverage and
many-to-many false split / false merge counting.

Definitions follow the FISBe evaluation, Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d
(``localize.get_centerline_overlap``, ``match.assign_labels``,
``match.greedy_many_to_many_matching``, ``compute.get_gt_coverage``, ``util.LazyHeap``), with
every dtype kept: ratios are computed in float64 and stored in float32 matrices, clDice and
coverage sums are float32 arithmetic, and threshold comparisons against float32 values happen
in float32. The masks are :class:`SparseLabels` and skeletons are sorted flat voxel indices, so
no step touches the full volume.
"""

import heapq
from dataclasses import dataclass, field
from itertools import count

import numpy as np

from evaluation.metrics.sparse_labels import SparseLabels


@dataclass
class SkeletonHits:
    """One skeleton and, per skeleton voxel, the instances of each side containing it."""

    size: int
    pred_pos: np.ndarray
    pred_ids: np.ndarray
    gt_pos: np.ndarray | None = None
    gt_ids: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    def in_pred(self, label: int) -> np.ndarray:
        return self._member("p", label, self.pred_pos, self.pred_ids)

    def in_gt(self, label: int) -> np.ndarray:
        return self._member("g", label, self.gt_pos, self.gt_ids)

    def _member(self, side, label, positions, ids) -> np.ndarray:
        key = (side, label)
        if key not in self._cache:
            mask = np.zeros(self.size, bool)
            mask[positions[ids == label]] = True
            self._cache[key] = mask
        return self._cache[key]


def overlap_matrix(skeletons: list[np.ndarray], other: SparseLabels) -> np.ndarray:
    """(len(skeletons)+1, other.count+1) float32: row s = |skel_s ∩ other_c| / |skel_s|, column
    0 = share of skeleton voxels outside every ``other`` instance; row 0 and rows of empty
    skeletons stay 0 (``get_centerline_overlap``)."""
    matrix = np.zeros((len(skeletons) + 1, other.count + 1), dtype=np.float32)
    for row, skeleton in enumerate(skeletons, start=1):
        if skeleton.size == 0:
            continue
        positions, ids = other.hits(skeleton)
        counts = np.bincount(ids, minlength=other.count + 1)
        counts[0] = skeleton.size - np.unique(positions).size
        present = np.flatnonzero(counts)
        matrix[row, present] = counts[present] / float(skeleton.size)
    return matrix


def cldice(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """Elementwise float32 ``nan_to_num(2·Pr·R / (Pr + R))``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(2 * precision * recall / (precision + recall))


def greedy_match(loc: np.ndarray, threshold: float) -> tuple[int, np.ndarray, np.ndarray]:
    """One-to-one greedy matching of the foreground block of ``loc`` at ``threshold``
    (strictly greater, compared in ``loc``'s dtype): candidates by descending value, then
    GT row, then prediction column. Returns (tp, gt ids, pred ids), ids 1-based, in
    acceptance order (``assign_labels``, strategy 'greedy')."""
    fg = loc[1:, 1:]
    gt_ind, pred_ind = np.nonzero(fg > threshold)
    values = fg[gt_ind, pred_ind]
    order = np.lexsort((pred_ind, gt_ind, -values))
    taken_gt, taken_pred, gts, preds = set(), set(), [], []
    for g, p in zip(gt_ind[order].tolist(), pred_ind[order].tolist()):
        if g not in taken_gt and p not in taken_pred:
            taken_gt.add(g)
            taken_pred.add(p)
            gts.append(g)
            preds.append(p)
    return len(gts), np.array(gts, np.int64) + 1, np.array(preds, np.int64) + 1


def gt_coverage(precision: np.ndarray, recall: np.ndarray, union: bool, hits: list[SkeletonHits]) -> list:
    """Per-GT skeleton coverage (``get_gt_coverage``). Each prediction is assigned to the row
    of its largest clPrecision (first maximum; row 0 = background). With ``union`` (GT and
    prediction both overlap) a GT's coverage is the share of its skeleton inside the union of
    its assigned predictions (float64); otherwise the float32 sum of their clRecall values."""
    assigned = np.argmax(precision, axis=0)
    n_gt, n_pred = precision.shape[0] - 1, precision.shape[1] - 1
    covered = []
    if union:
        targets = set(np.unique(assigned[assigned > 0]).tolist())
        for g in range(1, n_gt + 1):
            if g not in targets:
                covered.append(0.0)
                continue
            preds = np.arange(n_pred + 1)[assigned == g]
            h = hits[g - 1]
            inside = np.unique(h.pred_pos[np.isin(h.pred_ids, preds)]).size
            covered.append(np.float64(inside) / np.float64(h.size))
    else:
        for g in range(1, recall.shape[0]):
            covered.append(np.sum(recall[g, assigned == g]))
    return covered


# --------------------------------------------------------------------------------------------
# Many-to-many matching (false splits and false merges)


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
