"""Benchmark: the final ranking of 50 submissions x 500 cases, challengeR's methods.

Prints, for seeded synthetic case scores (values rounded to 3 decimals, so cases have ties):

- each method on the full data: aggregate-then-rank (mean), rank-then-aggregate (mean),
  test-then-rank (Holm: 2450 one-sided paired Wilcoxon tests);
- challengeR's bootstrap of each (1000 resamples; ``--test-resamples`` for the test, 100 by
  default), and the floor of a bootstrap of means: one pass over the resampled data
  (``np.take`` of each resample's cases and a double ``sum``), with our ratio to it (ours
  adds in long double, column by column, to give R's bits);
- the whole ``final.rank_tasks`` with the schema's defaults (official method, significance
  and tie groups, the five compared methods, 1000 resamples) and the report files;
- the process's peak RSS (``VmHWM``).

Times are wall and CPU seconds: on a shared machine the CPU time is the comparable figure.

``--write-csv PATH`` writes the same data as (case, algorithm, value) for challengeR, timed on
the same machine with ``as.challenge``, ``aggregateThenRank``, ``rankThenAggregate``,
``testThenRank`` and ``bootstrap`` (bench/README.md has its figures).

    python bench/rank_challenger.py [--submissions 50] [--cases 500] [--resamples 1000] [--test-resamples 100]
"""

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import peak_rss_mb  # noqa: E402

from evaluation.organizer.ranking import config, final, final_report, methods, resampling  # noqa: E402


def data(n: int, m: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    skill = np.sort(rng.uniform(0.4, 0.9, n))
    return np.round(np.clip(skill[:, None] + rng.normal(0, 0.2, (n, m)), 0, 1), 3)


def timed(label: str, function, *args):
    """Wall and CPU seconds (the CPU time is the fair figure on a shared machine)."""
    started, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    seconds = time.perf_counter() - started
    print(f"{label:58s} {seconds:8.2f} s wall {time.process_time() - cpu:8.2f} s CPU", flush=True)
    return result, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=50)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--test-resamples", type=int, default=100)
    parser.add_argument("--write-csv", type=Path, default=None)
    args = parser.parse_args()
    n, m, b = args.submissions, args.cases, args.resamples
    matrix = data(n, m)
    algorithms, cases = [f"team{i:02d}" for i in range(n)], [f"case{j:03d}" for j in range(m)]
    if args.write_csv:
        with open(args.write_csv, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["case", "algorithm", "value"])
            writer.writerows((cases[j], algorithms[i], repr(float(matrix[i, j]))) for i in range(n) for j in range(m))
        print(f"wrote {args.write_csv}")
    print(f"{n} submissions x {m} cases; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rows = [(cases[j], algorithms[i], matrix[i, j]) for i in range(n) for j in range(m)]
    task, _ = timed("prepare (as.challenge)", methods.prepare, "bench", rows, True)
    drawn = resampling.sorted_draws(m, b, 0)

    def one_pass():
        for row in drawn:
            np.take(matrix, row, axis=1).sum(axis=1)

    _, floor = timed("floor: one pass over the resampled data (double sums)", one_pass)

    for method, resamples in (
        (methods.Method("aggregate_then_rank", "mean"), b),
        (methods.Method("rank_then_aggregate", "mean"), b),
        (methods.Method("test_then_rank", p_adjust="holm"), args.test_resamples),
    ):
        full, _ = timed(f"{method.label}", methods.rank_task, task, method)
        _, seconds = timed(
            f"  bootstrap, {resamples} resamples", resampling.bootstrap_task, task, method, drawn[:resamples], full.rank
        )
        if method.kind != "test_then_rank":
            print(f"{'':58s} {seconds / floor:8.1f}x floor")
    spec = config.resolve({"resamples": b})
    result, _ = timed("final ranking, schema defaults (1000 resamples)", final.rank_tasks, [task], spec)
    with tempfile.TemporaryDirectory() as tmp:
        timed("report files (JSON, CSV, 6 PNG, HTML)", final_report.write, Path(tmp), result)
    winner = result.algorithms[result.order[0]]
    print(f"peak RSS {peak_rss_mb():.0f} MB   (winner {winner}, {int((result.groups == 1).sum())} in the first tie group)")


if __name__ == "__main__":
    main()
