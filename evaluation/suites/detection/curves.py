"""The ranking curves of picai_eval 1.4.13's ``Metrics`` (``picai_eval/metrics.py``), without
scikit-learn: the lesion-level precision-recall curve and AP, the case-level ROC curve and its
area, and the FROC's thresholds and counts.

picai_eval takes the first two from scikit-learn (``precision_recall_curve``, ``roc_curve``,
``auc``; 1.9.1 was installed with it): zero-weight entries dropped, a stable descending sort of
the scores, one point per distinct score with float64 running sums of the weights. Those are
reproduced here operation for operation, so the values are equal, not merely close. An
undefined value is NaN where the reference raises (no entries at all, every weight zero); a
caller writes it as null.
"""

import numpy as np

MAX_THRESHOLDS = 10_000  # Metrics.calculate_counts thins longer threshold lists


def ranked(y_true, y_score, weights) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(cumulative weighted false positives, true positives, score) at each distinct score,
    highest first, after dropping zero-weight entries; None when nothing is left (the
    reference raises there)."""
    truth = np.asarray(y_true) == 1
    score = np.asarray(y_score, dtype=np.float64)
    weight = np.asarray(weights, dtype=np.float64)
    keep = weight != 0
    truth, score, weight = truth[keep], score[keep], weight[keep]
    if truth.size == 0:
        return None
    order = np.argsort(-score, kind="stable")  # descending, ties in input order
    truth, score, weight = truth[order].astype(np.float64), score[order], weight[order]
    last = np.r_[np.flatnonzero(np.diff(score)), truth.size - 1]
    tps = np.cumsum(truth * weight, dtype=np.float64)[last]
    fps = np.cumsum((1 - truth) * weight, dtype=np.float64)[last]
    return fps, tps, score[last]


def precision_recall(y_true, y_score, weights) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """(precision, recall, thresholds, AP) of ``Metrics.calculate_precision_recall``:
    ``precision_recall_curve`` (ascending thresholds, a final precision 1 and recall 0;
    precision 0 where no entry is predicted; recall 1 everywhere without positive weight),
    precision set to 0 at the threshold 0 (the missed lesions' score), and AP = -sum(diff(recall)
    * precision[:-1]), the non-interpolated step integral. None without entries."""
    points = ranked(y_true, y_score, weights)
    if points is None:
        return None
    fps, tps, thresholds = points
    predicted = tps + fps
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted != 0, np.divide(tps, predicted), 0.0)
    recall = np.ones_like(tps) if tps[-1] == 0 else tps / tps[-1]
    precision = np.r_[precision[::-1], 1.0]
    recall = np.r_[recall[::-1], 0.0]
    thresholds = thresholds[::-1]
    precision[:-1][thresholds == 0] = 0
    return precision, recall, thresholds, float(-np.sum(np.diff(recall) * precision[:-1]))


def roc(y_true, y_score, weights) -> tuple[np.ndarray, np.ndarray, float]:
    """(FPR, TPR, AUROC) of ``Metrics.calculate_ROC``: ``roc_curve`` with its collinear points
    dropped and (0, 0) prepended, each rate NaN when its total is not positive (one class
    only), and the trapezoid area (NaN then, as the reference's)."""
    points = ranked(y_true, y_score, weights)
    if points is None:
        return np.array([np.nan]), np.array([np.nan]), float("nan")
    fps, tps, _ = points
    if fps.size > 2:
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.r_[0.0, fps], np.r_[0.0, tps]
    fpr = np.full(fps.shape, np.nan) if fps[-1] <= 0 else fps / fps[-1]
    tpr = np.full(tps.shape, np.nan) if tps[-1] <= 0 else tps / tps[-1]
    return fpr, tpr, area(fpr, tpr)


def area(x: np.ndarray, y: np.ndarray) -> float:
    """``sklearn.metrics.auc``: the trapezoid rule along monotonic x (NaN propagates)."""
    if x.size < 2:
        return float("nan")
    dx = np.diff(x)
    direction = -1 if np.any(dx < 0) and np.all(dx <= 0) else 1
    return float(direction * np.trapezoid(y, x))


def froc_thresholds(y_score) -> np.ndarray:
    """``Metrics.calculate_counts``' thresholds: the distinct confidences, highest first. More
    than 10,000 are thinned to those above 0.8, the lowest 20 and the indices of
    ``np.arange(1, n, n / 10000, dtype=int32)``, an integer range whose step is truncated: for
    10,000 < n < 20,000 that keeps the top ~10,000, not an even spread (reproduced)."""
    thresholds = np.unique(np.asarray(y_score, dtype=np.float64))[::-1].copy()
    n = thresholds.size
    if n > MAX_THRESHOLDS:
        picks = np.arange(1, n, n / MAX_THRESHOLDS, dtype=np.int32)
        keep = thresholds > 0.8
        keep[picks] = True
        keep[-20:] = True
        thresholds = thresholds[keep]
    return thresholds


def froc_counts(y_true, y_score, thresholds: np.ndarray, last_point: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) at each threshold: rows with that confidence or more, unweighted, as float32.
    picai_eval then overwrites the last point with (TP[-2], inf), and with fewer than two
    thresholds reports TP = [0, 0], FP = [0, inf]; ``last_point`` (the correction
    froc_last_point) keeps the counts as they are."""
    truth = np.asarray(y_true).astype(np.int64)
    score = np.asarray(y_score, dtype=np.float64)
    order = np.argsort(score, kind="stable")
    top_truth = np.r_[0, np.cumsum(truth[order][::-1])]  # positives among the k highest scores
    above = score.size - np.searchsorted(score[order], thresholds, side="left")
    tp = top_truth[above]
    counts_tp, counts_fp = tp.astype(np.float32), (above - tp).astype(np.float32)
    if last_point:
        return counts_tp, counts_fp
    if counts_tp.size >= 2:
        counts_tp[-1], counts_fp[-1] = counts_tp[-2], np.inf
        return counts_tp, counts_fp
    return np.array([0, 0]), np.array([0, np.inf])


def tpr_at_fpr(tpr: np.ndarray, fpr: np.ndarray, fp: float) -> float:
    """``Metrics.lesion_TPR_at_FPR``: 0 when the smallest false-positive rate already exceeds
    ``fp``, else the sensitivity at the last point whose rate is at most ``fp`` (no
    interpolation; compared in the rates' type, float32, as NumPy compares with a Python
    number)."""
    if np.min(fpr) > fp:
        return 0.0
    below = tpr[fpr <= fp]
    return float(below[-1]) if below.size else float("nan")  # no case scored: rates undefined
