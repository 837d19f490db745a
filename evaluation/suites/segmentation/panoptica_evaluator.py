"""One case through panoptica's ``Panoptica_Evaluator``, group by group, as panoptica 2.1.7
computes it when handed the two files (``panoptica_evaluator.py: Panoptica_Evaluator.evaluate``,
``panoptica_pipeline.py: _panoptic_evaluate``, ``panoptica_result.py: PanopticaResult``).

Per group (``SegmentationClassGroups``, in the configuration's order): the group's labels are
extracted (a ``LabelMergeGroup`` binarised), instances are approximated by connected
components (cc3d in 3-D, face-connected scipy labelling in 2-D; a non-merged group with several
labels keeps them apart in 3-D, where cc3d labels each value on its own, but not in 2-D, where
scipy labels everything non-zero), matched (greedy, maximum bipartite or maximize-merge on IoU
or Dice), the matched pairs measured (``instance_evaluator.py: _evaluate_instance``), a decision
metric applied, and the global metrics taken on the group's binary masks
(``PanopticaResult._calc_global_bin_metric``). Where nothing matched, the configuration's
zero-TP rules give the values (``utils/edge_case_handling.py``).

Two things about spacing move numbers, and are reproduced unless corrected (``corrections``):

* ``panoptica_spacing_order``: panoptica reads ITK files with SimpleITK, whose arrays are in
  (z, y, x) order, and takes the spacing from ``GetSpacing()``, in (x, y, z) order
  (``utils/input_check_and_conversion/check_sitk_image.py: SITKImageChecker``): the per-instance
  distances and NSD tolerance use the spacing axes reversed. With the correction, each axis
  gets its own spacing.
* ``panoptica_global_spacing``: the global metrics are called without any spacing
  (``_calc_global_bin_metric``): distances in voxels, NSD at 0.5 voxel. With the correction,
  they take the instance metrics' spacing and tolerance.

Everything is computed inside each group's bounding box from the project's primitives (the
contingency scan, ``instances``, ``per_instance``, ``distances``): no pass per instance over
the volume.
"""

import numpy as np

from evaluation.errors import PhaseError, SubmissionError
from evaluation.suites.segmentation import instances, metrics_table, per_instance
from evaluation.suites.segmentation.instances import Matching, Overlaps
from evaluation.suites.segmentation.measured import Measured
from evaluation.suites.segmentation.panoptica_config import (
    DECREASING,
    SPEC_ORDER,
    WITH_PQ,
    EvaluatorConfig,
    Group,
    suffix,
)
from evaluation.suites.segmentation.panoptica_config import (
    METRICS as METRIC_ORDER,
)
from evaluation.suites.segmentation.surfaces import Box, membership

NAN = float("nan")


class _Reductions:
    """What the metric table's functions read from the suite's options: HD95, and NSD at one
    tolerance (the smallest spacing, panoptica's default, per instance)."""

    percentiles = (95.0,)
    fbeta = (1.0,)
    corrections = ()
    boundary_iou_distances = (1.0,)
    monai_subvoxels = False

    def __init__(self, tolerance):
        self.nsd_tolerances = (tolerance,)


def _key(metric: str, options: _Reductions) -> str:
    """The suite's key of a panoptica metric (its metric table row's one key)."""
    return metrics_table.BY_PANOPTICA[metric].keys(options)[0]


INSTANCE_OPTIONS = _Reductions("min_spacing")
# panoptica metric -> the suite's per-instance metric and its key
SUITE_METRIC = {name: (row.name, _key(name, INSTANCE_OPTIONS)) for name, row in metrics_table.BY_PANOPTICA.items()}


def check_labels(truth: np.ndarray, pred: np.ndarray, config: EvaluatorConfig) -> None:
    """``SegmentationClassGroups.has_defined_labels_for``: a label no group names is an error
    (panoptica raises ``ValueError`` for either map)."""
    for array, error, whose in ((pred, SubmissionError, "the prediction"), (truth, PhaseError, "the ground truth")):
        present = np.flatnonzero(np.bincount(array.ravel())) if array.dtype.itemsize <= 2 else np.unique(array)
        unknown = sorted(set(present.tolist()) - {0, *config.labels})
        if unknown:
            raise error(
                f"{whose} holds labels that no class group defines ({', '.join(map(str, unknown[:5]))}); "
                f"the groups define {', '.join(map(str, config.labels))}"
            )


def evaluate_case(truth, pred, spacing, config: EvaluatorConfig, corrections=(), scan=None) -> dict:
    """{group: (result keys -> values, reference_instances rows, the unmatched predictions'
    sizes)} of one case; ``spacing`` in
    the arrays' (z, y, x) order, ``scan`` the suite's one-pass scan (slot table and boxes)."""
    check_labels(truth, pred, config)
    instance_spacing = tuple(spacing) if "panoptica_spacing_order" in corrections else tuple(spacing)[::-1]
    if "panoptica_global_spacing" in corrections:
        global_spacing, global_tolerance = instance_spacing, "min_spacing"
    else:
        global_spacing, global_tolerance = (1.0,) * truth.ndim, 0.5
    table, low, high = scan(truth, pred, config.labels)
    found = {}
    for group in config.groups:
        members = np.array([config.labels.index(label) + 1 for label in group.labels], np.int64)
        present = [m for m in members if high[m].any()]
        window = (  # panoptica's crop: the group's box, two voxels wider (crop_data)
            tuple(
                slice(max(int(low[present, a].min()) - 2, 0), min(int(high[present, a].max()) + 2, truth.shape[a]))
                for a in range(truth.ndim)
            )
            if present
            else (slice(0, 1),) * truth.ndim
        )
        lookup, default = membership(group.labels)
        box = Box(truth[window], pred[window], lookup, default, tuple(w.start for w in window), instance_spacing)
        found[group.name] = _group(box, group, table, members, config, instance_spacing, global_spacing, global_tolerance)
    return found


def _group(box: Box, group: Group, table, members, config, spacing, global_spacing, global_tolerance):
    ref_mask, pred_mask = box.masks()
    ref, n_ref = _instances(box.truth, ref_mask, group, config)
    pred, n_pred = _instances(box.pred, pred_mask, group, config)
    metrics = [m for m in METRIC_ORDER if m in config.instance_metrics]
    lists, matched_sizes, unmatched_sizes, rows, false_positives = {m: [] for m in metrics}, [], [], [], []
    if n_ref and n_pred:
        ov = Overlaps.of(ref, pred)
        matching = _match(ov, group, config)
        n_pred -= sum(len(p) - 1 for p in matching.pairs.values())  # merged predictions count once
        per_pair = per_instance.evaluate(
            ref, pred, ov, matching, [SUITE_METRIC[m][0] for m in metrics], "panoptica", INSTANCE_OPTIONS, spacing
        )
        voxel = float(np.prod(spacing))
        accepted = []
        for r in sorted(matching.pairs):
            values = {m: per_pair[r][SUITE_METRIC[m][1]] for m in metrics}
            size = (int(ov.ref_size[r]), per_pair[r]["ref_volume"])
            if config.decision_metric is not None and not _beats(
                config.decision_metric, values[config.decision_metric], config.decision_threshold
            ):
                unmatched_sizes.append(size)
                continue
            matched_sizes.append(size)
            accepted.append(r)
            rows.append({f"sq{suffix(m)}": values[m] for m in metrics})
            for m in metrics:
                lists[m].append(values[m])
        unmatched_sizes += [(int(n), float(n) * voxel) for k, n in enumerate(ov.ref_size) if k not in matching.pairs]
        kept = {p for r in accepted for p in matching.pairs[r]}
        false_positives = [(int(n), float(n) * voxel) for k, n in enumerate(ov.pred_size) if k not in kept]
    elif n_ref or n_pred:  # no instance on one side: all unmatched (_handle_zero_instances_cases)
        voxel = float(np.prod(spacing))
        sizes = [(int(n), float(n) * voxel) for n in _sizes(ref if n_ref else pred)]
        unmatched_sizes, false_positives = (sizes, []) if n_ref else ([], sizes)
    tp = len(matched_sizes)
    result = _summary(tp, n_pred, n_ref, lists, metrics, config)
    result["instance_voxel_count_ref"] = float(np.mean([s[0] for s in matched_sizes])) if tp else NAN
    result["instance_volume_ref"] = float(np.mean([s[1] for s in matched_sizes])) if tp else NAN
    result["global_bin_volume_pred"] = int(pred_mask.sum())
    result["global_bin_volume_ref"] = int(ref_mask.sum())
    result.update(_global(box, table, members, tp, n_pred, n_ref, config, global_spacing, global_tolerance))
    rows = [{**row, "voxel_count": n, "volume": v, "is_matched": 1} for row, (n, v) in zip(rows, matched_sizes)]
    rows += [{"voxel_count": n, "volume": v, "is_matched": 0} for n, v in unmatched_sizes]
    return result, rows, [{"voxel_count": n, "volume": v} for n, v in false_positives]


def _sizes(instances: np.ndarray) -> np.ndarray:
    """Voxel counts of the instances present, in ascending id order."""
    if instances.dtype.kind in "ub" and int(instances.max(initial=0)) < 1 << 20:
        counts = np.bincount(instances.ravel())[1:]
        return counts[counts > 0]
    ids, counts = np.unique(instances, return_counts=True)
    return counts[ids != 0]


def _instances(labels: np.ndarray, mask: np.ndarray, group: Group, config: EvaluatorConfig) -> tuple[np.ndarray, int]:
    """The group's instances (``InstanceApproximator``) and how many there are."""
    grouped = mask.astype(np.uint8) if group.merge else np.where(mask, labels, 0)
    if not mask.any():
        return grouped, 0
    if group.single_instance or config.expected_input == "unmatched_instance":
        return grouped, int(_sizes(grouped).size)
    backend = config.backend or ("cc3d" if grouped.ndim >= 3 else "scipy")
    if backend == "cc3d":
        import cc3d

        components, count = cc3d.connected_components(np.ascontiguousarray(grouped), return_N=True)
        return components, int(count)
    from scipy import ndimage

    components, count = ndimage.label(grouped)
    return components, int(count)


def _match(ov: Overlaps, group: Group, config: EvaluatorConfig) -> Matching:
    if group.single_instance:  # MatchedInstancePair: the group's one label in both maps
        matching = Matching()
        matching.add(0, 0)
        return matching
    matcher = config.matcher
    scores = ov.dice() if matcher.metric == "DSC" else ov.iou()
    if matcher.kind == "max_bipartite":
        return instances.optimal(ov, scores, matcher.threshold, matcher.strict)
    if matcher.kind == "maximize_merge":
        return instances.maximize_merge(ov, scores, matcher.threshold, matcher.strict, dice=matcher.metric == "DSC")
    return instances.greedy(ov, scores, matcher.threshold, matcher.strict, many_to_one=matcher.many_to_one)


def _beats(metric: str, value: float, threshold: float) -> bool:
    """``Metric.score_beats_threshold`` (not strict): >= for increasing metrics, <= else."""
    return value <= threshold if metric in DECREASING else value >= threshold


def _zero_tp(config: EvaluatorConfig, metric: str, n_pred: int, n_ref: int) -> float | None:
    if metric not in config.zero_tp:
        raise PhaseError(
            f"panoptica raises here (NotImplementedError): metric {metric} has no zero-TP rule; "
            "add one to the configuration's edge_case_handler"
        )
    return config.zero_tp[metric].value(n_pred, n_ref)


def _summary(tp: int, n_pred: int, n_ref: int, lists: dict, metrics: list, config: EvaluatorConfig) -> dict:
    """The detection counts and the sq_/pq_ keys in panoptica's order; keys panoptica cannot
    compute (a precision of 0/0) are left out, as its ``to_dict`` leaves them out."""
    fp, fn = n_pred - tp, n_ref - tp
    out = {"n_ref_instances": n_ref, "n_pred_instances": n_pred, "tp": tp, "fp": fp, "fn": fn}
    if tp + fp:
        out["prec"] = tp / (tp + fp)
    if tp + fn:
        out["rec"] = tp / (tp + fn)
    rq = tp / (tp + 0.5 * fp + 0.5 * fn) if tp else (0.0 if n_pred + n_ref > 0 else NAN)
    out["rq"] = rq
    for metric in (m for m in SPEC_ORDER if m in metrics):
        values = lists[metric]
        if tp:
            mean, std = float(np.average(values)), float(np.std(values))
        else:
            mean, std = _zero_tp(config, metric, n_pred, n_ref), config.empty_list_std
        key = f"sq{suffix(metric)}"
        out[key], out[f"{key}_std"] = mean, std
        if metric in WITH_PQ:
            out[f"pq{suffix(metric)}"] = mean * rq if mean is not None else None
    return out


def _global(box: Box, table, members, tp: int, n_pred: int, n_ref: int, config, spacing, tolerance) -> dict:
    """``global_bin_<metric>`` on the group's binary masks; the zero-TP rules where they do
    not intersect (``PanopticaResult.__init__``)."""
    inter = int(table[np.ix_(members, members)].sum())
    n_ref_voxels, n_pred_voxels = int(table[members, :].sum()), int(table[:, members].sum())
    wanted = [m for m in METRIC_ORDER if m in config.global_metrics]
    if inter == 0:
        return {f"global_bin_{m.lower()}": _zero_tp(config, m, n_pred, n_ref) for m in wanted}
    options = _Reductions(tolerance)
    counts = (inter, n_pred_voxels - inter, n_ref_voxels - inter, 0)
    global_box = Box(box.truth, box.pred, box.membership, box.default, box.origin, tuple(spacing))
    measured = Measured(options, spacing, counts=counts, box=global_box)
    values = {}
    for function in dict.fromkeys(metrics_table.BY_PANOPTICA[m].function("panoptica") for m in wanted):
        values.update(function(measured))  # each family's function once (Dice and IoU: one overlap pass)
    found = {}
    for metric in wanted:
        value = values[_key(metric, options)]
        found[f"global_bin_{metric.lower()}"] = None if value is None else float(value)
    return found
