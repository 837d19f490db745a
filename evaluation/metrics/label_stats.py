"""Per-label statistics of a 3-D label block in one pass: voxel counts, bounding boxes and the
first voxel in raster order (components), or bounding boxes of arbitrary (e.g. uint64) ids.

These are what a tile-by-tile pass over a large volume keeps of each tile instead of the tile
itself. Compiled with numba (a dependency; ``numba_cache`` finds the compiled kernels in a
read-only install); without it, scipy/numpy equivalents give the same results more slowly.

The kernels read each voxel once: the runs along x they record go into arrays sized for the
runs a block of large objects has (a few per row), and a kernel that runs out of room stops
before a row, to be resumed from there with larger arrays (so nothing is allocated for the
worst case, one run per voxel, unless a block has it). Ids are grouped from the runs
afterwards, by sorting them, not by a hash table in the kernel (numba compiles a typed
dictionary in seconds, which the first run after an install pays).
"""

from collections.abc import Iterable

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba


@numba.njit(cache=True, nogil=True)
def _component_stats(
    labels: np.ndarray,
    start: int,
    sizes: np.ndarray,
    first: np.ndarray,
    boxes: np.ndarray,
    at: np.ndarray,
    length: np.ndarray,
    which: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """From row ``start`` (``z * ny + y``) on: sizes, first voxels and boxes from the runs of
    equal labels along x, and the runs themselves into ``at``, ``length``, ``which`` (when they
    have room at all) while they have room for a whole row; (rows holding a label, runs
    written, the row to resume from: ``nz * ny`` when done)."""
    nz, ny, nx = labels.shape
    keep = length.shape[0] > 0
    rows = 0
    run = 0
    row = start
    while row < nz * ny:
        if keep and run + nx > length.shape[0]:
            break
        z = row // ny
        y = row - z * ny
        found = False
        x = 0
        while x < nx:
            k = labels[z, y, x]
            begin = x
            x += 1
            if k == 0:
                continue
            while x < nx and labels[z, y, x] == k:
                x += 1
            found = True
            if sizes[k] == 0:
                first[k] = (z * ny + y) * nx + begin
                boxes[k, 0], boxes[k, 1], boxes[k, 2] = z, y, begin
                boxes[k, 3], boxes[k, 4], boxes[k, 5] = z + 1, y + 1, x
            else:
                if y < boxes[k, 1]:
                    boxes[k, 1] = y
                if begin < boxes[k, 2]:
                    boxes[k, 2] = begin
                boxes[k, 3] = z + 1
                if y + 1 > boxes[k, 4]:
                    boxes[k, 4] = y + 1
                if x > boxes[k, 5]:
                    boxes[k, 5] = x
            sizes[k] += x - begin
            if keep:
                at[run, 0], at[run, 1], at[run, 2] = z, y, begin
                length[run] = x - begin
                which[run] = k
                run += 1
        if found:
            rows += 1
        row += 1
    return rows, run, row


@numba.njit(cache=True, nogil=True)
def _overlaps(
    values: np.ndarray,
    labels: np.ndarray,
    start: int,
    run_value: np.ndarray,
    run_label: np.ndarray,
    run_length: np.ndarray,
    run_at: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """From row ``start`` on: the runs of equal (value, label) along x where value > 0 (value
    as int64, label, length, (z, y, x) start) while the arrays have room for a whole row;
    (runs written, the row to resume from: ``nz * ny`` when done)."""
    nz, ny, nx = values.shape
    run = 0
    row = start
    while row < nz * ny:
        if run + nx > run_length.shape[0]:
            break
        z = row // ny
        y = row - z * ny
        x = 0
        while x < nx:
            v = values[z, y, x]
            if not v > 0:
                x += 1
                continue
            label = labels[z, y, x]
            begin = x
            x += 1
            while x < nx and values[z, y, x] == v and labels[z, y, x] == label:
                x += 1
            run_value[run] = np.int64(v)
            run_label[run] = label
            run_length[run] = x - begin
            run_at[run, 0], run_at[run, 1], run_at[run, 2] = z, y, begin
            run += 1
        row += 1
    return run, row


def _capacity(shape: tuple[int, ...]) -> int:
    """Runs first made room for: a few per row (large objects), at least one row's worth."""
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    return max(int(shape[-1]), 4 * rows, 1024)


Runs = tuple[np.ndarray, np.ndarray, np.ndarray]  # (z, y, x start) int32 rows, lengths, labels or values


def component_stats(
    labels: np.ndarray, n: int, keep_runs: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, Runs | None]:
    """For connected-component labels 1..n of a 3-D block (numbered in raster order of their
    first voxel, as ``cc3d.connected_components`` numbers them): int64 voxel counts ``[n + 1]``
    (index 0 unused, 0), raster index of each label's first voxel ``[n + 1]``, bounding boxes
    ``[n + 1, 6]`` as (z0, y0, x0, z1, y1, x1), the number of x-rows holding a label, and with
    ``keep_runs`` the runs along x (as ``_label_runs``), else None."""
    labels = np.ascontiguousarray(labels)
    sizes = np.zeros(n + 1, np.int64)
    first = np.full(n + 1, -1, np.int64)
    boxes = np.zeros((n + 1, 6), np.int64)

    Found = tuple[int, np.ndarray | None, np.ndarray | None, np.ndarray | None]

    def compiled(labels: np.ndarray, n: int, sizes: np.ndarray, first: np.ndarray, boxes: np.ndarray, keep_runs: bool) -> Found:
        capacity = _capacity(labels.shape) if keep_runs else 0
        rows, row, kept = 0, 0, list[Runs]()
        while True:
            at, length, which = np.empty((capacity, 3), np.int32), np.empty(capacity, np.int32), np.empty(capacity, np.int64)
            found, count, row = _component_stats(labels, row, sizes, first, boxes, at, length, which)
            rows += found
            kept.append((at[:count], length[:count], which[:count]))
            if row >= labels.shape[0] * labels.shape[1]:
                break
            capacity *= 2
        if not keep_runs:
            return rows, None, None, None
        if len(kept) == 1:
            at, length, which = (np.array(a) for a in kept[0])  # a copy of the part written
            return rows, at, length, which
        at, length, which = (np.concatenate(parts) for parts in zip(*kept))
        return rows, at, length, which

    def fallback(labels: np.ndarray, n: int, sizes: np.ndarray, first: np.ndarray, boxes: np.ndarray, keep_runs: bool) -> Found:
        from scipy import ndimage  # type: ignore[import-untyped]  # scipy has no type information

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

    rows, at, length, which = jit.run(compiled, fallback, labels, n, sizes, first, boxes, keep_runs)
    runs = (at, length, which) if at is not None and length is not None and which is not None else None
    return sizes, first, boxes, int(rows), runs


def id_boxes(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Bounding boxes ``[len(ids), 6]`` (z0, y0, x0, z1, y1, x1) of the voxels equal to each of
    ``ids`` (sorted, positive, all present in ``values``, values of ``values``' dtype); voxels
    that are not ``> 0`` are ignored (the numpy equivalent of the boxes ``overlaps`` finds)."""
    from scipy import ndimage

    values = np.ascontiguousarray(values.view(np.uint8) if values.dtype == bool else values)
    ids = np.ascontiguousarray(ids, dtype=values.dtype)
    boxes = np.zeros((ids.size, 6), np.int64)
    if ids.size == 0:
        return boxes
    dense = np.where(values > 0, np.searchsorted(ids, values) + 1, 0)
    for k, box in enumerate(ndimage.find_objects(dense, max_label=ids.size)):
        if box is not None:
            boxes[k] = [s.start for s in box] + [s.stop for s in box]
    return boxes


Overlaps = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, Runs]
RunGroups = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def overlaps(values: np.ndarray, labels: np.ndarray, n_labels: int) -> Overlaps:
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

    def fallback(values: np.ndarray, labels: np.ndarray) -> RunGroups:
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

    def compiled(values: np.ndarray, labels: np.ndarray) -> RunGroups:
        capacity, row, kept = _capacity(values.shape), 0, list[tuple[np.ndarray, ...]]()
        while True:
            arrays = np.empty(capacity, np.int64), np.empty(capacity, np.int64), np.empty(capacity, np.int64)
            at = np.empty((capacity, 3), np.int32)
            count, row = _overlaps(values, labels, row, *arrays, at)
            kept.append(tuple(a[:count] for a in (*arrays, at)))
            if row >= values.shape[0] * values.shape[1]:
                break
            capacity *= 2
        value, label, length, at = (np.concatenate(parts) if len(kept) > 1 else parts[0] for parts in zip(*kept))
        ids, index = np.unique(value, return_inverse=True)
        return ids, _run_boxes(index.ravel(), at, length, ids.size), index.ravel(), label, length, at

    ids, boxes, index, label, length, at = jit.run(compiled, fallback, values, labels)
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


def _run_boxes(index: np.ndarray, at: np.ndarray, length: np.ndarray, count: int) -> np.ndarray:
    """Bounding boxes ``[count, 6]`` of the runs grouped by ``index`` (each of 0..count-1 has
    runs): (z0, y0, x0, z1, y1, x1) from their (z, y, x) starts and lengths."""
    boxes = np.zeros((count, 6), np.int64)
    if count == 0:
        return boxes
    order = np.argsort(index, kind="stable")
    heads = np.flatnonzero(np.diff(index[order], prepend=-1))
    at = at[order].astype(np.int64)
    boxes[:, :3] = np.minimum.reduceat(at, heads, axis=0)
    boxes[:, 3:5] = np.maximum.reduceat(at[:, :2], heads, axis=0) + 1
    boxes[:, 5] = np.maximum.reduceat(at[:, 2] + length[order], heads)
    return boxes


def _label_runs(labels: np.ndarray) -> Runs:
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


def warm_up(
    value_dtypes: Iterable[type | np.dtype] = (np.uint8, np.uint16, np.uint32, np.uint64, np.int32, np.int64), runs: bool = True
) -> None:
    """Compile (or load from numba's cache) the kernels for truth values of these dtypes once,
    e.g. in a parent process before it forks a worker per task, so that no worker pays for it
    (components are always labelled as uint32: ``cellmap.tiles.tile_components``); ``runs``: also
    the painting of recorded runs, which only crops of several tiles use. Only what a run
    needs: each kernel and dtype costs the first run after an install 0.2 s. If compiling
    fails, the numpy equivalents are used from then on (same results, slower)."""

    def compile_all() -> None:
        labels = np.zeros((1, 1, 2), np.uint32)
        stats = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((1, 6), np.int64)
        _component_stats(labels, 0, *stats, np.zeros((0, 3), np.int32), np.zeros(0, np.int32), np.zeros(0, np.int64))
        for value_dtype in value_dtypes:
            value_dtype = np.dtype(value_dtype)
            values = np.zeros((1, 1, 2), np.uint8 if value_dtype.kind == "b" else value_dtype)
            found = np.zeros(2, np.int64)
            _overlaps(values, labels, 0, found, found.copy(), found.copy(), np.zeros((2, 3), np.int32))
        if runs:
            _paint(np.zeros((1, 1, 2), bool), np.zeros((1, 3), np.int32), np.ones(1, np.int32), np.zeros(3, np.int64))

    jit.warm_up("label statistics", compile_all, [__file__])


@numba.njit(cache=True, nogil=True)
def _paint(mask: np.ndarray, at: np.ndarray, length: np.ndarray, origin: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(at.shape[0]):
        z, y, x = at[i, 0] - origin[0], at[i, 1] - origin[1], at[i, 2] - origin[2]
        for j in range(x, x + length[i]):
            mask[z, y, j] = True


def paint_runs(mask: np.ndarray, at: np.ndarray, length: np.ndarray, origin: object) -> np.ndarray:
    """Set the runs ((z, y, x start) rows and lengths, in the coordinates ``origin`` is given in)
    in the boolean 3-D ``mask``, which must hold them all."""
    offset = np.asarray(origin, np.int64)

    def fallback(mask: np.ndarray, at: np.ndarray, length: np.ndarray, origin: np.ndarray) -> None:
        for (z, y, x), n in zip(at - origin, length):
            mask[z, y, x : x + n] = True

    if len(at):
        jit.run(_paint, fallback, mask, np.ascontiguousarray(at, np.int32), np.ascontiguousarray(length, np.int32), offset)
    return mask
