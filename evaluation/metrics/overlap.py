"""Label co-occurrence in one pass: the contingency table every overlap metric is built on.

Instead of one full-volume comparison per instance (what the references do), a single pass
over the foreground gives every (truth id, prediction id) count at once; IoU, matching costs,
rand/VoI, binary confusion counts and id-accuracy all derive from it.
"""

from dataclasses import dataclass

import numpy as np

# Direct counting (np.bincount over the packed pair key) is O(n) but allocates one slot per
# possible pair; beyond this many slots per counted voxel a sort-based count is cheaper.
_DENSE_SLOTS_PER_VOXEL = 8
_DENSE_SLOTS_FLOOR = 1 << 22


@dataclass(frozen=True)
class Contingency:
    """Counts of voxel pairs, sorted ascending by (a, b)."""

    a: np.ndarray  # uint64 ids of the first labelling
    b: np.ndarray  # uint64 ids of the second labelling
    count: np.ndarray  # int64 voxel counts

    def __len__(self) -> int:
        return int(self.count.size)


def _as_index(values: np.ndarray) -> np.ndarray:
    """Integer or boolean labels as uint64 (label images are never compared as floats here)."""
    if values.dtype.kind in "ui":
        return values.astype(np.uint64, copy=False)
    if values.dtype.kind == "b":
        return values.astype(np.uint64)
    raise TypeError(f"labels must be integers or booleans, not {values.dtype}")


def contingency(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> Contingency:
    """Pair counts of ``a`` and ``b`` over the voxels selected by ``where`` (all if None)."""
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch {a.shape} vs {b.shape}")
    if where is not None:
        av, bv = a[where], b[where]
    else:
        av, bv = a.ravel(), b.ravel()
    av, bv = _as_index(av), _as_index(bv)
    if av.size == 0:
        empty = np.zeros(0, np.uint64)
        return Contingency(empty, empty, np.zeros(0, np.int64))
    a_ids, a_dense = _dense_ids(av)
    b_ids, b_dense = _dense_ids(bv)
    nb = np.uint64(b_ids.size)
    key = a_dense * nb + b_dense
    slots = int(a_ids.size) * int(b_ids.size)
    if slots <= max(_DENSE_SLOTS_FLOOR, _DENSE_SLOTS_PER_VOXEL * key.size):
        counts = np.bincount(key.astype(np.intp), minlength=slots)
        keys = np.flatnonzero(counts).astype(np.uint64)
        counts = counts[keys.astype(np.intp)]
    else:
        keys, counts = np.unique(key, return_counts=True)
    return Contingency(a_ids[keys // nb], b_ids[keys % nb], counts.astype(np.int64))


def _dense_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids, each value's rank among them) without sorting when ids are small."""
    top = int(values.max())
    if top < max(_DENSE_SLOTS_FLOOR, 2 * values.size):
        present = np.bincount(values.astype(np.intp), minlength=top + 1) > 0
        ids = np.flatnonzero(present).astype(np.uint64)
        rank = np.cumsum(present, dtype=np.int64) - 1
        return ids, rank[values.astype(np.intp)].astype(np.uint64)
    ids, inverse = np.unique(values, return_inverse=True)
    return ids.astype(np.uint64), inverse.astype(np.uint64).ravel()


@dataclass(frozen=True)
class BinaryCounts:
    """Confusion counts of two foreground masks (truth > 0 vs prediction > 0)."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def binary_counts(truth_fg: np.ndarray, pred_fg: np.ndarray) -> BinaryCounts:
    n_truth = int(np.count_nonzero(truth_fg))
    n_pred = int(np.count_nonzero(pred_fg))
    tp = int(np.count_nonzero(truth_fg & pred_fg))
    fp, fn = n_pred - tp, n_truth - tp
    return BinaryCounts(tp=tp, fp=fp, fn=fn, tn=int(truth_fg.size) - tp - fp - fn)
