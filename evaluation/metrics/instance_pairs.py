"""The overlap table of two instance maps in a few compiled passes without full-volume
temporaries: every instance's size, and every overlapping (reference, prediction) pair with
its intersection.

``metrics.overlap.contingency`` builds packed 64-bit pair keys for every foreground voxel,
four or five arrays of eight bytes per voxel; for a 256^3 map that is most of a gigabyte.
Here the ids present are found first (a presence table per map, ids up to ``DIRECT_IDS``),
sizes are counted in the same pass, and only voxels in both foregrounds produce a key.
"""

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba
from evaluation.metrics.overlap import contingency

DIRECT_IDS = 1 << 24  # larger ids are counted by sorting (metrics.overlap.contingency)


@numba.njit(cache=True, nogil=True)
def _presence(  # pragma: no cover - compiled
    ref: np.ndarray, pred: np.ndarray, ref_count: np.ndarray, pred_count: np.ndarray
) -> int:
    both = 0
    for i in range(ref.size):
        r, p = ref[i], pred[i]
        ref_count[r] += 1
        pred_count[p] += 1
        if r != 0 and p != 0:
            both += 1
    return both


@numba.njit(cache=True, nogil=True)
def _keys(  # pragma: no cover - compiled
    ref: np.ndarray, pred: np.ndarray, ref_rank: np.ndarray, pred_rank: np.ndarray, width: int, keys: np.ndarray
) -> None:
    k = 0
    for i in range(ref.size):
        r, p = ref[i], pred[i]
        if r != 0 and p != 0:
            keys[k] = ref_rank[r] * width + pred_rank[p]
            k += 1


def overlaps(
    ref: np.ndarray, pred: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ref ids, ref sizes, pred ids, pred sizes, pair ref index, pair pred index, pair
    intersection): ids ascending and non-zero, pairs ascending by (pred, ref)."""
    ref_flat, pred_flat = (a.view(np.uint8).reshape(-1) if a.dtype == bool else a.reshape(-1) for a in (ref, pred))
    top = max(int(ref_flat.max(initial=0)), int(pred_flat.max(initial=0)))
    if not jit.compiled() or top >= DIRECT_IDS or ref.dtype.kind not in "iub" or pred.dtype.kind not in "iub":
        return _sorted(ref, pred)
    ref_count = np.zeros(int(ref_flat.max(initial=0)) + 1, np.int64)
    pred_count = np.zeros(int(pred_flat.max(initial=0)) + 1, np.int64)
    both = _presence(ref_flat, pred_flat, ref_count, pred_count)
    ref_ids, pred_ids = np.flatnonzero(ref_count[1:]) + 1, np.flatnonzero(pred_count[1:]) + 1
    ref_rank, pred_rank = np.zeros(ref_count.size, np.int64), np.zeros(pred_count.size, np.int64)
    ref_rank[ref_ids], pred_rank[pred_ids] = np.arange(ref_ids.size), np.arange(pred_ids.size)
    keys = np.empty(both, np.int64)
    _keys(ref_flat, pred_flat, ref_rank, pred_rank, max(pred_ids.size, 1), keys)
    width = max(pred_ids.size, 1)
    if ref_ids.size * width <= DIRECT_IDS:  # count by key: no sort, no copy of the keys
        inter = np.bincount(keys, minlength=ref_ids.size * width)
        pairs = np.flatnonzero(inter)
        inter = inter[pairs]
    else:
        pairs, inter = np.unique(keys, return_counts=True)
    ref_index, pred_index = pairs // width, pairs % width
    order = np.lexsort((ref_index, pred_index))
    return (
        ref_ids,
        ref_count[ref_ids],
        pred_ids,
        pred_count[pred_ids],
        ref_index[order],
        pred_index[order],
        inter[order].astype(np.int64),
    )


def _sorted(
    ref: np.ndarray, pred: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    table = contingency(ref, pred, where=(ref != 0) | (pred != 0))
    ref_ids, ref_sizes = _sizes(table.a, table.count)
    pred_ids, pred_sizes = _sizes(table.b, table.count)
    both = (table.a != 0) & (table.b != 0)
    a, b, count = table.a[both], table.b[both], table.count[both]
    order = np.lexsort((a, b))
    return (
        ref_ids,
        ref_sizes,
        pred_ids,
        pred_sizes,
        np.searchsorted(ref_ids, a[order]),
        np.searchsorted(pred_ids, b[order]),
        count[order],
    )


def _sizes(ids: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ids != 0
    found, inverse = np.unique(ids[keep], return_inverse=True)
    return found, np.bincount(inverse, weights=count[keep], minlength=found.size).astype(np.int64)
