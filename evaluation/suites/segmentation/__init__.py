"""Generic segmentation metrics for any challenge, each family computed exactly as a chosen
library computes it.

The phase lists the classes (label ids, or regions: unions of labels), the metrics and, per
metric family, whose definition to follow: panoptica (BrainLesion/panoptica 2.1.7),
MetricsReloaded (Project-MONAI/MetricsReloaded@cb38dfc), MONAI (monai.metrics 1.6.1) or
DeepMind's surface-distance (google-deepmind/surface-distance@1f805ce). The libraries disagree
on the surface, the percentile, the mean, the tolerance, the matching and on empty masks;
docs/suites/segmentation.md sets them side by side. Each case is one task; the distances of a
(case, class) are measured once and every distance metric is reduced from them. Every metric
is one row of ``metrics_table``.

Instead of listing metrics, a phase may name a whole evaluation: panoptica's evaluator
configuration, a BraTS preset or TopCoW's. What the phase evaluates is read once
(``Options.mode``) and each entry point asks the implementation ``EVALUATIONS`` holds for it
(``evaluations``).
"""

import dataclasses
from pathlib import Path

from evaluation import log, public
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.phase import Phase, option_schemas
from evaluation.submission import Submission, pair_cases
from evaluation.suites import register
from evaluation.suites.segmentation import aggregate, autopet_evaluation, census, inputs, listed, mode_results, topcow_results
from evaluation.suites.segmentation.evaluations import Evaluation
from evaluation.suites.segmentation.inputs import (
    Cases,
    CaseTask,
    case_task,
    memory_estimate,
    submitted_file,
    truth_cases,
)
from evaluation.suites.segmentation.metrics_table import BY_DEFINITION, LIBRARIES
from evaluation.suites.segmentation.options import Options

__all__ = ["EVALUATIONS", "Options", "Segmentation", "warm_up", "warm_up_every_definition"]

_log = log.get(__name__)

# What the phase evaluates (Options.mode.kind) -> its implementation
EVALUATIONS: dict[str, Evaluation] = {
    "metrics": listed,
    "panoptica": mode_results.PANOPTICA,
    "brats": mode_results.BRATS,
    "brats2023": mode_results.BRATS2023,
    "autopet": autopet_evaluation.AUTOPET,
    "topcow": topcow_results.TOPCOW,
}


def evaluation(options: Options) -> Evaluation:
    return EVALUATIONS[options.mode.kind]


def warm_up(options: Options) -> None:
    """Compile (or load from numba's cache) the kernels this phase uses, once in the parent,
    by scoring a tiny case, so the forked workers do not each pay for it."""
    evaluation(options).warm_up(options)


def warm_up_every_definition() -> None:
    """``warm_up`` with every metric of every library: the image build calls it, so that a
    container, whose install is read-only, does not compile the kernels in every run (5 s).
    A library without an instance evaluation (DeepMind's) has its phase take panoptica's; the
    TopCoW preset's own kernels (ITK's distances, its reading) are loaded as well."""
    schema = option_schemas("segmentation")
    for library in LIBRARIES:
        options = {
            "classes": [1],
            "definition": library,
            "definitions": {} if BY_DEFINITION[library].instances else {"instances": "panoptica"},
            "metrics": schema["metrics"]["items"]["enum"],
            "instance_metrics": schema["instance_metrics"]["items"]["enum"],
            "nsd_tolerances": [1.0],  # MONAI and DeepMind have no default
        }
        warm_up(Options.from_phase(Phase(root=Path("."), suite="segmentation", options=options)))
    topcow_results.warm_up_kernels()


def _missing(truth, files: dict) -> int:
    """Truth cases without a prediction: skipped, or scored as an empty prediction."""
    return len(truth) - len(files) + sum(f is None for f in files.values())


@register
class Segmentation(Suite):
    name = "segmentation"
    ranking = "score"  # the phase's ranking key, negated when lower is better
    higher_is_better = True

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[Cases]:
        options = Options.from_phase(phase)
        truth = truth_cases(phase, options)
        submitted = evaluation(options).predictions(options, submission.case_files(), truth)
        policy = options.missing_cases
        if policy == "penalty" and "brats_missing_rows" in options.corrections:  # the correction: scored as empty
            policy = "empty"
        cases = pair_cases(submitted, truth, policy)
        files = {c: submitted_file(submitted.get(c), submission.root) for c in cases}
        tasks = [
            Task(
                key=case,
                memory_bytes=memory_estimate(truth[case]),
                payload=case_task(case, truth[case], submitted.get(case), files[case], options),
            )
            for case in cases
        ]
        if not public.is_public(phase):  # a public phase is only checked: no kernel runs
            warm_up(options)
        _log.info("segmentation_plan", cases=len(cases), classes=len(options.classes))
        extra = evaluation(options).context(options, truth, cases, policy)
        context = Cases(options, files, tuple(sorted(truth)), _missing(truth, files), extra)
        return Plan(tasks=tasks, context=context, missing=[case for case in sorted(truth) if files.get(case) is None])

    def cases(self, plan: Plan[Cases]) -> list[str]:
        return list(plan.context.truth)

    def census(self, phase: Phase, plan: Plan[Cases], outcomes: dict[str, Outcome], result: Result) -> dict:
        scored, _ = aggregate.split(outcomes, {case: case for case in plan.context.files})
        return census.census(plan.context.options, scored)

    def restrict(self, plan: Plan[Cases], cases: set[str]) -> Plan[Cases]:
        truth = tuple(case for case in plan.context.truth if case in cases)
        files = {case: file for case, file in plan.context.files.items() if case in cases}
        context = dataclasses.replace(plan.context, truth=truth, files=files, missing=_missing(truth, files))
        return Plan([t for t in plan.tasks if t.key in cases], context)

    def definitions(self, phase: Phase) -> dict[str, dict]:
        options = Options.from_phase(phase)
        return evaluation(options).definitions(options)

    def score(self, payload: CaseTask) -> dict:
        return evaluation(payload.options).score(payload)

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, output)

    def check(self, payload: CaseTask) -> dict:
        return evaluation(payload.options).check(payload)

    def summarize(self, phase: Phase, plan: Plan[Cases], outcomes: dict[str, Outcome]) -> Result:
        return evaluation(plan.context.options).summarize(phase, plan, outcomes)
