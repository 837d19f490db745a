"""The harmonic mean of scores with numpy's IEEE division, without its warnings.

tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.metrics`` ranks a phantom by
``scores.size / np.sum(1 / scores)``: a score of 0 has an infinite reciprocal, so the mean is
0; an undefined (NaN) score makes the sum, and the mean, NaN. Both TomoChallenge tracks (the
foam phantoms and the fuel cells' four region Dice) rank by this mean.
"""

import math
from collections.abc import Iterable

import numpy as np


def harmonic_mean(scores: Iterable[float], defined_only: bool = False) -> float:
    """``len / sum(1 / s)`` as the reference computes it: a zero score gives 0, an undefined
    (NaN) one gives NaN. ``defined_only`` (a phase option, not the reference) leaves NaN
    scores out, so a case missing one score still gets a rankable number."""
    values = [float(s) for s in scores if not (defined_only and math.isnan(s))]
    if not values:
        return math.nan
    if any(math.isnan(v) for v in values):
        return math.nan
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / float(np.sum(1 / np.asarray(values, dtype=np.float64)))
