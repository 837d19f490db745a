"""Dice of one binary class inside several, possibly nested, regions, from one pass of counts.

The fuel cells' water Dice in four regions, the first of which contains the other three (the
challenge website's definition; no code was published). Each voxel carries a region-membership
pattern (bit ``k`` set when the voxel lies in region ``k``): from a region label volume through
a lookup table, or from one mask per region. One histogram of (pattern, submitted, truth) per
slab then gives every region's counts at once, however the regions overlap.
"""

import math
from dataclasses import dataclass

import numpy as np

from evaluation.metrics.small_histogram import small_histogram

MAX_REGIONS = 6  # pattern·4 + submitted·2 + truth must fit a uint8 key


def membership_lut(regions: list[list[int]]) -> np.ndarray:
    """``lut[label]`` = the bit pattern of the regions that contain ``label``; the table ends
    with an entry 0 so that ``np.take(lut, labels, mode='clip')`` puts every larger label in
    no region."""
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"at most {MAX_REGIONS} regions, got {len(regions)}")
    top = max((max(labels) for labels in regions if labels), default=0)
    lut = np.zeros(top + 2, dtype=np.uint8)
    for k, labels in enumerate(regions):
        for label in labels:
            lut[label] |= np.uint8(1 << k)
    return lut


def patterns_from_labels(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    if labels.dtype.kind == "i" and labels.size and int(labels.min()) < 0:
        raise ValueError("region labels must not be negative")
    return np.take(lut, labels, mode="clip")


def slab_histogram(pattern: np.ndarray, submitted: np.ndarray, truth: np.ndarray, patterns_present: np.ndarray) -> np.ndarray:
    """Counts of ``pattern·4 + submitted·2 + truth`` (0/1 uint8 inputs), over the patterns that
    can occur and lie in some region (``patterns_present``: sorted pattern values)."""
    key = np.left_shift(pattern, np.uint8(2))
    key |= submitted << np.uint8(1)
    key |= truth
    bins = 4 << MAX_REGIONS
    wanted = np.zeros(bins, dtype=bool)
    for p in patterns_present:
        if p:
            wanted[4 * int(p) : 4 * int(p) + 4] = True
    return small_histogram(key, bins, wanted)


@dataclass(frozen=True)
class RegionCounts:
    """Per region: voxels both submitted and true, submitted, true."""

    both: int
    submitted: int
    truth: int


def region_counts(histogram: np.ndarray, n_regions: int) -> list[RegionCounts]:
    h = np.asarray(histogram, dtype=np.int64).reshape(-1, 2, 2)  # [pattern, submitted, truth]
    patterns = np.arange(h.shape[0])
    found = []
    for k in range(n_regions):
        inside = h[(patterns >> k) & 1 == 1]
        found.append(
            RegionCounts(both=int(inside[:, 1, 1].sum()), submitted=int(inside[:, 1, :].sum()), truth=int(inside[:, :, 1].sum()))
        )
    return found


def dice(counts: RegionCounts, when_empty: float = math.nan) -> float:
    """``2·|S∧W| / (|S| + |W|)`` within the region; ``when_empty`` when both are empty there
    (0/0: NaN by default, the foam scorer's IEEE convention)."""
    denominator = counts.submitted + counts.truth
    return 2 * counts.both / denominator if denominator else when_empty
