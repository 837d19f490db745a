"""Betti numbers of a 3-D binary mask: b0 (26-connected components), b2 (cavities: components
of the 6-connected background other than the outside) and b1 (tunnels) from the Euler
characteristic, b1 = b0 + b2 - chi.

chi is that of the union of the closed unit cubes of the mask's voxels (26-connectivity of the
foreground), V - E + F - C, as ``skimage.measure.euler_number(connectivity=3)`` gives it on a
zero-padded image. It is counted in one compiled pass over the 2x2x2 windows of the mask's
bounding box (and the background around it): each lattice vertex owns itself, its three
edges, three faces and one cube in the positive directions, and whether each of those is in
the union depends only on the eight voxels around the vertex, so chi is a sum over the
windows of a 256-entry table. A 2-D mask is one plane of a 3-D one.

TopCoW 2023's ``betti_number`` (CoWBenchmark/TopCoW_Eval_Metrics@7c722ff,
``metric_functions.py``) computes the same three numbers with scikit-image on the whole
padded volume.
"""

from typing import Literal

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba


def _window_table() -> np.ndarray:
    """chi's share of every 2x2x2 window, by the window's voxels as bits ``dz * 4 + dy * 2 +
    dx`` (offsets from the window's first voxel): its centre vertex, minus the edges towards
    +x, +y, +z (each in the four voxels on that side), plus the faces (two voxels each), minus
    the cube (the voxel at +1, +1, +1)."""
    table = np.zeros(256, np.int64)
    for code in range(256):
        occupied = {(dz, dy, dx) for dz in (0, 1) for dy in (0, 1) for dx in (0, 1) if code >> (dz * 4 + dy * 2 + dx) & 1}

        def touches(fixed: tuple[int, ...], occupied: set[tuple[int, int, int]] = occupied) -> bool:
            return any(all(voxel[axis] == 1 for axis in fixed) for voxel in occupied)

        vertex = 1 if occupied else 0
        edges = sum(touches((axis,)) for axis in range(3))
        faces = sum(touches(pair) for pair in ((0, 1), (0, 2), (1, 2)))
        cube = 1 if (1, 1, 1) in occupied else 0
        table[code] = vertex - edges + faces - cube
    return table


WINDOWS = _window_table()


@numba.njit(cache=True, nogil=True)
def _window_codes(mask: np.ndarray, counts: np.ndarray) -> None:  # pragma: no cover - compiled
    """How many 2x2x2 windows of each code the mask has, the windows overlapping the mask by
    at least one voxel (outside the array is background)."""
    nz, ny, nx = mask.shape
    for z in range(-1, nz):
        for y in range(-1, ny):
            for x in range(-1, nx):
                code = 0
                for dz in range(2):
                    zz = z + dz
                    if zz < 0 or zz >= nz:
                        continue
                    for dy in range(2):
                        yy = y + dy
                        if yy < 0 or yy >= ny:
                            continue
                        for dx in range(2):
                            xx = x + dx
                            if 0 <= xx < nx and mask[zz, yy, xx]:
                                code |= 1 << (dz * 4 + dy * 2 + dx)
                counts[code] += 1


def _box(mask: np.ndarray) -> np.ndarray | None:
    """The mask cut to its bounding box (None when it is empty): the rest is background."""
    axes = [np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != axis))) for axis in range(3)]
    if any(found.size == 0 for found in axes):
        return None
    return np.ascontiguousarray(mask[tuple(slice(found[0], found[-1] + 1) for found in axes)], dtype=np.bool_)


def euler_characteristic(mask: np.ndarray) -> int:
    """V - E + F - C of the union of the mask's closed voxel cubes."""
    box = _box(_as_3d(mask))
    if box is None:
        return 0
    counts = np.zeros(256, np.int64)
    _window_codes(box, counts)
    return int(counts @ WINDOWS)


def betti_numbers(mask: np.ndarray) -> tuple[int, int, int]:
    """(b0, b1, b2) of a binary mask: 26-connected components, tunnels, cavities."""
    box = _box(_as_3d(mask))
    if box is None:
        return 0, 0, 0
    b0 = _count(box, 26)
    b2 = _count(np.pad(~box, 1, constant_values=True), 6) - 1
    counts = np.zeros(256, np.int64)
    _window_codes(box, counts)
    return b0, b0 + b2 - int(counts @ WINDOWS), b2


def components(mask: np.ndarray) -> int:
    """b0 alone: the number of 26-connected components (8-connected in 2-D)."""
    box = _box(_as_3d(mask))
    return 0 if box is None else _count(box, 26)


def _count(mask: np.ndarray, connectivity: Literal[6, 26]) -> int:
    """cc3d's number of components, given bytes: cc3d 4.1.1 sizes its union-find table too
    small for some boolean arrays with two axes of length 1 (a row of runs one voxel apart) and
    raises."""
    import cc3d

    return int(cc3d.connected_components(mask.view(np.uint8), connectivity=connectivity, return_N=True)[1])


def _as_3d(mask: np.ndarray) -> np.ndarray:
    return mask.reshape((1,) + mask.shape) if mask.ndim == 2 else mask


def warm_up() -> None:
    def compile_all() -> None:
        _window_codes(np.ones((2, 2, 2), np.bool_), np.zeros(256, np.int64))

    jit.warm_up("Betti numbers", compile_all, [__file__], equivalents=False)
