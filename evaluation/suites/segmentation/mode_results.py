"""Scoring and summarising a whole evaluation (``modes``): panoptica's evaluator configuration,
a BraTS_evaluation 0.0.10 preset or a BraTS 2023 lesion-wise preset.

A case's ``classes`` hold the evaluation's own keys per group or region (panoptica's result
keys, the BraTS table's fields, the 2023 table's columns), so that the suite's statistics,
cases.csv and report work on them unchanged; panoptica's per-instance rows go to
``instances.json``. A BraTS preset also writes ``brats.csv``, the table BraTS_evaluation's
``brats-parse-metrics`` writes, with its statistics as pandas takes them.
"""

import math

import numpy as np

from evaluation.contract import Result
from evaluation.errors import SubmissionError
from evaluation.suites.segmentation import aggregate, brats2023, brats_table, panoptica_evaluator, report
from evaluation.suites.segmentation.inputs import CaseTask, read_case
from evaluation.suites.segmentation.modes import REFERENCES
from evaluation.suites.segmentation.options import Options
from evaluation.suites.segmentation.scoring import scan


def score_case(task: CaseTask) -> dict:
    options = task.options
    truth, pred, spacing = read_case(task)
    try:
        return score_arrays(truth, pred, spacing, options)
    except SubmissionError as exc:
        raise SubmissionError(f"{task.display}: {exc}") from None


def score_arrays(truth: np.ndarray, pred: np.ndarray, spacing, options: Options) -> dict:
    mode = options.mode
    classes, details = {}, {}
    if mode.kind == "brats2023":
        found = brats2023.evaluate_case(truth, pred, spacing, mode.challenge, options.corrections, scan=scan)
        classes = {name: brats2023.row(values) for name, values in found.items()}
    else:
        groups = panoptica_evaluator.evaluate_case(truth, pred, spacing, mode.config, options.corrections, scan=scan)
        for name, (result, rows, false_positives) in groups.items():
            details[name] = {"reference_instances": rows, "unmatched_predictions": false_positives}
            classes[name] = _table_fields(mode, options, result, rows, false_positives) if mode.kind == "brats" else result
    diagonal = math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape, spacing)))
    return {"spacing": list(spacing), "shape": list(truth.shape), "diagonal": diagonal, "classes": classes, "instances": details}


def _table_fields(mode, options, result, rows, false_positives) -> dict:
    if mode.parser == "mets":
        return brats_table.mets_fields(
            result, rows, [(f["voxel_count"], f["volume"]) for f in false_positives], mode.volume_threshold,
            mode.overlap_threshold, options.corrections,
        )  # fmt: skip
    return brats_table.seg_fields(result, options.corrections)


def warm_up(options: Options) -> None:
    """Compiles the kernels once in the parent (a tiny 3-D case of the evaluation's labels)."""
    truth = np.zeros((5, 6, 7), np.uint8)
    truth[1:4, 1:4, 1:4] = options.mode.labels[0]
    score_arrays(truth, np.roll(truth, 1, axis=-1), (1.0, 1.0, 1.0), options)


def summarize(options: Options, plan, outcomes, render_report: bool = True) -> Result:
    files = plan.context["files"]
    scored, failed = aggregate.split(outcomes, {case: case for case in files})
    keys = options.keys()
    if options.mode.kind == "brats":
        summary, table = _brats_summary(options, scored, failed, plan.context)
    else:
        summary, table = aggregate.summarize(options, scored, keys), None
    score = aggregate.ranking_score(options, summary["overall"])
    cases = aggregate.case_entries(files, scored, failed)
    if table is not None:
        cases.update({c: {"status": "missing", "classes": v} for c, v in table["penalised"].items() if c not in cases})
    metrics = {
        "case": dict(sorted(cases.items())),
        "aggregates": aggregate.aggregates(options, summary, score, scored, failed, plan.context["missing"]),
        "reference": {
            "evaluation": options.mode.preset or "panoptica",
            "reproduces": REFERENCES[options.mode.kind],
            "corrections": list(options.corrections),
        },
    }
    out = {"cases.csv": report.cases_csv(options, scored, keys)}
    if render_report:  # the phase's report: false renders nothing
        out["report.html"] = report.html_report(options, scored, failed, summary, keys, score)
    if options.mode.kind != "brats2023":
        out["instances.json"] = {case: value["instances"] for case, value in sorted(scored.items())}
    if table is not None:
        out["brats.csv"] = table["csv"]
    return Result(
        metrics=metrics,
        leaderboard=aggregate.leaderboard(options, summary, score),
        case_scores=aggregate.case_scores(options, scored),
        files=out,
    )


def _brats_summary(options: Options, scored: dict, failed: dict, context: dict) -> tuple[dict, dict]:
    """The table in BraTS_evaluation's order (rows named by truth file), its statistics per
    region and field, and each statistic averaged over the regions."""
    regions, keys, files = [c.name for c in options.classes], options.keys(), context["truth_files"]
    rows = {files[case]: _flat_row(v["classes"], regions) for case, v in scored.items()}
    table = brats_table.rows_in_reference_order(
        rows, [files[c] for c in failed], [files[c] for c in context["missing_names"]], options.corrections
    )
    classes = {region: {key: _column(table, f"{key}_{region}") for key in keys} for region in regions}
    overall = {key: {s: _mean_defined([classes[r][key][s] for r in regions]) for s in ("mean", "std", "median")} for key in keys}
    case_of = {file: case for case, file in files.items()}
    penalised = {
        case_of[file]: {r: {k: fields.get(f"{k}_{r}") for k in keys} for r in regions}
        for file, fields in table
        if case_of[file] not in scored
    }
    return {"classes": classes, "overall": overall}, {"csv": brats_table.csv(table, regions), "penalised": penalised}


def _column(table: list, field: str) -> dict:
    values = [fields.get(field) for _, fields in table]
    kept = sum(1 for v in values if v is not None and not math.isnan(float(v)))
    return {**brats_table.statistics(values), "n": kept, "n_undefined": len(values) - kept}


def _flat_row(classes: dict, regions: list[str]) -> dict:
    return {f"{field}_{region}": value for region in regions for field, value in classes[region].items()}


def _mean_defined(values) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(kept)) if kept else None
