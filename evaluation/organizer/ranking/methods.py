"""challengeR's ranking methods on one task, and its consensus across tasks.

A task is challengeR's assessment data after ``as.challenge`` (``challengeR.R``): one value
per (algorithm, case); an absent row is NA; ``na.treat`` a number replaces NA (and NaN, which
R's ``is.na`` counts as NA), "na.rm" removes those rows, None keeps them as NA; ``Inf`` is a
value. The methods (``rankingMethods.R``):

- ``aggregate_then_rank``: the mean or median of each algorithm's values, ranked
  (``Aggregate.list`` in ``Aggregate.R``, ``rank.aggregated.list``);
- ``rank_then_aggregate``: each case's algorithms ranked, the ranks' mean or median, ranked
  again, smaller first (``Rank.list`` in ``Rank.R``, ``rank.aggregatedRanks.list``);
- ``test_then_rank``: for every ordered pair the one-sided paired Wilcoxon signed-rank test
  on the cases both have, p-values adjusted over all ordered pairs of the task, significant
  at p <= alpha; an algorithm scores the share of the others it beats, which is ranked
  (``Decision`` and ``significance`` in ``testBased.R``).

All of them rank with ``rankNA2`` (NA last). Aggregate- and test-based methods refuse NA
values (challengeR stops: ``na.treat`` is missing); rank-then-aggregate ranks them last.

A **resample** is what challengeR's ``bootstrap.ranked.list`` (``Bootstrap.R``)
hands the method: the drawn cases, sorted by case (``merge`` sorts), each as often as drawn.
Rank-then-aggregate ranks a case drawn k times as one group of k rows per algorithm; the test
uses every drawn case once (``Decision`` matches the first row of each case).
"""

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from evaluation.errors import GraderError
from evaluation.organizer.ranking import r_numerics as rn
from evaluation.organizer.ranking import wilcoxon

METHODS = ("aggregate_then_rank", "rank_then_aggregate", "test_then_rank")
STATISTICS = ("mean", "median")
CHALLENGER_NAMES = {
    "aggregate_then_rank": "aggregateThenRank",
    "rank_then_aggregate": "rankThenAggregate",
    "test_then_rank": "testThenRank",
}


@dataclass(frozen=True)
class Task:
    """One task's data: ``values[i, j]`` = algorithm i on case j (NaN = NA), ``present`` the
    rows that exist (False only where "na.rm" removed an NA). Cases are sorted by id.
    ``units`` (pooled metrics only): the case each column belongs to, which the bootstrap
    resamples as a whole (a column is a (case, metric) pair there)."""

    name: str
    algorithms: tuple[str, ...]
    cases: tuple[str, ...]
    values: np.ndarray
    present: np.ndarray
    higher_is_better: bool
    na_treat: float | str | None = None
    units: tuple[str, ...] | None = None

    @property
    def has_na(self) -> bool:
        return bool((self.present & np.isnan(self.values)).any())


def prepare(
    name: str,
    rows,
    higher_is_better: bool,
    na_treat: float | str | None = None,
    algorithms=None,
    cases=None,
    units=None,
    without_values: str = "drop",
) -> Task:
    """A task from (case, algorithm, value) rows, as ``as.challenge`` checks and completes
    them: a repeated (algorithm, case) is an error, an absent one is NA, then ``na_treat``."""
    rows = list(rows)
    algorithms = tuple(sorted({a for _, a, _ in rows})) if algorithms is None else tuple(algorithms)
    cases = tuple(sorted({c for c, _, _ in rows})) if cases is None else tuple(cases)
    column = {c: j for j, c in enumerate(cases)}
    row = {a: i for i, a in enumerate(algorithms)}
    values = np.full((len(algorithms), len(cases)), np.nan)
    seen = np.zeros(values.shape, dtype=bool)
    for case, algorithm, value in rows:
        i, j = row[algorithm], column[case]
        if seen[i, j]:
            raise GraderError(f"task {name!r}: case {case!r} appears more than once for {algorithm!r}")
        seen[i, j] = True
        values[i, j] = np.nan if value is None else float(value)
    task = Task(name, algorithms, cases, values, np.ones(values.shape, dtype=bool), higher_is_better, units=units)
    return treat(task, na_treat, without_values)


def treat(task: Task, na_treat: float | str | None, without_values: str = "drop") -> Task:
    """``na.treat``: a number replaces NA and NaN, "na.rm" removes those rows, None keeps them.
    With "na.rm", a submission left with no value at all is dropped from the task, as
    ``as.challenge`` drops its rows (``without_values="last"`` keeps it, ranked last)."""
    missing = np.isnan(task.values)
    if na_treat is None:
        values, present = task.values, task.present
    elif na_treat == "na.rm":
        values, present = task.values, task.present & ~missing
    elif isinstance(na_treat, (int, float)) and not isinstance(na_treat, bool):
        values, present = np.where(missing, float(na_treat), task.values), task.present
    else:
        raise GraderError(f"na_treat must be a number, 'na.rm' or null, not {na_treat!r}")
    task = dataclasses.replace(task, values=values, present=present, na_treat=na_treat)
    if na_treat == "na.rm" and without_values == "drop":
        return only(task, [a for a, row in zip(task.algorithms, present) if row.any()])
    return task


def only(task: Task, algorithms) -> Task:
    """The task restricted to ``algorithms`` (in the task's order)."""
    kept = [i for i, a in enumerate(task.algorithms) if a in set(algorithms)]
    return dataclasses.replace(
        task, algorithms=tuple(task.algorithms[i] for i in kept), values=task.values[kept], present=task.present[kept]
    )


@dataclass(frozen=True)
class Method:
    """One ranking scheme: ``kind`` (``METHODS``), the aggregate ``statistic``, the ``ties``
    rule, and for the test the significance level and the p-value adjustment."""

    kind: str
    statistic: str = "mean"
    ties: str = "min"
    alpha: float = 0.05
    p_adjust: str = "holm"

    def __post_init__(self):
        if self.kind not in METHODS:
            raise GraderError(f"ranking method must be one of {METHODS}, not {self.kind!r}")
        if self.statistic not in STATISTICS or self.ties not in rn.TIES or self.p_adjust not in rn.P_ADJUST:
            raise GraderError(f"invalid ranking method {self}")

    @property
    def label(self) -> str:
        """A short name, as challengeR's methods plot labels them (``methodsplot.R``)."""
        if self.kind == "test_then_rank":
            return f"testBased ({self.p_adjust}, alpha {self.alpha:g})"
        name = f"{self.statistic}ThenRank" if self.kind == "aggregate_then_rank" else f"rankThen{self.statistic.title()}"
        return name if self.ties == "min" else f"{name} (ties {self.ties})"


@dataclass
class TaskRanking:
    """A method's result on a task: per algorithm the aggregate (the value, the rank
    statistic or the share of algorithms beaten) and the rank; for the test also the
    adjusted p-values and the significance matrix (``significant[i, j]``: i beats j)."""

    task: str
    method: Method
    algorithms: tuple[str, ...]
    aggregate: np.ndarray
    rank: np.ndarray
    p_values: np.ndarray | None = None
    adjusted: np.ndarray | None = None
    significant: np.ndarray | None = field(default=None, repr=False)


# --------------------------------------------------------------------------------------------
# Resamples


def multiplicity(drawn: np.ndarray, n_cases: int) -> np.ndarray:
    """For every drawn position (resamples x n), how often its case was drawn in that resample."""
    offsets = np.arange(drawn.shape[0])[:, None] * n_cases
    counts = np.bincount((drawn + offsets).ravel(), minlength=drawn.shape[0] * n_cases)
    return counts[drawn + offsets]


def _refuse_na(task: Task, method: Method) -> None:
    if method.kind != "rank_then_aggregate" and task.has_na:
        raise GraderError(
            f"task {task.name!r} has missing values: {method.kind} needs na_treat (a number or 'na.rm'), "
            "as challengeR does; rank_then_aggregate ranks them last"
        )


def aggregate(task: Task, method: Method, drawn: np.ndarray) -> np.ndarray:
    """(algorithms x resamples) aggregate over the drawn cases ``drawn`` (resamples x n, each
    row sorted): R's mean or median of the values, or of each case's ranks."""
    if method.kind == "aggregate_then_rank":
        values, present = task.values[:, drawn], task.present[:, drawn]
    else:
        values, present = _resampled_case_ranks(task, method.ties, drawn)
    reduce = rn.r_mean if method.statistic == "mean" else rn.r_median
    return reduce(values, present)


def _resampled_case_ranks(task: Task, ties: str, drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each drawn row's rank within its case, a case drawn k times being one group of k rows
    per algorithm: (algorithms x resamples x n) ranks and presence. The counts behind a rank
    are the case's, so they are found once and only scaled by k."""
    better, equal, missing = rn.better_and_equal(task.values, task.present, task.higher_is_better)
    valid = task.present & ~np.isnan(task.values)
    present = task.present[:, drawn]
    k = multiplicity(drawn, len(task.cases))
    case_ranks = rn.ranks_of_counts(better[:, drawn], equal[:, drawn], missing[drawn], valid[:, drawn], present, ties, k)
    return case_ranks, present


def rank_aggregates(aggregates: np.ndarray, method: Method, higher_is_better: bool) -> np.ndarray:
    """``rankNA2`` of each column of aggregates: values in the task's direction, rank
    statistics smaller first, shares of algorithms beaten larger first."""
    higher = {"aggregate_then_rank": higher_is_better, "rank_then_aggregate": False, "test_then_rank": True}[method.kind]
    return rn.ranks(aggregates, np.ones(aggregates.shape, dtype=bool), method.ties, higher)


# --------------------------------------------------------------------------------------------
# The test


def pair_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, k=1)


def significance(task: Task, method: Method, cases: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(raw p-values, adjusted p-values, significance) as (algorithms x algorithms) matrices
    (row beats column; NaN on the diagonal) over the given distinct cases (all by default).

    p-values of both directions of a pair come from one ranking of |differences|; the
    adjustment runs over all ordered pairs of the task, as ``Decision`` passes them to
    ``p.adjust``; the methods used here do not depend on the pairs' order."""
    values = task.values if cases is None else task.values[:, cases]
    present = task.present if cases is None else task.present[:, cases]
    n = len(task.algorithms)
    first, second = pair_indices(n)
    try:
        z, z_negated, sigma = wilcoxon.pair_z(values, present, first, second)
    except wilcoxon.NoCommonCases as exc:
        a, b = task.algorithms[first[exc.pair]], task.algorithms[second[exc.pair]]
        raise GraderError(
            f"task {task.name!r}: {a!r} and {b!r} share no case with a defined difference; cannot test them"
        ) from None
    greater = task.higher_is_better
    raw = np.full((n, n), np.nan)
    raw[first, second] = wilcoxon.one_sided_p(z, sigma, greater)
    raw[second, first] = wilcoxon.one_sided_p(z_negated, sigma, greater)
    off = ~np.eye(n, dtype=bool)
    adjusted = np.full((n, n), np.nan)
    adjusted[off] = rn.p_adjust(raw[off], method.p_adjust)
    significant = np.zeros((n, n), dtype=bool)
    significant[off] = adjusted[off] <= method.alpha
    return raw, adjusted, significant


def share_beaten(significant: np.ndarray) -> np.ndarray:
    """``prop_significance``: the share of the other algorithms each one beats."""
    return significant.sum(axis=1) / (significant.shape[0] - 1)


# --------------------------------------------------------------------------------------------
# One task, one method


def rank_task(task: Task, method: Method) -> TaskRanking:
    """The method on the whole task."""
    _refuse_na(task, method)
    if len(task.algorithms) < 2:
        raise GraderError(f"task {task.name!r} has fewer than two algorithms to rank")
    if method.kind == "test_then_rank":
        raw, adjusted, significant = significance(task, method)
        shares = share_beaten(significant)
        rank = rank_aggregates(shares[:, None], method, task.higher_is_better)[:, 0]
        return TaskRanking(task.name, method, task.algorithms, shares, rank, raw, adjusted, significant)
    every = np.arange(len(task.cases))[None, :]
    aggregates = aggregate(task, method, every)
    rank = rank_aggregates(aggregates, method, task.higher_is_better)
    return TaskRanking(task.name, method, task.algorithms, aggregates[:, 0], rank[:, 0])


def rank_resamples(task: Task, method: Method, drawn: np.ndarray, block: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(aggregates, ranks), each (algorithms x resamples), of the method on every resample
    (``drawn``: resamples x cases, each row the drawn case indices in sorted order)."""
    _refuse_na(task, method)
    if method.kind == "test_then_rank":
        columns = [share_beaten(significance(task, method, np.unique(row))[2])[:, None] for row in drawn]
    else:
        columns = [aggregate(task, method, drawn[start : start + block]) for start in range(0, drawn.shape[0], block)]
    aggregates = np.concatenate(columns, axis=1)
    return aggregates, rank_aggregates(aggregates, method, task.higher_is_better)


# --------------------------------------------------------------------------------------------
# Consensus across tasks


def consensus(rank_vectors: list[np.ndarray]) -> np.ndarray:
    """challengeR's ``consensus(method = "euclidean")`` (``consensus.R``, the ``relations``
    package's Euclidean consensus and ``relation_scores``): the mean over tasks of each
    algorithm's rank, ties averaged, in R's arithmetic (incidences ``r_i <= r_j`` weighted
    by 1/T and summed in long double, then (n + 1 + column sums - row sums) / 2)."""
    ranks = np.asarray(rank_vectors, dtype=np.float64)
    tasks, n = ranks.shape
    counts = (ranks[:, :, None] <= ranks[:, None, :]).sum(axis=0)
    weight = np.float64(1.0) / tasks
    incidence = (counts.astype(rn.LONG) * rn.LONG(weight)).astype(np.float64)
    column_sums = rn.r_sum(incidence.T)
    row_sums = rn.r_sum(incidence)
    return (n + 1 + column_sums - row_sums) / 2


def rank_challenge(tasks: list[Task], method: Method) -> list[TaskRanking]:
    """The method on every task. Like challengeR, aggregate- and test-based methods refuse
    the whole challenge when any task has NA values without ``na_treat``."""
    for task in tasks:
        _refuse_na(task, method)
    return [rank_task(task, method) for task in tasks]
