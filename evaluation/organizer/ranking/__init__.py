"""Rankings of a leaderboard's submissions: how certain the leaderboard's order is
(``uncertainty``: a bootstrap of the case mean) and the challenge's final ranking as
challengeR computes it (``methods``, ``resampling``, ``final``), with R's numerics to the last
bit (``r_numerics``)."""

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
