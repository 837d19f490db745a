"""Centerline (skeleton) overlap scores: clRecall, clPrecision, clDice and greedy one-to-one
matching on them.

clDice (Shit et al., 2021) compares thin structures by their skeletons: clRecall is the share
of a truth skeleton inside a predicted mask, clPrecision the share of a predicted skeleton
inside a truth mask, clDice their harmonic mean. The definitions and dtypes follow the FISBe
evaluation, Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d
(``localize.get_centerline_overlap``, ``match.assign_labels``): ratios are computed in float64
and stored in float32 matrices, clDice is float32 arithmetic, and threshold comparisons
against float32 values happen in float32. The masks are :class:`SparseLabels` and skeletons
are sorted flat voxel indices, so no step touches the full volume.
"""

import numpy as np

from evaluation.metrics.sparse_labels import SparseLabels


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
        score: np.ndarray = np.nan_to_num(2 * precision * recall / (precision + recall))
        return score


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
