"""Instances of one (case, class), their overlaps, and the matching of predicted to reference
instances under each library's rule.

One contingency pass gives every overlapping (reference, prediction) pair with its
intersection and both sizes; every matching works on that table. The libraries differ in:

* the threshold test: panoptica ``IoU >= t`` (``panoptica/metrics/metrics.py:
  _Metric.score_beats_threshold``), MetricsReloaded and MONAI ``IoU > t``;
* the order of a greedy matching: panoptica highest IoU first, ties in the order of
  (prediction, reference) ids (``panoptica/_functionals.py:
  _calc_matching_metric_of_overlapping_labels``, ``panoptica/instance_matcher.py:
  NaiveThresholdMatching``); MetricsReloaded sorts ascending and keeps the first row per
  prediction, then per reference: the lowest IoU wins
  (``MetricsReloaded/utility/assignment_localization.py:
  AssignmentMapping.resolve_ambiguities_matching``);
* optimal assignment: panoptica maximises the total IoU of the pairs above the threshold
  (``MaxBipartiteMatching``), MONAI maximises it over all pairs, then drops those below
  (``monai/metrics/panoptic_quality.py: _get_paired_iou``);
* several predictions per reference: panoptica's ``allow_many_to_one`` and
  ``MaximizeMergeMatching`` (merge a prediction into a matched reference when the IoU of the
  union improves).
"""

from dataclasses import dataclass, field

import numpy as np

from evaluation.metrics import instance_pairs

# A dense cost matrix (what the libraries build) up to this many cells; beyond it, only the
# rows and columns that overlap anything take part (the same optimum).
DENSE_CELLS = 1 << 22


def components(mask: np.ndarray, full: bool) -> np.ndarray:
    """Connected components, numbered in raster order of their first voxel (as
    ``scipy.ndimage.label`` and ``cc3d`` number them). panoptica
    (``panoptica/_functionals.py: _connected_components``) uses face connectivity in 2-D
    (scipy's default) and full connectivity in 3-D (cc3d's default 26). Given labels rather
    than a mask, each label's components are its own (cc3d's multi-label labelling)."""
    import cc3d

    connectivity = {(2, False): 4, (2, True): 8, (3, False): 6, (3, True): 26}[(mask.ndim, full)]
    data = mask.view(np.uint8) if mask.dtype == bool else mask
    return cc3d.connected_components(np.ascontiguousarray(data), connectivity=connectivity)


@dataclass(frozen=True)
class Overlaps:
    """Instance ids (ascending) with their sizes, and the overlapping pairs as indices into
    them, in ascending (prediction, reference) order."""

    ref_ids: np.ndarray
    pred_ids: np.ndarray
    ref_size: np.ndarray
    pred_size: np.ndarray
    ref: np.ndarray  # pair -> index into ref_ids
    pred: np.ndarray  # pair -> index into pred_ids
    inter: np.ndarray

    @classmethod
    def of(cls, ref: np.ndarray, pred: np.ndarray) -> "Overlaps":
        ref_ids, ref_size, pred_ids, pred_size, pair_ref, pair_pred, inter = instance_pairs.overlaps(ref, pred)
        return cls(ref_ids, pred_ids, ref_size, pred_size, pair_ref, pair_pred, inter)

    def iou(self) -> np.ndarray:
        """float64 ``intersection / (ref + pred - intersection)``."""
        inter = self.inter.astype(np.float64)
        return inter / (self.ref_size[self.ref].astype(np.float64) + self.pred_size[self.pred] - inter)

    def dice(self) -> np.ndarray:
        """float64 ``2 * intersection / (ref + pred)``, as panoptica's Dice matching metric
        (``panoptica/_functionals.py: _calc_count_matching_metric_of_overlapping_labels``)."""
        inter = self.inter.astype(np.float64)
        return 2.0 * inter / (self.ref_size[self.ref].astype(np.float64) + self.pred_size[self.pred])

    def iou32(self) -> np.ndarray:
        """MONAI's float32 IoU (``_get_pairwise_iou``: int tensors divided)."""
        union = self.ref_size[self.ref] + self.pred_size[self.pred] - self.inter
        return self.inter.astype(np.float32) / union.astype(np.float32)


@dataclass
class Matching:
    """Reference index -> prediction indices matched to it (several after a merge); ``order``
    keeps the library's order of the matched pairs where it has one."""

    pairs: dict[int, list[int]] = field(default_factory=dict)
    order: list[int] | None = None
    fp_rows: int | None = None  # MetricsReloaded counts its false-positive rows, some twice

    def add(self, ref: int, pred: int) -> None:
        self.pairs.setdefault(ref, []).append(pred)

    @property
    def matched_preds(self) -> set[int]:
        return {p for preds in self.pairs.values() for p in preds}


def passes(score, threshold: float, strict: bool) -> bool:
    return score > threshold if strict else score >= threshold


def greedy(ov: Overlaps, scores: np.ndarray, threshold: float, strict: bool, many_to_one: bool = False) -> Matching:
    """panoptica ``NaiveThresholdMatching``: pairs by descending score (stable), a prediction
    used once, a reference once unless ``many_to_one``."""
    matching, used = Matching(), set()
    for k in np.argsort(-scores, kind="stable"):
        ref, pred = int(ov.ref[k]), int(ov.pred[k])
        if pred in used or (ref in matching.pairs and not many_to_one):
            continue
        if passes(scores[k], threshold, strict):
            matching.add(ref, pred)
            used.add(pred)
    return matching


def maximize_merge(ov: Overlaps, scores: np.ndarray, threshold: float, strict: bool, dice: bool = False) -> Matching:
    """panoptica ``MaximizeMergeMatching``: greedy by descending score; a further prediction
    overlapping an already matched reference is merged into it when the score (IoU, or Dice
    with ``dice``) of the union beats the reference's current score, whatever its own."""
    matching, used, best = Matching(), set(), {}
    inter_of, size_of = {}, {}  # per matched reference: the merged predictions' intersection and size so far
    for k in np.argsort(-scores, kind="stable"):
        ref, pred = int(ov.ref[k]), int(ov.pred[k])
        if pred in used:
            continue
        if ref in matching.pairs:
            # a prediction meets a reference in one pair (k): the union's intersection and size
            # grow by that pair's, so each candidate costs O(1), not a pass over all pairs
            inter = inter_of[ref] + int(ov.inter[k])
            size = size_of[ref] + int(ov.pred_size[pred])
            total = int(ov.ref_size[ref]) + size
            score = 2 * inter / total if dice else inter / (total - inter)
            if score > best[ref]:
                matching.add(ref, pred)
                used.add(pred)
                best[ref], inter_of[ref], size_of[ref] = score, inter, size
        elif passes(scores[k], threshold, strict):
            matching.add(ref, pred)
            used.add(pred)
            best[ref], inter_of[ref], size_of[ref] = float(scores[k]), int(ov.inter[k]), int(ov.pred_size[pred])
    return matching


def optimal(ov: Overlaps, scores: np.ndarray, threshold: float, strict: bool) -> Matching:
    """panoptica ``MaxBipartiteMatching``: ``linear_sum_assignment`` on (reference x
    prediction) costs 1 - IoU for the pairs above the threshold and 1 + 1e-6 elsewhere; the
    assignments cheaper than 1 are the matches."""
    keep = np.array([passes(s, threshold, strict) for s in scores], bool) if scores.size else np.zeros(0, bool)
    rows, cols = _dense_axes(ov, keep)
    cost = np.full((rows.size, cols.size), 1.0 + 1e-6)
    cost[np.searchsorted(rows, ov.ref[keep]), np.searchsorted(cols, ov.pred[keep])] = 1.0 - scores[keep]
    matching = Matching()
    if cost.size:
        from scipy.optimize import linear_sum_assignment  # on first use: a heavy import

        for i, j in zip(*linear_sum_assignment(cost)):
            if cost[i, j] < 1.0:
                matching.add(int(rows[i]), int(cols[j]))
    return matching


def optimal_all_pairs(ov: Overlaps, scores: np.ndarray, threshold: float, strict: bool) -> Matching:
    """MONAI (match threshold below 0.5): ``linear_sum_assignment`` maximising the total IoU
    over all pairs, then the assigned pairs above the threshold."""
    rows, cols = _dense_axes(ov, np.ones(scores.size, bool))
    value = np.zeros((rows.size, cols.size), scores.dtype)
    inside = np.isin(ov.ref, rows) & np.isin(ov.pred, cols)
    value[np.searchsorted(rows, ov.ref[inside]), np.searchsorted(cols, ov.pred[inside])] = scores[inside]
    matching = Matching()
    if value.size:
        from scipy.optimize import linear_sum_assignment

        for i, j in zip(*linear_sum_assignment(-value)):
            if passes(value[i, j], threshold, strict):
                matching.add(int(rows[i]), int(cols[j]))
    return matching


def _dense_axes(ov: Overlaps, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every reference and prediction index when the matrix is small (the libraries' own
    matrix, hence their tie-breaking), else those of the kept pairs."""
    if ov.ref_ids.size * ov.pred_ids.size <= DENSE_CELLS:
        return np.arange(ov.ref_ids.size), np.arange(ov.pred_ids.size)
    return np.unique(ov.ref[keep]), np.unique(ov.pred[keep])


def greedy_lowest_first(ov: Overlaps, scores: np.ndarray, threshold: float, strict: bool) -> Matching:
    """MetricsReloaded ``AssignmentMapping`` with ``greedy_matching``: candidates are the pairs
    above the threshold, listed by prediction then reference; if any prediction or reference
    has two candidates, the rows are sorted ascending by IoU (numpy's default quicksort, as
    pandas ``sort_values``), the first row per prediction kept, sorted again and the first
    row per reference kept. Each candidate row of a prediction left out counts as one
    false-positive row, so a prediction with two candidates and no match counts twice."""
    keep = np.array([passes(s, threshold, strict) for s in scores], bool) if scores.size else np.zeros(0, bool)
    rows = sorted(zip(ov.pred[keep].tolist(), ov.ref[keep].tolist(), scores[keep].tolist()))
    no_candidate = ov.pred_ids.size - len({p for p, _, _ in rows})
    matching = Matching(order=[])
    preds, refs = [p for p, _, _ in rows], [r for _, r, _ in rows]
    if len(set(preds)) == len(preds) and len(set(refs)) == len(refs):  # noqa: SIM108
        chosen = rows
    else:
        chosen = _first_per(_first_per(rows, 0), 1)
    for pred, ref, _ in chosen:
        matching.add(ref, pred)
        matching.order.append(ref)
    kept = {p for p, _, _ in chosen}
    matching.fp_rows = no_candidate + sum(p not in kept for p in preds)
    return matching


def _first_per(rows: list, column: int) -> list:
    order = np.argsort(np.array([r[2] for r in rows], np.float64), kind="quicksort") if rows else []
    seen, out = set(), []
    for i in order:
        if rows[i][column] not in seen:
            seen.add(rows[i][column])
            out.append(rows[i])
    return out
