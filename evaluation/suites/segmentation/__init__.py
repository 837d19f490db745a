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

from evaluation import log
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.errors import participant_file
from evaluation.phase import Phase, option_schemas
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.segmentation import aggregate, report
from evaluation.suites.segmentation.inputs import CaseTask, memory_estimate, pair_cases, truth_cases
from evaluation.suites.segmentation.options import LIBRARIES, Options, higher_is_better
from evaluation.suites.segmentation.scoring import score_case

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
        }
        warm_up(Options.from_phase(Phase(root=Path("."), suite="segmentation", options=options)))


@register
class Segmentation(Suite):
    name = "segmentation"
    ranking = "score"  # the phase's ranking key, negated when lower is better
    higher_is_better = True

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        truth = truth_cases(phase, options)
        submitted = submission.case_files()
        cases = pair_cases(submitted, truth, options.missing_cases)
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
        warm_up(options)
        _log.info("segmentation_plan", cases=len(cases), classes=len(options.classes))
        context = {
            "options": options,
            "files": files,
            "missing": len(truth) - len(cases) + sum(f is None for f in files.values()),
        }
        return Plan(tasks=tasks, context=context)

    def score(self, payload: CaseTask) -> dict:
        with participant_file():
            return score_case(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        options, files = plan.context["options"], plan.context["files"]
        scored, failed = aggregate.split(outcomes, {case: case for case in files})
        keys = options.keys()
        summary = aggregate.summarize(options, scored, keys)
        score = aggregate.ranking_score(options, summary["overall"])
        cases = {
            case: {
                "status": "scored",
                "prediction_file": files[case],
                "spacing": value["spacing"],
                "classes": value["classes"],
                **({"multiclass": value["multiclass"]} if "multiclass" in value else {}),
            }
            for case, value in scored.items()
        }
        cases.update(
            {case: {"status": "failed", "error": message, "prediction_file": files[case]} for case, message in failed.items()}
        )
        metrics = {
            "case": dict(sorted(cases.items())),
            "aggregates": {
                **summary,
                "score": score,
                "n_cases": len(scored),
                "n_failed": len(failed),
                "n_missing": plan.context["missing"],
                "ranking": {
                    "key": options.ranking,
                    "statistic": options.ranking_statistic,
                    "higher_is_better": higher_is_better(options.ranking),
                },
            },
            "reference": {"definitions": options.definitions, "libraries": REFERENCE},
        }
        out = {
            "cases.csv": report.cases_csv(options, scored, keys),
            "report.html": report.html_report(options, scored, failed, summary, keys, score),
        }
        if options.instance_evaluation:
            out["instances.json"] = {case: value["instances"] for case, value in sorted(scored.items())}
        return Result(
            metrics=metrics,
            leaderboard=aggregate.leaderboard(options, summary, score),
            case_scores=aggregate.case_scores(options, scored),
            files=out,
        )
