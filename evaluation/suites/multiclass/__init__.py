"""Per-image multi-class Dice and IoU in nnU-Net v2's convention, for one or several models.

Reference: MIC-DKFZ/nnUNet@0e49508 (unchanged since b0505529, 2022),
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics`` (per image and class:
Dice, IoU, TP, FP, FN, TN, n_pred, n_ref; NaN when the class is in neither mask; an optional
ignore label) and ``compute_metrics_on_folder`` (``mean``: per-class NaN-ignoring mean over
images; ``foreground_mean``: plain mean over the classes other than 0). Class groups,
zero-Dice ratios, dataset-level (pooled) values and model deltas are this project's additions
(docs/suites/multiclass.md).

Phase: ``phase.yaml`` plus one label map per test case in ``truth`` (default ``labels/``),
named ``<case>.<ext>``. Submission: one label map per case, matched by name; either all at
the top level (one model) or one folder per model (several models, compared against a
baseline; only when ``max_models`` allows it). Failure policy: a missing case rejects the
whole submission (nnU-Net's default, ``chill=False``) unless ``missing_cases`` says
otherwise, a file that matches no case rejects it too (nnU-Net would crash on it); a case
whose file is unreadable or on the wrong grid fails alone and is left out of the means.

Modules: ``options`` (phase options), ``inputs`` (models, cases, batches), ``scoring`` (one
batch in a worker), ``aggregate`` (metrics.json, summary.json, leaderboard), ``report``
(report.txt and report.html).
"""

import dataclasses
import math
from pathlib import Path

from evaluation.contract import Outcome, Plan, Resources, Result, Suite, census
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.multiclass import aggregate, inputs, report, scoring
from evaluation.suites.multiclass.inputs import Batch
from evaluation.suites.multiclass.options import Options

__all__ = ["Multiclass", "Options"]


@register
class Multiclass(Suite):
    name = "multiclass"
    ranking = aggregate.HEADLINE

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[inputs.Context]:
        return inputs.plan(submission, phase, resources)

    def score(self, payload: Batch) -> dict:
        return scoring.score_batch(payload)

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, output)

    def check(self, payload: Batch) -> dict:
        return scoring.check_batch(payload)

    def summarize(self, phase: Phase, plan: Plan[inputs.Context], outcomes: dict[str, Outcome]) -> Result:
        context: inputs.Context = plan.context
        models = {model: aggregate.model_result(context.options, info, outcomes) for model, info in context.layout.items()}
        result = aggregate.result(context, models)
        if phase.option("report"):  # report: false renders nothing (summary.json stays)
            text = report.render(
                context.options,
                {m: r.summary for m, r in models.items()},
                context.baseline if context.multi else None,
                context.layout,
            )
            result.files.update({"report.txt": text, "report.html": report.as_html(text)})
        return result

    def census(self, phase: Phase, plan: Plan[inputs.Context], outcomes: dict[str, Outcome], result: Result) -> dict:
        """(case, class) pairs whose Dice is undefined (the class in neither mask: NaN, left
        out of nnU-Net's NaN-ignoring class means), and the cases scored without a prediction
        or skipped (``missing_cases``), for the ranked model."""
        undefined = sum(
            not isinstance(value, (int, float)) or not math.isfinite(value)
            for entry in result.metrics.get("case", {}).values()
            if isinstance(entry.get("Dice"), dict)
            for value in entry["Dice"].values()
        )
        rules = {
            "Dice undefined (class in neither mask)": undefined,
            "case without prediction": result.metrics["aggregates"].get("n_missing_images", 0),
        }
        return census("(case, class) pairs; cases", rules, self.ranking)

    def cases(self, plan: Plan[inputs.Context]) -> list[str]:
        return sorted({case for info in plan.context.layout.values() for case in info.cases})

    def restrict(self, plan: Plan[inputs.Context], cases: set[str]) -> Plan[inputs.Context]:
        """A batch scores several cases: each model's layout keeps the chosen ones, and the
        tasks that score any of them stay (their other cases are not read)."""
        layout = {
            model: dataclasses.replace(
                info,
                cases=[c for c in info.cases if c in cases],
                files={c: f for c, f in info.files.items() if c in cases},
                tasks={c: t for c, t in info.tasks.items() if c in cases},
            )
            for model, info in plan.context.layout.items()
        }
        kept = {task for info in layout.values() for task in info.tasks.values()}
        return Plan([t for t in plan.tasks if t.key in kept], dataclasses.replace(plan.context, layout=layout))

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "reference", "repository": aggregate.REFERENCE["repository"], "commit": aggregate.REFERENCE["commit"]}
        return {
            aggregate.HEADLINE: {**where, "function": f"{aggregate.REFERENCE['function']} (foreground_mean Dice)"},
            "class groups, zero-Dice ratios, pooled values, deltas": {
                "source": "suite",
                "function": "evaluation/suites/multiclass/aggregate.py",
            },
        }
