"""Lesion detection in 3-D volumes as the PI-CAI challenge evaluates it: picai_eval 1.4.13.

Reference: DIAGNijmegen/picai_eval, tag v1.4.13 (410559f): ``src/picai_eval/eval.py``
(``evaluate_case``: candidates of a detection map matched to the truth's lesions by optimal
assignment on IoU or DSC; ``evaluate``), ``src/picai_eval/metrics.py`` (``Metrics``: lesion-level
precision-recall and AP, case-level ROC and AUROC, FROC, ``score`` = (AUROC + AP) / 2), and,
for softmax maps, report_guided_annotation 0.3.4's ``extract_lesion_candidates``. The PI-CAI
Grand-Challenge evaluation's use of submitted case-level likelihoods for the AUROC is an
option (``likelihoods``); quirks of the reference are reproduced unless a phase lists them
under ``corrections`` (docs/suites/detection.md).

Phase: ``phase.yaml`` plus one truth label map per case in ``truth`` (any non-zero voxel is
lesion tissue). Submission: one detection (or softmax) map per case named after it, on the
truth's grid; optionally the likelihoods' file. A missing case rejects the submission by
default (picai_eval stops on it); a case whose file cannot be used fails with a message naming
it, and the cross-case values are computed from the others.

Modules: ``options``, ``inputs`` (cases, likelihoods, batches), ``candidates`` (detection maps'
blobs, softmax extraction), ``lesions`` (one case's rows), ``scoring`` (one batch in a worker),
``curves`` (PR, ROC, FROC), ``aggregate`` (``Metrics``, metrics.json, leaderboard, case
scores), ``report`` (curves.csv, curves.html).
"""

import dataclasses
from pathlib import Path

from evaluation.contract import Outcome, Plan, Resources, Result, Suite
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.detection import aggregate, inputs, report, scoring
from evaluation.suites.detection.inputs import Batch
from evaluation.suites.detection.options import Options

__all__ = ["Detection", "Options"]


@register
class Detection(Suite):
    name = "detection"
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
        result, found = aggregate.result(context, outcomes)
        result.files[report.CSV_FILE] = report.table(found)
        if phase.option("report"):  # report: false draws nothing (the CSV stays)
            result.files[report.PAGE_FILE] = report.page(found, f"{len(context.cases)} cases, picai_eval 1.4.13 definitions")
        return result

    def cases(self, plan: Plan[inputs.Context]) -> list[str]:
        return list(plan.context.cases)

    def restrict(self, plan: Plan[inputs.Context], cases: set[str]) -> Plan[inputs.Context]:
        """A batch scores several cases: the context keeps the chosen ones, and the tasks that
        score any of them stay (their other cases are not summarised)."""
        context: inputs.Context = plan.context
        kept = [c for c in context.cases if c in cases]
        likelihoods = None if context.likelihoods is None else {c: v for c, v in context.likelihoods.items() if c in cases}
        narrowed = dataclasses.replace(
            context,
            cases=kept,
            files={c: context.files[c] for c in kept},
            tasks={c: context.tasks[c] for c in kept},
            likelihoods=likelihoods,
        )
        keys = set(narrowed.tasks.values())
        return Plan([t for t in plan.tasks if t.key in keys], narrowed, [c for c in plan.missing if c in cases])

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "reference", "repository": aggregate.REFERENCE["repository"], "commit": aggregate.REFERENCE["commit"]}
        return {
            aggregate.HEADLINE: {**where, "function": "src/picai_eval/metrics.py:Metrics.score ((AUROC + AP) / 2)"},
            "auroc": {**where, "function": "src/picai_eval/metrics.py:Metrics.calculate_ROC"},
            "AP": {**where, "function": "src/picai_eval/metrics.py:Metrics.calculate_precision_recall"},
            "lesion_TPR_at_FPR_*": {**where, "function": "src/picai_eval/metrics.py:Metrics.lesion_TPR_at_FPR"},
            "case scores (jackknife pseudo-values of the score)": {
                "source": "suite",
                "function": "evaluation/suites/detection/aggregate.py:jackknife",
            },
        }
