"""Instance evaluation of one (case, class): match, count, and summarise per definition.

* panoptica (``panoptica/panoptica_result.py``): ``tp`` matched references, ``fp`` and ``fn``
  from the instance counts (after merging, for many-to-one matchings:
  ``panoptica/panoptica_pipeline.py: _panoptic_evaluate``), ``rq = tp / (tp + fp/2 + fn/2)``
  (0 when nothing matched but something exists, nan when nothing exists), ``sq`` and every
  ``mean_<m>`` the mean over the matched references (ascending id), ``std_<m>`` the population
  standard deviation, ``pq_<m> = mean_<m> * rq``. With no match, the zero-TP rules of
  ``panoptica/utils/edge_case_handling.py: EdgeCaseHandler`` apply; the metrics without a rule
  (HD, HD95, NSD, centre distance), for which panoptica raises, are null.
* MetricsReloaded (``MetricsReloaded/processes/mixed_measures_processes.py``): the matching's
  rows are a binary problem, ``f1`` its ``fbeta`` (float32 precision and recall), ``pq = f1 *
  mean IoU`` (a missing mean IoU counts 0 when f1 is 0, else 1); per-pair metrics without the
  spacing.
* MONAI (``monai/metrics/panoptic_quality.py``): float32 IoU, ``rq``, ``sq``, ``pq`` each with
  1e-6 added to its denominator.
"""

import math

import numpy as np

from evaluation.errors import PhaseError, SubmissionError
from evaluation.suites.segmentation import instance_detail, instances, metrics_table, overlap, per_instance
from evaluation.suites.segmentation.instances import Overlaps
from evaluation.suites.segmentation.options import instance_keys

NAN = float("nan")
# Predicted instances (or components) scored per case and class: more is not a segmentation
# but noise, and matching them one by one would take the worker's whole time.
MAX_INSTANCES = 100_000
# panoptica's zero-TP values of the per-instance keys: (no instance at all, otherwise), the
# metric table's rules; a metric missing here raises in panoptica (its mean is null).
ZERO_TP = {
    key: rule for m in metrics_table.METRICS if m.per_instance == "pairs" for key, rule in metrics_table.zero_tp_values(m).items()
}


def strict_rule(options, definition: str) -> bool:
    if options.match_rule != "definition":
        return options.match_rule == ">"
    return definition != "panoptica"


def algorithm(options, definition: str) -> str:
    if options.matching != "definition":
        return options.matching
    if definition == "deepmind":
        raise PhaseError(
            "phase.yaml: DeepMind's surface-distance has no instance evaluation; set definitions.instances "
            "to panoptica, metricsreloaded or monai"
        )
    return {
        "panoptica": "greedy",
        "metricsreloaded": "greedy_lowest_first",
        "monai": "greedy" if options.match_threshold >= 0.5 else "optimal_all_pairs",
    }[definition]


def match(ov: Overlaps, options, definition: str, single: bool = False) -> instances.Matching:
    if single and ov.ref_ids.size and ov.pred_ids.size:  # one instance per map: matched, whatever its IoU
        matching = instances.Matching()
        matching.add(0, 0)
        return matching
    scores = ov.iou32() if definition == "monai" else ov.iou()
    name, strict, threshold = algorithm(options, definition), strict_rule(options, definition), options.match_threshold
    if name == "many_to_one":
        matching = instances.greedy(ov, scores, threshold, strict, many_to_one=True)
    else:
        matching = {
            "greedy": instances.greedy,
            "greedy_lowest_first": instances.greedy_lowest_first,
            "optimal": instances.optimal,
            "optimal_all_pairs": instances.optimal_all_pairs,
            "maximize_merge": instances.maximize_merge,
        }[name](ov, scores, threshold, strict)
    if definition == "metricsreloaded" and matching.order is None:  # its rows list the pairs by prediction
        matching.order = sorted(matching.pairs, key=lambda r: matching.pairs[r][0])
    return matching


def refuse_too_many(count: int) -> None:
    """A class's predicted instances beyond ``MAX_INSTANCES`` are refused (the matching would
    take hours): a count of the prediction alone, so the preflight refuses it too."""
    if count > MAX_INSTANCES:
        raise SubmissionError(
            f"holds {count} instances of one class; at most {MAX_INSTANCES} are scored "
            "(a label map of instance ids or of classes with few connected components is expected)"
        )


def evaluate(ref: np.ndarray, pred: np.ndarray, options, spacing, volume_spacing=None, single=False) -> tuple[dict, dict]:
    """(summary keys -> values, details for instances.json) of one class's instance maps;
    ``volume_spacing``: the image's spacing, for the instances' volumes (``spacing`` by
    default); ``single``: one instance per map, matched whatever its overlap."""
    definition = metrics_table.library(options.definition("instances"))
    ov = Overlaps.of(ref, pred)
    refuse_too_many(ov.pred_ids.size)
    matching = match(ov, options, definition, single)
    metrics = [m.name for m in metrics_table.rows(options.instance_metrics) if m.per_instance == "pairs"]
    per_pair = per_instance.evaluate(ref, pred, ov, matching, metrics, definition, options, spacing)
    summary = {"panoptica": _panoptica, "metricsreloaded": _metricsreloaded}.get(definition, _monai)(
        ov, matching, per_pair, options
    )
    voxel = float(np.prod(volume_spacing if volume_spacing is not None else spacing))
    details = _details(ov, matching, per_pair, voxel)
    summary.update(_detail_summary(ov, matching, options, voxel, details))
    wanted = instance_keys(options)
    return {key: summary.get(key) for key in wanted}, details


def _lists(per_pair: dict, matched: list[int]) -> dict[str, list]:
    keys = sorted({k for values in per_pair.values() for k in values})
    return {k: [per_pair[r][k] for r in matched] for k in keys}


def _summaries(lists: dict, edge: int | None) -> dict:
    """mean_/std_ of every per-instance key; ``edge``: panoptica's zero-TP case (0 no instance,
    1 otherwise), or None for the plain mean (nan for no match)."""
    out = {}
    for key, values in lists.items():
        if values:
            out[f"mean_{key}"], out[f"std_{key}"] = float(np.average(values)), float(np.std(values))
        else:
            out[f"mean_{key}"] = (ZERO_TP[key][edge] if key in ZERO_TP else None) if edge is not None else NAN
            out[f"std_{key}"] = NAN
    return out


def _counts(ov: Overlaps, tp: int, fp: int, fn: int) -> dict:
    return {"n_ref": int(ov.ref_ids.size), "n_pred": tp + fp, "tp": tp, "fp": fp, "fn": fn}


def _panoptica(ov: Overlaps, matching, per_pair: dict, options) -> dict:
    matched = sorted(matching.pairs)
    merged = sum(len(p) - 1 for p in matching.pairs.values())
    n_pred, n_ref, tp = int(ov.pred_ids.size) - merged, int(ov.ref_ids.size), len(matched)
    fp, fn = n_pred - tp, n_ref - tp
    if tp:  # noqa: SIM108 - three cases read better as a block
        rq = tp / (tp + 0.5 * fp + 0.5 * fn)
    else:
        rq = 0.0 if n_pred + n_ref > 0 else NAN
    out = {
        **_counts(ov, tp, fp, fn),
        "n_pred": n_pred,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "f1": rq,
        "rq": rq,
    }
    lists = _lists(per_pair, matched) if matched else {k: [] for k in ZERO_TP}
    out.update(_summaries(lists, None if tp else int(n_pred + n_ref > 0)))
    out["sq"] = out["mean_iou"]
    out["iou_sum"] = float(np.sum(lists.get("iou", [])))
    for key in ("iou", "dice", "cldice"):
        if f"mean_{key}" in out:
            out[f"pq_{key}"] = out[f"mean_{key}"] * rq
    out["pq"] = out["pq_iou"]
    return out


def _metricsreloaded(ov: Overlaps, matching, per_pair: dict, options) -> dict:
    matched = list(matching.order) if matching.order is not None else sorted(matching.pairs)
    tp = len(matched)
    fp = matching.fp_rows if matching.fp_rows is not None else int(ov.pred_ids.size) - tp
    fn = int(ov.ref_ids.size) - tp
    rows = overlap.metricsreloaded(tp, fp, fn, 0, [1])
    lists = _lists(per_pair, matched)
    out = {
        **_counts(ov, tp, fp, fn),
        "precision": rows["precision"],
        "recall": rows["recall"],
        "f1": rows["f1"],
        "rq": rows["f1"],
    }
    out.update(_summaries(lists, None))
    sq = float(np.mean(np.asarray(lists.get("iou", []), np.float64))) if tp else NAN
    out["sq"], out["iou_sum"] = sq, float(np.sum(lists.get("iou", [])))
    out["pq"] = rows["f1"] * ((0 if rows["f1"] == 0 else 1) if math.isnan(sq) else sq)
    for key in ("iou", "dice", "cldice"):
        if f"mean_{key}" in out:
            out[f"pq_{key}"] = out[f"mean_{key}"] * rows["f1"]
    return out


def _monai(ov: Overlaps, matching, per_pair: dict, options) -> dict:
    matched = sorted(matching.pairs)
    tp = len(matched)
    fp, fn = int(ov.pred_ids.size) - tp, int(ov.ref_ids.size) - tp
    scores = ov.iou32()
    paired = np.array([scores[(ov.ref == r) & (ov.pred == matching.pairs[r][0])][0] for r in matched], np.float32)
    iou_sum = paired.sum(dtype=np.float32)
    t, f_p, f_n, half, smooth = (np.float32(v) for v in (tp, fp, fn, 0.5, 1e-6))
    rq = t / (t + half * f_p + half * f_n + smooth)
    out = {
        **_counts(ov, tp, fp, fn),
        "precision": tp / (tp + fp) if tp + fp else NAN,
        "recall": tp / (tp + fn) if tp + fn else NAN,
        "f1": float(rq),
        "rq": float(rq),
        "sq": float(iou_sum / (t + smooth)),
        "pq": float(iou_sum / (t + half * f_p + half * f_n + smooth)),
        "iou_sum": float(iou_sum),
    }
    lists = _lists(per_pair, matched)
    out.update(_summaries(lists, None))
    for key in ("iou", "dice", "cldice"):
        if f"mean_{key}" in out:
            out[f"pq_{key}"] = out[f"mean_{key}"] * float(rq)
    return out


def _details(ov: Overlaps, matching, per_pair: dict, voxel: float) -> dict:
    """Matched pairs (reference id, prediction ids, sizes, per-pair metrics) and every
    unmatched instance with its size (``unmatched_ref``/``unmatched_pred``: their ids)."""
    order = list(matching.order) if matching.order is not None else sorted(matching.pairs)
    matched_preds = matching.matched_preds

    def sized(kind: str, sizes, k: int) -> dict:
        return {f"{kind}_voxels": int(sizes[k]), f"{kind}_volume": float(sizes[k]) * voxel}

    def unmatched(ids, sizes, keep) -> list[dict]:
        return [{"id": int(i), "voxels": int(sizes[k]), "volume": float(sizes[k]) * voxel} for k, i in enumerate(ids) if keep(k)]

    return {
        "matches": [
            {
                "ref": int(ov.ref_ids[r]),
                "pred": [int(ov.pred_ids[p]) for p in matching.pairs[r]],
                **sized("ref", ov.ref_size, r),
                "pred_voxels": int(ov.pred_size[matching.pairs[r]].sum()),
                "pred_volume": float(ov.pred_size[matching.pairs[r]].sum()) * voxel,
                **per_pair.get(r, {}),
            }
            for r in order
        ],
        "unmatched_ref": [int(i) for k, i in enumerate(ov.ref_ids) if k not in matching.pairs],
        "unmatched_pred": [int(i) for k, i in enumerate(ov.pred_ids) if k not in matched_preds],
        "unmatched_ref_instances": unmatched(ov.ref_ids, ov.ref_size, lambda k: k not in matching.pairs),
        "unmatched_pred_instances": unmatched(ov.pred_ids, ov.pred_size, lambda k: k not in matched_preds),
    }


# --------------------------------------------------------------------------------------------
# Lesion-level detail: size bins and COCO's AP (instance_detail)


def _detail_summary(ov: Overlaps, matching, options, voxel: float, details: dict) -> dict:
    """Recall and precision per size bin, COCO's AP of this case; the per-threshold matches
    go to ``details`` for the dataset AP (``aggregate``)."""
    out = {}
    if "size_bins" in options.instance_metrics:
        scale = voxel if options.size_unit == "volume" else 1.0
        matched_preds = matching.matched_preds
        out.update(
            instance_detail.size_bins(
                ov.ref_size * scale,
                ov.pred_size * scale,
                [k in matching.pairs for k in range(ov.ref_ids.size)],
                [k in matched_preds for k in range(ov.pred_ids.size)],
                options.size_bins,
            )
        )
    if "ap" in options.instance_metrics:
        matches = instance_detail.coco_matches(int(ov.ref_ids.size), int(ov.pred_ids.size), ov.ref, ov.pred, ov.iou())
        details["coco"] = {"matches": matches.astype(int).tolist(), "n_ref": int(ov.ref_ids.size)}
        out.update(instance_detail.coco_ap([matches], [int(ov.ref_ids.size)]))
    return out
