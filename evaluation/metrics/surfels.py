"""Surface elements on the voxel-corner grid, weighted by their area (length in 2-D).

DeepMind's surface-distance (google-deepmind/surface-distance@1f805ce,
``surface_distance/metrics.py: compute_surface_distances``) does not measure distances between
boundary voxels: it places a point on every voxel corner, codes the 2x2(x2) voxels around it
as a 4-bit (8-bit) number, and keeps the corners whose code is neither empty nor full. Each
such corner carries the area of the surface a marching-cubes triangulation puts in that
neighbourhood (``surface_distance/lookup_tables.py:
create_table_neighbour_code_to_surface_area`` and ``..._contour_length``), scaled by the
spacing. MONAI's ``SurfaceDiceMetric(use_subvoxels=True)`` uses the same corners and areas.

The 3-D table is rebuilt here from the marching-cubes triangulation of each of the 256
neighbourhoods (scikit-image's ``marching_cubes(method='lorensen')``), taking the complement's
triangulation for neighbourhoods with more than four voxels set, as that table does; the area
of a triangle after scaling is the norm of its area vector with each component multiplied by
the spacings of the two other axes. The tests check the areas against the conformance kit's.
"""

import functools
import math
from collections.abc import Sequence

import numpy as np

from evaluation.metrics import portable
from evaluation.metrics.jit import numba
from evaluation.metrics.nearest import PointSet, as_3d, mapped, marked, offsets, padded


@numba.njit(cache=True, nogil=True)
def _codes(  # pragma: no cover - compiled
    mask: np.ndarray, lut: np.ndarray, default: int, planar: bool, pz: int, py: int, px: int, grid: np.ndarray
) -> None:
    """Every foreground voxel (non-zero through ``mapped``) sets its bit in the codes of
    its 4 (8) corners, on the padded corner grid."""
    depth, rows, columns = mask.shape
    for z in range(depth):
        for y in range(rows):
            for x in range(columns):
                v = mask[z, y, x]
                if v == 0 or mapped(lut, default, v) == 0:
                    continue
                for b in range(2):
                    for c in range(2):
                        if planar:
                            grid[pz, y + 1 - b + py, x + 1 - c + px] |= 1 << (3 - 2 * b - c)
                        else:
                            for a in range(2):
                                grid[z + 1 - a + pz, y + 1 - b + py, x + 1 - c + px] |= 1 << (7 - 4 * a - 2 * b - c)


@numba.njit(cache=True, nogil=True)
def _keep_surfels(grid: np.ndarray, full: int) -> int:  # pragma: no cover - compiled
    """Clears the full codes (inside the mask): what remains non-zero are the surfels,
    neither empty nor full; returns their count."""
    count = 0
    for i in range(grid.size):
        if grid[i] == full:
            grid[i] = 0
        elif grid[i] != 0:
            count += 1
    return count


def corner_points(mask: np.ndarray, spacing: Sequence[float], relabel: np.ndarray | None = None, default: int = 0) -> PointSet:
    """The surfels of ``mask`` (or of the labels ``relabel`` maps to non-zero, as in
    ``nearest.edge_points``) as points on its corner grid (one more than the mask on every
    axis, padded for the search), each marked with its neighbourhood code (surface_distance's
    ENCODE_NEIGHBOURHOOD_*_KERNEL: the corner at grid index j sits between voxels j-1 and j)."""
    reach = offsets(tuple(float(s) for s in spacing)).reach
    grid = padded(tuple(n + 1 for n in mask.shape), reach, np.uint8)
    values = mask.view(np.uint8) if mask.dtype == bool else mask
    lut = np.zeros(0, values.dtype) if relabel is None else relabel
    pz, py, px = (0,) * (3 - mask.ndim) + reach
    _codes(as_3d(values), lut, lut.dtype.type(default), mask.ndim == 2, pz, py, px, as_3d(grid))
    return marked(grid, _keep_surfels(grid.reshape(-1), (1 << (1 << mask.ndim)) - 1), reach)


@functools.cache
def triangle_area_vectors() -> tuple[np.ndarray, ...]:
    """Per 3-D neighbourhood code, the area vectors (n, 3) of its marching-cubes triangles."""
    from skimage.measure import marching_cubes

    table = []
    for code in range(256):
        corners = bin(code).count("1")
        if corners in (0, 8):
            table.append(np.zeros((0, 3)))
            continue
        meshed = code if corners <= 4 else 255 - code
        cube = np.array(
            [[[(meshed >> (7 - (4 * a + 2 * b + c))) & 1 for c in (0, 1)] for b in (0, 1)] for a in (0, 1)], np.float64
        )
        vertices, faces, _, _ = marching_cubes(cube, 0.5, method="lorensen")
        first, second, third = (vertices[faces[:, k]].astype(np.float64) for k in range(3))
        table.append(np.cross(second - first, third - first) / 2)
    return tuple(table)


@functools.lru_cache(maxsize=32)
def area_table(spacing: tuple[float, ...]) -> np.ndarray:
    """Surface area (3-D) or contour length (2-D) of every neighbourhood code, in float64."""
    if len(spacing) == 2:
        return _contour_lengths(spacing)
    table = np.zeros(256)
    for code, vectors in enumerate(triangle_area_vectors()):
        total = 0.0
        for n0, n1, n2 in vectors:
            total += portable.norm((n0 * spacing[1] * spacing[2], n1 * spacing[0] * spacing[2], n2 * spacing[0] * spacing[1]))
        table[code] = total
    return table


def _contour_lengths(spacing: tuple[float, float]) -> np.ndarray:
    """2-D: half a diagonal per cut corner, a full side for a straight edge, two half
    diagonals for the two saddle codes (surface_distance's contour-length table)."""
    diagonal = 0.5 * math.sqrt(spacing[0] ** 2 + spacing[1] ** 2)
    table = np.zeros(16)
    table[[0b0001, 0b0010, 0b0100, 0b1000, 0b0111, 0b1011, 0b1101, 0b1110]] = diagonal
    table[[0b0011, 0b1100]] = spacing[1]
    table[[0b0101, 0b1010]] = spacing[0]
    table[[0b0110, 0b1001]] = 2 * diagonal
    return table
