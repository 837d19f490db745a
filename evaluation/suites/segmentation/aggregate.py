"""From the cases' results to metrics.json, the leaderboard and the ranking score.

Per class and key: the chosen statistics over the scored cases, undefined values (null)
left out, counted as the worst value, or left out with 0 for a class left with nothing, as
MONAI's ``aggregate()`` does (``nan_policy``), with how many were defined. Overall:
each statistic averaged over the classes that have it. The ranking score is the ranking key's
overall statistic, negated for keys where lower is better so that a higher score is always
better (``Suite.higher_is_better``).
"""

import math

import numpy as np

from evaluation.contract import Outcome
from evaluation.suites.segmentation import multiclass
from evaluation.suites.segmentation.options import Options


def flat(entry: dict) -> dict:
    """A class's keys with the instance summary's keys prefixed ``instances_``."""
    out = {k: v for k, v in entry.items() if k != "instances"}
    out.update({f"instances_{k}": v for k, v in entry.get("instances", {}).items()})
    return out


def defined(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def case_values(options: Options, value: dict, cls: str, key: str) -> float | None:
    """One case's value of ``key`` for class ``cls`` after the nan policy (None: left out)."""
    found = flat(value["classes"][cls]).get(key)
    if defined(found) or (options.nan_policy == "monai" and isinstance(found, float) and math.isinf(found)):
        return float(found)
    # nan_policy worst: the key's worst value (``keys.Kind.worst``), None where it has none
    return options.kind(key).worst_value(value["diagonal"]) if options.nan_policy == "worst" else None


def statistics(values: list[float], wanted, policy: str) -> dict:
    """The statistics of the kept values; with none, None, or 0 under MONAI's policy
    (``monai/metrics/utils.py: do_metric_reduction``)."""
    array = np.asarray(values, np.float64)
    functions = {"mean": np.mean, "median": np.median, "std": np.std, "min": np.min, "max": np.max}
    none = 0.0 if policy == "monai" else None
    return {name: float(functions[name](array)) if array.size else none for name in wanted}


def summarize(options: Options, scored: dict[str, dict], keys: list[str]) -> dict:
    classes = {}
    for cls in (c.name for c in options.classes):
        table = {}
        for key in keys:
            values = [case_values(options, value, cls, key) for value in scored.values()]
            kept = [v for v in values if v is not None]
            table[key] = {
                **statistics(kept, options.statistics, options.nan_policy),
                "n": len(kept),
                "n_undefined": len(values) - len(kept),
            }
        classes[cls] = table
    overall = {key: {name: _mean([classes[c][key][name] for c in classes]) for name in options.statistics} for key in keys}
    out = {"classes": classes, "overall": overall}
    if "multiclass" in options.metrics:  # one set per case: statistics over the cases, no nan policy
        out["multiclass"] = {}
        for key in multiclass.KEYS:
            values = [v["multiclass"][key] for v in scored.values() if "multiclass" in v]
            kept = [float(v) for v in values if defined(v)]
            out["multiclass"][key] = {
                **statistics(kept, options.statistics, "ignore"),
                "n": len(kept),
                "n_undefined": len(values) - len(kept),
            }
    return out


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def ranking_score(options: Options, overall: dict) -> float | None:
    value = overall[options.ranking][options.ranking_statistic]
    if value is None:
        return None
    return value if options.kind(options.ranking).higher_is_better else -value


def case_scores(options: Options, scored: dict[str, dict]) -> dict[str, float]:
    """Per case, the ranking key averaged over classes, on the score's scale (for the
    bootstrap interval of the ranking)."""
    sign = 1.0 if options.kind(options.ranking).higher_is_better else -1.0
    out = {}
    for case, value in scored.items():
        found = [case_values(options, value, c.name, options.ranking) for c in options.classes]
        kept = [v for v in found if v is not None]
        if kept:
            out[case] = sign * float(np.mean(kept))
    return out


def leaderboard(options: Options, summary: dict, score: float | None) -> dict[str, float]:
    board = {} if score is None else {"score": score}
    for key, row in summary["overall"].items():
        board.update({f"{key}_{name}": v for name, v in row.items() if v is not None})
    for cls, table in summary["classes"].items():
        board.update({f"{cls}_{key}_mean": row["mean"] for key, row in table.items() if row.get("mean") is not None})
    return {k: float(v) for k, v in board.items() if math.isfinite(v)}


def split(outcomes: dict[str, Outcome], tasks: dict[str, str]) -> tuple[dict, dict]:
    """(case -> value) of the scored cases and (case -> message) of the failed ones."""
    scored, failed = {}, {}
    for case, key in tasks.items():
        outcome = outcomes.get(key)
        if outcome is not None and outcome.ok:
            scored[case] = outcome.value
        else:
            failed[case] = outcome.message if outcome is not None else "not scored"
    return scored, failed


def case_entries(files: dict[str, str], scored: dict[str, dict], failed: dict[str, str]) -> dict[str, dict]:
    """metrics.json's ``case`` entries: each scored case with its file, spacing and values
    (and the per-case multi-class values where the phase asks for them), each failed one with
    its error, in the cases' order."""
    cases = {
        case: {
            "status": "scored",
            "prediction_file": files[case],
            "spacing": value["spacing"],
            "classes": value["classes"],
            **({"multiclass": value["multiclass"]} if "multiclass" in value else {}),
            **({"summary": value["summary"]} if "summary" in value else {}),
        }
        for case, value in scored.items()
    }
    cases.update(
        {case: {"status": "failed", "error": message, "prediction_file": files[case]} for case, message in failed.items()}
    )
    return dict(sorted(cases.items()))


def aggregates(options: Options, summary: dict, score: float | None, scored: dict, failed: dict, missing) -> dict:
    """metrics.json's ``aggregates``: the summary, the ranking score and how it ranks, and how
    many cases were scored, failed and missing."""
    return {
        **summary,
        "score": score,
        "n_cases": len(scored),
        "n_failed": len(failed),
        "n_missing": missing,
        "ranking": {
            "key": options.ranking,
            "statistic": options.ranking_statistic,
            "higher_is_better": options.kind(options.ranking).higher_is_better,
        },
    }
