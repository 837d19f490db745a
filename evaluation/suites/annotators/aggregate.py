"""Rows summarised per model, the ranked model, and the metrics.json document.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``:
``generate_statistical_summaries`` (pandas mean, std with ddof 1 and variance of every column
after 'Model', NaN skipped; the model ids reaching each column's minimum and maximum). Choosing
one model to rank a submission by, and min and max per column, are this project's additions.
"""

import math
from dataclasses import asdict, dataclass

import numpy as np

from evaluation.contract import Outcome, Plan, Result
from evaluation.suites.annotators.definitions import (
    RANKING,
    REFERENCE,
    csv_values,
    summarized,
)
from evaluation.suites.annotators.inputs import Context

SUMMARY_STATISTICS = ("mean", "std", "variance", "min", "max")


@dataclass(frozen=True)
class Scored:
    """Every model's rows (image -> row, scored images only) and summaries, and the model the
    submission is ranked by on ``ranking_column``."""

    rows: dict[str, dict[str, dict]]
    summaries: dict[str, dict]
    ranked: str
    ranking_column: str


def column_stats(values: list) -> dict:
    """mean, std (ddof 1), variance, min, max over images, NaN skipped, computed the way pandas
    does (NaN filled with 0 in the sums, divided by the count of numbers)."""
    v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
    valid = ~np.isnan(v)
    count = int(valid.sum())
    if count == 0:
        return dict.fromkeys(SUMMARY_STATISTICS, math.nan)
    filled = np.where(valid, v, 0.0)
    mean = float(filled.sum() / count)
    variance = float(np.where(valid, (v - mean) ** 2, 0.0).sum() / (count - 1)) if count > 1 else math.nan
    return {
        "mean": mean,
        "std": math.sqrt(variance) if count > 1 else math.nan,
        "variance": variance,
        "min": float(v[valid].min()),
        "max": float(v[valid].max()),
    }


def model_summary(rows: dict[str, dict], columns: list[str]) -> dict[str, dict]:
    """statistic -> column -> value over one model's scored images."""
    stats = {c: column_stats([csv_values(r).get(c) for r in rows.values()]) for c in columns}
    return {s: {c: stats[c][s] for c in columns} for s in SUMMARY_STATISTICS}


def min_max_ids(summaries: dict[str, dict], columns: list[str]) -> dict[str, dict]:
    """``min_max_summary.csv``: per statistic, the model ids reaching the min and max of each
    column, comma-joined; 'independent of model election' when all models tie."""
    table = {}
    for statistic in ("mean", "std", "variance"):
        low, high = {}, {}
        for c in columns:
            values = {m: s[statistic][c] for m, s in summaries.items()}
            finite = [v for v in values.values() if not math.isnan(v)]
            if not finite:
                low[c] = high[c] = ""
            elif min(finite) == max(finite):
                low[c] = high[c] = "independent of model election"
            else:
                low[c] = ",".join(m for m, v in values.items() if v == min(finite))
                high[c] = ",".join(m for m, v in values.items() if v == max(finite))
        table[f"min_{statistic}"], table[f"max_{statistic}"] = low, high
    return table


def finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def collect(plan: Plan, outcomes: dict[str, Outcome]) -> tuple[Scored, dict]:
    """The scored rows per model and their summaries, and metrics.json's ``case`` tree (every
    image's row per model, failures with their message), in image order."""
    context: Context = plan.context
    names = context.annotators
    rows: dict[str, dict[str, dict]] = {m: {} for m in context.models}
    case: dict[str, dict] = {}
    for task in plan.tasks:
        outcome, model, image = outcomes[task.key], task.payload.model, task.payload.image
        if outcome.ok:
            rows[model][image] = outcome.value
            case.setdefault(image, {})[model] = outcome.value
        else:
            case.setdefault(image, {})[model] = {"status": "failed", "error": outcome.message}
    case = {image: case[image] for image in context.images if image in case}
    summaries = {m: model_summary(r, summarized(names)) for m, r in rows.items()}
    ranking_column = RANKING if len(names) >= 2 else f"{names[0]}_dice"
    ranked = max(sorted(summaries), key=lambda m: finite_or(summaries[m]["mean"][ranking_column], -math.inf))
    return Scored(rows=rows, summaries=summaries, ranked=ranked, ranking_column=ranking_column), case


def result(context: Context, scored: Scored, case: dict) -> Result:
    """metrics.json (the ranked model's summary at the top of ``aggregates``), the leaderboard
    (its means) and the case scores (its ranking column per image)."""
    summaries, ranked = scored.summaries, scored.ranked
    aggregates = {
        **summaries[ranked],
        "ranked_model": ranked,
        "ranking_column": scored.ranking_column,
        "models": summaries,
        "scored_images": {m: len(r) for m, r in scored.rows.items()},
        "skipped_images": context.skipped,
        "ignored_files": context.ignored,
    }
    if len(summaries) > 1:
        aggregates["min_max"] = min_max_ids(summaries, summarized(context.annotators))
    leaderboard = {c: v for c, v in summaries[ranked]["mean"].items() if math.isfinite(v)}
    leaderboard[RANKING] = finite_or(summaries[ranked]["mean"][scored.ranking_column], 0.0)
    metrics = {"case": case, "aggregates": aggregates, "reference": {**REFERENCE, "settings": settings_node(context)}}
    case_scores = {image: r[scored.ranking_column] for image, r in scored.rows[ranked].items()}
    return Result(metrics=metrics, leaderboard=leaderboard, case_scores=case_scores)


def settings_node(context: Context) -> dict:
    """The options as a metrics.json node (the annotators' column names, no tuples), without the
    name of the ground-truth folder: nothing of the ground truth's layout reaches the participant."""
    settings = {**asdict(context.options), "annotators": list(context.annotators)}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items() if k != "annotations"}
