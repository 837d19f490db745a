"""Scoring one case: one contingency pass for every class's overlap counts, then per class,
inside its own bounding box, one distance pass per surface kind, the shape metrics and the
instance evaluation; every metric of every family derives from those.

Classes are mapped to small slot numbers first (one lookup per voxel): a class's box comes
from ``scipy.ndimage.find_objects`` of the slot maps and its masks are slot comparisons
inside the box, so no class costs a pass over the whole image.
"""

import math

import numpy as np
from scipy import ndimage

from evaluation.suites.segmentation import distances, empties, instance_scores, overlap, shape
from evaluation.suites.segmentation.inputs import CaseTask, read_case, refuse_unknown_labels
from evaluation.suites.segmentation.instances import components
from evaluation.suites.segmentation.options import DISTANCE, OVERLAP, ClassDef, Options, metric_keys
from evaluation.suites.segmentation.surfaces import Box, monai_area_table, surfel_surfaces, voxel_surfaces
from evaluation.metrics import surfels

_CHUNK = 1 << 22  # voxels mapped to slots at a time (bounded temporaries for wide integer types)


def score_case(task: CaseTask) -> dict:
    options = task.options
    truth, pred, spacing = read_case(task)
    if not options.instances_input and options.unknown_labels == "reject" and task.prediction is not None:
        refuse_unknown_labels(pred, options.label_ids, task.display)
    labels = options.label_ids if not options.instances_input else ()
    truth_slots, pred_slots = slots(truth, labels), slots(pred, labels)
    width = max(len(labels), 1) + 1
    table = np.bincount(truth_slots.ravel().astype(np.int64) * width + pred_slots.ravel(), minlength=width * width).reshape(width, width)
    boxes = (ndimage.find_objects(truth_slots), ndimage.find_objects(pred_slots))
    results, details = {}, {}
    for cls in options.classes:
        members = np.array([labels.index(label) + 1 for label in cls.labels] or [1], np.int64)
        window = class_window(boxes, members, truth.ndim)
        ref = np.isin(truth_slots[window], members)
        prd = np.isin(pred_slots[window], members)
        results[cls.name], found = score_class(options, cls, table, members, ref, prd, spacing, truth, pred, window)
        if found is not None:
            details[cls.name] = found
    diagonal = math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape, spacing)))
    return {"spacing": list(spacing), "shape": list(truth.shape), "diagonal": diagonal, "classes": results,
            "instances": details}


def slots(labels: np.ndarray, ids: tuple[int, ...]) -> np.ndarray:
    """Each voxel's class slot: i + 1 for the i-th declared label, 0 for anything else (with
    no declared labels, instance maps: 1 for any non-zero label)."""
    if not ids:
        return (labels != 0).view(np.uint8)
    table = np.zeros(max(ids) + 2, np.uint8 if len(ids) < 255 else np.uint16)
    table[list(ids)] = np.arange(1, len(ids) + 1)
    out = np.empty(labels.shape, table.dtype)
    flat, target = labels.reshape(-1), out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        target[start:start + _CHUNK] = table[np.minimum(flat[start:start + _CHUNK], max(ids) + 1)]
    return out


def class_window(boxes, members: np.ndarray, ndim: int) -> tuple[slice, ...]:
    found = [b[m - 1] for b in boxes for m in members if m - 1 < len(b) and b[m - 1] is not None]
    if not found:  # the class is in neither map: one background voxel stands for it
        return (slice(0, 1),) * ndim
    return tuple(slice(min(f[a].start for f in found), max(f[a].stop for f in found)) for a in range(ndim))


def score_class(options: Options, cls: ClassDef, table, members, ref, prd, spacing, truth, pred, window):
    """All metrics of one class; ``ref``/``prd`` are its masks inside ``window``."""
    tp = int(table[np.ix_(members, members)].sum())
    n_ref, n_pred = int(table[members, :].sum()), int(table[:, members].sum())
    counts = (tp, n_pred - tp, n_ref - tp, int(table.sum()) - n_ref - n_pred + tp)
    out = {}
    wanted = set(options.metrics)
    if wanted & set(OVERLAP):
        out.update(overlap.DEFINITIONS[options.definition("overlap")](*counts, options.fbeta))
    if wanted & set(DISTANCE):
        out.update(distance_metrics(options, Box.of(ref, prd, spacing, [w.start for w in window])))
    if "boundary_iou" in wanted:
        out.update({f"boundary_iou_{distances.number_key(d)}": shape.boundary_iou(ref, prd, d) for d in options.boundary_iou_distances})
    if wanted & {"cldice", "topology"}:
        out.update(shape.cldice(ref, prd))
    if "centre_distance" in wanted:
        out["centre_distance"] = shape.centre_distance(ref, prd, spacing, options.definition("centre"))
    keys = [key for metric in options.metrics for key in metric_keys(metric, options)]
    found = {key: out.get(key) for key in keys}
    empties.apply(found, options, n_ref, n_pred)
    details = None
    if options.instance_evaluation:
        if options.instances_input:
            ref_instances, pred_instances = truth[window] * ref, pred[window] * prd
        else:
            full = _full_connectivity(options, ref.ndim)
            ref_instances, pred_instances = components(ref, full), components(prd, full)
        instance_spacing = _instance_spacing(options, spacing)
        summary, details = instance_scores.evaluate(ref_instances, pred_instances, options, instance_spacing)
        empties.apply_instances(summary, options, n_ref, n_pred)
        found["instances"] = summary
    return found, details


def distance_metrics(options: Options, box: Box) -> dict:
    definition = options.definition("distance")
    arguments = (options.percentiles, options.nsd_tolerances, box.spacing)
    if definition == "deepmind":
        return distances.deepmind(surfel_surfaces(box, surfels.area_table(box.spacing)), *arguments)
    voxels = voxel_surfaces(box)
    if definition == "monai":
        corners = surfel_surfaces(box, monai_area_table(box.spacing)) if options.monai_subvoxels else None
        return distances.monai(voxels, *arguments, surfels=corners)
    return {"panoptica": distances.panoptica, "metricsreloaded": distances.metricsreloaded}[definition](voxels, *arguments)


def _full_connectivity(options: Options, ndim: int) -> bool:
    if options.connectivity != "definition":
        return options.connectivity == "full"
    return ndim == 3  # panoptica: scipy's face connectivity in 2-D, cc3d's 26 in 3-D


def _instance_spacing(options: Options, spacing) -> tuple[float, ...]:
    choice = options.instance_spacing
    if choice == "definition":
        choice = "voxel" if options.definition("instances") == "metricsreloaded" else "header"
    return (1.0,) * len(spacing) if choice == "voxel" else tuple(spacing)
