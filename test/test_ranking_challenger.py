"""The ranking methods against challengeR 1.0.5 itself.

``fixtures/ranking/challenger_input.csv`` is comparison data made for this (three challenges:
larger-is-better with three tasks, smaller-is-better with two, forty algorithms in one task;
ties, exact twins, NA, NaN, +-Inf, absent rows); ``challenger_expected.json.gz`` is every value
challengeR 1.0.5 (with R 4.2.2 and relations 0.6-18, x86-64) computed from it: the rankings of
every method, ties rule and p-value adjustment under every ``na.treat``, the consensus, the
raw and adjusted p-values of every ordered pair, bootstraps (with the case ids R drew) and R's
own mean, median, Kendall's tau and p.adjust on their own. Floats are stored as hex, so
"equal" means the same bits.
"""

import csv
import gzip
import json
import warnings
from functools import cache

import numpy as np
import pytest
from helpers.grading import ROOT

from evaluation.errors import GraderError
from evaluation.organizer.ranking import methods, r_numerics, resampling, wilcoxon

FIXTURES = ROOT / "test" / "fixtures" / "ranking"
SMALLER_IS_BETTER = {"large": False, "small": True, "many": False}
KIND = {v: k for k, v in methods.CHALLENGER_NAMES.items()}
# Largest relative difference allowed between a p-value here and R's: both take the same
# statistic and sigma bit for bit; the normal tail is scipy's ndtr here and R's pnorm there
# (measured: 8.8e-15 at most, over p-values down to 1e-12).
P_RELATIVE = 1e-13


@cache
def expected() -> dict:
    with gzip.open(FIXTURES / "challenger_expected.json.gz", "rt") as f:
        return json.load(f)


@cache
def input_rows() -> tuple:
    with open(FIXTURES / "challenger_input.csv") as f:
        return tuple(csv.DictReader(f))


def floats(cells) -> np.ndarray:
    cells = [cells] if isinstance(cells, str) else cells
    return np.array([np.nan if c == "NA" else float.fromhex(c) for c in cells], dtype=np.float64)


def na_treat(name: str):
    return None if name == "none" else "na.rm" if name == "na.rm" else float(name)


def challenge_tasks(challenge: str, treatment: str) -> list[methods.Task]:
    rows = [r for r in input_rows() if r["challenge"] == challenge]
    return [
        methods.prepare(
            name,
            [
                (r["case"], r["algorithm"], None if r["value"] == "NA" else float.fromhex(r["value"]))
                for r in rows
                if r["task"] == name
            ],
            not SMALLER_IS_BETTER[challenge],
            na_treat(treatment),
        )
        for name in sorted({r["task"] for r in rows})
    ]


def method_of(run: dict) -> methods.Method:
    return methods.Method(KIND[run["method"]], run.get("fun") or "mean", run["ties"], 0.05, run.get("p_adjust") or "none")


def by_algorithm(task: methods.Task, names: list[str]) -> list[int]:
    return [task.algorithms.index(a) for a in names]


def assert_bits(actual, wanted):
    actual, wanted = np.asarray(actual, dtype=np.float64), np.asarray(wanted, dtype=np.float64)
    assert actual.shape == wanted.shape
    same = (actual == wanted) | (np.isnan(actual) & np.isnan(wanted))
    assert same.all(), f"{int((~same).sum())} differ, first: {actual[~same][:3]} != {wanted[~same][:3]}"


def run_id(run: dict) -> str:
    return f"{run['challenge']}-{run['na_treat']}-{run['method']}-{run.get('fun') or run.get('p_adjust')}-{run['ties']}"


# --------------------------------------------------------------------------------------------
# R's numerics on their own


def test_mean_and_median_are_rs_to_the_bit():
    cases = expected()["numerics"]["mean"]
    naive_differs = 0
    for case in cases:
        x = floats(case["x"])
        assert_bits(r_numerics.r_mean(x), floats(case["mean"])[0])
        assert_bits(r_numerics.r_median(x), floats(case["median"])[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            naive_differs += not np.array_equal(np.mean(x), floats(case["mean"])[0], equal_nan=True)
    assert naive_differs >= 5  # numpy's pairwise double sum is not R's mean on these vectors
    assert r_numerics.r_mean(np.array([1e16, 1.0, -1e16])) == 0.33365885416666669


def test_masked_mean_equals_the_mean_of_the_kept_values():
    rng = np.random.default_rng(3)
    values = rng.normal(size=(4, 9)) * 10.0 ** rng.integers(-5, 5, size=(4, 9))
    keep = rng.random((4, 9)) < 0.6
    keep[:, 0] = True
    for i in range(4):
        assert r_numerics.r_mean(values[i], keep[i]) == r_numerics.r_mean(values[i][keep[i]])
        assert r_numerics.r_median(values[i], keep[i]) == r_numerics.r_median(values[i][keep[i]])


def test_kendall_tau_and_p_adjust_are_rs_to_the_bit():
    for case in expected()["numerics"]["kendall"]:
        assert_bits(r_numerics.kendall_tau(floats(case["a"]), floats(case["b"])), floats(case["tau"])[0])
    for case in expected()["numerics"]["p_adjust"]:
        for method, wanted in case["adjusted"].items():
            assert_bits(r_numerics.p_adjust(floats(case["p"]), method), floats(wanted))


# --------------------------------------------------------------------------------------------
# Rankings


@pytest.mark.parametrize("run", expected()["runs"], ids=run_id)
def test_ranking_equals_challengers(run):
    tasks = challenge_tasks(run["challenge"], run["na_treat"])
    method = method_of(run)
    if "error" in run:  # challengeR stops: na.treat is missing
        with pytest.raises(GraderError, match="needs na_treat"):
            methods.rank_challenge(tasks, method)
        return
    rankings = methods.rank_challenge(tasks, method)
    for task, ranking in zip(tasks, rankings):
        wanted = run["tasks"][task.name]
        order = by_algorithm(task, wanted["algorithm"])
        assert_bits(ranking.aggregate[order], floats(wanted["value"]))
        assert_bits(ranking.rank[order], floats(wanted["rank"]))
    if "consensus" in run:
        order = by_algorithm(tasks[0], run["consensus"]["algorithm"])
        assert_bits(methods.consensus([r.rank for r in rankings])[order], floats(run["consensus"]["value"]))


@pytest.mark.parametrize("table", expected()["pvalues"], ids=lambda t: f"{t['challenge']}-{t['na_treat']}-{t['task']}")
def test_p_values_and_decisions_equal_challengers(table):
    task = next(t for t in challenge_tasks(table["challenge"], table["na_treat"]) if t.name == table["task"])
    better, worse = by_algorithm(task, table["better"]), by_algorithm(task, table["worse"])
    for adjustment, wanted in table["adjusted"].items():
        raw, adjusted, significant = methods.significance(task, methods.Method("test_then_rank", p_adjust=adjustment))
        for mine, theirs in ((raw[better, worse], floats(table["p"])), (adjusted[better, worse], floats(wanted))):
            np.testing.assert_allclose(mine, theirs, rtol=P_RELATIVE, atol=0)
        theirs = floats(wanted)
        assert not (np.abs(theirs - 0.05) <= P_RELATIVE).any()  # no decision hangs on the tolerance
        assert (significant[better, worse] == (theirs <= 0.05)).all()


@pytest.mark.parametrize("case", expected()["bootstrap"], ids=lambda b: f"{b['challenge']}-{b['na_treat']}-{run_id(b)}")
def test_bootstrap_equals_challengers_given_its_draws(case):
    method = method_of(case)
    for task in challenge_tasks(case["challenge"], case["na_treat"]):
        drawn = np.sort([[task.cases.index(c) for c in row] for row in case["draws"][task.name]], axis=1)
        full = methods.rank_task(task, method)
        result = resampling.bootstrap_task(task, method, drawn, full.rank)
        for mine, theirs in ((result.ranks, case["ranks"][task.name]), (result.aggregates, case["aggregate"][task.name])):
            order = by_algorithm(task, theirs["algorithm"])
            assert_bits(mine[order], np.array([floats(column) for column in theirs["values"]]).T)
        assert_bits(result.kendall, floats(case["kendall"][task.name]))


def test_a_repeated_row_is_refused_and_an_absent_one_is_na():
    with pytest.raises(GraderError, match="more than once"):
        methods.prepare("t", [("c1", "a", 1.0), ("c1", "a", 2.0), ("c1", "b", 0.0)], True)
    task = methods.prepare("t", [("c1", "a", 1.0), ("c2", "a", 2.0), ("c1", "b", 0.0)], True)
    assert np.isnan(task.values[1, 1]) and task.has_na
    assert methods.treat(task, 7.0).values[1, 1] == 7.0
    assert not methods.treat(task, "na.rm").present[1, 1]


def test_the_tests_numpy_equivalent_gives_the_kernels_statistics():
    """metrics.jit falls back to the numpy path without numba: both must give the same bits."""
    for table in expected()["pvalues"]:
        task = next(t for t in challenge_tasks(table["challenge"], table["na_treat"]) if t.name == table["task"])
        first, second = methods.pair_indices(len(task.algorithms))
        compiled = wilcoxon._pair_statistics(task.values, task.present, first, second)
        vectorised = wilcoxon._pair_statistics_numpy(task.values, task.present, first, second)
        for mine, theirs in zip(compiled, vectorised):
            assert np.array_equal(mine, theirs)


# --------------------------------------------------------------------------------------------
# The long table, through the command line


@pytest.mark.parametrize(
    "run",
    [r for r in expected()["runs"] if r["challenge"] == "small" and r["na_treat"] == "na.rm" and "error" not in r][:3],
    ids=run_id,
)
def test_rank_reads_challengers_long_table(run, tmp_path):
    """``rank --table`` on the comparison data as a CSV in as.challenge's layout (NA, Inf and
    hexadecimal floats in its cells), ranked by the recorded run's method: every task's ranks
    are challengeR's."""
    import subprocess
    import sys

    rows = [r for r in input_rows() if r["challenge"] == run["challenge"]]
    with open(tmp_path / "long.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Task", "alg_name", "case", "value"])
        writer.writerows([r["task"], r["algorithm"], r["case"], r["value"]] for r in rows)
    method = {
        "aggregateThenRank": "aggregate_then_rank",
        "rankThenAggregate": "rank_then_aggregate",
        "testThenRank": "test_then_rank",
    }
    spec = {"method": method[run["method"]], "ties": run["ties"], "na_treat": "na.rm", "resamples": 0}
    if run.get("fun"):
        spec["statistic"] = run["fun"]
    if run.get("p_adjust"):
        spec["p_adjust"] = run["p_adjust"]
    (tmp_path / "phase").mkdir()
    (tmp_path / "phase" / "phase.yaml").write_text("suite: cellmap\nfinal_ranking: " + json.dumps(spec) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "rank", "--table", str(tmp_path / "long.csv"), "--smaller-better",
         "--columns", "task=Task,algorithm=alg_name", "--phase", str(tmp_path / "phase"), "--output", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads((tmp_path / "out" / "final_ranking.json").read_text())
    for task in written["tasks"]:
        wanted = run["tasks"][task["name"]]
        mine = {entry["algorithm"]: entry["rank"] for entry in task["ranking"]}
        assert [mine[a] for a in wanted["algorithm"]] == floats(wanted["rank"]).tolist(), task["name"]


@pytest.mark.parametrize("without_values", ["drop", "last"])
def test_a_submission_without_values_leaves_the_ranking_under_na_rm(without_values):
    """With na.treat na.rm, challengeR's as.challenge drops a submission that has no value at
    all and ranks the others as if it had not been there; 'last' keeps it, ranked last."""
    rows = [(f"c{j}", name, value) for j in range(6) for name, value in (("a", 0.9 - 0.1 * j), ("b", 0.5), ("c", 0.7))]
    empty = [(f"c{j}", "z", None) for j in range(6)]
    method = methods.Method("aggregate_then_rank")
    alone = methods.rank_task(methods.prepare("t", rows, True, "na.rm"), method)
    task = methods.prepare("t", rows + empty, True, "na.rm", without_values=without_values)
    ranked = methods.rank_task(task, method)
    if without_values == "drop":
        assert task.algorithms == ("a", "b", "c") and ranked.rank.tolist() == alone.rank.tolist()
    else:
        assert task.algorithms == ("a", "b", "c", "z") and ranked.rank[3] == 4
