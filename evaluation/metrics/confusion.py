"""Per-class confusion counts of two label maps from one ``np.bincount`` pass.

nnU-Net v2 (MIC-DKFZ/nnUNet@0e49508, ``nnunetv2/evaluation/evaluate_predictions.py``,
``compute_metrics`` / ``compute_tp_fp_fn_tn``) builds two boolean masks and four full-image
sums per class: 4·K passes over the image. A K×K confusion matrix holds the same numbers
(for class c: tp = cm[c, c], fp = column sum − tp, fn = row sum − tp), and one bincount over
the packed index ``row · (K + 1) + column`` builds it in a single pass, whatever K is.

Two extra bins keep nnU-Net's semantics exactly:

* an *other* row/column (index K) for values that are no declared class: such a truth pixel
  predicted as class c is a false positive of c, a prediction of such a value on a truth
  pixel of class c is a false negative of c, exactly as with nnU-Net's masks;
* an *ignored* row (index K + 1) for truth pixels equal to ``ignore_index``, dropped before
  the sums, as nnU-Net's ``ignore_mask`` removes them from tp, fp, fn and tn.

Values are mapped to bin indices with a lookup table, in chunks, so the extra memory stays a
few megabytes even for large 3D volumes.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 20  # voxels per bincount call: bounded temporaries, cache-friendly
_DIRECT_BITS = 16  # integer types this narrow are looked up directly over their whole range


@dataclass(frozen=True)
class ClassCounts:
    """tp, fp, fn, tn per declared class (int64 vectors of length K, in class order)."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray


class ClassIndex:
    """Maps label values to bin indices: declared class i -> i, anything else -> K (other),
    and, for the truth only, ``ignore_index`` -> K + 1 (dropped)."""

    def __init__(self, class_ids: Iterable[int], ignore_index: int | None = None) -> None:
        ids = [int(c) for c in class_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("class ids must be distinct")
        if ignore_index is not None and int(ignore_index) in ids:
            raise ValueError("ignore_index must not be a class id")
        self.ids = ids
        self.ignore = None if ignore_index is None else int(ignore_index)
        self.k = len(ids)
        known = ids + ([self.ignore] if self.ignore is not None else [])
        self.lo, self.hi = min(known), max(known)

    def _table(self, positions_of: Callable[[int], int | None], size: int, truth: bool) -> np.ndarray:
        """A lookup table of ``size`` entries: bin index (times K + 1 for the truth)."""
        scale = self.k + 1 if truth else 1
        table = np.full(size, self.k * scale, dtype=np.intp)
        for i, value in enumerate(self.ids):
            position = positions_of(value)
            if position is not None:
                table[position] = i * scale
        if truth and self.ignore is not None:
            position = positions_of(self.ignore)
            if position is not None:
                table[position] = (self.k + 1) * scale
        return table

    def lookup(self, dtype: np.dtype, truth: bool) -> Callable[[np.ndarray], np.ndarray]:
        """``f(chunk) -> bin indices`` for arrays of ``dtype`` (integer or bool)."""
        dtype = np.dtype(dtype)
        if dtype.kind == "b":
            dtype = np.dtype(np.uint8)
        if dtype.kind not in "iu":
            raise TypeError(f"label maps must hold integers, not {dtype}")
        info = np.iinfo(dtype)
        if info.bits <= _DIRECT_BITS:
            # Whole-range table; negative values index from its end, as numpy wraps them.
            size = 1 << info.bits
            table = self._table(lambda v: v % size if info.min <= v <= info.max else None, size, truth)
            return lambda chunk: table[chunk.view(dtype) if chunk.dtype.kind == "b" else chunk]
        low = max(self.lo - 1, int(info.min))
        high = min(self.hi + 1, int(info.max))
        offset = self.lo - 1
        table = self._table(lambda v: v - offset, self.hi - self.lo + 3, truth)

        def wide(chunk: np.ndarray) -> np.ndarray:
            clipped = np.clip(chunk, low, high)  # in its own dtype: out-of-range values -> the 'other' slots
            bins: np.ndarray = table[clipped.astype(np.intp) - offset]
            return bins

        return wide


def confusion_matrix(truth: np.ndarray, pred: np.ndarray, index: ClassIndex) -> np.ndarray:
    """(K + 1) × (K + 1) counts, rows truth, columns prediction, the last row and column being
    'other'; ignored truth pixels are not counted."""
    if truth.shape != pred.shape:
        raise ValueError(f"shape mismatch {truth.shape} vs {pred.shape}")
    k1 = index.k + 1
    rows_of, cols_of = index.lookup(truth.dtype, truth=True), index.lookup(pred.dtype, truth=False)
    flat_truth, flat_pred = truth.reshape(-1), pred.reshape(-1)
    total = np.zeros((k1 + 1) * k1, dtype=np.int64)
    for start in range(0, flat_truth.size, _CHUNK):
        key = rows_of(flat_truth[start : start + _CHUNK])
        key += cols_of(flat_pred[start : start + _CHUNK])
        total += np.bincount(key, minlength=total.size)
    return total[: k1 * k1].reshape(k1, k1)


def class_counts(truth: np.ndarray, pred: np.ndarray, index: ClassIndex) -> ClassCounts:
    """tp, fp, fn, tn of every declared class, as nnU-Net's ``compute_tp_fp_fn_tn`` of the
    masks ``truth == c`` and ``pred == c`` with ``truth == ignore_index`` removed."""
    cm = confusion_matrix(truth, pred, index)
    k = index.k
    tp = np.diagonal(cm)[:k].copy()
    fp = cm.sum(axis=0)[:k] - tp
    fn = cm.sum(axis=1)[:k] - tp
    tn = cm.sum() - tp - fp - fn
    return ClassCounts(tp=tp, fp=fp, fn=fn, tn=tn)


def region_counts(cm: np.ndarray, regions: Sequence[Sequence[int]]) -> ClassCounts:
    """tp, fp, fn, tn of every region (a sequence of class positions in the confusion matrix
    ``cm``, rows truth, columns prediction), as nnU-Net's ``compute_tp_fp_fn_tn`` of the masks
    of ``region_or_label_to_mask``: the union of the region's labels in truth and prediction.
    A one-label region counts exactly as ``class_counts`` does."""
    total = int(cm.sum())
    columns, rows = cm.sum(axis=0), cm.sum(axis=1)
    found = np.zeros((4, len(regions)), np.int64)
    for j, positions in enumerate(regions):
        region = np.asarray(positions, np.intp)
        tp = int(cm[np.ix_(region, region)].sum())
        fp, fn = int(columns[region].sum()) - tp, int(rows[region].sum()) - tp
        found[:, j] = tp, fp, fn, total - tp - fp - fn
    return ClassCounts(*found)
