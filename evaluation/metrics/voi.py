"""Rand index and variation of information (funlib.evaluate ``rand_voi``).

Only voxels with a non-zero first label count; the second labelling's 0 is an ordinary
cluster. Sums are accumulated in ascending (a, b) order, sequentially, and probabilities are
normalised before taking the C library's log2 (``portable``), which is how the reference's C++
(std::map iteration) does it.
"""

import numpy as np

from evaluation.metrics import portable
from evaluation.metrics.overlap import Contingency


def _entropy(probabilities: np.ndarray) -> float:
    """-sum p log2 p, summed left to right like the reference's loop (np.cumsum is sequential)."""
    p = probabilities[probabilities > 0]
    if p.size == 0:
        return 0.0
    return float(-np.cumsum(p * portable.log2(p))[-1])


def _sequential_sum(values: np.ndarray) -> float:
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def _marginal(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Counts per distinct id, in ascending id order."""
    unique, inverse = np.unique(ids, return_inverse=True)
    return np.bincount(inverse.ravel(), weights=counts, minlength=unique.size)


def rand_voi(table: Contingency) -> dict[str, float]:
    """Rand split/merge, VoI split/merge, normalised VI and NID from a contingency table whose
    first labelling is the truth, restricted to truth > 0. Undefined ratios are NaN."""
    n_ij = table.count.astype(np.float64)
    n_i = _marginal(table.a, n_ij)
    n_j = _marginal(table.b, n_ij)
    total = _sequential_sum(n_ij)
    sum_ij, sum_i, sum_j = (_sequential_sum(x * x) for x in (n_ij, n_i, n_j))
    with np.errstate(divide="ignore", invalid="ignore"):
        h_ab = _entropy(n_ij / total) if total else 0.0
        h_a = _entropy(n_i / total) if total else 0.0
        h_b = _entropy(n_j / total) if total else 0.0
        voi_split, voi_merge = h_ab - h_a, h_ab - h_b
        return {
            "rand_split": float(np.divide(sum_ij, sum_i)),
            "rand_merge": float(np.divide(sum_ij, sum_j)),
            "voi_split": voi_split,
            "voi_merge": voi_merge,
            "nvi_split": float(np.divide(voi_split, h_ab)),
            "nvi_merge": float(np.divide(voi_merge, h_ab)),
            "nid": float(1 - np.divide(h_a + h_b - h_ab, max(h_a, h_b))),
        }
