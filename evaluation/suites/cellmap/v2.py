"""CellMap ``v2`` (janelia-cellmap/cellmap-segmentation-challenge @ 0f50f70): a score per
(crop, label) — id accuracy, mean normalised Hausdorff and their geometric mean for instance
labels, IoU and Dice for semantic ones — averaged over crops weighted by voxel count.

One of the two version modules behind ``versions.Version``; the suite picks it by
``options.version``.
"""

import math
from pathlib import Path

import numpy as np

from evaluation.metrics import binary
from evaluation.metrics.overlap import Contingency, binary_counts
from evaluation.metrics.voi import rand_voi
from evaluation.suites.cellmap.aggregate import overall
from evaluation.suites.cellmap.inputs import Pair
from evaluation.suites.cellmap.instances import Instances, Pathological, max_distance, normalize_distances
from evaluation.suites.cellmap.options import Limits
from evaluation.suites.cellmap.scoring import entry_fields

COMMIT = "0f50f702687e23a2f302c61dd89a4e0f77a27c06"
INFER_SCALE_FROM_SHAPE = False  # a large array without a voxel size is centre-cropped
INSTANCE_KEYS = ("mean_accuracy", "hausdorff_distance", "normalized_hausdorff_distance", "combined_score")
SEMANTIC_KEYS = ("iou", "dice_score")


# --------------------------------------------------------------------------------------------
# Per-label scores (utils/eval_utils/scoring.py)


def score_label(pred: np.ndarray, truth: np.ndarray, pair: Pair) -> dict:
    if pair.instance:
        return score_instance(pred, truth, pair.grid.voxel_size, pair.limits)
    return score_semantic(pred, truth)


def score_semantic(pred: np.ndarray, truth: np.ndarray) -> dict:
    """IoU, Dice and accuracy of ``pred > 0`` vs ``truth > 0``; both empty scores integer 1
    (``score_semantic``)."""
    counts = binary_counts(truth > 0, pred > 0)
    if counts.tp + counts.fp + counts.fn == 0:
        iou, dice = 1, 1
    else:
        iou, dice = binary.iou(counts), binary.dice_as_scipy(counts)
    return {"iou": iou, "dice_score": dice, "binary_accuracy": binary.accuracy(counts), "status": "scored"}


def id_accuracy(table: Contingency, counts, relabelled: np.ndarray) -> float:
    """``mean(truth == relabelled prediction)`` from the truth-foreground contingency: voxels
    agree where both are background, or where a component's new id is the truth id."""
    agree = table.b > 0
    same = relabelled[table.b[agree].astype(np.intp)] == table.a[agree].astype(np.int64)
    return float((counts.tn + int(table.count[agree][same].sum())) / counts.total)


def score_instance(pred: np.ndarray, truth: np.ndarray, voxel_size, limits: Limits) -> dict:
    """``score_instance``: binary scores and rand/VoI of the components (before matching), then
    the id accuracy and Hausdorff list after matching. An empty mapping gives one capped
    distance for the whole crop; a crop that cannot be matched keeps its binary scores and
    rand/VoI with zero accuracy (``_create_pathological_scores``)."""
    truth_fg = truth > 0
    found = Instances.of(pred, truth, voxel_size, truth_fg)
    counts = binary_counts(truth_fg, found.components > 0)
    binary_scores = {
        "iou": binary.iou(counts),
        "dice_score": binary.dice_as_scipy(counts),
        "binary_accuracy": binary.accuracy(counts),
    }
    voi = rand_voi(found.table)
    try:
        mapping = found.match(limits)
    except Pathological as exc:
        return {
            "mean_accuracy": 0,
            "binary_accuracy": binary_scores["binary_accuracy"],
            "hausdorff_distance": found.cap,
            "normalized_hausdorff_distance": float(normalize_distances([found.cap], voxel_size)[0]),
            "combined_score": 0,
            "iou": binary_scores["iou"],
            "dice_score": binary_scores["dice_score"],
            "status": str(exc),
            **voi,
        }

    relabelled = np.arange(found.n_pred + 1)
    if mapping == {0: 0}:
        distances = [0.0]
    elif not mapping:
        distances = [found.cap]
    else:
        distances, relabelled = found.distances(mapping)
        distances = distances.astype(np.float64)
    mean_accuracy = id_accuracy(found.table, counts, relabelled)
    normalized = float(np.mean(normalize_distances(distances, voxel_size)))
    return {
        "mean_accuracy": mean_accuracy,
        "hausdorff_distance": float(np.mean(distances)),
        "normalized_hausdorff_distance": normalized,
        "combined_score": (mean_accuracy * normalized) ** 0.5,
        "status": "scored",
        **binary_scores,
        **voi,
    }


def missing_entry(truth_path: Path | None, instance: bool, voxel_size, shape) -> dict:
    """A truth label that was not submitted (``empty_label_score``): zero scores, the capped
    distance for an instance label. v2 needs nothing of the truth array but its geometry, so
    ``truth_path`` is unused."""
    if instance:
        scores = {
            "mean_accuracy": 0,
            "hausdorff_distance": max_distance(voxel_size, shape),
            "normalized_hausdorff_distance": 0,
            "combined_score": 0,
        }
    else:
        scores = {"iou": 0, "dice_score": 0, "binary_accuracy": 0}
    return {**scores, **entry_fields(shape, voxel_size, missing=True)}


# --------------------------------------------------------------------------------------------
# Aggregation (utils/eval_utils/aggregation.py)


def combine(entries: dict, instance_classes, include_missing: bool) -> dict:
    """Voxel-weighted label scores and the overall scores (``combine_scores``): classes weigh
    by their total voxel count."""
    sums, weights = {}, {}
    for labels in entries.values():
        for label, entry in labels.items():
            if entry["is_missing"] and not include_missing:
                continue
            keys = INSTANCE_KEYS if label in instance_classes else SEMANTIC_KEYS
            total = sums.setdefault(label, dict.fromkeys(keys, 0))
            for key in keys:
                if entry.get(key) is not None:
                    total[key] += entry[key] * entry["num_voxels"]
            weights[label] = weights.get(label, 0) + entry["num_voxels"]
    label_scores = {
        label: {k: (v / weights[label] if weights[label] else math.nan) for k, v in total.items()}
        for label, total in sums.items()
    }
    instance = [label_scores[c]["combined_score"] * weights[c] for c in label_scores if c in instance_classes]
    semantic = [label_scores[c]["iou"] * weights[c] for c in label_scores if c not in instance_classes]
    overall_instance = (
        float(np.nansum(instance) / sum(weights[c] for c in label_scores if c in instance_classes)) if instance else 0
    )
    overall_semantic = (
        float(np.nansum(semantic) / sum(weights[c] for c in label_scores if c not in instance_classes)) if semantic else 0
    )
    return overall(label_scores, overall_instance, overall_semantic)


def result_files(entries: dict, everything: dict, submitted: dict, bookkeeping: dict) -> dict:
    """The files ``update_scores`` writes: ``results.json`` (everything) and
    ``results_submitted_only.json`` (missing entries left out of the aggregates, no bookkeeping)."""
    return {"results.json": {**entries, **everything, **bookkeeping}, "results_submitted_only.json": {**entries, **submitted}}
