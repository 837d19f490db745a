"""Distances from surface points to the nearest point of another surface, without a distance
transform of the whole volume.

The surface-distance libraries (panoptica, MetricsReloaded, DeepMind's surface-distance)
compute a Euclidean distance transform of the whole (cropped) image from one surface and
read it at the other surface's points; that costs a full pass of an exact EDT over every voxel
of the box, twice per pair of masks. Only the surface points are ever read, and almost all of
them lie within a few voxels of the other surface. So each point here searches outward: the
integer offsets within a radius are listed once, sorted by their physical length, and the
first offset that lands on a target point gives the distance. Points with no target point
within the radius (missed objects, far false positives) are answered by a KD-tree of the
target points. Both answers are exact nearest-point distances.

Every distance is computed from the integer offset to the nearest point exactly as
``scipy.ndimage.distance_transform_edt`` computes it from its feature transform: each axis's
offset times the axis spacing, squared, summed over the axes in order, square-rooted in
float64. Equal offsets therefore give bit-identical distances, and a comparison with a
tolerance ``<= tau`` decides as the libraries do.

Labelled search: with ``labels``, a source point only accepts target points carrying the same
label, so the surfaces of many instances (each against its matched partner) are searched in
one pass over one label map instead of one pass per instance.
"""

import functools
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from evaluation.metrics.lee_thinning import numba  # numba, with its cache folder set up for read-only installs

# Search radius in units of the smallest spacing: a point farther than this from the target
# surface is looked up in a KD-tree instead (a few per cent of the points at most).
SEARCH_RADIUS = 6.0


@dataclass(frozen=True)
class Offsets:
    """Integer offsets within the search radius, shortest first, with their lengths."""

    steps: np.ndarray  # (k, ndim) int64
    length: np.ndarray  # (k,) float64, from offset_length
    reach: tuple[int, ...]  # largest |step| per axis (the padding the search needs)


def offset_length(steps: np.ndarray, spacing) -> np.ndarray:
    """Physical length of integer offsets (n, ndim), in ``distance_transform_edt``'s arithmetic:
    float64 offset times spacing, squared, summed axis by axis, square root."""
    scaled = np.asarray(steps, dtype=np.float64).T.copy()
    for axis, step in enumerate(spacing):
        scaled[axis] *= step
    np.multiply(scaled, scaled, scaled)
    return np.sqrt(np.add.reduce(scaled, axis=0))


@functools.lru_cache(maxsize=32)
def offsets(spacing: tuple[float, ...], radius: float = SEARCH_RADIUS) -> Offsets:
    """The offsets whose length is at most ``radius`` times the smallest spacing."""
    limit = radius * min(spacing)
    reach = tuple(int(np.floor(limit / s)) for s in spacing)
    grids = np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij")
    steps = np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
    length = offset_length(steps, spacing)
    keep = length <= limit
    order = np.argsort(length[keep], kind="stable")
    return Offsets(steps[keep][order], length[keep][order], reach)


if numba is not None:
    @numba.njit(cache=True, nogil=True)
    def _search(grid, bases, wanted, steps, length, out):  # pragma: no cover - compiled
        for i in range(bases.size):
            base = bases[i]
            label = wanted[i]
            out[i] = -1.0
            for k in range(steps.size):
                if grid[base + steps[k]] == label:
                    out[i] = length[k]
                    break
else:  # pragma: no cover - numba is a dependency
    def _search(grid, bases, wanted, steps, length, out):
        for i in range(bases.size):
            hits = np.flatnonzero(grid[bases[i] + steps] == wanted[i])
            out[i] = length[hits[0]] if hits.size else -1.0


def boundary(labels: np.ndarray) -> np.ndarray:
    """Elements of the foreground (non-zero) with a face neighbour of another value or on the
    array's edge: the mask minus its erosion by the cross-shaped element, outside the array
    counting as background (``scipy.ndimage.binary_erosion`` with ``border_value=0``), and for
    a label map the same for every label at once."""
    edge = np.zeros(labels.shape, bool)
    for axis, n in enumerate(labels.shape):
        def part(start, stop, axis=axis):
            return (slice(None),) * axis + (slice(start, stop),)
        differ = labels[part(1, n)] != labels[part(0, n - 1)]
        edge[part(1, n)] |= differ
        edge[part(0, n - 1)] |= differ
        edge[part(0, 1)] = True
        edge[part(n - 1, n)] = True
    edge &= labels != 0
    return edge


def nearest(source: np.ndarray, target: np.ndarray, spacing, labels: np.ndarray | None = None,
            target_points: np.ndarray | None = None) -> np.ndarray:
    """Distance from each source point to the nearest target point.

    ``source``: (n, ndim) integer coordinates in ``target``'s grid. ``target``: a boolean grid
    of target points, or (with ``labels``) a label grid whose non-zero values are target
    points of that label; ``labels`` (n,) is each source point's label. ``target_points``, if
    known, are the target's coordinates (saves a pass). A source point with no target point
    (of its label) gets ``inf``."""
    spacing = tuple(float(s) for s in spacing)
    n = len(source)
    out = np.empty(n, np.float64)
    if n == 0:
        return out
    table = offsets(spacing)
    grid = np.pad(target if labels is not None else target.astype(np.uint8, copy=False),
                  [(r, r) for r in table.reach])
    strides = np.array([s // grid.itemsize for s in grid.strides], np.int64)
    bases = (np.asarray(source, np.int64) + np.array(table.reach, np.int64)) @ strides
    wanted = labels.astype(grid.dtype, copy=False) if labels is not None else np.ones(n, grid.dtype)
    _search(grid.reshape(-1), bases, wanted, table.steps @ strides, table.length, out)
    far = np.flatnonzero(out < 0)
    if far.size:
        points = np.argwhere(target) if target_points is None else target_points
        out[far] = _far(np.asarray(source)[far], points, target, spacing, None if labels is None else labels[far])
    return out


def _far(source: np.ndarray, points: np.ndarray, target: np.ndarray, spacing, labels) -> np.ndarray:
    """The KD-tree answer for points beyond the search radius. Labels become an extra
    coordinate so far apart (more than any distance in the grid) that the nearest point always
    carries the source's label when one exists."""
    if labels is None:
        if len(points) == 0:
            return np.full(len(source), np.inf)
        partner = points[_tree(points * np.asarray(spacing)).query(source * np.asarray(spacing))[1]]
        return offset_length(partner - source, spacing)
    point_labels = target[tuple(points.T)]
    separation = 4.0 * float(np.dot(target.shape, spacing)) + 1.0
    scale = np.asarray(spacing)

    def embed(coords, marks):
        return np.column_stack([coords * scale, marks.astype(np.float64) * separation])

    if len(points) == 0:
        return np.full(len(source), np.inf)
    index = _tree(embed(points, point_labels)).query(embed(source, labels))[1]
    found = point_labels[index] == labels
    out = np.full(len(source), np.inf)
    out[found] = offset_length(points[index[found]] - source[found], spacing)
    return out


def _tree(points: np.ndarray) -> cKDTree:
    """Built unbalanced (sliding midpoint): twice as fast to build for surface point clouds,
    and the queries are exact either way."""
    return cKDTree(points, leafsize=32, balanced_tree=False, compact_nodes=False)
