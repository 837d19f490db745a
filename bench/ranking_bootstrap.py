"""Benchmark: ranking uncertainty for 100 submissions x 500 cases x 1000 bootstrap resamples.

Prints, for seeded synthetic case scores:

- the floor: one pass over the resampled data, i.e. summing 100 x 500 scores 1000 times
  (``np.take`` of each resample's cases + ``sum``), which any bootstrap of case means must do;
- ``evaluation.organizer.ranking.bootstrap`` (draw counts, resampled means, ranks, rank frequencies,
  pairwise matrix, intervals): wall seconds, ratio to the floor;
- writing the report files (JSON, two PNGs, HTML) with ``evaluation.organizer.ranking.uncertainty_report``;
- the peak RSS of the process (its own ``VmHWM``; ``ru_maxrss`` would include whatever
  high-water mark Linux carried over from the process that started it).

    python bench/ranking_bootstrap.py [--submissions 100] [--cases 500] [--resamples 1000]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import peak_rss_mb  # noqa: E402

from evaluation.organizer import ranking  # noqa: E402
from evaluation.organizer.ranking import uncertainty_report as ranking_report  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=100)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    n, m, b = args.submissions, args.cases, args.resamples

    rng = np.random.default_rng(0)
    skill = np.sort(rng.uniform(0.4, 0.9, n))
    matrix = np.clip(skill[:, None] + rng.normal(0, 0.2, (n, m)), 0, 1)
    scores = ranking.Scores(
        [f"team{i:03d}" for i in range(n)], [f"case{j}" for j in range(m)], matrix, matrix.mean(axis=1), "score", True
    )
    print(f"{n} submissions x {m} cases x {b} resamples; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    draws = rng.integers(0, m, size=(b, m))
    started = time.perf_counter()
    for row in draws:
        np.take(matrix, row, axis=1).sum(axis=1)
    floor = time.perf_counter() - started
    print(f"floor: one pass over the resampled data   {floor:7.3f} s")

    started = time.perf_counter()
    result = ranking.bootstrap(scores, resamples=b, seed=0)
    wall = time.perf_counter() - started
    print(
        f"bootstrap (means, ranks, frequencies, pairwise, intervals)   {wall:7.3f} s   {wall / floor:5.2f}x floor   "
        f"peak RSS so far {peak_rss_mb():.0f} MB"
    )
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ranking_report.write(Path(tmp), result)
        print(f"report files (JSON, 2 PNG, HTML)   {time.perf_counter() - started:7.3f} s")
    print(
        f"peak RSS with the plots {peak_rss_mb():.0f} MB   "
        f"(top submission ranked first in {result['submissions'][0]['rank_frequencies'].get('1', 0):.1%} of resamples)"
    )


if __name__ == "__main__":
    main()
