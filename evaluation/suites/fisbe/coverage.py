"""Skeleton coverage of the ground-truth instances (the FlyLight preset's C).

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``compute.get_gt_coverage``:
each prediction covers the one GT instance it lies mostly on, and a GT instance's coverage is
either the share of its skeleton inside the union of its predictions (when both sides have
overlapping instances) or the float32 sum of their clRecall values. :class:`SkeletonHits`
holds, per GT skeleton, which instances contain each of its voxels, for that union and for
the many-to-many matching.
"""

from dataclasses import dataclass, field

import numpy as np


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
