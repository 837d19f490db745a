"""Whole-array and convenience forms of the grader's primitives, for tests only: the forms a
reader of a test recognises (the reference's way, or one call where the grader streams), kept
out of the production modules that do not need them."""

import numpy as np
from skimage.morphology import skeletonize

from evaluation.metrics.hausdorff import capped_hausdorff_sets
from evaluation.metrics.hausdorff.sets import ArraySets
from evaluation.suites.tomo_fuelcell.regions import MAX_REGIONS

# The weight of each voxel of a 2x2(x2) corner neighbourhood in its code (surface_distance's
# ENCODE_NEIGHBOURHOOD_*_KERNEL): the voxel at offset (a, b[, c]), 0 the lower one.
CORNER_BITS = {2: np.array([[8, 4], [2, 1]], np.uint8), 3: np.array([[[128, 64], [32, 16]], [[8, 4], [2, 1]]], np.uint8)}


def capped_hausdorff(truth: np.ndarray, pieces: np.ndarray, piece_ids, ids, voxel_size, cap: float) -> np.ndarray:
    """float32 ``d_g`` for each truth id in ``ids``; ``pieces`` labels the prediction's pieces
    1..n and ``piece_ids[p]`` is the id piece p is assigned to (``piece_ids[0] == 0``)."""
    return capped_hausdorff_sets(ArraySets(truth, pieces, piece_ids), ids, voxel_size, cap)


def identity(labels: np.ndarray) -> np.ndarray:
    """``piece_ids`` for a label image used directly as its own pieces."""
    return np.arange(int(labels.max()) + 1 if labels.size else 1)


def skeletonize_full(mask: np.ndarray) -> np.ndarray:
    """The reference's way (the full volume): a boolean skeleton."""
    return skeletonize(mask.astype(np.uint8)) > 0


def sort_groups(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(group ids, start of each group, its size, values sorted by group then value)."""
    order = np.lexsort((values, groups))
    ids, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    return ids, starts, counts, values[order]


def corner_codes(mask: np.ndarray) -> np.ndarray:
    """The neighbourhood code of every corner of ``mask`` (shape + 1 on every axis); outside
    the array counts as background."""
    ndim = mask.ndim
    padded = np.pad(mask.astype(np.uint8, copy=False), 1)
    codes = np.zeros(tuple(n + 1 for n in mask.shape), np.uint8)
    for offset in np.ndindex(*(2,) * ndim):
        window = tuple(slice(o, o + n + 1) for o, n in zip(offset, mask.shape))
        codes += padded[window] * CORNER_BITS[ndim][offset]
    return codes


def patterns_from_masks(masks: list[np.ndarray]) -> np.ndarray:
    """Bit ``k`` from ``masks[k]`` (0/1 uint8 arrays of one shape)."""
    if len(masks) > MAX_REGIONS:
        raise ValueError(f"at most {MAX_REGIONS} regions, got {len(masks)}")
    pattern = np.zeros(masks[0].shape, dtype=np.uint8)
    for k, mask in enumerate(masks):
        pattern |= mask << np.uint8(k)
    return pattern
