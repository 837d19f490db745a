"""Order statistics of many groups of values at once, in the references' own arithmetic.

The per-instance surface metrics need a percentile of every instance's distances; looping
over instances and calling ``np.percentile`` costs a Python call each. Here the values are
sorted once by (group, value) and every group's percentile is interpolated in one vectorised
step, with exactly the floating-point operations of ``np.percentile(method='linear')``
(numpy/lib/_function_base_impl.py: ``_QuantileMethods['linear']``, ``_get_indexes``, ``_lerp``)
or of ``torch.quantile`` on float32 (ATen ``quantile``: rank ``q * (n - 1)`` in float32, then
``lerp``), so each group's result is the one the library computes.
"""

import numpy as np

from evaluation.metrics.jit import numba


def counting_order(keys: np.ndarray, size: int) -> np.ndarray:
    """The stable order that sorts ``keys`` (integers in [0, size)), by counting."""
    order = np.empty(keys.size, np.int64)
    _counting(keys.astype(np.int64, copy=False), np.zeros(size + 1, np.int64), order)
    return order


@numba.njit(cache=True, nogil=True)
def _counting(keys: np.ndarray, start: np.ndarray, order: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in keys:
        start[k + 1] += 1
    for b in range(1, start.size):
        start[b] += start[b - 1]
    for i in range(keys.size):
        order[start[keys[i]]] = i
        start[keys[i]] += 1


def percentile_linear(sorted_values: np.ndarray, starts: np.ndarray, counts: np.ndarray, percent: float) -> np.ndarray:
    """``np.percentile(group, percent)`` of every group (each at least one value)."""
    q = np.true_divide(percent, 100)
    n = counts.astype(np.float64)
    virtual = (counts - 1) * q
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = -1
    following[above] = -1
    below = virtual < 0
    previous[below] = 0
    following[below] = 0
    gamma = virtual - previous
    last = starts + counts - 1
    a = sorted_values[np.where(previous < 0, last, starts + previous.astype(np.int64))]
    b = sorted_values[np.where(following < 0, last, starts + following.astype(np.int64))]
    return _lerp(a, b, gamma)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's ``_lerp``: from the nearer end, so that t = 0 and t = 1 give a and b exactly."""
    with np.errstate(invalid="ignore"):
        diff = b - a
        out: np.ndarray = a + diff * t
        high = t >= 0.5
        out[high] = (b - diff * (1 - t))[high]
    return out


def quantile_float32(sorted_values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """``torch.quantile(group.float(), q)`` of every group, in float32 arithmetic."""
    values = sorted_values.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        rank = np.float32(q) * (counts - 1).astype(np.float32)
        below = np.floor(rank)
        weight = rank - below
        a = values[starts + below.astype(np.int64)]
        b = values[starts + np.ceil(rank).astype(np.int64)]
        diff = b - a
        small = weight < np.float32(0.5)
        out: np.ndarray = np.where(small, a + weight * diff, b - diff * (np.float32(1) - weight))
    return out.astype(np.float32)
