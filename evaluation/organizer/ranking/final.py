"""The final ranking: the phase's official method on every task, the consensus across tasks,
significance, tie groups, the other methods for comparison and the bootstrap's stability.

**Tie groups** (beyond challengeR): walking down the final ranking, a submission joins the
group above it unless that group's first submission beats it significantly (the one-sided
paired Wilcoxon test of ``methods.significance`` with the phase's alpha and adjustment, on
what the method aggregates per case: the values for aggregate-then-rank, each case's ranks for
rank-then-aggregate; test-then-rank's own decisions); equal ranks always share a group. A
group is thus a run of submissions none of which its leader is shown to beat: the places a
leaderboard can defend. With several tasks the groups are per task (the consensus has no
per-case statistic to test).
"""

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from evaluation import __version__
from evaluation.errors import GraderError
from evaluation.organizer.ranking import methods, r_numerics, resampling
from evaluation.organizer.ranking.config import Spec, method_dict


@dataclass
class TaskResult:
    task: methods.Task
    official: methods.TaskRanking
    case_ranks: np.ndarray  # (algorithms x cases) each case's ranks, ties "min" (heat map, podium)
    p_values: np.ndarray | None
    adjusted: np.ndarray | None
    significant: np.ndarray | None
    groups: np.ndarray | None
    compared: dict[str, np.ndarray | str]  # method label -> ranks, or why it could not rank
    bootstrap: resampling.TaskBootstrap | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class FinalRanking:
    spec: Spec
    results: list[TaskResult]
    algorithms: tuple[str, ...]
    consensus: np.ndarray | None
    rank: np.ndarray  # the final rank of every algorithm
    groups: np.ndarray | None  # tie groups of the final ranking (one task only)

    @property
    def order(self) -> list[int]:
        return sorted(range(len(self.algorithms)), key=lambda i: (self.rank[i], self.algorithms[i]))


def tie_groups(rank: np.ndarray, significant: np.ndarray, names) -> np.ndarray:
    """Group number (1 = top) of every algorithm (see the module docstring)."""
    order = sorted(range(len(rank)), key=lambda i: (rank[i], names[i]))
    groups = np.zeros(len(rank), dtype=int)
    group, leader = 1, order[0]
    groups[leader] = 1
    for previous, current in zip(order, order[1:]):
        if rank[current] != rank[previous] and significant[leader, current]:
            group, leader = group + 1, current
        groups[current] = group
    return groups


def _tested(result: methods.TaskRanking, task: methods.Task, spec: Spec) -> tuple:
    """(p-values, adjusted, significance) of the statistic the method aggregates per case."""
    if result.significant is not None:
        return result.p_values, result.adjusted, result.significant
    test = methods.Method("test_then_rank", alpha=spec.method.alpha, p_adjust=spec.method.p_adjust)
    if spec.method.kind == "rank_then_aggregate":
        ranks = r_numerics.ranks(task.values, task.present, spec.method.ties, task.higher_is_better)
        task = dataclasses.replace(task, values=ranks, higher_is_better=False)
        if task.units is not None:  # pooled metrics: a case's mean rank over its metrics
            task = per_unit_mean(task)
    return methods.significance(task, test)


def per_unit_mean(task: methods.Task) -> methods.Task:
    """The task with each unit's columns replaced by their mean (over the present ones)."""
    units = sorted(set(task.units))
    member = np.array([units.index(u) for u in task.units])
    values = np.stack(
        [r_numerics.r_mean(task.values[:, member == u], task.present[:, member == u]) for u in range(len(units))], axis=1
    )
    present = np.stack([task.present[:, member == u].any(axis=1) for u in range(len(units))], axis=1)
    return dataclasses.replace(task, cases=tuple(units), values=values, present=present, units=None)


def _compare(task: methods.Task, spec: Spec) -> dict:
    found = {}
    for method in spec.compare:
        try:
            found[method.label] = methods.rank_task(task, method).rank
        except GraderError as exc:
            found[method.label] = str(exc)
    return found


def rank_tasks(tasks: list[methods.Task], spec: Spec) -> FinalRanking:
    """Everything the report shows, for the phase's spec."""
    if not tasks:
        raise GraderError("nothing to rank")
    algorithms = tasks[0].algorithms
    if any(t.algorithms != algorithms for t in tasks):
        raise GraderError("every task must have the same submissions to be ranked together")
    official = methods.rank_challenge(tasks, spec.method)
    results = []
    for index, (task, ranking) in enumerate(zip(tasks, official)):
        try:
            p_values, adjusted, significant = _tested(ranking, task, spec)
            groups, notes = tie_groups(ranking.rank, significant, algorithms), []
        except GraderError as exc:
            p_values = adjusted = significant = groups = None
            notes = [f"no significance test: {exc}"]
        case_ranks = r_numerics.ranks(task.values, task.present, "min", task.higher_is_better)
        result = TaskResult(task, ranking, case_ranks, p_values, adjusted, significant, groups, _compare(task, spec), notes=notes)
        if spec.resamples and len(task.cases) > 1:
            drawn = resampling.task_draws(task, spec.resamples, spec.seed + index)
            result.bootstrap = resampling.bootstrap_task(task, spec.method, drawn, ranking.rank)
        results.append(result)
    if len(tasks) == 1:
        return FinalRanking(spec, results, algorithms, None, official[0].rank, results[0].groups)
    agreed = methods.consensus([r.rank for r in official])
    final = r_numerics.rank_vector(agreed, "min", higher_is_better=False)
    return FinalRanking(spec, results, algorithms, agreed, final, None)


def _matrix(values: np.ndarray | None) -> list | None:
    return None if values is None else [[None if np.isnan(v) else float(v) for v in row] for row in values]


def to_dict(final: FinalRanking) -> dict:
    """The JSON document (``final_ranking.json``)."""
    tasks = []
    for result in final.results:
        task, official = result.task, result.official
        order = sorted(range(len(task.algorithms)), key=lambda i: (official.rank[i], task.algorithms[i]))
        entry = {
            "name": task.name,
            "higher_is_better": task.higher_is_better,
            "cases": len(task.cases),
            "missing": int((np.isnan(task.values) & task.present).sum() + (~task.present).sum()),
            "ranking": [
                {
                    "algorithm": task.algorithms[i],
                    "aggregate": float(official.aggregate[i]),
                    "rank": float(official.rank[i]),
                    "group": None if result.groups is None else int(result.groups[i]),
                }
                for i in order
            ],
            "significance": None
            if result.significant is None
            else {
                "algorithms": list(task.algorithms),
                "p_values": _matrix(result.p_values),
                "adjusted": _matrix(result.adjusted),
                "row_beats_column": result.significant.astype(int).tolist(),
            },
            "methods": {
                label: ranks if isinstance(ranks, str) else dict(zip(task.algorithms, map(float, ranks)))
                for label, ranks in result.compared.items()
            },
            "notes": result.notes,
        }
        if result.bootstrap is not None:
            entry["bootstrap"] = {
                "resamples": int(result.bootstrap.ranks.shape[1]),
                "algorithms": result.bootstrap.summary(final.spec.confidence),
                "kendall_tau": result.bootstrap.kendall_summary(),
            }
        tasks.append(entry)
    return {
        "grader": {"name": "evaluation", "version": __version__},
        "reproduces": "challengeR 1.0.5 (wiesenfa/challengeR@beb3b67)",
        "spec": final.spec.to_dict(),
        "official_method": method_dict(final.spec.method),
        "tasks": tasks,
        "consensus": None
        if final.consensus is None
        else {"method": "euclidean", **{final.algorithms[i]: float(final.consensus[i]) for i in final.order}},
        "final": [
            {
                "rank": float(final.rank[i]),
                "group": None if final.groups is None else int(final.groups[i]),
                "algorithm": final.algorithms[i],
            }
            for i in final.order
        ],
    }
