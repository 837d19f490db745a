"""Empty masks: what a metric scores when the truth or the prediction of a class is empty.

Every definition has its own convention (see the per-family modules and the suite's page); a
phase may replace them all by null (``empty_masks: nan``) or set explicit values per metric
and situation (``empty_values``), e.g. MONAI's ``ignore_empty=False`` Dice: 1 for two empty
masks, 0 for an empty truth.
"""

import math

from evaluation.suites.segmentation.options import FAMILY, metric_keys

# Metrics that describe the masks rather than compare them keep their values.
KEPT = ("counts", "surface_size")
SUMMARY_KEYS = {"detection": ("precision", "recall", "f1"), "panoptic": ("sq", "pq", "rq")}


def situation(n_ref: int, n_pred: int) -> str | None:
    if n_ref == 0 and n_pred == 0:
        return "both_empty"
    if n_ref == 0:
        return "ref_empty"
    if n_pred == 0:
        return "pred_empty"
    return None


def _replace(found: dict, keys, metric: str, where: str, options) -> None:
    chosen = options.empty_values.get(metric, {})
    if where in chosen:
        found.update(dict.fromkeys(keys, chosen[where]))
    elif options.empty_masks == "nan":
        found.update(dict.fromkeys(keys, None))


def apply(found: dict, options, n_ref: int, n_pred: int) -> None:
    """Per-class metrics, by the class's voxel counts."""
    where = situation(n_ref, n_pred)
    if where is None:
        return
    for metric in options.metrics:
        if metric not in KEPT:
            _replace(found, [k for k in metric_keys(metric, options) if k in found], metric, where, options)


# panoptica's default EdgeCaseHandler (utils/edge_case_handling.py), as its pipeline result
# applies it to the global_bin_* metrics when the two masks do not intersect: (value with no
# instance at all, value otherwise). Metrics without a rule raise there: null here.
ZERO_TP = {
    "dice": (math.nan, 0.0),
    "iou": (math.nan, 0.0),
    "cldice": (math.nan, 0.0),
    "assd": (math.nan, math.inf),
    "volume_difference": (math.nan, math.nan),
    "abs_volume_difference": (math.nan, math.nan),
    "hd": (None, None),
    "hd_percentile": (None, None),
    "nsd": (None, None),
    "centre_distance": (None, None),
}


def apply_panoptica_global(found: dict, options, tp: int, n_ref: int, n_pred: int) -> None:
    """``panoptica_global``: where truth and prediction do not intersect, the panoptica-defined
    metrics take the zero-TP rules of panoptica's pipeline (``panoptica_result.py``,
    ``PanopticaResult.__init__``, the ``global_bin_*`` metrics). A non-empty mask holds at
    least one instance, so the rule only depends on which masks are empty."""
    if not options.panoptica_global or tp != 0:
        return
    index = 0 if n_ref == 0 and n_pred == 0 else 1
    for metric in options.metrics:
        if metric in ZERO_TP and options.definition(FAMILY[metric]) == "panoptica":
            value = ZERO_TP[metric][index]
            found.update(dict.fromkeys((k for k in metric_keys(metric, options) if k in found), value))


def apply_instances(summary: dict, options, n_ref: int, n_pred: int) -> None:
    """Detection and panoptic scores, by the numbers of instances."""
    where = situation(summary.get("n_ref", n_ref) or 0, summary.get("n_pred", n_pred) or 0)
    if where is None:
        return
    for metric, keys in SUMMARY_KEYS.items():
        if metric in options.instance_metrics:
            _replace(summary, [k for k in keys if k in summary], metric, where, options)
