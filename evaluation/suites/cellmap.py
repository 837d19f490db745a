"""CellMap Segmentation Challenge, reproducing the official evaluator.

Reference: janelia-cellmap/cellmap-segmentation-challenge, ``v2`` = commit 0f50f70 and
``head`` = commit 6b9ad68 (``utils/eval_utils``: ``scoring.py``, ``instance_matching.py``,
``distance.py``, ``aggregation.py``, ``submission.py``; ``utils/matched_crop.py``).
Definitions, constants and quirks follow ``SPEC.md`` of the conformance kit; section numbers
below refer to it (part A = v2, part B / section 10 = head).

A submission is a zarr with one group per test crop (``crop<N>``) and one array per label.
Every array of every crop of ``truth.zarr`` is scored: instance classes by connected
components, min-cost-flow matching and per-instance Hausdorff; the others as semantic masks.
Intake, alignment, masks, matching and the Hausdorff primitive are shared by both versions.

- ``v2`` scores each (crop, label) (id accuracy, mean normalised Hausdorff, IoU/Dice) and
  averages over crops weighted by voxel count.
- ``head`` keeps raw counts per (crop, label) (matching tp/fp/fn, the sum and number of
  normalised Hausdorff values, voxel tp/fp/fn) and pools them per class over crops: F1, mean
  normalised Hausdorff and their geometric mean for instance classes, IoU for semantic ones;
  the overall scores are plain means over classes. A label that was not submitted counts every
  truth instance (instance) or every voxel (semantic) as a false negative.
"""

import functools
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import cc3d
import numpy as np

from evaluation import log
from evaluation.alignment import Grid, align, resampled_shape, resampling
from evaluation.errors import PhaseError, SubmissionError
from evaluation.metrics import binary
from evaluation.metrics.hausdorff import capped_hausdorff
from evaluation.metrics.matching import MatchingFailed, min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import binary_counts, contingency
from evaluation.metrics.voi import rand_voi
from evaluation.phase import Phase
from evaluation.readers import zarr_store
from evaluation.submission import Submission
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register

_log = log.get(__name__)

REFERENCE = {
    "repository": "janelia-cellmap/cellmap-segmentation-challenge",
    "v2": "0f50f702687e23a2f302c61dd89a4e0f77a27c06",
    "head": "6b9ad6893ef1059227917af2a59cc2e61d84fa7e",
}
# SPEC 6: membership by exact name; also decides the resampling order, always from this list.
INSTANCE_CLASSES = ("nuc", "vim", "ves", "endo", "lyso", "ld", "perox", "mito", "np", "mt", "cell", "instance")
INSTANCE_KEYS = ("mean_accuracy", "hausdorff_distance", "normalized_hausdorff_distance", "combined_score")
SEMANTIC_KEYS = ("iou", "dice_score")
TOO_MANY = "skipped_too_many_instances"


@dataclass(frozen=True)
class Limits:
    """The reference's tunables (SPEC 12), with its defaults; each is a phase option."""

    final_instance_ratio_cutoff: float = 10.0
    initial_instance_ratio_cutoff: float = 50.0
    instance_ratio_factor: float = 5.0
    max_overlap_edges: int = 5_000_000
    mcmf_cost_scale: int = 1_000_000
    max_volume_size_ratio: float = 4096.0

    @classmethod
    def from_options(cls, options: dict) -> "Limits":
        return cls(**{f.name: options[f.name] for f in fields(cls) if f.name in options})

    def ratio_cutoff(self, n_gt: int) -> float:
        """Largest accepted (max prediction id) / (max truth id) ratio (SPEC 7.3 step 3)."""
        return float(self.final_instance_ratio_cutoff + self.initial_instance_ratio_cutoff * np.exp(-n_gt / self.instance_ratio_factor))


# --------------------------------------------------------------------------------------------
# Distances


def max_distance(voxel_size, shape) -> float:
    """The Hausdorff cap: half the smallest physical extent of the crop (``compute_max_distance``)."""
    return float(min((float(v) * int(s)) / 2 for v, s in zip(voxel_size, shape)))


def normalize_distances(distances, voxel_size) -> np.ndarray:
    """``1.01 ** (-d / |vs|)`` (``normalize_distance``); an infinite distance scores 0."""
    d = np.asarray(distances, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(np.isinf(d), 0.0, 1.01 ** (-d / np.linalg.norm(np.asarray(voxel_size, dtype=np.float64))))


# --------------------------------------------------------------------------------------------
# Per-label scoring (SPEC 7)


def score_semantic(pred: np.ndarray, truth: np.ndarray) -> dict:
    """IoU, Dice and accuracy of ``pred > 0`` vs ``truth > 0``; both empty scores integer 1."""
    counts = binary_counts(truth > 0, pred > 0)
    if counts.tp + counts.fp + counts.fn == 0:
        iou, dice = 1, 1
    else:
        iou, dice = binary.iou(counts), binary.dice_as_scipy(counts)
    return {"iou": iou, "dice_score": dice, "binary_accuracy": binary.accuracy(counts), "status": "scored"}


def match_instances(truth: np.ndarray, components: np.ndarray, n_pred: int, table, limits: Limits) -> dict[int, int]:
    """Prediction component -> truth id (``match_instances``). ``table`` is the truth-foreground
    contingency of (truth, components). Uses maximum ids, not counts, as the reference does."""
    n_gt = int(truth.max()) if truth.size else 0
    if n_gt == 0 and n_pred == 0:
        return {0: 0}
    if n_gt == 0 or n_pred == 0:
        return {}
    if n_pred / n_gt > limits.ratio_cutoff(n_gt):
        raise _Pathological(TOO_MANY)
    overlapping = table.b > 0
    if int(np.count_nonzero(overlapping)) > limits.max_overlap_edges:
        raise _Pathological(TOO_MANY)
    _, gt_index = np.unique(table.a, return_inverse=True)
    gt_size = np.bincount(gt_index, weights=table.count)[gt_index[overlapping]]
    pred_size = np.bincount(components.ravel(), minlength=n_pred + 1)[table.b[overlapping].astype(np.intp)]
    iou32 = pair_iou32(table.count[overlapping].astype(np.float64), gt_size, pred_size.astype(np.float64))
    keep = iou32 > 0
    if not keep.any():
        return {}
    try:
        return min_cost_flow_matching(
            n_gt, n_pred, table.a[overlapping][keep], table.b[overlapping][keep], iou32[keep], limits.mcmf_cost_scale
        )
    except MatchingFailed:
        raise _Pathological("matching_failed") from None


class _Pathological(Exception):
    """The crop cannot be matched; carries the reference's status string (SPEC 7.8)."""


def relabel_table(mapping: dict[int, int], n_pred: int) -> np.ndarray:
    """Component id -> the id it takes after matching (``fastremap.remap`` with
    ``preserve_missing_labels``): matched components take their truth id, unmatched ones keep
    their own id, which can collide with a truth id (reference quirk, SPEC 9.1, reproduced)."""
    table = np.arange(n_pred + 1, dtype=np.int64)
    table[np.fromiter(mapping.keys(), dtype=np.int64)] = np.fromiter(mapping.values(), dtype=np.int64)
    return table


def id_accuracy(table, counts, relabelled: np.ndarray) -> float:
    """``mean(truth == relabelled prediction)`` from the truth-foreground contingency: voxels
    agree where both are background, or where a component's new id is the truth id."""
    agree = table.b > 0
    same = relabelled[table.b[agree].astype(np.intp)] == table.a[agree].astype(np.int64)
    return float((counts.tn + int(table.count[agree][same].sum())) / counts.total)


def score_instance(pred: np.ndarray, truth: np.ndarray, voxel_size, limits: Limits) -> dict:
    """``score_instance`` of the reference (SPEC 7.2 - 7.8)."""
    cap = max_distance(voxel_size, truth.shape)
    components, n_pred = cc3d.connected_components(pred, return_N=True)
    truth_fg = truth > 0
    counts = binary_counts(truth_fg, components > 0)
    binary_scores = {
        "iou": binary.iou(counts),
        "dice_score": binary.dice_as_scipy(counts),
        "binary_accuracy": binary.accuracy(counts),
    }
    table = contingency(truth, components, where=truth_fg)
    voi = rand_voi(table)
    try:
        mapping = match_instances(truth, components, int(n_pred), table, limits)
    except _Pathological as exc:
        return {
            "mean_accuracy": 0,
            "binary_accuracy": binary_scores["binary_accuracy"],
            "hausdorff_distance": cap,
            "normalized_hausdorff_distance": float(normalize_distances([cap], voxel_size)[0]),
            "combined_score": 0,
            "iou": binary_scores["iou"],
            "dice_score": binary_scores["dice_score"],
            "status": str(exc),
            **voi,
        }

    relabelled = np.arange(int(n_pred) + 1)
    if mapping == {0: 0}:
        distances = [0.0]
    elif not mapping:
        distances = [cap]
    else:
        relabelled = relabel_table({0: 0, **mapping}, int(n_pred))
        per_gt = capped_hausdorff(truth, components, relabelled, np.unique(table.a), voxel_size, cap)
        unmatched = np.full(int(n_pred) - len(mapping), cap, dtype=np.float32)
        distances = np.concatenate([per_gt, unmatched]).astype(np.float64)
    mean_accuracy = id_accuracy(table, counts, relabelled)
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


def missing_entry(label: str, instance: bool, voxel_size, shape) -> dict:
    """A truth label that was not submitted (``empty_label_score``, SPEC 7.9)."""
    common = {"num_voxels": int(np.prod(shape)), "voxel_size": list(voxel_size), "is_missing": True, "status": "missing"}
    if instance:
        return {"mean_accuracy": 0, "hausdorff_distance": max_distance(voxel_size, shape),
                "normalized_hausdorff_distance": 0, "combined_score": 0, **common}
    return {"iou": 0, "dice_score": 0, "binary_accuracy": 0, **common}


# --------------------------------------------------------------------------------------------
# Per-label scoring, head (SPEC 10.1): raw counts, pooled per class in ``combine_pooled``

PATHOLOGICAL_IGNORE, PATHOLOGICAL_UNMATCHED = "ignore", "unmatched"


def score_semantic_head(pred: np.ndarray, truth: np.ndarray) -> dict:
    """Voxel tp/fp/fn of ``pred > 0`` vs ``truth > 0`` (head ``score_semantic``)."""
    counts = binary_counts(truth > 0, pred > 0)
    return {"tp": counts.tp, "fp": counts.fp, "fn": counts.fn, "status": "scored"}


def pooled_instance_entry(tp: int, fp: int, fn: int, distances: np.ndarray, voxel_size, status: str = "scored") -> dict:
    """The per-(crop, label) instance record of head: matching counts plus the sum and number
    of normalised per-instance distances (``score_instance`` return value)."""
    normalized = normalize_distances(distances, voxel_size)
    return {"tp": int(tp), "fp": int(fp), "fn": int(fn), "hausdorff_norm_sum": float(np.sum(normalized)),
            "n_hausdorff": int(normalized.size), "status": status}


def pathological_entry_head(status: str, n_truth: int, n_pred: int, cap: float, voxel_size, policy: str) -> dict:
    """A crop that cannot be matched (SPEC 10.1/10.2).

    ``ignore`` (the reference's ``_create_pathological_scores``): zero counts and no distance,
    so the crop contributes nothing and a class whose crops are all pathological scores 1.0
    ("nothing anywhere"). ``unmatched`` (corrected): the crop counts as if nothing matched, as
    the scored path would count it: every truth instance a false negative and every predicted
    component a false positive, each with the capped distance."""
    if policy == PATHOLOGICAL_IGNORE:
        return {"tp": 0, "fp": 0, "fn": 0, "hausdorff_norm_sum": 0.0, "n_hausdorff": 0, "status": status}
    distances = np.full(n_truth + n_pred, cap, dtype=np.float32)
    return pooled_instance_entry(0, n_pred, n_truth, distances, voxel_size, status)


def score_instance_head(pred: np.ndarray, truth: np.ndarray, voxel_size, limits: Limits,
                        pathological: str = PATHOLOGICAL_IGNORE) -> dict:
    """head ``score_instance`` (SPEC 10.1): one float32 distance per truth id (computed even
    without a match, so the id collision of SPEC 9.1 also acts then) plus the capped distance
    for every unmatched component; tp = matched truth ids, fp = unmatched components."""
    cap = max_distance(voxel_size, truth.shape)
    components, n_pred = cc3d.connected_components(pred, return_N=True)
    n_pred = int(n_pred)
    table = contingency(truth, components, where=truth > 0)
    truth_ids = np.unique(table.a)
    try:
        mapping = match_instances(truth, components, n_pred, table, limits)
    except _Pathological as exc:
        return pathological_entry_head(str(exc), int(truth_ids.size), n_pred, cap, voxel_size, pathological)
    matched = set(mapping) - {0}
    relabelled = relabel_table({0: 0, **mapping}, n_pred) if matched else np.arange(n_pred + 1)
    per_gt = capped_hausdorff(truth, components, relabelled, truth_ids, voxel_size, cap)
    fp = n_pred - len(matched)
    tp = len(set(mapping.values()) - {0})
    distances = np.concatenate([per_gt, np.full(fp, cap, dtype=np.float32)])
    return pooled_instance_entry(tp, fp, int(truth_ids.size) - tp, distances, voxel_size)


def missing_entry_head(label: str, instance: bool, voxel_size, shape, n_instances: int) -> dict:
    """A truth label that was not submitted, head ``empty_label_score``: every truth instance
    a false negative with normalised distance 0, or every voxel (background included) a false
    negative."""
    common = {"num_voxels": int(np.prod(shape)), "voxel_size": list(voxel_size), "is_missing": True, "status": "missing"}
    if instance:
        return {"tp": 0, "fp": 0, "fn": n_instances, "hausdorff_norm_sum": 0.0, "n_hausdorff": n_instances, **common}
    return {"tp": 0, "fp": 0, "fn": int(np.prod(shape)), **common}


_SLAB_VOXELS = 1 << 24


@functools.lru_cache(maxsize=256)
def _count_instances_cached(path: str, modified_ns: int) -> int:
    array = zarr_store.open_array(Path(path), "truth array", trusted=True)
    shape = tuple(array.shape)
    step = max(1, _SLAB_VOXELS // max(1, int(np.prod(shape[1:]))))
    ids = np.zeros(0, dtype=np.uint64)
    for start in range(0, shape[0], step):
        slab = zarr_store.read_array(array, "truth array", trusted=True, region=slice(start, start + step))
        ids = np.union1d(ids, np.unique(slab).astype(np.uint64))
    return int(np.count_nonzero(ids))


def count_instances(truth_path: Path) -> int:
    """Number of distinct non-zero ids of a truth array, read in slabs of about 16 M voxels
    (the reference loads the whole array). Cached per path and modification time, because a
    re-scoring run asks once per submission that misses the label."""
    return _count_instances_cached(str(truth_path), truth_path.stat().st_mtime_ns)


# --------------------------------------------------------------------------------------------
# Aggregation (SPEC 8)


def combine(entries: dict, instance_classes, include_missing: bool) -> dict:
    """Voxel-weighted label scores and the overall scores (``combine_scores``)."""
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
    overall_instance = float(np.nansum(instance) / sum(weights[c] for c in label_scores if c in instance_classes)) if instance else 0
    overall_semantic = float(np.nansum(semantic) / sum(weights[c] for c in label_scores if c not in instance_classes)) if semantic else 0
    return {
        "label_scores": label_scores,
        "overall_instance_score": overall_instance,
        "overall_semantic_score": overall_semantic,
        "overall_score": (overall_instance * overall_semantic) ** 0.5,
    }


def _pooled_counts(entries: dict, instance_classes, include_missing: bool) -> dict[str, dict]:
    """Per class, the sums of tp/fp/fn (and of the Hausdorff sum/count for instance classes)
    over its crop entries, in first-seen order."""
    pools: dict[str, dict] = {}
    for labels in entries.values():
        for label, entry in labels.items():
            if entry["is_missing"] and not include_missing:
                continue
            keys = ("tp", "fp", "fn") + (("hausdorff_norm_sum", "n_hausdorff") if label in instance_classes else ())
            pool = pools.setdefault(label, dict.fromkeys(keys, 0))
            for key in keys:
                pool[key] += entry[key]
    return pools


def _pooled_instance_scores(pool: dict) -> dict:
    """F1, mean normalised Hausdorff and their geometric mean of one class's pool; a class
    with no count and no distance anywhere scores 1.0 ("nothing anywhere", SPEC 10.2)."""
    tp, fp, fn, count = pool["tp"], pool["fp"], pool["fn"], pool["n_hausdorff"]
    denominator = 2 * tp + fp + fn
    if denominator == 0 and count == 0:
        f1 = nhd = combined = 1.0
    else:
        f1 = 2 * tp / denominator if denominator > 0 else 0.0
        nhd = pool["hausdorff_norm_sum"] / count if count > 0 else 0.0
        combined = (f1 * nhd) ** 0.5
    return {"f1": f1, "normalized_hausdorff_distance": nhd, "combined_score": combined}


def combine_pooled(entries: dict, instance_classes, include_missing: bool) -> dict:
    """head ``combine_scores`` (SPEC 10.2): counts pooled per class over crops; the overall
    instance and semantic scores are plain means over classes."""
    label_scores = {}
    for label, pool in _pooled_counts(entries, instance_classes, include_missing).items():
        if label in instance_classes:
            scores = _pooled_instance_scores(pool)
        else:
            denominator = pool["tp"] + pool["fp"] + pool["fn"]
            scores = {"iou": pool["tp"] / denominator if denominator > 0 else 1.0}
        label_scores[label] = {**scores, "tp": pool["tp"], "fp": pool["fp"], "fn": pool["fn"]}
    instance = [s["combined_score"] for c, s in label_scores.items() if c in instance_classes]
    semantic = [s["iou"] for c, s in label_scores.items() if c not in instance_classes]
    overall_instance = sum(instance) / len(instance) if instance else 0
    overall_semantic = sum(semantic) / len(semantic) if semantic else 0
    return {
        "label_scores": label_scores,
        "overall_instance_score": overall_instance,
        "overall_semantic_score": overall_semantic,
        "overall_score": (overall_instance * overall_semantic) ** 0.5,
    }


def public_results(everything: dict, submitted: dict) -> dict:
    """head's participant-facing ``results.json`` (``public_scores``): the overall scores and
    bookkeeping, and the class scores without counts for classes with a submitted entry."""
    label_scores = {
        label: {k: v for k, v in scores.items() if k not in ("tp", "fp", "fn")}
        for label, scores in everything["label_scores"].items()
        if label in submitted["label_scores"]
    }
    return {"label_scores": label_scores, **{k: v for k, v in everything.items() if k != "label_scores"}}


# --------------------------------------------------------------------------------------------
# Inputs


def read_manifest(path: Path) -> dict[tuple[int, str], Grid]:
    """The test-crop manifest (SPEC 2.1): header dropped, ``;``-separated bracketed lists,
    keyed by (crop id, label); a repeated key keeps its last row."""
    rows = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
    except OSError as exc:
        raise PhaseError(f"cannot read the crop manifest: {exc}") from None
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        try:
            crop, _dataset, label, voxel_size, translation, shape = line.split(",")
            parse = lambda text, kind: tuple(kind(x) for x in text.strip().strip("[]").split(";"))  # noqa: E731
            rows[(int(crop), label)] = Grid(parse(voxel_size, float), parse(shape, int), parse(translation, float))
        except ValueError:
            raise PhaseError(f"crop manifest line {number} is malformed") from None
    return rows


def find_zarr_root(folder: Path) -> Path:
    """The zarr inside an unpacked submission (``ensure_valid_submission``): the folder itself
    when it holds no ``*.zarr``, the single nested ``*.zarr`` otherwise."""
    nested = []
    for current, dirs, _files in os.walk(folder):
        for name in list(dirs):
            if name.endswith(".zarr"):
                nested.append(Path(current) / name)
                dirs.remove(name)  # a zarr's own chunks need no search
    if len(nested) > 1:
        names = ", ".join(sorted(p.name for p in nested)[:5])
        raise SubmissionError(f"the submission holds {len(nested)} zarr folders ({names}); submit exactly one")
    return nested[0] if nested else folder


def crop_id(name: str) -> int:
    try:
        return int(name.removeprefix("crop"))
    except ValueError:
        raise PhaseError(f"truth crop group {name!r} is not named crop<N>") from None


def subfolders(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")}


def match_crops(submitted: set[str], truth: set[str]) -> dict[str, str]:
    """Truth crop -> submitted folder. Only if no name matches, bare ids ('111') are tried
    as 'crop111' (``_discover_volumes``)."""
    found = {name: name for name in submitted & truth}
    if not found:
        found = {f"crop{name}": name for name in submitted if f"crop{name}" in truth}
    if not found:
        raise SubmissionError(
            "no test crop found in the submission: its top-level groups must be named after the test "
            "crops (e.g. 'crop123'), each holding one array per label"
        )
    return found


# --------------------------------------------------------------------------------------------
# The suite


@dataclass(frozen=True)
class Options:
    version: str = "v2"
    truth: str = "truth.zarr"
    manifest: str = "manifest.csv"
    instance_classes: tuple[str, ...] = INSTANCE_CLASSES
    pathological_crops: str = PATHOLOGICAL_IGNORE  # head only, see pathological_entry_head

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        return cls(
            version=o.get("version", cls.version),
            truth=o.get("truth", cls.truth),
            manifest=o.get("manifest", cls.manifest),
            instance_classes=tuple(o.get("instance_classes", INSTANCE_CLASSES)),
            pathological_crops=o.get("pathological_crops", cls.pathological_crops),
        )

    @classmethod
    def from_context(cls, context: dict) -> "Options":
        return cls(**{**context, "instance_classes": tuple(context["instance_classes"])})

    @property
    def pooled(self) -> bool:
        """head aggregates raw counts (SPEC 10); v2 averages per-crop scores (SPEC 8)."""
        return self.version == "head"


# Measured peak bytes per crop voxel beyond the interpreter (bench/cellmap_crop.py: 21 at 256^3
# and 20.5 at 512^3 for uint32 instance labels), with headroom.
INSTANCE_BYTES_PER_VOXEL = 24
SEMANTIC_BYTES_PER_VOXEL = 10


def _memory_estimate(grid: Grid, source, instance: bool, scale) -> int:
    """Peak bytes of one pair beyond the worker's baseline (added by the runner): per-voxel
    working set of the crop, plus the submitted array as stored, and when it is resampled
    (``scale``) the array and its resampled copy as float64 (scikit-image resamples in float64)."""
    target = int(np.prod(grid.shape, dtype=np.float64))
    source_voxels = int(np.prod(source.shape, dtype=np.float64))
    itemsize = np.dtype(source.dtype).itemsize
    per_target = INSTANCE_BYTES_PER_VOXEL if instance else SEMANTIC_BYTES_PER_VOXEL
    estimate = target * per_target + source_voxels * itemsize
    if scale is not None:
        estimate += source_voxels * 8 + int(np.prod(resampled_shape(source.shape, scale), dtype=np.float64)) * (8 + itemsize)
    elif source_voxels != target:
        estimate += source_voxels * 16  # padded or cropped copies
    return estimate


@register
class CellMap(Suite):
    name = "cellmap"
    ranking = "overall_score"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        limits = Limits.from_options(phase.options)
        truth_root = phase.path(options.truth)
        manifest = read_manifest(phase.path(options.manifest))
        if not truth_root.is_dir():
            raise PhaseError("the truth zarr named in phase.yaml does not exist")
        root = find_zarr_root(submission.root)
        if not subfolders(root):
            raise SubmissionError("the submission holds no zarr: upload a zarr folder (or a zip of one) with one group per test crop")
        truth_crops = sorted(subfolders(truth_root), key=lambda n: (len(n), n))
        crops = match_crops(subfolders(root), set(truth_crops))

        tasks, fixed = [], {}
        for crop in truth_crops:
            truth_labels = zarr_store.array_names(truth_root / crop)
            submitted = set(zarr_store.array_names(root / crops[crop])) if crop in crops else set()
            for label in truth_labels:
                grid = manifest.get((crop_id(crop), label))
                truth_path = truth_root / crop / label
                if label in submitted and grid is None:
                    _log.warning("label_without_manifest_row", crop=crop, label=label)
                if label not in submitted or grid is None:
                    fixed.setdefault(crop, {})[label] = self._missing(truth_path, label, options, grid)
                    continue
                pred_path = root / crops[crop] / label
                display = f"{crops[crop]}/{label}"
                mask = truth_root / crop / f"{label}_mask"
                payload = {
                    "crop": crop, "label": label, "display": display,
                    "truth": str(truth_path), "pred": str(pred_path),
                    "mask": str(mask) if zarr_store.node_kind(mask) == zarr_store.ARRAY else None,
                    "grid": asdict(grid), "instance": label in options.instance_classes,
                    "limits": asdict(limits),
                }
                if options.pooled:
                    payload.update(version=options.version, pathological_crops=options.pathological_crops)
                try:  # metadata only: a broken array fails its own pair, never the others
                    source = zarr_store.open_array(pred_path, display)
                    scale, _, _ = resampling(tuple(source.shape), zarr_store.attributes(source), grid,
                                             limits.max_volume_size_ratio, display, infer_scale_from_shape=options.pooled)
                    estimate, refusal = _memory_estimate(grid, source, label in options.instance_classes, scale), None
                except SubmissionError as exc:
                    estimate, refusal = 0, str(exc)
                tasks.append(Task(key=f"{crop}/{label}", payload=payload, memory_bytes=estimate, refusal=refusal))
        context = {"fixed": fixed, "options": asdict(options), "total_evals": len(manifest)}
        _log.info("cellmap_plan", crops=len(truth_crops), submitted_crops=len(crops), tasks=len(tasks))
        return Plan(tasks=tasks, context=context)

    @staticmethod
    def _missing(truth_path: Path, label: str, options: Options, grid: Grid | None) -> dict:
        truth = zarr_store.open_array(truth_path, "truth array", trusted=True)
        voxel_size = zarr_store.attributes(truth).get("voxel_size") or (grid.voxel_size if grid else None)
        if voxel_size is None:
            raise PhaseError("a truth array has neither a voxel_size attribute nor a manifest row")
        instance = label in options.instance_classes
        if options.pooled:
            return missing_entry_head(label, instance, voxel_size, truth.shape, count_instances(truth_path) if instance else 0)
        return missing_entry(label, instance, voxel_size, truth.shape)

    def score(self, payload: dict) -> dict:
        grid = Grid(**{k: tuple(v) for k, v in payload["grid"].items()})
        limits = Limits(**payload["limits"])
        pooled = payload.get("version") == "head"
        truth_array = zarr_store.open_array(Path(payload["truth"]), "truth array", trusted=True)
        truth = zarr_store.read_array(truth_array, "truth array", trusted=True)
        if truth.shape != tuple(grid.shape):
            raise PhaseError("a truth array's shape differs from its manifest row")
        display = payload["display"]
        source = zarr_store.open_array(Path(payload["pred"]), display)
        pred = align(
            source, zarr_store.attributes(source), grid,
            instance=payload["label"] in INSTANCE_CLASSES,
            read=lambda region: zarr_store.read_array(source, display, region=region),
            max_size_ratio=limits.max_volume_size_ratio, display=display,
            infer_scale_from_shape=pooled,
        )
        if payload["mask"]:
            mask = zarr_store.read_array(zarr_store.open_array(Path(payload["mask"]), "mask", trusted=True), "mask", trusted=True)
            pred, truth = pred * mask, truth * mask
        if pooled and payload["instance"]:
            result = score_instance_head(pred, truth, grid.voxel_size, limits, payload["pathological_crops"])
        elif pooled:
            result = score_semantic_head(pred, truth)
        elif payload["instance"]:
            result = score_instance(pred, truth, grid.voxel_size, limits)
        else:
            result = score_semantic(pred, truth)
        return {**result, "num_voxels": int(truth.size), "voxel_size": list(grid.voxel_size), "is_missing": False}

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        options = Options.from_context(plan.context["options"])
        entries = {crop: dict(labels) for crop, labels in plan.context["fixed"].items()}
        for task in plan.tasks:
            outcome = outcomes[task.key]
            crop, label = task.payload["crop"], task.payload["label"]
            entry = outcome.value if outcome.ok else self._failed(task, outcome, options)
            entries.setdefault(crop, {})[label] = entry
        entries = {crop: entries[crop] for crop in sorted(entries, key=lambda n: (len(n), n))}
        combine_with = combine_pooled if options.pooled else combine
        everything = combine_with(entries, options.instance_classes, include_missing=True)
        submitted = combine_with(entries, options.instance_classes, include_missing=False)
        bookkeeping = {
            "total_evals": plan.context["total_evals"],
            "num_evals_done": sum(len(labels) for crop, labels in entries.items() if "crop" in crop),
            "git_version": REFERENCE[options.version],
        }
        metrics = {
            "case": entries,
            "aggregates": {**everything, **bookkeeping, "submitted_only": submitted},
            "reference": {"repository": REFERENCE["repository"], "commit": REFERENCE[options.version], "version": options.version},
        }
        return Result(
            metrics=metrics,
            leaderboard=leaderboard(everything),
            case_scores={crop: combine_with({crop: labels}, options.instance_classes, True)["overall_score"] for crop, labels in entries.items()},
            files=self._reference_files(entries, everything, submitted, bookkeeping, options),
        )

    @staticmethod
    def _failed(task: Task, outcome: Outcome, options: Options) -> dict:
        """A task that failed scores as not submitted, with the reason."""
        label, grid, instance = task.payload["label"], task.payload["grid"], task.payload["instance"]
        if options.pooled:
            n_instances = count_instances(Path(task.payload["truth"])) if instance else 0
            entry = missing_entry_head(label, instance, grid["voxel_size"], grid["shape"], n_instances)
        else:
            entry = missing_entry(label, instance, grid["voxel_size"], grid["shape"])
        entry.update(status="failed", error=outcome.message)
        return entry

    @staticmethod
    def _reference_files(entries: dict, everything: dict, submitted: dict, bookkeeping: dict, options: Options) -> dict:
        """The result files the reference writes: v2 ``results.json`` (everything) and
        ``results_submitted_only.json``; head ``results.json`` (public view) and
        ``results_extended.json`` (everything)."""
        results = {**entries, **everything, **bookkeeping}
        if options.pooled:
            return {"results.json": public_results({**everything, **bookkeeping}, submitted), "results_extended.json": results}
        return {"results.json": results, "results_submitted_only.json": {**entries, **submitted}}


def leaderboard(combined: dict) -> dict[str, float]:
    """Flat leaderboard columns: the three overall scores and ``<label>_<metric>``."""
    columns = {key: combined[key] for key in ("overall_score", "overall_instance_score", "overall_semantic_score")}
    for label, scores in combined["label_scores"].items():
        columns.update({f"{label}_{metric}": value for metric, value in scores.items()})
    return columns
