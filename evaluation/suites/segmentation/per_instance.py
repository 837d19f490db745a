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

import numpy as np
from scipy import ndimage

from evaluation.metrics.nearest import boundary, nearest
from evaluation.suites.segmentation import distances, overlap, shape
from evaluation.suites.segmentation.instances import Matching, Overlaps
from evaluation.suites.segmentation.surfaces import Surfaces

DISTANCE_METRICS = ("hd", "hd_percentile", "assd", "masd", "nsd")
_LUT_LIMIT = 1 << 24  # ids up to this are relabelled through a lookup table


def relabel(labels: np.ndarray, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``labels`` with each of ``ids`` replaced by its value and every other label by 0."""
    out_type = np.int64 if values.size and values.max() > np.iinfo(np.int32).max else np.int32
    if labels.size == 0 or ids.size == 0:
        return np.zeros(labels.shape, out_type)
    top = int(labels.max())
    if 0 <= labels.min() and top < _LUT_LIMIT:
        table = np.zeros(top + 1, out_type)
        inside = ids <= top
        table[ids[inside].astype(np.int64)] = values[inside]
        return table[labels]
    position = np.clip(np.searchsorted(ids, labels), 0, ids.size - 1)
    return np.where(ids[position] == labels, values[position], 0).astype(out_type)


def evaluate(ref: np.ndarray, pred: np.ndarray, ov: Overlaps, matching: Matching, metrics, definition: str, options,
             spacing) -> dict[int, dict]:
    """Reference index -> {key: value} for every matched reference."""
    matched = sorted(matching.pairs)
    if not matched:
        return {}
    dense = np.arange(1, len(matched) + 1)  # instance k of the matched list is labelled k in both maps
    ref_map = relabel(ref, ov.ref_ids[matched], dense)
    sources = np.array([ov.pred_ids[p] for r in matched for p in matching.pairs[r]], dtype=ov.pred_ids.dtype)
    targets = np.array([k for k, r in zip(dense, matched) for _ in matching.pairs[r]], dtype=np.int64)
    order = np.argsort(sources)
    pred_map = relabel(pred, sources[order], targets[order])
    inter = {(int(r), int(p)): int(n) for r, p, n in zip(ov.ref, ov.pred, ov.inter)}
    results = {r: _overlap(ov, inter, matching.pairs[r], r, definition, options, spacing) for r in matched}
    if any(m in metrics for m in DISTANCE_METRICS):
        for r, surfaces in zip(matched, _surfaces(ref_map, pred_map, dense, spacing)):
            results[r].update(_reduce(surfaces, definition, options, spacing))
    if any(m in metrics for m in ("cldice", "boundary_iou", "centre_distance")):
        _shapes(ref_map, pred_map, dense, matched, results, metrics, definition, options, spacing)
    return results


def _overlap(ov: Overlaps, pair_inter: dict, preds: list[int], r: int, definition: str, options, spacing) -> dict:
    inter = sum(pair_inter.get((r, p), 0) for p in preds)
    ref_size, pred_size = int(ov.ref_size[r]), int(ov.pred_size[preds].sum())
    counts = overlap.DEFINITIONS.get(definition, overlap.plain)(inter, pred_size - inter, ref_size - inter, 0, options.fbeta)
    out = {key: counts[key] for key in ("dice", "iou", "volume_difference", "abs_volume_difference")}
    out["ref_voxels"] = float(ref_size)
    out["ref_volume"] = float(ref_size) * float(np.prod(spacing))
    return out


def _surfaces(ref_map: np.ndarray, pred_map: np.ndarray, ids: np.ndarray, spacing) -> list[Surfaces]:
    """Both directed distance lists of every matched instance, in the order of ``ids``."""
    ref_edge = np.where(boundary(ref_map), ref_map, 0)
    pred_edge = np.where(boundary(pred_map), pred_map, 0)
    ref_points, pred_points = np.argwhere(ref_edge), np.argwhere(pred_edge)
    ref_labels, pred_labels = ref_edge[tuple(ref_points.T)], pred_edge[tuple(pred_points.T)]
    to_pred = nearest(ref_points, pred_edge, spacing, labels=ref_labels, target_points=pred_points)
    to_ref = nearest(pred_points, ref_edge, spacing, labels=pred_labels, target_points=ref_points)
    ref_split, pred_split = _split(ref_labels, to_pred, ids), _split(pred_labels, to_ref, ids)
    return [Surfaces("voxels", a, b) for a, b in zip(ref_split, pred_split)]


def _split(labels: np.ndarray, values: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
    """``values`` grouped by label in the order of ``ids``, raster order kept in a group."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.concatenate([ids, ids[-1:] + 1]))
    ordered = values[order]
    return [ordered[bounds[i]:bounds[i + 1]] for i in range(ids.size)]


def _reduce(surfaces: Surfaces, definition: str, options, spacing) -> dict:
    reducer = {"panoptica": distances.panoptica, "metricsreloaded": distances.metricsreloaded}.get(definition, distances.monai)
    return reducer(surfaces, options.percentiles, options.nsd_tolerances, spacing)


def _shapes(ref_map, pred_map, ids, matched, results, metrics, definition, options, spacing) -> None:
    """clDice, boundary IoU and centre distance on each instance's own box (one voxel wider)."""
    ref_boxes, pred_boxes = ndimage.find_objects(ref_map), ndimage.find_objects(pred_map)
    for r, label in zip(matched, ids.tolist()):
        boxes = [b[label - 1] for b in (ref_boxes, pred_boxes) if label - 1 < len(b) and b[label - 1] is not None]
        window = tuple(slice(max(min(b[a].start for b in boxes) - 1, 0), max(b[a].stop for b in boxes) + 1)
                       for a in range(ref_map.ndim))
        a, b = ref_map[window] == label, pred_map[window] == label
        if "cldice" in metrics:
            results[r]["cldice"] = shape.cldice(a, b)["cldice"]
        if "boundary_iou" in metrics:
            for width in options.boundary_iou_distances:
                results[r][f"boundary_iou_{distances.number_key(width)}"] = shape.boundary_iou(a, b, width)
        if "centre_distance" in metrics:
            results[r]["centre_distance"] = shape.centre_distance(a, b, spacing, definition)
