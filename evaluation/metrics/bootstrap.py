"""Bootstrap over cases, shared by the leaderboard's error bar (``report.ranking_interval``)
and the organizer's ranking uncertainty (``organizer.ranking.bootstrap``): the same draws for
the same number of cases and seed, so both give the same interval."""

import numpy as np


def draw_counts(n_cases: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples x cases) how often each case is drawn in each resample."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_cases, size=(resamples, n_cases))
    offsets = np.arange(resamples)[:, None] * n_cases
    return np.bincount((draws + offsets).ravel(), minlength=resamples * n_cases).reshape(resamples, n_cases)


def resampled_means(matrix: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(submissions x resamples) mean case score of each submission in each resample.
    Identical submissions get bit-identical rows (computed once), so they tie exactly; sums
    are formed before the one division, so they are exact for scores like 0, 1/2 or 1. The sums
    run case by case rather than through a matrix product, whose order of additions (and so its
    last bit) the BLAS chooses by processor."""
    unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
    sums = np.zeros((unique.shape[0], counts.shape[0]))
    for case in range(unique.shape[1]):
        sums += np.multiply.outer(unique[:, case], counts[:, case])
    means: np.ndarray = (sums / matrix.shape[1])[inverse.ravel()]
    return means
