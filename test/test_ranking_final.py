"""The final ranking around challengeR's methods: the phase option, the data it reads, pooled
metrics, tie groups, consensus, the bootstrap's draws and the report, on inputs whose answers
are known by hand (the methods themselves are compared with challengeR in
test_ranking_challenger.py)."""

import dataclasses
import json

import numpy as np
import pytest

from evaluation import schemas
from evaluation.errors import GraderError, PhaseError
from evaluation.metrics.bootstrap import draw_counts
from evaluation.organizer.ranking import config, data, final, final_report, methods, resampling


def task(matrix, higher_is_better=True, name="t", na_treat=None) -> methods.Task:
    matrix = np.asarray(matrix, dtype=np.float64)
    rows = [(f"c{j}", f"s{i}", matrix[i, j]) for i in range(matrix.shape[0]) for j in range(matrix.shape[1])]
    return methods.prepare(name, rows, higher_is_better, na_treat)


def spec(**option) -> config.Spec:
    problems = schemas.errors("phase", {"suite": "cellmap", "final_ranking": option})
    assert not problems, problems
    return config.resolve(option)


# --------------------------------------------------------------------------------------------
# The phase option


def test_defaults_come_from_the_schema():
    default = config.resolve(None)
    assert default.metrics == (config.Metric("case_score", None),) and default.combine == "consensus"
    assert default.method == methods.Method("aggregate_then_rank", "mean", "min", 0.05, "holm")
    assert default.na_treat is None and (default.resamples, default.seed, default.confidence) == (1000, 0, 0.95)
    assert [m.label for m in default.compare] == [
        "testBased (none, alpha 0.05)",
        "meanThenRank",
        "medianThenRank",
        "rankThenMean",
        "rankThenMedian",
    ]
    assert default.sensitivity == {
        "definitions": ["panoptica", "metricsreloaded", "monai", "deepmind"],
        "empty_masks": ["definition", "nan"],
    }


def test_a_metric_without_direction_or_an_unrankable_pooling_is_refused():
    with pytest.raises(PhaseError, match="higher_is_better"):
        config.resolve({"metrics": [{"key": "classes.*.dice"}]})
    two = [{"key": "a", "higher_is_better": True}, {"key": "b", "higher_is_better": False}]
    with pytest.raises(PhaseError, match="rank_then_aggregate"):
        config.resolve({"metrics": two, "combine": "cases"})
    assert spec(metrics=two, combine="cases", method="rank_then_aggregate").combine == "cases"
    assert schemas.errors("phase", {"suite": "cellmap", "final_ranking": {"na_treat": "zero"}})


# --------------------------------------------------------------------------------------------
# Data


def write_results(folder, per_submission: dict):
    """A rescore output folder: per submission its case scores and per-case metrics."""
    rows = []
    for name, cases in per_submission.items():
        (folder / name).mkdir(parents=True)
        scores = {case: entry.get("score") for case, entry in cases.items()}
        record = {"suite": "x", "ranking": "score", "higher_is_better": True, "case_scores": scores}
        (folder / name / "case_scores.json").write_text(json.dumps(record))
        (folder / name / "metrics.json").write_text(json.dumps({"case": cases}))
        rows.append({"rank": 1, "submission": name, "status": "scored"})
    (folder / "leaderboard.json").write_text(json.dumps({"rows": rows}))


def test_paths_with_wildcards_become_metrics_and_gaps_become_na(tmp_path):
    write_results(
        tmp_path,
        {
            "a": {"c1": {"score": 0.9, "classes": {"liver": {"dice": 0.9, "hd95": 2.0}, "tumour": {"dice": 0.5, "hd95": None}}}},
            "b": {
                "c1": {"score": 0.7, "classes": {"liver": {"dice": 0.8, "hd95": 3.0}, "tumour": {"dice": 0.6}}},
                "c2": {"score": 0.1, "status": "failed"},
                "c3": {"score": 0.2, "classes": {"liver": {"dice": 0.3}}},
            },
        },
    )
    found = data.tasks(
        {"": [tmp_path]},
        spec(metrics=[{"key": "classes.*.dice", "higher_is_better": True}, {"key": "classes.*.hd95", "higher_is_better": False}]),
    )
    assert [t.name for t in found] == ["classes.liver.dice", "classes.tumour.dice", "classes.liver.hd95", "classes.tumour.hd95"]
    liver_dice, _, liver_hd, tumour_hd = found
    # c2 failed for b and a does not have it: not a case of the metric; a has no c3: NA
    assert liver_dice.cases == ("c1", "c3") and liver_dice.algorithms == ("a", "b")
    assert np.array_equal(liver_dice.values, [[0.9, np.nan], [0.8, 0.3]], equal_nan=True)
    assert not liver_hd.higher_is_better and np.isnan(tumour_hd.values[0, 0]) and np.isnan(tumour_hd.values[1, 0])
    scores = data.tasks({"": [tmp_path]}, spec())[0]
    assert scores.name == "case_score" and np.array_equal(scores.values, [[0.9, np.nan, np.nan], [0.7, 0.1, 0.2]], equal_nan=True)
    with pytest.raises(GraderError, match="not a number"):
        data.tasks({"": [tmp_path]}, spec(metrics=[{"key": "classes.liver", "higher_is_better": True}]))
    with pytest.raises(GraderError, match="no case of any submission"):
        data.tasks({"": [tmp_path]}, spec(metrics=[{"key": "classes.*.nsd", "higher_is_better": True}]))


def test_tasks_of_several_rescore_outputs_and_the_phase_they_recorded(tmp_path):
    from evaluation.organizer.commands import _task_groups, parse_args

    for task_name, scores in (("liver", (0.9, 0.8)), ("kidney", (0.7, 0.95))):
        write_results(tmp_path / task_name, {name: {"c1": {"score": v}} for name, v in zip("ab", scores)})
    args = parse_args(
        ["rank", "--task", f"liver={tmp_path / 'liver'}", "--task", f"kidney={tmp_path / 'kidney'}", "--output", "o"]
    )
    groups = _task_groups(args)
    assert list(groups) == ["liver", "kidney"]
    found = data.tasks(groups, spec(resamples=0))
    assert [t.name for t in found] == ["liver", "kidney"]
    assert final.rank_tasks(found, spec(resamples=0)).consensus.tolist() == [1.5, 1.5]
    with pytest.raises(GraderError, match="NAME=PATH"):
        _task_groups(parse_args(["rank", "--task", "liver", "--output", "o"]))
    phase = tmp_path / "phase"
    phase.mkdir()
    (phase / "phase.yaml").write_text("suite: cellmap\nfinal_ranking: {method: test_then_rank, p_adjust: BY}\n")
    board = json.loads((tmp_path / "liver" / "leaderboard.json").read_text())
    (tmp_path / "liver" / "leaderboard.json").write_text(json.dumps({**board, "phase": str(phase)}))
    assert config.find_phase(None, [tmp_path / "liver"]).method.p_adjust == "BY"
    assert config.find_phase(phase / "phase.yaml", []).method.kind == "test_then_rank"
    assert config.find_phase(None, [tmp_path / "kidney"]).source == "schema defaults"


def test_pooled_metrics_rank_every_case_and_metric_as_brats_does(tmp_path):
    """Two cases x (dice up, hd95 down): per (case, metric) ranks, then their mean.
    a: dice ranks 1, 2; hd ranks 2, 1 -> 1.5.   b: 2, 1; 1, 2 -> 1.5.   c: 3, 3; 3, 3 -> 3."""
    write_results(
        tmp_path,
        {
            "a": {"c1": {"dice": 0.9, "hd": 5.0}, "c2": {"dice": 0.7, "hd": 1.0}},
            "b": {"c1": {"dice": 0.8, "hd": 4.0}, "c2": {"dice": 0.8, "hd": 2.0}},
            "c": {"c1": {"dice": 0.1, "hd": 9.0}, "c2": {"dice": 0.2, "hd": 9.0}},
        },
    )
    option = spec(
        metrics=[{"key": "dice", "higher_is_better": True}, {"key": "hd", "higher_is_better": False}],
        combine="cases",
        method="rank_then_aggregate",
        resamples=0,
    )
    (pooled,) = data.tasks({"": [tmp_path]}, option)
    assert len(pooled.cases) == 4 and pooled.higher_is_better
    result = final.rank_tasks([pooled], option)
    assert result.results[0].official.aggregate.tolist() == [1.5, 1.5, 3.0]
    assert result.rank.tolist() == [1.0, 1.0, 3.0]
    # the bootstrap draws whole cases: a case's two metrics together
    units = np.array(pooled.units)[resampling.task_draws(pooled, 20, 0)]
    assert units.shape == (20, 4) and (units[:, ::2] == units[:, 1::2]).all()
    assert final.rank_tasks([pooled], dataclasses.replace(option, resamples=20)).results[0].bootstrap.ranks.shape == (3, 20)
    # tie groups test each case's mean over its metrics: a's c1 is (0.9 + -5.0) / 2
    means = final.per_unit_mean(pooled)
    assert means.cases == ("c1", "c2") and means.values[0].tolist() == pytest.approx([-2.05, -0.15], rel=1e-15)


# --------------------------------------------------------------------------------------------
# Tie groups, consensus, bootstrap


def test_tie_groups_follow_the_leaders_significant_wins():
    """Leader s0 beats s2..s4 but not s1: {s0, s1}; the next leader s2 beats s4 but not s3:
    {s2, s3}; then {s4}. An equal rank stays in the group even when beaten."""
    rank = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    significant = np.zeros((5, 5), dtype=bool)
    significant[0, 2:] = True
    significant[2, 4] = True
    names = [f"s{i}" for i in range(5)]
    assert final.tie_groups(rank, significant, names).tolist() == [1, 1, 2, 2, 3]
    assert final.tie_groups(
        np.array([1.0, 1.0, 3.0]), np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]], dtype=bool), names[:3]
    ).tolist() == [1, 1, 2]


def test_a_clear_winner_is_alone_in_the_first_group_and_groups_read_in_the_csv():
    rng = np.random.default_rng(4)
    others = rng.uniform(0.3, 0.5, size=(3, 40))
    matrix = np.vstack([others, others[0] + 0.4])  # s3 beats everybody on every case
    result = final.rank_tasks([task(matrix)], spec(resamples=50))
    assert result.algorithms[result.order[0]] == "s3" and result.groups[3] == 1 and (result.groups[:3] > 1).all()
    lines = final_report.leaderboard_csv(result).splitlines()
    assert lines[1].startswith("1,1,s3,")


def test_consensus_is_the_mean_rank_over_tasks_and_orders_the_final_ranking():
    first = task([[3.0, 3.0], [2.0, 2.0], [1.0, 1.0]], name="first")  # ranks 1, 2, 3
    second = task([[1.0, 1.0], [3.0, 3.0], [2.0, 2.0]], name="second")  # ranks 3, 1, 2
    result = final.rank_tasks([first, second], spec(resamples=0))
    assert result.consensus.tolist() == [2.0, 1.5, 2.5] and result.rank.tolist() == [2.0, 1.0, 3.0]
    assert result.groups is None and all(r.groups is not None for r in result.results)
    with pytest.raises(GraderError, match="same submissions"):
        final.rank_tasks([first, task([[1.0], [2.0]], name="other")], spec(resamples=0))


def test_bootstrap_draws_are_seeded_and_shared_with_the_leaderboard_interval():
    drawn = resampling.sorted_draws(7, 30, seed=3)
    counts = draw_counts(7, 30, seed=3)
    assert all(np.array_equal(np.repeat(np.arange(7), counts[b]), drawn[b]) for b in range(30))
    rng = np.random.default_rng(5)
    matrix = rng.uniform(size=(5, 12))
    one = final.rank_tasks([task(matrix)], spec(resamples=40, seed=1)).results[0].bootstrap
    again = final.rank_tasks([task(matrix)], spec(resamples=40, seed=1)).results[0].bootstrap
    other = final.rank_tasks([task(matrix)], spec(resamples=40, seed=2)).results[0].bootstrap
    assert np.array_equal(one.ranks, again.ranks) and not np.array_equal(one.ranks, other.ranks)
    summary = one.summary(0.95)
    assert all(abs(sum(s["rank_frequencies"].values()) - 1) < 1e-12 for s in summary)


def test_missing_values_without_na_treat_still_rank_by_rank_then_aggregate():
    matrix = [[0.9, np.nan, 0.8], [0.5, 0.6, 0.4], [0.1, 0.2, np.nan]]
    with pytest.raises(GraderError, match="needs na_treat"):
        final.rank_tasks([task(matrix)], spec(resamples=0))
    result = final.rank_tasks([task(matrix)], spec(method="rank_then_aggregate", resamples=10))
    # s0: ranks 1, 3 (NA last), 1 -> 5/3; s1: 2, 1, 2 -> 5/3; s2: 3, 2, 3 (NA last: 2 + 1) -> 8/3
    assert result.results[0].official.aggregate.tolist() == pytest.approx([5 / 3, 5 / 3, 8 / 3], rel=1e-15)
    assert result.rank.tolist() == [1.0, 1.0, 3.0]
    compared = result.results[0].compared
    assert isinstance(compared["meanThenRank"], str) and "na_treat" in compared["meanThenRank"]


def test_the_report_has_every_figure(tmp_path):
    rng = np.random.default_rng(6)
    tasks = [task(rng.uniform(size=(4, 10)) + np.arange(4)[:, None] * 0.1, name=name) for name in ("T1", "T2")]
    result = final.rank_tasks(tasks, spec(resamples=20))
    written = {p.name for p in final_report.write(tmp_path, result)}
    for name in ("T1", "T2"):
        assert {
            f"podium_{name}.png",
            f"rank_heatmap_{name}.png",
            f"significance_{name}.png",
            f"bootstrap_blobs_{name}.png",
        } <= written
    assert {
        "kendall_violin.png",
        "methods.png",
        "tasks.png",
        "task_blobs.png",
        "final_ranking.json",
        "leaderboard.csv",
    } <= written
    page = (tmp_path / "final_ranking.html").read_text()
    assert page.count("data:image/png;base64,") == len([n for n in written if n.endswith(".png")])
    document = json.loads((tmp_path / "final_ranking.json").read_text())
    ranks = [row["rank"] for row in document["final"]]
    assert len(ranks) == 4 and ranks == sorted(ranks) and set(document["consensus"]) == {"method", "s0", "s1", "s2", "s3"}
    assert document["tasks"][0]["bootstrap"]["resamples"] == 20
