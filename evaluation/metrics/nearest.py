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
tolerance ``<= tau`` decides as the libraries do (two offsets of the same true length, such
as (2, 3, 2) and (2, 2, 3) steps, may differ in the last bit).

A surface is a ``PointSet``: its points marked on a zero-padded grid (the padding is the
search's reach, so a search never leaves the array) and their flat indices. Marks are labels:
with ``labelled`` distances a source point only accepts target points of its own label, so
the surfaces of many instances (each against its matched partner) are searched in one pass
over one label map instead of one pass per instance.
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from evaluation.metrics import portable
from evaluation.metrics.jit import numba

# Search radius in units of the smallest spacing: a point farther than this from the target
# surface is looked up in a KD-tree instead (a few per cent of the points at most).
SEARCH_RADIUS = 6.0


@dataclass(frozen=True)
class Offsets:
    """Integer offsets within the search radius, shortest first, with their lengths."""

    steps: np.ndarray  # (k, ndim) int64
    length: np.ndarray  # (k,) float64, from offset_length
    reach: tuple[int, ...]  # largest |step| per axis (the padding the search needs)


def offset_length(steps: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """Physical length of integer offsets (n, ndim), in ``distance_transform_edt``'s arithmetic:
    float64 offset times spacing, squared, summed axis by axis, square root."""
    scaled = np.asarray(steps, dtype=np.float64).T.copy()
    for axis, step in enumerate(spacing):
        scaled[axis] *= step
    np.multiply(scaled, scaled, scaled)
    length: npt.NDArray[np.float64] = np.sqrt(np.add.reduce(scaled, axis=0))
    return length


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


@dataclass(frozen=True)
class PointSet:
    """The points of one surface: marked (label, or any non-zero value) on ``grid``, the image
    padded by ``reach`` on both sides of every axis (``shape``); ``index`` their flat indices in
    raster order, ``marks`` their marks. A set used only as a source needs no grid
    (``released``)."""

    grid: np.ndarray | None
    index: np.ndarray
    reach: tuple[int, ...]
    shape: tuple[int, ...]
    marks: np.ndarray

    @classmethod
    def on(cls, grid: np.ndarray, index: np.ndarray, reach: tuple[int, ...]) -> "PointSet":
        return cls(grid, index, reach, grid.shape, grid.reshape(-1)[index])

    def released(self) -> "PointSet":
        return replace(self, grid=None)

    @property
    def size(self) -> int:
        return int(self.index.size)

    def coords(self, which: np.ndarray | None = None) -> np.ndarray:
        """Image coordinates (n, ndim) of the points (or of ``which`` of them)."""
        chosen = self.index if which is None else self.index[which]
        coords: np.ndarray = np.stack(np.unravel_index(chosen, self.shape), axis=1) - np.asarray(self.reach)
        return coords


def padded(shape: tuple[int, ...], reach: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    return np.zeros(tuple(n + 2 * r for n, r in zip(shape, reach)), dtype)


def as_3d(array: np.ndarray) -> np.ndarray:
    """The compiled kernels work on 3-D arrays; a 2-D image is one plane (``planar``)."""
    return array.reshape((1,) + array.shape) if array.ndim == 2 else array


@numba.njit(cache=True, nogil=True, inline="always")
def mapped(lut: np.ndarray, default: int, v: int) -> int:  # pragma: no cover - compiled
    """``v`` through the lookup table: itself for an empty table, ``default`` beyond it."""
    if lut.size == 0:
        return v
    return lut[v] if v < lut.size else default


@numba.njit(cache=True, nogil=True, inline="always")
def _differs(  # pragma: no cover - compiled
    labels: np.ndarray, lut: np.ndarray, default: int, z: int, y: int, x: int, raw: int, v: int
) -> bool:
    """Whether the element at (z, y, x) has another (relabelled) value than ``v``, the value
    of a neighbour whose own label is ``raw``: equal labels need no lookup."""
    other = labels[z, y, x]
    return other != raw and mapped(lut, default, other) != v


@numba.njit(cache=True, nogil=True, inline="always")
def _is_edge(  # pragma: no cover - compiled
    labels: np.ndarray, lut: np.ndarray, default: int, planar: bool, z: int, y: int, x: int, raw: int, v: int
) -> bool:
    depth, rows, columns = labels.shape
    if (
        y == 0
        or y == rows - 1
        or x == 0
        or x == columns - 1
        or _differs(labels, lut, default, z, y - 1, x, raw, v)
        or _differs(labels, lut, default, z, y + 1, x, raw, v)
        or _differs(labels, lut, default, z, y, x - 1, raw, v)
        or _differs(labels, lut, default, z, y, x + 1, raw, v)
    ):
        return True
    return not planar and (
        z == 0
        or z == depth - 1
        or _differs(labels, lut, default, z - 1, y, x, raw, v)
        or _differs(labels, lut, default, z + 1, y, x, raw, v)
    )


@numba.njit(cache=True, nogil=True)
def _edges(  # pragma: no cover - compiled
    labels: np.ndarray, lut: np.ndarray, default: int, planar: bool, pz: int, py: int, px: int, grid: np.ndarray
) -> int:
    """Marks the edges of the relabelled map (``mapped``) on ``grid``; their count."""
    depth, rows, columns = labels.shape
    count = 0
    for z in range(depth):
        for y in range(rows):
            for x in range(columns):
                raw = labels[z, y, x]
                if raw == 0:
                    continue
                v = mapped(lut, default, raw)
                if v != 0 and _is_edge(labels, lut, default, planar, z, y, x, raw, v):
                    grid[z + pz, y + py, x + px] = v
                    count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _marked(grid: np.ndarray, index: np.ndarray) -> None:  # pragma: no cover - compiled
    """The flat indices of the non-zero elements of ``grid``, in raster order."""
    count = 0
    for i in range(grid.size):
        if grid[i] != 0:
            index[count] = i
            count += 1


@numba.njit(cache=True, nogil=True)
def _search_any(  # pragma: no cover - compiled
    grid: np.ndarray, bases: np.ndarray, steps: np.ndarray, length: np.ndarray, out: np.ndarray
) -> None:
    for i in range(bases.size):
        out[i] = -1.0
        for k in range(steps.size):
            if grid[bases[i] + steps[k]] != 0:
                out[i] = length[k]
                break


@numba.njit(cache=True, nogil=True)
def _search_label(  # pragma: no cover - compiled
    grid: np.ndarray, bases: np.ndarray, wanted: np.ndarray, steps: np.ndarray, length: np.ndarray, out: np.ndarray
) -> None:
    for i in range(bases.size):
        out[i] = -1.0
        for k in range(steps.size):
            if grid[bases[i] + steps[k]] == wanted[i]:
                out[i] = length[k]
                break


def edge_points(labels: np.ndarray, spacing: Sequence[float], relabel: np.ndarray | None = None, default: int = 0) -> PointSet:
    """The boundary of every label at once: non-zero elements with a face neighbour of another
    value or on the array's edge, i.e. each label's mask minus its erosion by the cross-shaped
    element, outside the array counting as background (``scipy.ndimage.binary_erosion`` with
    ``border_value=0``). Boolean masks are marked 1, label maps with their label. With
    ``relabel`` (a lookup table over the labels, ``default`` for labels beyond it), the
    boundaries of the relabelled map, without building it: a class's mask or a map of
    matched instances straight from the label map."""
    reach = offsets(tuple(float(s) for s in spacing)).reach
    values = labels.view(np.uint8) if labels.dtype == bool else labels
    lut = np.zeros(0, values.dtype) if relabel is None else relabel
    grid = padded(labels.shape, reach, lut.dtype)
    pz, py, px = (0,) * (3 - labels.ndim) + reach
    count = _edges(as_3d(values), lut, lut.dtype.type(default), labels.ndim == 2, pz, py, px, as_3d(grid))
    return marked(grid, count, reach)


def marked(grid: np.ndarray, count: int, reach: tuple[int, ...]) -> PointSet:
    """The ``count`` marked elements of ``grid`` as a point set."""
    index = np.empty(count, np.int64)
    _marked(grid.reshape(-1), index)
    return PointSet.on(grid, index, reach)


def boundary(labels: np.ndarray) -> np.ndarray:
    """The boundary elements (``edge_points``) as a boolean array of ``labels``'s shape."""
    points = edge_points(labels, (1.0,) * labels.ndim)
    assert points.grid is not None  # edge_points returns its grid
    edges: np.ndarray = points.grid[tuple(slice(r, r + n) for r, n in zip(points.reach, labels.shape))] != 0
    return edges


def distance_rank(values: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """The dense rank of each distance among the distinct values (equal values, equal rank),
    for sorting by distance in linear time: a distance found within the search radius is one
    of the offset lengths; the rest rank after all of them."""
    lengths = np.unique(offsets(tuple(float(s) for s in spacing)).length)
    rank = np.searchsorted(lengths, values)
    beyond = np.flatnonzero(rank >= lengths.size)
    if beyond.size:
        far = np.unique(values[beyond])
        rank[beyond] = lengths.size + np.searchsorted(far, values[beyond])
    return rank


# A grid of at least this many elements is not kept while the other set's grid is built
# (``both_ways``): rebuilding it costs one more pass, keeping it a copy of the image.
LARGE_GRID = 1 << 23


def both_ways(
    build_a: Callable[[], PointSet], build_b: Callable[[], PointSet], spacing: Sequence[float], labelled: bool = False
) -> tuple[PointSet, PointSet, np.ndarray, np.ndarray]:
    """(a, b, distances a -> b, distances b -> a) of two point sets made by ``build_a`` and
    ``build_b``; for large grids with only one grid alive at a time (a's is built twice)."""
    a = build_a()
    assert a.grid is not None  # a new point set has its grid
    large = a.grid.size >= LARGE_GRID
    if large:
        a = a.released()
    b = build_b()
    to_b = distances(a, b, spacing, labelled)
    if large:
        b = b.released()
    to_a = distances(b, build_a() if large else a, spacing, labelled)
    return a.released(), b.released(), to_b, to_a


def distances(source: PointSet, target: PointSet, spacing: Sequence[float], labelled: bool = False) -> np.ndarray:
    """Distance from each source point to the nearest target point (of the same label when
    ``labelled``); ``inf`` when there is none. Both sets must be on grids of the same shape."""
    spacing = tuple(float(s) for s in spacing)
    out = np.empty(source.size, np.float64)
    if source.size == 0:
        return out
    if target.size == 0:
        out[:] = np.inf
        return out
    table = offsets(spacing)
    assert target.grid is not None  # only a source may be released
    strides = np.array([s // target.grid.itemsize for s in target.grid.strides], np.int64)
    steps = table.steps @ strides
    flat = target.grid.reshape(-1)
    if labelled:
        _search_label(flat, source.index, source.marks.astype(flat.dtype), steps, table.length, out)
    else:
        _search_any(flat, source.index, steps, table.length, out)
    far = np.flatnonzero(out < 0)
    if far.size:
        out[far] = _far(source.coords(far), source.marks[far] if labelled else None, target, spacing)
    return out


def _far(source: np.ndarray, labels: np.ndarray | None, target: PointSet, spacing: Sequence[float]) -> np.ndarray:
    """The KD-tree answer for points beyond the search radius. Labels become an extra
    coordinate so far apart (more than any distance in the grid) that the nearest point always
    carries the source's label when one exists; only the target points of those labels take
    part."""
    chosen = None if labels is None else np.flatnonzero(np.isin(target.marks, labels))
    if chosen is not None and not chosen.size:
        return np.full(len(source), np.inf)
    separation = 4.0 * portable.dot(target.shape, spacing) + 1.0
    point_labels = None if chosen is None else target.marks[chosen]
    tree = _tree(_embedded(target, chosen, spacing, point_labels, separation))
    query = np.column_stack([source * np.asarray(spacing)] + ([] if labels is None else [labels.astype(np.float64) * separation]))
    index = tree.query(query)[1]
    found = np.ones(len(source), bool) if point_labels is None else point_labels[index] == labels
    out = np.full(len(source), np.inf)
    out[found] = offset_length(target.coords(index[found] if chosen is None else chosen[index[found]]) - source[found], spacing)
    return out


def _embedded(
    target: PointSet, chosen: np.ndarray | None, spacing: Sequence[float], labels: np.ndarray | None, separation: float
) -> np.ndarray:
    """The target points (or the ``chosen`` ones) in physical coordinates, plus the label
    coordinate: one float64 array, filled axis by axis."""
    index = target.index if chosen is None else target.index[chosen]
    ndim = len(target.shape)
    out = np.empty((index.size, ndim + (labels is not None)), np.float64)
    stride = 1
    for axis in reversed(range(ndim)):
        np.multiply((index // stride) % target.shape[axis] - target.reach[axis], spacing[axis], out=out[:, axis])
        stride *= target.shape[axis]
    if labels is not None:
        np.multiply(labels, separation, out=out[:, -1], casting="unsafe")
    return out


def _tree(points: np.ndarray) -> Any:
    """A ``cKDTree`` built unbalanced (sliding midpoint): twice as fast to build for surface
    point clouds, and the queries are exact either way; it keeps a view of ``points`` instead
    of a copy. Imported on first use (a heavy import most masks never need)."""
    from scipy.spatial import cKDTree  # type: ignore[import-untyped]  # scipy has no type information

    return cKDTree(points, leafsize=32, balanced_tree=False, compact_nodes=False, copy_data=False)
