"""Counts of the values of a small-range uint8 key, in cache-sized blocks.

``np.bincount`` first widens its input to 64-bit integers (eight times the bytes of a uint8
key) and then scatters; for a handful of bins, one SIMD comparison per bin over blocks that
stay in cache is about four times faster and allocates nothing proportional to the volume.
"""

import numpy as np

_BLOCK = 1 << 18
_COMPARE_LIMIT = 48  # beyond this many wanted bins one bincount per block is cheaper


def small_histogram(key: np.ndarray, bins: int, wanted: np.ndarray | None = None) -> np.ndarray:
    """``np.bincount(key.ravel(), minlength=bins)`` for uint8 keys ``< bins``; bins not in
    ``wanted`` (a boolean mask over bins, default all) are left at 0 and cost nothing.
    A key value ``>= bins`` is not counted anywhere."""
    if key.dtype != np.uint8:
        raise TypeError(f"small_histogram counts uint8 keys, not {key.dtype}")
    flat = key.reshape(-1)
    values = np.flatnonzero(np.ones(bins, bool) if wanted is None else wanted)
    counts = np.zeros(bins, dtype=np.int64)
    if values.size > _COMPARE_LIMIT:
        for start in range(0, flat.size, _BLOCK):
            counts += np.bincount(flat[start : start + _BLOCK], minlength=256)[:bins]
        return counts if wanted is None else np.where(wanted, counts, 0)
    scratch = np.empty(min(_BLOCK, flat.size), dtype=bool)
    for start in range(0, flat.size, _BLOCK):
        part = flat[start : start + _BLOCK]
        mask = scratch[: part.size]
        for value in values:
            np.equal(part, np.uint8(value), out=mask)
            counts[value] += np.count_nonzero(mask)
    return counts
