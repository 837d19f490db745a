"""The instance-label pipeline both reference versions share: connected components, matching
and per-instance distances (``utils/eval_utils/instance_matching.py``, ``distance.py`` and the
first steps of ``scoring.py`` ``score_instance``, unchanged between 0f50f70 and 6b9ad68).

The reference labels the whole prediction with ``cc3d.connected_components`` and keeps the
truth, the prediction and the components in memory (24 bytes per voxel and more: a 1000^3 crop
could not be scored in 7 GiB). Here one pass over the crop in tiles (``volumes.instance_tiles``:
a chunk or a few, in raster order) keeps only what the scores need, and the numbers are those of
the whole-array call:

- ``tiles``: each tile read (only where an array stores chunks) and labelled on its own as the
  whole call would label it: its components and their statistics, its contingency with the
  truth and the planes of its faces; tiles are worked on in threads;
- ``scan``: the tiles joined in raster order: components that touch across a face are one, and
  numbering them by their first voxel gives ``cc3d``'s numbering of the whole array, which the
  contingency table, component sizes and boxes follow;
- here: the matching on that table (``match_instances``), then the per-instance distances
  (``metrics.hausdorff``) on sets read only in the boxes they need (``streamed_sets``).

A crop that fits in one tile keeps its arrays and never reads twice.
"""

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from evaluation import machine
from evaluation.metrics import portable
from evaluation.metrics.hausdorff import capped_hausdorff_sets
from evaluation.metrics.hausdorff.sets import ArraySets
from evaluation.metrics.matching import MatchingFailed, min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import BinaryCounts, Contingency
from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.options import Limits
from evaluation.suites.cellmap.scan import Components, Scan
from evaluation.suites.cellmap.streamed_sets import StreamedSets
from evaluation.suites.cellmap.tiles import tile_work, tile_works

TOO_MANY = "skipped_too_many_instances"


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
            # the whole call's single-row shortcut (``tiles.tile_components``) is only reproduced on whole rows
            boxes = volumes.instance_tiles(truth, pred, split_x=not special)
            scan, kept = Scan(truth.shape, special, record=len(boxes) > 1), None
            if len(boxes) == 1:  # a single tile's arrays are kept for the distances
                work = tile_work(boxes[0], truth, pred, special, False, keep=True)
                kept = (work.kept_truth, work.local)
                scan.take(work, truth.dtype)
            else:
                for box, work in zip(boxes, tile_works(boxes, truth, pred, special, scan.pred_runs is not None)):
                    if work is None:
                        scan.add_empty(box, truth.dtype)
                    else:
                        scan.take(work, truth.dtype)
            risky = pred.dtype.kind == "f" and pred.dtype.itemsize > 2 or pred.dtype == np.uint64
            # the whole call took cc3d's single-row shortcut (``tiles.tile_components``): again with it
            if special or scan.rows != 1 or not risky or sum(n > 1 for n in truth.shape) < 2:
                break
        found = scan.finish()
        cap = max_distance(voxel_size, found["shape"])
        return cls(voxel_size=tuple(voxel_size), cap=cap, sources=(truth, pred), arrays=kept, **found)

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
            sets = StreamedSets(*self.sources, self, relabelled)
        per_gt = capped_hausdorff_sets(sets, self.truth_ids, self.voxel_size, self.cap, threads=min(4, machine.cpu_count()))
        unmatched = np.full(self.n_pred - len(matched), self.cap, dtype=np.float32)
        return np.concatenate([per_gt, unmatched]), relabelled
