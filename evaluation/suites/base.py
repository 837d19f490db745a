"""The contract between the grader core and a metric suite."""

import importlib
from dataclasses import dataclass, field
from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.submission import Submission


@dataclass(frozen=True)
class Task:
    """One independently scored unit (a case, or a (crop, label) pair).

    ``payload`` holds only JSON-able values (paths as strings), so a task can be sent to any
    worker process; ``memory_bytes`` is the scheduler's estimate of its peak. A task with a
    ``refusal`` is not run: it fails as the submission's fault with that message."""

    key: str
    payload: dict
    memory_bytes: int = 0
    refusal: str | None = None  # set by plan() when the metadata already shows it cannot be scored


@dataclass
class Plan:
    tasks: list[Task]
    context: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What became of one task: its value, or why it failed.

    ``kind`` is 'submission' (the participant's data is unusable), 'internal' (a bug or a
    broken phase), 'timeout' or 'crashed' (the worker died, e.g. killed for memory)."""

    key: str
    value: dict | None = None
    kind: str | None = None
    message: str | None = None
    seconds: float = 0.0
    peak_rss_mb: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None


@dataclass
class Report:
    """The suite's result.

    ``metrics`` becomes metrics.json (``case`` + ``aggregates``, the reference's key names).
    ``leaderboard`` is the flat {column key: number} a platform ranks by (CodaBench's
    scores.json); it contains the suite's ``ranking`` key. ``case_scores`` is one number per
    case on the ranking score's scale (for ranking uncertainty: bootstrap over cases).
    ``files`` are further outputs written beside metrics.json: a dict is written as JSON, a
    str as text, bytes as they are (reports, CSV tables, plots)."""

    metrics: dict
    leaderboard: dict[str, float] = field(default_factory=dict)
    case_scores: dict[str, float] = field(default_factory=dict)
    files: dict[str, dict | str | bytes] = field(default_factory=dict)


class Suite:
    name: str = ""
    ranking: str = ""  # the leaderboard key submissions are ranked by
    higher_is_better: bool = True

    def plan(self, submission: Submission, phase: Phase) -> Plan:
        raise NotImplementedError

    def score(self, payload: dict) -> dict:
        """Runs in a worker process; must depend on ``payload`` (and the files it names) only."""
        raise NotImplementedError

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Report:
        raise NotImplementedError


_REGISTRY: dict[str, Suite] = {}


def register(cls: type[Suite]) -> type[Suite]:
    _REGISTRY[cls.name] = cls()
    return cls


def names() -> list[str]:
    """The suites a phase may name."""
    from evaluation import schemas

    return sorted(schemas.load("phase")["properties"]["suite"]["enum"])


def get(name: str) -> Suite:
    """The suite ``name``, importing its module ``evaluation.suites.<name>`` on first use."""
    if name not in _REGISTRY and name in names():
        importlib.import_module(f"evaluation.suites.{name}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PhaseError(f"unknown suite {name!r}; available: {', '.join(names())}") from None
