"""One grading pipeline: take in the upload as the platform hands it over, plan, execute,
summarize, document.

Every command that grades goes through these steps: the command line (``cli``), the
preflight (``check``, which executes each task's ``Suite.check`` instead of ``score``),
``rescore`` (whose executor is a Dask cluster) and the invoke server (whose child is the
command line). They differ only in the executor and in what they write, so an upload is
taken in, planned, blamed, summarized and documented the same way by each.

Whose fault a failure is, is decided here once. A suite raises ``errors.Unusable`` for any
file it cannot use; its reads of the ground truth say that they are the organizer's
(``organizer_file``: a broken phase); every other refusal in ``plan``, ``score`` and ``check``
is about the participant's files, and is assigned to them here (``participant_file``).
"""

import dataclasses
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluation import machine, provenance, report, runner, sealed
from evaluation import progress as progresses
from evaluation.contract import Outcome, Plan, Resources, Suite
from evaluation.errors import participant_file
from evaluation.phase import Phase, with_options
from evaluation.platforms import Platform
from evaluation.submission import Submission


@dataclass(frozen=True)
class Graded:
    """What grading a submission gave: the plan, each task's outcome in the plan's order, the
    public (and private) summaries, the resources it had and the additional inputs the
    participant gave (None when the phase declares none)."""

    plan: Plan
    outcomes: dict[str, Outcome]
    summaries: sealed.Summaries
    resources: Resources
    given_inputs: dict | None


# Of the run's time limit, what is kept for summarizing and writing after scoring stops.
WRITING_SHARE, WRITING_MIN_S = 0.05, 15.0


def run_time_limit(phase: Phase, platform: Platform | None) -> float | None:
    """The platform's time limit for the whole run: the phase's, else the platform's own."""
    return phase.option("run_time_limit_s") or (platform.time_limit_s if platform is not None else None)


def resources(phase: Phase, workers: int | None = None, platform: Platform | None = None) -> Resources:
    """What the run may use: the command line's or the phase's workers, the phase's memory
    limit and case time limit, within the process's own limits; and when scoring must end, so
    that the run is written before the platform's clock ends it."""
    given = Resources.detect(
        workers or phase.option("workers"),
        (phase.option("memory_limit_mb") or 0) * 1024**2,
        phase.option("case_time_limit_s"),
    )
    limit = run_time_limit(phase, platform)
    if limit is None:
        return given
    writing = max(WRITING_MIN_S, WRITING_SHARE * limit)
    return dataclasses.replace(given, deadline=time.monotonic() - machine.running_seconds() + limit - writing)


def take_in(platform: Platform, phase: Phase, scratch: Path, given: Resources) -> tuple[Submission, dict | None]:
    """The upload as the suite reads it, and the phase's additional inputs
    (``Platform.intake``: platform files set aside, archives unpacked, memory refused)."""
    return platform.intake(phase, scratch, given)


def plan(suite: Suite, submission: Submission, phase: Phase, given: Resources) -> Plan:
    """The suite's plan; a refusal of the upload's files is the participant's."""
    with participant_file():
        return suite.plan(submission, phase, given)


class Blamed:
    """A suite's ``score`` or ``check``, with a refusal assigned to the participant: what a
    worker runs for each task (picklable, for Dask: the suite by name)."""

    def __init__(self, suite: Suite, step: str):
        self.suite, self.step = suite, step

    def __call__(self, payload):
        with participant_file():
            return getattr(self.suite, self.step)(payload)


def scoring(suite: Suite) -> Callable:
    return Blamed(suite, "score")


def checking(suite: Suite) -> Callable:
    return Blamed(suite, "check")


def execute(plan_: Plan, function: Callable, given: Resources, what: str = "scoring") -> dict[str, Outcome]:
    """Every task's outcome, in the plan's order, from forked workers within ``given``."""
    outcomes = runner.run(plan_.tasks, function, given, progress=progresses.at_terminal(what))
    return {task.key: outcomes[task.key] for task in plan_.tasks}


def grade(platform: Platform, phase: Phase, suite: Suite, workers: int | None = None) -> Graded:
    """Take in, plan, score and summarize the platform's upload; the scratch space it was
    unpacked into is gone when this returns."""
    given = resources(phase, workers, platform)
    with tempfile.TemporaryDirectory(prefix="evaluation-") as scratch:
        submission, given_inputs = take_in(platform, phase, Path(scratch), given)
        planned = plan(suite, submission, phase, given)
        outcomes = execute(planned, scoring(suite), given)
        summaries = sealed.summarize(suite, reporting(phase, outcomes), planned, outcomes)
    return Graded(planned, outcomes, summaries, given, given_inputs)


def reporting(phase: Phase, outcomes: dict[str, Outcome]) -> Phase:
    """The phase to summarize with: a refused upload (exit 2) gets no rendered report, which
    would only repeat the error and cost its time, unless the phase says ``report: always``."""
    refused = any(outcome.kind == "submission" for outcome in outcomes.values())
    if refused and phase.option("report") is True:
        return with_options(phase, {"report": False})
    return phase


def stopped_at_deadline(graded: Graded) -> list[Outcome]:
    """The tasks the run's time limit stopped or never started."""
    return [outcome for outcome in graded.outcomes.values() if outcome.kind == "deadline"]


def in_time(suite: Suite, phase: Phase, graded: Graded) -> Graded:
    """The run as if the phase held only the cases all of whose tasks ended before the run's
    time limit (a partial result: the others are listed as failures, not scored as empty)."""
    late = {suite.case_of(task) for task in graded.plan.tasks if graded.outcomes[task.key].kind == "deadline"}
    kept = suite.restrict(graded.plan, set(suite.cases(graded.plan)) - late)
    summaries = sealed.summarize(
        suite, reporting(phase, graded.outcomes), kept, {task.key: graded.outcomes[task.key] for task in kept.tasks}
    )
    return dataclasses.replace(graded, summaries=summaries)


def provenance_of(phase: Phase, suite: Suite, summaries: sealed.Summaries, fingerprint: dict) -> Callable[[bool], dict]:
    """``made_by(for_participants)``: the provenance of this result, for metrics.json (what a
    platform may show) or for the organizer's files."""
    reference = summaries.public.metrics.get("reference")
    definitions = suite.definitions(phase)
    return lambda for_participants: provenance.document(phase, suite, definitions, reference, fingerprint, for_participants)


def metrics_document(
    suite: Suite,
    outcomes: dict[str, Outcome],
    summaries: sealed.Summaries,
    made_by: Callable[[bool], dict],
    publish_cases: bool,
    given_inputs: dict | None = None,
) -> dict:
    """metrics.json: the public summary, every failure in the plan's order (a private case's
    reads as any other's), the provenance participants may see, the additional inputs."""
    document = report.metrics_document(suite.name, summaries.public, outcomes, publish_cases, made_by(True))
    if given_inputs is not None:
        document["additional_inputs"] = given_inputs
    return document


def private_document(suite: Suite, summaries: sealed.Summaries, made_by: Callable[[bool], dict]) -> dict | None:
    """The private cases' result, whole, for the organizer (None without private cases)."""
    if summaries.private is None:
        return None
    return sealed.private_document(suite, summaries, made_by(False))
