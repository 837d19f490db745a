"""The stability of a ranking: challengeR's bootstrap (``bootstrap.ranked.list`` in
``Bootstrap.R``) with its resampling semantics.

Each resample draws every task's cases with replacement (as many as the task has) and applies
the ranking method to the drawn data, case ids kept: a case drawn k times is k rows of that
case, so rank-then-aggregate ranks it as one group of k rows per algorithm and the test uses
it once (see ``methods``). Out come, per task, the aggregates and ranks of every resample,
and Kendall's tau of each resample's ranking against the full one (``kendall.bootstrap.list``
in ``violin.R``: NaN when a resample ranks every algorithm the same).

The draws are the grader's own (``metrics.bootstrap.draw_counts``, seeded: task t of the
list uses seed + t), so a single task resamples exactly like ``rank``'s leaderboard
uncertainty and metrics.json's ``ranking_ci``. Given the same draws, every aggregate, rank and
tau equals challengeR's (the tests replay R's own draws).
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics.bootstrap import draw_counts
from evaluation.organizer.ranking import methods, r_numerics


def sorted_draws(n_cases: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples x cases) drawn case indices, each row sorted (as ``merge`` orders them)."""
    counts = draw_counts(n_cases, resamples, seed)
    return np.repeat(np.tile(np.arange(n_cases), resamples), counts.ravel()).reshape(resamples, n_cases)


def task_draws(task: methods.Task, resamples: int, seed: int) -> np.ndarray:
    """The drawn columns of ``task``: its cases, or with pooled metrics its units (cases),
    each drawn unit standing for all its (case, metric) columns."""
    if task.units is None:
        return sorted_draws(len(task.cases), resamples, seed)
    units = sorted(set(task.units))
    columns = [np.flatnonzero(np.array(task.units) == u) for u in units]
    if len({c.size for c in columns}) > 1:
        raise ValueError("every unit of a pooled task must have the same number of columns")
    drawn_units = sorted_draws(len(units), resamples, seed)
    return np.stack([np.concatenate([columns[u] for u in row]) for row in drawn_units])


@dataclass
class TaskBootstrap:
    """One task's resamples: (algorithms x resamples) aggregates and ranks, and tau per resample."""

    task: str
    algorithms: tuple[str, ...]
    aggregates: np.ndarray
    ranks: np.ndarray
    kendall: np.ndarray

    def summary(self, confidence: float) -> list[dict]:
        """Per algorithm: median and mean rank, the rank interval (R's ``quantile`` type 7,
        as challengeR's blob plots draw it), the share of resamples at each rank and ranked
        first."""
        tail = (1 - confidence) / 2
        low, high = np.quantile(self.ranks, [tail, 1 - tail], axis=1)
        rows = []
        for i, name in enumerate(self.algorithms):
            values, counts = np.unique(self.ranks[i], return_counts=True)
            shares = counts / self.ranks.shape[1]
            rows.append(
                {
                    "algorithm": name,
                    "median_rank": float(np.median(self.ranks[i])),
                    "mean_rank": float(self.ranks[i].mean()),
                    "rank_interval": [float(low[i]), float(high[i])],
                    "rank_frequencies": {f"{v:g}": float(s) for v, s in zip(values, shares)},
                    "ranked_first": float(shares[values == 1].sum()),
                }
            )
        return rows

    def kendall_summary(self) -> dict:
        """challengeR's ``violin`` summary: mean, median and quartiles of tau (NaN left out)."""
        tau = self.kendall[~np.isnan(self.kendall)]
        if not tau.size:
            return {"mean": None, "median": None, "q25": None, "q75": None, "undefined": int(self.kendall.size)}
        q25, median, q75 = np.quantile(tau, [0.25, 0.5, 0.75])
        return {
            "mean": float(tau.mean()),
            "median": float(median),
            "q25": float(q25),
            "q75": float(q75),
            "undefined": int(self.kendall.size - tau.size),
        }


def bootstrap_task(task: methods.Task, method: methods.Method, drawn: np.ndarray, full_rank: np.ndarray) -> TaskBootstrap:
    """The method on every resample of ``drawn`` (resamples x cases, rows sorted)."""
    aggregates, ranks = methods.rank_resamples(task, method, drawn)
    tau = r_numerics.kendall_tau(ranks, full_rank)
    return TaskBootstrap(task.name, task.algorithms, aggregates, ranks, tau)
