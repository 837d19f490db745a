"""Sets too large for their own boxes, held as bit-packed masks of the union box.

A set whose own box is above BOX_VOXELS (a cell spanning the crop; a Voronoi-like cell can span
a 1000^3 crop, and its masks and their derived arrays would take gigabytes) is held as two
bit-packed masks of the union box (one bit per voxel, planes packed along x: ``pack``) and
searched slab by slab (``directed_packed``), in two passes when its outside voxels are too many
to keep: cell representatives first, then only the cells that could beat them. The masks of
several pairs are built in one pass over the crop while they fit in PACKED_BYTES (``batches``).
"""

import math
from collections.abc import Iterator
from typing import TypeVar

import numpy as np

from evaluation.metrics.hausdorff.boxes import Box, coordinates, inner_boundary, volume
from evaluation.metrics.hausdorff.directed import Nearest, farthest

CELL = 2  # edge of the cells of the Lipschitz bound of large boxes' two passes, in voxels
SLAB_PLANES = 32  # planes unpacked at a time (a multiple of CELL)
KEEP_POINTS = 4 << 20  # outside voxels kept between the two passes over a large box
PACKED_BYTES = 256 << 20  # bit-packed masks built in one pass over the crop


def pack(mask: np.ndarray) -> np.ndarray:
    """A 3-D boolean mask as planes of bits packed along x (``directed_packed``'s input)."""
    return np.packbits(mask, axis=-1)


def _unpack(packed: np.ndarray, z0: int, z1: int, width: int) -> np.ndarray:
    return np.unpackbits(packed[z0:z1], axis=-1, count=width).view(bool)


def directed_packed(source: np.ndarray, target: np.ndarray, shape: tuple[int, ...], vs: np.ndarray, cap: float) -> float:
    """``directed.directed_dense`` on bit-packed masks (planes packed along x) of a box of ``shape``,
    SLAB_PLANES planes at a time: the target's boundary (each slab with the planes next to it),
    then the outside voxels, all kept when at most KEEP_POINTS, else one per CELL^3 cell and a
    second pass over the cells that could beat the best of them (1-Lipschitz bound)."""
    depth, width = shape[0], shape[2]
    step = SLAB_PLANES
    found = []
    for z0 in range(0, depth, step):
        z1 = min(z0 + step, depth)
        lo, hi = max(z0 - 1, 0), min(z1 + 1, depth)
        edge = inner_boundary(_unpack(target, lo, hi, width))[z0 - lo : z0 - lo + (z1 - z0)]
        found.append(coordinates(edge) + np.array([z0, 0, 0]))
    boundary = np.concatenate(found)
    if len(boundary) == 0:  # the target fills the box: nothing is outside it
        return 0.0
    nearest = Nearest(boundary, vs)
    del found, boundary

    def outside() -> Iterator[np.ndarray]:
        for z0 in range(0, depth, step):
            z1 = min(z0 + step, depth)
            mask = _unpack(source, z0, z1, width) & ~_unpack(target, z0, z1, width)
            yield coordinates(mask) + np.array([z0, 0, 0])

    grid = tuple(-(-n // CELL) for n in shape)
    kept: list[np.ndarray] | None = []
    reps: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    total = 0
    for points in outside():
        if len(points) == 0:
            continue
        total += len(points)
        if kept is not None:
            kept.append(points)
            if total > KEEP_POINTS:
                kept = None
        cell = np.ravel_multi_index(tuple((points // CELL).T), grid)
        unique, first = np.unique(cell, return_index=True)
        reps.append(points[first])
        keys.append(unique)
    if total == 0:
        return 0.0
    if kept is not None:
        return farthest(np.concatenate(kept), nearest, cap)
    at_reps = nearest(np.concatenate(reps))
    best = float(at_reps.max())
    if best >= cap:
        return best
    rho = math.sqrt(float(np.sum(((CELL - 1) * vs) ** 2)))
    open_cells = np.concatenate(keys)[at_reps + rho * (1 + 1e-9) > best]  # sorted: slabs in order, keys sorted in each
    for points in outside():
        if len(points):
            cell = np.ravel_multi_index(tuple((points // CELL).T), grid)
            chosen = points[np.isin(cell, open_cells, assume_unique=False)]
            if len(chosen):
                best = max(best, float(nearest(chosen).max()))
    return best


def packed_pair(packed_a: np.ndarray, packed_b: np.ndarray, shape: tuple[int, ...], vs: np.ndarray, cap: float) -> float:
    d = directed_packed(packed_a, packed_b, shape, vs, cap)
    if d < cap:
        d = max(d, directed_packed(packed_b, packed_a, shape, vs, cap))
    return min(d, cap)


Item = TypeVar("Item", bound=tuple[int, int, object, Box])  # (index, g, parts, union box)


def batches(large: list[Item]) -> Iterator[list[Item]]:
    """The pairs held as packed masks, in groups whose masks fit in PACKED_BYTES together."""
    batch: list[Item] = []
    size = 0
    for item in large:
        need = 2 * volume(item[3]) // 8
        if batch and size + need > PACKED_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += need
    if batch:
        yield batch
