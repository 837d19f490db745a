"""Per-label statistics of a 3-D label block in one pass: voxel counts, bounding boxes and the
first voxel in raster order (components), or bounding boxes of arbitrary (e.g. uint64) ids.

These are what a tile-by-tile pass over a large volume keeps of each tile instead of the tile
itself. Compiled with numba (a dependency; ``numba_cache`` finds the compiled kernels in a
read-only install); without it, scipy/numpy equivalents give the same results more slowly.
"""

import numpy as np
from numba import types
from numba.typed import Dict

from evaluation.metrics import jit
from evaluation.metrics.jit import numba


@numba.njit(cache=True, nogil=True)
def _component_stats(labels, n, sizes, first, boxes, keep_runs):
    """Sizes, first voxels and boxes from the runs of equal labels along x; the number of
    rows holding a label; the runs themselves if ``keep_runs``. Two passes, so that no
    array grows inside the loops."""
    nz, ny, nx = labels.shape
    runs = 0
    rows = 0
    for z in range(nz):
        for y in range(ny):
            x = 0
            found = False
            while x < nx:
                label = labels[z, y, x]
                x += 1
                if label == 0:
                    continue
                while x < nx and labels[z, y, x] == label:
                    x += 1
                runs += 1
                found = True
            if found:
                rows += 1
    kept = runs if keep_runs else 0
    at = np.empty((kept, 3), np.int32)
    length = np.empty(kept, np.int32)
    which = np.empty(kept, np.int64)
    run = 0
    for z in range(nz):
        for y in range(ny):
            x = 0
            while x < nx:
                k = labels[z, y, x]
                start = x
                x += 1
                if k == 0:
                    continue
                while x < nx and labels[z, y, x] == k:
                    x += 1
                if sizes[k] == 0:
                    first[k] = (z * ny + y) * nx + start
                    boxes[k, 0], boxes[k, 1], boxes[k, 2] = z, y, start
                    boxes[k, 3], boxes[k, 4], boxes[k, 5] = z + 1, y + 1, x
                else:
                    if y < boxes[k, 1]:
                        boxes[k, 1] = y
                    if start < boxes[k, 2]:
                        boxes[k, 2] = start
                    boxes[k, 3] = z + 1
                    if y + 1 > boxes[k, 4]:
                        boxes[k, 4] = y + 1
                    if x > boxes[k, 5]:
                        boxes[k, 5] = x
                sizes[k] += x - start
                if keep_runs:
                    at[run, 0], at[run, 1], at[run, 2] = z, y, start
                    length[run] = x - start
                    which[run] = k
                    run += 1
    return rows, at, length, which


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


@numba.njit(cache=True, nogil=True, inline="always")
def _index(ids, cache_value, cache_index, key):
    """The index of ``key`` in ``ids`` (a typed dict), through a small direct-mapped cache."""
    slot = (key ^ (key >> 17)) & 63
    if cache_index[slot] >= 0 and cache_value[slot] == key:
        return cache_index[slot]
    if key in ids:
        k = ids[key]
    else:
        k = len(ids)
        ids[key] = k
    cache_value[slot] = key
    cache_index[slot] = k
    return k


@numba.njit(cache=True, nogil=True)
def _overlaps(values, labels):
    """Runs of equal (value, label) along x for values > 0: (distinct values as int64, their
    boxes, and per run its value's index, label and length). Two passes, so that no array
    grows inside the loops (numba then keeps them in registers)."""
    ids = Dict.empty(key_type=types.int64, value_type=types.int64)
    cache_value = np.zeros(64, np.int64)
    cache_index = np.full(64, -1, np.int64)
    nz, ny, nx = values.shape
    runs = 0
    for z in range(nz):
        for y in range(ny):
            x = 0
            while x < nx:
                v = values[z, y, x]
                if not v > 0:
                    x += 1
                    continue
                label = labels[z, y, x]
                x += 1
                while x < nx and values[z, y, x] == v and labels[z, y, x] == label:
                    x += 1
                _index(ids, cache_value, cache_index, np.int64(v))
                runs += 1
    count = len(ids)
    id_values = np.empty(count, np.int64)
    for key, k in ids.items():
        id_values[k] = key
    boxes = np.zeros((count, 6), np.int64)
    boxes[:, 0] = boxes[:, 1] = boxes[:, 2] = 1 << 62
    run_id = np.empty(runs, np.int64)
    run_label = np.empty(runs, np.int64)
    run_length = np.empty(runs, np.int64)
    run_at = np.empty((runs, 3), np.int32)
    run = 0
    for z in range(nz):
        for y in range(ny):
            x = 0
            while x < nx:
                v = values[z, y, x]
                if not v > 0:
                    x += 1
                    continue
                label = labels[z, y, x]
                start = x
                x += 1
                while x < nx and values[z, y, x] == v and labels[z, y, x] == label:
                    x += 1
                k = _index(ids, cache_value, cache_index, np.int64(v))
                if z < boxes[k, 0]:
                    boxes[k, 0] = z
                if y < boxes[k, 1]:
                    boxes[k, 1] = y
                if start < boxes[k, 2]:
                    boxes[k, 2] = start
                boxes[k, 3] = z + 1
                if y + 1 > boxes[k, 4]:
                    boxes[k, 4] = y + 1
                if x > boxes[k, 5]:
                    boxes[k, 5] = x
                run_id[run] = k
                run_label[run] = label
                run_length[run] = x - start
                run_at[run, 0], run_at[run, 1], run_at[run, 2] = z, y, start
                run += 1
    return id_values, boxes, run_id, run_label, run_length, run_at


def component_stats(labels: np.ndarray, n: int, keep_runs: bool = False):
    """For connected-component labels 1..n of a 3-D block (numbered in raster order of their
    first voxel, as ``cc3d.connected_components`` numbers them): int64 voxel counts ``[n + 1]``
    (index 0 unused, 0), raster index of each label's first voxel ``[n + 1]``, bounding boxes
    ``[n + 1, 6]`` as (z0, y0, x0, z1, y1, x1), the number of x-rows holding a label, and with
    ``keep_runs`` the runs along x (as ``_label_runs``), else None."""
    labels = np.ascontiguousarray(labels)
    sizes = np.zeros(n + 1, np.int64)
    first = np.full(n + 1, -1, np.int64)
    boxes = np.zeros((n + 1, 6), np.int64)

    def fallback(labels, n, sizes, first, boxes, keep_runs):
        from scipy import ndimage

        flat = labels.reshape(-1)
        counts = np.bincount(flat.astype(np.intp), minlength=n + 1)
        sizes[1:] = counts[1 : n + 1]
        running = np.maximum.accumulate(flat)
        starts = np.flatnonzero(np.diff(running, prepend=running.dtype.type(0)) > 0)
        first[flat[starts].astype(np.intp)] = starts
        for k, box in enumerate(ndimage.find_objects(labels, max_label=n), start=1):
            if box is not None:
                boxes[k] = [s.start for s in box] + [s.stop for s in box]
        rows = int(np.count_nonzero(labels.reshape(-1, labels.shape[-1]).any(axis=1))) if labels.size else 0
        return (rows, *_label_runs(labels)) if keep_runs else (rows, None, None, None)

    rows, at, length, which = jit.run(_component_stats, fallback, labels, n, sizes, first, boxes, keep_runs)
    return sizes, first, boxes, int(rows), ((at, length, which) if keep_runs else None)


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
        from scipy import ndimage

        dense = np.where(values > 0, np.searchsorted(ids, values) + 1, 0)
        for k, box in enumerate(ndimage.find_objects(dense, max_label=ids.size)):
            if box is not None:
                boxes[k] = [s.start for s in box] + [s.stop for s in box]

    if values.dtype == bool:
        values, ids = values.view(np.uint8), ids.view(np.uint8)
    jit.run(_id_boxes, fallback, values, ids, boxes)
    return boxes


def overlaps(values: np.ndarray, labels: np.ndarray, n_labels: int):
    """One pass over a 3-D block of integer ``values`` (e.g. truth ids, of any integer or
    boolean dtype) and its component ``labels`` (1..``n_labels``, 0 = background), restricted
    to ``values > 0``: (distinct values, ascending, as uint64; their boxes ``[k, 6]``; the
    overlapping (value, label) pairs as uint64 value, int64 label, int64 count, unordered; the
    voxel count; the runs: (z, y, x start) int32 rows, lengths, values). What
    ``overlap.contingency`` with ``where=values > 0`` and ``id_boxes`` give, in one pass over runs
    along x instead of single voxels."""
    if values.dtype.kind not in "uib":
        raise TypeError(f"labels must be integers or booleans, not {values.dtype}")
    values = np.ascontiguousarray(values.view(np.uint8) if values.dtype == bool else values)
    labels = np.ascontiguousarray(labels)

    def fallback(values, labels):
        fg = values > 0
        rows = values.reshape(-1, values.shape[-1])
        change = np.ones(rows.shape, bool)  # a run starts where value or label changes
        change[:, 1:] = (rows[:, 1:] != rows[:, :-1]) | (labels.reshape(rows.shape)[:, 1:] != labels.reshape(rows.shape)[:, :-1])
        starts = np.flatnonzero(change.ravel() & fg.ravel())
        ends = np.flatnonzero(np.append(change.ravel()[1:], True) & fg.ravel())  # last voxel of each run
        start_values = values.ravel()[starts]
        ids = np.unique(start_values)
        at = np.stack(np.unravel_index(starts, values.shape), axis=1).astype(np.int32)
        return (
            ids.astype(np.uint64).view(np.int64),
            id_boxes(values, ids),
            np.searchsorted(ids, start_values),
            labels.ravel()[starts].astype(np.int64),
            ends - starts + 1,
            at,
        )

    ids, boxes, index, label, length, at = jit.run(_overlaps, fallback, values, labels)
    span = int(n_labels) + 1
    key = index * span + label
    if ids.size * span <= (8 << 20):
        counts = np.bincount(key, weights=length, minlength=ids.size * span)
        key = np.flatnonzero(counts)
        counts = counts[key].astype(np.int64)
    else:
        key, inverse = np.unique(key, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=length).astype(np.int64)
    ids = ids.view(np.uint64)
    order = np.argsort(ids, kind="stable")
    return ids[order], boxes[order], ids[key // span], key % span, counts, int(counts.sum()), (at, length, ids[index])


def _label_runs(labels: np.ndarray):
    """Runs of equal non-zero ``labels`` along x of a 3-D block: ((z, y, x start) int32 rows,
    int32 lengths, int64 labels), in raster order (the numpy equivalent of the runs that
    ``_component_stats`` keeps)."""
    rows = labels.reshape(-1, labels.shape[-1])
    change = np.ones(rows.shape, bool)
    change[:, 1:] = rows[:, 1:] != rows[:, :-1]
    flat, nonzero = change.ravel(), labels.ravel() != 0
    starts = np.flatnonzero(flat & nonzero)
    ends = np.flatnonzero(np.append(flat[1:], True) & nonzero)
    at = np.stack(np.unravel_index(starts, labels.shape), axis=1).astype(np.int32)
    return at, (ends - starts + 1).astype(np.int32), labels.ravel()[starts].astype(np.int64)


# Typical dtypes: truth ids (uint8 .. uint64, int32/int64) and cc3d's labels (uint16, uint32).
VALUE_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64, np.int32, np.int64)
LABEL_DTYPES = (np.uint16, np.uint32)


def warm_up(value_dtypes=VALUE_DTYPES, label_dtypes=LABEL_DTYPES) -> None:
    """Compile (or load from numba's cache) the kernels for these dtypes once, e.g. in a parent
    process before it forks a worker per task, so that no worker pays for it. If compiling
    fails, the numpy equivalents are used from then on (same results, slower)."""

    def compile_all():
        for label_dtype in label_dtypes:
            labels = np.zeros((1, 1, 2), label_dtype)
            for keep in (False, True):
                _component_stats(labels, 0, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((1, 6), np.int64), keep)
            for value_dtype in value_dtypes:
                value_dtype = np.dtype(value_dtype)
                _overlaps(np.zeros((1, 1, 2), np.uint8 if value_dtype.kind == "b" else value_dtype), labels)
        _paint(np.zeros((1, 1, 2), bool), np.zeros((1, 3), np.int32), np.ones(1, np.int32), np.zeros(3, np.int64))

    jit.warm_up("label statistics", compile_all, [__file__])


@numba.njit(cache=True, nogil=True)
def _paint(mask, at, length, origin):
    for i in range(at.shape[0]):
        z, y, x = at[i, 0] - origin[0], at[i, 1] - origin[1], at[i, 2] - origin[2]
        for j in range(x, x + length[i]):
            mask[z, y, j] = True


def paint_runs(mask: np.ndarray, at: np.ndarray, length: np.ndarray, origin) -> np.ndarray:
    """Set the runs ((z, y, x start) rows and lengths, in the coordinates ``origin`` is given in)
    in the boolean 3-D ``mask``, which must hold them all."""
    origin = np.asarray(origin, np.int64)

    def fallback(mask, at, length, origin):
        for (z, y, x), n in zip(at - origin, length):
            mask[z, y, x : x + n] = True

    if len(at):
        jit.run(_paint, fallback, mask, np.ascontiguousarray(at, np.int32), np.ascontiguousarray(length, np.int32), origin)
    return mask
