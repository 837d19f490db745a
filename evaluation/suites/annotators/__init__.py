"""Several annotators, one or more models: overlap, distances, agreement and STAPLE consensus.

Reference: MMV-Lab/string_vessel_project@c90f9ec (``core/evaluation.py``:
``evaluation_metrics``, ``jaccard_computing``, ``hausdorff_computing``, ``msd_computing``,
``thicken_segmentation_skimage``, ``generate_statistical_summaries``; the notebook
``model_evaluation.ipynb``). docs/suites/annotators.md describes the definitions and quirks.

Per image and model, the model's mask M is compared with every annotator A_i, with their
union, their intersection and the STAPLE consensus (SimpleITK, probability > 0.5): Jaccard,
Dice = 2J/(1+J), Hausdorff and mean surface distance over all foreground pixels (the tool's
definition; the boundary-based variants are phase options). Agreement among the annotators,
with and without the model, and STAPLE's per-annotator sensitivity and specificity complete
the row. Rows are summarised per model (mean, std, variance, min, max over images).

Ground truth: ``<annotations>/<annotator folder>/<image>.<ext>``; the annotator's column name
is its folder name after the last ``_`` (the tool's rule). Submission: one prediction per
image, ``<image>.<ext>`` or ``<image>_segPred.<ext>``, either directly (one model) or in one
subfolder per model (the tool's batch mode; the model id is the folder name after the last
``_``).

Modules: ``definitions`` (the tool's names and constants), ``options``, ``inputs`` (folders,
files, tasks), ``masks`` (dilation, components), ``scoring`` (one image), ``aggregate``
(summaries, metrics.json), ``plots`` and ``report`` (CSV tables, SVG plots, report.html).
"""

import dataclasses
from pathlib import Path

from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.annotators import aggregate, inputs, report, scoring
from evaluation.suites.annotators.definitions import RANKING
from evaluation.suites.annotators.inputs import ImageTask
from evaluation.suites.annotators.options import Options

__all__ = ["Annotators", "Options"]


@register
class Annotators(Suite):
    name = "annotators"
    ranking = RANKING
    higher_is_better = True

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[inputs.Context]:
        return inputs.plan(submission, phase, resources)

    def score(self, payload: ImageTask) -> dict:
        return scoring.score_task(payload)

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, output)

    def check(self, payload: ImageTask) -> dict:
        return scoring.check_task(payload)

    def summarize(self, phase: Phase, plan: Plan[inputs.Context], outcomes: dict[str, Outcome]) -> Result:
        scored, case = aggregate.collect(plan, outcomes)
        result = aggregate.result(plan.context, scored, case)
        result.files = report.outputs(plan.context, scored, bool(phase.option("report")))
        return result

    def case_of(self, task: Task) -> str:
        return task.payload.image

    def cases(self, plan: Plan[inputs.Context]) -> list[str]:
        return list(plan.context.images)

    def restrict(self, plan: Plan[inputs.Context], cases: set[str]) -> Plan[inputs.Context]:
        context = plan.context
        skipped = {model: [i for i in images if i in cases] for model, images in context.skipped.items()}
        images = [image for image in context.images if image in cases]
        return Plan(
            [t for t in plan.tasks if t.payload.image in cases], dataclasses.replace(context, images=images, skipped=skipped)
        )

    def definitions(self, phase: Phase) -> dict[str, dict]:
        from evaluation.suites.annotators.definitions import REFERENCE

        where = {"source": "reference", "repository": REFERENCE["repository"], "commit": REFERENCE["commit"]}
        return {
            RANKING: {
                **where,
                "function": "core/evaluation.py:evaluation_metrics, jaccard_computing (Dice = 2J/(1+J)); STAPLE: SimpleITK STAPLEImageFilter",
            }
        }
