"""MetricsReloaded at 2bf9c91 (Project-MONAI/MetricsReloaded, branch ``aggregation``, PR #57), as a
version of the ``metricsreloaded`` definition (cb38dfc): only what the branch changes.

Per (case, class), ``metrics/pairwise_measures.py: BinaryPairwiseMeasures`` (read, not copied):

* two empty masks ("Both") give NaN instead of fixed values: ``dsc`` and every ``fbeta`` (1
  before), ``nsd`` (``normalised_surface_distance``) and ``boundary_iou`` (1), ``hd``,
  ``hd_perc``, ``assd`` and ``masd`` (``measured_distance``: 0);
* ``positive_predictive_value`` is NaN for an empty prediction (0 before when the reference is
  not empty); ``negative_predictive_value`` is NaN when nothing is predicted negative (0 before
  when the reference is not full);
* everything else keeps its value (``iou``, the other overlap ratios, cldice, the centre
  distance, the counts; the instance evaluation, whose matched pairs always overlap).

And the branch's new per-row columns (``MultiLabelPairwiseMeasures.per_label_dict`` and
``processes/overall_process.py: ProcessEvaluation.create_mapping_column_nan_replaced_seg``),
the metric ``nanrep``:

* ``worse_dist``: ``BinaryPairwiseMeasures.calculate_worse_dist``, the length of the image's
  physical extent, sqrt(sum((n_i s_i)^2)) over the image's shape and spacing;
* ``check_empty``: ``"Both"``, ``"Ref"`` (the reference empty), ``"Pred"`` (the prediction
  empty) or ``"None"`` (a string);
* ``<key>_nanrep`` for every key of the phase's metrics the branch lists (``NAN_LIST``): the
  value, or where it is NaN, ``BEST`` for Both, ``WORSE`` for Ref and Pred, and for the
  distances wherever the value is NaN, ``worse_dist`` — last, so that a Both distance is
  ``worse_dist`` rather than ``BEST``'s 0, which the branch's own warnings ask for
  (``corrections: [metricsreloaded_nanrep_both_distance]`` gives 0).
"""

import math

import numpy as np

from evaluation.suites.segmentation import distances, overlap, shape
from evaluation.suites.segmentation.keys import number_key

NAME = "metricsreloaded-2bf9c91"
REFERENCE = "Project-MONAI/MetricsReloaded@2bf9c91dfe0d341a67f15a6e93d59ead8dd2feaf (branch aggregation, PR #57)"
NAN = float("nan")

# overall_process.py: NAN_LIST (the library's measure names) -> the suite's metrics, with their
# BEST and WORSE (MAX = 1000 for the distances) and whether they are in LIST_DISTANCE
MAX = 1000.0
NAN_LIST = {
    "iou": (1.0, 0.0, False),
    "dice": (1.0, 0.0, False),
    "fbeta": (1.0, 0.0, False),
    "masd": (0.0, MAX, True),
    "cldice": (1.0, 0.0, False),
    "hd": (0.0, MAX, True),
    "hd_percentile": (0.0, MAX, True),
    "assd": (0.0, MAX, True),
    "boundary_iou": (1.0, 0.0, False),
    "nsd": (1.0, 0.0, False),
}


def _both_empty(m) -> bool:
    tp, fp, fn, _ = m.counts
    return tp + fp + fn == 0


def overlap_measure(m) -> dict:
    """cb38dfc's overlap values (``overlap.metricsreloaded``) with the branch's NaN: ``dsc`` and
    ``fbeta`` for two empty masks (l. 797-799, 833-842), ``ppv`` for an empty prediction
    (l. 751-757), ``npv`` when nothing is predicted negative (l. 886-897)."""
    tp, fp, fn, tn = m.counts
    out = overlap.metricsreloaded(tp, fp, fn, tn, m.options.fbeta, m.options.corrections)
    if tp + fp + fn == 0:
        out["dice"] = NAN
        out.update({f"f{number_key(beta)}": NAN for beta in m.options.fbeta})
    if tp + fp == 0:
        out["precision"] = NAN
    if tn + fn == 0:
        out["npv"] = NAN
    return out


def distance_measure(m) -> dict:
    """cb38dfc's distances and NSD (``distances.metricsreloaded``) with NaN for two empty masks
    (``measured_distance``, l. 1257-1259; ``normalised_surface_distance``, l. 1223-1225): the
    directed values the suite derives too."""
    out = distances.metricsreloaded_distances(m)
    if _both_empty(m):
        out.update({k: NAN for k in out if not k.startswith("surface_")})
    return out


def boundary_iou_measure(m) -> dict:
    """``boundary_iou`` (l. 1143-1145): NaN for two empty masks, cb38dfc's value otherwise."""
    if _both_empty(m):
        return {f"boundary_iou_{number_key(d)}": NAN for d in m.options.boundary_iou_distances}
    return shape.boundary_iou_measure(m)


def check_empty(m) -> str:
    """``per_label_dict``'s ``check_empty`` from the masks' voxel counts."""
    tp, fp, fn, _ = m.counts
    ref_empty, pred_empty = tp + fn == 0, tp + fp == 0
    return "Both" if ref_empty and pred_empty else "Ref" if ref_empty else "Pred" if pred_empty else "None"


def worse_dist(shape_, spacing) -> float:
    """``calculate_worse_dist``: ``np.sqrt(np.sum(np.square(shape * pixdim)))``."""
    return float(np.sqrt(np.sum(np.square(np.asarray(shape_) * np.asarray(spacing, np.float64)))))


def replaced(value, situation: str, metric: str, far: float, corrections=()) -> float:
    """One ``<key>_nanrep`` value (``create_mapping_column_nan_replaced_seg``, l. 536-546):
    step by step as the branch writes them, the distances' last step testing the raw value."""
    best, worse, distance = NAN_LIST[metric]
    raw_nan = value is None or (isinstance(value, float) and math.isnan(value))
    found = NAN if raw_nan else value
    if raw_nan and situation == "Both":
        found = best
    if math.isnan(found) and situation in ("Ref", "Pred"):
        found = worse
    if distance and raw_nan and not (situation == "Both" and "metricsreloaded_nanrep_both_distance" in corrections):
        found = far
    return float(found)


def nanrep(m, listed) -> dict:
    """The ``nanrep`` columns of one (case, class) from its values computed before them
    (``m.values``: the definitions' own, before ``empty_masks`` or ``empty_values`` replace
    any); ``listed``: (metric, its keys) of the phase's metrics the branch replaces."""
    situation, far = check_empty(m), worse_dist(m.image_shape, m.spacing)
    out = {"worse_dist": far, "check_empty": situation}
    for metric, keys in listed:
        for key in keys:
            out[f"{key}_nanrep"] = replaced(m.values.get(key), situation, metric, far, m.options.corrections)
    return out
