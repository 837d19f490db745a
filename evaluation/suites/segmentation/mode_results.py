"""The whole evaluations (``modes``): panoptica's evaluator configuration, a BraTS_evaluation
0.0.10 preset or a BraTS 2023 lesion-wise preset, each behind the ``evaluations.Evaluation``
protocol.

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
from evaluation.suites.segmentation.options import Options
from evaluation.suites.segmentation.scoring import check_case, scan


class _WholeEvaluation:
    """What the three share: a case scored as the reference scores it, the suite's statistics
    over the cases (or the reference's table's, ``summary``), every key the reference's own."""

    writes_instances = True  # instances.json: panoptica's reference instances

    def warm_up(self, options: Options) -> None:
        """Compiles the kernels once in the parent (a tiny 3-D case of the evaluation's labels)."""
        truth = np.zeros((5, 6, 7), np.uint8)
        truth[1:4, 1:4, 1:4] = options.label_ids[0]
        self.score_arrays(truth, np.roll(truth, 1, axis=-1), (1.0, 1.0, 1.0), options)

    def predictions(self, options: Options, files: dict, truth: dict) -> dict:
        return files

    def context(self, options: Options, truth: dict, cases: list[str], policy: str) -> dict:
        return {}

    def score(self, task: CaseTask) -> dict:
        truth, pred, spacing = read_case(task)
        try:
            return self.score_arrays(truth, pred, spacing, task.options)
        except SubmissionError as exc:
            raise SubmissionError(f"{task.display}: {exc}") from None

    def check(self, task: CaseTask) -> dict:
        return check_case(task)

    def score_arrays(self, truth: np.ndarray, pred: np.ndarray, spacing, options: Options) -> dict:
        classes, details, summary = self.evaluate(truth, pred, spacing, options)
        diagonal = math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape, spacing)))
        return {
            "spacing": list(spacing),
            "shape": list(truth.shape),
            "diagonal": diagonal,
            "classes": classes,
            "instances": details,
            **({"summary": summary} if summary else {}),
        }

    def evaluate(self, truth, pred, spacing, options: Options) -> tuple[dict, dict, dict]:
        """(class -> keys -> values, class -> instances.json entry, class -> the reference
        package's own summary where it holds more than the keys: {} otherwise) of one case."""
        raise NotImplementedError

    def summary(self, options: Options, scored: dict, failed: dict, context: dict) -> tuple[dict, dict | None]:
        """(the statistics, the reference's table or None)."""
        return aggregate.summarize(options, scored, options.keys()), None

    def summarize(self, phase, plan, outcomes) -> Result:
        options, files = plan.context.options, plan.context.files
        scored, failed = aggregate.split(outcomes, {case: case for case in files})
        keys = options.keys()
        summary, table = self.summary(options, scored, failed, plan.context.extra)
        score = aggregate.ranking_score(options, summary["overall"])
        cases = aggregate.case_entries(files, scored, failed)
        if table is not None:
            cases.update({c: {"status": "missing", "classes": v} for c, v in table["penalised"].items() if c not in cases})
        metrics = {
            "case": dict(sorted(cases.items())),
            "aggregates": aggregate.aggregates(options, summary, score, scored, failed, plan.context.missing),
            "reference": {
                "evaluation": options.mode.name,
                "reproduces": options.mode.reference,
                "corrections": list(options.corrections),
            },
        }
        out = {"cases.csv": report.cases_csv(options, scored, keys)}
        if phase.option("report"):  # report: false renders nothing
            out["report.html"] = report.html_report(options, scored, failed, summary, keys, score)
        if self.writes_instances:
            out["instances.json"] = {case: value["instances"] for case, value in sorted(scored.items())}
        if table is not None:
            out["brats.csv"] = table["csv"]
        return Result(
            metrics=metrics,
            leaderboard=aggregate.leaderboard(options, summary, score),
            case_scores=aggregate.case_scores(options, scored),
            files=out,
        )

    def definitions(self, options: Options) -> dict[str, dict]:
        """Every key comes from the evaluation's reference."""
        return dict.fromkeys(options.keys(), {"source": "library", "library": options.mode.reference})


class Panoptica(_WholeEvaluation):
    """panoptica's ``Panoptica_Evaluator``: its result keys per group."""

    def evaluate(self, truth, pred, spacing, options: Options) -> tuple[dict, dict, dict]:
        classes, details, summary = {}, {}, {}
        groups = panoptica_evaluator.evaluate_case(truth, pred, spacing, options.mode.config, options.corrections, scan=scan)
        for name, (result, rows, false_positives) in groups.items():
            details[name] = {"reference_instances": rows, "unmatched_predictions": false_positives}
            classes[name] = self.fields(options, result, rows, false_positives)
            summary[name] = self.package_summary(options, result)
        return classes, details, {name: values for name, values in summary.items() if values}

    def fields(self, options: Options, result: dict, rows: list, false_positives: list) -> dict:
        return result

    def package_summary(self, options: Options, result: dict) -> dict:
        """What the reference package's summary holds beyond ``fields`` (panoptica's: nothing)."""
        return {}


class Brats(Panoptica):
    """BraTS_evaluation: panoptica's result turned into ``brats-parse-metrics``' table fields;
    the table's statistics, missing subjects penalised."""

    def context(self, options: Options, truth: dict, cases: list[str], policy: str) -> dict:
        """The table names its rows by truth file and gives a missing subject its penalty row."""
        return {
            "truth_files": {case: path.name for case, path in truth.items()},
            "missing_names": sorted(set(truth) - set(cases)) if policy == "penalty" else [],
        }

    def fields(self, options: Options, result: dict, rows: list, false_positives: list) -> dict:
        mode = options.mode
        if mode.parser == "mets":
            return brats_table.mets_fields(
                result, rows, [(f["voxel_count"], f["volume"]) for f in false_positives], mode.volume_threshold,
                mode.overlap_threshold, options.corrections,
            )  # fmt: skip
        return brats_table.seg_fields(result, options.corrections)

    def package_summary(self, options: Options, result: dict) -> dict:
        """BraTS_evaluation's summary of a group: panoptica's result, every value the table
        does not carry itself (``global_bin_volume_pred``, ``pq_dsc``, ``n_ref_instances``, the
        ``sq_*`` the mets table recomputes, ...); for mets also the ordinary table's
        ``lesionwise_*`` columns (``parse_seg_results``), as ``seg_lesionwise_*``."""
        summary = {key: value for key, value in result.items() if not isinstance(value, (dict, list, tuple))}
        if options.mode.parser == "mets":
            ordinary = brats_table.seg_fields(result, options.corrections)
            summary.update({f"seg_{k}": v for k, v in ordinary.items() if k.startswith("lesionwise_")})
        return summary

    def summary(self, options: Options, scored: dict, failed: dict, context: dict) -> tuple[dict, dict]:
        """The table in BraTS_evaluation's order (rows named by truth file), its statistics per
        region and field, and each statistic averaged over the regions."""
        regions, keys, files = [c.name for c in options.classes], options.keys(), context["truth_files"]
        rows = {files[case]: _flat_row(v["classes"], regions) for case, v in scored.items()}
        table = brats_table.rows_in_reference_order(
            rows, [files[c] for c in failed], [files[c] for c in context["missing_names"]], options.corrections
        )
        classes = {region: {key: _column(table, f"{key}_{region}") for key in keys} for region in regions}
        overall = {
            key: {s: _mean_defined([classes[r][key][s] for r in regions]) for s in ("mean", "std", "median")} for key in keys
        }
        case_of = {file: case for case, file in files.items()}
        penalised = {
            case_of[file]: {r: {k: fields.get(f"{k}_{r}") for k in keys} for r in regions}
            for file, fields in table
            if case_of[file] not in scored
        }
        return {"classes": classes, "overall": overall}, {"csv": brats_table.csv(table, regions), "penalised": penalised}


class Brats2023(_WholeEvaluation):
    """The BraTS 2023 lesion-wise table per region."""

    writes_instances = False

    def evaluate(self, truth, pred, spacing, options: Options) -> tuple[dict, dict, dict]:
        found = brats2023.evaluate_case(truth, pred, spacing, options.mode.challenge, options.corrections, scan=scan)
        return {name: brats2023.row(values) for name, values in found.items()}, {}, {}


PANOPTICA, BRATS, BRATS2023 = Panoptica(), Brats(), Brats2023()


def _column(table: list, field: str) -> dict:
    values = [fields.get(field) for _, fields in table]
    kept = sum(1 for v in values if v is not None and not math.isnan(float(v)))
    return {**brats_table.statistics(values), "n": kept, "n_undefined": len(values) - kept}


def _flat_row(classes: dict, regions: list[str]) -> dict:
    return {f"{field}_{region}": value for region in regions for field, value in classes[region].items()}


def _mean_defined(values) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(kept)) if kept else None
