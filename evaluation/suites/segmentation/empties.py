"""Empty masks: what a metric scores when the truth or the prediction of a class is empty.

Every definition has its own convention (see the per-family modules and the suite's page); a
phase may replace them all by null (``empty_masks: nan``) or set explicit values per metric
and situation (``empty_values``), e.g. MONAI's ``ignore_empty=False`` Dice: 1 for two empty
masks, 0 for an empty truth.
"""

from evaluation.suites.segmentation import metrics_table

# panoptica's default EdgeCaseHandler (utils/edge_case_handling.py), as its pipeline result
# applies it to the global_bin_* metrics when the two masks do not intersect: (value with no
# instance at all, value otherwise), the metric table's zero-TP rules. Metrics without a rule
# raise there (``RAISES``): null here.
ZERO_TP = {m.name: m.zero_tp for m in metrics_table.METRICS if m.per_class and m.zero_tp is not None}


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
    """Per-class metrics, by the class's voxel counts; the metrics that describe the masks
    rather than compare them (``empty: kept``: counts, surface sizes) keep their values."""
    where = situation(n_ref, n_pred)
    if where is None:
        return
    for metric in metrics_table.rows(options.metrics):
        if metric.empty == "replaced":
            _replace(found, [k for k in metric.keys(options) if k in found], metric.name, where, options)


def apply_panoptica_global(found: dict, options, tp: int, n_ref: int, n_pred: int) -> None:
    """``panoptica_global``: where truth and prediction do not intersect, the panoptica-defined
    metrics take the zero-TP rules of panoptica's pipeline (``panoptica_result.py``,
    ``PanopticaResult.__init__``, the ``global_bin_*`` metrics). A non-empty mask holds at
    least one instance, so the rule only depends on which masks are empty."""
    if not options.panoptica_global or tp != 0:
        return
    index = 0 if n_ref == 0 and n_pred == 0 else 1
    for metric in metrics_table.rows(options.metrics):
        if metric.name in ZERO_TP and options.definition(metric.family) == "panoptica":
            value = ZERO_TP[metric.name][index]
            found.update(dict.fromkeys((k for k in metric.keys(options) if k in found), value))


def apply_instances(summary: dict, options, n_ref: int, n_pred: int) -> None:
    """Detection and panoptic scores (their keys with a direction, not their counts), by the
    numbers of instances."""
    where = situation(summary.get("n_ref", n_ref) or 0, summary.get("n_pred", n_pred) or 0)
    if where is None:
        return
    for metric in metrics_table.METRICS:
        if metric.per_instance == "summary" and metric.empty == "replaced" and metric.name in options.instance_metrics:
            scores = [k for k, kind in metric.keys.kinds(options) if kind.rankable and k in summary]
            _replace(summary, scores, metric.name, where, options)
