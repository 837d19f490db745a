"""The evaluation of a phase that lists its metrics (``metrics``, ``instance_metrics``): each
case scored by ``scoring`` (every metric as its family's definition computes it), the suite's
statistics, cases.csv, the report and the instance detail (the ``evaluations.Evaluation``
protocol, as module functions).
"""

import numpy as np

from evaluation.contract import Result
from evaluation.metrics import grouped, instance_pairs, jit, nearest
from evaluation.suites.segmentation import aggregate, instance_detail, provenance, report, scoring
from evaluation.suites.segmentation.inputs import CaseTask
from evaluation.suites.segmentation.metrics_table import BY_DEFINITION, SOURCES
from evaluation.suites.segmentation.options import Options

REFERENCE = {name: definition.reference for name, definition in BY_DEFINITION.items()}


def warm_up(options: Options) -> None:
    """Scores a tiny 2-D and 3-D case with the phase's metrics (``evaluations.Evaluation``)."""
    labels = options.label_ids or (1,)

    def compile_all():
        for shape in ((6, 7), (5, 6, 7)):
            truth = np.zeros(shape, np.uint8)
            truth[(slice(1, 4),) * len(shape)] = labels[0]
            scoring.score_arrays(truth, np.roll(truth, 1, axis=-1), (1.0,) * len(shape), options)

    modules = [m.__file__ for m in (scoring, nearest, grouped, instance_pairs)]
    jit.warm_up("segmentation metrics", compile_all, modules, equivalents=False)


def predictions(options: Options, files: dict, truth: dict) -> dict:
    return files


def context(options: Options, truth: dict, cases: list[str], policy: str) -> dict:
    return {}


def score(task: CaseTask) -> dict:
    return scoring.score_case(task)


def check(task: CaseTask) -> dict:
    return scoring.check_case(task)


def summarize(phase, plan, outcomes) -> Result:
    options, files = plan.context.options, plan.context.files
    scored, failed = aggregate.split(outcomes, {case: case for case in files})
    keys = options.keys()
    summary = aggregate.summarize(options, scored, keys)
    score = aggregate.ranking_score(options, summary["overall"])
    metrics = {
        "case": aggregate.case_entries(files, scored, failed),
        "aggregates": aggregate.aggregates(options, summary, score, scored, failed, plan.context.missing),
        "reference": {**provenance.reference(options), "libraries": _libraries(options)},
    }
    out = {"cases.csv": report.cases_csv(options, scored, keys)}
    if phase.option("report"):  # report: false renders nothing
        out["report.html"] = report.html_report(options, scored, failed, summary, keys, score)
    if options.instance_evaluation:  # every matched pair and unmatched instance, the pooled detail
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


def _libraries(options: Options) -> dict[str, str]:
    """metrics.json ``reference.libraries``: every definition's reference, and the other
    sources (``metrics_table.SOURCES``) the phase's keys name."""
    named = set(provenance.sources(options).values())
    return {**REFERENCE, **{name: reference for name, reference in SOURCES.items() if name in named}}


def definitions(options: Options) -> dict[str, dict]:
    """Each key's source as ``reference.definitions`` gives it (``provenance.sources``: the
    library that returns the very value, ``suite`` or ``none``)."""
    found = {}
    for key, source in provenance.sources(options).items():
        entry = {"source": "suite" if source in ("suite", "none") else "library"}
        if source in REFERENCE or source in SOURCES:
            entry["library"] = REFERENCE.get(source) or SOURCES[source]
        found[key] = entry
    return found
