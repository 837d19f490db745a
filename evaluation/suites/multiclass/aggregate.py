"""The models' counts as metrics.json, nnU-Net's summary.json and the leaderboard.

nnU-Net's own numbers and names (MIC-DKFZ/nnUNet@0e49508,
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics_on_folder`` builds
``metric_per_case``, ``mean`` (per class, NaN-ignoring over images) and ``foreground_mean``
(the plain mean over the classes other than background); ``save_summary_json`` writes them).
Beside them, this project's conventions: the NaN-ignoring foreground mean as the headline,
zero-Dice ratios, class groups, pooled (dataset-level) values and model deltas.
"""

from dataclasses import dataclass

import numpy as np

from evaluation import names
from evaluation.contract import Outcome, Result
from evaluation.suites.multiclass.classwise import Summary
from evaluation.suites.multiclass.inputs import Context, ModelLayout, json_key
from evaluation.suites.multiclass.options import Options, entry_key
from evaluation.suites.multiclass.scoring import COUNT_KEYS

REFERENCE = {
    "repository": "MIC-DKFZ/nnUNet",
    "commit": "0e495086eb108ff79afe106291e8c15bd2f2bc3a",
    "function": "nnunetv2/evaluation/evaluate_predictions.py:compute_metrics_on_folder",
}
HEADLINE = "mean_dice_fg_nanmean"


@dataclass(frozen=True)
class ModelResult:
    """One model's scored cases (in order), their summary and its metrics.json trees."""

    summary: Summary
    names: list[str]
    cases: dict
    aggregates: dict
    nnunet: dict  # summary.json in nnU-Net's layout


def per_class(options: Options, values) -> dict[str, object]:
    return {entry_key(c): v for c, v in zip(options.class_ids, values)}


def nnunet_case_metrics(options: Options, summary: Summary) -> list[dict]:
    """nnU-Net's per-case ``metrics``: class -> Dice, IoU, FP, TP, FN, TN, n_pred, n_ref."""
    columns = {
        "Dice": summary.dice,
        "IoU": summary.iou,
        "FP": summary.fp,
        "TP": summary.tp,
        "FN": summary.fn,
        "TN": summary.tn,
        "n_pred": summary.tp + summary.fp,
        "n_ref": summary.tp + summary.fn,
    }
    rows = {key: values.tolist() for key, values in columns.items()}
    return [
        {entry_key(c): {key: rows[key][i][j] for key in columns} for j, c in enumerate(options.class_ids)}
        for i in range(summary.n_images)
    ]


def case_entries(options: Options, summary: Summary, cases: list[str], files: dict[str, str | None]) -> dict:
    """metrics.json ``case.<case>``: Dice and IoU per class (nnU-Net's names) and the image's
    mean foreground Dice. The counts live in ``summary.json``: metrics.json is validated
    value by value, and 400 cases x 70 classes x 8 entries take the validator minutes."""
    dice, iou, mean = summary.dice.tolist(), summary.iou.tolist(), summary.image_fg_dice().tolist()
    ids = [entry_key(c) for c in options.class_ids]
    return {
        json_key(case): {
            "Dice": dict(zip(ids, dice[i])),
            "IoU": dict(zip(ids, iou[i])),
            HEADLINE: mean[i],
            "prediction_file": files.get(case),
            "status": "scored",
        }
        for i, case in enumerate(cases)
    }


def aggregates(options: Options, summary: Summary, n_missing: int, n_failed: int) -> dict:
    means = summary.counts_mean()
    mean = {
        entry_key(c): {"Dice": d, "IoU": u, **{k: v[j] for k, v in means.items()}}
        for j, (c, d, u) in enumerate(zip(options.class_ids, summary.class_dice, summary.class_iou))
    }
    fg = summary.foreground
    foreground_mean = {
        "Dice": summary.fg_dice_plain,
        "IoU": summary.fg_iou_plain,
        **{k: (float(np.mean(v[fg])) if fg.any() else np.nan) for k, v in means.items()},
    }
    return {
        HEADLINE: summary.fg_dice,
        "mean_iou_fg_nanmean": summary.fg_iou,
        "mean_dice_fg_np_mean": summary.fg_dice_plain,
        "mean_iou_fg_np_mean": summary.fg_iou_plain,
        "n_fg_classes": int(np.count_nonzero(fg)),
        "n_fg_classes_defined": summary.n_fg_defined,
        "n_images": summary.n_images,
        "n_missing_images": n_missing,
        "n_failed_images": n_failed,
        "mean": mean,
        "foreground_mean": foreground_mean,
        "zero_dice_ratio_of_valid_images": per_class(options, summary.zero_of_valid),
        "zero_dice_ratio_of_all_images": per_class(options, summary.zero_of_all),
        "n_valid_images_per_class": per_class(options, summary.n_valid.tolist()),
        "n_truth_images_per_class": per_class(options, summary.n_in_truth.tolist()),
        "pooled": {
            "per_class": {
                entry_key(c): {"Dice": d, "IoU": u} for c, d, u in zip(options.class_ids, summary.pooled_dice, summary.pooled_iou)
            },
            HEADLINE: summary.pooled_fg_dice,
            "mean_iou_fg_nanmean": summary.pooled_fg_iou,
        },
        "groups": summary.group_table(),
    }


def deltas(options: Options, candidate: Summary, baseline: Summary) -> dict:
    """Candidate − baseline per class (NaN if either is NaN) and the difference of the
    headlines, not the mean of the per-class deltas (a project convention: nnU-Net compares
    no models)."""
    groups_c, groups_b = candidate.group_table(), baseline.group_table()
    per_class_dice = candidate.class_dice - baseline.class_dice
    return {
        "delta_per_class_dice": per_class(options, per_class_dice),
        "delta_per_class_iou": per_class(options, candidate.class_iou - baseline.class_iou),
        "delta_mean_dice_fg_nanmean": candidate.fg_dice - baseline.fg_dice,
        "delta_mean_iou_fg_nanmean": candidate.fg_iou - baseline.fg_iou,
        "delta_pooled_mean_dice_fg_nanmean": candidate.pooled_fg_dice - baseline.pooled_fg_dice,
        "delta_groups": {
            name: {"Dice": groups_c[name]["Dice"] - groups_b[name]["Dice"], "IoU": groups_c[name]["IoU"] - groups_b[name]["IoU"]}
            for name in groups_c
        },
        "n_classes_better": int(np.count_nonzero(per_class_dice[candidate.foreground] > 0)),
        "n_classes_worse": int(np.count_nonzero(per_class_dice[candidate.foreground] < 0)),
    }


def nnunet_summary(per_case: list[dict], cases: list[str], files: dict, aggregate: dict) -> dict:
    """nnU-Net's own ``summary.json`` layout (``save_summary_json``): ``metric_per_case`` as a
    list, ``mean`` and ``foreground_mean``. Truth paths are not written: the file is the
    participant's to see; ``reference_file`` holds the case's name instead."""
    entries = [
        {"metrics": metrics, "prediction_file": files.get(case), "reference_file": case} for metrics, case in zip(per_case, cases)
    ]
    return {"foreground_mean": aggregate["foreground_mean"], "mean": aggregate["mean"], "metric_per_case": entries}


def leaderboard_columns(options: Options, aggregate: dict, model: str | None = None) -> dict[str, float]:
    """The flat columns of one model's aggregates; a model other than the ranked one's are in
    its namespace (``names.key``), so no folder name can take the ranked model's column."""
    columns = {
        HEADLINE: aggregate[HEADLINE],
        "mean_iou_fg_nanmean": aggregate["mean_iou_fg_nanmean"],
        "pooled_mean_dice_fg_nanmean": aggregate["pooled"][HEADLINE],
    }
    columns.update({f"group_{name}_Dice": row["Dice"] for name, row in aggregate["groups"].items()})
    columns.update({f"{column}_Dice": entry["Dice"] for column, entry in zip(options.columns(), aggregate["mean"].values())})
    named = (lambda key: key) if model is None else (lambda key: names.key(model, key))
    return {named(key): float(v) for key, v in columns.items() if v is not None and np.isfinite(v)}


def model_result(options: Options, info: ModelLayout, outcomes: dict[str, Outcome]) -> ModelResult:
    """One model's cases: the scored ones summarised, the failed ones listed with their reason."""
    scored, failed = [], {}
    for case in info.cases:
        outcome = outcomes.get(info.tasks[case])
        if outcome is not None and outcome.ok:
            scored.append((case, outcome.value[case]))
        else:
            failed[case] = outcome.message if outcome is not None else "not scored"
    k = len(options.class_ids)
    counts = {key: np.array([v[key] for _, v in scored], dtype=np.int64).reshape(len(scored), k) for key in COUNT_KEYS}
    summary = Summary(counts["TP"], counts["FP"], counts["FN"], counts["TN"], options.foreground, options.group_indices())
    scored_cases = [case for case, _ in scored]
    entries = case_entries(options, summary, scored_cases, info.files)
    entries.update(
        {
            json_key(c): {"status": "failed", "error": message, "prediction_file": info.files.get(c)}
            for c, message in failed.items()
        }
    )
    aggregate = aggregates(options, summary, info.missing, len(failed))
    nnunet = nnunet_summary(nnunet_case_metrics(options, summary), scored_cases, info.files, aggregate)
    return ModelResult(
        summary=summary, names=scored_cases, cases=dict(sorted(entries.items())), aggregates=aggregate, nnunet=nnunet
    )


def best_model(context: Context, models: dict[str, ModelResult]) -> str:
    """The model a submission of several is ranked by: the highest headline (NaN lowest), the
    baseline on ties."""
    return max(models, key=lambda m: (np.nan_to_num(models[m].summary.fg_dice, nan=-1.0), m == context.baseline))


def result(context: Context, models: dict[str, ModelResult]) -> Result:
    """metrics.json, the leaderboard columns, the case scores and the summary.json files."""
    options = context.options
    shared = {
        "class_names": per_class(options, options.class_names),
        "background": options.background,
        "ignore_index": options.ignore_index,
        "headline": HEADLINE,
    }
    reference = {**REFERENCE, "convention": "per image and class; class means over images (NaN-ignoring), then over classes"}
    if not context.multi:
        (ranked,) = models
        metrics = {"case": models[ranked].cases, "aggregates": {**models[ranked].aggregates, **shared}, "reference": reference}
        board = leaderboard_columns(options, models[ranked].aggregates)
        files = {"summary.json": models[ranked].nnunet}
    else:
        base = models[context.baseline].summary
        comparison = {
            "baseline": context.baseline,
            "deltas": {m: deltas(options, r.summary, base) for m, r in models.items() if m != context.baseline},
        }
        ranked = best_model(context, models)
        metrics = {
            "case": {m: r.cases for m, r in models.items()},
            "aggregates": {
                "models": {m: r.aggregates for m, r in models.items()},
                "comparison": comparison,
                "best_model": ranked,
                HEADLINE: models[ranked].aggregates[HEADLINE],
                **shared,
            },
            "reference": reference,
        }
        board = leaderboard_columns(options, models[ranked].aggregates)
        for m, r in models.items():
            board.update(leaderboard_columns(options, r.aggregates, model=m))
        files = {f"summary_{m}.json": r.nnunet for m, r in models.items()}
    image_scores = models[ranked].summary.image_fg_dice()
    case_scores = {json_key(c): float(v) for c, v in zip(models[ranked].names, image_scores) if np.isfinite(v)}
    return Result(metrics=metrics, leaderboard=board, case_scores=case_scores, files=files)
