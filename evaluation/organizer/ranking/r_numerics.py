"""R's numerics, to the last bit, where challengeR's numbers depend on them.

challengeR (wiesenfa/challengeR 1.0.5) aggregates with R's ``mean`` and ``median``, ranks with
``rank``, tests with ``wilcox.test`` and adjusts with ``p.adjust``; its Kendall's tau is
``cor(method = "kendall")`` and its consensus sums incidences with ``rowSums``/``colSums``.
Numbers that tie in R must tie here, and the other way round, or places change. So:

- **mean**: R 4.2's ``real_mean`` (``src/main/summary.c``) sums in ``long double`` (80-bit on
  x86-64: 64-bit significand), divides, then adds the mean of the residuals (a second pass,
  also in ``long double``) and narrows once. numpy's ``longdouble`` is the same type on the
  same platform, and ``cumsum`` adds strictly left to right, so ``r_mean`` gives R's bits for
  the same values **in the same order** (``mean(c(1e16, 1, -1e16))`` is 0.33365885416666669
  in R, 0 in numpy). The order is the one challengeR sums in: cases sorted by id, a case drawn
  k times in a bootstrap sample k times in a row. R >= 4.3 adds an overflow fallback that
  only matters for sums beyond the double range. Where ``longdouble`` is plain double
  (Windows, macOS on ARM) R's ``long double`` is too.
- **median**: R's: the middle value, or ``mean`` of the two middle values.
- **ranks**: challengeR's ``rankNA2``: ties "min" or "average", NA after the others.
- **p-values**: ``wilcoxon.py``.
- **p.adjust**: every method of R's ``stats::p.adjust`` from its definition (Holm 1979,
  Hochberg 1988, Hommel 1988 as computed by Wright 1992, Bonferroni, Benjamini-Hochberg
  1995, Benjamini-Yekutieli 2001), with R's operation order.
"""

import numpy as np

LONG = np.longdouble
TIES = ("min", "average")
P_ADJUST = ("none", "holm", "hochberg", "hommel", "bonferroni", "BH", "BY", "fdr")


def r_mean(values: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """R's ``mean`` along the last axis, over the ``present`` entries (all by default).

    Both passes add one position of the last axis at a time to a ``long double``
    accumulator, for every row at once: strictly left to right, as R adds. Absent entries add
    exact zeros, which leave such a sum unchanged, so rows of different lengths share the
    loop. A row with nothing present is NaN (R's ``mean(numeric(0))``)."""
    values = np.asarray(values, dtype=np.float64)
    columns = np.moveaxis(values, -1, 0)
    kept = None if present is None else np.moveaxis(np.asarray(present, dtype=bool), -1, 0)
    count = values.shape[-1] if kept is None else kept.sum(axis=0)
    total = np.zeros(values.shape[:-1], dtype=LONG)
    with np.errstate(invalid="ignore", divide="ignore"):  # Inf - Inf, 0 / 0: NaN, as in R
        for j in range(columns.shape[0]):
            total += columns[j] if kept is None else np.where(kept[j], columns[j], 0.0)
        mean = total / count
        residual = np.zeros(values.shape[:-1], dtype=LONG)
        for j in range(columns.shape[0]):
            step = columns[j] - mean
            residual += step if kept is None else np.where(kept[j], step, LONG(0))
        corrected = mean + residual / count
    return np.where(np.isfinite(mean.astype(np.float64)), corrected, mean).astype(np.float64)


def r_median(values: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """R's ``median`` along the last axis over the ``present`` entries: the middle value, or
    R's ``mean`` of the two middle ones. Absent entries sort last as +inf: the first
    ``count`` sorted values are then the present ones, a present +Inf included."""
    values = np.asarray(values, dtype=np.float64)
    if present is None:
        present = np.ones(values.shape, dtype=bool)
    count = present.sum(axis=-1)
    ordered = np.sort(np.where(present, values, np.inf), axis=-1)
    half = np.maximum(count - 1, 0) // 2
    low = np.take_along_axis(ordered, half[..., None], axis=-1)[..., 0]
    high = np.take_along_axis(ordered, np.minimum(half + 1, max(values.shape[-1] - 1, 0))[..., None], axis=-1)[..., 0]
    pair = r_mean(np.stack([low, high], axis=-1))
    return np.where(count == 0, np.nan, np.where(count % 2 == 1, low, pair))


def r_sum(values: np.ndarray) -> np.ndarray:
    """R's ``sum``/``rowSums`` of doubles along the last axis: accumulated in long double."""
    return np.cumsum(np.asarray(values, dtype=np.float64).astype(LONG), axis=-1)[..., -1].astype(np.float64)


# --------------------------------------------------------------------------------------------
# Ranks


def better_and_equal(values: np.ndarray, present: np.ndarray, higher_is_better: bool) -> tuple[np.ndarray, ...]:
    """Per column of ``values`` (rows = algorithms): for every present, non-NA entry, how many
    present non-NA entries are strictly better (``better``) and equal to it, itself included
    (``equal``); and how many present entries are NA (NaN) in each column. Everything a rank
    with ties "min" or "average" needs, with any multiplicity (``ranks``)."""
    key = np.where(present & ~np.isnan(values), -values if higher_is_better else values, np.nan)
    order = np.argsort(key, axis=0, kind="stable")
    ordered = np.take_along_axis(key, order, axis=0)
    rows = values.shape[0]
    index = np.arange(rows)[:, None]
    starts = np.ones(ordered.shape, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    ends = np.ones(ordered.shape, dtype=bool)
    ends[:-1] = starts[1:]
    first = np.maximum.accumulate(np.where(starts, index, 0), axis=0)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, index, rows), axis=0), axis=0), axis=0)
    better, equal = np.empty_like(first), np.empty_like(first)
    np.put_along_axis(better, order, first, axis=0)
    np.put_along_axis(equal, order, last - first + 1, axis=0)
    missing = (present & np.isnan(values)).sum(axis=0)
    return better, equal, missing


def ranks(values: np.ndarray, present: np.ndarray, ties: str, higher_is_better: bool, copies=1) -> np.ndarray:
    """challengeR's ``rankNA2`` down each column of ``values`` (rows = algorithms), each
    present row taken ``copies`` times (a scalar or one number per column: a case drawn k times
    in a bootstrap sample is one group of k rows per algorithm, ``Rank.list`` in ``Rank.R``).
    Absent rows get NaN (they are not ranked)."""
    better, equal, missing = better_and_equal(values, present, higher_is_better)
    return ranks_of_counts(better, equal, missing, present & ~np.isnan(values), present, ties, copies)


def ranks_of_counts(better, equal, missing, valid, present, ties: str, copies=1) -> np.ndarray:
    """The ranks from ``better_and_equal``'s counts (algorithms along axis 0, any shape after
    it), with multiplicity ``copies`` (broadcast over the axes after the first):

    "min": 1 + k * better; "average": k * better + (k * equal + 1) / 2 (R's ``rank``); NA rows
    after the others: the highest rank given plus 1 ("min") or plus the mean of
    1 .. (k * number of NA) ("average"), 0 standing for the highest when all are NA."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}")
    k = np.broadcast_to(np.asarray(copies, dtype=np.float64), missing.shape)
    rank = np.where(valid, 1 + k * better if ties == "min" else k * better + (k * equal + 1) / 2, np.nan)
    highest = np.where(valid.any(axis=0), np.max(np.where(valid, rank, -np.inf), axis=0), 0.0)
    na_rank = highest + 1 if ties == "min" else highest + (k * missing + 1) / 2
    return np.where(present & ~valid, na_rank[None], rank)


def rank_vector(values: np.ndarray, ties: str, higher_is_better: bool) -> np.ndarray:
    """``rankNA2`` of one vector (NaN = NA)."""
    values = np.asarray(values, dtype=np.float64)[:, None]
    return ranks(values, np.ones(values.shape, dtype=bool), ties, higher_is_better)[:, 0]


# --------------------------------------------------------------------------------------------
# Kendall's tau


def kendall_tau(samples: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """R's ``cor(x, y, method = "kendall")`` (tau-b) of each column of ``samples`` with
    ``reference``, in R's operations (``src/library/stats/src/cov.c``, ``cov_complete2``):
    the sum of sign(dx) * sign(dy) over all ordered pairs, divided by the product of the
    square roots of the counts of ordered pairs that differ; NaN when either has no
    variation (R: NA with a warning)."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim == 1:
        return kendall_tau(samples[:, None], reference)[0]
    reference = np.asarray(reference, dtype=np.float64)
    i, j = np.triu_indices(samples.shape[0], k=1)
    sx = np.sign(samples[j] - samples[i])
    sy = np.sign(reference[j] - reference[i])[:, None]
    concordance = 2 * (sx * sy).sum(axis=0)
    spread_x = np.sqrt(2 * (sx != 0).sum(axis=0).astype(np.float64))
    spread_y = np.sqrt(2 * (sy != 0).sum(axis=0).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where((spread_x == 0) | (spread_y == 0), np.nan, concordance / (spread_x * spread_y))
    return np.minimum(tau, 1.0)


# --------------------------------------------------------------------------------------------
# p.adjust


def p_adjust(p: np.ndarray, method: str) -> np.ndarray:
    """R's ``p.adjust(p, method)`` for p-values without NA."""
    p = np.asarray(p, dtype=np.float64)
    n = p.size
    if method not in P_ADJUST:
        raise ValueError(f"p_adjust must be one of {P_ADJUST}")
    if n <= 1 or method == "none":
        return p.copy()
    if method == "bonferroni":
        return np.minimum(1.0, n * p)
    if method == "holm":
        order = np.argsort(p, kind="stable")
        steps = (n - np.arange(n)).astype(np.float64)
        return _placed(np.minimum(1.0, np.maximum.accumulate(steps * p[order])), order)
    if method == "hommel":
        return _hommel(p)
    order = np.argsort(-p, kind="stable")  # decreasing
    i = np.arange(n, 0, -1).astype(np.float64)
    if method == "hochberg":
        factor = n + 1 - i
    elif method in ("BH", "fdr"):
        factor = n / i
    else:  # BY
        factor = r_sum(1 / np.arange(1, n + 1, dtype=np.float64)) * n / i
    return _placed(np.minimum(1.0, np.minimum.accumulate(factor * p[order])), order)


def _placed(adjusted_in_order: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(adjusted_in_order)
    out[order] = adjusted_in_order
    return out


def _hommel(p: np.ndarray) -> np.ndarray:
    """Hommel's adjustment in Wright's (1992) formulation, as ``p.adjust`` computes it: for
    every size m of the intersection hypotheses, from n - 1 down to 2, the Simes bound of
    each hypothesis, and the largest over m."""
    n = p.size
    order = np.argsort(p, kind="stable")
    ordered = p[order]
    i = np.arange(1, n + 1, dtype=np.float64)
    q = np.full(n, np.min(n * ordered / i))
    adjusted = q.copy()
    for m in range(n - 1, 1, -1):
        head = n - m + 1  # hypotheses 1 .. n-m+1 (1-based)
        simes = np.min(m * ordered[head:] / np.arange(2, m + 1, dtype=np.float64))
        q[:head] = np.minimum(m * ordered[:head], simes)
        q[head:] = q[head - 1]
        np.maximum(adjusted, q, out=adjusted)
    return _placed(np.maximum(adjusted, ordered), order)
