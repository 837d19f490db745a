"""CellMap ``head`` (janelia-cellmap/cellmap-segmentation-challenge @ 6b9ad68): raw counts per
(crop, label) — matching tp/fp/fn and the sum and number of normalised Hausdorff values for
instance labels, voxel tp/fp/fn for semantic ones — pooled per class over crops: F1, mean
normalised Hausdorff and their geometric mean, or IoU; the overall scores are plain means over
classes. A label that was not submitted counts every truth instance (instance) or every voxel
(semantic) as a false negative.

One of the two version modules behind ``versions.Version``; the suite picks it by
``options.version``.
"""

from pathlib import Path

import numpy as np

from evaluation.metrics.overlap import binary_counts
from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.aggregate import overall
from evaluation.suites.cellmap.inputs import Pair, count_instances
from evaluation.suites.cellmap.instances import Instances, Pathological, normalize_distances
from evaluation.suites.cellmap.options import Limits
from evaluation.suites.cellmap.scoring import entry_fields

COMMIT = "6b9ad6893ef1059227917af2a59cc2e61d84fa7e"
INFER_SCALE_FROM_SHAPE = True  # a large array without a voxel size is downsampled by shape ratio
PATHOLOGICAL_IGNORE = "ignore"  # the reference's policy; "unmatched" is the correction
COUNTS = ("tp", "fp", "fn")


# --------------------------------------------------------------------------------------------
# Per-label counts (utils/eval_utils/scoring.py)


def score_label(pred, truth, pair: Pair) -> dict:
    """``pred`` and ``truth`` are volumes (``volumes.py``) on the crop's grid."""
    if pair.instance:
        return score_instance(pred, truth, pair.grid.voxel_size, pair.limits, pair.pathological_crops)
    return semantic_counts(volumes.foreground_counts(truth, pred))


def score_semantic(pred: np.ndarray, truth: np.ndarray) -> dict:
    """``score_semantic`` of two arrays."""
    return semantic_counts(binary_counts(np.asarray(truth) > 0, np.asarray(pred) > 0))


def semantic_counts(counts) -> dict:
    """Voxel tp/fp/fn of ``pred > 0`` vs ``truth > 0`` (``score_semantic``)."""
    return {"tp": counts.tp, "fp": counts.fp, "fn": counts.fn, "status": "scored"}


def instance_entry(tp: int, fp: int, fn: int, distances: np.ndarray, voxel_size, status: str = "scored") -> dict:
    """The per-(crop, label) instance record: matching counts plus the sum and number of
    normalised per-instance distances (what ``score_instance`` returns)."""
    normalized = normalize_distances(distances, voxel_size)
    return {
        "tp": int(tp),
        "fp": int(fp),
        "fn": int(fn),
        "hausdorff_norm_sum": float(np.sum(normalized)),
        "n_hausdorff": int(normalized.size),
        "status": status,
    }


def pathological_entry(status: str, n_truth: int, n_pred: int, cap: float, voxel_size, policy: str) -> dict:
    """A crop that cannot be matched.

    ``ignore`` (``scoring.py`` ``_create_pathological_scores``): zero counts and no distance,
    so the crop contributes nothing and a class whose crops are all pathological scores 1.0
    ("nothing anywhere" in ``aggregation.py`` ``combine_scores``). ``unmatched`` (corrected):
    the crop counts as if nothing matched, as the scored path would count it: every truth
    instance a false negative and every predicted component a false positive, each with the
    capped distance."""
    if policy == PATHOLOGICAL_IGNORE:
        return {"tp": 0, "fp": 0, "fn": 0, "hausdorff_norm_sum": 0.0, "n_hausdorff": 0, "status": status}
    distances = np.full(n_truth + n_pred, cap, dtype=np.float32)
    return instance_entry(0, n_pred, n_truth, distances, voxel_size, status)


def score_instance(pred, truth, voxel_size, limits: Limits, pathological: str = PATHOLOGICAL_IGNORE) -> dict:
    """``score_instance``: one float32 distance per truth id (computed even without a match, so
    unmatched component ids colliding with truth ids also count then) plus the capped distance
    for every unmatched component; tp = matched truth ids, fp = unmatched components. ``pred``
    and ``truth`` are volumes or arrays."""
    found = Instances.scan(pred, truth, voxel_size)
    n_truth = int(found.truth_ids.size)
    try:
        mapping = found.match(limits)
    except Pathological as exc:
        return pathological_entry(str(exc), n_truth, found.n_pred, found.cap, voxel_size, pathological)
    distances, _ = found.distances(mapping)
    fp = found.n_pred - len(set(mapping) - {0})
    tp = len(set(mapping.values()) - {0})
    return instance_entry(tp, fp, n_truth - tp, distances, voxel_size)


def missing_counts(instance: bool, voxel_size, shape, n_instances: int) -> dict:
    """A truth label that was not submitted (``empty_label_score``): every truth instance a
    false negative with normalised distance 0, or every voxel (background included) a false
    negative."""
    fields = entry_fields(shape, voxel_size, missing=True)
    if instance:
        return {"tp": 0, "fp": 0, "fn": n_instances, "hausdorff_norm_sum": 0.0, "n_hausdorff": n_instances, **fields}
    return {"tp": 0, "fp": 0, "fn": fields["num_voxels"], **fields}


def missing_entry(truth_path: Path, instance: bool, voxel_size, shape) -> dict:
    return missing_counts(instance, voxel_size, shape, count_instances(truth_path) if instance else 0)


# --------------------------------------------------------------------------------------------
# Aggregation (utils/eval_utils/aggregation.py)


def _pools(entries: dict, instance_classes, include_missing: bool) -> dict[str, dict]:
    """Per class, the sums of tp/fp/fn (and of the Hausdorff sum/count for instance classes)
    over its crop entries, in first-seen order."""
    pools: dict[str, dict] = {}
    for labels in entries.values():
        for label, entry in labels.items():
            if entry["is_missing"] and not include_missing:
                continue
            keys = COUNTS + (("hausdorff_norm_sum", "n_hausdorff") if label in instance_classes else ())
            pool = pools.setdefault(label, dict.fromkeys(keys, 0))
            for key in keys:
                pool[key] += entry[key]
    return pools


def _instance_scores(pool: dict) -> dict:
    """F1, mean normalised Hausdorff and their geometric mean of one class's pool; a class
    with no count and no distance anywhere scores 1.0 ("nothing anywhere")."""
    tp, fp, fn, count = pool["tp"], pool["fp"], pool["fn"], pool["n_hausdorff"]
    denominator = 2 * tp + fp + fn
    if denominator == 0 and count == 0:
        f1 = nhd = combined = 1.0
    else:
        f1 = 2 * tp / denominator if denominator > 0 else 0.0
        nhd = pool["hausdorff_norm_sum"] / count if count > 0 else 0.0
        combined = (f1 * nhd) ** 0.5
    return {"f1": f1, "normalized_hausdorff_distance": nhd, "combined_score": combined}


def _semantic_scores(pool: dict) -> dict:
    denominator = pool["tp"] + pool["fp"] + pool["fn"]
    return {"iou": pool["tp"] / denominator if denominator > 0 else 1.0}


def combine(entries: dict, instance_classes, include_missing: bool) -> dict:
    """``combine_scores``: counts pooled per class over crops; the overall instance and
    semantic scores are plain means over classes."""
    label_scores = {}
    for label, pool in _pools(entries, instance_classes, include_missing).items():
        scores = _instance_scores(pool) if label in instance_classes else _semantic_scores(pool)
        label_scores[label] = {**scores, **{key: pool[key] for key in COUNTS}}
    instance = [s["combined_score"] for c, s in label_scores.items() if c in instance_classes]
    semantic = [s["iou"] for c, s in label_scores.items() if c not in instance_classes]
    overall_instance = sum(instance) / len(instance) if instance else 0
    overall_semantic = sum(semantic) / len(semantic) if semantic else 0
    return overall(label_scores, overall_instance, overall_semantic)


def public_results(everything: dict, submitted: dict) -> dict:
    """The participant-facing ``results.json`` (``public_scores``): the overall scores and
    bookkeeping, and the class scores without counts for classes with a submitted entry."""
    label_scores = {
        label: {k: v for k, v in scores.items() if k not in COUNTS}
        for label, scores in everything["label_scores"].items()
        if label in submitted["label_scores"]
    }
    return {"label_scores": label_scores, **{k: v for k, v in everything.items() if k != "label_scores"}}


def result_files(entries: dict, everything: dict, submitted: dict, bookkeeping: dict) -> dict:
    """The files ``update_scores`` writes: ``results.json`` (the public view) and
    ``results_extended.json`` (everything)."""
    return {
        "results.json": public_results({**everything, **bookkeeping}, submitted),
        "results_extended.json": {**entries, **everything, **bookkeeping},
    }
