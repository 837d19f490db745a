"""The one-sided paired Wilcoxon signed-rank test of every pair of algorithms, as challengeR
runs it: R's ``wilcox.test(x, y, paired = TRUE, exact = FALSE, correct = TRUE)``
(``Decision`` in challengeR's ``testBased.R``).

For a pair: the differences on the cases both have; NaN differences (Inf - Inf) dropped as R
drops NA (an empty remainder is an error in R), then zero differences; V the sum of the
ranks of |d| (ties averaged) over the positive differences, n the number left;
z = V - n(n + 1)/4, sigma = sqrt(n(n + 1)(2n + 1)/24 - sum(t^3 - t)/48) over the tie groups;
the continuity correction moves z by 0.5 towards zero's side of the alternative. These are
formed in R's double operations, so they are R's bits; the normal tail is scipy's ``ndtr``
where R has ``pnorm`` (Cody's algorithm): the two agree within 1e-13 relative on challengeR's
comparison data (the tests bound it), so no decision changes unless an adjusted p-value lies
that close to alpha.

Both directions of a pair come from one ranking: the negated differences have the other
rank sum. The pairs' statistics are a compiled kernel (two sorts per pair) with a vectorised
numpy equivalent (``metrics.jit.run``).
"""

import numpy as np
from scipy import special

from evaluation.metrics import jit
from evaluation.metrics.jit import numba


class NoCommonCases(ValueError):
    """A pair shares no case with a defined difference (R: "not enough (non-missing) 'x'
    observations")."""

    def __init__(self, pair: int):
        super().__init__(pair)
        self.pair = pair


def pair_z(values: np.ndarray, present: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, ...]:
    """For every pair (first[p], second[p]) of rows of ``values`` (algorithms x cases): the
    centred statistic of ``first - second``, that of ``second - first``, and sigma."""
    positive, negative, n, ties, defined = jit.run(_pair_statistics, _pair_statistics_numpy, values, present, first, second)
    if not defined.all():
        raise NoCommonCases(int(np.flatnonzero(~defined)[0]))
    n = n.astype(np.float64)
    centre = n * (n + 1) / 4
    sigma = np.sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties.astype(np.float64) / 48)
    return positive - centre, negative - centre, sigma


def one_sided_p(z: np.ndarray, sigma: np.ndarray, greater: bool) -> np.ndarray:
    """p-value of the one-sided test with the continuity correction: alternative "greater"
    (the first sample larger) or "less"."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if greater:
            return special.ndtr(-((z - 0.5) / sigma))
        return special.ndtr((z + 0.5) / sigma)


@numba.njit(cache=True, nogil=True)
def _pair_statistics(values, present, first, second):  # pragma: no cover - compiled
    """Per pair, the magnitudes of the positive and of the negative differences are sorted
    apart, then walked together: each run of equal magnitudes (from both) is one tie group,
    its average rank added to the side each member came from."""
    pairs, cases = first.size, values.shape[1]
    positive = np.zeros(pairs)
    negative = np.zeros(pairs)
    count = np.zeros(pairs, np.int64)
    ties = np.zeros(pairs, np.int64)
    defined = np.zeros(pairs, np.bool_)
    up = np.empty(cases)
    down = np.empty(cases)
    for p in range(pairs):
        a, b = first[p], second[p]
        n_up = n_down = 0
        for c in range(cases):
            if present[a, c] and present[b, c]:
                d = values[a, c] - values[b, c]
                if d != d:  # NaN
                    continue
                defined[p] = True
                if d > 0:
                    up[n_up] = d
                    n_up += 1
                elif d < 0:
                    down[n_down] = -d
                    n_down += 1
        ups = np.sort(up[:n_up])
        downs = np.sort(down[:n_down])
        i = j = taken = 0
        while i < n_up or j < n_down:
            level = ups[i] if j >= n_down or (i < n_up and ups[i] <= downs[j]) else downs[j]
            from_up = from_down = 0
            while i < n_up and ups[i] == level:
                from_up += 1
                i += 1
            while j < n_down and downs[j] == level:
                from_down += 1
                j += 1
            size = from_up + from_down
            rank = (2 * taken + size + 1) / 2
            positive[p] += from_up * rank
            negative[p] += from_down * rank
            ties[p] += size * size * size - size
            taken += size
        count[p] = taken
    return positive, negative, count, ties, defined


def _pair_statistics_numpy(values, present, first, second):
    """The kernel's results, vectorised over pairs (a (pairs x cases) sort)."""
    with np.errstate(invalid="ignore"):
        differences = values[first] - values[second]
    defined = present[first] & present[second] & ~np.isnan(differences)
    nonzero = defined & (differences != 0)
    size = differences.shape[1]
    order = np.argsort(np.where(nonzero, np.abs(differences), np.nan), axis=1, kind="stable")
    ordered = np.take_along_axis(np.where(nonzero, np.abs(differences), np.nan), order, axis=1)
    index = np.arange(size)[None, :]
    starts = np.ones(ordered.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones(ordered.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    low = np.maximum.accumulate(np.where(starts, index, 0), axis=1)
    high = np.flip(np.minimum.accumulate(np.flip(np.where(ends, index, size), axis=1), axis=1), axis=1)
    n = nonzero.sum(axis=1)
    inside = index < n[:, None]
    rank = (low + high + 2) / 2
    tied = high - low + 1
    positive = np.where(np.take_along_axis(differences > 0, order, axis=1) & inside, rank, 0.0).sum(axis=1)
    negative = np.where(np.take_along_axis(differences < 0, order, axis=1) & inside, rank, 0.0).sum(axis=1)
    ties = np.where(inside, tied * tied - 1, 0).sum(axis=1)
    return positive, negative, n, ties, defined.any(axis=1)
