"""Scoring one case: one contingency pass for every class's overlap counts, then per class,
inside its own bounding box, one distance pass per surface kind, the shape metrics and the
instance evaluation; every metric of every family derives from those.

One compiled pass over both maps maps every label to its class slot, counts the (truth,
prediction) slot pairs and finds every slot's bounding box. A class is then only looked at
inside its box, through a lookup table of its labels (surfaces are read straight from the
label maps; masks are built only for the metrics that need them), so no class costs a pass
over the whole image.
"""

import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.errors import SubmissionError
from evaluation.metrics.jit import numba
from evaluation.metrics.nearest import as_3d
from evaluation.suites.segmentation import empties, instance_scores, metrics_table
from evaluation.suites.segmentation.inputs import CaseTask, read_case, read_prediction, refuse_unknown_labels
from evaluation.suites.segmentation.instances import components
from evaluation.suites.segmentation.measured import Measured
from evaluation.suites.segmentation.options import Options, metric_keys
from evaluation.suites.segmentation.surfaces import Box, membership

# The preflight's time model: the 256^3 benchmark volume with 400 instances scores in 0.36 s
# (docs/suites/segmentation.md, "Speed"), 21 s per G voxel; rounded up.
SECONDS_PER_GVOXEL = 25.0


@numba.njit(cache=True, nogil=True)
def _scan(truth, pred, lut, default, table, low, high):  # pragma: no cover - compiled
    """One pass over both maps: each voxel's slot (``lut[label]``, ``default`` beyond the
    table) counted in the (truth slot, prediction slot) table, and every slot's bounding box
    over both maps (``low``/``high`` per slot and axis, ``high`` exclusive)."""
    depth, rows, columns = truth.shape
    background = 0
    for z in range(depth):
        for y in range(rows):
            for x in range(columns):
                t, p = truth[z, y, x], pred[z, y, x]
                a = lut[t] if t < lut.size else default
                b = lut[p] if p < lut.size else default
                if a == 0 and b == 0:  # most voxels: counted once at the end
                    background += 1
                    continue
                table[a, b] += 1
                for slot in (a, b):
                    if slot != 0:
                        low[slot, 0] = min(low[slot, 0], z)
                        low[slot, 1] = min(low[slot, 1], y)
                        low[slot, 2] = min(low[slot, 2], x)
                        high[slot, 0] = max(high[slot, 0], z + 1)
                        high[slot, 1] = max(high[slot, 1], y + 1)
                        high[slot, 2] = max(high[slot, 2], x + 1)
    table[0, 0] += background


def score_case(task: CaseTask) -> dict:
    options = task.options
    truth, pred, spacing = read_case(task)
    if options.label_ids and options.unknown_labels == "reject" and task.prediction is not None:  # ids of classes too
        refuse_unknown_labels(pred, options.label_ids, task.display)
    with _named(task):
        return score_arrays(truth, pred, spacing, options)


def check_case(task: CaseTask) -> dict:
    """The preflight of one case: the prediction read and checked as ``score_case`` reads it,
    against the truth's header, and what scoring refuses of the prediction alone (unknown
    labels, too many instances); the estimated seconds of scoring it."""
    options, truth = task.options, public.read_header(Path(task.truth))
    if task.prediction is not None:
        pred = read_prediction(task, truth.volume())
        if not options.instances_input and options.unknown_labels == "reject":
            refuse_unknown_labels(pred, options.label_ids, task.display)
        with _named(task):
            check_instance_counts(pred, options)
    return {"seconds": truth.voxels / 1e9 * SECONDS_PER_GVOXEL}


@contextmanager
def _named(task: CaseTask):
    """A submission error raised about the data, without the file's name, gets the name."""
    try:
        yield
    except SubmissionError as exc:
        raise SubmissionError(f"{task.display}: {exc}") from None


def check_instance_counts(pred: np.ndarray, options: Options) -> None:
    """``instance_scores.refuse_too_many`` of each class, in class order, as ``score_arrays``
    counts the prediction's instances: every non-zero id of an instance map, else the
    connected components of the class's mask (a class's box holds all of its voxels)."""
    if not options.instance_evaluation:
        return
    for cls in options.classes:
        if options.instances_input:
            count = np.unique(pred[pred != 0]).size
        else:
            lookup, default = membership(cls.labels)
            mask = Box(pred, pred, lookup, default, (0,) * pred.ndim, (1.0,) * pred.ndim).pred_mask()
            count = int(components(mask, _full_connectivity(options, pred.ndim)).max(initial=0))
        instance_scores.refuse_too_many(count)


def score_arrays(truth: np.ndarray, pred: np.ndarray, spacing: tuple[float, ...], options: Options) -> dict:
    """Every class's metrics of one case (``classes``), the instance matches (``instances``),
    and the case's spacing, shape and diagonal (the worst distance of ``nan_policy: worst``)."""
    labels = options.label_ids  # none for one foreground class of instance ids
    table, low, high = scan(truth, pred, labels)
    results, details, empty = {}, {}, {}
    for cls in options.classes:
        members = np.array([labels.index(label) + 1 for label in cls.labels] or [1], np.int64)
        empty[cls.name] = empties.situation(int(table[members, :].sum()), int(table[:, members].sum()))
        window = class_window(low, high, members, truth.ndim)
        lookup, default = membership(cls.labels)
        box = Box(truth[window], pred[window], lookup, default, tuple(w.start for w in window), tuple(spacing))
        results[cls.name], found = score_class(options, table, members, box, cls, truth.shape)
        if found is not None:
            details[cls.name] = found
    diagonal = math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape, spacing)))
    found = {
        "spacing": list(spacing),
        "shape": list(truth.shape),
        "diagonal": diagonal,
        "classes": results,
        "instances": details,
        "empty": empty,  # each class's empty-mask situation, for the census
    }
    for metric in metrics_table.rows(options.metrics):
        if metric.per_case:  # over the label slots: the background and each declared label
            found[metric.name] = metric.function(metric.fallback)(table)
    return found


def scan(truth: np.ndarray, pred: np.ndarray, labels: tuple[int, ...]):
    """(pair table, box starts, box stops) of the class slots: slot i + 1 for the i-th declared
    label, 0 for anything else; with no declared labels (instance maps), 1 for any non-zero
    label."""
    if labels:
        lut, default = np.zeros(max(labels) + 1, np.int64), 0
        lut[list(labels)] = np.arange(1, len(labels) + 1)
    else:
        lut, default = np.array([0, 1], np.int64), 1
    width = max(len(labels), 1) + 1
    table = np.zeros((width, width), np.int64)
    low, high = np.full((width, 3), np.iinfo(np.int64).max, np.int64), np.zeros((width, 3), np.int64)
    _scan(*(as_3d(m.view(np.uint8) if m.dtype == bool else m) for m in (truth, pred)), lut, default, table, low, high)
    shift = 3 - truth.ndim  # a 2-D map is one plane: drop the plane axis of the boxes
    return table, low[:, shift:], high[:, shift:]


def class_window(low: np.ndarray, high: np.ndarray, members: np.ndarray, ndim: int) -> tuple[slice, ...]:
    present = [m for m in members if high[m].any()]
    if not present:  # the class is in neither map: one background voxel stands for it
        return (slice(0, 1),) * ndim
    return tuple(slice(int(low[present, a].min()), int(high[present, a].max())) for a in range(ndim))


def score_class(options: Options, table: np.ndarray, members: np.ndarray, box: Box, cls=None, image_shape=None):
    """All metrics of one class (its slots ``members``, its ``box``) and its instance matches."""
    tp = int(table[np.ix_(members, members)].sum())
    n_ref, n_pred = int(table[members, :].sum()), int(table[:, members].sum())
    counts = (tp, n_pred - tp, n_ref - tp, int(table.sum()) - n_ref - n_pred + tp)
    measured = Measured(options, box.spacing, counts=counts, box=box, image_shape=image_shape)
    out = measured.values
    for function in metrics_table.class_functions(options):  # every family's function, once
        out.update(function(measured))
    found = {key: out.get(key) for metric in options.metrics for key in metric_keys(metric, options)}
    empties.apply_panoptica_global(found, options, tp, n_ref, n_pred)
    empties.apply(found, options, n_ref, n_pred)
    details = None
    if options.instance_evaluation:
        ref_instances, pred_instances = _instance_maps(options, box, measured, cls)
        single = cls is not None and cls.single_instance
        summary, details = instance_scores.evaluate(
            ref_instances, pred_instances, options, _instance_spacing(options, box.spacing), box.spacing, single
        )
        empties.apply_instances(summary, options, n_ref, n_pred)
        found["instances"] = summary
    return found, details


def _instance_maps(options: Options, box: Box, measured: Measured, cls) -> tuple[np.ndarray, np.ndarray]:
    """The instances of one class in its box: the instance ids (of the class's ids, when the
    classes list them), or the connected components of the class (of each label on its own
    for a label group that is not merged, panoptica's LabelGroup; the whole class for a
    single-instance class)."""
    if options.instances_input:
        if not cls.labels:
            return box.truth, box.pred
        return tuple(np.where(m, a, 0) for m, a in zip(measured.masks, (box.truth, box.pred)))
    if cls is not None and cls.single_instance:
        return tuple(m.view(np.uint8) for m in measured.masks)
    full = _full_connectivity(options, box.truth.ndim)
    if cls is not None and not cls.merge and len(cls.labels) > 1:
        return tuple(components(np.where(m, a, 0), full) for m, a in zip(measured.masks, (box.truth, box.pred)))
    return tuple(components(m, full) for m in measured.masks)


def _full_connectivity(options: Options, ndim: int) -> bool:
    if options.connectivity != "definition":
        return options.connectivity == "full"
    return ndim == 3  # panoptica: scipy's face connectivity in 2-D, cc3d's 26 in 3-D


def _instance_spacing(options: Options, spacing) -> tuple[float, ...]:
    return (1.0,) * len(spacing) if options.instance_units == "voxel" else tuple(spacing)
