"""The instance-label pipeline both reference versions share: connected components, matching
and per-instance distances (``utils/eval_utils/instance_matching.py``, ``distance.py`` and the
first steps of ``scoring.py`` ``score_instance``, unchanged between 0f50f70 and 6b9ad68).

The reference labels the whole prediction with ``cc3d.connected_components`` and keeps the
truth, the prediction and the components in memory (24 bytes per voxel and more: a 1000^3 crop
could not be scored in 7 GiB). Here one pass over the crop in tiles (``volumes.instance_tiles``:
a chunk or a few, in raster order) keeps only what the scores need:

- each tile's components (``cc3d`` on the tile, the same call), numbered provisionally, with
  their voxel count, bounding box and first voxel (``label_stats.component_stats``);
- the pairs of provisional components that touch across a tile face (26-connected, same value),
  from the tile's first z, y and x planes against the planes kept of the tiles before it (the
  whole last plane of the previous layer of tiles, the last y-plane of the previous band across
  all of x, the last x-plane of the tile before), which hold every voxel diagonally across;
- the tile's contingency with the truth (truth foreground only), its truth ids' boxes, the
  binary counts and the truth's maximum.

A tile where neither array stores a chunk is never read: large objects leave most of a crop
empty (a 1000^3 crop of 30 nuclei stores a quarter of its chunks), so the pass costs what the
objects' chunks cost. Tiles are read and labelled on two threads (``_works``: decoding, the
compiled statistics and numpy release the interpreter) and joined in order (``_Scan.take``).

Components joined across faces are one component; ``cc3d`` numbers components in raster order
of their first voxel, so sorting the joined components by their first voxel gives exactly the
numbering ``cc3d`` gives the whole array, and the contingency table, component sizes and boxes
follow through one lookup table. Per-instance distances then read only the boxes they need: the
truth in an instance's box, and a component's voxels as the connected piece of its own box that
contains its first voxel (the component lies wholly inside its box, so nothing outside the box
can change it). A crop that fits in one tile keeps its arrays and never reads twice.
"""

import dataclasses
import threading
from dataclasses import dataclass, field
from functools import cached_property

import cc3d
import numpy as np

from evaluation import machine
from evaluation.metrics import label_stats, portable
from evaluation.metrics.hausdorff import capped_hausdorff_sets
from evaluation.metrics.hausdorff.boxes import coordinates
from evaluation.metrics.hausdorff.packed import pack
from evaluation.metrics.hausdorff.sets import ArraySets
from evaluation.metrics.matching import MatchingFailed, min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import BinaryCounts, Contingency
from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.options import Limits

TOO_MANY = "skipped_too_many_instances"
OVERLAP_VOXELS = 4 << 20  # truth voxels per pass of label_stats.overlaps
RUN_BYTES = 192 << 20  # runs recorded for the distances, of the truth and of the components each


def max_distance(voxel_size, shape) -> float:
    """The Hausdorff cap: half the smallest physical extent of the crop (``distance.py``
    ``compute_max_distance``)."""
    return float(min((float(v) * int(s)) / 2 for v, s in zip(voxel_size, shape)))


def normalize_distances(distances, voxel_size) -> np.ndarray:
    """``1.01 ** (-d / |vs|)`` (``distance.py`` ``normalize_distance``); an infinite distance
    scores 0. The power and the norm are ``portable``'s: numpy's depend on the processor."""
    d = np.asarray(distances, dtype=np.float64)
    return portable.power(1.01, -d / portable.norm(voxel_size))


class Pathological(Exception):
    """The crop cannot be matched; carries the reference's status string (the exceptions of
    ``utils/eval_utils/exceptions.py`` that ``scoring.py`` ``score_instance`` turns into
    ``_create_pathological_scores``)."""


def match_instances(n_gt: int, pred_sizes: np.ndarray, n_pred: int, table: Contingency, limits: Limits) -> dict[int, int]:
    """Prediction component -> truth id (``instance_matching.py`` ``match_instances``). ``n_gt``
    is the truth's largest id, ``pred_sizes`` every component's voxel count, ``table`` the
    truth-foreground contingency of (truth, components). Uses maximum ids, not counts, as the
    reference does."""
    if n_gt == 0 and n_pred == 0:
        return {0: 0}
    if n_gt == 0 or n_pred == 0:
        return {}
    if n_pred / n_gt > limits.ratio_cutoff(n_gt):
        raise Pathological(TOO_MANY)
    overlapping = table.b > 0
    if int(np.count_nonzero(overlapping)) > limits.max_overlap_edges:
        raise Pathological(TOO_MANY)
    _, gt_index = np.unique(table.a, return_inverse=True)
    gt_size = np.bincount(gt_index, weights=table.count)[gt_index[overlapping]]
    pred_size = pred_sizes[table.b[overlapping].astype(np.intp)]
    iou32 = pair_iou32(table.count[overlapping].astype(np.float64), gt_size, pred_size.astype(np.float64))
    keep = iou32 > 0
    if not keep.any():
        return {}
    try:
        return min_cost_flow_matching(
            n_gt, n_pred, table.a[overlapping][keep], table.b[overlapping][keep], iou32[keep], limits.mcmf_cost_scale
        )
    except MatchingFailed:
        raise Pathological("matching_failed") from None


def relabel_table(mapping: dict[int, int], n_pred: int) -> np.ndarray:
    """Component id -> the id it takes after matching (``fastremap.remap`` with
    ``preserve_missing_labels`` in ``scoring.py`` ``score_instance``): matched components take
    their truth id, unmatched ones keep their own id, which can collide with a truth id
    (reference quirk, reproduced)."""
    table = np.arange(n_pred + 1, dtype=np.int64)
    table[np.fromiter(mapping.keys(), dtype=np.int64)] = np.fromiter(mapping.values(), dtype=np.int64)
    return table


# --------------------------------------------------------------------------------------------
# The pass over the tiles


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


def _comparable(values: np.ndarray) -> np.ndarray:
    """The values as ``cc3d`` compares them: float16 by bit pattern, everything else as is."""
    return values.view(np.uint16) if values.dtype == np.float16 else values


def tile_components(p: np.ndarray, special: bool = False, keep_runs: bool = False):
    """``cc3d.connected_components(p)`` of one tile as the whole array's call labels it, and
    its statistics: (labels, count, rows of the tile holding foreground, ``component_stats``).

    ``cc3d`` labels an array whose foreground lies in a single x-row by a shortcut
    (``epl_special_row``) that compares values as int64: equal fractional floats are split and
    uint64 values above 2^63 overflow. A tile can hold a single foreground row where the whole
    prediction does not, so such a tile is labelled by the general algorithm (the row, an empty
    row and a distant dummy voxel, which ``cc3d`` numbers last); ``special`` applies the shortcut
    instead, as the whole call does when the whole prediction has a single foreground row.

    A tile one voxel wide along x is contiguous in both orders, and ``cc3d`` then reads it in
    Fortran order (a column along z becomes its "row"); such a tile is labelled with a zero
    column added, as the whole crop around it would be."""
    if p.ndim == 3 and p.shape[-1] == 1 and p.size > 1:
        padded = np.zeros(p.shape[:2] + (2,), p.dtype)
        padded[..., :1] = p
        labels, n, rows, _ = tile_components(padded, special, False)
        labels = np.ascontiguousarray(labels[..., :1])
        return labels, n, rows, label_stats.component_stats(labels, n, keep_runs)
    try:
        labels, n = cc3d.connected_components(p, return_N=True, out_dtype=np.uint32)
        stats = label_stats.component_stats(labels, int(n), keep_runs)
        if stats[3] != 1:
            return labels, int(n), stats[3], stats
    except (OverflowError, ValueError):  # the shortcut on uint64 above 2^63 or NaN: a single row, below
        pass
    foreground = (_comparable(p) != 0).any(axis=-1)
    at = np.unravel_index(int(np.flatnonzero(foreground.ravel())[0]), foreground.shape)
    row = p[at]
    # the dummy two planes away in a column of its own (a tile one voxel wide would otherwise
    # make the stack a single row along z, labelled by the shortcut again)
    stack = np.zeros((2, 1, row.size) if special else (3, 1, max(row.size, 2)), p.dtype)
    stack[0, 0, : row.size] = row
    if not special:
        stack[2, 0, -1] = 1
    labels, n = cc3d.connected_components(stack, return_N=True, out_dtype=np.uint32)
    out = np.zeros(p.shape, labels.dtype)
    out[at] = labels[0, 0, : row.size]
    n = int(n) - (0 if special else 1)
    return out, n, 1, label_stats.component_stats(out, n, keep_runs)


@dataclass
class _TileWork:
    """What the pass keeps of one tile, in the tile's own numbering (``_work``): its components'
    count, statistics and runs, where its foreground is a single row, its truth blocks'
    maxima, contingency rows, boxes and runs, and the planes of its six faces (labels,
    values) for joining components across them."""

    box: tuple
    n: int = 0
    rows: int = 0
    single_row: tuple | None = None
    stats: tuple | None = None  # (sizes, first, boxes, label runs) of ``label_stats.component_stats``
    blocks: list = field(default_factory=list)  # (origin, ids, boxes, a, local b, count, fg, runs)
    maxima: list = field(default_factory=list)
    covered: int = 0
    faces: dict | None = None  # "z0", "z1", "y0", "y1", "x0", "x1" -> (labels, values), planes of the tile
    local: np.ndarray | None = None  # the tile's labels and truth, when asked to keep them
    kept_truth: np.ndarray | None = None


def _work(box, truth, pred, special: bool, keep_runs: bool, keep: bool = False) -> _TileWork | None:
    """Read one tile (each array only where it stores chunks) and label it: everything the pass
    needs of it, independent of the other tiles (so tiles are worked on in threads, ``_Scan``
    joins them in order); None when neither array stores anything there. ``keep``: the arrays
    themselves too (a crop of one tile keeps them for the distances)."""
    p = volumes._read(pred, box, True) if keep or volumes.is_stored(pred, box) else None
    if p is None and not volumes.is_stored(truth, box):
        return None
    work = _TileWork(box)
    origin = np.array([s.start for s in box], np.int64)
    if p is not None and not keep and not _comparable(p).any():  # stored, but zeros: nothing to label
        p = None
    local = None
    if p is not None:
        local, work.n, work.rows, work.stats = tile_components(p, special, keep_runs)
        if work.rows == 1:  # the tile's foreground is one row: another tile may hold the rest of it
            z, y, _ = np.unravel_index(int(work.stats[1][1]), local.shape)
            work.single_row = (int(z + origin[0]), int(y + origin[1]))
        values = _comparable(p)
        work.faces = {
            name: (np.array(local[index]), np.array(values[index]))
            for name, index in (
                ("z0", (0,)),
                ("z1", (-1,)),
                ("y0", (slice(None), 0)),
                ("y1", (slice(None), -1)),
                ("x0", (Ellipsis, 0)),
                ("x1", (Ellipsis, -1)),
            )
        }
    # contingency over the truth foreground, binary counts, truth boxes: one pass per block
    subs = [box] if keep else volumes.regions(truth, box)
    for sub in subs:
        block = truth.read(sub) if keep else volumes._read(truth, sub, True)
        if keep:
            work.local = local if local is not None else np.zeros(block.shape, np.uint32)
            work.kept_truth = block
        # at most OVERLAP_VOXELS at a time: the runs of a noisy block take 24 bytes a voxel
        step = max(1, OVERLAP_VOXELS // max(1, block[0].size))
        for z in range(0, block.shape[0], step):
            t = block[z : z + step]
            work.covered += t.size
            if not t.size:
                continue
            work.maxima.append(top := t.max())
            if not top > 0:  # no truth foreground here (chunks of zeros are often stored)
                continue
            at = np.array([sub[0].start + z, sub[1].start, sub[2].start], np.int64)
            if local is None:
                part = np.zeros(t.shape, np.uint32)
            else:
                part = local[tuple(slice(a - o, a - o + k) for a, o, k in zip(at, origin, t.shape))]
            ids, truth_boxes, a, b, count, fg, runs = label_stats.overlaps(t, part, work.n)
            work.blocks.append((at, ids, truth_boxes, a, b, count, fg, runs))
    return work


class _Scan:
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

    def take(self, work: _TileWork, truth_dtype) -> None:
        """Join one tile's work (``_work``) to the tiles before it: its components numbered
        provisionally after theirs, its contingency, runs and boxes in crop coordinates, its
        faces paired with theirs."""
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

    def finish(self, voxel_size) -> "Instances":
        """Join the provisional components, number them as ``cc3d`` does and aggregate."""
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
        return Instances(
            self.shape,
            tuple(voxel_size),
            max_distance(voxel_size, self.shape),
            n_pred,
            n_gt,
            table,
            counts,
            components,
            truth_boxes,
            tiles=tuple(self.tiles),
            lut=lut,
            special=self.special,
            truth_runs=_sorted_runs(self.truth_runs),
            pred_runs=_sorted_runs(self.pred_runs, lut),
        )


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


# --------------------------------------------------------------------------------------------
# Per-instance distances from boxes read on demand


class _StreamedSets:
    """The sets the distances compare, read from the volumes box by box (``hausdorff.sets.Sets``):
    truth id g in its box; component p as the connected piece of its own box that holds its
    first voxel (``cc3d`` on that box, only for p's value)."""

    def __init__(self, truth, pred, instances: "Instances", piece_ids: np.ndarray):
        self.truth, self.pred, self.found = truth, pred, instances
        self.shape = instances.shape
        self.piece_ids = np.asarray(piece_ids)
        numbers = np.arange(1, instances.n_pred + 1, dtype=np.int64)
        targets = self.piece_ids[numbers]
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]
        self._local = threading.local()  # each thread's recently used masks (instances run in threads)

    @property
    def _truth_cache(self) -> dict:
        if not hasattr(self._local, "truth"):
            self._local.truth = {}
        return self._local.truth

    @property
    def _piece_cache(self) -> dict:
        if not hasattr(self._local, "pieces"):
            self._local.pieces = {}
        return self._local.pieces

    def parts(self, g: int) -> list[int]:
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return [int(p) for p in self._numbers[lo:hi]]

    def truth_box(self, g: int):
        return self.found.truth_boxes[g]

    def part_box(self, p: int):
        return self.found.components.box(p)

    def _painted(self, runs, key: int, box) -> np.ndarray:
        """The voxels of ``key``'s recorded runs on ``box`` (which holds them all)."""
        keys, at, length = runs
        key = keys.dtype.type(key)  # in the keys' own dtype: a Python int would cast all of them
        lo, hi = np.searchsorted(keys, key), np.searchsorted(keys, key, side="right")
        return label_stats.paint_runs(np.zeros(volumes.box_shape(box), bool), at[lo:hi], length[lo:hi], [s.start for s in box])

    def truth_mask(self, box, g: int) -> np.ndarray:
        if self.found.truth_runs is not None:
            return self._painted(self.found.truth_runs, g, box)
        return self.truth.read(box) == g

    def _piece(self, p: int) -> np.ndarray:
        """Component p on its own box."""
        if p not in self._piece_cache and self.found.pred_runs is not None:
            if len(self._piece_cache) > 4:
                self._piece_cache.pop(next(iter(self._piece_cache)))
            self._piece_cache[p] = self._painted(self.found.pred_runs, p, self.part_box(p))
        if p not in self._piece_cache:
            box = self.part_box(p)
            values = _comparable(self.pred.read(box))
            at = np.unravel_index(int(self.found.components.first[p]), self.shape)
            at = tuple(int(i) - s.start for i, s in zip(at, box))
            same = values == values[at]
            same[at] = True  # a NaN is its own component
            labels = cc3d.connected_components(same)
            if len(self._piece_cache) > 4:
                self._piece_cache.pop(next(iter(self._piece_cache)))
            self._piece_cache[p] = labels == labels[at]
        return self._piece_cache[p]

    def piece_mask(self, box, p: int) -> np.ndarray:
        """Component p's voxels on ``box`` (any box)."""
        own, own_box = self._piece(p), self.part_box(p)
        out = np.zeros(volumes.box_shape(box), bool)
        source, target = [], []
        for s, o in zip(box, own_box):
            lo, hi = max(s.start, o.start), min(s.stop, o.stop)
            if hi <= lo:
                return out
            source.append(slice(lo - o.start, hi - o.start))
            target.append(slice(lo - s.start, hi - s.start))
        out[tuple(target)] = own[tuple(source)]
        return out

    def b_mask(self, box, g: int, parts) -> np.ndarray:
        out = np.zeros(volumes.box_shape(box), bool)
        for p in parts:
            out |= self.piece_mask(box, p)
        return out

    def points_a(self, g: int, box) -> np.ndarray:
        return coordinates(self.truth_mask(box, g)) + np.array([s.start for s in box])

    def points_b(self, g: int, parts) -> np.ndarray:
        return np.concatenate([coordinates(self._piece(p)) + np.array([s.start for s in self.part_box(p)]) for p in parts])

    def packed_masks(self, requests) -> dict:
        """g -> bit-packed masks (A, B) on the box of each (g, parts, box) requested, for boxes
        too large to hold as arrays: one pass over the tiles that meet them, labelling each tile
        again as the scan did (``tile_components`` and the scan's lookup table)."""
        found = self.found
        out = {}
        for g, _, box in requests:
            shape = volumes.box_shape(box)
            out[g] = tuple(np.zeros(shape[:2] + (-(-shape[2] // 8),), np.uint8) for _ in range(2))
        if found.truth_runs is not None and found.pred_runs is not None:
            for g, parts, box in requests:
                for packed, runs, keys in ((out[g][0], found.truth_runs, [g]), (out[g][1], found.pred_runs, parts)):
                    self._pack_runs(packed, runs, keys, box)
            return out
        # tiles may split x: each band of tiles (same z and y ranges) is unpacked whole, then packed
        bands = {}
        for tile, base in found.tiles:
            bands.setdefault((tile[0].start, tile[0].stop, tile[1].start, tile[1].stop), []).append((tile, base))
        for band in bands.values():
            self._pack_band(band, requests, out)
        return out

    def _pack_band(self, band, requests, out) -> None:
        """The requested masks on one band of tiles, labelled again as the scan labelled them
        (``tile_components`` and the scan's lookup table), packed into ``out``."""
        found = self.found
        first = band[0][0]
        unpacked = {}
        for tile, base in band:
            wanted = [r for r in requests if all(max(a.start, b.start) < min(a.stop, b.stop) for a, b in zip(tile, r[2]))]
            if not wanted:
                continue
            local = tile_components(volumes._read(self.pred, tile, True), found.special)[0]
            t = volumes._read(self.truth, tile, True)
            for g, parts, box in wanted:
                if g not in unpacked:  # the band's z and y ranges within the box, all of the box's x
                    rows = tuple(slice(max(a.start, b.start), min(a.stop, b.stop)) for a, b in zip(first[:2], box[:2]))
                    shape = volumes.box_shape(rows) + (box[2].stop - box[2].start,)
                    unpacked[g] = (rows, np.zeros(shape, bool), np.zeros(shape, bool))
                rows, a_mask, b_mask = unpacked[g]
                region = tuple(slice(max(a.start, b.start), min(a.stop, b.stop)) for a, b in zip(tile, box))
                in_tile = tuple(slice(r.start - a.start, r.stop - a.start) for r, a in zip(region, tile))
                in_band = tuple(slice(r.start - b.start, r.stop - b.start) for r, b in zip(region, (*rows, box[2])))
                labels = local[in_tile]
                numbers = found.lut[np.where(labels != 0, labels.astype(np.int64) + base, 0)]
                piece = np.zeros(labels.shape, bool)
                for part in parts:
                    piece |= numbers == part
                a_mask[in_band] = t[in_tile] == g
                b_mask[in_band] = piece
        for g, (rows, a_mask, b_mask) in unpacked.items():
            box = next(r[2] for r in requests if r[0] == g)
            at = tuple(slice(r.start - b.start, r.stop - b.start) for r, b in zip(rows, box[:2]))
            out[g][0][at] = pack(a_mask)
            out[g][1][at] = pack(b_mask)

    @staticmethod
    def _pack_runs(packed: np.ndarray, runs, keys, box, planes: int = 64) -> None:
        """Paint the recorded runs of ``keys`` into bit-packed planes of ``box``, a few planes
        at a time."""
        ids, at, length = runs
        chosen = []
        for key in keys:
            key = ids.dtype.type(key)
            lo, hi = np.searchsorted(ids, key), np.searchsorted(ids, key, side="right")
            chosen.append(np.arange(lo, hi))
        chosen = np.concatenate(chosen)
        at, length = at[chosen], length[chosen]
        order = np.argsort(at[:, 0], kind="stable")
        at, length = at[order], length[order]
        origin = np.array([s.start for s in box], np.int64)
        shape = volumes.box_shape(box)
        for z0 in range(0, shape[0], planes):
            z1 = min(z0 + planes, shape[0])
            lo, hi = np.searchsorted(at[:, 0], [origin[0] + z0, origin[0] + z1])
            if hi > lo:
                mask = label_stats.paint_runs(
                    np.zeros((z1 - z0,) + shape[1:], bool), at[lo:hi], length[lo:hi], origin + np.array([z0, 0, 0])
                )
                packed[z0:z1] = pack(mask)

    def in_a(self, points: np.ndarray, g: int) -> np.ndarray:
        box = self.truth_box(g)
        key = (g, tuple((s.start, s.stop) for s in box))
        if key not in self._truth_cache:
            self._truth_cache.clear()
            self._truth_cache[key] = self.truth_mask(box, g)
        return _lookup(self._truth_cache[key], box, points)

    def in_b(self, points: np.ndarray, g: int) -> np.ndarray:
        result = np.zeros(len(points), bool)
        for p in self.parts(g):
            result |= _lookup(self._piece(p), self.part_box(p), points)
        return result


def _lookup(mask: np.ndarray, box, points: np.ndarray) -> np.ndarray:
    """``mask`` (on ``box``) at ``points`` (crop coordinates, rows); False outside the box."""
    origin = np.array([s.start for s in box])
    local = points - origin
    inside = np.all((local >= 0) & (local < np.array(mask.shape)), axis=1)
    result = np.zeros(len(points), bool)
    result[inside] = mask[tuple(local[inside].T)]
    return result


SCAN_THREADS = 2  # tiles worked on at once (``_works``)


def _works(boxes, truth, pred, special: bool, keep_runs: bool):
    """``_work`` of every tile, in order. On SCAN_THREADS threads when both volumes allow it
    (each thread reads into buffers of its own): decoding, the compiled statistics and numpy
    release the interpreter, so one tile is decoded while another is labelled; at most twice
    SCAN_THREADS tiles are in flight."""
    if SCAN_THREADS < 2 or not (volumes.threadsafe(truth) and volumes.threadsafe(pred)):
        for box in boxes:
            yield _work(box, truth, pred, special, keep_runs)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="tiles") as pool:
        pending = []
        for box in boxes:
            pending.append(pool.submit(_work, box, truth, pred, special, keep_runs))
            if len(pending) > 2 * SCAN_THREADS:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()


@dataclass(frozen=True)
class Instances:
    """One instance label's prediction against its truth, after the pass over the tiles: the
    components (26-connected, numbered as ``cc3d.connected_components`` with the reference's
    defaults numbers them), their truth-foreground contingency, the binary counts and the
    distance cap. ``arrays`` holds (truth, components) when the crop was one tile."""

    shape: tuple
    voxel_size: tuple
    cap: float
    n_pred: int
    n_gt: int
    table: Contingency
    counts: BinaryCounts
    components: Components
    truth_boxes: dict
    sources: tuple = None
    arrays: tuple = None
    tiles: tuple = ()  # (box, provisional base) of the tiles read, to label any box again
    lut: np.ndarray = None  # provisional component -> component
    special: bool = False  # tiles labelled with cc3d's single-row shortcut
    truth_runs: tuple = None  # (ids, starts, lengths) of the truth's runs along x, by id
    pred_runs: tuple = None  # the same of the components

    @classmethod
    def scan(cls, pred, truth, voxel_size) -> "Instances":
        """One pass over ``truth`` and ``pred`` (volumes, or arrays) in tiles. A 2-D crop is
        scanned as one plane of a 3-D volume (``volumes.Planar``) with its in-plane voxel size
        (the reference's ``vs[-ndim:]``); its cap stays the reference's ``compute_max_distance``
        of the 2-D shape and the voxel size as given (``zip`` pairs them from the first axis)."""
        truth, pred = volumes.as_volume(truth), volumes.as_volume(pred)
        if len(truth.shape) == 2:
            planes = cls.scan(volumes.Planar(pred), volumes.Planar(truth), (1.0, *tuple(voxel_size)[-2:]))
            return dataclasses.replace(planes, cap=max_distance(voxel_size, truth.shape))
        for special in (False, True):
            # the whole call's single-row shortcut (``tile_components``) is only reproduced on whole rows
            boxes = volumes.instance_tiles(truth, pred, split_x=not special)
            scan, kept = _Scan(truth.shape, special, record=len(boxes) > 1), None
            if len(boxes) == 1:  # a single tile's arrays are kept for the distances
                work = _work(boxes[0], truth, pred, special, False, keep=True)
                kept = (work.kept_truth, work.local)
                scan.take(work, truth.dtype)
            else:
                for box, work in zip(boxes, _works(boxes, truth, pred, special, scan.pred_runs is not None)):
                    if work is None:
                        scan.add_empty(box, truth.dtype)
                    else:
                        scan.take(work, truth.dtype)
            risky = pred.dtype.kind == "f" and pred.dtype.itemsize > 2 or pred.dtype == np.uint64
            # the whole call took cc3d's single-row shortcut (``tile_components``): again with it
            if special or scan.rows != 1 or not risky or sum(n > 1 for n in truth.shape) < 2:
                break
        found = scan.finish(voxel_size)
        return cls(**{**found.__dict__, "sources": (truth, pred), "arrays": kept})

    @cached_property
    def truth_ids(self) -> np.ndarray:
        """The truth's non-zero ids, ascending."""
        return np.unique(self.table.a)

    def match(self, limits: Limits) -> dict[int, int]:
        """``match_instances``; raises ``Pathological``."""
        return match_instances(self.n_gt, self.components.sizes, self.n_pred, self.table, limits)

    def distances(self, mapping: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """(float32 ``d_g`` of every truth id, after relabelling, then the cap once per unmatched
        component; the relabelling table) — ``scoring.py`` ``_compute_hausdorff_scores`` with
        ``distance.py`` ``optimized_hausdorff_distances``."""
        matched = set(mapping) - {0}
        relabelled = relabel_table({0: 0, **mapping}, self.n_pred) if matched else np.arange(self.n_pred + 1)
        if self.arrays is not None:
            truth, labels = self.arrays
            piece_boxes = {p: self.components.box(p) for p in range(1, self.n_pred + 1)}  # known from the scan
            sets = ArraySets(truth, labels, relabelled, self.truth_boxes, piece_boxes)
        else:
            sets = _StreamedSets(*self.sources, self, relabelled)
        per_gt = capped_hausdorff_sets(sets, self.truth_ids, self.voxel_size, self.cap, threads=min(4, machine.cpu_count()))
        unmatched = np.full(self.n_pred - len(matched), self.cap, dtype=np.float32)
        return np.concatenate([per_gt, unmatched]), relabelled
