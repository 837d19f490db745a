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

from evaluation.contract import Outcome, Plan, Resources, Result, Suite
from evaluation.errors import participant_file
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

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        with participant_file():  # the ground truth's reads say so themselves (organizer_file)
            return inputs.plan(submission, phase, resources)

    def score(self, payload: Batch) -> dict:
        with participant_file():
            return scoring.score_batch(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        context: inputs.Context = plan.context
        models = {model: aggregate.model_result(context.options, info, outcomes) for model, info in context.layout.items()}
        result = aggregate.result(context, models)
        text = report.render(
            context.options,
            {m: r.summary for m, r in models.items()},
            context.baseline if context.multi else None,
            context.layout,
        )
        result.files.update({"report.txt": text, "report.html": report.as_html(text)})
        return result
