"""Ranking uncertainty (bootstrap over cases) on inputs whose answers are known by hand."""

import html
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers.grading import ROOT
from scipy import stats

from evaluation.errors import GraderError
from evaluation.metrics import bootstrap
from evaluation.organizer import ranking


def scores(matrix, names=None, higher_is_better=True, leaderboard=None) -> ranking.Scores:
    matrix = np.asarray(matrix, dtype=np.float64)
    names = names or [f"s{i}" for i in range(matrix.shape[0])]
    board = matrix.mean(axis=1) if leaderboard is None else np.asarray(leaderboard, dtype=np.float64)
    return ranking.Scores(names, [f"c{j}" for j in range(matrix.shape[1])], matrix, board, "score", higher_is_better)


def by_name(result: dict) -> dict:
    return {s["submission"]: s for s in result["submissions"]}


def test_competition_ranks_by_hand():
    values = np.array([[0.5], [0.9], [0.5], [0.1]])
    assert ranking.competition_ranks(values, True)[:, 0].tolist() == [2, 1, 2, 4]
    assert ranking.competition_ranks(values, False)[:, 0].tolist() == [2, 4, 2, 1]


def test_draw_counts_are_seeded_resamples_with_replacement():
    counts = bootstrap.draw_counts(7, 50, seed=3)
    assert counts.shape == (50, 7) and (counts.sum(axis=1) == 7).all()
    assert (counts == bootstrap.draw_counts(7, 50, seed=3)).all() and not (counts == bootstrap.draw_counts(7, 50, seed=4)).all()


def test_resampled_mean_is_the_mean_of_the_drawn_cases():
    matrix = np.array([[1.0, 2.0, 4.0]])
    counts = np.array([[3, 0, 0], [0, 1, 2], [1, 1, 1]])
    assert bootstrap.resampled_means(matrix, counts)[0].tolist() == pytest.approx([1.0, 10 / 3, 7 / 3], rel=1e-15)


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_a_dominating_submission_always_ranks_first(higher_is_better):
    rng = np.random.default_rng(0)
    others = rng.uniform(0.1, 0.9, size=(5, 40))
    best = np.full((1, 40), 1.0 if higher_is_better else 0.0)
    result = ranking.bootstrap(scores(np.vstack([others, best]), higher_is_better=higher_is_better), resamples=500)
    top = by_name(result)["s5"]
    assert top["rank_frequencies"] == {"1": 1.0} and top["rank_ci"] == [1, 1] and top["leaderboard_rank"] == 1
    assert result["submissions"][0]["submission"] == "s5"
    wins = np.array(result["pairwise"]["row_beats_column"])
    assert (wins[0, 1:] == 1.0).all() and (wins[1:, 0] == 0.0).all()


def test_identical_submissions_tie_and_split_their_duels():
    """Ties share the better rank and count half a win (documented in evaluation.ranking)."""
    rng = np.random.default_rng(1)
    twin = rng.uniform(0.6, 1.0, size=30)
    weaker = twin - 0.5
    result = ranking.bootstrap(scores([twin, weaker, twin], names=["a", "low", "b"]), resamples=400)
    subs = by_name(result)
    assert subs["a"]["rank_frequencies"] == subs["b"]["rank_frequencies"] == {"1": 1.0}
    assert subs["low"]["rank_frequencies"] == {"3": 1.0}
    names = result["pairwise"]["submissions"]
    wins = np.array(result["pairwise"]["row_beats_column"])
    assert wins[names.index("a"), names.index("b")] == wins[names.index("b"), names.index("a")] == 0.5


def test_pairwise_shares_are_complementary():
    rng = np.random.default_rng(2)
    result = ranking.bootstrap(scores(rng.uniform(size=(6, 25))), resamples=300)
    wins = np.array(result["pairwise"]["row_beats_column"])
    np.testing.assert_allclose(wins + wins.T, 1.0, rtol=0, atol=1e-12)
    frequencies = [sum(s["rank_frequencies"].values()) for s in result["submissions"]]
    assert frequencies == pytest.approx([1.0] * 6, abs=1e-12)


def test_interval_of_a_binary_case_score_is_the_binomial_one():
    """Case scores 1 (120 cases) and 0 (280 cases): the resampled mean is exactly
    Binomial(400, 0.3) / 400, so the percentile interval is known."""
    matrix = np.array([[1.0] * 120 + [0.0] * 280, [0.5] * 400])
    result = ranking.bootstrap(scores(matrix), resamples=4000, seed=5)
    low, high = by_name(result)["s0"]["case_mean_ci"]
    assert low == pytest.approx(stats.binom.ppf(0.025, 400, 0.3) / 400, abs=0.0051)
    assert high == pytest.approx(stats.binom.ppf(0.975, 400, 0.3) / 400, abs=0.0051)
    assert by_name(result)["s1"]["case_mean_ci"] == [0.5, 0.5]  # constant scores: no uncertainty


def test_two_cases_give_three_possible_means():
    """Cases {0, 1}: means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4; against a constant 0.5
    submission, the first wins 1/4, ties 1/2 (half a win) and loses 1/4: 50 % overall."""
    result = ranking.bootstrap(scores([[0.0, 1.0], [0.5, 0.5]]), resamples=8000, seed=7)
    subs = by_name(result)
    assert subs["s0"]["case_mean_ci"] == [0.0, 1.0]
    assert subs["s0"]["rank_frequencies"]["1"] == pytest.approx(0.75, abs=0.02)  # wins or ties
    assert subs["s1"]["rank_frequencies"]["1"] == pytest.approx(0.75, abs=0.02)
    wins = np.array(result["pairwise"]["row_beats_column"])
    assert wins[0, 1] == pytest.approx(0.5, abs=0.02)


# --------------------------------------------------------------------------------------------
# Files and the command line


def write_rescore_output(folder, matrix, names, statuses=None):
    rows = []
    for i, name in enumerate(names):
        status = (statuses or {}).get(name, "scored")
        record = {
            "ranking": "overall_score",
            "higher_is_better": True,
            "leaderboard": {"overall_score": 0.5},
            "case_scores": {f"crop{j}": v for j, v in enumerate(matrix[i])},
        }
        (folder / name).mkdir(parents=True)
        (folder / name / "case_scores.json").write_text(json.dumps(record))
        rows.append({"rank": 1 if status == "scored" else None, "submission": name, "status": status})
    (folder / "leaderboard.json").write_text(json.dumps({"rows": rows}))


def run_rank(*args):
    return subprocess.run(
        [sys.executable, "-m", "evaluation", "rank", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_rank_command_writes_json_png_and_html(tmp_path):
    matrix = [[0.9, 0.8, 0.95, 0.7], [0.6, 0.7, 0.5, 0.65], [0.6, 0.7, 0.5, 0.65], [0.1, 0.0, 0.2, 0.3]]
    write_rescore_output(tmp_path / "scored", matrix, ["best", "twin1", "twin2", "broken"], {"broken": "failed"})
    done = run_rank(tmp_path / "scored", "--output", tmp_path / "ranking", "--resamples", "200")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "ranking" / "ranking.json").read_text())
    assert [s["submission"] for s in result["submissions"]] == ["best", "twin1", "twin2"]  # unranked left out
    assert result["resamples"] == 200 and result["cases"] == 4
    for png in ("ranking.png", "pairwise.png"):
        assert (tmp_path / "ranking" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "ranking" / "ranking.html").read_text()
    assert '<section id="ranking-uncertainty">' in page and page.count("data:image/png;base64,") == 2 and "twin2" in page
    # the final ranking (schema defaults: mean, aggregate-then-rank), with the uncertainty section embedded
    board = (tmp_path / "ranking" / "leaderboard.csv").read_text().splitlines()
    assert board[0].startswith("rank,group,submission,case_score mean,case_score rank,bootstrap median rank")
    assert [line.split(",")[:3] for line in board[1:]] == [["1", "1", "best"], ["2", "1", "twin1"], ["2", "1", "twin2"]]
    final = (tmp_path / "ranking" / "final_ranking.html").read_text()
    assert '<section id="final-ranking">' in final and '<section id="ranking-uncertainty">' in final
    for figure in ("Podium", "Ranking heat map", "Significance map", "Bootstrap ranks", "Kendall", "other ranking methods"):
        assert f'alt="{figure}' in final or figure in final, figure


def test_inconsistent_or_null_case_scores_are_refused(tmp_path):
    write_rescore_output(tmp_path / "a", [[0.5, None], [0.4, 0.3]], ["x", "y"])
    with pytest.raises(GraderError, match="null"):
        ranking.load([tmp_path / "a"])
    assert ranking.load([tmp_path / "a"], null_as=0.0).matrix.tolist() == [[0.5, 0.0], [0.4, 0.3]]
    (tmp_path / "b").mkdir()
    write_rescore_output(tmp_path / "b" / "one", [[0.5, 0.5, 0.5]], ["z"])
    with pytest.raises(GraderError, match="other cases"):
        ranking.load([tmp_path / "a" / "y", tmp_path / "b" / "one" / "z"])
    # The final ranking takes the missing cases as NA, which its default method refuses, as challengeR does
    done = run_rank(tmp_path / "a" / "y", tmp_path / "b" / "one" / "z", "--output", tmp_path / "out")
    assert done.returncode == 1 and "needs na_treat" in done.stderr.splitlines()[-1]


def test_submission_names_are_plain_text_on_every_figure(tmp_path):
    """A participant's name that is mathtext markup ('$\\frac{1}{$', '^_') is drawn as written:
    no parse error, no markup."""
    names = ["$\\frac{1}{$", "a^b_c", "plain"]
    write_rescore_output(tmp_path / "scored", [[0.9, 0.8, 0.7], [0.5, 0.6, 0.4], [0.1, 0.2, 0.3]], names)
    done = run_rank(tmp_path / "scored", "--output", tmp_path / "ranking", "--resamples", "50")
    assert done.returncode == 0, done.stderr[-2000:]
    assert html.escape("$\\frac{1}{$") in (tmp_path / "ranking" / "final_ranking.html").read_text()
