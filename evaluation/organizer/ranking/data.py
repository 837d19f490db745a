"""The assessment data of a final ranking, from the leaderboard's own results.

Inputs are what ``rank`` reads for the leaderboard's uncertainty (``uncertainty.record_files``:
a ``rescore`` output folder with its ranked submissions, submission result folders,
``case_scores.json`` or ``metrics.json`` files). A metric is ``case_score`` (the suite's
per-case ranking score from ``case_scores.json``) or a dotted path into each case's entry of
``metrics.json`` (``classes.*.dice``: ``*`` matches one level, every match one metric). A
case a submission lacks, a null or a missing path is NA, as ``as.challenge`` makes an absent
row; a non-number at a path is an error (the path is wrong).
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

from evaluation import log, sealed
from evaluation.errors import GraderError
from evaluation.organizer.ranking import methods, uncertainty
from evaluation.organizer.ranking.config import CASE_SCORE, Metric, Spec

_log = log.get(__name__)

SEPARATOR = "."
WILDCARD = "*"
POOLED = "|"  # case id of a (case, metric) pair when metrics are pooled as cases


@dataclass(frozen=True)
class Submission:
    name: str
    case_scores: dict  # case_scores.json
    metrics_file: Path | None

    def case_entries(self) -> dict:
        """metrics.json's ``case``: case id -> that case's result."""
        if self.metrics_file is None or not self.metrics_file.is_file():
            raise GraderError(f"{self.name!r}: no metrics.json to read per-case metrics from")
        try:
            cases = json.loads(self.metrics_file.read_text()).get("case")
        except (OSError, ValueError) as exc:
            raise GraderError(f"cannot read {self.metrics_file}: {exc}") from None
        if not isinstance(cases, dict):
            raise GraderError(f"{self.metrics_file} has no per-case results ('case'; publish_cases may be off)")
        return cases


def submissions(inputs: list[Path], private: bool = False) -> list[Submission]:
    """Every submission the inputs name; ``private``: by its private cases (a ``rescore`` of a
    phase with ``private_cases``: the scores and per-case results of ``private-results.json``)."""
    found = []
    for name, path in uncertainty.named_files(inputs, private):
        record = uncertainty.read_record(name, path)
        if private and not record.get("private"):
            raise GraderError(f"no private results for {name!r}: rescore a phase with private_cases")
        record = {**record, **record["private"]} if private else record
        found.append(Submission(name, record, path.parent / (sealed.PRIVATE_RESULTS_FILE if private else "metrics.json")))
    return found


def _number(value, where: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraderError(f"{where} is not a number ({type(value).__name__}); check the metric's key")
    return float(value)


def matches(entry, parts: list[str], prefix: tuple = ()) -> dict[str, object]:
    """Concrete dotted path -> value for every match of ``parts`` in ``entry``."""
    if not parts:
        return {SEPARATOR.join(prefix): entry}
    if not isinstance(entry, dict):
        return {}
    head, rest = parts[0], parts[1:]
    keys = sorted(entry) if head == WILDCARD else [head] if head in entry else []
    found = {}
    for key in keys:
        found.update(matches(entry[key], rest, (*prefix, str(key))))
    return found


def metric_values(metric: Metric, subs: list[Submission]) -> dict[str, tuple[bool, list]]:
    """Concrete metric name -> (higher is better, rows (case, submission, value))."""
    if metric.key == CASE_SCORE:
        directions = {bool(s.case_scores.get("higher_is_better", True)) for s in subs}
        if len(directions) > 1:
            raise GraderError("the submissions' case scores have different directions")
        higher = directions.pop() if metric.higher_is_better is None else metric.higher_is_better
        rows = [
            (case, s.name, _number(v, f"{s.name!r} case {case!r}"))
            for s in subs
            for case, v in s.case_scores["case_scores"].items()
        ]
        return {CASE_SCORE: (higher, rows)}
    parts = metric.key.split(SEPARATOR)
    found: dict[str, list] = {}
    for sub in subs:
        for case, entry in sub.case_entries().items():
            for path, value in matches(entry, parts).items():
                found.setdefault(path, []).append((case, sub.name, _number(value, f"{sub.name!r} case {case!r} {path}")))
    if not found:
        raise GraderError(f"no case of any submission has {metric.key!r}")
    return {path: (metric.higher_is_better, rows) for path, rows in sorted(found.items())}


def tasks(groups: dict[str, list[Path]], spec: Spec, private: bool = False) -> list[methods.Task]:
    """The tasks to rank: per input group (``--task NAME=PATH``, or one unnamed group), one
    task per concrete metric (named ``group/metric``), or with ``combine: cases`` one task whose cases are the
    (case, metric) pairs, values signed so that higher is better."""
    found = []
    for group, inputs in groups.items():
        subs = submissions(inputs, private)
        names = tuple(sorted(s.name for s in subs))
        per_metric = {}
        for metric in spec.metrics:
            per_metric.update(metric_values(metric, subs))
        if spec.combine == "cases" and len(per_metric) > 1:
            found.append(_pooled(group, per_metric, names, spec))
            continue
        for name, (higher, rows) in per_metric.items():
            label = "/".join(part for part in (group, name if len(per_metric) > 1 or not group else "") if part)
            found.append(
                methods.prepare(label, rows, higher, spec.na_treat, algorithms=names, without_values=spec.without_values)
            )
    return common_submissions(found)


def common_submissions(tasks: list[methods.Task]) -> list[methods.Task]:
    """The tasks restricted to the submissions every one of them ranks: with na.rm a
    submission without any value leaves its task (challengeR), and then the challenge."""
    kept = set.intersection(*(set(task.algorithms) for task in tasks)) if tasks else set()
    left = sorted({a for task in tasks for a in task.algorithms} - kept)
    if left:
        _log.warning("submissions_without_values_left_out", submissions=left)
    return [methods.only(task, kept) for task in tasks]


def _pooled(group: str, per_metric: dict, names: tuple, spec: Spec) -> methods.Task:
    """One task whose columns are every (case, metric) pair, values signed so that higher is
    better; the bootstrap resamples whole cases (``Task.units``)."""
    cases = sorted({case for _, rows in per_metric.values() for case, _, _ in rows})
    columns = [(case, metric) for case in cases for metric in per_metric]
    rows = [
        (f"{case}{POOLED}{metric}", sub, value if higher else -value)
        for metric, (higher, metric_rows) in per_metric.items()
        for case, sub, value in metric_rows
    ]
    ids = [f"{case}{POOLED}{metric}" for case, metric in columns]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return methods.prepare(
        group or "pooled",
        rows,
        True,
        spec.na_treat,
        algorithms=names,
        cases=tuple(ids[i] for i in order),
        units=tuple(columns[i][0] for i in order),
        without_values=spec.without_values,
    )
