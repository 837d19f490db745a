"""``preset: topcow2024-task1``: TopCoW 2024's multiclass segmentation evaluation
(CoWBenchmark/TopCoW_Eval_Metrics@25ca839), behind the ``evaluations.Evaluation`` protocol.

Each case is read as the reference reads it (``topcow_inputs``) and scored as it scores it
(``topcow``); its row of the reference's table becomes the suite's entries: a class per CoW
label (the reference's names, lowercase) and ``merged`` (its ``MergedBin``), each with the
metric-table keys ``dice``, ``betti0_error``, ``hd``, ``hd95`` (and on ``merged`` ``cldice``,
and ``betti1_error`` with ``topcow_betti1``); ``class_average`` (its ``ClsAvg*`` columns); its
``detection``, ``graph`` and ``topology`` dicts as they are. A label absent from both maps of a
case has no value (null), as in the reference, where it has no column.

The statistics are the reference's (pandas' ``describe()``, ``topcow_table``): per class and
key over the cases, NaN cases left out; ``overall`` is the statistics of the class averages
(the reference's ``ClsAvg*`` aggregates; ``cldice`` and ``betti1_error``, which the reference
has for the merged masks only, the merged class's); ``detection``, ``graph_balanced_accuracy``
and ``topology_balanced_accuracy`` are its ``dect_avg``, ``graph_var_bal_acc`` and
``topo_var_bal_acc``. ``topcow_metrics.json`` is the reference's own metrics.json of the
cases, every column and aggregate, in the reference's order of the cases (its truth files
sorted by path) and format.
"""

import math
from pathlib import Path

from evaluation import public
from evaluation.contract import Result
from evaluation.suites.segmentation import aggregate, report, topcow, topcow_inputs, topcow_table
from evaluation.suites.segmentation.inputs import CaseTask
from evaluation.suites.segmentation.options import Options
from evaluation.suites.segmentation.scoring import SECONDS_PER_GVOXEL

REFERENCE_2023 = "CoWBenchmark/TopCoW_Eval_Metrics@7c722ff, metric_functions.py: betti_number_error_all_classes"
# metric-table key -> the reference's column prefix
PREFIXES = {"dice": "Dice", "betti0_error": "B0err", "hd": "HD", "hd95": "HD95"}
MERGED_ONLY = {"cldice": "clDice", "betti1_error": f"B1err_{topcow.MERGED}"}
# the suite's names of describe()'s statistics (evalutils' 50pc is the median, count is n)
STATISTICS = {"mean": "mean", "std": "std", "min": "min", "25pc": "25pc", "50pc": "median", "75pc": "75pc", "max": "max"}
REFERENCE_FILE = "topcow_metrics.json"


def class_values(row: dict, betti1: bool) -> dict:
    """The row's per-label and merged values as the suite's classes and keys."""
    classes = {
        name.lower(): {key: row.get(f"{prefix}_{name}") for key, prefix in PREFIXES.items()} for name in topcow.LABELS.values()
    }
    merged = {key: row[f"{prefix}_{topcow.MERGED}"] for key, prefix in PREFIXES.items()}
    merged["cldice"] = row["clDice"]
    if betti1:
        merged["betti1_error"] = row[MERGED_ONLY["betti1_error"]]
    classes[topcow.MERGED_CLASS] = merged
    return classes


def warm_up_kernels() -> None:
    """The kernels of reading and scoring a case (the image build loads them too)."""
    topcow.warm_up()
    topcow_inputs.warm_up()


class TopCoW:
    def warm_up(self, options: Options) -> None:
        warm_up_kernels()

    def predictions(self, options: Options, files: dict, truth: dict) -> dict:
        return files  # one label map per case, paired by name (the reference pairs by sorted position)

    def context(self, options: Options, truth: dict, cases: list[str], policy: str) -> dict:
        """The reference orders its cases by the truth files' paths (component by component,
        as pathlib sorts) and names them by the file."""
        return {"truth_files": {case: str(path) for case, path in truth.items()}}

    def score(self, task: CaseTask) -> dict:
        options = task.options
        case = topcow_inputs.read_case(task)
        row = topcow.evaluate(
            case.truth, case.pred, case.spacing_xyz, options.corrections, case.direction_xyz, options.mode.betti1
        )
        shape = case.truth.shape
        return {
            "spacing": list(case.spacing),
            "shape": list(shape),
            "diagonal": math.sqrt(sum((n * s) ** 2 for n, s in zip(shape, case.spacing))),
            "classes": class_values(row, options.mode.betti1),
            "class_average": {key: row[f"{prefix}_{topcow.AVERAGES[prefix]}"] for key, prefix in PREFIXES.items()},
            "row": row,
        }

    def check(self, task: CaseTask) -> dict:
        if task.prediction is not None:
            topcow_inputs.check(task)
        return {"seconds": public.read_header(Path(task.truth)).voxels / 1e9 * SECONDS_PER_GVOXEL}

    def summarize(self, phase, plan, outcomes) -> Result:
        options, files = plan.context.options, plan.context.files
        scored, failed = aggregate.split(outcomes, {case: case for case in files})
        truth_files = plan.context.extra["truth_files"]
        order = sorted(scored, key=lambda case: Path(truth_files[case]).parts)
        rows = [
            {
                **scored[case]["row"],
                "gt_fname": Path(truth_files[case]).name,
                "pred_fname": Path(files[case]).name if files[case] else None,
            }
            for case in order
        ]
        reference = topcow_table.document(rows, options.corrections)
        summary = self.statistics(options, [scored[case] for case in order])
        score = aggregate.ranking_score(options, summary["overall"])
        extra = reference["aggregates"]
        metrics = {
            "case": {**self.case_entries(files, scored), **aggregate.case_entries(files, {}, failed)},
            "aggregates": {
                **aggregate.aggregates(options, summary, score, scored, failed, plan.context.missing),
                "detection": extra.get("dect_avg"),
                "graph_balanced_accuracy": extra.get("graph_var_bal_acc"),
                "topology_balanced_accuracy": extra.get("topo_var_bal_acc"),
            },
            "reference": {
                "evaluation": options.mode.name,
                "reproduces": options.mode.reference,
                "corrections": list(options.corrections),
            },
        }
        metrics["case"] = dict(sorted(metrics["case"].items()))
        keys = options.keys()
        out = {"cases.csv": report.cases_csv(options, scored, keys), REFERENCE_FILE: topcow_table.document_bytes(reference)}
        if phase.option("report"):  # report: false renders nothing
            out["report.html"] = report.html_report(options, scored, failed, summary, keys, score)
        return Result(
            metrics=metrics,
            leaderboard={**aggregate.leaderboard(options, summary, score), **_challenge_columns(extra)},
            case_scores=self.case_scores(options, scored),
            files=out,
        )

    @staticmethod
    def case_entries(files: dict, scored: dict) -> dict:
        return {
            case: {
                "status": "scored",
                "prediction_file": files[case],
                "spacing": value["spacing"],
                "classes": value["classes"],
                "class_average": value["class_average"],
                "detection": value["row"]["all_detection_dicts"],
                "graph": value["row"]["all_graph_dicts"],
                "topology": value["row"]["all_topo_dicts"],
            }
            for case, value in scored.items()
        }

    @staticmethod
    def statistics(options: Options, values: list[dict]) -> dict:
        """describe() per class and key; ``overall`` per key from the class averages (or the
        merged class, for the keys only it has)."""
        keys, classes = options.keys(), {}
        for cls in options.classes:
            has = [k for k in keys if any(k in v["classes"][cls.name] for v in values)]
            classes[cls.name] = {key: _statistics([v["classes"][cls.name].get(key) for v in values], True) for key in has}
        overall = {}
        for key in keys:
            found = [v["class_average"][key] if key in PREFIXES else v["classes"][topcow.MERGED_CLASS][key] for v in values]
            overall[key] = _statistics(found, False)
        return {"classes": classes, "overall": overall}

    @staticmethod
    def case_scores(options: Options, scored: dict) -> dict[str, float]:
        """Per case, the ranking key's class average (or merged value), on the score's scale."""
        sign = 1.0 if options.kind(options.ranking).higher_is_better else -1.0
        key = options.ranking
        found = {}
        for case, value in scored.items():
            number = value["class_average"][key] if key in PREFIXES else value["classes"][topcow.MERGED_CLASS][key]
            if aggregate.defined(number):
                found[case] = sign * float(number)
        return found

    def definitions(self, options: Options) -> dict[str, dict]:
        """Every key is the reference's; the Betti-1 error the 2023 release's."""
        found = dict.fromkeys(options.keys(), {"source": "library", "library": options.mode.reference})
        if "betti1_error" in found:
            found["betti1_error"] = {"source": "library", "library": REFERENCE_2023}
        return found


TOPCOW = TopCoW()


def _statistics(values: list, counted: bool) -> dict:
    found = topcow_table.describe(values)
    out = {name: _number(found[key]) for key, name in STATISTICS.items()}
    if counted:
        n = int(found["count"])
        out.update(n=n, n_undefined=len(values) - n)
    return out


def _number(value) -> float | None:
    return float(value) if aggregate.defined(value) else None


def _challenge_columns(extra: dict) -> dict[str, float]:
    """The reference's three challenge metrics beyond the statistics, as leaderboard columns."""
    found = {}
    detection = extra.get("dect_avg") or {}
    for name in ("f1_score", "precision", "recall"):
        if name in detection:
            found[f"detection_{name}_mean"] = detection[name]["mean"]
    for name, key in (("graph_balanced_accuracy", "graph_var_bal_acc"), ("topology_balanced_accuracy", "topo_var_bal_acc")):
        for region, value in (extra.get(key) or {}).items():
            found[f"{name}_{region}"] = value
    return {k: float(v) for k, v in found.items() if aggregate.defined(v)}
