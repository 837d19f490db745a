"""The phase's ``final_ranking``: which metrics, in which direction, by which method.

Every default is the schema's (``schemas/phase.schema.json``: ``final_ranking`` and
``$defs/ranking_method``); this module only reads them. The phase comes from ``--phase``, else
from the ``phase`` a ``rescore`` output folder records, else the schema's defaults alone.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from evaluation import phase as phases
from evaluation import schemas
from evaluation.errors import GraderError, PhaseError
from evaluation.organizer.ranking.methods import Method

OPTION = "final_ranking"
CASE_SCORE = "case_score"


@dataclass(frozen=True)
class Metric:
    key: str  # "case_score" or a dotted path, "*" matching one level
    higher_is_better: bool | None  # None: the suite's recorded direction (case_score)


@dataclass(frozen=True)
class Spec:
    """The resolved ``final_ranking`` option."""

    metrics: tuple[Metric, ...]
    combine: str
    method: Method
    na_treat: float | str | None
    without_values: str  # with na.rm, a submission left without values: "drop" (challengeR) or "last"
    compare: tuple[Method, ...]
    resamples: int
    seed: int
    confidence: float
    sensitivity: dict
    source: str  # where the phase came from

    def to_dict(self) -> dict:
        return {
            "metrics": [{"key": m.key, "higher_is_better": m.higher_is_better} for m in self.metrics],
            "combine": self.combine,
            "method": method_dict(self.method),
            "na_treat": self.na_treat,
            "without_values": self.without_values,
            "compare": [method_dict(m) for m in self.compare],
            "resamples": self.resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "phase": self.source,
        }


def method_dict(method: Method) -> dict:
    found = {"method": method.kind, "ties": method.ties}
    if method.kind == "test_then_rank":
        return {**found, "alpha": method.alpha, "p_adjust": method.p_adjust}
    return {**found, "statistic": method.statistic}


def _defaults(schema: dict) -> dict:
    return {name: spec["default"] for name, spec in schema["properties"].items() if "default" in spec}


def _method(configured: dict) -> Method:
    item = {**_defaults(schemas.load("phase")["$defs"]["ranking_method"]), **configured}
    return Method(item["method"], item["statistic"], item["ties"], item["alpha"], item["p_adjust"])


def resolve(configured: dict | None, source: str = "schema defaults") -> Spec:
    """The spec from a ``final_ranking`` mapping (validated by the phase schema), defaults
    filled in from the schema."""
    option = {**_defaults(schemas.load("phase")["properties"][OPTION]), **(configured or {})}
    metrics = tuple(Metric(m["key"], m.get("higher_is_better")) for m in option["metrics"])
    for metric in metrics:
        if metric.key != CASE_SCORE and metric.higher_is_better is None:
            raise PhaseError(f"{OPTION}: metric {metric.key!r} needs higher_is_better (true or false)")
    method = Method(option["method"], option["statistic"], option["ties"], option["alpha"], option["p_adjust"])
    if option["combine"] == "cases" and len(metrics) > 1 and method.kind != "rank_then_aggregate":
        raise PhaseError(
            f"{OPTION}: combine 'cases' pools different metrics' values; only rank_then_aggregate ranks them "
            f"(method is {method.kind})"
        )
    return Spec(
        metrics=metrics,
        combine=option["combine"],
        method=method,
        na_treat=option["na_treat"],
        without_values=option["without_values"],
        compare=tuple(_method(m) for m in option["compare"]),
        resamples=option["resamples"],
        seed=option["seed"],
        confidence=option["confidence"],
        sensitivity={
            **_defaults(schemas.load("phase")["properties"][OPTION]["properties"]["sensitivity"]),
            **option["sensitivity"],
        },
        source=source,
    )


def from_phase(phase: phases.Phase) -> Spec:
    return resolve(phase.option(OPTION), str(phase.root / phases.PHASE_FILE))


def find_phase(explicit: Path | None, inputs: list[Path]) -> Spec:
    """The spec of ``--phase`` (a phase folder or its phase.yaml), else of the phase a rescore
    output folder among ``inputs`` names (if it is still there), else the defaults."""
    if explicit is not None:
        folder = explicit.parent if explicit.name == phases.PHASE_FILE else explicit
        return from_phase(phases.load(folder))
    for path in inputs:
        board = Path(path) / "leaderboard.json"
        if board.is_file():
            try:
                recorded = Path(json.loads(board.read_text()).get("phase") or "")
            except ValueError as exc:
                raise GraderError(f"{board} is not valid JSON: {exc}") from None
            if (recorded / phases.PHASE_FILE).is_file():
                return from_phase(phases.load(recorded))
    return resolve(None)
