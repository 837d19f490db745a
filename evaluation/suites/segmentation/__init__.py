"""Generic segmentation metrics for any challenge, each family computed exactly as a chosen
library computes it.

The phase lists the classes (label ids, or regions: unions of labels), the metrics and, per
metric family, whose definition to follow: panoptica (BrainLesion/panoptica 2.1.7),
MetricsReloaded (Project-MONAI/MetricsReloaded@cb38dfc), MONAI (monai.metrics 1.6.1) or
DeepMind's surface-distance (google-deepmind/surface-distance@1f805ce). The libraries disagree
on the surface, the percentile, the mean, the tolerance, the matching and on empty masks;
docs/suites/segmentation.md sets them side by side. Each case is one task; the distances of a
(case, class) are measured once and every distance metric is reduced from them.
"""

import os
from pathlib import Path

from evaluation import log, public
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.errors import participant_file
from evaluation.phase import Phase, option_schemas
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.segmentation import aggregate, census, inputs, provenance, report
from evaluation.suites.segmentation.inputs import CaseTask, memory_estimate, pair_cases, truth_cases
from evaluation.suites.segmentation.options import LIBRARIES, Options
from evaluation.suites.segmentation.scoring import check_case, score_case

_log = log.get(__name__)

REFERENCE = {
    "panoptica": "BrainLesion/panoptica 2.1.7 (metric code as at b0ac3e4)",
    "metricsreloaded": "Project-MONAI/MetricsReloaded@cb38dfc0a5ed4fa3bdc559e4960b6e2b93c3b967",
    "monai": "Project-MONAI/MONAI 1.6.1 (monai.metrics)",
    "deepmind": "google-deepmind/surface-distance@1f805cea446805e559badc80dd27f34175e4173d",
}


def warm_up(options: Options) -> None:
    """Compile (or load from numba's cache) the kernels this phase uses, once in the parent,
    by scoring a tiny 2-D and 3-D case, so the forked workers do not each pay for it."""
    import numpy as np

    if options.mode is not None:  # issue 23
        from evaluation.suites.segmentation import mode_results

        return mode_results.warm_up(options)

    from evaluation.metrics import grouped, instance_pairs, jit, nearest
    from evaluation.suites.segmentation import scoring
    from evaluation.suites.segmentation.scoring import score_arrays

    labels = options.label_ids or (1,)

    def compile_all():
        for shape in ((6, 7), (5, 6, 7)):
            truth = np.zeros(shape, np.uint8)
            truth[(slice(1, 4),) * len(shape)] = labels[0]
            score_arrays(truth, np.roll(truth, 1, axis=-1), (1.0,) * len(shape), options)

    modules = [m.__file__ for m in (scoring, nearest, grouped, instance_pairs)]
    jit.warm_up("segmentation metrics", compile_all, modules, equivalents=False)


def warm_up_every_definition() -> None:
    """``warm_up`` with every metric of every library: the image build calls it, so that a
    container, whose install is read-only, does not compile the kernels in every run (5 s).
    DeepMind's surface-distance has no instance evaluation: its phase takes panoptica's."""
    schema = option_schemas("segmentation")
    for library in LIBRARIES:
        options = {
            "classes": [1],
            "definition": library,
            "definitions": {"instances": "panoptica"} if library == "deepmind" else {},
            "metrics": schema["metrics"]["items"]["enum"],
            "instance_metrics": schema["instance_metrics"]["items"]["enum"],
            "nsd_tolerances": [1.0],  # MONAI and DeepMind have no default
        }
        warm_up(Options.from_phase(Phase(root=Path("."), suite="segmentation", options=options)))


def _missing(truth, files: dict) -> int:
    """Truth cases without a prediction: skipped, or scored as an empty prediction."""
    return len(truth) - len(files) + sum(f is None for f in files.values())


@register
class Segmentation(Suite):
    name = "segmentation"
    ranking = "score"  # the phase's ranking key, negated when lower is better
    higher_is_better = True

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        truth = truth_cases(phase, options)
        submitted = submission.case_files()
        policy = options.missing_cases
        if policy == "penalty" and "brats_missing_rows" in options.corrections:  # issue 23: scored as empty instead
            policy = "empty"
        cases = pair_cases(submitted, truth, policy)
        files = {c: (os.path.relpath(submitted[c], submission.root) if c in submitted else None) for c in cases}
        tasks = [
            Task(
                key=case,
                memory_bytes=memory_estimate(truth[case]),
                payload=CaseTask(
                    case=case,
                    truth=str(truth[case]),
                    prediction=str(submitted[case]) if case in submitted else None,
                    display=files[case] or case,
                    options=options,
                ),
            )
            for case in cases
        ]
        if not public.is_public(phase):  # a public phase is only checked: no kernel runs
            warm_up(options)
        _log.info("segmentation_plan", cases=len(cases), classes=len(options.classes))
        context = {
            "options": options,
            "files": files,
            "truth": sorted(truth),
            "missing": _missing(truth, files),
            # issue 23: BraTS_evaluation's table names rows by truth file and penalises missing cases
            "truth_files": {case: path.name for case, path in truth.items()},
            "missing_names": sorted(set(truth) - set(cases)) if policy == "penalty" else [],
        }
        return Plan(tasks=tasks, context=context, missing=[case for case in sorted(truth) if files.get(case) is None])

    def cases(self, plan: Plan) -> list[str]:
        return list(plan.context["truth"])

    def census(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome], result: Result) -> dict:
        options = plan.context["options"]
        scored, _ = aggregate.split(outcomes, {case: case for case in plan.context["files"]})
        return census.census(options, scored)

    def restrict(self, plan: Plan, cases: set[str]) -> Plan:
        truth = [case for case in plan.context["truth"] if case in cases]
        files = {case: file for case, file in plan.context["files"].items() if case in cases}
        context = {**plan.context, "truth": truth, "files": files, "missing": _missing(truth, files)}
        return Plan([t for t in plan.tasks if t.key in cases], context)

    def definitions(self, phase: Phase) -> dict[str, dict]:
        """Each key's source as ``reference.definitions`` gives it (``provenance.sources``: the
        library that returns the very value, ``suite`` or ``none``); a whole evaluation's keys
        all come from its reference."""
        options = Options.from_phase(phase)
        if options.mode is not None:
            from evaluation.suites.segmentation import modes

            source = {"source": "library", "library": modes.REFERENCES[options.mode.kind]}
            return dict.fromkeys(options.mode.keys(), source)
        found = {}
        for key, source in provenance.sources(options).items():
            entry = {"source": "suite" if source in ("suite", "none") else "library"}
            if source in REFERENCE:
                entry["library"] = REFERENCE[source]
            found[key] = entry
        return found

    def score(self, payload: CaseTask) -> dict:
        with participant_file():
            if payload.options.mode is not None:  # issue 23: a whole evaluation (panoptica's configuration, a BraTS preset)
                from evaluation.suites.segmentation import mode_results

                return mode_results.score_case(payload)
            return score_case(payload)

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, output)

    def check(self, payload: CaseTask) -> dict:
        with participant_file():
            return check_case(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        options, files = plan.context["options"], plan.context["files"]
        if options.mode is not None:  # issue 23: a whole evaluation's own summary
            from evaluation.suites.segmentation import mode_results

            return mode_results.summarize(options, plan, outcomes, phase.option("report"))
        scored, failed = aggregate.split(outcomes, {case: case for case in files})
        keys = options.keys()
        summary = aggregate.summarize(options, scored, keys)
        score = aggregate.ranking_score(options, summary["overall"])
        metrics = {
            "case": aggregate.case_entries(files, scored, failed),
            "aggregates": aggregate.aggregates(options, summary, score, scored, failed, plan.context["missing"]),
            "reference": {**provenance.reference(options), "libraries": REFERENCE},
        }
        out = {"cases.csv": report.cases_csv(options, scored, keys)}
        if phase.option("report"):  # report: false renders nothing
            out["report.html"] = report.html_report(options, scored, failed, summary, keys, score)
        if options.instance_evaluation:
            from evaluation.suites.segmentation import instance_detail  # issue 23: lesion-level detail

            out["instances.json"] = {
                case: {cls: {k: v for k, v in found.items() if k != "coco"} for cls, found in value["instances"].items()}
                for case, value in sorted(scored.items())
            }
            out["instances.csv"] = instance_detail.instances_csv(scored)
            if {"ap", "size_bins"} & set(options.instance_metrics):
                metrics["aggregates"]["instances_pooled"] = instance_detail.pooled(options, scored)
        return Result(
            metrics=metrics,
            leaderboard=aggregate.leaderboard(options, summary, score),
            case_scores=aggregate.case_scores(options, scored),
            files=out,
        )
