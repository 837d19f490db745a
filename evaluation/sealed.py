"""Sealed private scores: one upload scored on a public and a private subset of the cases.

The phase names its private cases (``private_cases``: a list, or a seeded fraction of the
truth's cases). Every case is scored once; the suite then summarises the public cases alone
(metrics.json, scores.json, the report files: everything a participant may see) and the
private cases alone. The private result goes into one file, ``PRIVATE_RESULTS_FILE``, written
by ``write_private`` into the folder the platform gives for it (``Platform.private_output``):
the output folder of a local run and of ``rescore``, nowhere on Grand-Challenge or CodaBench,
which show every output to the participant (Grand-Challenge's ``evaluation_detail.html``;
CodaBench's compute_worker.py ``push_output`` zips the output folder as the scoring result):
there the organizer re-scores the uploads with ``rescore`` for the final ranking. ``rescore``
and ``rank`` make the private leaderboard from these files.
"""

import random
from dataclasses import dataclass, field
from pathlib import Path

from evaluation import report
from evaluation.contract import Outcome, Plan, Result, Suite
from evaluation.errors import PhaseError

PRIVATE_RESULTS_FILE = "private-results.json"  # the one file that holds private values


@dataclass
class Summaries:
    """The public result (what participants see) and, with private cases, the private one."""

    public: Result
    public_outcomes: dict[str, Outcome]
    private: Result | None = None
    private_outcomes: dict[str, Outcome] = field(default_factory=dict)
    private_cases: list[str] = field(default_factory=list)

    @property
    def outcomes(self) -> dict[str, Outcome]:
        return {**self.public_outcomes, **self.private_outcomes}


def private_cases(option: dict | None, universe: list[str]) -> list[str]:
    """The phase's private cases among the truth's (``universe``): the ones listed, or
    ``round(fraction * cases)`` drawn with ``random.Random(seed)`` from the sorted case names
    (the same for every submission, whatever it holds)."""
    if not option:
        return []
    cases = sorted(universe)
    if "cases" in option:
        unknown = sorted(set(option["cases"]) - set(cases))
        if unknown:
            raise PhaseError(f"private_cases names cases the truth does not hold: {', '.join(unknown[:5])}")
        chosen = set(option["cases"])
    else:
        chosen = set(random.Random(option.get("seed", 0)).sample(cases, round(option["fraction"] * len(cases))))
    if chosen and len(chosen) == len(cases):
        raise PhaseError("private_cases takes every case: the public leaderboard would have none")
    return [case for case in cases if case in chosen]


def summarize(suite: Suite, phase, plan: Plan, outcomes: dict[str, Outcome]) -> Summaries:
    """The suite's summaries of the public and of the private cases (one, without private cases)."""
    private = private_cases(phase.option("private_cases"), suite.cases(plan))
    if not private:
        return Summaries(_summarize(suite, phase, plan, outcomes), outcomes)
    everything = set(suite.cases(plan))
    public_plan = suite.restrict(plan, everything - set(private))
    private_plan = suite.restrict(plan, set(private))
    public_outcomes = {t.key: outcomes[t.key] for t in public_plan.tasks}
    private_outcomes = {t.key: outcomes[t.key] for t in private_plan.tasks if t.key not in public_outcomes}
    return Summaries(
        public=_summarize(suite, phase, public_plan, public_outcomes),
        public_outcomes=public_outcomes,
        private=_summarize(suite, phase, private_plan, {t.key: outcomes[t.key] for t in private_plan.tasks}),
        private_outcomes=private_outcomes,
        private_cases=private,
    )


def _summarize(suite: Suite, phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
    result = suite.summarize(phase, plan, outcomes)
    result.census = suite.census(phase, plan, outcomes, result)
    return result


def private_document(suite: Suite, summaries: Summaries, provenance: dict) -> dict:
    """The private result, whole: the organizer's alone."""
    result = summaries.private
    failures = [o for o in summaries.private_outcomes.values() if not o.ok]
    return {
        "suite": suite.name,
        "private_cases": summaries.private_cases,
        "leaderboard": result.leaderboard,
        "case_scores": result.case_scores,
        "case": result.metrics.get("case", {}),
        "aggregates": {**result.metrics.get("aggregates", {}), "ranking_ci": report.ranking_interval(result.case_scores)},
        **({"census": result.census} if result.census is not None else {}),
        "failures": [{"case": o.key, "kind": o.kind, "message": o.message} for o in failures],
        "provenance": provenance,
    }


def write_private(folder: Path | None, document: dict) -> Path | None:
    """Write the private result as ``PRIVATE_RESULTS_FILE`` in ``folder`` (None: the platform
    has no place participants cannot see; nothing is written)."""
    if folder is None:
        return None
    path = folder / PRIVATE_RESULTS_FILE
    report.write_atomic(path, report.json_bytes(document, listing_infinities=True))
    return path
