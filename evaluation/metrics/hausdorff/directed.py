"""The directed distance ``h(X, Y)``: the farthest voxel of X outside Y, measured exactly.

On a box that holds both sets (``directed_dense``), up to SCAN_BOX voxels, the compiled scan of
``scans`` answers. On larger boxes, or where the scan gives up, the farthest X voxel outside Y
is found among its candidates by a k-d tree over Y's boundary voxels: all of them when they are
few (a jittered nucleus leaves a thin crescent); otherwise either a compiled multi-threaded anisotropic EDT (the ``edt``
package, float32, distances only, no feature transform) locates the few voxels within a
relative 1e-4 of its maximum, or, without ``edt``, one voxel per cell bounds the rest (the
distance is 1-Lipschitz), so only cells that could beat the best value found are searched
(``farthest``, coarse to fine). The float32 EDT only says where to look: the value reported is
always the reference's arithmetic on the offset to the nearest boundary voxel (``Nearest``).

Between point sets (``directed_points``, small sets far apart) the compiled point search of
``scans`` answers, the k-d tree past POINT_STEPS steps per point.

``Nearest`` and ``farthest`` also serve the sets measured on their own boxes (``own``) and as
bit-packed masks (``packed``).
"""

import math
from typing import Any

import numpy as np

from evaluation.metrics.hausdorff import scans
from evaluation.metrics.hausdorff.boxes import coordinates, distance, inner_boundary

try:  # a compiled, multi-threaded anisotropic EDT; without it the k-d tree does everything
    import edt as _edt  # type: ignore[import-not-found]  # a compiled module without type information
except ImportError:  # pragma: no cover - edt is a dependency
    _edt = None

POINT_STEPS = 256  # the compiled search among far-apart sets' points: steps per point before the tree
# Outside voxels up to which all are looked up in the tree; beyond, candidates first.
DIRECT_QUERIES = 5_000
# The EDT locates candidates when the outside voxels are more than this share of the box.
EDT_SHARE = 1 / 24
# Candidates of the float32 EDT: squared distances within this relative margin of its maximum
# (its error is about 1e-7 relative; the margin is 500 times that).
EDT_MARGIN = 1e-4
LEVELS = (16, 8, 4, 2)  # edges of the cells of the branch and bound over outside voxels, coarse to fine
FEW_POINTS = 256  # outside voxels the branch and bound measures one by one
THREADS = 1  # threads of one EDT or tree query: one, since the instances themselves run on the task's threads


def _kd_tree(points: np.ndarray) -> Any:
    """A k-d tree over ``points`` (unbalanced: built twice as fast, and queried faster on these
    surface-like point sets); scipy.spatial is imported on first use (0.2 s)."""
    from scipy.spatial import cKDTree  # type: ignore[import-untyped]  # scipy has no type information

    return cKDTree(points, balanced_tree=False)


class Nearest:
    """Exact distances from voxels to a set, as ``distance_transform_edt`` computes them: the
    nearest of the set's boundary voxels by a k-d tree, then the reference's arithmetic."""

    def __init__(self, boundary: np.ndarray, voxel_size: np.ndarray) -> None:
        self.boundary, self.vs = boundary, voxel_size
        self.tree = _kd_tree(boundary * voxel_size)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        if len(points) == 0:
            return np.zeros(0)
        _, nearest = self.tree.query(points * self.vs, workers=THREADS)
        return distance(self.boundary[nearest] - points, self.vs)


def farthest(points: np.ndarray, nearest: Nearest, cap: float) -> float:
    """max over ``points`` of the exact distance, or a value >= cap as soon as one is seen.
    Many points: branch and bound over cells, coarse to fine (LEVELS, in voxels): one point
    per cell is measured, and no voxel of the cell can be farther than that point's distance
    + the cell's diagonal (the distance is 1-Lipschitz), so only cells that could beat the best
    distance measured go on to the next level; the last survivors are measured one by one. A
    far set (half a nucleus away from the other half) is decided by a few thousand
    measurements instead of one per voxel; the work per level is a few passes over the
    survivors' coordinates, axis by axis."""
    if len(points) <= DIRECT_QUERIES:
        return float(nearest(points).max()) if len(points) else 0.0
    columns = [np.ascontiguousarray(points[:, axis]) for axis in range(points.shape[1])]
    chosen = np.arange(len(points))
    best = 0.0
    for cell in LEVELS:
        if len(chosen) <= FEW_POINTS:
            break
        cells = [column[chosen] // cell for column in columns]
        key = np.zeros(len(chosen), np.int64)
        for c in cells:
            low, extent = int(c.min()), int(c.max() - c.min()) + 1
            key *= extent
            key += c - low
        size = int(key.max()) + 1
        if size <= 8 * len(chosen) + 4096:  # a dense table of the cells: no sort
            rep = np.full(size, -1, np.int64)
            rep[key] = np.arange(len(chosen))
            occupied = np.flatnonzero(rep >= 0)
            measured = nearest(points[chosen[rep[occupied]]])
            at_cell = np.empty(size)
            at_cell[occupied] = measured
            at = at_cell[key]
        else:
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            measured = nearest(points[chosen[first]])
            at = measured[inverse.ravel()]
        best = max(best, float(measured.max()))
        if best >= cap:
            return best
        # margins for the rounding of the reference arithmetic
        diagonal = math.sqrt(float(np.sum(((cell - 1) * nearest.vs) ** 2)))
        chosen = chosen[at + diagonal * (1 + 1e-9) + 1e-9 * best > best]
    return max(best, float(nearest(points[chosen]).max())) if len(chosen) else best


def directed_dense(source: np.ndarray, target: np.ndarray, voxel_size: np.ndarray, cap: float = math.inf) -> float:
    """max over source voxels of the distance to the nearest target voxel (target non-empty),
    both masks on one box that holds both sets."""
    scanned = scans.scanned(source, target, voxel_size, cap)
    if scanned is not None:
        return scanned
    outside = source & ~target
    count = int(np.count_nonzero(outside))
    if count == 0:
        return 0.0
    nearest = Nearest(coordinates(inner_boundary(target)), voxel_size)
    if _edt is not None and count > DIRECT_QUERIES and count > EDT_SHARE * target.size:
        squared = _edt.edtsq(
            np.ascontiguousarray(~target, dtype=np.uint8),
            anisotropy=tuple(float(v) for v in voxel_size),
            black_border=False,
            parallel=THREADS,
        )
        top = float(squared[outside].max())
        if math.sqrt(top) * (1 - EDT_MARGIN) > cap:
            return math.sqrt(top)  # at the cap whatever the last bits
        outside &= squared >= np.float32(top * (1 - EDT_MARGIN))
        return float(nearest(coordinates(outside)).max())
    return farthest(coordinates(outside), nearest, cap)


def directed_points(outside: np.ndarray, boundary: np.ndarray, voxel_size: np.ndarray, cap: float) -> float:
    """max over the ``outside`` points of the distance to the nearest ``boundary`` point (a
    value >= cap may stand for any larger one): compiled, or by a k-d tree where the points lie
    too close in z for the compiled search (more than POINT_STEPS steps per point)."""
    if outside.size == 0:
        return 0.0
    if outside.shape[1] == 3:
        by_z = np.ascontiguousarray(boundary[np.argsort(boundary[:, 0], kind="stable")], np.int64)
        vs = np.ascontiguousarray(voxel_size, np.float64)
        budget = POINT_STEPS * (len(outside) + len(boundary))
        found = scans.search(scans.points_farthest, np.ascontiguousarray(outside, np.int64), by_z, vs, float(cap), budget)
        if found is not None:
            return found
    _, nearest = _kd_tree(boundary * voxel_size).query(outside * voxel_size, workers=THREADS)
    return float(distance(boundary[nearest] - outside, voxel_size).max())
