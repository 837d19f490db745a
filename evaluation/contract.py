"""The contract between the grader's core and its metric suites.

Everything above this module (the runner, the platforms, the command line, the organizer
tools, the suites themselves) speaks in these types; this module imports nothing of the
package but the phase, the submission's types and the machine probe, so no layer has to
import upward to learn them.

A suite turns (submission, phase, resources) into a ``Plan`` of independent ``Task``s, scores
one task's typed ``Payload`` in a worker process, and summarises the ``Outcome``s into a
``Result``: the metrics document, the leaderboard columns, a score per case and report files.
For the preflight (``python -m evaluation check``) it also writes what a participant may hold
of its phase (``publish``) and reads a task's submitted arrays without the truth (``check``);
``verdict`` turns the outcomes of either run into its exit status and last line.
"""

import dataclasses
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from evaluation import machine
from evaluation.errors import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_SUBMISSION,
    INTERNAL_ERROR_LINE,
    GraderError,
    SubmissionError,
    Unusable,
)

if TYPE_CHECKING:  # annotations only: the contract stays below the modules that build these
    from evaluation.phase import Phase
    from evaluation.submission import Submission

# Share of the memory limit given to workers; the rest is for the parent and the system.
MEMORY_HEADROOM = 0.8


@dataclass(frozen=True)
class Resources:
    """What one run may use: worker processes, memory for all workers together (each worker's
    data segment is also capped at it) and a time limit per task. Suites plan with it (how
    many threads a task may use, how to batch); the runner enforces it."""

    workers: int
    memory_bytes: int
    time_limit: float | None = None
    memory_limited_by: str = "ram"
    deadline: float | None = None  # time.monotonic() by which scoring must have ended (the run's limit, less writing)

    @classmethod
    def detect(
        cls, workers: int | None = None, memory_limit_bytes: int | None = None, time_limit: float | None = None
    ) -> "Resources":
        """From what this process can see (``machine.memory_limits``, ``machine.cpu_count``),
        lowered by the phase's or the command line's settings. Whichever limit is lowest sizes
        the budget and is named in ``memory_limited_by``: Grand-Challenge's shim has set
        ``RLIMIT_DATA`` (0.6-0.7); whether 0.8 still does is not visible in its published
        code, and a cgroup or the machine's RAM then takes its place."""
        limits = {**machine.memory_limits(), **({"phase": memory_limit_bytes} if memory_limit_bytes else {})}
        source = min(limits, key=lambda name: limits[name])
        return cls(
            workers=workers or machine.cpu_count(),
            memory_bytes=int(limits[source] * MEMORY_HEADROOM),
            time_limit=time_limit,
            memory_limited_by=source,
        )

    def threads_per_task(self, tasks: int) -> int:
        """Threads each of ``tasks`` concurrent tasks may use without oversubscribing the CPUs."""
        return max(1, self.workers // max(1, tasks))


class Payload:
    """Base of the suites' typed task payloads (frozen dataclasses of JSON-able values and
    paths). A payload reaches its worker as it is (forked, or pickled by Dask for the
    organizer's rescore); ``to_dict`` is its stable JSON form, for fingerprints and logs."""

    def to_dict(self) -> dict[str, Any]:
        fields: dict[str, Any] = _jsonable(dataclasses.asdict(self))  # type: ignore[call-overload]  # subclasses are dataclasses
        return fields


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value) if isinstance(value, Path) else value


@dataclass(frozen=True)
class Task:
    """One independently scored unit (a case, or a (crop, label) pair).

    ``memory_bytes`` is the scheduler's estimate of its peak; ``phase_memory_bytes`` the part of
    it the phase imposes, the estimate for the smallest prediction the task accepts (None: all
    of it, when the estimate follows the truth alone), so that a task too large for the machine
    is refused as the participant's fault only if a smaller prediction would fit. A task with a
    ``refusal`` is not run: it fails as the submission's fault with that message."""

    key: str
    payload: Payload
    memory_bytes: int = 0
    refusal: str | None = None  # set by plan() when the metadata already shows it cannot be scored
    phase_memory_bytes: int | None = None


Context = TypeVar("Context")


@dataclass
class Plan(Generic[Context]):
    """The tasks, what ``summarize`` needs besides their outcomes (``context``: each suite's
    own frozen dataclass, or None when it needs nothing), and the cases the submission holds no
    prediction for (``missing``: scored as the phase's policy says, empty or left out; the
    preflight lists them)."""

    tasks: list[Task]
    context: Context = None  # type: ignore[assignment]  # a suite without context leaves it None
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What became of one task: its value, or why it failed.

    ``kind`` is 'submission' (the participant's data is unusable), 'internal' (a bug or a
    broken phase), 'timeout' (past the case time limit), 'deadline' (stopped, or never
    started, at the run's time limit) or 'crashed' (the worker died, e.g. killed for memory)."""

    key: str
    value: dict[str, Any] | None = None
    kind: str | None = None
    message: str | None = None
    seconds: float = 0.0
    peak_rss_mb: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None


def failure(key: str, exc: BaseException, memory_cap: int | None = None) -> dict[str, Any]:
    """The one map from an exception raised while scoring ``key`` to an outcome's fields
    (``kind``, ``message``, and for bugs ``traceback``), for the runner and for rescore."""
    if isinstance(exc, MemoryError):
        available = f"the {memory_cap / 2**30:.1f} GiB of memory" if memory_cap else "the memory"
        return {
            "kind": "submission",
            "message": (
                f"{key}: scoring it needed more than {available} available; submit smaller arrays (fewer voxels or a smaller data type)"
            ),
        }
    if isinstance(exc, GraderError):
        return {"kind": "submission" if isinstance(exc, SubmissionError) else "internal", "message": str(exc)}
    if isinstance(exc, Unusable):  # a reader's refusal that no intake assigned to anyone: our bug
        return {
            "kind": "internal",
            "message": f"a refusal reached the runner without an owner: {exc}",
            "traceback": "".join(traceback.format_exception(exc)),
        }
    return {"kind": "internal", "message": f"{type(exc).__name__}: {exc}", "traceback": "".join(traceback.format_exception(exc))}


def verdict(tasks: list[Task], outcomes: dict[str, "Outcome"], organizer: bool = False) -> tuple[int, str | None]:
    """The exit status of a run and the participant's last line (None when every task
    succeeded), from its outcomes taken in the plan's order, so that the line does not depend
    on which worker finished first: grading and the preflight end alike. Any failure that is
    not the submission's is an internal error, with a neutral line, or, in the ``organizer``'s
    own run (the local platform), the first such failure. A private case's failure reads as
    any other's (``sealed``): failing tells nothing of which cases are private."""
    failures = [outcomes[t.key] for t in tasks if not outcomes[t.key].ok]
    if not failures:
        return EXIT_OK, None
    ours = [f for f in failures if f.kind != "submission"]
    if ours:
        return (
            EXIT_INTERNAL,
            f"Case {ours[0].key} failed ({ours[0].kind}): {ours[0].message}" if organizer else INTERNAL_ERROR_LINE,
        )
    more = f" (and {len(failures) - 1} more problem(s); every case is listed in metrics.json)" if len(failures) > 1 else ""
    return EXIT_SUBMISSION, f"Submission rejected: {failures[0].message}{more}"


@dataclass
class Result:
    """What a suite makes of its outcomes.

    ``metrics`` becomes metrics.json (``case`` + ``aggregates``, the reference's key names).
    ``leaderboard`` is the flat {column key: number} a platform ranks by (CodaBench's
    scores.json); it contains the suite's ``ranking`` key. ``case_scores`` is one number per
    case on the ranking score's scale (for ranking uncertainty: bootstrap over cases).
    ``files`` are further outputs written beside metrics.json: a dict is written as JSON, a
    str as text, bytes as they are (reports, CSV tables, plots)."""

    metrics: dict[str, Any]
    leaderboard: dict[str, float] = field(default_factory=dict)
    case_scores: dict[str, float] = field(default_factory=dict)
    files: dict[str, dict[str, Any] | str | bytes] = field(default_factory=dict)
    census: dict[str, Any] | None = None  # set from Suite.census: metrics.json's ``census``


class Suite:
    """A metric suite: one per challenge, registered by name (``evaluation.suites``)."""

    name: ClassVar[str] = ""
    ranking: ClassVar[str] = ""  # the leaderboard key submissions are ranked by
    higher_is_better: ClassVar[bool] = True

    def plan(self, submission: "Submission", phase: "Phase", resources: Resources) -> Plan[Any]:
        raise NotImplementedError

    def score(self, payload: Payload) -> dict[str, Any]:
        """Runs in a worker process; must depend on ``payload`` (and the files it names) only."""
        raise NotImplementedError

    def summarize(self, phase: "Phase", plan: Plan[Any], outcomes: dict[str, Outcome]) -> Result:
        raise NotImplementedError

    # A phase's private cases (``private_cases``) are scored with the others and summarised
    # apart: ``summarize`` on the plan restricted to the public cases, then to the private
    # ones. A case is what metrics.json's ``case`` is keyed by.

    def case_of(self, task: Task) -> str:
        """The case ``task`` scores (by default its key: one task per case)."""
        return task.key

    def cases(self, plan: Plan[Any]) -> list[str]:
        """Every case of the phase's truth in ``plan``, scored or not: what ``private_cases``
        chooses from (a suite whose plan also holds cases without a task overrides this)."""
        return sorted({self.case_of(task) for task in plan.tasks})

    def restrict(self, plan: Plan[Any], cases: set[str]) -> Plan[Any]:
        """``plan`` as if the truth held only ``cases``: the tasks of those cases (a suite whose
        context also lists cases overrides this)."""
        return Plan([task for task in plan.tasks if self.case_of(task) in cases], plan.context)

    def census(self, phase: "Phase", plan: Plan[Any], outcomes: dict[str, Outcome], result: Result) -> dict[str, Any] | None:
        """How many cases hit each empty-mask / undefined-value rule, and the leaderboard
        value under each alternative policy the suite offers that the outcomes determine
        (``census``); None when the suite has no such rule."""
        return None

    def definitions(self, phase: "Phase") -> dict[str, dict[str, Any]]:
        """Where each leaderboard metric's definition comes from, for the results' provenance:
        ``{metric: {"source": "reference" | "library" | "suite", ...}}`` with the repository
        and commit (or library and version) and the function that defines it."""
        return {}

    def publish(self, phase: "Phase", output: Path) -> None:
        """Write into ``output`` what the public phase holds of this phase besides
        ``phase.yaml``: what ``plan`` needs, never a voxel of ground truth nor a value derived
        from one (``evaluation.public``)."""
        raise NotImplementedError

    def check(self, payload: Payload) -> dict[str, Any]:
        """Runs in a worker, on a plan of the public phase: read and decode what ``score``
        reads of the submission, through the same functions and with the same checks, but no
        ground truth; ``{"seconds": ...}`` estimates what scoring the task takes."""
        raise NotImplementedError


def census(
    unit: str,
    rules: dict[str, int],
    ranking: str,
    alternatives: dict[str, tuple[object, dict[str, Any]]] | None = None,
    units: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """A suite's census in the one shape metrics.json has: ``rules`` counts ``unit``s (cases,
    (case, class) pairs, ...) per rule, and ``units`` names them where a rule changes what a
    unit contributes; ``alternatives`` maps each policy option to the value in force and the
    leaderboard value (``ranking``) under each of its values."""
    return {
        "unit": unit,
        "rules": dict(rules),
        "ranking": ranking,
        "alternatives": {
            option: {"in_force": in_force, "values": values} for option, (in_force, values) in (alternatives or {}).items()
        },
        **({"units": {rule: list(names) for rule, names in units.items()}} if units else {}),
    }
