"""Parity with the official FISBe evaluation (Kainmueller-Lab/evaluate-instance-segmentation
@cc34f4d, FlyLight preset) on all 18 conformance cases, through the public command line.

Counts must be equal, floats within 1e-9 relative, and every value the reference computes in
float32 must be the same float32. Where the reference crashes (``f_empty_pred``) the natural
values are required instead (docs/suites/fisbe.md, "Where the reference crashes")."""

import csv
import io
import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers.grading import FIXTURES, differences, run_cli, validate_metrics

KIT = FIXTURES / "fisbe"
EXPECTED = json.loads((KIT / "expected.json").read_text())
CASES = EXPECTED["cases"]
COUNTS = (
    "Num GT",
    "Num Pred",
    "TP_05",
    "FM",
    "FS",
    "GT_dim",
    "TP_05_dim",
    "GT_overlap",
    "TP_05_overlap",
    "AP_TP",
    "AP_FP",
    "AP_FN",
    "false_split",
    "false_merge",
)


def make_phase(tmp_path, case: str, partly: list[str] | None = None):
    """The conformance tool's layout: the case's gt/ folder is the phase, pred/ the input."""
    phase, submission = tmp_path / "phase", tmp_path / "input"
    shutil.copytree(KIT / "cases" / case / "gt", phase)
    shutil.copytree(KIT / "cases" / case / "pred", submission)
    if partly is None:
        partly = [s for s, v in CASES[case]["samples"].items() if v["partly"]]
    (phase / "phase.yaml").write_text("suite: fisbe\n" + (f"partly: [{', '.join(partly)}]\n" if partly else ""))
    return phase, submission


def float32_mismatches(got: dict, expected: dict, dtypes: dict) -> list[str]:
    """Keys the reference computes in float32 must be the very same float32 values."""
    found = []
    for dotted, kind in dtypes.items():
        if kind not in ("float32", "list[float32]"):
            continue
        g, e = got, expected
        for part in dotted.split("."):
            g, e = g[part], e[part]
        g, e = np.atleast_1d(np.asarray(g, np.float64)), np.atleast_1d(np.asarray(e, np.float64))
        if g.shape != e.shape or not np.array_equal(g.astype(np.float32), e.astype(np.float32)):
            found.append(f"{dotted}: {g.tolist()} vs {e.tolist()}")
    return found


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Every case scored once through the CLI (two at a time): case -> (run, metrics)."""

    def score(case):
        folder = tmp_path_factory.mktemp(case)
        phase, submission = make_phase(folder, case)
        run = run_cli(submission, phase, folder / "out", "--workers", "1")
        return case, (run, run.metrics if run.code == 0 else None)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(score, sorted(CASES)))


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "f_empty_pred"))
def test_samples_match_reference(case, scored):
    run, metrics = scored[case]
    assert run.code == 0, run.stderr[-2000:]
    validate_metrics(metrics)
    for sample, expected in CASES[case]["samples"].items():
        got = {k: metrics["case"][sample][k] for k in ("general", "confusion_matrix")}
        assert differences(got, expected["metrics"], f"{case}/{sample}", COUNTS) == []
        assert float32_mismatches(got, expected["metrics"], expected["dtypes"]) == []
        assert metrics["case"][sample]["partly"] is expected["partly"]


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "f_empty_pred"))
def test_aggregates_match_reference(case, scored):
    _, metrics = scored[case]
    aggregates = metrics["aggregates"]
    for kind, expected in CASES[case]["aggregate"].items():
        got = aggregates if kind == "combined" else aggregates[kind]
        reference = dict(expected["dict"])
        for key in ("tp", "fp", "fn"):
            if key in reference:
                assert got["per_threshold"][key] == reference.pop(key)
        mine = {k: got[k] for k in reference}
        assert differences(mine, reference, f"{case}/{kind}", COUNTS) == []
        assert float32_mismatches(mine, reference, expected["dtypes"]) == []
        head = expected["headline"]
        for column in ("S", "avF1", "C", "clDiceTP", "tp", "FS", "FM"):
            assert differences(got[column], head[column], f"{case}/{kind}/{column}") == []


def test_leaderboard_is_the_combined_score(scored):
    _, metrics = scored["g2_mixed_partly"]
    head = CASES["g2_mixed_partly"]["aggregate"]["combined"]["headline"]
    assert metrics["aggregates"]["S"] == head["S"]
    assert metrics["aggregates"]["complete"]["S"] == CASES["g2_mixed_partly"]["aggregate"]["complete"]["S"]
    assert metrics["aggregates"]["partly"]["S"] == CASES["g2_mixed_partly"]["aggregate"]["partly"]["S"]


@pytest.mark.parametrize("case", sorted(EXPECTED["cli_check"]))
def test_summary_csv_matches_reference_text(case, scored):
    """The reference CLI's summary CSVs, cell for cell as text (rows, mean, sum, avg_inst)."""
    run, _ = scored[case]
    for name, rows in EXPECTED["cli_check"][case]["csv"].items():
        table = list(csv.reader(io.StringIO((run.output / name).read_text()), delimiter=";"))
        header, body = table[0], {row[0]: dict(zip(table[0][1:], row[1:])) for row in table[1:]}
        assert header[0] == "sample" and list(body) == list(rows)
        for row, cells in rows.items():
            assert body[row] == cells, (name, row)


def test_empty_prediction_with_overlapping_truth_gives_natural_values(scored):
    """The reference crashes here (``compute.get_gt_coverage_overlap`` takes the max of an
    empty matrix); the natural values are required: no match, zeros."""
    run, metrics = scored["f_empty_pred"]
    assert run.code == 0, run.stderr[-2000:]
    general = metrics["case"]["s0"]["general"]
    assert general == {
        "Num GT": 3,
        "Num Pred": 0,
        "TP_05": 0,
        "TP_05_rel": 0.0,
        "TP_05_cldice": [],
        "avg_TP_05_cldice": 0.0,
        "gt_skel_coverage": [0.0, 0.0, 0.0],
        "avg_gt_skel_coverage": 0.0,
        "avg_f1_cov_score": 0.0,
        "FM": 0,
        "FS": 0,
        "GT_dim": 1,
        "TP_05_dim": 0,
        "TP_05_rel_dim": 0.0,
        "gt_covs_dim": [],
        "avg_gt_cov_dim": 0,
        "GT_overlap": 2,
        "TP_05_overlap": 0,
        "TP_05_rel_overlap": 0.0,
        "gt_covs_overlap": [0.0, 0.0],
        "avg_gt_cov_overlap": 0.0,
    }
    confusion = metrics["case"]["s0"]["confusion_matrix"]
    for name, table in confusion.items():
        if name.startswith("th_"):
            assert table == {"AP_TP": 0, "AP_FP": 0, "AP_FN": 3, "precision": 0.0, "recall": 0.0, "AP": 0.0, "fscore": 0.0}
        else:
            assert table == 0.0
    aggregates = metrics["aggregates"]
    assert {k: aggregates[k] for k in ("S", "avF1", "C", "clDiceTP", "tp", "FS", "FM")} == {
        "S": 0.0,
        "avF1": 0.0,
        "C": 0.0,
        "clDiceTP": 0.0,
        "tp": 0.0,
        "FS": 0,
        "FM": 0,
    }
    assert aggregates["per_threshold"] == {
        "threshold": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "tp": [0] * 9,
        "fp": [0] * 9,
        "fn": [3] * 9,
    }
    assert {
        k: aggregates["general"][k]
        for k in (
            "GT_dim",
            "TP_05_dim",
            "TP_05_rel_dim",
            "avg_gt_cov_dim",
            "GT_overlap",
            "TP_05_overlap",
            "TP_05_rel_overlap",
            "avg_gt_cov_overlap",
        )
    } == {
        "GT_dim": 1,
        "TP_05_dim": 0,
        "TP_05_rel_dim": 0.0,
        "avg_gt_cov_dim": 0.0,
        "GT_overlap": 2,
        "TP_05_overlap": 0,
        "TP_05_rel_overlap": 0.0,
        "avg_gt_cov_overlap": 0.0,
    }


def test_partly_flag_changes_the_score(tmp_path):
    """e_partly scored as complete is e_partly_as_complete: the phase's list decides."""
    phase, submission = make_phase(tmp_path, "e_partly", partly=[])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    expected = CASES["e_partly_as_complete"]["samples"]["s0"]["metrics"]
    got = {k: run.metrics["case"]["s0"][k] for k in ("general", "confusion_matrix")}
    assert differences(got, expected, "e_partly as complete", COUNTS) == []
