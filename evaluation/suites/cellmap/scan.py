"""The tiles of the instance pass joined in raster order into what ``cc3d`` gives the whole
array: the prediction's components numbered as ``cc3d.connected_components`` numbers them (the
call of ``utils/eval_utils/instance_matching.py``), with the contingency table, binary counts,
truth boxes and runs of the whole crop.

Each tile (``tiles.tile_work``) arrives with its components numbered provisionally, after those
of the tiles before it. Components that touch across a tile face (26-connected, same value) are
one component: the tile's first z, y and x planes are compared with the planes kept of the tiles
before it (the whole last plane of the previous layer of tiles, the last y-plane of the previous
band across all of x, the last x-plane of the tile before), which hold every voxel diagonally
across. ``cc3d`` numbers components in raster order of their first voxel, so sorting the joined
components by their first voxel gives exactly the numbering ``cc3d`` gives the whole array, and
the contingency table, component sizes and boxes follow through one lookup table.

The runs along x of every truth id and every component are recorded while they fit RUN_BYTES
each: the per-instance distances then paint their sets from them instead of reading the volumes
again (``streamed_sets.StreamedSets``).
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics.overlap import BinaryCounts, Contingency
from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.tiles import TileWork

RUN_BYTES = 192 << 20  # runs recorded for the distances, of the truth and of the components each


@dataclass(frozen=True)
class Components:
    """The prediction's connected components, numbered 1..n as ``cc3d`` numbers the whole
    array: voxel counts ``[n + 1]`` (index 0: background), boxes ``[n + 1, 6]`` (z0, y0, x0, z1,
    y1, x1) and the raster index of each one's first voxel ``[n + 1]``."""

    n: int
    sizes: np.ndarray
    boxes: np.ndarray
    first: np.ndarray

    def box(self, p: int) -> tuple[slice, ...]:
        row = self.boxes[p]
        return tuple(slice(int(a), int(b)) for a, b in zip(row[:3], row[3:]))


def _face_pairs(cur_labels, cur_values, cur_origin, nb_labels, nb_values, nb_origin) -> np.ndarray:
    """Provisional ids (rows of pairs) of voxels that touch across a tile face with the same
    value: ``cur`` is the tile's face plane, ``nb`` the already scanned plane next to it; planes
    are 2-D with their first element at ``cur_origin`` / ``nb_origin`` (crop coordinates of the
    plane's two axes); 26-connectivity pairs every voxel with the 3 x 3 voxels facing it."""
    found = []
    if not cur_labels.any():
        return np.zeros((0, 2), np.int64)
    rows, columns = cur_labels.shape
    for di in (-1, 0, 1):
        shift = di + cur_origin[0] - nb_origin[0]
        lo, hi = max(0, -shift), min(rows, nb_labels.shape[0] - shift)
        if hi <= lo:
            continue
        for dj in (-1, 0, 1):
            step = dj + cur_origin[1] - nb_origin[1]
            jl, jh = max(0, -step), min(columns, nb_labels.shape[1] - step)
            if jh <= jl:
                continue
            a = cur_labels[lo:hi, jl:jh]
            b = nb_labels[lo + shift : hi + shift, jl + step : jh + step]
            touch = (a != 0) & (b != 0)
            touch &= cur_values[lo:hi, jl:jh] == nb_values[lo + shift : hi + shift, jl + step : jh + step]
            if touch.any():
                found.append(np.stack([a[touch], b[touch]], axis=1))
    if not found:
        return np.zeros((0, 2), np.int64)
    pairs = np.concatenate(found)
    span = int(pairs[:, 1].max()) + 1
    keys = np.unique(pairs[:, 0] * span + pairs[:, 1])  # provisional ids are far below 2^31
    return np.stack([keys // span, keys % span], axis=1)


class Scan:
    """Accumulates the tiles of one crop, in raster order (see the module docstring)."""

    def __init__(self, shape, special: bool = False, record: bool = True):
        self.shape, self.special = tuple(shape), special
        self.multi_rows, self.single_rows = 0, set()  # rows holding foreground: see ``rows``
        self.tiles = []  # (box, provisional base) of every tile read
        # the runs along x of every truth id and every component, while they fit RUN_BYTES each
        self.truth_runs, self.pred_runs = ([], []) if record else (None, None)
        self.run_bytes = [0, 0]
        self.sizes, self.first, self.boxes = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], [np.zeros((1, 6), np.int64)]
        self.tables, self.truth_rows, self.pairs, self.maxima = [], [], [], []
        self.n_truth = self.n_pred_fg = self.tp = self.total = 0
        self.count = 0  # provisional components so far
        # the last planes of what was scanned before, (labels, values): of the previous z-layer
        # of tiles (the whole y-x plane), of the previous y-band in this layer (its z-range, all
        # of x) and of the tile just before in this band (its z and y ranges), and where they are
        self.layer = self.band = None
        self.z_prev = self.z_cur = self.y_prev = self.y_cur = self.x_prev = None

    @property
    def rows(self) -> int:
        """The x-rows of the crop holding foreground, counted once where tiles split a row (at
        least 2 when there are several)."""
        return self.multi_rows + len(self.single_rows)

    def take(self, work: TileWork, truth_dtype) -> None:
        """Join one tile's work (``tiles.tile_work``) to the tiles before it: its components
        numbered provisionally after theirs, its contingency, runs and boxes in crop
        coordinates, its faces paired with theirs."""
        box = work.box
        origin = np.array([s.start for s in box], np.int64)
        base = self.count
        self.tiles.append((box, base))
        if work.stats is not None:
            sizes, first, boxes, _, label_runs = work.stats
            n = work.n
            if work.single_row is not None:
                self.single_rows.add(work.single_row)
            else:
                self.multi_rows += work.rows
            self.count += n
            # provisional ids base+1 .. base+n: sizes, boxes and first voxels in crop coordinates
            shape = volumes.box_shape(box)
            coords = np.stack(np.unravel_index(first[1:], shape), axis=1) + origin if n else np.zeros((0, 3), np.int64)
            self.sizes.append(sizes[1:])
            self.first.append(np.ravel_multi_index(coords.T, self.shape).astype(np.int64) if n else np.zeros(0, np.int64))
            self.boxes.append(boxes[1:] + np.concatenate([origin, origin]))
            self.n_pred_fg += int(sizes.sum())
            if label_runs is not None:
                at, length, label = label_runs
                self._record(1, (at, length, label + base), origin)
        for at, ids, truth_boxes, a, b, count, fg, runs in work.blocks:
            self._record(0, runs, at)
            self.tables.append((a, np.where(b > 0, b + base, 0), count))
            self.n_truth += fg
            self.tp += int(count[b > 0].sum())
            if ids.size:
                self.truth_rows.append((ids, truth_boxes + np.concatenate([at, at])))
        self.maxima.extend(work.maxima)
        size = volumes.box_size(box)
        if work.covered < size:  # the rest of the tile is zero
            self.maxima.append(np.zeros(1, truth_dtype)[0])
        self.total += size
        self._faces(box, work.faces, base)

    def _record(self, which: int, runs, origin) -> None:
        """Keep runs (0: truth, 1: components) in crop coordinates, or give up on them for good
        once they pass RUN_BYTES (the distances then read the volumes again)."""
        kept = self.truth_runs if which == 0 else self.pred_runs
        if kept is None:
            return
        at, length, key = runs
        self.run_bytes[which] += len(length) * 24
        if self.run_bytes[which] > RUN_BYTES:
            if which == 0:
                self.truth_runs = None
            else:
                self.pred_runs = None
            return
        kept.append(((at + np.asarray(origin, np.int32)).astype(np.int32), length.astype(np.int32), key))

    def add_empty(self, box, truth_dtype) -> None:
        """A tile where neither truth nor prediction has anything stored: all zeros."""
        self.maxima.append(np.zeros(1, truth_dtype)[0])
        self.total += volumes.box_size(box)
        self._faces(box, None, 0)

    def _faces(self, box, faces, base) -> None:
        """Pairs across the tile's lower z, y and x faces (26-connected: the faces' planes are
        compared with what lies diagonally across them too, which the planes kept of whole
        layers and bands hold); keeps its upper faces for the tiles after. A tile without
        foreground (``faces`` None) leaves zeros."""

        def provisional(plane):
            out = plane.astype(np.int64)
            out[plane != 0] += base
            return out

        (z0, z1), (y0, y1), (x0, x1) = ((s.start, s.stop) for s in box)
        if self.layer != (z0, z1):  # a new z-layer of tiles
            self.z_prev, self.z_cur, self.layer, self.band, self.y_cur = self.z_cur, None, (z0, z1), None, None
        if self.band != (y0, y1):  # a new y-band of tiles in this layer
            self.y_prev, self.y_cur, self.band, self.x_prev = self.y_cur, None, (y0, y1), None
        if faces is None:
            self.x_prev = None
            return
        if self.z_prev is not None:
            ly, lx = max(0, y0 - 1), max(0, x0 - 1)
            nb_labels, nb_values = self.z_prev
            region = (slice(ly, y1 + 1), slice(lx, x1 + 1))
            labels, values = faces["z0"]
            self.pairs.append(_face_pairs(provisional(labels), values, (y0, x0), nb_labels[region], nb_values[region], (ly, lx)))
        if self.y_prev is not None:
            lx = max(0, x0 - 1)
            nb_labels, nb_values = self.y_prev
            labels, values = faces["y0"]
            self.pairs.append(
                _face_pairs(provisional(labels), values, (z0, x0), nb_labels[:, lx : x1 + 1], nb_values[:, lx : x1 + 1], (z0, lx))
            )
        if self.x_prev is not None and self.x_prev[2] == x0:
            labels, values = faces["x0"]
            self.pairs.append(_face_pairs(provisional(labels), values, (z0, y0), self.x_prev[0], self.x_prev[1], (z0, y0)))
        labels, values = faces["z1"]
        if self.z_cur is None:
            self.z_cur = (np.zeros(self.shape[1:], np.int64), np.zeros(self.shape[1:], values.dtype))
        self.z_cur[0][y0:y1, x0:x1], self.z_cur[1][y0:y1, x0:x1] = provisional(labels), values
        labels, values = faces["y1"]
        if self.y_cur is None:
            self.y_cur = (np.zeros((z1 - z0, self.shape[2]), np.int64), np.zeros((z1 - z0, self.shape[2]), values.dtype))
        self.y_cur[0][:, x0:x1], self.y_cur[1][:, x0:x1] = provisional(labels), values
        labels, values = faces["x1"]
        self.x_prev = (provisional(labels), values, x1)

    def finish(self) -> dict:
        """Join the provisional components, number them as ``cc3d`` does and aggregate: the
        fields of ``instances.Instances`` the pass finds (the crop's shape, the components, the
        truth's largest id, the contingency, binary counts, truth boxes, the tiles read with the
        lookup table that numbers their components, and the runs recorded)."""
        count = self.count
        sizes, first, boxes = (np.concatenate(x) for x in (self.sizes, self.first, self.boxes))
        if self.pairs and sum(len(p) for p in self.pairs):
            from scipy.sparse import coo_matrix  # here, not at import: 0.25 s, and one tile needs none
            from scipy.sparse.csgraph import connected_components

            pairs = np.concatenate(self.pairs)
            graph = coo_matrix((np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])), shape=(count + 1, count + 1))
            _, group = connected_components(graph, directed=False)
        else:
            group = np.arange(count + 1)
        lut = np.zeros(count + 1, np.int64)
        n_pred = 0
        if count:
            order = np.lexsort((first[1:], group[1:]))
            grouped = group[1:][order]
            heads = np.flatnonzero(np.diff(grouped, prepend=-1))
            ranking = np.argsort(first[1:][order][heads], kind="stable")
            number = np.zeros(group.max() + 1, np.int64)
            number[grouped[heads][ranking]] = np.arange(1, heads.size + 1)
            lut[1:] = number[group[1:]]
            n_pred = int(heads.size)
        components = _aggregate(lut, n_pred, sizes, first, boxes, self.total)
        table = _merge_tables(self.tables, lut)
        counts = BinaryCounts(
            tp=self.tp,
            fp=self.n_pred_fg - self.tp,
            fn=self.n_truth - self.tp,
            tn=self.total - self.n_truth - self.n_pred_fg + self.tp,
        )
        n_gt = int(np.max(np.array(self.maxima))) if self.maxima else 0
        truth_boxes = _merge_boxes(self.truth_rows)
        return {
            "shape": self.shape,
            "n_pred": n_pred,
            "n_gt": n_gt,
            "table": table,
            "counts": counts,
            "components": components,
            "truth_boxes": truth_boxes,
            "tiles": tuple(self.tiles),
            "lut": lut,
            "special": self.special,
            "truth_runs": _sorted_runs(self.truth_runs),
            "pred_runs": _sorted_runs(self.pred_runs, lut),
        }


def _sorted_runs(kept, lut=None):
    """Recorded runs as (keys ascending, (z, y, x) starts, lengths), components renumbered by
    ``lut``; None if they were given up."""
    if kept is None:
        return None
    if not kept:
        return np.zeros(0, np.uint64), np.zeros((0, 3), np.int32), np.zeros(0, np.int32)
    at = np.concatenate([k[0] for k in kept])
    length = np.concatenate([k[1] for k in kept])
    key = np.concatenate([k[2] for k in kept])
    key = lut[key] if lut is not None else key.astype(np.uint64)
    order = np.argsort(key, kind="stable")
    return key[order], at[order], length[order]


def _aggregate(lut, n_pred, sizes, first, boxes, total) -> Components:
    out_sizes = np.zeros(n_pred + 1, np.int64)
    out_first = np.zeros(n_pred + 1, np.int64)
    out_boxes = np.zeros((n_pred + 1, 6), np.int64)
    if n_pred:
        order = np.argsort(lut[1:], kind="stable")
        keys = lut[1:][order]
        heads = np.flatnonzero(np.diff(keys, prepend=0))
        out_sizes[1:] = np.add.reduceat(sizes[1:][order], heads)
        out_first[1:] = np.minimum.reduceat(first[1:][order], heads)
        out_boxes[1:, :3] = np.minimum.reduceat(boxes[1:][order, :3], heads)
        out_boxes[1:, 3:] = np.maximum.reduceat(boxes[1:][order, 3:], heads)
    out_sizes[0] = total - int(out_sizes.sum())
    return Components(n_pred, out_sizes, out_boxes, out_first)


def _merge_tables(tables, lut) -> Contingency:
    """The tiles' contingency rows with their components renumbered, summed per (truth, component)
    and sorted ascending by (truth, component), as ``contingency`` orders one table."""
    if not tables:
        return Contingency(np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64))
    a = np.concatenate([t[0] for t in tables]).astype(np.uint64, copy=False)
    b = lut[np.concatenate([t[1] for t in tables])].astype(np.uint64)
    count = np.concatenate([t[2] for t in tables]).astype(np.int64, copy=False)
    if a.size == 0:
        return Contingency(a, b, count)
    order = np.lexsort((b, a))
    a, b, count = a[order], b[order], count[order]
    heads = np.flatnonzero(np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])]))
    return Contingency(a[heads], b[heads], np.add.reduceat(count, heads))


def _merge_boxes(rows) -> dict[int, tuple[slice, ...]]:
    if not rows:
        return {}
    ids = np.concatenate([r[0] for r in rows]).astype(np.uint64)
    boxes = np.concatenate([r[1] for r in rows])
    order = np.argsort(ids, kind="stable")
    ids, boxes = ids[order], boxes[order]
    heads = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    low, high = np.minimum.reduceat(boxes[:, :3], heads), np.maximum.reduceat(boxes[:, 3:], heads)
    return {int(g): tuple(slice(int(a), int(b)) for a, b in zip(lo, hi)) for g, lo, hi in zip(ids[heads], low, high)}
