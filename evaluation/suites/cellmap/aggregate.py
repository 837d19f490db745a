"""From the tasks' outcomes to CellMap's result: every (crop, label) entry, the version's
aggregates with and without the missing entries, the reference's bookkeeping keys and result
files, the leaderboard columns and one score per crop (``utils/eval_utils/aggregation.py``
``update_scores``, ``num_evals_done``)."""

from evaluation.contract import Outcome, Plan, Result, Task
from evaluation.suites.cellmap.inputs import Pair, crop_order
from evaluation.suites.cellmap.options import REPOSITORY
from evaluation.suites.cellmap.versions import Version


def overall(label_scores: dict, instance_score: float, semantic_score: float) -> dict:
    """The combined result of either version: class scores, the overall instance and semantic
    scores and their geometric mean (``combine_scores``)."""
    return {
        "label_scores": label_scores,
        "overall_instance_score": instance_score,
        "overall_semantic_score": semantic_score,
        "overall_score": (instance_score * semantic_score) ** 0.5,
    }


def leaderboard(combined: dict) -> dict[str, float]:
    """Flat leaderboard columns: the three overall scores and ``<label>_<metric>``."""
    columns = {key: combined[key] for key in ("overall_score", "overall_instance_score", "overall_semantic_score")}
    for label, scores in combined["label_scores"].items():
        columns.update({f"{label}_{metric}": value for metric, value in scores.items()})
    return columns


def _failed(task: Task, outcome: Outcome, version: Version) -> dict:
    """A task that failed scores as not submitted, with the reason."""
    pair: Pair = task.payload
    entry = version.missing_entry(pair.truth, pair.instance, pair.grid.voxel_size, pair.grid.shape)
    entry.update(status="failed", error=outcome.message)
    return entry


def entries_of(plan: Plan, outcomes: dict[str, Outcome], version: Version) -> dict[str, dict[str, dict]]:
    """crop -> label -> entry, crops in natural order."""
    entries = {crop: dict(labels) for crop, labels in plan.context.fixed.items()}
    for task in plan.tasks:
        outcome = outcomes[task.key]
        entry = outcome.value if outcome.ok else _failed(task, outcome, version)
        entries.setdefault(task.payload.crop, {})[task.payload.label] = entry
    return {crop: entries[crop] for crop in sorted(entries, key=crop_order)}


def summarize(plan: Plan, outcomes: dict[str, Outcome], version: Version) -> Result:
    options = plan.context.options
    entries = entries_of(plan, outcomes, version)
    everything = version.combine(entries, options.instance_classes, include_missing=True)
    submitted = version.combine(entries, options.instance_classes, include_missing=False)
    bookkeeping = {
        "total_evals": plan.context.total_evals,
        "num_evals_done": sum(len(labels) for crop, labels in entries.items() if "crop" in crop),
        "git_version": version.COMMIT,
    }
    metrics = {
        "case": entries,
        "aggregates": {**everything, **bookkeeping, "submitted_only": submitted},
        "reference": {"repository": REPOSITORY, "commit": version.COMMIT, "version": options.version},
    }
    return Result(
        metrics=metrics,
        leaderboard=leaderboard(everything),
        case_scores={
            crop: version.combine({crop: labels}, options.instance_classes, True)["overall_score"]
            for crop, labels in entries.items()
        },
        files=version.result_files(entries, everything, submitted, bookkeeping),
    )


def definitions(options, version: Version) -> dict[str, dict]:
    """Where each leaderboard metric is defined in the reference (results' provenance)."""
    where = {"source": "reference", "repository": REPOSITORY, "commit": version.COMMIT}
    scoring, aggregation = "utils/eval_utils/scoring.py", "utils/eval_utils/aggregation.py"
    if options.version == "head":
        per_label = {
            "f1": f"{aggregation}:combine_scores (tp, fp, fn pooled per class)",
            "normalized_hausdorff_distance": f"{scoring}:score_instance, utils/eval_utils/distance.py",
            "combined_score": f"{aggregation}:combine_scores",
            "iou": f"{aggregation}:combine_scores (tp, fp, fn pooled per class)",
        }
    else:
        per_label = {
            "mean_accuracy": f"{scoring}:score_instance (utils/eval_utils/instance_matching.py:match_instances)",
            "hausdorff_distance": f"{scoring}:score_instance, utils/eval_utils/distance.py",
            "normalized_hausdorff_distance": f"{scoring}:score_instance",
            "combined_score": f"{scoring}:score_instance",
            "iou": f"{scoring}:score_semantic",
            "dice_score": f"{scoring}:score_semantic",
        }
    overall_scores = {
        key: f"{aggregation}:combine_scores" for key in ("overall_score", "overall_instance_score", "overall_semantic_score")
    }
    return {metric: {**where, "function": function} for metric, function in {**overall_scores, **per_label}.items()}
