"""Rankings of a leaderboard's submissions.

- ``uncertainty``, ``uncertainty_report``: how certain the leaderboard's order is (a bootstrap
  of the case mean);
- the challenge's final ranking as challengeR 1.0.5 computes it: ``r_numerics`` and
  ``wilcoxon`` (R's numerics to the last bit), ``methods`` (its ranking methods and
  consensus), ``resampling`` (its bootstrap), ``config`` (the phase's ``final_ranking``),
  ``data`` (tasks from the leaderboard's results), ``final`` (everything for the report, tie
  groups), ``plots`` and ``final_report`` (the files);
- ``sensitivity``: the final ranking under every metric definition of the segmentation suite.
"""

from evaluation.organizer.ranking.uncertainty import (
    CASE_SCORES_FILE,
    LEADERBOARD_FILE,
    Scores,
    bootstrap,
    competition_ranks,
    load,
    pairwise_wins,
    rank_frequencies,
)

__all__ = [
    "CASE_SCORES_FILE",
    "LEADERBOARD_FILE",
    "Scores",
    "bootstrap",
    "competition_ranks",
    "load",
    "pairwise_wins",
    "rank_frequencies",
]
