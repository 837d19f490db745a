"""The whole-array CellMap scoring path as it was before the streamed one (commit 7a806e7), kept
as the executable reference of the differential test (``test/test_cellmap_streaming.py``).

Everything a (crop, label) needs is loaded at once: the truth array, the aligned prediction
(``alignment.align``, the reference's ``MatchedCrop.load_aligned`` on the whole array), the mask;
then ``cc3d.connected_components`` on the whole prediction, one contingency, the matching, and
the per-instance Hausdorff distances on tight boxes (``capped_hausdorff`` below, the algorithm
of ``evaluation/metrics/hausdorff.py`` at that commit). Nothing here is used by the grader.
"""

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import cc3d
import numpy as np
from helpers.cellmap_alignment import align
from scipy import ndimage
from scipy.spatial import cKDTree

from evaluation.errors import PhaseError, organizer_file
from evaluation.metrics import binary
from evaluation.metrics.matching import MatchingFailed, min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import Contingency, binary_counts, contingency
from evaluation.metrics.voi import rand_voi
from evaluation.readers import zarr_store
from evaluation.suites.cellmap.instances import normalize_distances as normalize_distances_portably
from evaluation.suites.cellmap.options import INSTANCE_CLASSES

TOO_MANY = "skipped_too_many_instances"
SPARSE_BOX_FACTOR = 32


# --------------------------------------------------------------------------------------------
# Reading (inputs.read_pair)


def _read_truth(path: Path, display: str) -> np.ndarray:
    with organizer_file():
        return zarr_store.read_array(zarr_store.open_array(path, display), display)


def read_pair(pair, infer_scale_from_shape: bool) -> tuple[np.ndarray, np.ndarray]:
    truth = _read_truth(pair.truth, "truth array")
    if truth.shape != tuple(pair.grid.shape):
        raise PhaseError("a truth array's shape differs from its manifest row")
    source = zarr_store.open_array(pair.pred, pair.display)
    pred = align(
        source,
        zarr_store.attributes(source),
        pair.grid,
        instance=pair.label in INSTANCE_CLASSES,
        read=lambda region: zarr_store.read_array(source, pair.display, region=region),
        max_size_ratio=pair.limits.max_volume_size_ratio,
        display=pair.display,
        infer_scale_from_shape=infer_scale_from_shape,
    )
    if pair.mask:
        mask = _read_truth(pair.mask, "mask")
        pred, truth = pred * mask, truth * mask
    return truth, pred


# --------------------------------------------------------------------------------------------
# Hausdorff (metrics/hausdorff.py)

Box = tuple[slice, ...]


def label_boxes(labels: np.ndarray) -> dict[int, Box]:
    if labels.size == 0 or not labels.any():
        return {}
    top = int(labels.max())
    if top <= max(labels.size, 1 << 24):
        found = ndimage.find_objects(labels, max_label=top)
        return {i + 1: box for i, box in enumerate(found) if box is not None}
    ids, dense = np.unique(labels, return_inverse=True)
    found = ndimage.find_objects(dense.reshape(labels.shape), max_label=ids.size - 1)
    return {int(ids[i + 1]): box for i, box in enumerate(found) if box is not None}


def _union(boxes):
    return tuple(slice(min(b[d].start for b in boxes), max(b[d].stop for b in boxes)) for d in range(len(boxes[0])))


def _volume(box) -> int:
    return int(np.prod([s.stop - s.start for s in box]))


def _origin(box) -> np.ndarray:
    return np.array([s.start for s in box])


def box_gap(first, second, voxel_size) -> float:
    gaps = []
    for p, q, vs in zip(first, second, voxel_size):
        gaps += [(q.start - p.start) * vs, (p.start - q.start) * vs, (p.stop - q.stop) * vs, (q.stop - p.stop) * vs]
    return max(gaps)


def _distance(offsets, voxel_size):
    return np.sqrt(np.add.reduce((offsets.astype(np.float64) * voxel_size) ** 2, axis=1))


def _directed_dense(source, target, voxel_size) -> float:
    outside = source & ~target
    if not outside.any():
        return 0.0
    distance = ndimage.distance_transform_edt(~target, sampling=voxel_size)
    return float(distance[outside].max())


def _directed_tree(outside, boundary, voxel_size) -> float:
    if outside.size == 0:
        return 0.0
    _, nearest = cKDTree(boundary * voxel_size).query(outside * voxel_size)
    return float(_distance(boundary[nearest] - outside, voxel_size).max())


class _Assignment:
    def __init__(self, pieces, piece_ids):
        self.pieces = pieces
        self.piece_ids = np.asarray(piece_ids)
        self.boxes = label_boxes(pieces)
        numbers = np.array(sorted(self.boxes), dtype=np.int64)
        targets = self.piece_ids[numbers] if numbers.size else numbers
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]

    def pieces_of(self, g):
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return self._numbers[lo:hi]

    def mask(self, box, g):
        return self.piece_ids[self.pieces[box]] == g

    def at(self, points, g):
        return self.piece_ids[self.pieces[tuple(points.T)]] == g


def _members(labels_at, points, shape, g):
    inside = np.all((points >= 0) & (points < np.asarray(shape)), axis=1)
    result = np.zeros(len(points), dtype=bool)
    result[inside] = labels_at(points[inside], g)
    return result


def _boundary(points, labels_at, shape, g):
    on_boundary = np.zeros(len(points), dtype=bool)
    unit = np.eye(points.shape[1], dtype=points.dtype)
    for step in np.concatenate([unit, -unit]):
        on_boundary |= ~_members(labels_at, points + step, shape, g)
    return points[on_boundary]


def _hausdorff_sparse(truth, assignment, g, box_a, parts, vs) -> float:
    truth_at = lambda p, i: truth[tuple(p.T)] == i  # noqa: E731
    points_a = np.argwhere(truth[box_a] == g) + _origin(box_a)
    points_b = np.concatenate(
        [np.argwhere(assignment.pieces[assignment.boxes[p]] == p) + _origin(assignment.boxes[p]) for p in parts]
    )
    a_outside_b = points_a[~assignment.at(points_a, g)]
    b_outside_a = points_b[~truth_at(points_b, g)]
    forward = _directed_tree(a_outside_b, _boundary(points_b, assignment.at, truth.shape, g), vs)
    backward = _directed_tree(b_outside_a, _boundary(points_a, truth_at, truth.shape, g), vs)
    return max(forward, backward)


def capped_hausdorff(truth, pieces, piece_ids, ids, voxel_size, cap) -> np.ndarray:
    vs = np.asarray(voxel_size, dtype=np.float64)[-truth.ndim :]
    boxes_a = label_boxes(truth)
    assignment = _Assignment(pieces, piece_ids)
    out = np.empty(len(ids), dtype=np.float32)
    for i, g in enumerate(int(x) for x in ids):
        parts = assignment.pieces_of(g)
        if parts.size == 0:
            out[i] = cap
            continue
        box_a, part_boxes = boxes_a[g], [assignment.boxes[int(p)] for p in parts]
        box_b = _union(part_boxes)
        if box_gap(box_a, box_b, vs) >= cap:
            out[i] = cap
            continue
        box = _union([box_a, box_b])
        if _volume(box) > SPARSE_BOX_FACTOR * (_volume(box_a) + sum(map(_volume, part_boxes))):
            d = _hausdorff_sparse(truth, assignment, g, box_a, parts, vs)
        else:
            in_a, in_b = truth[box] == g, assignment.mask(box, g)
            d = max(_directed_dense(in_a, in_b, vs), _directed_dense(in_b, in_a, vs))
        out[i] = min(d, cap)
    return out


# --------------------------------------------------------------------------------------------
# Instances (suites/cellmap/instances.py)


class Pathological(Exception):
    pass


def max_distance(voxel_size, shape) -> float:
    return float(min((float(v) * int(s)) / 2 for v, s in zip(voxel_size, shape)))


def normalize_distances(distances, voxel_size) -> np.ndarray:
    """The grader's: numpy's ``1.01 ** x`` differs from the C library's ``pow`` in the last place
    on AVX-512 machines, and the distances, not their normalisation, are what is compared."""
    return normalize_distances_portably(distances, voxel_size)


def match_instances(truth, components, n_pred, table: Contingency, limits) -> dict[int, int]:
    n_gt = int(truth.max()) if truth.size else 0
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
    pred_size = np.bincount(components.ravel(), minlength=n_pred + 1)[table.b[overlapping].astype(np.intp)]
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


def relabel_table(mapping, n_pred) -> np.ndarray:
    table = np.arange(n_pred + 1, dtype=np.int64)
    table[np.fromiter(mapping.keys(), dtype=np.int64)] = np.fromiter(mapping.values(), dtype=np.int64)
    return table


@dataclass(frozen=True)
class Instances:
    truth: np.ndarray
    components: np.ndarray
    n_pred: int
    table: Contingency
    voxel_size: tuple
    cap: float

    @classmethod
    def of(cls, pred, truth, voxel_size, truth_fg=None) -> "Instances":
        components, n_pred = cc3d.connected_components(pred, return_N=True)
        table = contingency(truth, components, where=truth > 0 if truth_fg is None else truth_fg)
        return cls(truth, components, int(n_pred), table, tuple(voxel_size), max_distance(voxel_size, truth.shape))

    @cached_property
    def truth_ids(self) -> np.ndarray:
        return np.unique(self.table.a)

    def match(self, limits) -> dict[int, int]:
        return match_instances(self.truth, self.components, self.n_pred, self.table, limits)

    def distances(self, mapping):
        matched = set(mapping) - {0}
        relabelled = relabel_table({0: 0, **mapping}, self.n_pred) if matched else np.arange(self.n_pred + 1)
        per_gt = capped_hausdorff(self.truth, self.components, relabelled, self.truth_ids, self.voxel_size, self.cap)
        unmatched = np.full(self.n_pred - len(matched), self.cap, dtype=np.float32)
        return np.concatenate([per_gt, unmatched]), relabelled


# --------------------------------------------------------------------------------------------
# v2 (suites/cellmap/v2.py)


def v2_semantic(pred, truth) -> dict:
    counts = binary_counts(truth > 0, pred > 0)
    if counts.tp + counts.fp + counts.fn == 0:
        iou, dice = 1, 1
    else:
        iou, dice = binary.iou(counts), binary.dice_as_scipy(counts)
    return {"iou": iou, "dice_score": dice, "binary_accuracy": binary.accuracy(counts), "status": "scored"}


def _id_accuracy(table, counts, relabelled) -> float:
    agree = table.b > 0
    same = relabelled[table.b[agree].astype(np.intp)] == table.a[agree].astype(np.int64)
    return float((counts.tn + int(table.count[agree][same].sum())) / counts.total)


def v2_instance(pred, truth, voxel_size, limits) -> dict:
    truth_fg = truth > 0
    found = Instances.of(pred, truth, voxel_size, truth_fg)
    counts = binary_counts(truth_fg, found.components > 0)
    binary_scores = {
        "iou": binary.iou(counts),
        "dice_score": binary.dice_as_scipy(counts),
        "binary_accuracy": binary.accuracy(counts),
    }
    voi = rand_voi(found.table)
    try:
        mapping = found.match(limits)
    except Pathological as exc:
        return {
            "mean_accuracy": 0,
            "binary_accuracy": binary_scores["binary_accuracy"],
            "hausdorff_distance": found.cap,
            "normalized_hausdorff_distance": float(normalize_distances([found.cap], voxel_size)[0]),
            "combined_score": 0,
            "iou": binary_scores["iou"],
            "dice_score": binary_scores["dice_score"],
            "status": str(exc),
            **voi,
        }
    relabelled = np.arange(found.n_pred + 1)
    if mapping == {0: 0}:
        distances = [0.0]
    elif not mapping:
        distances = [found.cap]
    else:
        distances, relabelled = found.distances(mapping)
        distances = distances.astype(np.float64)
    mean_accuracy = _id_accuracy(found.table, counts, relabelled)
    normalized = float(np.mean(normalize_distances(distances, voxel_size)))
    return {
        "mean_accuracy": mean_accuracy,
        "hausdorff_distance": float(np.mean(distances)),
        "normalized_hausdorff_distance": normalized,
        "combined_score": (mean_accuracy * normalized) ** 0.5,
        "status": "scored",
        **binary_scores,
        **voi,
    }


# --------------------------------------------------------------------------------------------
# head (suites/cellmap/head.py)


def head_semantic(pred, truth) -> dict:
    counts = binary_counts(truth > 0, pred > 0)
    return {"tp": counts.tp, "fp": counts.fp, "fn": counts.fn, "status": "scored"}


def _head_entry(tp, fp, fn, distances, voxel_size, status="scored") -> dict:
    normalized = normalize_distances(distances, voxel_size)
    return {
        "tp": int(tp),
        "fp": int(fp),
        "fn": int(fn),
        "hausdorff_norm_sum": float(np.sum(normalized)),
        "n_hausdorff": int(normalized.size),
        "status": status,
    }


def head_instance(pred, truth, voxel_size, limits, pathological="ignore") -> dict:
    found = Instances.of(pred, truth, voxel_size)
    n_truth = int(found.truth_ids.size)
    try:
        mapping = found.match(limits)
    except Pathological as exc:
        if pathological == "ignore":
            return {"tp": 0, "fp": 0, "fn": 0, "hausdorff_norm_sum": 0.0, "n_hausdorff": 0, "status": str(exc)}
        distances = np.full(n_truth + found.n_pred, found.cap, dtype=np.float32)
        return _head_entry(0, found.n_pred, n_truth, distances, voxel_size, str(exc))
    distances, _ = found.distances(mapping)
    fp = found.n_pred - len(set(mapping) - {0})
    tp = len(set(mapping.values()) - {0})
    return _head_entry(tp, fp, n_truth - tp, distances, voxel_size)


def score_label(version: str, pred, truth, pair) -> dict:
    """The entry of one (crop, label) without the fields every entry has, as ``score_label`` of
    ``v2.py`` / ``head.py`` computed it."""
    voxel_size = pair.grid.voxel_size
    if version == "v2":
        return v2_instance(pred, truth, voxel_size, pair.limits) if pair.instance else v2_semantic(pred, truth)
    if pair.instance:
        return head_instance(pred, truth, voxel_size, pair.limits, pair.pathological_crops)
    return head_semantic(pred, truth)


def score(pair, infer_scale_from_shape: bool) -> dict:
    """One task by the whole-array path: ``scoring.score`` before streaming, minus the common fields."""
    truth, pred = read_pair(pair, infer_scale_from_shape)
    return score_label(pair.version, pred, truth, pair)
