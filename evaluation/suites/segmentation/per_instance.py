"""Metrics of every matched instance pair, from one labelled pass.

panoptica evaluates each matched reference instance against the prediction (the predictions
matched to it merged) on a crop of the arrays (``panoptica/instance_evaluator.py:
_evaluate_instance``); MetricsReloaded builds a ``BinaryPairwiseMeasures`` per matched pair of
masks (``MetricsReloaded/processes/mixed_measures_processes.py:
MixedLocSegPairwiseMeasure``), without the spacing. Here the matched predictions are
relabelled with their reference's id, the label boundaries of both maps are found once, and
one labelled nearest-point search measures every instance's surface distances against its own
partner only (``metrics.nearest``); overlaps come from the contingency table. Each instance's
distance lists are then reduced by the same functions as a whole class (``distances``).
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics.nearest import PointSet, both_ways, edge_points
from evaluation.suites.segmentation import distances, metrics_table, overlap
from evaluation.suites.segmentation.instances import Matching, Overlaps
from evaluation.suites.segmentation.measured import Measured
from evaluation.suites.segmentation.surfaces import Surfaces

_PAIRS = [m for m in metrics_table.METRICS if m.per_instance == "pairs"]
DISTANCE_METRICS = tuple(m.name for m in _PAIRS if m.reads == "surfaces")  # reduced from the labelled pass
SHAPE_METRICS = tuple(m for m in _PAIRS if m.reads == "masks")  # on each pair's masks, in the table's order
_LUT_LIMIT = 1 << 24  # ids up to this are relabelled through a lookup table


@dataclass(frozen=True)
class Relabelling:
    """Matched instance k (1-based, in ascending reference order) is labelled k in both maps;
    a prediction matched to it (several, after a merge) too; everything else 0."""

    ref_ids: np.ndarray
    pred_ids: np.ndarray  # ascending
    pred_values: np.ndarray
    count: int

    @classmethod
    def of(cls, ov: Overlaps, matching: Matching, matched: list[int]) -> "Relabelling":
        pairs = sorted((int(ov.pred_ids[p]), k) for k, r in enumerate(matched, 1) for p in matching.pairs[r])
        return cls(
            ov.ref_ids[matched],
            np.array([p for p, _ in pairs], np.int64),
            np.array([k for _, k in pairs], np.int64),
            len(matched),
        )

    def table(self, ids: np.ndarray, values: np.ndarray, top: int) -> np.ndarray | None:
        """A lookup table over the labels up to ``top`` (None when the ids are too large)."""
        if top >= _LUT_LIMIT:
            return None
        table = np.zeros(top + 1, np.uint16 if self.count < np.iinfo(np.uint16).max else np.int32)
        inside = ids <= top
        table[ids[inside]] = values[inside]
        return table

    def edges(self, labels: np.ndarray, side: str, spacing) -> PointSet:
        ids, values = (self.ref_ids, np.arange(1, self.count + 1)) if side == "ref" else (self.pred_ids, self.pred_values)
        table = self.table(ids.astype(np.int64), values, int(labels.max(initial=0)))
        if table is None:
            return edge_points(self.apply(labels, ids, values), spacing)
        return edge_points(labels, spacing, relabel=table)

    def map(self, labels: np.ndarray, side: str) -> np.ndarray:
        ids, values = (self.ref_ids, np.arange(1, self.count + 1)) if side == "ref" else (self.pred_ids, self.pred_values)
        table = self.table(ids.astype(np.int64), values, int(labels.max(initial=0)))
        return table[labels] if table is not None else self.apply(labels, ids, values)

    @staticmethod
    def apply(labels: np.ndarray, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        position = np.clip(np.searchsorted(ids, labels), 0, ids.size - 1)
        return np.where(ids[position] == labels, values[position], 0).astype(np.int32)


def evaluate(
    ref: np.ndarray, pred: np.ndarray, ov: Overlaps, matching: Matching, metrics, definition: str, options, spacing
) -> dict[int, dict]:
    """Reference index -> {key: value} for every matched reference."""
    matched = sorted(matching.pairs)
    if not matched:
        return {}
    relabelling = Relabelling.of(ov, matching, matched)
    inter = {(int(r), int(p)): int(n) for r, p, n in zip(ov.ref, ov.pred, ov.inter)}
    results = {r: _overlap(ov, inter, matching.pairs[r], r, definition, options, spacing) for r in matched}
    dense = np.arange(1, len(matched) + 1)
    if any(m in metrics for m in DISTANCE_METRICS):
        for r, surfaces in zip(matched, _surfaces(ref, pred, relabelling, dense, spacing)):
            results[r].update(_reduce(surfaces, definition, options, spacing))
    if any(m.name in metrics for m in SHAPE_METRICS):
        _shapes(
            relabelling.map(ref, "ref"),
            relabelling.map(pred, "pred"),
            dense,
            matched,
            results,
            metrics,
            definition,
            options,
            spacing,
        )
    return results


def _overlap(ov: Overlaps, pair_inter: dict, preds: list[int], r: int, definition: str, options, spacing) -> dict:
    inter = sum(pair_inter.get((r, p), 0) for p in preds)
    ref_size, pred_size = int(ov.ref_size[r]), int(ov.pred_size[preds].sum())
    counts = overlap.DEFINITIONS.get(definition, overlap.plain)(
        inter, pred_size - inter, ref_size - inter, 0, options.fbeta, options.corrections
    )
    out = {key: counts[key] for key in ("dice", "iou", "volume_difference", "abs_volume_difference")}
    out["ref_voxels"] = float(ref_size)
    out["ref_volume"] = float(ref_size) * float(np.prod(spacing))
    return out


def _surfaces(ref: np.ndarray, pred: np.ndarray, relabelling: Relabelling, ids: np.ndarray, spacing) -> list[Surfaces]:
    """Both directed distance lists of every matched instance, in the order of ``ids``."""
    ref_edge, pred_edge, to_pred, to_ref = both_ways(
        lambda: relabelling.edges(ref, "ref", spacing), lambda: relabelling.edges(pred, "pred", spacing), spacing, labelled=True
    )
    ref_split, pred_split = _split(ref_edge.marks, to_pred, ids), _split(pred_edge.marks, to_ref, ids)
    return [Surfaces("voxels", a, b) for a, b in zip(ref_split, pred_split)]


def _split(labels: np.ndarray, values: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
    """``values`` grouped by label in the order of ``ids``, raster order kept in a group."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.concatenate([ids, ids[-1:] + 1]))
    ordered = values[order]
    return [ordered[bounds[i] : bounds[i + 1]] for i in range(ids.size)]


def _reduce(surfaces: Surfaces, definition: str, options, spacing) -> dict:
    reducer = {"panoptica": distances.panoptica, "metricsreloaded": distances.metricsreloaded}.get(definition, distances.monai)
    return reducer(surfaces, options.percentiles, options.nsd_tolerances, spacing)


def _shapes(ref_map, pred_map, ids, matched, results, metrics, definition, options, spacing) -> None:
    """clDice, boundary IoU and centre distance on each instance's own box, two voxels wider
    (panoptica's crop, ``_functionals.py: _get_paired_crop``: centres of mass are sums over
    the crop, so the crop decides their last bits; the thinning and the bands only need one)."""
    from scipy import ndimage

    ref_boxes, pred_boxes = ndimage.find_objects(ref_map), ndimage.find_objects(pred_map)
    for r, label in zip(matched, ids.tolist()):
        boxes = [b[label - 1] for b in (ref_boxes, pred_boxes) if label - 1 < len(b) and b[label - 1] is not None]
        window = tuple(
            slice(max(min(b[a].start for b in boxes) - 2, 0), max(b[a].stop for b in boxes) + 2) for a in range(ref_map.ndim)
        )
        pair = Measured(options, spacing, masks=(ref_map[window] == label, pred_map[window] == label))
        for metric in SHAPE_METRICS:
            if metric.name in metrics:
                values = metric.function(definition)(pair)
                results[r].update({key: values[key] for key in metric.keys(options)})
