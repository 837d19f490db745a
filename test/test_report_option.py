"""``report: false`` (an option of every phase): the command line writes metrics.json alone,
whatever the suite, with the same numbers as with the reports; the suites that render a
report do not render it."""

import shutil

import pytest
from helpers.grading import ROOT, run_cli
from test_fisbe_parity import make_phase as fisbe_phase
from test_segmentation_suite import case_folders  # noqa: F401 (a fixture)

MULTICLASS = ROOT / "examples" / "multiclass"
ANNOTATORS = ROOT / "examples" / "annotators"


def without_report(phase, tmp_path, name="phase_off"):
    """A copy of ``phase`` with ``report: false`` added."""
    copy = tmp_path / name
    shutil.copytree(phase, copy)
    (copy / "phase.yaml").write_text((copy / "phase.yaml").read_text() + "\nreport: false\n")
    return copy


def graded_twice(submission, phase, tmp_path):
    """(files with the default, files with report: false, both metrics.json)."""
    on = run_cli(submission, phase, tmp_path / "on")
    off = run_cli(submission, without_report(phase, tmp_path), tmp_path / "off")
    assert on.code == 0 and off.code == 0, (on.stderr[-1500:], off.stderr[-1500:])
    files = lambda run: sorted(p.name for p in run.output.iterdir())  # noqa: E731
    return files(on), files(off), on.metrics, off.metrics


def same_numbers(on: dict, off: dict) -> None:
    assert on["aggregates"] == off["aggregates"] and on.get("case") == off.get("case")


def test_multiclass(tmp_path):
    on, off, a, b = graded_twice(MULTICLASS / "submission", MULTICLASS / "phase", tmp_path)
    assert {"report.txt", "report.html", "summary_baseline.json"} <= set(on) and off == ["metrics.json"]
    same_numbers(a, b)


def test_segmentation(case_folders, tmp_path):  # noqa: F811
    phase, submission, _ = case_folders("classes: [1, 2, 3]\nmetrics: [dice, hd]\ninstance_metrics: [detection]\n")
    on, off, a, b = graded_twice(submission, phase, tmp_path)
    assert {"report.html", "cases.csv", "instances.json"} <= set(on) and off == ["metrics.json"]
    same_numbers(a, b)


@pytest.mark.slow
def test_annotators(tmp_path):
    on, off, a, b = graded_twice(ANNOTATORS / "submission", ANNOTATORS / "phase", tmp_path)
    assert {"plots", "report.html", "summary.csv"} <= set(on) and off == ["metrics.json"]
    same_numbers(a, b)


@pytest.mark.slow
def test_cellmap(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    on, off, a, b = graded_twice(submission, phase, tmp_path)
    assert "results.json" in on and off == ["metrics.json"]
    same_numbers(a, b)


@pytest.mark.slow
def test_fisbe(tmp_path):
    phase, submission = fisbe_phase(tmp_path, "h_perturbed")
    on, off, a, b = graded_twice(submission, phase, tmp_path)
    assert "summary.csv" in on and off == ["metrics.json"]
    same_numbers(a, b)


@pytest.mark.slow
def test_rescore(cellmap_phase, tmp_path):
    """The organizer's rescore writes, per submission, metrics.json and its case scores only."""
    from test_rescore import run_rescore

    from evaluation.organizer import rescore

    phase, submission = cellmap_phase("a_perfect_instance")
    subs = tmp_path / "subs"
    shutil.copytree(submission, subs / "one")
    run_rescore(without_report(phase, tmp_path), subs, tmp_path / "out", "--workers", "1")
    assert sorted(p.name for p in (tmp_path / "out" / "one").iterdir()) == sorted(["metrics.json", rescore.CASE_SCORES_FILE])
