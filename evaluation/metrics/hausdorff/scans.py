"""The compiled searches: the farthest voxel of one set from another, exactly, without a tree.

On a box of up to SCAN_BOX voxels a compiled scan (``_scan_farthest``) finds the farthest X
voxel outside Y and its distance at once: the exact smallest value of the reference's
arithmetic over all of Y, axis by axis, in a few steps per voxel (past SCAN_STEPS, e.g. a few
lone voxels in a large empty box, it gives the box to the k-d tree of ``directed``).

Between the points of small sets far apart (``sparse``), ``points_farthest`` visits the target's
boundary points in order of their z gap to each source point; past its budget (``directed``'s
POINT_STEPS) the k-d tree answers.

Both stop at the first distance at or above the cap, and give up (-1.0) past their budget of
steps; ``search`` turns that into None, and without numba (``jit``) into None as well.
"""

import math
from collections.abc import Callable

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba

# Boxes of up to this many voxels are scanned by the compiled kernel (two float64 arrays of the
# box), unless it would take more than SCAN_STEPS steps per voxel (lines of voxels far from the
# other set: a few single voxels in a large empty box); the k-d tree then takes over. Sets far
# apart are taken point to point (``planning``'s sparse path) up to this many voxels in all.
SCAN_BOX = 1 << 20
SCAN_STEPS = 16


@numba.njit(inline="always")
def _square(a: float) -> float:  # pragma: no cover - compiled
    return a * a


@numba.njit(inline="always")
def _axis1_min(g: np.ndarray, z: int, y: int, x: int, vy: float) -> tuple[float, int]:  # pragma: no cover - compiled
    """min over y' of ``g[z, y', x] + ((y - y') * vy) ** 2`` and the steps taken: outward
    from y while the term alone is below the best value (``g >= 0`` and rounding is
    monotone, so no farther y' can give less)."""
    ny = g.shape[1]
    best = g[z, y, x]
    d = 1
    while True:
        t = _square(d * vy)
        if t >= best or (y < d and y + d >= ny):
            return best, d
        if y >= d:
            best = min(best, g[z, y - d, x] + t)
        if y + d < ny:
            best = min(best, g[z, y + d, x] + t)
        d += 1


def _scan_farthest(source: np.ndarray, target: np.ndarray, vs: np.ndarray, cap: float, budget: int) -> float:
    """``_scan_kernel`` with its work arrays (allocated here: a kernel that allocates arrays
    takes twice as long to compile, which the first run after an install pays)."""
    nz, ny, nx = target.shape
    work = np.empty((nz, ny, nx)), np.empty((nz, ny, nx)), np.empty((ny, nx), np.int64)
    return _scan_kernel(source, target, vs, cap, budget, *work)


@numba.njit(cache=True, nogil=True)
def _scan_kernel(  # pragma: no cover - compiled
    source: np.ndarray,
    target: np.ndarray,
    vs: np.ndarray,
    cap: float,
    budget: int,
    g: np.ndarray,
    h: np.ndarray,
    last: np.ndarray,
) -> float:
    """max over the voxels of ``source & ~target`` of their distance to ``target`` (3-D,
    both on one box), or -1.0 after more than ``budget`` steps; a value >= cap as soon as
    one is found.

    The squared distance is the smallest over all target voxels of the reference's
    arithmetic ``((dz * vz) ** 2 + (dy * vy) ** 2) + (dx * vx) ** 2`` (package docstring),
    exactly: the first term from each column's nearest target voxel, then axis by axis the
    smallest sum of the previous axes' minimum and the new term, which is the smallest sum
    over all target voxels because ``fl(a + t)`` never decreases as ``a`` grows. Axis 1's
    minima are computed only where axis 2 reads them, and a voxel is dropped as soon as it
    cannot beat the largest distance found."""
    nz, ny, nx = target.shape
    for y in range(ny):
        for x in range(nx):
            last[y, x] = -1
    for z in range(nz):  # axis 0: down, then up
        for y in range(ny):
            for x in range(nx):
                if target[z, y, x]:
                    last[y, x] = z
                g[z, y, x] = math.inf if last[y, x] < 0 else _square((z - last[y, x]) * vs[0])
    for y in range(ny):
        for x in range(nx):
            last[y, x] = -1
    for z in range(nz - 1, -1, -1):
        for y in range(ny):
            for x in range(nx):
                if target[z, y, x]:
                    last[y, x] = z
                if last[y, x] >= 0:
                    g[z, y, x] = min(g[z, y, x], _square((last[y, x] - z) * vs[0]))
    for z in range(nz):  # axis 1's minima where axis 2 has asked for them
        for y in range(ny):
            for x in range(nx):
                h[z, y, x] = -1.0
    top, steps = 0.0, 0
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                if not source[z, y, x] or target[z, y, x]:
                    continue
                d = 0
                best = math.inf
                while best > top:
                    t = _square(d * vs[2])
                    if t >= best or (x < d and x + d >= nx):
                        break
                    for at in (x - d, x + d):
                        if 0 <= at < nx:
                            if h[z, y, at] < 0:
                                h[z, y, at], taken = _axis1_min(g, z, y, at, vs[1])
                                steps += taken
                            best = min(best, h[z, y, at] + t)
                    d += 1
                steps += d
                if steps > budget:
                    return -1.0
                if best > top:
                    top = best
                    if math.sqrt(top) >= cap:
                        return math.sqrt(top)
    return math.sqrt(top)


@numba.njit(cache=True, nogil=True)
def points_farthest(  # pragma: no cover - compiled
    outside: np.ndarray, boundary: np.ndarray, vs: np.ndarray, cap: float, budget: int
) -> float:
    """max over the ``outside`` points (rows) of the smallest reference-arithmetic distance
    to a ``boundary`` point (rows sorted by z), or -1.0 after more than ``budget`` steps; a
    value >= cap as soon as one is found. Each point visits the boundary points in order of
    their z gap, stopping when the gap's term alone reaches the best distance (no later
    point can be nearer) or the best falls to the largest distance found (the point
    cannot raise it)."""
    m = boundary.shape[0]
    top, steps = 0.0, 0
    for i in range(outside.shape[0]):
        z, y, x = outside[i, 0], outside[i, 1], outside[i, 2]
        lo, hi = 0, m
        while lo < hi:  # the first boundary point at or past z (no np.searchsorted: it doubles the compile time)
            mid = (lo + hi) // 2
            if boundary[mid, 0] < z:
                lo = mid + 1
            else:
                hi = mid
        lo = hi - 1
        best = math.inf
        while best > top and (lo >= 0 or hi < m):
            below = lo >= 0 and (hi >= m or z - boundary[lo, 0] <= boundary[hi, 0] - z)
            j = lo if below else hi
            t = _square((boundary[j, 0] - z) * vs[0])
            if t >= best:
                break
            best = min(best, (t + _square((boundary[j, 1] - y) * vs[1])) + _square((boundary[j, 2] - x) * vs[2]))
            if below:
                lo -= 1
            else:
                hi += 1
            steps += 1
        if steps > budget:
            return -1.0
        if best > top:
            top = best
            if math.sqrt(top) >= cap:
                return math.sqrt(top)
    return math.sqrt(top)


def search(kernel: Callable[..., float], *args: object) -> float | None:
    """A compiled search's distance, or None without numba or where it spent its budget."""
    found = jit.run(kernel, lambda *_: -1.0, *args)
    return None if found < 0 else found


def scanned(source: np.ndarray, target: np.ndarray, voxel_size: np.ndarray, cap: float) -> float | None:
    """``_scan_farthest``'s distance, or None where it does not apply or gives up."""
    if source.ndim != 3 or target.size > SCAN_BOX:
        return None
    vs = np.ascontiguousarray(voxel_size, np.float64)
    budget = int(SCAN_STEPS * target.size)
    return search(_scan_farthest, np.ascontiguousarray(source), np.ascontiguousarray(target), vs, float(cap), budget)


def warm_up(background: bool = False) -> None:
    """Compile (or load from numba's cache) the two searches once, e.g. in a parent process
    before it forks a worker per task (``background``: see ``jit.warm_up``)."""

    def compile_all() -> None:
        _scan_farthest(np.ones((1, 1, 2), bool), np.eye(1, 2, dtype=bool)[None], np.ones(3), 1.0, 1)
        points_farthest(np.zeros((1, 3), np.int64), np.ones((1, 3), np.int64), np.ones(3), 1.0, 1)

    jit.warm_up("Hausdorff searches", compile_all, [__file__], background=background)
