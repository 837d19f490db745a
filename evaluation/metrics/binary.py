"""Foreground-overlap scores from confusion counts.

The formulas are written the way the references evaluate them, because the last bits matter
for parity: Dice as ``1 - (fp + fn) / (2tp + fp + fn)`` is scipy's ``1 - dice`` (not
``2tp / (2tp + fp + fn)``, which rounds differently), IoU as scikit-learn's ``jaccard_score``.
"""

import math

from evaluation.metrics.overlap import BinaryCounts


def iou(c: BinaryCounts, when_empty: float = 1.0) -> float:
    """tp / (tp + fp + fn); ``when_empty`` if both masks are empty (sklearn's zero_division)."""
    denominator = c.tp + c.fp + c.fn
    return c.tp / denominator if denominator else when_empty


def dice_as_scipy(c: BinaryCounts) -> float:
    """``1 - scipy.spatial.distance.dice``: NaN when both masks are empty."""
    denominator = 2 * c.tp + c.fp + c.fn
    return 1.0 - (c.fp + c.fn) / denominator if denominator else math.nan


def accuracy(c: BinaryCounts) -> float:
    """Fraction of voxels on which the two masks agree, background included."""
    return (c.tp + c.tn) / c.total
