"""The instance-label pipeline both reference versions share: connected components, matching
and per-instance distances (``utils/eval_utils/instance_matching.py``, ``distance.py`` and the
first steps of ``scoring.py`` ``score_instance``, unchanged between 0f50f70 and 6b9ad68).

What each version makes of the result (id accuracy and means for v2, counts for head) is in
``v2.py`` and ``head.py``.
"""

from dataclasses import dataclass
from functools import cached_property

import cc3d
import numpy as np

from evaluation.metrics.hausdorff import capped_hausdorff
from evaluation.metrics.matching import MatchingFailed, min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import Contingency, contingency
from evaluation.suites.cellmap.options import Limits

TOO_MANY = "skipped_too_many_instances"


def max_distance(voxel_size, shape) -> float:
    """The Hausdorff cap: half the smallest physical extent of the crop (``distance.py``
    ``compute_max_distance``)."""
    return float(min((float(v) * int(s)) / 2 for v, s in zip(voxel_size, shape)))


def normalize_distances(distances, voxel_size) -> np.ndarray:
    """``1.01 ** (-d / |vs|)`` (``distance.py`` ``normalize_distance``); an infinite distance scores 0."""
    d = np.asarray(distances, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(np.isinf(d), 0.0, 1.01 ** (-d / np.linalg.norm(np.asarray(voxel_size, dtype=np.float64))))


class Pathological(Exception):
    """The crop cannot be matched; carries the reference's status string (the exceptions of
    ``utils/eval_utils/exceptions.py`` that ``scoring.py`` ``score_instance`` turns into
    ``_create_pathological_scores``)."""


def match_instances(truth: np.ndarray, components: np.ndarray, n_pred: int, table: Contingency, limits: Limits) -> dict[int, int]:
    """Prediction component -> truth id (``instance_matching.py`` ``match_instances``). ``table``
    is the truth-foreground contingency of (truth, components). Uses maximum ids, not counts,
    as the reference does."""
    n_gt = int(truth.max()) if truth.size else 0
    if n_gt == 0 and n_pred == 0:
        return {0: 0}
    if n_gt == 0 or n_pred == 0:
        return {}
    if n_pred / n_gt > limits.ratio_cutoff(n_gt):
        raise Pathological(TOO_MANY)
    overlapping = table.b > 0
    if int(np.count_nonzero(overlapping)) > limits.max_overlap_edges:
        raise Pathological(TOO_MANY)
    _, gt_index = np.unique(table.a, return_inverse=True)
    gt_size = np.bincount(gt_index, weights=table.count)[gt_index[overlapping]]
    pred_size = np.bincount(components.ravel(), minlength=n_pred + 1)[table.b[overlapping].astype(np.intp)]
    iou32 = pair_iou32(table.count[overlapping].astype(np.float64), gt_size, pred_size.astype(np.float64))
    keep = iou32 > 0
    if not keep.any():
        return {}
    try:
        return min_cost_flow_matching(
            n_gt, n_pred, table.a[overlapping][keep], table.b[overlapping][keep], iou32[keep], limits.mcmf_cost_scale
        )
    except MatchingFailed:
        raise Pathological("matching_failed") from None


def relabel_table(mapping: dict[int, int], n_pred: int) -> np.ndarray:
    """Component id -> the id it takes after matching (``fastremap.remap`` with
    ``preserve_missing_labels`` in ``scoring.py`` ``score_instance``): matched components take
    their truth id, unmatched ones keep their own id, which can collide with a truth id
    (reference quirk, reproduced)."""
    table = np.arange(n_pred + 1, dtype=np.int64)
    table[np.fromiter(mapping.keys(), dtype=np.int64)] = np.fromiter(mapping.values(), dtype=np.int64)
    return table


@dataclass(frozen=True)
class Instances:
    """One instance label's prediction against its truth: the prediction's connected
    components (26-connected, numbered in raster order: ``cc3d.connected_components`` with the
    reference's defaults), their truth-foreground contingency and the distance cap."""

    truth: np.ndarray
    components: np.ndarray
    n_pred: int
    table: Contingency
    voxel_size: tuple
    cap: float

    @classmethod
    def of(cls, pred: np.ndarray, truth: np.ndarray, voxel_size, truth_fg: np.ndarray | None = None) -> "Instances":
        components, n_pred = cc3d.connected_components(pred, return_N=True)
        table = contingency(truth, components, where=truth > 0 if truth_fg is None else truth_fg)
        return cls(truth, components, int(n_pred), table, tuple(voxel_size), max_distance(voxel_size, truth.shape))

    @cached_property
    def truth_ids(self) -> np.ndarray:
        """The truth's non-zero ids, ascending."""
        return np.unique(self.table.a)

    def match(self, limits: Limits) -> dict[int, int]:
        """``match_instances``; raises ``Pathological``."""
        return match_instances(self.truth, self.components, self.n_pred, self.table, limits)

    def distances(self, mapping: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """(float32 ``d_g`` of every truth id, after relabelling, then the cap once per unmatched
        component; the relabelling table) — ``scoring.py`` ``_compute_hausdorff_scores`` with
        ``distance.py`` ``optimized_hausdorff_distances``."""
        matched = set(mapping) - {0}
        relabelled = relabel_table({0: 0, **mapping}, self.n_pred) if matched else np.arange(self.n_pred + 1)
        per_gt = capped_hausdorff(self.truth, self.components, relabelled, self.truth_ids, self.voxel_size, self.cap)
        unmatched = np.full(self.n_pred - len(matched), self.cap, dtype=np.float32)
        return np.concatenate([per_gt, unmatched]), relabelled
