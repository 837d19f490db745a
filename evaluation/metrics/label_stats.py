"""Per-label statistics of a 3-D label block in one pass: voxel counts, bounding boxes and the
first voxel in raster order (components), or bounding boxes of arbitrary (e.g. uint64) ids.

These are what a tile-by-tile pass over a large volume keeps of each tile instead of the tile
itself. Compiled with numba (a dependency; its cache follows ``lee_thinning``'s read-only-install
rule); without it, scipy/numpy equivalents give the same results more slowly.
"""

import numpy as np
from scipy import ndimage

from evaluation.metrics import lee_thinning  # noqa: F401  (sets numba's cache folder for read-only installs)

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency
    numba = None

_broken = False

if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _component_stats(labels, n, sizes, first, boxes):
        nz, ny, nx = labels.shape
        for z in range(nz):
            for y in range(ny):
                for x in range(nx):
                    k = labels[z, y, x]
                    if k == 0:
                        continue
                    if sizes[k] == 0:
                        first[k] = (z * ny + y) * nx + x
                        boxes[k, 0] = z
                        boxes[k, 1] = y
                        boxes[k, 2] = x
                        boxes[k, 3] = z + 1
                        boxes[k, 4] = y + 1
                        boxes[k, 5] = x + 1
                    else:
                        if y < boxes[k, 1]:
                            boxes[k, 1] = y
                        if x < boxes[k, 2]:
                            boxes[k, 2] = x
                        boxes[k, 3] = z + 1
                        if y + 1 > boxes[k, 4]:
                            boxes[k, 4] = y + 1
                        if x + 1 > boxes[k, 5]:
                            boxes[k, 5] = x + 1
                    sizes[k] += 1

    @numba.njit(cache=True, nogil=True)
    def _id_boxes(values, ids, boxes):
        nz, ny, nx = values.shape
        count = ids.shape[0]
        last_v = values[0, 0, 0]
        last_i = -1
        for z in range(nz):
            for y in range(ny):
                for x in range(nx):
                    v = values[z, y, x]
                    if not v > 0:
                        continue
                    if last_i < 0 or v != last_v:
                        lo, hi = 0, count
                        while lo < hi:
                            mid = (lo + hi) // 2
                            if ids[mid] < v:
                                lo = mid + 1
                            else:
                                hi = mid
                        last_v, last_i = v, lo
                    i = last_i
                    if boxes[i, 3] == 0:
                        boxes[i, 0] = z
                        boxes[i, 1] = y
                        boxes[i, 2] = x
                        boxes[i, 3] = z + 1
                        boxes[i, 4] = y + 1
                        boxes[i, 5] = x + 1
                    else:
                        if y < boxes[i, 1]:
                            boxes[i, 1] = y
                        if x < boxes[i, 2]:
                            boxes[i, 2] = x
                        boxes[i, 3] = z + 1
                        if y + 1 > boxes[i, 4]:
                            boxes[i, 4] = y + 1
                        if x + 1 > boxes[i, 5]:
                            boxes[i, 5] = x + 1


def _compiled() -> bool:
    return numba is not None and not _broken


def _run(kernel, fallback, *args):
    global _broken
    if _compiled():
        try:
            return kernel(*args)
        except Exception as exc:  # a broken toolchain must not stop grading
            from evaluation import log

            log.get(__name__).warning("numba_unavailable", error=f"{type(exc).__name__}: {exc}")
            _broken = True
    return fallback(*args)


def component_stats(labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For connected-component labels 1..n of a 3-D block (numbered in raster order of their
    first voxel, as ``cc3d.connected_components`` numbers them): int64 voxel counts ``[n + 1]``
    (index 0 unused, 0), raster index of each label's first voxel ``[n + 1]`` and bounding boxes
    ``[n + 1, 6]`` as (z0, y0, x0, z1, y1, x1)."""
    labels = np.ascontiguousarray(labels)
    sizes = np.zeros(n + 1, np.int64)
    first = np.full(n + 1, -1, np.int64)
    boxes = np.zeros((n + 1, 6), np.int64)

    def fallback(labels, n, sizes, first, boxes):
        flat = labels.reshape(-1)
        counts = np.bincount(flat.astype(np.intp), minlength=n + 1)
        sizes[1:] = counts[1 : n + 1]
        running = np.maximum.accumulate(flat)
        starts = np.flatnonzero(np.diff(running, prepend=running.dtype.type(0)) > 0)
        first[flat[starts].astype(np.intp)] = starts
        for k, box in enumerate(ndimage.find_objects(labels, max_label=n), start=1):
            if box is not None:
                boxes[k] = [s.start for s in box] + [s.stop for s in box]

    _run(_component_stats, fallback, labels, n, sizes, first, boxes)
    return sizes, first, boxes


def id_boxes(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Bounding boxes ``[len(ids), 6]`` (z0, y0, x0, z1, y1, x1) of the voxels equal to each of
    ``ids`` (sorted, positive, all present in ``values``, values of ``values``' dtype); voxels
    that are not ``> 0`` are ignored."""
    values = np.ascontiguousarray(values)
    ids = np.ascontiguousarray(ids, dtype=values.dtype)
    boxes = np.zeros((ids.size, 6), np.int64)
    if ids.size == 0:
        return boxes

    def fallback(values, ids, boxes):
        dense = np.where(values > 0, np.searchsorted(ids, values) + 1, 0)
        for k, box in enumerate(ndimage.find_objects(dense, max_label=ids.size)):
            if box is not None:
                boxes[k] = [s.start for s in box] + [s.stop for s in box]

    if values.dtype == bool:
        values, ids = values.view(np.uint8), ids.view(np.uint8)
    _run(_id_boxes, fallback, values, ids, boxes)
    return boxes
