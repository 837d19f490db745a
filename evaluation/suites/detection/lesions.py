"""One case: its candidates matched to its lesions, as picai_eval's rows.

``picai_eval/eval.py: evaluate_case`` (1.4.13): lesions are the 26-connected components of the
truth's non-zero voxels; every (lesion, candidate) pair gets an overlap
(``analysis_utils.py: calculate_iou`` / ``calculate_dsc``, with a 1e-8 smoothing term);
overlaps below ``min_overlap`` are zeroed, the others get +1 (so the number of matches comes
first and total overlap breaks ties), and ``scipy.optimize.linear_sum_assignment`` (maximising)
pairs lesions with candidates. The result is one row ``(is_lesion, confidence, overlap)`` per
matched lesion (a true positive), per missed lesion ``(1, 0.0, 0.0)`` and per false-positive
candidate ``(0, confidence, 0.0)``, plus the case's confidence.

The reference builds two full-volume masks per pair; here both label maps are placed in the
box that holds both foregrounds and one ``np.bincount`` of the paired labels gives every
intersection at once. The arithmetic of the overlaps, the assignment and the rows' order are
the reference's (docs/suites/detection.md).
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment  # imported with the suite: forked workers inherit it

from evaluation.suites.detection.candidates import Candidates, Foreground, label26
from evaluation.suites.detection.options import Matching

EPS = 1e-8  # analysis_utils.py: the smoothing of calculate_iou and calculate_dsc


@dataclass(frozen=True)
class Lesions:
    """A truth's lesions: labels on the box of its lesion voxels and their count."""

    box: tuple[slice, ...] | None
    labels: np.ndarray | None
    count: int


def lesion_mask(truth: np.ndarray, lesion_labels: tuple[int, ...] | None) -> np.ndarray:
    """The lesion voxels. picai_eval casts the label to int32 (a float 0.6 is truncated to 0,
    background) and counts every non-zero value as lesion; ``lesion_labels`` selects values,
    as a ``y_true_postprocess_func`` would. Small integer types are used as they are (the
    cast changes none of their values)."""
    small = truth.dtype.kind in "bu" and truth.dtype.itemsize <= 2 or truth.dtype.kind == "i" and truth.dtype.itemsize <= 4
    values = truth if small else truth.astype(np.int32)
    return values != 0 if lesion_labels is None else np.isin(values, lesion_labels)


def lesions_of(mask: np.ndarray) -> Lesions:
    ground = Foreground.of(mask)
    if ground.box is None:
        return Lesions(None, None, 0)
    labels, count = label26(ground.mask)
    return Lesions(ground.box, labels, count)


def overlaps(candidates: Candidates, lesions: Lesions, overlap_func: str) -> tuple[np.ndarray, np.ndarray]:
    """(overlap, intersection) matrices, lesions as rows and candidates as columns, with the
    reference's arithmetic: IoU = (I + eps) / ((P + G - I) + eps), DSC = (2.0 * I + eps) /
    ((P + G) + eps), on voxel counts. Both label crops are placed in the box holding both."""
    low = [min(a.start, b.start) for a, b in zip(candidates.box, lesions.box)]
    high = [max(a.stop, b.stop) for a, b in zip(candidates.box, lesions.box)]
    shape = tuple(h - lo for lo, h in zip(low, high))

    def placed(labels: np.ndarray, box: tuple[slice, ...]) -> np.ndarray:
        out = np.zeros(shape, dtype=np.int64)
        out[tuple(slice(b.start - lo, b.stop - lo) for b, lo in zip(box, low))] = labels
        return out.ravel()

    c, g = placed(candidates.labels, candidates.box), placed(lesions.labels, lesions.box)
    n_c, n_g = candidates.count, lesions.count
    both = (c > 0) & (g > 0)
    inter = np.bincount((g[both] - 1) * n_c + (c[both] - 1), minlength=n_g * n_c).reshape(n_g, n_c)
    c_size = np.bincount(c, minlength=n_c + 1)[1:]
    g_size = np.bincount(g, minlength=n_g + 1)[1:]
    if overlap_func == "IoU":
        return (inter + EPS) / ((c_size[None, :] + g_size[:, None] - inter) + EPS), inter
    return (inter * 2.0 + EPS) / ((c_size[None, :] + g_size[:, None]) + EPS), inter


def rows(candidates: Candidates, lesions: Lesions, matching: Matching) -> list[tuple[int, float, float]]:
    """The case's rows in the reference's order: matched lesions (increasing lesion id),
    missed lesions, then false positives."""
    confidence = candidates.confidences
    if lesions.count == 0:  # a benign case: every candidate is a false positive, in order
        return [(0, c, 0.0) for c in confidence]
    if candidates.count == 0:
        return [(1, 0.0, 0.0)] * lesions.count
    overlap, inter = overlaps(candidates, lesions, matching.overlap_func)
    if matching.disjoint_never_match:  # correction: the smoothing alone never makes a hit
        overlap[inter == 0] = 0
    overlap[overlap < matching.min_overlap] = 0
    overlap[overlap > 0] += 1
    lesion_idx, candidate_idx = linear_sum_assignment(overlap, maximize=True)
    hit = overlap[lesion_idx, candidate_idx] > 0
    lesion_idx, candidate_idx = lesion_idx[hit], candidate_idx[hit]
    found = [(1, confidence[c], float(overlap[r, c] - 1)) for r, c in zip(lesion_idx, candidate_idx)]
    found += [(1, 0.0, 0.0)] * (lesions.count - len(lesion_idx))
    return found + [(0, confidence[c], 0.0) for c in false_positives(overlap, candidate_idx, matching)]


def false_positives(overlap: np.ndarray, assigned: np.ndarray, matching: Matching):
    """The unassigned candidates that count as false positives: by default those that reach
    ``min_overlap`` with no lesion at all; without
    ``allow_unmatched_candidates_with_minimal_overlap``, every unassigned one. In the order of
    the reference's Python set difference of candidate indices (CPython's set order)."""
    every = set(range(overlap.shape[1]))
    if matching.allow_unmatched_candidates_with_minimal_overlap:
        return every - {int(c) for c in np.flatnonzero((overlap > 0).any(axis=0))}
    return every - {int(c) for c in assigned}


def case_confidence(candidates: Candidates, function: str) -> float:
    """picai_eval's ``case_confidence_func``: 'max' is the map's maximum (a float32 value);
    'bayesian' is 1 - prod(1 - c) over the candidates' confidences (float64; 0 without any)."""
    if function == "max":
        return candidates.maximum
    return float(1 - np.prod([(1 - c) for c in candidates.confidences]))


@dataclass(frozen=True)
class CaseResult:
    rows: list[tuple[int, float, float]]
    case_pred: float
    candidates: int

    def to_dict(self) -> dict:
        return {"rows": [list(r) for r in self.rows], "case_pred": self.case_pred, "candidates": self.candidates}


def evaluate(candidates: Candidates, truth: np.ndarray, matching: Matching) -> CaseResult:
    """One case: a detection map's candidates and the truth labels."""
    lesions = lesions_of(lesion_mask(truth, matching.lesion_labels))
    found = rows(candidates, lesions, matching)
    return CaseResult(found, case_confidence(candidates, matching.case_confidence_func), candidates.count)


def missing(truth: np.ndarray, matching: Matching) -> CaseResult:
    """A case without a prediction (``missing_cases: empty``): an empty detection map, every
    lesion missed, case confidence 0."""
    lesions = lesions_of(lesion_mask(truth, matching.lesion_labels))
    return CaseResult([(1, 0.0, 0.0)] * lesions.count, 0.0, 0)
